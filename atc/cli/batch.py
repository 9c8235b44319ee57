"""``atc batch INPUT.jsonl --tools T [RUN OPTIONS] [--out OUT.jsonl] [--concurrency N] [--json]``.

Many tasks, one JSON object a line: ``{"id", "query"}`` is solved, ``{"id", "program"}`` is run.
Each finished task's result line (``id`` plus the fields of ``solve --json`` or ``run --json``) is
appended to OUT at once and fsynced; a re-run with the same OUT skips the ids already there. A
bad input line (each reported with its number) stops the batch before anything runs (exit 2).

Output: OUT gets the result lines (default: stdout). The summary (solved, failed, tokens, API
calls, wall time) goes to stderr, or with ``--json`` and a file OUT it is the one JSON document on
stdout. A progress bar is drawn on stderr when it is a terminal. Ctrl-C (or SIGTERM) stops taking
new tasks and lets the running ones finish and be written; a second Ctrl-C stops waiting. Exit 0:
every task solved or ran; 1: some failed; 2: bad input; 130: interrupted (run it again to resume).
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any, TextIO

from atc.cli.common import (
    add_answer_option,
    add_budget_options,
    add_run_options,
    answer_from_args,
    budget_from_args,
    limits_from_args,
    print_json,
    stop_on_signals,
    strategy_from_args,
    toolset_from_args,
)
from atc.errors import UsageError

__all__ = ["register"]


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "batch", parents=parents, help="many tasks from a JSON Lines file; resumable results",
        description='Solve or run many tasks, one JSON object a line: {"id": ..., "query": "..."} is solved, '
        '{"id": ..., "program": "..."} is run. One result line per task is appended to OUT as it finishes; '
        "a re-run with the same OUT skips the ids already there.")
    p.add_argument("input", metavar="INPUT.jsonl", help="the tasks ('-' reads stdin)")
    add_run_options(p)
    p.add_argument("--strategy", "-s", metavar="NAME", default=None,
                   help="how the model solves each query task: chain (default), chain-plain, react, codeact, dfsdt, "
                        "or an installed plug-in")
    add_budget_options(p)
    add_answer_option(p)
    p.add_argument("--out", "-o", metavar="OUT.jsonl", default=None,
                   help="append result lines here (resumable: ids already in it are skipped); default: stdout")
    p.add_argument("--concurrency", "-c", type=int, default=4, metavar="N", help="tasks at a time (4)")
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="where tasks run: local threads (default) or a Ray cluster (RAY_ADDRESS, else a local one)")
    p.add_argument("--model", "-m", help="model name (default: $ATC_MODEL)")
    p.add_argument("--max-reflections", type=int, default=3, metavar="N", help="repairs after the first attempt (3)")
    p.add_argument("--top-k", type=int, default=None, metavar="K",
                   help="tools shown to the model when the collections hold more (20)")
    p.set_defaults(handler=_handle)


class _Progress:
    """A one-line bar on stderr (a terminal only): done/total, solved, failed."""

    def __init__(self, stream: TextIO, total: int, skipped: int) -> None:
        self.stream, self.total, self.done = stream, total, skipped
        self.ok = self.failed = 0
        self._lock = threading.Lock()

    def __call__(self, index: int, outcome: Any) -> None:
        with self._lock:
            self.done += 1
            if outcome.ok:
                self.ok += 1
            else:
                self.failed += 1
            width = 30
            filled = int(width * self.done / max(1, self.total))
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}  "
                              f"ok {self.ok}  failed {self.failed} ")
            self.stream.flush()

    def end(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


def _human(summary: Any) -> str:
    usage = summary.to_dict()["usage"]
    skipped = f", {summary.skipped} already done" if summary.skipped else ""
    not_run = f", {summary.not_run} not run" if summary.not_run else ""
    replay = f"; {summary.unrecorded} request(s) not in the recording" if summary.unrecorded else ""
    text = (f"batch: {summary.solved} ok, {summary.failed} failed of {summary.tasks} tasks{skipped}{not_run}; "
            f"{usage['llm_calls']} model calls ({usage['prompt_tokens']} prompt + {usage['completion_tokens']} "
            f"completion tokens), {summary.api_calls} API calls, {summary.wall_ms / 1000:.1f} s{replay}\n")
    if summary.writes:
        order = ("done", "failed", "unknown", "replayed", "refused")
        counted = ", ".join(f"{summary.writes[k]} {k}" for k in order if summary.writes.get(k))
        text += f"atc: writes: {counted}" + (f" (ledger: {summary.ledger})" if summary.ledger else "") + "\n"
        if summary.writes.get("unknown"):
            text += (f"atc: {summary.writes['unknown']} write(s) have an UNKNOWN outcome: they were sent and no answer "
                     "came; see the tasks' \"writes\" in the results, and check the API before running them again\n")
    return text


def _handle(args: argparse.Namespace) -> int:
    from atc.config import ray_address
    from atc.workflows.batch import run_batch
    from atc.workflows.jobs import Job
    from atc.workflows.outfile import ResultLog
    from atc.workflows.tasks import read_tasks

    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if args.max_reflections < 0:
        raise UsageError("--max-reflections must be 0 or more")
    if args.record and args.replay:
        raise UsageError("give --record or --replay, not both")
    limits = limits_from_args(args)
    options: dict[str, Any] = {**budget_from_args(args), "answer": answer_from_args(args)}
    options["strategy"] = strategy_from_args(args)  # resolved once: an unknown name is said before anything runs
    tasks = read_tasks(args.input)
    toolset = toolset_from_args(args)
    from atc.approval import terminal_approver

    job = Job(toolset, limits, sandbox=args.sandbox, model=args.model, max_reflections=args.max_reflections,
              top_k=args.top_k, record=args.record, replay=args.replay,
              solve_options={k: v for k, v in options.items() if v is not None}, writes=args.writes,
              ledger=args.ledger, approve=terminal_approver() if args.writes == "ask" else None)
    log = ResultLog(args.out) if args.out else ResultLog(stream=sys.stdout)
    if log.repaired:
        sys.stderr.write(f"atc: {log.repaired}\n")
    todo = sum(1 for t in tasks if t.key not in log.done)
    progress = _Progress(sys.stderr, len(tasks), len(tasks) - todo) if sys.stderr.isatty() and todo else None
    stop = threading.Event()
    try:
        with stop_on_signals(stop, "\natc: stopping: no new tasks; waiting for the running ones to finish and be "
                             "written (Ctrl-C again to stop waiting)\n"):
            summary = run_batch(tasks, job, log=log, concurrency=args.concurrency, executor=args.executor,
                                on_outcome=progress, stop=stop, ray_address=ray_address())
    finally:
        log.close()
        if progress is not None:
            progress.end()
    doc = summary.to_dict()
    if args.json and args.out:
        print_json(doc)
    elif args.json:
        sys.stderr.write(_json_line(doc))
    else:
        sys.stderr.write(_human(summary))
    if summary.interrupted:
        where = f"written to {args.out}" if args.out else "printed"
        sys.stderr.write(f"atc: interrupted: {summary.skipped + summary.ran} of {summary.tasks} tasks done ({where}); "
                         f"{summary.not_run} not run: run the same command again to resume\n")
        return 130
    return 0 if summary.ok else 1


def _json_line(doc: Any) -> str:
    import json

    return json.dumps(doc, ensure_ascii=False) + "\n"
