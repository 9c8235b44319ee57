"""What one ``atc serve`` serves, and the budgets it holds every client to: ``ServeSettings``.

Two kinds of budget:

- per call (of ``run_program``): the RUN OPTIONS' ``Limits`` -- wall clock, memory, tool calls,
  output, the timeout of each tool call -- exactly as ``atc run`` applies them;
- per session (one MCP session: a stdio connection, or a streamable HTTP session the server
  issued): at most ``session_max_calls`` tool calls over all of its programs and proxied calls,
  and at most ``session_max_runs`` programs;
- per token (every client that authenticates with one token, with sessions or without: the
  stateless 2026-07-28 protocol has none) and per server (all clients together):
  ``token_max_calls``/``token_max_runs`` and ``server_max_calls``/``server_max_runs``, no bound
  by default (None).

A program is charged to all three at once: it gets only what all of them have left
(``Limits.max_calls`` cut to it), and one that finds nothing left is refused before it runs. Only
tool calls that left the host count: a call refused for its arguments costs nothing.

``concurrency`` bounds the programs in the sandbox at once over every session, so that many
clients cost the host a known multiple of one run's limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from atc.errors import UsageError
from sandbox.api import Limits, Toolset

if TYPE_CHECKING:
    from sandbox.api import Backend

__all__ = ["ServeSettings", "check_retriever", "TOOL_NAMES", "MAX_PROXY_TOOLS", "RETRIEVERS"]

#: The MCP tools every server has (a proxied tool may not take one of these names).
TOOL_NAMES = ("search_tools", "describe_tools", "run_program")
#: More proxied tools than this would fill a host's context with definitions, the very cost
#: run_program avoids: ``--proxy-tools`` is for the few.
MAX_PROXY_TOOLS = 100
#: Retrievers that rank without a model (serve has none): None/auto picks hybrid or bm25.
RETRIEVERS = (None, "auto", "bm25", "dense", "hybrid")


def check_retriever(name: str | None) -> None:
    """A retriever ``search_tools`` can use (``UsageError``, exit 2, for one that needs a model)."""
    if name not in RETRIEVERS:
        raise UsageError(f"atc serve cannot use the retriever {name!r} (it has no model)",
                         hint="use --retriever bm25, dense or hybrid")


@dataclass(frozen=True)
class ServeSettings:
    """Everything a server needs: the tools, the per-run limits, the sandbox, and the budgets."""

    toolset: Toolset
    limits: Limits = field(default_factory=Limits)
    #: ``"docker"``, ``"local"``, None (automatic), or a ``Backend``
    sandbox: str | Backend | None = None
    retriever: str | None = None
    #: also expose every tool as its own MCP tool (through the gateway)
    proxy_tools: bool = False
    session_max_calls: int = 1000
    session_max_runs: int = 200
    token_max_calls: int | None = None
    token_max_runs: int | None = None
    server_max_calls: int | None = None
    server_max_runs: int | None = None
    concurrency: int = 4
    #: seconds between two progress notifications of a running program
    progress_interval: float = 1.0
    #: the write policy of every program and proxied call: ``allow``, ``deny``, ``ask`` (the client
    #: is asked through MCP elicitation; one that cannot be asked is refused)
    writes: str = "allow"
    name: str = "atc"

    def __post_init__(self) -> None:
        for name in ("session", "token", "server"):
            for what in ("calls", "runs"):
                value = getattr(self, f"{name}_max_{what}")
                if value is not None and value < 0:
                    raise UsageError(f"--{name}-max-{what} must be 0 or more")
        if self.concurrency < 1:
            raise UsageError("--concurrency must be at least 1")
        if self.writes not in ("allow", "deny", "ask"):
            raise UsageError(f"unknown write policy {self.writes!r}", hint="use --writes allow, deny or ask")
        check_retriever(self.retriever)
        if not self.toolset.tools:
            raise UsageError("the collections given with --tools hold no tools", hint="check the spec or the server")
        if self.proxy_tools:
            count = len(self.toolset.tools)
            if count > MAX_PROXY_TOOLS:
                raise UsageError(f"--proxy-tools would expose {count} tools; at most {MAX_PROXY_TOOLS} are allowed",
                                 hint="that many definitions would fill the host's context: leave the tools to "
                                      "run_program, or narrow --tools")
            taken = sorted(set(TOOL_NAMES) & set(self.toolset.tools))
            if taken:
                raise UsageError(f"--proxy-tools: the tool name {taken[0]!r} is one of atc serve's own tools",
                                 hint="re-import the collection with that tool renamed, or serve without --proxy-tools")
