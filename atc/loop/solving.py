"""The main job: a model solves a task with tools, by a strategy, and the result says how.

``solve`` checks the input (the task, the tools' configuration, the model's configuration) before
anything slow starts, chooses the tools the model is shown (all of them, or the ``top_k`` a
retriever picks), and hands an ``Episode`` to the strategy (``atc.loop.strategies``: ``chain``, the
default, writes one program repaired by attributable reflection; ``chain-plain``, ``react``,
``codeact``, ``dfsdt`` and plug-ins are the others). The strategy reaches the model only through
the episode's meter (usage counted once, ``max_model_calls`` / ``max_tokens`` enforced) and the
tools only through a gateway, so that the ``Solution`` of every strategy counts calls, tokens and
failures the same way.

Failures that are the model's fault are recorded in the solution; failures that are ours or the
environment's (no model configured, model server down before the first step, sandbox engine
gone) are raised. Batches of tasks (``solve_many``, ``atc batch``) live in ``atc.workflows``,
which uses this module and is never used by it.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec

from atc import tracing
from atc.approval import task_writes
from atc.config import atc_home
from atc.errors import AtcError, UsageError
from atc.llm.chat import ModelClient
from atc.llm.client import configured_settings, make_client
from atc.loop.answers import AnswerSpec, json_value
from atc.loop.strategies.base import Episode, Step, StepHook, Strategy
from atc.loop.strategies.chain import Attempt
from atc.loop.strategies.meter import Budget, Meter, Usage
from atc.loop.strategies.registry import DEFAULT, Choice, resolve
from atc.loop.strategies.requests import requested_calls
from atc.retrieval.api import load_builtins, make_retriever
from atc.retrieval.base import factory
from atc.retrieval.inmemory import shared_corpus
from atc.retrieval.select import select
from atc.toolsets import ToolsArg, toolset_for
from protocols.model import Tool
from sandbox.api import Backend, Limits, ToolCall, Toolset
from sandbox.execute import BaseUrl, Validation, WritesArg, check_toolset, pick_sandbox, prepare
from sandbox.gateway.writes.policy import Approver

if TYPE_CHECKING:
    from atc.retrieval.base import Retriever, SearchResult

__all__ = ["Usage", "Attempt", "Solution", "solve", "asolve", "choose_tools", "toolset_for", "ToolsArg",
           "DEFAULT_TOP_K"]

#: Tools shown to the model when the collections hold more (the ATC paper gives 20 candidates).
DEFAULT_TOP_K = 20

AttemptHook = Callable[[Attempt, int], None]


@dataclass
class Solution:
    """The outcome of ``solve``; ``to_dict()`` is ``atc solve --json``. ``answer``, ``program``
    and ``error`` are the strategy's final ones; ``calls`` are the calls that produced the answer
    (``chain``: the last program's; ``react``/``codeact``: every call of the episode; ``dfsdt``:
    those along the final path), while ``api_calls`` counts every call made, all attempts and
    branches; ``steps`` counts attempts (``chain``), turns (``react``/``codeact``) or nodes
    (``dfsdt``); ``trace`` is the strategy's own record (the dfsdt tree; None for ``chain``, whose
    record is ``attempts``); ``failures`` counts failures by kind (``atc.loop.strategies.FAILURE_KINDS``).
    ``sandbox`` names the backend of the last run (None when no program ever ran); ``duration_ms``
    is the whole solve, model time included. ``value`` is the typed answer asked for with
    ``answer=`` (read back from JSON: its JSON data)."""

    ok: bool
    answer: str
    program: str
    attempts: list[Attempt] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    tools: list[str] = field(default_factory=list)
    sandbox: str | None = None
    duration_ms: float = 0.0
    error: dict[str, Any] | None = None
    query: str = ""
    model: str | None = None
    #: the retriever that chose the tools shown (None: there were few enough to show them all)
    retriever: str | None = None
    strategy: str = DEFAULT
    steps: int = 0
    #: what one of ``steps`` is for this strategy ("attempt", "turn", "node"; a plug-in's own word)
    step_unit: str = "step"
    api_calls: int = 0
    trace: Any = None
    failures: dict[str, int] = field(default_factory=dict)
    #: every tool call the model asked for, all attempts and branches, sent or not, in order
    #: (``atc.loop.strategies.requests``: what evaluation's Path% and Prec% count)
    requested: list[dict[str, Any]] = field(default_factory=list)
    #: the strategy's own settings (``atc.loop.strategies.settings``; None for a plug-in without any)
    settings: dict[str, Any] | None = None
    #: every write of the task (all attempts, turns and nodes), from its write ledger, in order:
    #: ``{"tool", "args", "method", "path", "outcome", "status", "attempt", "sends", "created", ...}``
    writes: list[dict[str, Any]] = field(default_factory=list)
    #: the write policy the task ran under (``allow``, ``deny``, ``ask``)
    write_policy: str = "allow"
    #: write calls of every attempt, turn and node by outcome (``done``, ``failed``, ``unknown``,
    #: ``replayed``, ``refused``)
    write_counts: dict[str, int] = field(default_factory=dict)
    #: the typed answer (``answer=``): an instance of the pydantic model or dataclass asked for, the
    #: JSON data of a JSON Schema; None when none was asked for or none came
    value: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "answer": self.answer,
            "value": json_value(self.value) if self.value is not None else None,
            "sandbox": self.sandbox,
            "duration_ms": round(self.duration_ms, 3),
            "error": self.error,
            "calls": [c.to_dict() for c in self.calls],
            "program": self.program,
            "attempts": [a.to_dict() for a in self.attempts],
            "usage": self.usage.to_dict(),
            "tools": self.tools,
            "query": self.query,
            "model": self.model,
            "retriever": self.retriever,
            "strategy": self.strategy,
            "steps": self.steps,
            "step_unit": self.step_unit,
            "api_calls": self.api_calls,
            "trace": self.trace,
            "failures": dict(self.failures),
            "requested": self.requested,
            "settings": self.settings,
            "writes": self.writes,
            "write_policy": self.write_policy,
            "write_counts": dict(self.write_counts),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Solution:
        """A Solution read back from its JSON (a result file of ``solve_many``/``atc batch``):
        the attempts keep their program, outcome and error, not their full run."""
        calls = [ToolCall(**{k: v for k, v in c.items() if k in ToolCall.__dataclass_fields__})
                 for c in d.get("calls") or []]
        attempts = [Attempt(a.get("program", ""), bool(a.get("ok")), a.get("error"), blamed_tool=a.get("blamed_tool"),
                            reply=a.get("reply", "")) for a in d.get("attempts") or []]
        usage = Usage(**{k: int(v) for k, v in (d.get("usage") or {}).items() if k in Usage.__dataclass_fields__})
        failures = d.get("failures") if isinstance(d.get("failures"), dict) else {}
        return cls(ok=bool(d.get("ok")), answer=d.get("answer") or "", program=d.get("program") or "",
                   attempts=attempts, calls=calls, usage=usage, tools=list(d.get("tools") or []),
                   sandbox=d.get("sandbox"), duration_ms=float(d.get("duration_ms") or 0.0), error=d.get("error"),
                   query=d.get("query") or "", model=d.get("model"), retriever=d.get("retriever"),
                   strategy=str(d.get("strategy") or DEFAULT), steps=int(d.get("steps") or len(attempts)),
                   step_unit=str(d.get("step_unit") or "step"),
                   api_calls=int(d.get("api_calls") or 0), trace=d.get("trace"),
                   failures={str(k): int(v) for k, v in (failures or {}).items()},
                   requested=[r for r in d.get("requested") or [] if isinstance(r, dict)],
                   settings=d.get("settings") if isinstance(d.get("settings"), dict) else None,
                   writes=[w for w in d.get("writes") or [] if isinstance(w, dict)],
                   write_policy=str(d.get("write_policy") or "allow"),
                   write_counts={str(k): int(v) for k, v in (d.get("write_counts") or {}).items()},
                   value=d.get("value"))

    @classmethod
    def failed(cls, query: str, exc: BaseException, *, duration_ms: float = 0.0,
               strategy: str | None = None) -> Solution:
        """A task that could not be attempted at all (used by ``solve_many`` to keep a batch going)."""
        error: dict[str, Any] = (exc.to_dict() if isinstance(exc, AtcError)
                                 else {"type": type(exc).__name__, "message": str(exc)})
        error.setdefault("line", None)
        error.setdefault("tool", None)
        return cls(ok=False, answer="", program="", error=error, duration_ms=duration_ms, query=query,
                   strategy=strategy or DEFAULT)


# -- the tools shown ----------------------------------------------------------------------------


#: Retrievers that rank without a model: when every tool fits in what the model is shown, none runs.
_LEXICAL = (None, "auto", "bm25", "dense", "hybrid")


def choose_tools(query: str, toolset: Toolset, top_k: int | None = None, *,
                 retriever: str | Retriever | None = None, client: ModelClient | None = None) -> list[Tool]:
    """The tools shown to the model: all of them, or the ``top_k`` (default 20) most relevant
    to the query when there are more (the first ``top_k`` if nothing matches). ``retriever``
    is a registered name (None: automatic, see ``atc.retrieval.api``) or a ``Retriever``; a
    model-backed one uses ``client``."""
    return choose(query, toolset, top_k, retriever=retriever, client=client)[0]


def choose(query: str, toolset: Toolset, top_k: int | None = None, *, retriever: str | Retriever | None = None,
           client: ModelClient | None = None) -> tuple[list[Tool], SearchResult | None, Retriever | None]:
    """``choose_tools``, the search result (None when every tool was shown) and the retriever
    that ran (one that can reflect reopens its search after a failed attempt).

    A retriever without a model runs only when the collections hold more than ``top_k`` tools;
    a model-backed one (Re-Invoke, AnyTool) or a ``Retriever`` object runs whenever asked for."""
    everything = list(toolset.tools.values())
    k = top_k or DEFAULT_TOP_K
    if isinstance(retriever, str):
        load_builtins()
        factory(retriever)  # an unknown name is a usage error even when no search is needed
    if retriever in _LEXICAL and len(everything) <= k:
        return everything, None, None
    finder: Retriever
    if retriever is None or isinstance(retriever, str):
        options: dict[str, Any] = {"client": client} if client is not None else {}
        # one corpus per set of tools and process: the tasks of a batch share it (inmemory.py)
        finder = make_retriever(retriever, shared_corpus(everything, home=atc_home()), **options)
    else:
        finder = retriever
    tools, result = select(query, everything, finder, k)
    return tools, result, finder



# -- solving ------------------------------------------------------------------------------------


def _check(query: str, max_reflections: int) -> None:
    if not query or not query.strip():
        raise UsageError("the task is empty", hint='example: atc solve "Which books did Stanislaw Lem write?" --tools spec.json')
    if max_reflections < 0:
        raise UsageError("--max-reflections must be 0 or more")


def _progress(on_step: StepHook | None, on_attempt: AttemptHook | None) -> StepHook | None:
    """One hook for the episode: ``on_step`` for every step, ``on_attempt`` for chain's attempts."""
    if on_attempt is None:
        return on_step

    def report(step: Step) -> None:
        if on_step is not None:
            on_step(step)
        if isinstance(step.detail, Attempt):
            on_attempt(step.detail, step.number)

    return report


P = ParamSpec("P")


# Here rather than in atc.tracing: it reads a Solution, and atc.tracing sits below this module.
def _solve_span(fn: Callable[P, Solution]) -> Callable[P, Solution]:
    """``solve`` inside an ``atc.solve`` span carrying the outcome, the attempts, the
    tokens and the attributed tool (a plain call when tracing is off)."""

    @functools.wraps(fn)
    def traced(*args: P.args, **kwargs: P.kwargs) -> Solution:
        if not tracing.enabled():
            return fn(*args, **kwargs)
        query = args[0] if args else kwargs.get("query")
        with tracing.span("atc.solve", {"atc.query": str(query)[:500], "gen_ai.operation.name": "invoke_agent",
                                        "gen_ai.agent.name": "atc", "gen_ai.provider.name": tracing.PROVIDER}) as current:
            solution = fn(*args, **kwargs)
            tracing.set_attributes(current, {
                "gen_ai.request.model": solution.model, "gen_ai.usage.input_tokens": solution.usage.prompt_tokens,
                "gen_ai.usage.output_tokens": solution.usage.completion_tokens,
                "atc.status": "ok" if solution.ok else "failed", "atc.attempts": len(solution.attempts),
                "atc.strategy": solution.strategy, "atc.steps": solution.steps, "atc.api_calls": solution.api_calls,
                "atc.prompt_tokens": solution.usage.prompt_tokens,
                "atc.completion_tokens": solution.usage.completion_tokens,
                "atc.llm_calls": solution.usage.llm_calls, "atc.attributed_tool": (solution.error or {}).get("tool"),
                "atc.duration_ms": solution.duration_ms})
            return solution

    return traced


@_solve_span
def solve(
    query: str,
    tools: ToolsArg,
    *,
    model: str | None = None,
    client: ModelClient | None = None,
    max_reflections: int = 3,
    limits: Limits | None = None,
    sandbox: str | Backend | None = None,
    base_url: BaseUrl = None,
    credentials: dict[str, str] | None = None,
    top_k: int | None = None,
    on_attempt: AttemptHook | None = None,
    backend: str | Backend | None = None,
    validation: Validation = None,
    retriever: str | Retriever | None = None,
    strategy: str | Strategy | Choice | None = None,
    max_model_calls: int | None = None,
    max_tokens: int | None = None,
    max_steps: int | None = None,
    on_step: StepHook | None = None,
    writes: WritesArg = None,
    approve: Approver | None = None,
    answer: Any = None,
) -> Solution:
    """Solve ``query`` with ``tools`` (a Collection, a list of them, a Toolset, a spec path, an
    imported collection name, Python functions) by ``strategy`` (a registered name, default ``chain``;
    ``NAME@k`` reruns it up to k times until it answers; a ``Choice`` of
    ``atc.loop.strategies.choose`` with its settings; or a ``Strategy``) in ``sandbox`` (``"docker"``, ``"local"``, auto when None, or a ``Backend``;
    ``backend`` is its deprecated name). ``base_url`` and ``credentials`` are the tools'
    (``--base-url``, ``--credential``; ``base_url`` may map collection names to URLs) and
    ``validation`` their argument checks (``strict``, ``warn``, ``off``, or per collection); the
    model comes from ``client``, else ``model`` and the environment. A missing server URL, an
    unusable credential or an unknown strategy is an error before the model is asked anything.

    ``max_model_calls`` and ``max_tokens`` bound what the solve spends on the model (every
    strategy, retriever included); ``max_reflections`` is ``chain``'s repairs and ``max_steps``
    the attempts, turns or nodes of any strategy (each has its default). ``on_step(step)`` is
    called after each step and ``on_attempt(attempt, number)`` after each of ``chain``'s attempts
    (progress output). ``retriever`` (a registered name, None: automatic, or a ``Retriever``)
    picks the tools shown when there are more than ``top_k`` (a model-backed one always runs);
    one that can reflect (AnyTool) reopens its search after a failed ``chain`` attempt.

    ``writes`` is the write policy (``"allow"``, the default; ``"deny"``: read-only; ``"ask"``:
    each write goes to ``approve(request) -> bool``, or to the person at the terminal) or a
    ``Writes`` whose ledger the caller keeps (a batch task across resumes). Every attempt, turn
    and node of the solve shares one write ledger: a write is sent once per task
    (``docs/writes.md``).

    ``answer`` asks for a typed answer (``atc.loop.answers``: a pydantic model, a dataclass, a type
    such as ``list[int]``, or a JSON Schema): the program hands it to ``final_answer(value)``, it
    is checked against the schema (a mismatch is a failed attempt, repaired like any), and
    ``Solution.value`` holds it."""
    started = time.perf_counter()
    _check(query, max_reflections)
    spec = None
    if answer is not None:
        spec = AnswerSpec.of(answer)
    plan = resolve(strategy, max_reflections=max_reflections, max_steps=max_steps)
    budget = Budget(max_model_calls, max_tokens)
    toolset = task_writes(tracing.wrap_toolset(toolset_for(tools, base_url, credentials, validation)), writes,
                          approve)
    check_toolset(toolset)
    if client is None:
        configured_settings(model)  # a missing model configuration is said before anything starts
    if client is None and retriever not in _LEXICAL:
        client = make_client(model)  # a model-based retriever asks the model before the strategy starts
    shown, searched, finder = choose(query, toolset, top_k, retriever=retriever, client=client)
    limits = limits or Limits()
    choice = pick_sandbox(sandbox, backend)
    # A strategy that runs programs gets its sandbox ready (backend made, runners starting) while
    # the model client loads and the model writes: loading the openai package alone takes a second.
    pending = prepare(choice, limits) if getattr(plan, "uses_sandbox", False) else None
    meter = Meter(client if client is not None else make_client(model), budget)
    if searched is not None:  # what a model-based retriever spent counts as the solve's
        meter.charge(searched.usage)
    episode = Episode(query, toolset, shown, meter, limits, sandbox=choice, retriever=finder,
                      top_k=top_k or DEFAULT_TOP_K, on_step=_progress(on_step, on_attempt), pending=pending,
                      answer=spec)
    outcome = plan.run(episode)
    return Solution(
        ok=outcome.ok, answer=outcome.answer, program=outcome.program, attempts=list(outcome.attempts),
        calls=list(outcome.calls), usage=meter.usage,
        tools=outcome.tools if outcome.tools is not None else [t.name for t in shown],
        sandbox=episode.sandbox_name, duration_ms=(time.perf_counter() - started) * 1000, error=outcome.error,
        query=query, model=getattr(meter.client, "model", None),
        retriever=searched.retriever if searched is not None else None, strategy=plan.name, steps=outcome.steps,
        step_unit=str(getattr(plan, "step_unit", "step")),
        api_calls=len(episode.calls), trace=outcome.trace, failures=episode.failures_by_kind(),
        value=outcome.value if outcome.ok else None,
        requested=requested_calls(episode, outcome.calls), settings=_settings_of(plan),
        writes=_writes_of(toolset), write_policy=toolset.writes.policy.mode if toolset.writes else "allow",
        write_counts=_outcomes(episode.calls))


def _settings_of(plan: Strategy) -> dict[str, Any] | None:
    """The settings a strategy ran with, as JSON (``NAME@k``: the inner one's, and k)."""
    inner = getattr(plan, "inner", None)
    own: Any = getattr(inner if inner is not None else plan, "settings", None)
    doc = own.to_dict() if own is not None and callable(getattr(own, "to_dict", None)) else None
    if inner is not None:
        return {"runs": getattr(plan, "runs", 1), **(doc or {})}
    return doc


def _outcomes(calls: list[ToolCall]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for call in calls:
        if call.write:
            counts[str(call.outcome)] = counts.get(str(call.outcome), 0) + 1
    return dict(sorted(counts.items()))


def _writes_of(toolset: Toolset) -> list[dict[str, Any]]:
    ledger = toolset.writes.ledger if toolset.writes is not None else None
    return ledger.to_dict()["writes"] if ledger is not None else []


async def asolve(
    query: str,
    tools: ToolsArg,
    *,
    model: str | None = None,
    client: ModelClient | None = None,
    max_reflections: int = 3,
    limits: Limits | None = None,
    sandbox: str | Backend | None = None,
    base_url: BaseUrl = None,
    credentials: dict[str, str] | None = None,
    top_k: int | None = None,
    on_attempt: AttemptHook | None = None,
    backend: str | Backend | None = None,
    validation: Validation = None,
    retriever: str | Retriever | None = None,
    strategy: str | Strategy | Choice | None = None,
    max_model_calls: int | None = None,
    max_tokens: int | None = None,
    max_steps: int | None = None,
    on_step: StepHook | None = None,
    writes: WritesArg = None,
    approve: Approver | None = None,
    answer: Any = None,
) -> Solution:
    """``solve`` without blocking the event loop (it runs in a worker thread, so many tasks can
    be awaited together; see ``atc.solve_many`` for a bounded batch).

    Args:
        query: the task, in words.
        tools: as for ``atc.solve``; the other keywords are ``atc.solve``'s.

    Returns:
        The ``Solution``.

    Raises:
        UsageError, NotFound, ConfigError, ModelError, SandboxError: as ``atc.solve``.
    """
    return await asyncio.to_thread(
        solve, query, tools, model=model, client=client, max_reflections=max_reflections, limits=limits,
        sandbox=pick_sandbox(sandbox, backend), base_url=base_url, credentials=credentials, top_k=top_k,
        on_attempt=on_attempt, validation=validation, retriever=retriever, strategy=strategy,
        max_model_calls=max_model_calls, max_tokens=max_tokens, max_steps=max_steps, on_step=on_step,
        writes=writes, approve=approve,
        answer=answer,
    )
