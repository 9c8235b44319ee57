"""``atc.Solver``: a solver configured once, and ``atc.solve``, the one-call form over it.

    import atc
    solver = atc.Solver("bookshop", model="gpt-4o-mini", strategy="react", limits=atc.Limits(timeout=30))
    print(solver.solve("Who wrote the cheapest book?").answer)
    for solution in solver.solve_many(["How many books?", "Which authors are Polish?"]):
        print(solution.ok, solution.answer)

Everything that does not change from task to task is settled when the ``Solver`` is made, at the
edge: the tools are read (``atc.toolsets``: files, URLs, stored names, MCP sources, functions) and
their credentials parsed into ``Credentials``, the strategy is resolved into its typed settings
(``atc.loop.strategies.registry.Choice``), and the sandbox is chosen. An unknown collection, strategy or
credential form is said then, before any model is asked anything. Each ``solve`` is then one task
of ``atc.loop.solving`` (its own write ledger, its own model meter); ``solve_many`` runs a batch of them
with ``atc.workflows.many``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atc.llm.client import ModelClient
from atc.loop import solving
from atc.loop.solving import AttemptHook, Solution
from atc.loop.strategies.base import StepHook, Strategy
from atc.loop.strategies.registry import DEFAULT, Choice, choose
from atc.toolsets import ToolsArg, toolset_for
from atc.workflows.many import ResultHook, Solutions, solve_many
from sandbox.api import Backend, Credentials, Limits
from sandbox.execute import BaseUrl, Validation, WritesArg, pick_sandbox
from sandbox.gateway.writes.policy import Approver

if TYPE_CHECKING:
    from atc.retrieval.base import Retriever

__all__ = ["Solver", "solve"]


class Solver:
    """Tools, a model, a strategy and limits, configured once; ``solve(query)`` for one task,
    ``solve_many(queries)`` for a batch. The keywords are ``atc.solve``'s.

    Args:
        tools: a Collection, a list of them, a Toolset, a spec path or URL, a stored collection's
            name, an MCP source, Python functions (``atc.toolsets``).
        model: the model's name (default: from the environment, ``docs/models.md``).
        client: a model client to use instead of one made from ``model``.
        strategy: a registered name (default ``chain``), ``NAME@k``, a ``Choice`` or a ``Strategy``.
        limits: the sandbox's limits of each program (default ``Limits()``).
        sandbox: ``"docker"``, ``"local"``, None (auto) or a ``Backend``.
        base_url: one server URL for every collection, or ``{collection: URL}``.
        credentials: ``{scheme or placement: "env:VAR"}`` or ``Credentials``.
        validation: argument checks: ``strict``, ``warn``, ``off``, or ``{collection: mode}``.
        max_reflections: ``chain``'s repairs; ``max_steps``: any strategy's own bound.
        max_model_calls: model calls one task may make; ``max_tokens``: the tokens it may spend.
        top_k: tools shown to the model when there are more; ``retriever`` picks them.
        writes: the write policy (``allow``, ``deny``, ``ask``) or a ``Writes``; ``approve``
            answers ``ask``.
        answer: the type or JSON Schema of a typed answer (``Solution.value``).
        on_step: called after each step; ``on_attempt``: after each of ``chain``'s attempts.
        backend: the deprecated name of ``sandbox``.

    Raises:
        UsageError: a bad argument, an unknown strategy or a tools form no rule reads.
        NotFound: a word that names no file and no stored collection.
        ConfigError: tools that cannot be reached as configured (an MCP server that fails to start).
    """

    def __init__(
        self,
        tools: ToolsArg,
        *,
        model: str | None = None,
        client: ModelClient | None = None,
        max_reflections: int = 3,
        limits: Limits | None = None,
        sandbox: str | Backend | None = None,
        base_url: BaseUrl = None,
        credentials: Mapping[str, str] | None = None,
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
    ) -> None:
        self.strategy: Strategy | Choice = _strategy(strategy, max_reflections, max_steps)
        self.toolset = toolset_for(tools, base_url, Credentials.of(credentials), validation)
        self.sandbox = pick_sandbox(sandbox, backend)
        self.model, self.client, self.limits = model, client, limits
        self.max_reflections, self.top_k, self.retriever = max_reflections, top_k, retriever
        self.max_model_calls, self.max_tokens, self.max_steps = max_model_calls, max_tokens, max_steps
        self.on_attempt, self.on_step = on_attempt, on_step
        self.writes, self.approve, self.answer = writes, approve, answer

    def __repr__(self) -> str:
        names = ", ".join(c.name for c in self.toolset.collections)
        return f"Solver(tools=[{names}], model={self.model!r}, strategy={_name(self.strategy)!r})"

    def _options(self) -> dict[str, Any]:
        """The keywords of ``atc.loop.solving.solve`` that every task of this solver shares."""
        return {"model": self.model, "client": self.client, "max_reflections": self.max_reflections,
                "limits": self.limits, "sandbox": self.sandbox, "top_k": self.top_k, "on_attempt": self.on_attempt,
                "retriever": self.retriever, "strategy": self.strategy, "max_model_calls": self.max_model_calls,
                "max_tokens": self.max_tokens, "max_steps": self.max_steps, "on_step": self.on_step,
                "writes": self.writes, "approve": self.approve, "answer": self.answer}

    def solve(self, query: str) -> Solution:
        """Solve one task.

        Args:
            query: the task, in words.

        Returns:
            The ``Solution``: ``ok``, ``answer``, the program, attempts, calls and usage. A task
            the model fails is a ``Solution`` with ``ok`` False, not an exception.

        Raises:
            UsageError: an empty query.
            ConfigError: no model configured, or a credential or server URL that cannot work.
            ModelError: the model server failed before the first step.
            SandboxError: the sandbox could not run at all.
        """
        return solving.solve(query, self.toolset, **self._options())

    def solve_many(self, queries: Sequence[str], *, concurrency: int = 8, ids: Sequence[str | int] | None = None,
                   out: str | Path | None = None, on_result: ResultHook | None = None,
                   executor: str = "local") -> Solutions:
        """Solve many tasks, at most ``concurrency`` at a time (``atc.solve_many``).

        Args:
            queries: the tasks.
            concurrency: tasks run together (so at most that many sandboxes).
            ids: the tasks' names (default: their index), as in the ``out`` file.
            out: a JSON Lines file of results: tasks already there are not run again (resume).
            on_result: called with ``(index, solution)`` as each task finishes.
            executor: ``"local"`` (threads here) or ``"ray"``.

        Returns:
            The solutions in the order of ``queries`` (a list; ``.to_pandas()`` makes a table).
            A task that raises becomes a failed ``Solution``; the batch goes on.

        Raises:
            UsageError: bad batch settings (``concurrency`` below 1, ``ids`` not unique).
            ConfigError: no model configured (no task could run).
        """
        return solve_many(queries, self.toolset, concurrency=concurrency, ids=ids, out=out, on_result=on_result,
                          executor=executor, **self._options())


def _strategy(strategy: str | Strategy | Choice | None, max_reflections: int | None,
              max_steps: int | None) -> Strategy | Choice:
    """A strategy's name resolved once into its typed settings (``Choice``: each task then makes
    its own fresh strategy from them); a ``Choice`` or ``Strategy`` object as it is."""
    if strategy is None or isinstance(strategy, str):
        return choose(strategy or DEFAULT, max_reflections=max_reflections, max_steps=max_steps)
    return strategy


def _name(strategy: Strategy | Choice) -> str:
    return str(getattr(strategy, "name", type(strategy).__name__))


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
    """Solve ``query`` with ``tools``: ``Solver(tools, ...).solve(query)`` in one call (the
    keywords are ``Solver``'s; ``atc.loop.solving.solve`` has the long description of each).

    Args:
        query: the task, in words.
        tools: a Collection, a list of them, a Toolset, a spec path or URL, a stored collection's
            name, an MCP source, Python functions (``atc.toolsets``).
        **keywords: as for ``Solver``.

    Returns:
        The ``Solution``; a task the model fails is one with ``ok`` False.

    Raises:
        UsageError: a bad argument, an empty query or an unknown strategy.
        NotFound: a word that names no file and no stored collection.
        ConfigError: no model configured, or a credential or server URL that cannot work.
        ModelError: the model server failed before the first step.
        SandboxError: the sandbox could not run at all.
    """
    solver = Solver(tools, model=model, client=client, max_reflections=max_reflections, limits=limits,
                    sandbox=sandbox, backend=backend, base_url=base_url, credentials=credentials, top_k=top_k,
                    on_attempt=on_attempt, validation=validation, retriever=retriever, strategy=strategy,
                    max_model_calls=max_model_calls, max_tokens=max_tokens, max_steps=max_steps, on_step=on_step,
                    writes=writes, approve=approve, answer=answer)
    return solver.solve(query)
