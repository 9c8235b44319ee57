"""What one task of a batch is run with, and how: the ``Job``.

A ``Job`` is a plain value (tools, limits, sandbox name, model name, recording directories) so it
can be shipped to other processes (Ray workers); the live parts -- the model client, the opened
recording, the tools wrapped with its tap -- are made once per process on first use and never
pickled. Credentials travel as what they are in a ``Toolset``: the NAME of the environment
variable (``env:VAR``); the value is read by the gateway of whichever host runs the task.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from atc import tracing
from atc.approval import task_writes
from atc.errors import AtcError, UsageError
from atc.llm.client import make_client
from atc.loop.answers import AnswerSpec, judge_result
from atc.loop.solving import Solution, solve
from atc.loop.strategies.registry import resolve
from atc.workflows.replay import MISSES, open_recording
from atc.workflows.tasks import Task
from sandbox.api import Backend, ErrorInfo, ExecutionResult
from sandbox.execute import check_toolset, get_backend
from sandbox.gateway.writes.ledger import LedgerFile, WriteLedger
from sandbox.gateway.writes.policy import WritePolicy, Writes

if TYPE_CHECKING:
    from atc.llm.chat import ModelClient
    from atc.workflows.replay import Recording
    from sandbox.api import Limits, Toolset

__all__ = ["Job", "Outcome"]


@dataclass
class Outcome:
    """A finished task: its ``Solution`` (a query) or ``ExecutionResult`` (a program)."""

    task: Task
    result: Solution | ExecutionResult
    unrecorded: int = 0

    @property
    def ok(self) -> bool:
        return bool(self.result.ok)

    def line(self) -> dict[str, Any]:
        """The result line: ``{"id", ...solve --json or run --json fields}`` (+ ``unrecorded``
        when a replay missed something)."""
        d: dict[str, Any] = {"id": self.task.id, **self.result.to_dict()}
        if self.unrecorded:
            d["unrecorded"] = self.unrecorded
        return d

    def write_outcomes(self) -> dict[str, int]:
        """The task's write calls by outcome: a solve's over every attempt, turn and node, a
        program's over its calls."""
        counted = getattr(self.result, "write_counts", None)
        if isinstance(counted, dict):
            return {str(k): int(v) for k, v in counted.items()}
        counts: dict[str, int] = {}
        for call in self.result.calls:
            if call.write:
                counts[str(call.outcome)] = counts.get(str(call.outcome), 0) + 1
        return counts

    def api_calls(self) -> int:
        """Every tool call the task made: a solve's all attempts or branches, a program's calls."""
        counted = getattr(self.result, "api_calls", None)
        return int(counted) if isinstance(counted, int) else len(self.result.calls)


@dataclass
class Job:
    """How every task of a batch runs. ``client`` is for in-process use only (the local executor);
    elsewhere the model client is made from ``model`` and the environment of the worker."""

    toolset: Toolset
    limits: Limits
    sandbox: str | Backend | None = None
    model: str | None = None
    max_reflections: int = 3
    top_k: int | None = None
    record: str | None = None
    replay: str | None = None
    #: Further keywords of ``solve`` (as added there), passed through as they are.
    solve_options: dict[str, Any] = field(default_factory=dict)
    client: ModelClient | None = field(default=None, repr=False)
    on_attempt: Any = field(default=None, repr=False)
    #: the write policy of every task (``allow``, ``deny``, ``ask``)
    writes: str = "allow"
    #: the write ledgers' file (``atc batch``: beside OUT): a task resumed after it wrote meets its
    #: writes there and does not send them again; None: each task's ledger lives in memory
    ledger: str | None = None
    #: answers ``--writes ask`` (in-process only, like ``client``)
    approve: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: tuple[Toolset, Recording | None] | None = None
        self._client: ModelClient | None = None
        self._ledgers: LedgerFile | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("_lock", "_ready", "_client", "client", "on_attempt", "approve", "_ledgers")}
        state["client"] = None
        state["on_attempt"] = None
        state["approve"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__post_init__()

    def shippable(self) -> Job:
        """A copy fit for another process (``UsageError`` for what cannot go there)."""
        if not isinstance(self.sandbox, str | None):
            raise UsageError("a sandbox backend object cannot be sent to remote workers",
                             hint="pass sandbox='local' or 'docker': each worker makes its own")
        if self.client is not None:
            raise UsageError("a model client object cannot be sent to remote workers",
                             hint="pass model=NAME instead: each worker makes its client from its environment")
        return replace(self)

    # -- per process ----------------------------------------------------------------------------

    def _prepare(self) -> tuple[Toolset, Recording | None]:
        with self._lock:
            if self._ready is None:
                recording = open_recording(self.record, self.replay)
                toolset = recording.wrap_toolset(self.toolset) if recording else self.toolset
                toolset = tracing.wrap_toolset(toolset)
                self._ready = toolset, recording
            return self._ready

    def model_client(self) -> ModelClient:
        toolset, recording = self._prepare()
        with self._lock:
            if self._client is None:
                if recording is not None:
                    self._client = recording.wrap_client(self.client, self.model)
                elif self.client is not None:
                    self._client = self.client
                else:
                    self._client = make_client(self.model)
            return self._client

    def check(self, tasks: list[Task]) -> None:
        """What would fail every task, said before any runs: the tools' configuration and, when a
        task is a query, the strategy (an unknown name, a bad bound) and the model's configuration."""
        toolset, recording = self._prepare()
        if recording is None or recording.mode != "replay":
            check_toolset(toolset)
        if any(t.query is not None for t in tasks):
            strategy = self.solve_options.get("strategy")
            if strategy is not None:
                resolve(strategy, max_reflections=self.max_reflections, max_steps=self.solve_options.get("max_steps"))
            self.model_client()

    def task_writes(self, task: Task) -> Writes:
        """The write policy and ledger of ``task``: from the ledger file when there is one (what an
        earlier, interrupted run of the task wrote is there), else a new one."""
        ledger: WriteLedger
        if self.ledger is not None:
            with self._lock:
                if self._ledgers is None:
                    self._ledgers = LedgerFile(self.ledger)
            ledger = self._ledgers.ledger(task.key)
        else:
            ledger = WriteLedger()
        return Writes(WritePolicy(self.writes, self.approve), ledger)

    # -- one task ---------------------------------------------------------------------------------

    def run(self, task: Task) -> Outcome:
        """Run one task; never raises for the task's own failure (it becomes a failed result)."""
        misses: list[str] = []
        token = MISSES.set(misses)
        try:
            with tracing.span("atc.task", {"atc.task.id": str(task.id), "atc.task.kind": task.kind}) as span:
                result = self._solve(task) if task.query is not None else self._run_program(task)
                tracing.set_attributes(span, {"atc.status": "ok" if result.ok else "failed"})
            return Outcome(task, result, unrecorded=len(misses))
        finally:
            MISSES.reset(token)

    def _solve(self, task: Task) -> Solution:
        started = time.perf_counter()
        assert task.query is not None
        try:
            toolset, _ = self._prepare()
            return solve(task.query, toolset, client=self.model_client(), max_reflections=self.max_reflections,
                         limits=self.limits, sandbox=self.sandbox, top_k=self.top_k, on_attempt=self.on_attempt,
                         writes=self.task_writes(task), **self.solve_options)
        except Exception as exc:
            chosen = self.solve_options.get("strategy")
            name = chosen if isinstance(chosen, str | None) else getattr(chosen, "name", None)
            return Solution.failed(task.query, exc, duration_ms=(time.perf_counter() - started) * 1000,
                                   strategy=name)

    def _run_program(self, task: Task) -> ExecutionResult:
        started = time.perf_counter()
        assert task.program is not None
        try:
            toolset, _ = self._prepare()
            backend = self.sandbox if isinstance(self.sandbox, Backend) else get_backend(self.sandbox)
            result = backend.run(task.program, task_writes(toolset, self.task_writes(task)), self.limits)
            answer = self.solve_options.get("answer")
            if answer is not None:  # a typed answer asked for: a program task's value is checked too
                result, _ = judge_result(result, AnswerSpec.of(answer))
            return result
        except Exception as exc:
            kind = type(exc).__name__
            message = exc.message if isinstance(exc, AtcError) else str(exc)
            return ExecutionResult(ok=False, answer="", sandbox=str(getattr(self.sandbox, "name", self.sandbox) or ""), error=ErrorInfo(kind, message),
                                   duration_ms=(time.perf_counter() - started) * 1000)
