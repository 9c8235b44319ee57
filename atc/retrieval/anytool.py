"""AnyTool: hierarchical, self-reflective retrieval by agents that call functions (Du et al. 2024).

A meta-agent reads the categories and hands the relevant ones to category agents; each category
agent hands groups of at most five tools to tool agents; tool agents read APIs and add the
relevant ones to one shared candidate pool (capped at 64), asking ``check_if_request_solvable``
(one plain model call) when they think the pool may suffice. Agents run concurrently in
threads; a "yes" stops them all. Each agent keeps its own conversation and its status; only
agents that called ``finish_search`` are finished.

``reflect(reason, ...)`` is the self-reflection step: after a failed solve the tools to blame are
dropped from the pool when the failure shows them broken (404/410/5xx, no such endpoint), and
the agents that are not finished are re-activated with the reason, tool agents first, then
category agents, then the meta-agent (stopping as soon as the pool is judged enough).

Hard bounds make a misbehaving model harmless: turns per agent and per activation, the number of
agents, and model calls per retrieval round (``AnyToolSettings``). An unknown function, arguments
that are not JSON, or a reply without a function call are answered with what went wrong (and
recorded in ``notes``); a model server failure ends the agent. The search then returns what the
pool holds, or BM25's choice with a note when the pool is empty.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from atc import prompts
from atc.errors import ConfigError, ModelError, UsageError
from atc.llm.chat import Completion, Message, ModelClient, ToolCallRequest
from atc.retrieval.anytool_functions import (
    FUNCTIONS,
    MAX_DETAILS,
    Catalog,
    Pool,
    describe_tools,
    list_tools,
    names_arg,
    schemas,
)
from atc.retrieval.base import Hit, SearchResult, register
from atc.retrieval.select import corpus_tools, lexical_choice
from protocols.model import Tool
from protocols.render import render_full

__all__ = ["AnyTool", "AnyToolSettings", "Agent", "make"]

_REFLECT_ASK = {
    "tool": "Analyse this and look for other APIs among your tools; if they have none, call finish_search.",
    "category": "Consider assigning more of the unexplored tools to agents.",
    "meta": "Consider assigning more of the unexplored categories to agents.",
}


@dataclass(frozen=True)
class AnyToolSettings:
    """The bounds of one retrieval. ``max_calls`` counts model requests per round (the search,
    and each reflection), ``max_seconds`` its wall clock (no new request starts after it);
    ``max_turns`` replies per agent per activation."""

    pool_cap: int = 64
    max_turns: int = 8
    max_agents: int = 32
    max_calls: int = 120
    tools_per_agent: int = 5
    concurrency: int = 8
    max_seconds: float = 300.0


@dataclass
class Agent:
    """One agent: its level (``meta``, ``category``, ``tool``), its scope, its conversation and
    its status (``new``, ``running``, ``finished``, ``stopped`` by a solvable pool, ``turns``
    or ``budget`` when a bound ended it, ``error`` when the model server failed)."""

    level: str
    label: str
    category: str = ""
    groups: tuple[str, ...] = ()
    messages: list[Message] = field(default_factory=list)
    status: str = "new"

    @property
    def finished(self) -> bool:
        return self.status == "finished"


class AnyTool:
    """The retriever. ``client`` is required (it is the model that searches)."""

    name = "anytool"

    def __init__(self, tools: Sequence[Tool], client: ModelClient, settings: AnyToolSettings | None = None) -> None:
        self.tools = list(tools)
        self.client = client
        self.settings = settings or AnyToolSettings()
        self.catalog = Catalog(self.tools)
        self.pool = Pool(cap=self.settings.pool_cap)
        self.agents: list[Agent] = []
        self.query = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._futures: list[Future[None]] = []
        self._executor: ThreadPoolExecutor | None = None
        self._calls_left = 0
        self._deadline = 0.0
        self._usage = _zero()
        self._notes: list[str] = []

    # -- the two entry points -----------------------------------------------------------------

    def search(self, query: str, k: int = 5) -> SearchResult:
        """The candidate pool for ``query``: all of it (at most ``pool_cap``), whatever ``k``;
        ``k`` applies to the BM25 fallback when the agents added nothing."""
        self.query = query
        self.pool = Pool(cap=self.settings.pool_cap)
        meta = Agent("meta", "meta", messages=[
            {"role": "system", "content": prompts.render("anytool_meta", categories=self.catalog.listing())},
            {"role": "user", "content": f"Query: {query}"}])
        self.agents = [meta]
        self._begin()
        self._activate([meta])
        return self._result(k, fallback=True)

    def reflect(self, reason: str, blamed: str | None = None, *, broken: bool = False, k: int = 5) -> SearchResult | None:
        """Self-reflection after a failed solve: drop ``blamed`` from the pool when ``broken``,
        re-activate the unfinished agents with ``reason`` (tool, then category, then meta
        level) and return the new pool with this round's usage; None before any search."""
        if not self.agents:
            return None
        self._begin()
        if blamed and broken and self.pool.drop(blamed, "it failed in the solve") is not None:
            self._note(f"dropped {blamed} from the pool: {reason[:160]}")
        for level in ("tool", "category", "meta"):
            if self._stop.is_set():
                break
            with self._lock:
                waiting = [a for a in self.agents if a.level == level and not a.finished]
            for agent in waiting:
                ask = _REFLECT_ASK[level]
                agent.messages.append({"role": "user", "content": prompts.render("anytool_reflect", reason=reason,
                                                                                   ask=ask)})
            self._activate(waiting)
        return self._result(k, fallback=False)

    # -- running agents -----------------------------------------------------------------------

    def _begin(self) -> None:
        self._stop.clear()
        self._calls_left = self.settings.max_calls
        self._deadline = time.monotonic() + self.settings.max_seconds
        self._usage = _zero()
        self._notes = []

    def _activate(self, agents: list[Agent]) -> None:
        """Run ``agents`` (and every agent they create) to the end, concurrently."""
        if not agents:
            return
        with ThreadPoolExecutor(max_workers=self.settings.concurrency, thread_name_prefix="atc-anytool") as ex:
            self._executor = ex
            try:
                for agent in agents:
                    self._submit(agent)
                while True:
                    with self._lock:
                        pending = [f for f in self._futures if not f.done()]
                    if not pending:
                        break
                    wait(pending)
            except BaseException:  # Ctrl-C: agents end before their next model call
                self._stop.set()
                raise
            finally:
                self._executor = None
            with self._lock:
                futures, self._futures = self._futures, []
        for f in futures:
            exc = f.exception()
            if exc is not None:  # a bug of ours, not the model's: keep the pool, say what happened
                self._note(f"an agent failed: {type(exc).__name__}: {exc}")

    def _submit(self, agent: Agent) -> None:
        executor = self._executor
        if executor is None or self._stop.is_set():  # interrupted, or the pool is already enough
            agent.status = "stopped"
            return
        future = executor.submit(self._run, agent)
        with self._lock:
            self._futures.append(future)

    def _run(self, agent: Agent) -> None:
        agent.status = "running"
        tools = schemas(agent.level)
        for _ in range(self.settings.max_turns):
            if self._stop.is_set():
                agent.status = "stopped"
                return
            completion = self._ask(agent, tools)
            if completion is None:
                return
            agent.messages.append(completion.assistant_message())
            if not completion.tool_calls:
                self._note(f"{agent.label}: replied without calling a function")
                agent.messages.append({"role": "user", "content": "Act by calling one of your functions "
                                       f"({', '.join(FUNCTIONS[agent.level])}); call finish_search when done."})
                continue
            for call in completion.tool_calls:
                answer = self._dispatch(agent, call)
                agent.messages.append({"role": "tool", "tool_call_id": call.id, "content": answer})
            if agent.finished:
                return
        if self._stop.is_set():
            agent.status = "stopped"
            return
        agent.status = "turns"
        self._note(f"{agent.label}: stopped after {self.settings.max_turns} turns without finish_search")

    def _ask(self, agent: Agent, tools: list[dict[str, Any]] | None) -> Completion | None:
        """One model call within the round's budget; None (and the agent's status set) when the
        budget is spent or the model server fails."""
        with self._lock:
            if self._calls_left <= 0:
                agent.status = "budget"
                self._notes.append(f"{agent.label}: the round's budget of {self.settings.max_calls} model calls is spent")
                return None
            if time.monotonic() > self._deadline:
                agent.status = "budget"
                self._notes.append(f"{agent.label}: the round's {self.settings.max_seconds:g} s are spent")
                return None
            self._calls_left -= 1
        try:
            completion = self.client.complete(agent.messages, tools=tools) if tools else \
                self.client.complete(agent.messages)
        except ModelError as exc:
            agent.status = "error"
            self._note(f"{agent.label}: the model failed: {exc.message}")
            return None
        self._count(completion)
        return completion

    def _count(self, completion: Completion) -> None:
        with self._lock:
            self._usage["llm_calls"] += completion.requests
            self._usage["prompt_tokens"] += completion.prompt_tokens
            self._usage["completion_tokens"] += completion.completion_tokens

    def _note(self, text: str) -> None:
        with self._lock:
            self._notes.append(text)

    # -- functions ----------------------------------------------------------------------------

    def _dispatch(self, agent: Agent, call: ToolCallRequest) -> str:
        if call.name not in FUNCTIONS[agent.level]:
            self._note(f"{agent.label}: called unknown function {call.name!r}")
            return f"error: there is no function {call.name!r}; yours are: {', '.join(FUNCTIONS[agent.level])}"
        try:
            args = json.loads(call.arguments or "{}")
        except ValueError as exc:
            self._note(f"{agent.label}: {call.name} arguments are not JSON")
            return f"error: the arguments of {call.name} are not valid JSON ({exc}); send a JSON object"
        if not isinstance(args, dict):
            self._note(f"{agent.label}: {call.name} arguments are not a JSON object")
            return f"error: the arguments of {call.name} must be a JSON object"
        handler = getattr(self, f"_fn_{call.name}")
        result: str = handler(agent, args)
        return result

    def _fn_get_tools_in_category(self, agent: Agent, args: dict[str, Any]) -> str:
        return list_tools(self.catalog, args.get("category") or agent.category)

    def _fn_get_tool_descriptions(self, agent: Agent, args: dict[str, Any]) -> str:
        names = names_arg(args, "tools")
        if isinstance(names, str):
            return names
        return describe_tools(self.catalog, args.get("category") or agent.category, names)

    def _fn_finish_search(self, agent: Agent, args: dict[str, Any]) -> str:
        agent.status = "finished"
        return "finished"

    def _spawn(self, agent: Agent) -> str | None:
        """Start ``agent``; the refusal text when the agent limit is reached."""
        with self._lock:
            if len(self.agents) >= self.settings.max_agents:
                self._notes.append(f"agent limit ({self.settings.max_agents}) reached")
                return f"error: no more agents can be created (limit {self.settings.max_agents})"
            self.agents.append(agent)
        self._submit(agent)
        return None

    def _fn_create_agent_category_level(self, agent: Agent, args: dict[str, Any]) -> str:
        category = self.catalog.category(str(args.get("category") or ""))
        if category is None:
            return f"error: no category {args.get('category')!r}; categories: {', '.join(self.catalog.categories())}"
        with self._lock:
            if any(a.level == "category" and a.category == category for a in self.agents):
                return f"category {category} already has an agent"
        groups = self.catalog.tree[category]
        tools_text = "\n".join(f"- {g} ({len(apis)} APIs)" for g, apis in list(groups.items())[:200])
        child = Agent("category", f"category:{category}", category=category, messages=[
            {"role": "system", "content": prompts.render("anytool_category", category=category, tools=tools_text,
                                                         per_agent=str(self.settings.tools_per_agent))},
            {"role": "user", "content": f"Query: {self.query}"}])
        return self._spawn(child) or f"created an agent for category {category}"

    def _fn_create_agent_tool_level(self, agent: Agent, args: dict[str, Any]) -> str:
        names = names_arg(args, "tools")
        if isinstance(names, str):
            return names
        if not names or len(names) > self.settings.tools_per_agent:
            return f"error: give 1 to {self.settings.tools_per_agent} tools"
        groups = [self.catalog.group(agent.category, n) for n in names]
        unknown = [n for n, g in zip(names, groups, strict=True) if g is None]
        if unknown:
            return f"error: no tool {', '.join(unknown)} in {agent.category}; use get_tools_in_category"
        chosen = tuple(g for g in groups if g is not None)
        with self._lock:
            if any(a.level == "tool" and a.category == agent.category and a.groups == chosen for a in self.agents):
                return "these tools already have an agent"
        apis = "\n".join(f"- [{g}] {t.name}: {t.summary}" for g in chosen for t in self.catalog.tree[agent.category][g])
        child = Agent("tool", f"tool:{agent.category}/{'+'.join(chosen)}", category=agent.category, groups=chosen,
                      messages=[{"role": "system", "content": prompts.render(
                          "anytool_tool", category=agent.category, tools=", ".join(chosen), apis=apis)},
                          {"role": "user", "content": f"Query: {self.query}"}])
        return self._spawn(child) or f"created an agent for {', '.join(chosen)}"

    def _apis(self, agent: Agent, names: list[str]) -> tuple[list[Tool], list[str]]:
        mine = {t.name: t for g in agent.groups for t in self.catalog.tree[agent.category][g]}
        lower = {k.lower(): v for k, v in mine.items()}
        found = [mine.get(n) or lower.get(n.lower()) for n in names]
        return ([t for t in found if t is not None],
                [n for n, t in zip(names, found, strict=True) if t is None])

    def _fn_get_APIs_in_tool(self, agent: Agent, args: dict[str, Any]) -> str:  # noqa: N802 (the paper's name)
        group = next((g for g in agent.groups if g.lower() == str(args.get("tool") or "").lower()), None)
        if group is None:
            return f"error: your tools are {', '.join(agent.groups)}"
        return "\n".join(f"{t.name}: {t.summary}" for t in self.catalog.tree[agent.category][group])

    def _fn_get_API_detail(self, agent: Agent, args: dict[str, Any]) -> str:  # noqa: N802
        names = names_arg(args, "apis")
        if isinstance(names, str):
            return names
        found, unknown = self._apis(agent, names[:MAX_DETAILS])
        parts = [render_full(t)[:1500] for t in found]
        if unknown:
            parts.append(f"error: not among your APIs: {', '.join(unknown)}")
        return "\n\n".join(parts)

    def _fn_add_API_into_API_pool(self, agent: Agent, args: dict[str, Any]) -> str:  # noqa: N802
        names = names_arg(args, "apis")
        if isinstance(names, str):
            return names
        found, unknown = self._apis(agent, names)
        added, refused = self.pool.add(found)
        lines = [f"added: {', '.join(added) or 'nothing new'}"] + refused
        if unknown:
            lines.append(f"error: not among your APIs (never invent names): {', '.join(unknown)}")
        return "\n".join(lines)

    def _fn_check_if_request_solvable(self, agent: Agent, args: dict[str, Any]) -> str:
        pool = self.pool.snapshot()
        if not pool:
            return "False: the pool is empty"
        apis = "\n".join(f"- {t.name}: {t.summary}" for t in pool)
        judge = Agent("judge", f"{agent.label}:solvable", messages=[
            {"role": "user", "content": prompts.render("anytool_solvable", query=self.query, apis=apis)}])
        completion = self._ask(judge, None)
        if completion is None:
            return "False: the check could not be made"
        verdict = completion.text.strip().lower()
        if verdict.startswith(("yes", "true")):
            self._stop.set()
            return "True"
        return "False: " + completion.text.strip()[:300]

    # -- the result ---------------------------------------------------------------------------

    def _result(self, k: int, *, fallback: bool) -> SearchResult:
        pool = self.pool.snapshot()
        notes = list(self._notes)
        if pool:
            n = len(pool)
            hits = [Hit(t.collection, t.name, float(n - i), t.summary) for i, t in enumerate(pool)]
            return SearchResult(hits, self.name, dict(self._usage), notes)
        if not fallback:
            return SearchResult([], self.name, dict(self._usage), notes + ["the pool is empty"])
        found = lexical_choice(self.query, self.tools, k)
        notes.append("anytool: the agents added no API to the pool; BM25's choice instead")
        return SearchResult(found.hits, "bm25", dict(self._usage), notes)


def _zero() -> dict[str, int]:
    return {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}


def make(*, tools: Sequence[Tool] | None = None, client: ModelClient | None = None,
         settings: AnyToolSettings | None = None, corpus: Any = None, home: Any = None, **_: Any) -> AnyTool:
    """The registry's factory (``--retriever anytool``): needs the tools (``tools``, or a retrieval
    ``corpus``) and a model client."""
    tools = corpus_tools(tools, corpus, home)

    if client is None:
        raise ConfigError("the anytool retriever needs a model", hint="configure one (OPENAI_BASE_URL, ATC_MODEL)")
    if not tools:
        raise UsageError("the anytool retriever got no tools to search")
    return AnyTool(tools, client, settings)


# Importing the module registers it too (``atc.retrieval`` registers it lazily by name already).
register("anytool", make)
