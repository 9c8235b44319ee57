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
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from atc.errors import UsageError
from atc.llm.chat import ModelClient
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

__all__ = ["Solver", "SolveOptions", "solve"]


class SolveOptions(TypedDict, total=False):
    """The keywords of ``atc.Solver`` and ``atc.solve``, written once (a type checker sees each)."""

    model: str | None
    client: ModelClient | None
    max_reflections: int
    limits: Limits | None
    sandbox: str | Backend | None
    base_url: BaseUrl
    credentials: Credentials | Mapping[str, str] | None
    top_k: int | None
    on_attempt: AttemptHook | None
    backend: str | Backend | None
    validation: Validation
    retriever: str | Retriever | None
    strategy: str | Strategy | Choice | None
    max_model_calls: int | None
    max_tokens: int | None
    max_steps: int | None
    on_step: StepHook | None
    writes: WritesArg
    approve: Approver | None
    answer: Any


#: Settled when the ``Solver`` is made, so not handed to each task as they were given.
_AT_THE_EDGE = frozenset({"base_url", "credentials", "validation", "sandbox", "backend", "strategy"})


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

    def __init__(self, tools: ToolsArg, **options: Unpack[SolveOptions]) -> None:
        unknown = set(options) - set(SolveOptions.__annotations__)
        if unknown:
            raise UsageError(f"unknown keyword(s) {', '.join(sorted(unknown))}",
                             hint=f"Solver takes {', '.join(SolveOptions.__annotations__)}")
        max_reflections = options.get("max_reflections", 3)
        self.strategy: Strategy | Choice = _strategy(options.get("strategy"), max_reflections,
                                                     options.get("max_steps"))
        self.toolset = toolset_for(tools, options.get("base_url"), Credentials.of(options.get("credentials")),
                                   options.get("validation"))
        self.sandbox = pick_sandbox(options.get("sandbox"), options.get("backend"))
        self.model = options.get("model")
        self.options: dict[str, Any] = {k: v for k, v in options.items() if k not in _AT_THE_EDGE}

    def __repr__(self) -> str:
        names = ", ".join(c.name for c in self.toolset.collections)
        return f"Solver(tools=[{names}], model={self.model!r}, strategy={_name(self.strategy)!r})"

    def _options(self) -> dict[str, Any]:
        """The keywords of ``atc.loop.solving.solve`` that every task of this solver shares."""
        return {**self.options, "strategy": self.strategy, "sandbox": self.sandbox}

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


def solve(query: str, tools: ToolsArg, **options: Unpack[SolveOptions]) -> Solution:
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
    return Solver(tools, **options).solve(query)
