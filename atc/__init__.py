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
(``protocols``, ``sandbox``) stays a leaf import, and ``import atc`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

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
    "Toolset": "sandbox.api",
    "ExecutionResult": "sandbox.api",
    "ToolCall": "sandbox.api",
    "ErrorInfo": "sandbox.api",
    "run": "sandbox.execute",
    "arun": "sandbox.execute",
    "session": "atc.sessions",
    "asession": "atc.sessions",
    "Session": "sandbox.interactive",
    "AsyncSession": "atc.sessions",
    "SessionLimits": "sandbox.api",
    "load_mcp": "sandbox.mcp.sources",
    "Writes": "sandbox.writes.policy",
    "WritePolicy": "sandbox.writes.policy",
    "WriteRequest": "sandbox.writes.policy",
    "WriteLedger": "sandbox.writes.ledger",
    "close_mcp_servers": "sandbox.mcp.connections",
    # solve
    "solve": "atc.solving",
    "asolve": "atc.solving",
    "solve_many": "atc.workflows.many",
    "Solution": "atc.solving",
    "Attempt": "atc.solving",
    "Strategy": "atc.strategies",
    # probing
    "probe": "probes.probing",
    "probe_many": "probes.many",
    "ProbeReport": "probes.report",
    "ProbeSettings": "probes.report",
    # errors
    "AtcError": "atc.errors",
    "ConfigError": "atc.errors",
    "ProtocolError": "atc.errors",
    "ToolError": "atc.errors",
    "SandboxError": "atc.errors",
    "SessionEnded": "atc.errors",
    "ModelError": "atc.errors",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'atc' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
