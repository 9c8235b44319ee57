"""MCP servers as tool sources: connecting, listing their tools, and calling them for the gateway.

- ``sources``: the ``--tools`` forms that name a live server (``mcp:COMMAND ARGS...``,
  ``mcp+http://HOST:PORT/PATH``, a ``{"mcpServers": {...}}`` JSON file) -> ``McpServer``
  descriptors, and ``load_source`` -> collections from a live ``tools/list``.
- ``connections``: ``McpServers``, the live sessions (one per server identity) owned by one
  background event-loop thread and offered to the gateway's threads as blocking calls; the
  process-wide one is ``servers()``, closed by ``close_servers()`` (the CLI does, and atexit).
- ``transport``: ``McpTransport.send``, the MCP side of one gateway call (``tools/call``, its
  result as program data, its errors as ``ToolError``).
- ``bounds``, ``stdio``, ``httpbounds``: every server's messages read by atc and judged on their
  bytes before the SDK parses them (size, JSON values; a refused answer fails its call at once),
  over stdio (atc's own transport) and HTTP (a transport under the SDK's clients).

The official SDK (``pip install 'atc[mcp]'``) is imported only when a server is used.
"""

from __future__ import annotations

from protocols.errors import ConfigError

__all__ = ["require_sdk", "INSTALL_HINT"]

INSTALL_HINT = "pip install 'atc[mcp]'  (the official MCP SDK: pip install mcp)"


def require_sdk() -> None:
    """Import the MCP SDK, or say how to install it (``ConfigError``, exit 2)."""
    try:
        import mcp  # noqa: F401  # lazy: the optional MCP SDK (~1 s of imports)
    except ImportError as exc:
        raise ConfigError("MCP servers need the MCP SDK, which is not installed", hint=INSTALL_HINT) from exc
