"""The MCP side of one gateway call: a validated call -> ``tools/call`` -> a ``Reply``.

``McpTransport.send(tool, args)`` sits next to the HTTP transport behind the gateway's
``_exchange``: the gateway has already counted the call against the budget and validated the
arguments against the tool's ``inputSchema``; here they are renamed to the server's argument names
(``Tool.bindings``) and sent to the tool's server (``Collection.mcp_server``, started or connected
once per process by ``connections.servers()``), with a timeout of the per-call limit cut at the
program's deadline.

What the program gets back (``result_data``):

1. ``structuredContent`` when the server gives it (the tool's ``outputSchema`` describes it);
2. otherwise the content items: one text item is parsed as JSON when it is JSON, else the text
   itself; several items give a list, each text item parsed the same way and every other item
   (image, audio, resource, resource link) as its MCP object (``{"type": "image", "mimeType",
   "data"}``, base64 data and all); no item at all gives ``None``.

``isError`` results and JSON-RPC errors become a ``ToolError`` naming the tool with the server's
own text (``failure`` ``tool`` and ``protocol``); a result larger than ``max_response_bytes`` (as
JSON) is refused (``response``); a server that dies, hangs or cannot start is an ``McpFailure``.
The call log records ``method`` ``"MCP"``, ``path`` the tool's name on its server, ``status``
``None`` (MCP has no status code).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from protocols.model import McpServer, Tool
from sandbox.api import Limits, Toolset
from sandbox.gateway.http.transport import Reply, SendFailure
from sandbox.gateway.mcp.bounds import MessageBounds
from sandbox.gateway.mcp.connections import McpFailure, McpServers, servers
from sandbox.gateway.mcp.sources import resolve_env
from sandbox.hostbounds import HostBounds
from sandbox.jsonbounds import TooManyValues, count_values, loads

__all__ = ["McpTransport", "result_data", "error_text", "secret_values"]


def _item(item: Any, max_values: int | None) -> Any:
    if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
        text = item["text"]
        stripped = text.strip()
        if stripped[:1] in ("{", "[", '"') or stripped in ("true", "false", "null") or \
                stripped[:1].isdigit() or stripped[:1] == "-":
            try:
                return json.loads(stripped) if max_values is None else loads(stripped.encode(), max_values)
            except TooManyValues:
                raise
            except ValueError:
                pass
        return text
    return item


def result_data(result: Mapping[str, Any], max_values: int | None = None) -> Any:
    """The program's value of a (non-error) ``CallToolResult``, as the module docstring says. JSON
    in a text item with more than ``max_values`` values is refused (``TooManyValues``) before it
    is decoded (``sandbox.jsonbounds``)."""
    if "structuredContent" in result and result["structuredContent"] is not None:
        return result["structuredContent"]
    content = result.get("content") or []
    if not isinstance(content, list) or not content:
        return None
    if len(content) == 1:
        return _item(content[0], max_values)
    return [_item(c, max_values) for c in content]


def error_text(result: Mapping[str, Any]) -> str:
    """The server's words for an ``isError`` result (its text items, short)."""
    texts = [c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict) and c.get("type") == "text"]
    text = " ".join(" ".join(texts).split())
    if not text and result.get("structuredContent") is not None:
        text = json.dumps(result["structuredContent"], ensure_ascii=False)
    return (text[:300] + ("..." if len(text) > 300 else "")) or "(no error text)"


def secret_values(toolset: Toolset, environ: Mapping[str, str]) -> list[str]:
    """The environment values the run's MCP servers get: secrets the program must never see."""
    out: list[str] = []
    for collection in toolset.collections:
        server = collection.mcp_server
        if server is None:
            continue
        for key, value in server.env.items():
            found = value if value is not None else environ.get(key)
            if found:
                out.append(found)
    return out


class McpTransport:
    """Sends the MCP calls of one program run (see the module docstring)."""

    def __init__(self, toolset: Toolset, limits: Limits, environ: Mapping[str, str], deadline: float | None,
                 servers: McpServers | None = None) -> None:
        self.toolset = toolset
        self.limits = limits
        self.environ = environ
        self.deadline = deadline
        self._servers = servers
        self._resolved: dict[str, McpServer] = {}

    @property
    def servers(self) -> McpServers:
        if self._servers is None:
            self._servers = servers()
        return self._servers

    def _server(self, tool: Tool) -> McpServer:
        collection = self.toolset.collection_of(tool.name)
        server = collection.mcp_server
        if server is None:
            raise SendFailure(f"{tool.name}: collection {collection.name!r} lists MCP tools but names no server to "
                              "call", tool=tool.name, failure="config",
                              hint="import it from the live server: atc tools import mcp:\"COMMAND ARGS\"")
        # By the server's identity, never by the collection's name: two collections may have come
        # from different servers that an older store gave one name.
        found = self._resolved.get(server.key())
        if found is None:
            try:
                found = self._resolved[server.key()] = resolve_env(server, self.environ)
            except Exception as exc:
                raise SendFailure(f"{tool.name}: {exc}", tool=tool.name, failure="config") from None
        return found

    def send(self, tool: Tool, args: dict[str, Any], extra_query: dict[str, Any] | None = None) -> Reply:
        if extra_query is not None:
            raise SendFailure(f"{tool.name}: extra_query is for HTTP tools; an MCP tool takes its own arguments only",
                              tool=tool.name, failure="arguments", parameter="extra_query")
        server = self._server(tool)
        timeout = self.limits.call_timeout
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.monotonic())
            if timeout <= 0:
                raise SendFailure(f"{tool.name}: the program's time ran out before the call", tool=tool.name,
                                  failure="timeout")
        wire = {(tool.bindings[k].name if k in tool.bindings else k): v for k, v in args.items()}
        try:
            result = self.servers.call(server, tool.path or tool.name, wire, timeout, tool=tool.name,
                                       bounds=MessageBounds.of(self.limits))
        except McpFailure as exc:
            raise SendFailure(exc.message, tool=tool.name, failure=exc.failure, hint=exc.hint) from None
        raw = json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if len(raw) > self.limits.max_response_bytes:
            raise SendFailure(f"{tool.name}: the MCP result is larger than {self.limits.max_response_bytes} bytes",
                              tool=tool.name, failure="response")
        if result.get("isError"):
            raise SendFailure(f"{tool.name}: MCP tool error: {error_text(result)}", tool=tool.name, failure="tool")
        values = HostBounds.of(self.limits).frame_values
        try:
            if count_values(raw, values) > values:
                raise TooManyValues(values + 1, values)
            data = result_data(result, values)
        except TooManyValues:
            raise SendFailure(f"{tool.name}: the MCP result holds more than {values} JSON values, more than a run "
                              f"with --memory {self.limits.memory_mb} may take", tool=tool.name,
                              failure="response") from None
        return Reply(status=None, headers={}, data=data, raw=raw)
