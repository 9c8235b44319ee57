"""``atc probe T [RUN OPTIONS] [--out DIR] [--no-llm] [--max-calls N] [--allow-unsafe [--scope NAME=VALUE]...
[--allow-bulk TOOL]...] [--read-only PATTERN]... [--writes-op PATTERN]... [--dry-run] [--executor local|ray]
[--json]``.

Black-box probing: call the API's read-only tools, learn their response schemas, record working
examples and which tool feeds which. Progress goes to stderr, one line per tool as it is decided
(nothing with ``--json``, where stdout holds only the report). Every unsafe call is said on stderr
before it is sent, with ``--json`` too. ``--dry-run`` sends nothing and prints the plan. Exit 0
when at least one tool was documented (or the plan was printed), 1 when none was, 2 for bad
input, 130 on Ctrl-C (after writing what was learnt, and with ``--json`` still printing the
report of it). ``--executor`` probes the tools as tasks, one per group of tools that share no
chain of probing (``probes.spread``), in threads or on Ray.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from atc.cli.common import add_run_options, print_json, stop_on_signals, toolset_from_args
from atc.errors import UsageError

__all__ = ["register"]


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "probe", parents=parents, help="document an API's tools by calling them (black-box probing)",
        description="Call the tools of T (GET/HEAD only unless --allow-unsafe) to learn what they return: "
        "response schemas, working examples, and which tool's output feeds which tool's input. "
        "Uses the model when one is configured (OPENAI_BASE_URL/OPENAI_API_KEY and ATC_MODEL), else "
        "probes without one.")
    p.add_argument("tools", metavar="T", nargs="+", help="a spec file or the name of an imported collection")
    add_run_options(p, tools_flag=False, max_calls=False, writes=False)
    p.add_argument("--out", metavar="DIR", help="write openapi.json, probe.md and report.json here")
    p.add_argument("--no-llm", action="store_true", help="probe without a model even when one is configured")
    p.add_argument("--max-calls", type=int, default=None, metavar="N",
                   help="requests in all (default: --per-tool times the number of tools)")
    p.add_argument("--per-tool", type=int, default=5, metavar="N", help="requests per tool at most (5)")
    p.add_argument("--samples", type=int, default=3, metavar="N",
                   help="successful responses merged per tool at most; model samples per tool and round (3)")
    p.add_argument("--rounds", type=int, default=4, metavar="N", help="chain-of-probing iterations, beta (4)")
    p.add_argument("--allow-unsafe", action="store_true",
                   help="also call tools that may change data (POST, PUT, PATCH, DELETE, MCP tools not annotated "
                   "readOnlyHint), only under --scope, in the order of the write plan (see --dry-run)")
    p.add_argument("--scope", action="append", default=[], metavar="NAME=VALUE",
                   help="pin a parameter for unsafe calls: they write only under it (repeatable; e.g. "
                   "--scope bucket_id=throwaway, --scope path=/tmp/scratch)")
    p.add_argument("--allow-bulk", action="append", default=[], metavar="TOOL",
                   help="also send this bulk delete (one that names no single object, e.g. DELETE /accounts); repeatable")
    p.add_argument("--read-only", action="append", default=[], metavar="PATTERN",
                   help="treat the matching tools (a name glob, or 'METHOD /path') as reads for this probe: a POST "
                   "that only searches or filters is then probed like a GET, without --allow-unsafe (repeatable)")
    p.add_argument("--writes-op", action="append", default=[], metavar="PATTERN",
                   help="treat the matching tools as writes: never probed as reads, even when their names look like "
                   "a read (repeatable)")
    p.add_argument("--dry-run", action="store_true",
                   help="send nothing: print the plan (the reads, then every unsafe call in order, and why the others "
                   "are never sent)")
    p.add_argument("--request-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="the longest one request may take (10)")
    p.add_argument("--update", action="store_true", help="write the learnt schemas and examples into the store")
    p.add_argument("--no-cache", action="store_true", help="neither reuse nor record responses in ATC_HOME")
    p.add_argument("--refresh", action="store_true", help="ignore recorded responses (and record anew)")
    p.add_argument("--model", "-m", help="model name (default: $ATC_MODEL)")
    p.add_argument("--executor", metavar="local|ray", default=None,
                   help="probe the tools as tasks, one per group of tools that depend on each other: local threads "
                   "or a Ray cluster (RAY_ADDRESS, else one on this machine)")
    p.add_argument("--concurrency", "-c", type=int, default=None, metavar="N",
                   help="tasks at a time with --executor (4)")
    p.set_defaults(handler=_handle)


class _Progress:
    """One stderr line per tool as it is decided."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0

    def __call__(self, event: str, state: Any) -> None:
        if event == "unsafe":
            sys.stderr.write(f"atc probe: {state.notice}\n")
            sys.stderr.flush()
            return
        if event not in ("documented", "failed", "skipped"):
            return
        self.done += 1
        if event == "documented":
            deps = f" <- {', '.join(state.depends_on)}" if state.depends_on else ""
            detail = f"round {state.round}{deps}"
        else:
            detail = " ".join(str(state.reason or "").split())[:260]
        sys.stderr.write(f"[{self.done}/{self.total}] {event:<10} {state.name}  {detail}\n")
        sys.stderr.flush()


def _unsafe_only(event: str, state: Any) -> None:
    """With ``--json``: no progress lines, but every unsafe call is still said first (on stderr)."""
    if event == "unsafe":
        sys.stderr.write(f"atc probe: {state.notice}\n")
        sys.stderr.flush()


def _plan(report: Any) -> str:
    """``--dry-run`` without ``--json``: the plan, for a person."""
    reads = [t.name for t in report.tools if (t.reason or "").startswith("dry run: a read;")]
    by_post = [t for t in report.tools if (t.reason or "").startswith("dry run: a read by POST")]
    lines = ["dry run: nothing was sent to the API."]
    lines.append(f"reads, probed first (GET/HEAD, MCP tools annotated readOnlyHint): {len(reads)}"
                 + (f" ({', '.join(reads[:12])}{', ...' if len(reads) > 12 else ''})" if reads else ""))
    if by_post:
        lines.append(f"reads by POST, probed as reads, each with the evidence that it reads: {len(by_post)}")
        lines += [f"  {t.name}: {(t.reason or '')[len('dry run: a read by POST: '):]}" for t in by_post]
    steps = report.writes
    scope = ", ".join(f"{k}={v}" for k, v in report.scope.items()) or "none"
    if steps:
        lines.append(f"unsafe calls, in this order (scope: {scope}):")
        lines += [f"  {w['says']}" for w in steps]
    never = [t for t in report.tools if (t.reason or "").startswith("dry run: never sent")]
    if never:
        lines.append("never sent:")
        lines += [f"  {t.name} ({t.method} {t.path}): {t.reason[len('dry run: never sent: '):]}" for t in never]
    skipped = [t for t in report.tools if t.reason and not t.reason.startswith("dry run")]
    if skipped:
        lines.append("not probed (pass --allow-unsafe to plan them):")
        lines += [f"  {t.name} ({t.method} {t.path}): {t.reason}" for t in skipped]
    return "\n".join(lines) + "\n"


def _summary(report: Any) -> str:
    documented = report.count("documented")
    per = f" ({report.calls / documented:.2f} per documented tool)" if documented else ""
    cached = f", {report.cached} answers reused from the cache" if report.cached else ""
    line = (f"documented {documented} of {len(report.tools)} tools with {report.calls} requests{per}{cached}; "
            f"{report.count('failed')} failed, {report.count('skipped')} skipped\n")
    if report.note:
        line += f"  note: {report.note}\n"
    if report.stopped and report.stopped not in (report.note or ""):
        line += f"  stopped: {report.stopped}\n"
    if report.writes:
        done = sum(1 for w in report.writes if w["status"] == "done")
        line += f"  unsafe calls: {done} of {len(report.writes)} planned were sent and worked\n"
    for hop in report.outside_scope[:5]:
        where = f"redirect {hop['hop']} to " if hop["hop"] else ""
        line += f"  not sent (outside the scope): {hop['tool']} {hop['method']} {where}{hop['url']}: {hop['reason']}\n"
    if len(report.outside_scope) > 5:
        line += f"  ... and {len(report.outside_scope) - 5} more not sent (outside the scope): see the JSON report\n"
    for kind, path in report.outputs.items():
        line += f"  {kind}: {path}\n"
    # The last line says plainly whether the probe left anything behind on the API.
    if report.left_behind:
        line += (f"LEFT BEHIND on the API: {len(report.left_behind)} thing{'s' if len(report.left_behind) != 1 else ''}"
                 " this probe made and did not delete:\n")
        line += "".join(f"  - {x}\n" for x in report.left_behind)
    elif any(w["status"] in ("done", "failed") for w in report.writes):
        line += "nothing left behind: everything this probe created was deleted again\n"
    return line


def _recorded(args: argparse.Namespace, toolset: Any) -> tuple[Any, Any, bool]:
    """``--record``/``--replay``: the toolset tapped, and the model client recorded or replayed
    (None: no model, or the one probe picks itself)."""
    from atc.cli.common import recording_from_args
    from atc.errors import ConfigError

    recording = recording_from_args(args)
    if recording is None:
        return toolset, None, False
    client = None
    if not args.no_llm:
        if recording.mode == "replay":
            client = recording.wrap_client(None, args.model) if len(recording.model) else None
        else:
            try:
                client = recording.wrap_client(None, args.model)
            except ConfigError:
                client = None  # no model configured: probe without one, as it would anyway
    return recording.wrap_toolset(toolset), client, recording.mode == "replay" and client is None


def _handle(args: argparse.Namespace) -> int:
    from probes.probing import probe
    from probes.results.report import ProbeInterrupted, ProbeSettings

    if args.max_calls is not None and args.max_calls < 0:
        raise UsageError("--max-calls must be 0 or more")
    if args.executor is None and args.concurrency is not None:
        raise UsageError("--concurrency needs --executor", hint="add --executor local (threads) or --executor ray")
    if args.executor is not None and args.record:
        raise UsageError("--record cannot be used with --executor: every task would write the same file",
                         hint="record without --executor; --replay works with it")
    settings = ProbeSettings(
        max_calls=args.max_calls, per_tool=args.per_tool, samples=args.samples, rounds=args.rounds,
        allow_unsafe=args.allow_unsafe, use_llm=not args.no_llm, request_timeout=args.request_timeout,
        timeout=args.timeout, memory_mb=args.memory, cache=not args.no_cache, refresh=args.refresh,
        scope=tuple(args.scope), allow_bulk=tuple(args.allow_bulk), dry_run=args.dry_run,
        read_only=tuple(args.read_only), writes_op=tuple(args.writes_op))
    if args.dry_run and args.executor is not None:
        raise UsageError("--dry-run sends nothing: it needs no --executor")
    progress: Any = _unsafe_only if args.json else _Progress(0)
    try:
        toolset = toolset_from_args(args)
        if isinstance(progress, _Progress):
            progress.total = len(toolset.tools)
            if args.dry_run:
                progress = None
        if args.executor is not None:
            return _spread(args, settings, toolset, progress)
        toolset, client, offline = _recorded(args, toolset)
        if offline:  # a replay without recorded model answers: the model is not asked
            import dataclasses

            settings = dataclasses.replace(settings, use_llm=False)
        report = probe(toolset, settings=settings, model=args.model, client=client, sandbox=args.sandbox,
                       out=args.out, update=args.update, on_event=progress)
    except ProbeInterrupted as stop:
        report = stop.report
        if args.json:
            print_json(report.to_dict())
        else:
            sys.stderr.write("atc: interrupted; " + _summary(report))
        return 130
    return _finish(args, report)


def _finish(args: argparse.Namespace, report: Any) -> int:
    if args.json:
        print_json(report.to_dict())
    elif report.dry_run:
        sys.stderr.write(_plan(report))
    else:
        sys.stderr.write(_summary(report))
    return 0 if report.ok or report.dry_run else 1


def _spread(args: argparse.Namespace, settings: Any, toolset: Any, progress: Any) -> int:
    """``--executor``: the groups as tasks; a line per tool as each group's report comes back.
    The first Ctrl-C starts no new group; ``ProbeInterrupted`` is handled by the caller."""
    from probes.spread import probe_spread

    def done(index: int, report: Any) -> None:
        if not isinstance(progress, _Progress):
            return
        for tool in report.tools:
            progress(tool.status, tool)

    stop = threading.Event()
    with stop_on_signals(stop, "\natc: stopping: no new group of tools; waiting for the running ones "
                         "(Ctrl-C again to stop waiting)\n"):
        report = probe_spread(toolset, settings=settings, model=args.model, sandbox=args.sandbox, out=args.out,
                              update=args.update, executor=args.executor,
                              concurrency=4 if args.concurrency is None else args.concurrency, replay=args.replay,
                              on_result=done, stop=stop)
    return _finish(args, report)
