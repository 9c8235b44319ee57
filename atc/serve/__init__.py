"""``atc serve``: chain-of-tools for any MCP client.

An MCP host (a desktop chat app, a coding agent, an IDE, an agent framework) calls one tool per
model turn and keeps every tool definition and every raw response in its context. This room turns
atc into an MCP server (the official ``mcp`` SDK, server side) whose tools let the host's model
work the way atc's own model does: find the tools, read their protocols, and write ONE program
that chains many calls, run in the sandbox through the gateway, with only what the program prints
coming back -- or, on failure, atc's attributed error.

- ``settings.py``: ``ServeSettings``, what a server serves and its budgets;
- ``catalog.py``: ``search_tools`` and ``describe_tools`` (retrieval and protocol rendering), the
  collections as resources, the guide prompt;
- ``runs.py``: ``run_program`` (static check, a cancellable sandbox run with progress, the result
  and the repair feedback a host's model reads);
- ``sessions.py``: sessions the server issued (one state object each), the budgets of sessions,
  tokens and the server, and the runs in flight (for cancellation);
- ``proxy.py``: each tool as its own MCP tool, through the gateway (``--proxy-tools``);
- ``server.py``: the MCP server itself (tools, resources, prompt, stdio);
- ``hosts.py``: which ``Host`` and ``Origin`` a request may carry, for every bind address;
- ``http.py``: streamable HTTP behind bearer tokens (one per client), sessions bound to their
  client, with disconnect detection.

The server is a thin shell over ``sandbox.execute.run``, ``atc.retrieval`` and
``protocols.render``, as the command line is.
"""

from __future__ import annotations

from atc.serve.settings import ServeSettings

__all__ = ["ServeSettings"]
