"""The batch loop: tasks in, outcomes out as each finishes, at most ``concurrency`` at a time.

``run_batch`` skips the tasks whose ids are already in the result log (resume), hands the rest to
an executor (``local``: threads in this process sharing one sandbox backend; ``ray``: tasks on a
Ray cluster, see ``atc.workflows.ray_executor``), writes each outcome's line as soon as it
arrives and calls ``on_outcome`` (progress). Setting ``stop`` (the CLI does on Ctrl-C) takes no
new task; the running ones finish and are written, the rest are counted ``not_run``. The
``BatchSummary`` counts the whole batch: solved and failed include results found in the log.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atc.errors import UsageError
from atc.workflows.executors import EXECUTORS, run_each
from atc.workflows.jobs import Job, Outcome
from atc.workflows.outfile import ResultLog
from atc.workflows.ray_executor import run_on_ray
from atc.workflows.tasks import Task

__all__ = ["BatchSummary", "run_batch", "EXECUTORS", "OutcomeHook", "ledger_path"]

#: ``on_outcome(index, outcome)``: ``index`` is the task's position in the input.
OutcomeHook = Callable[[int, Outcome], None]


@dataclass
class BatchSummary:
    """What a batch did. ``solved``/``failed`` cover every task of the input that has a result
    (this run's and earlier runs' found in OUT); ``ran`` and the usage counts are this run's."""

    tasks: int = 0
    skipped: int = 0
    ran: int = 0
    solved: int = 0
    failed: int = 0
    not_run: int = 0
    interrupted: bool = False
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    api_calls: int = 0
    unrecorded: int = 0
    wall_ms: float = 0.0
    executor: str = "local"
    concurrency: int = 1
    out: str | None = None
    repaired: str | None = None
    #: failures by kind over this run's solves (``Solution.failures`` summed)
    failures: dict[str, int] = field(default_factory=dict)
    #: this run's writes by outcome (``done``, ``failed``, ``unknown``, ``replayed``, ``refused``)
    writes: dict[str, int] = field(default_factory=dict)
    #: the write ledgers' file (None: none was kept)
    ledger: str | None = None

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.not_run == 0 and not self.interrupted

    def add(self, outcome: Outcome) -> None:
        self.ran += 1
        if outcome.ok:
            self.solved += 1
        else:
            self.failed += 1
        usage = getattr(outcome.result, "usage", None)
        if usage is not None:
            self.llm_calls += usage.llm_calls
            self.prompt_tokens += usage.prompt_tokens
            self.completion_tokens += usage.completion_tokens
        self.api_calls += outcome.api_calls()
        self.unrecorded += outcome.unrecorded
        for kind, count in (getattr(outcome.result, "failures", None) or {}).items():
            self.failures[kind] = self.failures.get(kind, 0) + int(count)
        for kind, count in outcome.write_outcomes().items():
            self.writes[kind] = self.writes.get(kind, 0) + count

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "tasks": self.tasks, "skipped": self.skipped, "ran": self.ran,
                "solved": self.solved, "failed": self.failed, "not_run": self.not_run,
                "interrupted": self.interrupted,
                "usage": {"llm_calls": self.llm_calls, "prompt_tokens": self.prompt_tokens,
                          "completion_tokens": self.completion_tokens},
                "api_calls": self.api_calls, "unrecorded": self.unrecorded, "wall_ms": round(self.wall_ms, 3),
                "executor": self.executor, "concurrency": self.concurrency, "out": self.out,
                "repaired": self.repaired, "failures": dict(sorted(self.failures.items())),
                "writes": dict(sorted(self.writes.items())), "ledger": self.ledger}


def run_batch(tasks: list[Task], job: Job, *, log: ResultLog | None = None, concurrency: int = 8,
              executor: str = "local", on_outcome: OutcomeHook | None = None,
              stop: threading.Event | None = None, ray_address: str | None = None) -> BatchSummary:
    """Run ``tasks`` (see the module docstring); every outcome of this run is written to ``log``."""
    if concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if executor not in EXECUTORS:
        raise UsageError(f"unknown executor {executor!r}", hint="use --executor local or --executor ray")
    started = time.perf_counter()
    stop = stop or threading.Event()
    summary = BatchSummary(tasks=len(tasks), executor=executor, concurrency=concurrency,
                           out=str(log.path) if log is not None and log.path is not None else None,
                           repaired=log.repaired if log is not None else None)
    todo: list[tuple[int, Task]] = []
    for index, task in enumerate(tasks):
        earlier = log.done.get(task.key) if log is not None else None
        if earlier is None:
            todo.append((index, task))
            continue
        summary.skipped += 1
        if earlier.get("ok"):
            summary.solved += 1
        else:
            summary.failed += 1
    if log is not None and log.path is not None and job.ledger is None:
        job.ledger = ledger_path(log.path)
    summary.ledger = job.ledger
    if todo:
        job.check([t for _, t in todo])

    def finished(index: int, outcome: Outcome) -> None:
        if log is not None:
            log.write(outcome.line())
        summary.add(outcome)
        if on_outcome is not None:
            on_outcome(index, outcome)

    if executor == "ray":
        done = run_on_ray(todo, job, concurrency=concurrency, on_outcome=finished, stop=stop, address=ray_address)
    else:
        done = _run_local(todo, job, concurrency=concurrency, on_outcome=finished, stop=stop)
    summary.not_run = len(todo) - done
    summary.interrupted = stop.is_set() and summary.not_run > 0
    summary.wall_ms = (time.perf_counter() - started) * 1000
    return summary


def ledger_path(out: Path) -> str:
    """The write ledgers of a batch whose results go to ``out``: ``OUT.writes.jsonl`` beside it."""
    return str(out.with_name(out.name + ".writes.jsonl"))


def _run_local(todo: list[tuple[int, Task]], job: Job, *, concurrency: int, on_outcome: OutcomeHook,
               stop: threading.Event) -> int:
    """Threads in this process; returns how many tasks finished."""
    return run_each(job.run, [t for _, t in todo], indexes=[i for i, _ in todo], on_result=on_outcome,
                    concurrency=concurrency, stop=stop)
