"""One collection probed as many tasks, in threads or on a Ray cluster (``atc probe --executor``).

The tools are split into groups that share no link of the chain of probing (``probes.groups``);
each group is probed as one task -- ``probe`` of the collection narrowed to the group's tools, in
a worker thread or a Ray worker process with its own sandbox backend and model client -- and the
groups' reports are merged into one ``ProbeReport`` with the tools in spec order, as ``probe``
gives it. The ``--out`` files and the store (``update``) are written here, once, from the merged
report; the response cache is written by each task under its ``ATC_HOME`` (the one of this
process on a cluster started here, since ``ATC_HOME`` goes to the workers).

What travels to a worker is the narrowed toolset and the settings (``probes.many.ProbeJob``):
credentials stay variable names (``env:VAR``) and their values reach Ray workers through the
job's runtime environment only (``atc.workflows.ray_executor.worker_env``), as for ``atc batch``.
A ``max_calls`` budget is shared out between the groups in proportion to their tools. A task
that cannot run (its worker lost) leaves its tools ``skipped`` with the reason, never sinking
the others. The ``--out`` files are rewritten as groups finish (at most once a second), so an
interrupted run keeps the groups it finished; Ctrl-C (or ``stop``) raises ``ProbeInterrupted``
with the merged report of the groups done.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from atc.config import ray_address
from atc.errors import UsageError
from atc.workflows.executors import EXECUTORS, ray_module, run_each
from atc.workflows.ray_executor import worker_env
from probes.groups import probe_groups
from probes.many import ProbeJob, probe_task
from probes.plan.postreads import marked_toolset
from probes.results.outputs import WRITE_EVERY, publish, write_outputs
from probes.results.report import ProbeInterrupted, ProbeReport, ProbeSettings, ToolReport
from probes.single import ToolsArg, resolve_toolset
from sandbox.api import Toolset
from sandbox.execute import BaseUrl, check_toolset

__all__ = ["probe_spread", "GroupTask", "narrowed"]

_NOT_YET = "not probed (the probe stopped first)"


@dataclass(frozen=True)
class GroupTask:
    """One task: the toolset narrowed to a group's tools, and the group's share of ``max_calls``."""

    toolset: Toolset
    max_calls: int | None = None


def narrowed(toolset: Toolset, names: list[str]) -> Toolset:
    """``toolset`` with only the tools ``names``; every collection stays (empty or not), so the
    probe's name, and with it the response cache, is the whole collection's."""
    keep = set(names)
    return replace(toolset, collections=[replace(c, tools=[t for t in c.tools if t.name in keep])
                                         for c in toolset.collections])


def _probe_group(job: ProbeJob, task: GroupTask) -> ProbeReport:
    if task.max_calls is not None:
        job = replace(job, settings=replace(job.settings, max_calls=task.max_calls))
    return probe_task(job, task.toolset)


def _shares(total: int | None, sizes: list[int]) -> list[int | None]:
    """``total`` requests shared out in proportion to ``sizes`` (largest remainders first)."""
    if total is None:
        return [None] * len(sizes)
    whole = sum(sizes) or 1
    exact = [total * s / whole for s in sizes]
    shares = [int(x) for x in exact]
    by_rest = sorted(range(len(sizes)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in by_rest[: total - sum(shares)]:
        shares[i] += 1
    return list(shares)


def probe_spread(
    tools: ToolsArg,
    *,
    settings: ProbeSettings,
    base_url: BaseUrl = None,
    credentials: dict[str, str] | None = None,
    model: str | None = None,
    sandbox: str | None = None,
    out: str | Path | None = None,
    update: bool = False,
    executor: str = "local",
    concurrency: int = 2,
    replay: str | Path | None = None,
    on_result: Callable[[int, ProbeReport], None] | None = None,
    stop: threading.Event | None = None,
) -> ProbeReport:
    """Probe ``tools`` as one task per group of tools (see the module docstring); ``executor``
    ``"local"`` (threads) or ``"ray"`` (``RAY_ADDRESS``, else a cluster on this machine), at most
    ``concurrency`` tasks at a time. ``on_result(index, report)`` gets each group's report as it
    comes back (``index`` in the order of the groups). ``replay`` answers every request from a
    recording made with ``atc probe --record``. Setting ``stop`` starts no new group: the
    running ones finish, and ``ProbeInterrupted`` carries the merged report (``--out`` written)."""
    if executor not in EXECUTORS:
        raise UsageError(f"unknown executor {executor!r}", hint="use --executor local or --executor ray")
    if concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if not isinstance(sandbox, str | None):
        raise UsageError("probing on an executor takes a sandbox name ('local', 'docker'), not a backend object")
    if executor == "ray":
        ray_module()  # not installed: said now, before any request
    started = time.perf_counter()
    toolset = resolve_toolset(tools, base_url, credentials)
    check_toolset(toolset)
    # marked once here: the workers get the marked tools (a group may hold none of a pattern's)
    toolset = marked_toolset(toolset, settings.read_only, settings.writes_op)
    settings = replace(settings, read_only=(), writes_op=())
    groups = probe_groups(toolset, allow_unsafe=settings.allow_unsafe)
    budgets = _shares(settings.max_calls, [len(g) for g in groups])
    tasks = [GroupTask(narrowed(toolset, names), share) for names, share in zip(groups, budgets, strict=True)]
    job = ProbeJob(settings, model=model, sandbox=sandbox, replay=str(replay) if replay else None)
    reports: list[ProbeReport | None] = [None] * len(tasks)
    stop = stop or threading.Event()
    last_write = [0.0]

    def so_far(interrupted: bool) -> ProbeReport:
        """The merged report of the groups done; the others' tools ``skipped``."""
        done = [r if r is not None else ProbeReport(tools=_unprobed(tasks[i].toolset, _NOT_YET))
                for i, r in enumerate(reports)]
        return _merge(toolset, done, started, interrupted)

    def finished(index: int, report: ProbeReport) -> None:
        if not report.tools:  # the task could not probe at all: its tools say why
            report.tools = _unprobed(tasks[index].toolset, report.note or "not probed")
        reports[index] = report
        if on_result is not None:
            on_result(index, report)
        if out is not None and time.monotonic() - last_write[0] >= WRITE_EVERY:
            # an interrupted long probe keeps the groups it finished
            write_outputs(out, toolset.collections, so_far(False))
            last_write[0] = time.monotonic()

    def lost(index: int, exc: BaseException) -> None:
        reason = f"not probed: the worker failed: {type(exc).__name__}: {' '.join(str(exc).split())}"[:400]
        finished(index, ProbeReport(tools=[], note=reason))

    env = worker_env(toolset.credentials.values()) if executor == "ray" else {}
    interrupted = False
    try:
        run_each(_probe_group, tasks, shared=job, on_result=finished, on_error=lost, executor=executor,
                 concurrency=concurrency, stop=stop, address=ray_address(), env=env)
    except KeyboardInterrupt:
        interrupted = True
    interrupted = interrupted or any(r is None for r in reports)
    merged = publish(so_far(interrupted), toolset.collections, out, update=update)
    if interrupted:
        raise ProbeInterrupted(merged)
    return merged


def _unprobed(toolset: Toolset, reason: str) -> list[ToolReport]:
    return [ToolReport(name=t.name, status="skipped", reason=reason, method=t.method.upper(), path=t.path)
            for c in toolset.collections for t in c.tools]


def _merge(toolset: Toolset, reports: list[ProbeReport], started: float, interrupted: bool) -> ProbeReport:
    """One report for the whole collection: tools in spec order, counts summed, notes joined."""
    order = {t.name: i for i, t in enumerate(t for c in toolset.collections for t in c.tools)}
    tools = sorted((t for r in reports for t in r.tools), key=lambda t: order.get(t.name, len(order)))
    notes: list[str] = []
    for r in reports:
        if r.note and r.note not in notes:
            notes.append(r.note)
    usage = {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for r in reports:
        for key in usage:
            usage[key] += int(r.usage.get(key, 0))
    return ProbeReport(
        tools=tools, calls=sum(r.calls for r in reports), collection="+".join(c.name for c in toolset.collections),
        mode="model" if any(r.mode == "model" for r in reports) else "no-llm", base_url=toolset.base_url,
        budget=sum(r.budget for r in reports), rounds=max((r.rounds for r in reports), default=0),
        cached=sum(r.cached for r in reports), duration_ms=(time.perf_counter() - started) * 1000,
        interrupted=interrupted or any(r.interrupted for r in reports), note="; ".join(notes) or None,
        model=next((r.model for r in reports if r.model), None), usage=usage,
        sandbox=next((r.sandbox for r in reports if r.sandbox), None),
        writes=[w for r in reports for w in r.writes], scope=next((r.scope for r in reports if r.scope), {}),
        dry_run=any(r.dry_run for r in reports), stopped=next((r.stopped for r in reports if r.stopped), None),
        left_behind=[x for r in reports for x in r.left_behind],
        outside_scope=[x for r in reports for x in r.outside_scope])
