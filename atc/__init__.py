"""atc: Automatic Tool Chain.

A model solves a task by writing one Python program that chains many API calls; a sandbox runs
it; failures are traced back to the tool that caused them and repaired by attributable
reflection.

    import atc
    tools = atc.load("openapi.json")                    # a Collection of tool protocols
    result = atc.run("print(list_books()[0]['title'])", tools=[tools])
    solution = atc.solve("Who wrote the cheapest book?", tools=[tools])
    print(solution.answer)

Attributes are imported lazily (PEP 562) so that ``import atc.errors`` from the lower layers
(``protocols``, ``sandbox``) stays a leaf import, and ``import atc`` stays fast; a type checker
reads the same names from the ``TYPE_CHECKING`` block below, so ``atc.solve`` has its real type.

The public API is ``atc.<name>`` for the names of ``__all__`` (and the submodules ``atc.errors``,
``atc.loop.answers``, ``atc.functions``, ``atc.loop.strategies``, ``atc.retrieval``, ``atc.evaluation``);
the modules that implement them (``atc.loop.solving``, ``atc.toolsets``, ``sandbox.*``...) are private
and may change without notice.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    # protocols
    "Tool": "protocols.model",
    "Collection": "protocols.model",
    "Store": "protocols.store",
    "load": "sandbox.execute",
    "McpServer": "protocols.model",
    "load_spec": "protocols.loaders",
    "search": "atc.retrieval.api",
    "SearchResult": "atc.retrieval.base",
    "render_compact": "protocols.render",
    "render_full": "protocols.render",
    # sandbox
    "Limits": "sandbox.api",
    "Credentials": "sandbox.api",
    "Toolset": "sandbox.api",
    "ExecutionResult": "sandbox.api",
    "ToolCall": "sandbox.api",
    "ErrorInfo": "sandbox.api",
    "run": "atc.running",
    "arun": "atc.running",
    "session": "atc.sessions",
    "tool": "atc.functions",
    "asession": "atc.sessions",
    "Session": "sandbox.session.open",
    "AsyncSession": "atc.sessions",
    "SessionLimits": "sandbox.api",
    "load_mcp": "sandbox.gateway.mcp.sources",
    "Writes": "sandbox.gateway.writes.policy",
    "WritePolicy": "sandbox.gateway.writes.policy",
    "WriteRequest": "sandbox.gateway.writes.policy",
    "WriteLedger": "sandbox.gateway.writes.ledger",
    "close_mcp_servers": "sandbox.gateway.mcp.connections",
    # solve
    "solve": "atc.solver",
    "Solver": "atc.solver",
    "SolveOptions": "atc.solver",
    "asolve": "atc.loop.solving",
    "solve_many": "atc.workflows.many",
    "Solution": "atc.loop.solving",
    "Solutions": "atc.workflows.many",
    "AnswerSpec": "atc.loop.answers",
    "Attempt": "atc.loop.solving",
    "Strategy": "atc.loop.strategies",
    # probing
    "probe": "probes.probing",
    "probe_many": "probes.many",
    "ProbeReport": "probes.results.report",
    "ProbeSettings": "probes.results.report",
    # errors
    "AtcError": "atc.errors",
    "UsageError": "atc.errors",
    "NotFound": "atc.errors",
    "ConfigError": "atc.errors",
    "ProtocolError": "atc.errors",
    "ToolError": "atc.errors",
    "SandboxError": "atc.errors",
    "SessionEnded": "atc.errors",
    "ModelError": "atc.errors",
}

__all__ = sorted(_LAZY) + ["__version__"]

if TYPE_CHECKING:  # what a type checker sees; at run time each name is imported on first use
    from atc.errors import AtcError as AtcError
    from atc.errors import ConfigError as ConfigError
    from atc.errors import ModelError as ModelError
    from atc.errors import NotFound as NotFound
    from atc.errors import ProtocolError as ProtocolError
    from atc.errors import SandboxError as SandboxError
    from atc.errors import SessionEnded as SessionEnded
    from atc.errors import ToolError as ToolError
    from atc.errors import UsageError as UsageError
    from atc.functions import tool as tool
    from atc.loop.answers import AnswerSpec as AnswerSpec
    from atc.loop.solving import Attempt as Attempt
    from atc.loop.solving import Solution as Solution
    from atc.loop.solving import asolve as asolve
    from atc.loop.strategies import Strategy as Strategy
    from atc.retrieval.api import search as search
    from atc.retrieval.base import SearchResult as SearchResult
    from atc.running import arun as arun
    from atc.running import run as run
    from atc.sessions import AsyncSession as AsyncSession
    from atc.sessions import asession as asession
    from atc.sessions import session as session
    from atc.solver import SolveOptions as SolveOptions
    from atc.solver import Solver as Solver
    from atc.solver import solve as solve
    from atc.workflows.many import Solutions as Solutions
    from atc.workflows.many import solve_many as solve_many
    from probes.many import probe_many as probe_many
    from probes.probing import probe as probe
    from probes.results.report import ProbeReport as ProbeReport
    from probes.results.report import ProbeSettings as ProbeSettings
    from protocols.loaders import load_spec as load_spec
    from protocols.model import Collection as Collection
    from protocols.model import McpServer as McpServer
    from protocols.model import Tool as Tool
    from protocols.render import render_compact as render_compact
    from protocols.render import render_full as render_full
    from protocols.store import Store as Store
    from sandbox.api import Credentials as Credentials
    from sandbox.api import ErrorInfo as ErrorInfo
    from sandbox.api import ExecutionResult as ExecutionResult
    from sandbox.api import Limits as Limits
    from sandbox.api import SessionLimits as SessionLimits
    from sandbox.api import ToolCall as ToolCall
    from sandbox.api import Toolset as Toolset
    from sandbox.execute import load as load
    from sandbox.gateway.mcp.connections import close_mcp_servers as close_mcp_servers
    from sandbox.gateway.mcp.sources import load_mcp as load_mcp
    from sandbox.gateway.writes.ledger import WriteLedger as WriteLedger
    from sandbox.gateway.writes.policy import WritePolicy as WritePolicy
    from sandbox.gateway.writes.policy import WriteRequest as WriteRequest
    from sandbox.gateway.writes.policy import Writes as Writes
    from sandbox.session.open import Session as Session


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'atc' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
