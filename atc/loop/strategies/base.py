"""The strategy seam: what every strategy is handed (``Episode``), what it returns (``Outcome``),
and the interface itself (``Strategy``).

A strategy decides HOW a model solves a task with tools: one program repaired by reflection
(``chain``), one function call per turn (``react``), code snippets in a live interpreter
(``codeact``), a search tree of turns (``dfsdt``). What it may NOT decide is how the model and the
tools are reached and counted: the episode does that, the same way for every strategy.

- ``episode.ask(messages, tools=...)`` is the model, through the solve's ``Meter`` (usage counted
  once, the budget enforced, an ``atc.llm.client`` span);
- ``episode.run_program(code)`` runs a program in the sandbox (its tool calls go through that
  run's gateway);
- ``episode.call_tool(name, args)`` makes ONE tool call with no sandbox, through a ``Gateway``
  made once per episode: the same class the sandbox's runs use, so the same validation,
  credentials, call budget (``Limits.max_calls`` over the whole episode), redaction, taps
  (record, replay, tracing) and call log;
- ``episode.session()`` opens a sandbox session (``atc.session``) whose globals survive from one
  snippet to the next, and ``episode.run_snippet(session, code)`` runs one snippet in it.

Every tool call any of them makes lands in ``episode.calls``: ``api_calls`` and the call
failures of the result are counted from there, never by the strategy. A strategy counts its own
failures (a reply without a program, a give-up...) with ``episode.fail(kind)``; the kinds are
``FAILURE_KINDS``.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from atc import prompts, tracing
from atc.errors import ModelBudget, ModelError
from atc.llm.chat import Completion, Message
from atc.loop.strategies.meter import Meter
from atc.sessions import session
from protocols.model import Tool
from sandbox.api import Backend, ExecutionResult, Limits, ToolCall, Toolset
from sandbox.execute import prepare, run
from sandbox.gateway.core import Gateway

if TYPE_CHECKING:
    from atc.loop.answers import AnswerSpec
    from atc.retrieval.base import Retriever
    from atc.sessions import Session
    from sandbox.execute import Pending
    from sandbox.gateway.core import CallOutcome

__all__ = ["Strategy", "Episode", "Outcome", "Step", "StepHook", "FAILURE_KINDS", "SANDBOX_LIMITS", "call_failure",
           "run_failure", "error_dict", "model_stop"]

#: Failures by kind, as ``Solution.failures`` counts them. A failed tool call is counted once,
#: under its kind, from the call log; the attempt or turn it broke is not counted again.
FAILURE_KINDS: dict[str, str] = {
    "tool_error": "a tool call reached its API (or MCP server) and failed: an HTTP error, an MCP error, "
                  "no answer in time, an unusable answer",
    "bad_arguments": "a tool call refused for its arguments: by the gateway's validation, or by the static "
                     "check of a program before it ran",
    "unknown_tool": "the model called a tool that is not in the run",
    "call_budget": "a tool call refused because the run's --max-calls was spent",
    "malformed_call": "function-call arguments that are not a JSON object",
    "program_error": "a program or snippet raised (other than a tool's error), or did not parse",
    "sandbox_limit": "a program stopped by the sandbox: timeout, memory or output limit",
    "no_program": "a reply that held no program (chain, codeact)",
    "empty_answer": "a program that ran and printed nothing, or a finish with an empty answer",
    "bad_answer": "a typed answer (answer=, --answer-schema) missing, or not matching its schema",
    "no_action": "a function-calling reply with neither a tool call nor finish (react, dfsdt)",
    "gave_up": "the model gave up and restarted from an earlier node (dfsdt)",
    "dead_end": "a branch that reached the depth limit without an answer (dfsdt)",
    "step_limit": "the strategy's own bound was reached without an answer: attempts, turns or nodes",
    "model_budget": "the solve's --max-model-calls or --max-tokens was spent before an answer",
    "model_error": "the model server failed in the middle of the solve",
}


#: Run errors that are the sandbox stopping a program or snippet, not the program raising.
SANDBOX_LIMITS = frozenset({"Timeout", "MemoryLimit", "OutputLimit", "SandboxError"})


def run_failure(error_type: str | None) -> str | None:
    """The failure kind of a program or snippet that ended with ``error_type``, unless a tool call
    explains it (a tool's error, the call budget: that call is counted from the call log)."""
    if error_type in ("ToolError", "CallBudget"):
        return None
    return "sandbox_limit" if error_type in SANDBOX_LIMITS else "program_error"


def call_failure(call: ToolCall) -> str | None:
    """The failure kind of one logged tool call (None: it succeeded)."""
    if call.ok:
        return None
    if call.failure == "arguments":
        return "bad_arguments"
    if call.failure == "budget":
        return "call_budget"
    return "tool_error"


def error_dict(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    """An error in the shape of ``ErrorInfo.to_dict()`` (what ``Solution.error`` holds)."""
    error: dict[str, Any] = {"type": kind, "message": message, "line": None, "tool": None, "traceback": "",
                             "col": None, "code": None, "attribution": None}
    error.update(extra)
    return error


@dataclass(frozen=True)
class Step:
    """One step as progress output shows it: ``kind`` is ``attempt``, ``turn`` or ``node``;
    ``summary`` is one line (what was done and how it went); ``detail`` is the strategy's own
    record of it (``chain``: the ``Attempt``)."""

    kind: str
    number: int
    ok: bool
    summary: str
    detail: Any = field(default=None, compare=False, repr=False)


StepHook = Callable[[Step], None]


@dataclass
class Outcome:
    """What a strategy returns. ``calls`` are the calls that produced the answer (``chain``: the
    last program's; ``react``/``codeact``: the episode's; ``dfsdt``: those along the final path);
    ``steps`` counts attempts, turns or nodes; ``trace`` is the strategy's own record (JSON, or
    None); ``tools`` is set when the strategy changed the tools shown (a retriever that reopened
    its search)."""

    ok: bool
    answer: str = ""
    error: dict[str, Any] | None = None
    calls: list[ToolCall] = field(default_factory=list)
    steps: int = 0
    trace: Any = None
    program: str = ""
    attempts: list[Any] = field(default_factory=list)
    tools: list[str] | None = None
    #: the typed answer (``answer=``: checked against its schema, built as its type), else None
    value: Any = None


@runtime_checkable
class Strategy(Protocol):
    """How a model solves a task with tools. ``name`` is what ``Solution.strategy`` reports.

    ``run`` returns an ``Outcome`` for everything the model does (a wrong tool, a broken program,
    a budget spent are failures IN the outcome); it raises only what no answer could come out of:
    ``ModelError`` before any step was made (the model server is down), a broken sandbox."""

    name: str

    def run(self, episode: Episode) -> Outcome: ...


def model_stop(episode: Episode, exc: ModelError, steps: int, unit: str) -> dict[str, Any]:
    """The error of a solve the model side stopped after ``steps`` of its ``unit`` ("turn"),
    counted under ``model_budget`` or ``model_error``. A model server that failed before the
    first step is raised as it is (``exc``): there is nothing to keep, and the caller (the CLI)
    reports it as it is."""
    if steps == 0 and not isinstance(exc, ModelBudget):
        raise exc
    done = f"{steps} {unit}(s)"
    if isinstance(exc, ModelBudget):
        episode.fail("model_budget")
        return error_dict("ModelBudget", f"{exc.message} after {done}", spent=exc.spent)
    episode.fail("model_error")
    return {**error_dict("ModelError", ""), **exc.to_dict(), "line": None, "tool": None,
            "message": f"the model failed after {done}: {exc.message}"}


class Episode:
    """One task being solved: the query, the tools (all of them, and the ones shown), the model,
    the limits, the sandbox choice. See the module docstring for what a strategy may call."""

    def __init__(self, query: str, toolset: Toolset, shown: Sequence[Tool], model: Meter, limits: Limits, *,
                 sandbox: str | Backend | None = None, retriever: Retriever | None = None,
                 top_k: int = 20, on_step: StepHook | None = None, pending: Pending | None = None,
                 answer: AnswerSpec | None = None) -> None:
        self.query = query
        self.toolset = toolset
        self.shown = list(shown)
        self.model = model
        self.limits = limits
        self.sandbox = sandbox
        self.retriever = retriever
        self.top_k = top_k
        self.on_step = on_step
        #: the typed answer asked for (``answer=``), None: the printed text is the answer
        self.answer = answer
        #: every tool call of the episode, in order: program runs, direct calls, snippets
        self.calls: list[ToolCall] = []
        #: failures the strategy counted itself (call failures are counted from ``calls``)
        self.failures: Counter[str] = Counter()
        #: the sandbox the last program or snippet ran in (None: none ran)
        self.sandbox_name: str | None = None
        #: tool calls the model asked for that never reached the gateway (a made-up name, arguments
        #: that are not JSON, a program the static check stopped), each with the number of logged
        #: calls before it, so that ``atc.loop.strategies.requests`` can put every request in order
        self.unsent: list[tuple[int, dict[str, Any]]] = []
        self._pending: Pending | None = pending
        self._gateway: Gateway | None = None

    # -- the model ---------------------------------------------------------------------------

    def ask(self, messages: Sequence[Message], *, tools: Sequence[dict[str, Any]] | None = None,
            tool_choice: Any = None) -> Completion:
        """One completion through the meter (``ModelBudget`` once the budget is spent)."""
        return self.model.complete(messages, tools=tools, tool_choice=tool_choice)

    # -- programs in the sandbox ----------------------------------------------------------------

    def warm(self) -> None:
        """Start getting the sandbox ready in the background (a strategy that runs programs is
        started with it, so that the sandbox's start overlaps the model's first answer)."""
        if self._pending is None:
            self._pending = prepare(self.sandbox, self.limits)

    def backend(self) -> Backend:
        self.warm()
        assert self._pending is not None
        return self._pending.backend()

    def run_program(self, program: str) -> ExecutionResult:
        """Run ``program`` in the sandbox (an ``atc.sandbox.run`` span); its calls are logged."""
        backend = self.backend()
        with tracing.span("atc.sandbox.run", {"atc.sandbox": getattr(backend, "name", None)}) as current:
            result = run(program, self.toolset, self.limits, sandbox=backend)
            tracing.set_attributes(current, {
                "atc.status": "ok" if result.ok else "failed", "atc.duration_ms": result.duration_ms,
                "atc.calls": len(result.calls), "atc.error.type": result.error.type if result.error else None,
                "atc.attributed_tool": result.error.tool if result.error else None})
        self.calls.extend(result.calls)
        self.sandbox_name = result.sandbox
        return result

    # -- one tool call, no sandbox ----------------------------------------------------------------

    def gateway(self) -> Gateway:
        """The episode's gateway for direct calls (made on first use; its call budget is the
        episode's)."""
        if self._gateway is None:
            self._gateway = Gateway(self.toolset, self.limits)
        return self._gateway

    def call_tool(self, name: str, args: dict[str, Any]) -> tuple[CallOutcome, ToolCall]:
        """Call tool ``name`` with ``args`` through the gateway; the outcome (data or error, the
        error text already redacted) and the logged call."""
        gateway = self.gateway()
        # One call is one step (a turn, a node): a write identical to one made earlier in the task,
        # in any turn or on any branch, meets it in the ledger and is not sent again.
        gateway.gate.next_attempt()
        before = len(gateway.calls)
        outcome = gateway.call(name, args)
        record = gateway.calls[before]
        self.calls.append(record)
        return outcome, record

    # -- a sandbox session ---------------------------------------------------------------------

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        """A sandbox session over the episode's tools and limits (``atc.session``): one isolated
        interpreter whose globals survive from one snippet to the next, torn down on exit."""
        with session(self.toolset, self.limits, sandbox=self.sandbox) as live:
            yield live

    def run_snippet(self, session: Session, code: str) -> ExecutionResult:
        """Run one snippet in ``session`` (an ``atc.sandbox.run`` span); its calls are logged.
        ``SessionEnded`` when the session is over."""
        with tracing.span("atc.sandbox.run", {"atc.session": True}) as current:
            result = session.run(code)
            tracing.set_attributes(current, {"atc.status": "ok" if result.ok else "failed",
                                             "atc.calls": len(result.calls),
                                             "atc.error.type": result.error.type if result.error else None})
        self.calls.extend(result.calls)
        self.sandbox_name = result.sandbox or self.sandbox_name
        return result

    # -- a typed answer ---------------------------------------------------------------------------

    def answer_prompt(self, finish: str | None = None) -> str:
        """What the model is told about the typed answer asked for ("" when none is): for code
        (``final_answer(value)``), or for the ``finish`` function's ``value`` argument."""
        if self.answer is None:
            return ""
        schema, shape = self.answer.instructions(), self.answer.shape()
        if finish is None:
            return "\n\n" + prompts.render("answer_code", schema=schema, shape=shape)
        return "\n\n" + prompts.render("answer_finish", finish=finish, schema=schema, shape=shape)

    def check_value(self, value: Any) -> tuple[Any, str | None]:
        """A value a strategy was handed (a finish call's ``value``) against the answer asked for:
        ``(typed value, None)`` or ``(None, the problem, for the model)``."""
        assert self.answer is not None
        typed, problem = self.answer.check(value)
        if problem is None:
            return typed, None
        return None, f"the value does not match {self.answer.label}: {problem}"

    # -- writes -----------------------------------------------------------------------------------

    @property
    def read_only(self) -> bool:
        """Is this a read-only run (``--writes deny``): every write refused before it is sent?"""
        writes = self.toolset.writes
        return writes is not None and writes.policy.mode == "deny"

    def rules_note(self) -> str:
        """What the model must know about writes before it starts ("" when nothing): a read-only
        run refuses every write."""
        return "\n\n" + prompts.render("writes_readonly").strip() if self.read_only else ""

    def writes_note(self) -> str:
        """The writes made so far in this task and what happens to an identical one ("" when none):
        for every prompt after a step that may have written."""
        writes = self.toolset.writes
        ledger = writes.ledger if writes is not None else None
        if ledger is None or not ledger.entries:
            return ""
        return "\n\n" + prompts.render("writes_made", writes=ledger.summary()).strip()

    # -- bookkeeping ------------------------------------------------------------------------------

    def fail(self, kind: str, count: int = 1) -> None:
        self.failures[kind] += count

    def note_request(self, tool: str, fate: str, args: Any = None) -> None:
        """Record a tool call the model asked for that is not sent: ``fate`` is ``unknown_tool``
        (no such tool), ``malformed`` (arguments that are not a JSON object), ``not_run`` (a
        program stopped by the static check, a second call in one turn). Evaluation counts every
        requested call (``Solution.requested``), sent or not."""
        self.unsent.append((len(self.calls), {"tool": tool, "fate": fate, "args": args}))

    def report(self, step: Step) -> None:
        if self.on_step is not None:
            self.on_step(step)

    def failures_by_kind(self) -> dict[str, int]:
        """The strategy's own failures plus those of every logged call."""
        counts = Counter(self.failures)
        for call in self.calls:
            kind = call_failure(call)
            if kind is not None:
                counts[kind] += 1
        return dict(sorted(counts.items()))
