"""Running a suite: every strategy over every task, on the same tools, limits and budgets.

Each strategy's tasks go through the batch runner of ``atc batch`` (``atc.workflows``: executors,
``--concurrency``, ``--executor ray``, record/replay, Ctrl-C) into its own result file,
``DIR/runs/STRATEGY.jsonl``: a result file of ``atc batch`` in every respect, so that an
interrupted evaluation resumes where it stopped and a finished one is scored again without
running anything. Strategies run one after the other, so that each one's wall time is its own.

The tools are reached as the suite says (``api``): ``mock``, ``atc mock`` of every collection
behind one loopback port (``atc.evaluation.mockhub``), or ``real``, the specs' servers (or
``--base-url``) with the run's credentials. A task with candidate tools is shown exactly those
(``CandidateRetriever``), as the paper shows each task its 20 candidates.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atc.errors import UsageError
from atc.evaluation.gold import parse_step, route_key
from atc.evaluation.metrics import unmeasured
from atc.evaluation.mockhub import MockHub
from atc.evaluation.suite import Suite
from atc.loop.strategies.registry import PRESET_STRATEGIES, PRESETS, choose, split_name
from atc.retrieval.base import Hit, SearchResult
from atc.workflows.batch import run_batch
from atc.workflows.outfile import ResultLog
from atc.workflows.tasks import Task
from protocols.files import atomic_write
from sandbox.api import Limits

if TYPE_CHECKING:
    from atc.llm.chat import ModelClient
    from atc.loop.strategies.registry import Choice
    from atc.workflows.jobs import Outcome
    from sandbox.api import Backend, Toolset

__all__ = ["RunSettings", "CandidateRetriever", "Runs", "run_strategies", "resolve_tools", "runs_file",
           "DEFAULT_STRATEGY"]

DEFAULT_STRATEGY = "chain"


@dataclass
class RunSettings:
    """How the strategies run (the run options of ``atc eval``). ``client`` is for in-process
    callers (tests, notebooks); otherwise the model comes from ``model`` and the environment.
    ``solve_options`` are further keywords of ``solve`` (budgets...), the same for every strategy.

    ``strategies`` are names (``NAME@k`` reruns a method up to k times); none given: the
    ``preset``'s (``paper``: Table 1's rows), else ``chain``. ``preset`` (``default``, ``paper``)
    sets every built-in's settings (``atc.loop.strategies.registry.PRESETS``); ``changes`` changes them
    per base strategy name (``{"dfsdt": {"max_nodes": 30}}``, ``{"dfsdt": {"profile": "atc"}}``);
    ``max_reflections`` (chain's repairs) and ``solve_options["max_steps"]`` (every strategy's
    own bound) win over both when given; ``until`` ends the reruns of ``NAME@k`` (``answer``, or
    ``exec``: an answer that does not read as an error)."""

    strategies: list[str] = field(default_factory=list)
    model: str | None = None
    client: ModelClient | None = None
    limits: Limits | None = None
    sandbox: str | Backend | None = None
    concurrency: int = 4
    executor: str = "local"
    max_reflections: int | None = None
    top_k: int | None = None
    retriever: str | None = None
    record: str | None = None
    replay: str | None = None
    api: str | None = None
    ray_address: str | None = None
    solve_options: dict[str, Any] = field(default_factory=dict)
    preset: str | None = None
    changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    until: str = "answer"
    #: the write policy of every task (``allow``, ``deny``, ``ask``); each task has its own write
    #: ledger, kept beside its strategy's run file so that a resumed task does not write twice
    writes: str = "allow"

    def check(self) -> None:
        if self.preset is not None and self.preset not in PRESETS:
            raise UsageError(f"unknown preset {self.preset!r}", hint=f"presets: {', '.join(PRESETS)}")
        if not self.strategies:
            self.strategies = list(PRESET_STRATEGIES.get(self.preset or "", [DEFAULT_STRATEGY]))
        self.strategies = [s.strip() for s in self.strategies]
        if len(set(self.strategies)) != len(self.strategies):
            raise UsageError(f"a strategy is named twice in {','.join(self.strategies)}")
        if self.concurrency < 1:
            raise UsageError("--concurrency must be at least 1")
        if self.max_reflections is not None and self.max_reflections < 0:
            raise UsageError("--max-reflections must be 0 or more")
        if self.record and self.replay:
            raise UsageError("give --record or --replay, not both")
        if self.api not in (None, "mock", "real"):
            raise UsageError(f"--api {self.api!r}: use mock or real")
        self.choices()

    def choices(self) -> dict[str, Choice]:
        """Each strategy's settings, resolved once (``atc.loop.strategies.registry.choose``); a bad name,
        preset, profile or setting is a ``UsageError`` now, before anything runs."""
        known = {split_name(name)[0] for name in self.strategies}
        stray = sorted(set(self.changes) - known)
        if stray:
            raise UsageError(f"settings given for {', '.join(stray)}, which is not among the strategies run",
                             hint=f"the strategies: {', '.join(self.strategies)}")
        max_steps = self.solve_options.get("max_steps")
        return {name: choose(name, preset=self.preset, changes=self.changes.get(split_name(name)[0]),
                             max_reflections=self.max_reflections, max_steps=max_steps, until=self.until)
                for name in self.strategies}


def resolve_tools(steps: tuple[str, ...], toolset: Toolset) -> tuple[list[tuple[str, str]], list[str]]:
    """The ``(collection, tool)`` keys that steps name (tool names, routes, or collection names:
    all of its tools), and the steps that name none."""
    by_route: dict[str, list[str]] = {}
    for name, tool in toolset.tools.items():
        by_route.setdefault(route_key(tool.method, tool.path), []).append(name)
    keys: list[tuple[str, str]] = []
    unknown: list[str] = []
    collections = {c.name: [t.name for t in c.tools] for c in toolset.collections}
    for text in steps:
        step = parse_step(text)
        if step.kind == "route":
            names = by_route.get(step.key, [])
        elif step.kind == "url":
            names = [n for n, t in toolset.tools.items() if step.matches({"tool": n, "method": t.method, "path": t.path})]
        else:
            names = [step.key] if step.key in toolset.tools else collections.get(step.key, [])
        if not names:
            unknown.append(text)
        keys += [(toolset.collection_of(n).name, n) for n in names]
    return list(dict.fromkeys(keys)), unknown


@dataclass
class CandidateRetriever:
    """A retriever that shows each task its suite's candidate tools (by its query text)."""

    candidates: dict[str, list[tuple[str, str]]]
    name: str = "candidates"

    def search(self, query: str, k: int = 5) -> SearchResult:
        hits = [Hit(c, n, 1.0) for c, n in self.candidates.get(query.strip(), [])]
        return SearchResult(hits, self.name)


def _drop_unmeasured(path: Path) -> int:
    """Take the lines of tasks that could not be measured (``metrics.unmeasured``) out of a run
    file, so that they run again; the file is rewritten whole and renamed. Returns how many."""
    import json

    try:
        data = path.read_bytes()
    except OSError:
        return 0
    kept: list[bytes] = []
    dropped = 0
    for raw in data.split(b"\n"):
        try:
            obj = json.loads(raw)
        except ValueError:
            kept.append(raw)  # a torn or foreign line: the result log says what to do with it
            continue
        if isinstance(obj, dict) and unmeasured(obj):
            dropped += 1
        else:
            kept.append(raw)
    if dropped:
        atomic_write(path, b"\n".join(kept))
    return dropped


def runs_file(out: Path, strategy: str) -> Path:
    return out / "runs" / (re.sub(r"[^\w.-]", "_", strategy) + ".jsonl")


@dataclass
class Runs:
    """The result lines of every strategy (``{strategy: {task id: line}}``), and what did not run."""

    lines: dict[str, dict[str, dict[str, Any]]]
    not_run: dict[str, int]
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)
    wall_s: dict[str, float] = field(default_factory=dict)


def _retriever(suite: Suite, toolset: Toolset, settings: RunSettings) -> tuple[Any, list[str]]:
    with_tools = [t for t in suite.tasks if t.tools]
    if not with_tools:
        return settings.retriever, []
    if settings.retriever:
        return settings.retriever, [f"--retriever {settings.retriever} chooses the tools; the suite's candidates are not used"]
    candidates: dict[str, list[tuple[str, str]]] = {}
    missing = 0
    for task in with_tools:
        keys, unknown = resolve_tools(task.tools, toolset)
        missing += len(unknown)
        candidates.setdefault(task.query.strip(), keys)
    notes = [f"{missing} candidate tool(s) of the suite are not in the collections"] if missing else []
    return CandidateRetriever(candidates), notes


OutcomeHook = Callable[[str, int, "Outcome"], None]


def run_strategies(suite: Suite, toolset: Toolset, settings: RunSettings, *, out: Path | None = None,
                   stop: threading.Event | None = None, on_outcome: OutcomeHook | None = None) -> Runs:
    """Run every strategy over the suite (see the module docstring); ``on_outcome(strategy, index,
    outcome)`` is called as each task finishes."""
    settings.check()
    stop = stop or threading.Event()
    api = settings.api or suite.api
    hub: MockHub | None = None
    if api == "mock" and not settings.replay:
        hub = MockHub(toolset.collections).start()
        toolset = dataclasses.replace(toolset, base_url=None, base_urls=hub.base_urls)
    retriever, notes = _retriever(suite, toolset, settings)
    tasks = [Task(t.id, query=t.query) for t in suite.tasks]
    runs = Runs({}, {}, notes=notes)
    choices = settings.choices()
    try:
        for strategy in settings.strategies:
            if stop.is_set():
                runs.not_run[strategy] = len(tasks)
                continue
            options = {**settings.solve_options, "strategy": choices[strategy]}
            if retriever is not None:
                options["retriever"] = retriever
            reflections = settings.max_reflections if settings.max_reflections is not None else 3
            job = suite.make_job(toolset, settings.limits or Limits(), sandbox=settings.sandbox, model=settings.model,
                                 max_reflections=reflections, top_k=settings.top_k, record=settings.record,
                                 replay=settings.replay, client=settings.client, solve_options=options,
                                 writes=settings.writes)
            if out is not None:
                retried = _drop_unmeasured(runs_file(out, strategy))
                if retried:
                    runs.notes.append(f"{strategy}: {retried} task(s) that the model server failed run again")
            log = ResultLog(runs_file(out, strategy)) if out is not None else None
            if log is not None and log.repaired:
                runs.notes.append(log.repaired)
            reused = len(set(log.done) & {t.key for t in tasks}) if log is not None else 0
            if reused:
                runs.notes.append(f"{strategy}: reused {reused} finished task{'' if reused == 1 else 's'} of "
                                  f"{runs_file(out, strategy) if out is not None else ''} (not run again)")
            found: dict[str, dict[str, Any]] = {}
            missed = [0]

            def finished(index: int, outcome: Outcome, strategy: str = strategy,
                         found: dict[str, dict[str, Any]] = found, missed: list[int] = missed) -> None:
                found[str(outcome.task.id)] = outcome.line()
                missed[0] += outcome.unrecorded
                if on_outcome is not None:
                    on_outcome(strategy, index, outcome)

            try:
                summary = run_batch(tasks, job, log=log, concurrency=settings.concurrency, executor=settings.executor,
                                    on_outcome=finished, stop=stop, ray_address=settings.ray_address)
            finally:
                if log is not None:
                    log.close()
            lines = dict(log.done) if log is not None else {}
            lines.update(found)
            runs.lines[strategy] = {k: v for k, v in lines.items() if k in {t.key for t in tasks}}
            if missed[0]:
                runs.notes.append(f"{strategy}: {missed[0]} request(s) had no recorded answer in {settings.replay}")
            runs.not_run[strategy] = summary.not_run
            runs.wall_s[strategy] = summary.wall_ms / 1000
            runs.interrupted = runs.interrupted or summary.interrupted
    finally:
        if hub is not None:
            hub.stop()
    return runs
