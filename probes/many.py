"""``probe_many``: probe many collections at once, each as its own task, here or on a Ray cluster.

Probing ONE collection is sequential by nature (each round of the chain feeds on the answers of
the last), so the unit of scale-out is the collection: documenting fifty APIs is fifty tasks.
Each task is ``probe`` of one target in a worker (a thread, or a Ray worker process with its own
sandbox backend and model client made from its environment); the reports come back in the order
of the targets. Credentials travel as variable names (``env:VAR``); their values reach Ray workers
through the job's runtime environment only (``atc.workflows.ray_executor.worker_env``). A target
that cannot be probed at all (no server URL, an unset credential) gives a report with no tool
documented and the reason in ``note``, never sinking the others.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from atc.config import ray_address
from atc.errors import AtcError, UsageError
from atc.workflows.executors import run_each
from atc.workflows.ray_executor import worker_env
from atc.workflows.replay import open_recording
from probes.results.report import ProbeReport, ProbeSettings
from probes.single import ToolsArg, probe_toolset, resolve_toolset
from sandbox.api import Toolset
from sandbox.execute import BaseUrl, as_toolset

__all__ = ["probe_many", "ProbeJob", "probe_task"]


@dataclass(frozen=True)
class ProbeJob:
    """What every task is probed with (picklable: names, not live objects)."""

    settings: ProbeSettings
    model: str | None = None
    sandbox: str | None = None
    out: str | None = None
    update: bool = False
    record: str | None = None
    replay: str | None = None


def probe_task(job: ProbeJob, toolset: Toolset) -> ProbeReport:
    name = "+".join(c.name for c in toolset.collections)
    try:
        client = None
        settings = job.settings
        if job.record or job.replay:
            recording = open_recording(job.record, job.replay)
            assert recording is not None
            toolset = recording.wrap_toolset(toolset)
            if settings.use_llm and (recording.mode == "record" or len(recording.model)):
                try:
                    client = recording.wrap_client(None, job.model)
                except AtcError:
                    client = None  # no model configured: probed without one, as probe would
            elif recording.mode == "replay":
                settings = replace(settings, use_llm=False)
        out = Path(job.out) / name if job.out else None
        return probe_toolset(toolset, settings, model=job.model, client=client, sandbox=job.sandbox, out=out,
                             update=job.update)
    except AtcError as exc:
        return ProbeReport(tools=[], collection=name, note=f"not probed: {exc.message}")


def _resolve(target: ToolsArg, base_url: BaseUrl, credentials: dict[str, str] | None) -> Toolset:
    """The target's toolset; a per-collection ``base_url`` (``{name: URL}``) gives each target the
    entries of its own collections."""
    toolset = resolve_toolset(target)
    if isinstance(base_url, dict):
        names = {c.name for c in toolset.collections}
        base_url = {k: v for k, v in base_url.items() if k in names} or None
    return as_toolset(toolset, base_url=base_url, credentials=credentials)


def probe_many(
    targets: Sequence[ToolsArg],
    *,
    base_url: BaseUrl = None,
    credentials: dict[str, str] | None = None,
    settings: ProbeSettings | None = None,
    model: str | None = None,
    sandbox: str | None = None,
    out: str | Path | None = None,
    update: bool = False,
    executor: str = "local",
    concurrency: int = 2,
    record: str | Path | None = None,
    replay: str | Path | None = None,
    on_result: Callable[[int, ProbeReport], None] | None = None,
    **options: Any,
) -> list[ProbeReport]:
    """Probe each target (a spec path, a stored name, a Collection or a Toolset) as its own task;
    the reports come back in the order of ``targets``. ``out``: a directory; each target's files
    go to ``out/<collection name>``. ``executor``: ``"local"`` (threads) or ``"ray"`` (``RAY_ADDRESS``,
    else a cluster on this machine). ``on_result(index, report)`` is called as each finishes. The
    other keywords are ``probe``'s (``settings`` or its fields as keywords, ``no_llm=True``...).

    Args:
        targets: each a spec path, a stored name, a Collection or a Toolset.
        out: a directory (each target's files in ``out/<collection name>``).
        executor: ``"local"`` or ``"ray"``; ``concurrency``: targets probed together.
        on_result: called with ``(index, report)`` as each finishes.
        **options: ``atc.probe``'s keywords.

    Returns:
        The ``ProbeReport`` of each target, in order (a target that fails says so in its note).

    Raises:
        UsageError: bad settings (executor, concurrency).
    """
    if settings is None:
        no_llm = bool(options.pop("no_llm", False))
        settings = ProbeSettings(**options)
        if no_llm:
            settings = replace(settings, use_llm=False)
    elif options:
        raise UsageError("give settings= or keyword options, not both")
    if not isinstance(sandbox, str | None):
        raise UsageError("probe_many takes a sandbox name ('local', 'docker'), not a backend object")
    toolsets: list[Toolset | None] = []
    unusable: dict[int, str] = {}
    for index, target in enumerate(targets):
        try:
            toolsets.append(_resolve(target, base_url, credentials))
        except AtcError as exc:  # this target only: the others are probed
            toolsets.append(None)
            unusable[index] = f"not probed: {exc.message}"
    job = ProbeJob(settings, model=model, sandbox=sandbox, out=str(out) if out else None, update=update,
                    record=str(record) if record else None, replay=str(replay) if replay else None)
    reports: list[ProbeReport | None] = [None] * len(toolsets)

    def finished(index: int, report: ProbeReport) -> None:
        reports[index] = report
        if on_result is not None:
            on_result(index, report)

    usable = [(i, t) for i, t in enumerate(toolsets) if t is not None]

    def lost(index: int, exc: BaseException) -> None:
        found = toolsets[index]
        name = "+".join(c.name for c in found.collections) if found is not None else ""
        finished(index, ProbeReport(tools=[], collection=name,
                                    note=f"not probed: the worker failed: {type(exc).__name__}: {exc}"[:400]))

    for index, note in unusable.items():
        finished(index, ProbeReport(tools=[], collection=str(targets[index]), note=note))
    env = worker_env(v for _, t in usable for v in t.credentials.values()) if executor == "ray" else {}
    run_each(probe_task, [t for _, t in usable], indexes=[i for i, _ in usable], shared=job, on_result=finished,
             on_error=lost, executor=executor, concurrency=concurrency, address=ray_address(), env=env)
    return [r if r is not None else ProbeReport(tools=[], note="not probed") for r in reports]
