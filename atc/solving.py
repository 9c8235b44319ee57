"""The main job: a model writes one program that chains the tools, the sandbox runs it, and
attributable reflection repairs it (ATC paper, sections 3.2-3.3).

One attempt is one model reply. An attempt fails when the reply holds no program
(``NoProgram``), the program fails a static check (``SyntaxError``, ``NameError`` or
``ToolError`` found before running: no sandbox run is spent, the attempt's ``result`` is None),
the run raises, or the run succeeds but prints nothing (``EmptyAnswer``). After a failure the
model gets the error and, when a tool is to blame, that tool's full protocol and what it really
returned (``atc.reflection``), up to ``max_reflections`` times. Every attempt is recorded in
``Solution.attempts`` in order, including the ones that never reached the sandbox.

Failures that are the model's fault are recorded and fed back; failures that are ours or the
environment's (no model configured, model server down, sandbox engine gone) are raised.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atc import prompts
from atc.checks import check_program
from atc.errors import AtcError, ModelError, UsageError
from atc.extract import extract_program
from atc.model import Completion, Message, ModelClient, configured_settings, make_client
from atc.reflection import ask_model_for_tool, feedback, needs_model_attribution
from atc.workflows import tracing
from protocols.model import Collection, Tool
from sandbox.api import Backend, ExecutionResult, Limits, ToolCall, Toolset
from sandbox.execute import BaseUrl, Validation, pick_sandbox, prepare

if TYPE_CHECKING:
    from atc.retrieval.base import Retriever, SearchResult

__all__ = ["Usage", "Attempt", "Solution", "solve", "asolve", "solve_many", "choose_tools", "DEFAULT_TOP_K"]

#: Tools shown to the model when the collections hold more (the ATC paper gives 20 candidates).
DEFAULT_TOP_K = 20

ToolsArg = Toolset | Collection | Sequence[Collection] | str | Path
AttemptHook = Callable[["Attempt", int], None]
#: ``on_result(index, solution)`` of ``solve_many``: called as each task finishes.
ResultHook = Callable[[int, "Solution"], None]


@dataclass
class Usage:
    """Model usage of one solve: HTTP requests the model server saw, and tokens it reported."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, completion: Completion) -> None:
        self.llm_calls += completion.requests
        self.prompt_tokens += completion.prompt_tokens
        self.completion_tokens += completion.completion_tokens

    def merge(self, counts: dict[str, int]) -> None:
        """Add a retriever's model usage (``SearchResult.usage``)."""
        self.llm_calls += counts.get("llm_calls", 0)
        self.prompt_tokens += counts.get("prompt_tokens", 0)
        self.completion_tokens += counts.get("completion_tokens", 0)

    def to_dict(self) -> dict[str, int]:
        return {"llm_calls": self.llm_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens}


@dataclass
class Attempt:
    """One model reply and what became of it. ``program`` is "" when the reply held none;
    ``result`` is None when nothing ran (no program, or a static check caught it);
    ``blamed_tool`` is the tool the failure was attributed to (by the run or by the model)."""

    program: str
    ok: bool
    error: dict[str, Any] | None
    result: ExecutionResult | None = None
    blamed_tool: str | None = None
    reply: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "program": self.program,
            "ok": self.ok,
            "error": self.error,
            "blamed_tool": self.blamed_tool,
            "sandbox": self.result.sandbox if self.result else None,
            "duration_ms": round(self.result.duration_ms, 3) if self.result else None,
            "calls": len(self.result.calls) if self.result else 0,
        }
        if not self.program:
            d["reply"] = self.reply[:2000]  # what the model said instead of a program
        return d


@dataclass
class Solution:
    """The outcome of ``solve``; ``to_dict()`` is ``atc solve --json``. ``answer``, ``calls`` and
    ``error`` are the last attempt's; ``sandbox`` names the backend of the last run (None when
    no program ever ran); ``duration_ms`` is the whole solve, model time included."""

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "answer": self.answer,
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
        return cls(ok=bool(d.get("ok")), answer=d.get("answer") or "", program=d.get("program") or "",
                   attempts=attempts, calls=calls, usage=usage, tools=list(d.get("tools") or []),
                   sandbox=d.get("sandbox"), duration_ms=float(d.get("duration_ms") or 0.0), error=d.get("error"),
                   query=d.get("query") or "", model=d.get("model"))

    @classmethod
    def failed(cls, query: str, exc: BaseException, *, duration_ms: float = 0.0) -> Solution:
        """A task that could not be attempted at all (used by ``solve_many`` to keep a batch going)."""
        error: dict[str, Any] = (exc.to_dict() if isinstance(exc, AtcError)
                                 else {"type": type(exc).__name__, "message": str(exc)})
        error.setdefault("line", None)
        error.setdefault("tool", None)
        return cls(ok=False, answer="", program="", error=error, duration_ms=duration_ms, query=query)


# -- inputs -----------------------------------------------------------------------------------


def _collections(tools: ToolsArg) -> list[Collection]:
    if isinstance(tools, Collection):
        return [tools]
    if isinstance(tools, (str, Path)):
        tools = [tools]  # type: ignore[list-item]
    out: list[Collection] = []
    for item in tools:  # type: ignore[union-attr]
        if isinstance(item, Collection):
            out.append(item)
        elif isinstance(item, str) and _is_mcp(item):
            from sandbox.execute import sources_to_collections

            out += sources_to_collections(item)
        elif isinstance(item, (str, Path)):
            out.append(_load(item))
        else:
            raise UsageError(f"tools must be Collections, spec paths or collection names, not {type(item).__name__}")
    if not out:
        raise UsageError("no tools given", hint="pass a Collection, a spec path or an imported collection name")
    return out


def _is_mcp(item: str) -> bool:
    from sandbox.mcp.sources import is_mcp_source

    return is_mcp_source(item)


def _load(item: str | Path) -> Collection:
    path = Path(item).expanduser()
    if path.exists():
        from protocols.loaders import load_spec

        return load_spec(path)
    from atc.config import atc_home
    from protocols.store import Store

    return Store(atc_home()).get(str(item))


def _toolset(tools: ToolsArg, base_url: BaseUrl, credentials: dict[str, str] | None,
             validation: Validation = None) -> Toolset:
    from sandbox.execute import as_toolset

    return as_toolset(tools if isinstance(tools, Toolset) else _collections(tools), base_url=base_url,
                      credentials=credentials or None, validation=validation)


def _lenient(toolset: Toolset) -> frozenset[str]:
    """Tools whose arguments the gateway does not refuse (validation warn/off)."""
    return frozenset(name for name in toolset.tools if toolset.validation_for(name) != "strict")


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
    from atc.retrieval.api import load_builtins

    everything = list(toolset.tools.values())
    k = top_k or DEFAULT_TOP_K
    if isinstance(retriever, str):
        from atc.retrieval.base import factory

        load_builtins()
        factory(retriever)  # an unknown name is a usage error even when no search is needed
    if retriever in _LEXICAL and len(everything) <= k:
        return everything, None, None
    from atc.retrieval.select import select

    finder: Retriever
    if retriever is None or isinstance(retriever, str):
        from atc.config import atc_home
        from atc.retrieval.api import make_retriever
        from atc.retrieval.corpus import MemoryCorpus

        options: dict[str, Any] = {"client": client} if client is not None else {}
        finder = make_retriever(retriever, MemoryCorpus(everything, home=atc_home()), **options)
    else:
        finder = retriever
    tools, result = select(query, everything, finder, k)
    return tools, result, finder


# -- one attempt ------------------------------------------------------------------------------


def _run(program: str, toolset: Toolset, limits: Limits, backend: Backend) -> ExecutionResult:
    from sandbox.execute import run

    with tracing.span("atc.sandbox.run", {"atc.sandbox": getattr(backend, "name", None)}) as current:
        result = run(program, toolset, limits, sandbox=backend)
        tracing.set_attributes(current, {
            "atc.status": "ok" if result.ok else "failed", "atc.duration_ms": result.duration_ms,
            "atc.calls": len(result.calls), "atc.error.type": result.error.type if result.error else None,
            "atc.attributed_tool": result.error.tool if result.error else None})
        return result


def _simple_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": kind, "message": message, "line": None, "tool": None, "traceback": "",
            "col": None, "code": None, "attribution": None}


def _attempt(reply: str, toolset: Toolset, limits: Limits, backend: Backend) -> Attempt:
    program = extract_program(reply, toolset.names())
    if program is None:
        return Attempt("", False, _simple_error("NoProgram", "the reply contained no Python program"), reply=reply)
    static = check_program(program, toolset.tools, lenient=_lenient(toolset))
    if static is not None:
        return Attempt(program, False, static, blamed_tool=static.get("tool"), reply=reply)
    result = _run(program, toolset, limits, backend)
    if not result.ok:
        error = result.error.to_dict() if result.error else _simple_error("SandboxError", "the run failed")
        return Attempt(program, False, error, result, blamed_tool=error.get("tool"), reply=reply)
    if not result.answer.strip():
        return Attempt(program, False, _simple_error("EmptyAnswer", "the program printed nothing"), result, reply=reply)
    return Attempt(program, True, None, result, reply=reply)


def _blame(
    attempt: Attempt, query: str, client: ModelClient, toolset: Toolset, shown: list[Tool], usage: Usage
) -> tuple[Tool | None, str | None]:
    """The tool to show in full with the feedback (see ``atc.reflection`` for the order)."""
    error = attempt.error or {}
    named = error.get("tool")
    if isinstance(named, str) and named in toolset.tools:
        return toolset.tools[named], (error.get("attribution") or {}).get("reason")
    if not needs_model_attribution(attempt.program, error, toolset.names()):
        return None, None
    in_program = [t for t in toolset.tools.values() if re.search(rf"\b{re.escape(t.name)}\s*\(", attempt.program)]
    picked, completion = ask_model_for_tool(client, query, attempt.program, error, in_program or shown)
    usage.add(completion)
    if picked is None or picked not in toolset.tools:
        return None, None
    return toolset.tools[picked], "named by the model (the run did not attribute the error to a tool)"


def _assistant_turn(attempt: Attempt) -> Message:
    """What the model "said", as kept in the conversation: the program it wrote (so that reasoning
    and prose do not pile up across reflections), or its reply when it wrote none."""
    if attempt.program:
        return {"role": "assistant", "content": f"```python\n{attempt.program.rstrip()}\n```"}
    return {"role": "assistant", "content": attempt.reply[-4000:] or "(empty reply)"}


def _complete(client: ModelClient, messages: list[Message]) -> Completion:
    with tracing.span("atc.model", {"atc.model": getattr(client, "model", None)}) as current:
        completion = client.complete(messages)
        tracing.set_attributes(current, {"atc.prompt_tokens": completion.prompt_tokens,
                                         "atc.completion_tokens": completion.completion_tokens})
        return completion


# -- the loop ---------------------------------------------------------------------------------


@tracing.solve_span
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
) -> Solution:
    """Solve ``query`` with ``tools`` (a Collection, a list of them, a Toolset, a spec path or
    an imported collection name) in ``sandbox`` (``"docker"``, ``"local"``, auto when None, or a
    ``Backend``; ``backend`` is its deprecated name). ``base_url`` and ``credentials`` are the tools' (``--base-url``,
    ``--credential``; ``base_url`` may map collection names to URLs) and ``validation`` their
    argument checks (``strict``, ``warn``, ``off``, or per collection); the model comes from
    ``client``, else ``model`` and the environment. A missing server URL or an unusable credential
    is a ``ConfigError`` before the model is asked anything.
    ``on_attempt(attempt, number)`` is called after each attempt (for progress output).
    ``retriever`` (a registered name, None: automatic, or a ``Retriever``) picks the tools shown
    when there are more than ``top_k`` (a model-backed one always runs); one that can reflect
    (AnyTool) reopens its search after a failed attempt (``atc.retrieval.select``).
    ``Solution.retriever`` says which ran."""
    started = time.perf_counter()
    if not query or not query.strip():
        raise UsageError("the task is empty", hint='example: atc solve "Which books did Stanislaw Lem write?" --tools spec.json')
    if max_reflections < 0:
        raise UsageError("--max-reflections must be 0 or more")
    toolset = tracing.wrap_toolset(_toolset(tools, base_url, credentials, validation))
    from sandbox.execute import check_toolset

    check_toolset(toolset)
    if client is None:
        configured_settings(model)  # a missing model configuration is said before anything starts
    if client is None and retriever not in _LEXICAL:
        client = make_client(model)  # a model-based retriever asks the model before the program is written
    shown, searched, finder = choose(query, toolset, top_k, retriever=retriever, client=client)
    limits = limits or Limits()
    # The sandbox gets ready (backend made, runners starting) while the model client loads and the
    # model writes: loading the openai package alone takes about a second.
    pending = prepare(pick_sandbox(sandbox, backend), limits)
    if client is None:
        client = make_client(model)
    runner = pending.backend()
    usage = Usage()
    from protocols.render import render_compact

    messages: list[Message] = [
        {"role": "system", "content": prompts.render("system")},
        {"role": "user", "content": prompts.render("generate", tools=render_compact(shown).strip(), task=query.strip())},
    ]
    usage = Usage()
    if searched is not None:  # what a model-based retriever spent counts as the solve's
        usage.merge(searched.usage)
    attempts: list[Attempt] = []
    sandbox_name: str | None = None
    model_error: ModelError | None = None
    for number in range(1, max_reflections + 2):
        attempt_span = tracing.span("atc.attempt", {"atc.attempt": number})
        current = attempt_span.__enter__()
        try:
            completion = _complete(client, messages)
        except ModelError as exc:
            attempt_span.__exit__(None, None, None)
            if not attempts:  # nothing to keep: the caller (the CLI) reports it as it is
                raise
            model_error = exc  # keep the attempts made so far instead of losing them
            break
        usage.add(completion)
        try:
            attempt = _attempt(completion.text, toolset, limits, runner)
            tracing.set_attributes(current, {"atc.status": "ok" if attempt.ok else "failed",
                                             "atc.error.type": (attempt.error or {}).get("type"),
                                             "atc.attributed_tool": attempt.blamed_tool})
        finally:
            attempt_span.__exit__(None, None, None)
        attempts.append(attempt)
        if attempt.result is not None:
            sandbox_name = attempt.result.sandbox
        last = number == max_reflections + 1
        if attempt.ok or last:
            if on_attempt:
                on_attempt(attempt, number)
            break
        try:
            blamed, reason = _blame(attempt, query, client, toolset, shown, usage)
        except ModelError as exc:
            model_error = exc
            if on_attempt:
                on_attempt(attempt, number)
            break
        attempt.blamed_tool = blamed.name if blamed else None
        if on_attempt:
            on_attempt(attempt, number)
        messages.append(_assistant_turn(attempt))
        text = feedback(number, attempt.program, attempt.error or {}, blamed=blamed, reason=reason, result=attempt.result)
        if finder is not None and callable(getattr(finder, "reflect", None)):
            from atc.retrieval.select import reopen, reopened_text

            reopened = reopen(finder, attempt.error, attempt.blamed_tool, attempt.result.calls
                              if attempt.result else [], list(toolset.tools.values()), top_k or DEFAULT_TOP_K)
            if reopened:  # the retriever widened its search: the model sees the new tool set
                usage.merge(reopened[1].usage)
                text, shown = text + "\n\n" + reopened_text(shown, reopened[0]), reopened[0]
        messages.append({"role": "user", "content": text})

    final = attempts[-1]
    error = final.error
    if model_error is not None:
        error = {**model_error.to_dict(), "line": None, "tool": None,
                 "message": f"the model failed after {len(attempts)} attempt(s): {model_error.message}"}
    return Solution(
        ok=final.ok and model_error is None,
        answer=final.result.answer if final.result else "",
        program=final.program,
        attempts=attempts,
        calls=list(final.result.calls) if final.result else [],
        usage=usage,
        tools=[t.name for t in shown],
        sandbox=sandbox_name,
        duration_ms=(time.perf_counter() - started) * 1000,
        error=error,
        query=query,
        model=getattr(client, "model", None),
        retriever=searched.retriever if searched is not None else None,
    )


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
) -> Solution:
    """``solve`` without blocking the event loop (it runs in a worker thread, so many tasks can
    be awaited together; see ``solve_many`` for a bounded batch)."""
    return await asyncio.to_thread(
        solve, query, tools, model=model, client=client, max_reflections=max_reflections, limits=limits,
        sandbox=pick_sandbox(sandbox, backend), base_url=base_url, credentials=credentials, top_k=top_k,
        on_attempt=on_attempt, validation=validation, retriever=retriever,
    )


def solve_many(
    queries: Sequence[str],
    tools: ToolsArg,
    *,
    concurrency: int = 8,
    ids: Sequence[str | int] | None = None,
    out: str | Path | None = None,
    on_result: ResultHook | None = None,
    executor: str = "local",
    record: str | Path | None = None,
    replay: str | Path | None = None,
    **kw: Any,
) -> list[Solution]:
    """Solve many tasks at once, at most ``concurrency`` at a time (so at most that many
    sandboxes run together); results come back in the order of ``queries``. A task that raises
    becomes a ``Solution`` with ``ok`` False and the error, never sinking the batch. Missing model
    configuration is raised at once, since no task could run.

    ``out``: a JSON Lines file where each finished task's line (``{"id", ...solve --json}``) is
    appended and fsynced as it finishes; tasks whose id is already there are not run again (their
    Solution is read back from the file), so an interrupted call resumes where it stopped. ``ids``
    name the tasks (default: their index). ``on_result(index, solution)`` is called as each task
    finishes (progress). ``executor``: ``"local"`` (threads here) or ``"ray"`` (a Ray cluster:
    ``RAY_ADDRESS``, else a local one; the model client is made on each worker from ``model`` and
    its environment). ``record``/``replay``: a directory to record the tools' and the model's
    answers into, or to answer from (``atc.workflows.replay``). Other keywords are ``solve``'s."""
    from atc.workflows.batch import run_batch
    from atc.workflows.jobs import Job, Outcome
    from atc.workflows.outfile import ResultLog
    from atc.workflows.tasks import Task

    if concurrency < 1:
        raise UsageError("concurrency must be at least 1")
    if ids is not None and len(ids) != len(queries):
        raise UsageError(f"ids has {len(ids)} items for {len(queries)} queries")
    names = list(ids) if ids is not None else list(range(len(queries)))
    if len({str(i) for i in names}) != len(names):
        raise UsageError("ids must be unique")
    toolset = _toolset(tools, kw.pop("base_url", None), kw.pop("credentials", None), kw.pop("validation", None))
    sandbox = pick_sandbox(kw.pop("sandbox", None), kw.pop("backend", None))
    named = {k: kw.pop(k) for k in ("model", "client", "max_reflections", "limits", "top_k", "on_attempt") if k in kw}
    job = Job(toolset, named.get("limits") or Limits(), sandbox=sandbox,
              model=named.get("model"), max_reflections=named.get("max_reflections", 3), top_k=named.get("top_k"),
              record=str(record) if record else None, replay=str(replay) if replay else None,
              client=named.get("client"), on_attempt=named.get("on_attempt"), solve_options=kw)
    tasks = [Task(name, query=query) for name, query in zip(names, queries, strict=True)]
    if not tasks:
        return []
    results: list[Solution | None] = [None] * len(tasks)

    def finished(index: int, outcome: Outcome) -> None:
        assert isinstance(outcome.result, Solution)
        results[index] = outcome.result
        if on_result is not None:
            on_result(index, outcome.result)

    log = ResultLog(out) if out is not None else None
    try:
        run_batch(tasks, job, log=log, concurrency=concurrency, executor=executor, on_outcome=finished)
    finally:
        if log is not None:
            log.close()
    for index, task in enumerate(tasks):
        if results[index] is None and log is not None and task.key in log.done:
            results[index] = Solution.from_dict(log.done[task.key])
    return [r if r is not None else Solution.failed(t.query or "", UsageError("not run"))
            for r, t in zip(results, tasks, strict=True)]
