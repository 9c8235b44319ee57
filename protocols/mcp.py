"""MCP ``tools/list`` results -> a ``Collection``.

Accepted: ``{"tools": [...]}``, the JSON-RPC envelope ``{"result": {"tools": [...]}}``, or a bare
list of tool objects ``{"name", "description"?, "inputSchema", "outputSchema"?, "annotations"?}``.

MCP tools are not HTTP operations: a tool is recorded with ``method="MCP"`` and ``path`` = its name
on the server (what ``tools/call`` sends), its arguments as ``body`` bindings (Python name -> the
server's argument name), ``outputSchema`` as the response schema and ``annotations`` kept as they
are (the prober reads ``readOnlyHint``). A listing read from a file knows no server: the gateway
can call its tools only once the collection carries an ``mcp_server`` (``sandbox.gateway.mcp`` imports live
servers with it; a listing written by ``atc probe --out`` names its server under ``mcpServer``).
"""

from __future__ import annotations

from typing import Any

from protocols.building import ParamSet, UniqueNames, clean_text
from protocols.errors import ProtocolError
from protocols.model import Collection, McpServer, Tool, python_identifier
from protocols.refs import Resolver

__all__ = ["MCPLoader"]


def _tool_list(doc: Any) -> tuple[Any, str] | None:
    """The list of tools and its pointer, or None when ``doc`` is not an MCP listing."""
    if isinstance(doc, dict) and isinstance(doc.get("result"), dict) and "tools" in doc["result"]:
        return doc["result"]["tools"], "/result/tools"
    if isinstance(doc, dict) and "tools" in doc and "api_list" not in doc and "paths" not in doc:
        return doc["tools"], "/tools"
    if isinstance(doc, list) and doc and all(isinstance(t, dict) and "inputSchema" in t for t in doc[:5]):
        return doc, ""
    return None


class MCPLoader:
    """The built-in loader for MCP ``tools/list`` results."""

    name = "mcp"

    def detect(self, doc: Any, path: str | None = None) -> bool:
        found = _tool_list(doc)
        if found is None:
            return False
        tools = found[0]
        return isinstance(tools, list) and (not tools or all(isinstance(t, dict) for t in tools[:5]))

    def load(self, doc: Any, *, source: str, name: str | None = None) -> Collection:
        found = _tool_list(doc)
        if found is None:
            raise ProtocolError("not an MCP tools/list result", source=source, pointer="")
        items, base = found
        if not isinstance(items, list):
            raise ProtocolError("'tools' must be a list", source=source, pointer=base)
        cname = name or "mcp"
        names = UniqueNames()
        tools: list[Tool] = []
        for i, item in enumerate(items):
            at = f"{base}/{i}"
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
                raise ProtocolError("an MCP tool must be an object with a 'name'", source=source, pointer=at)
            schema = item.get("inputSchema", {"type": "object"})
            if not isinstance(schema, dict):
                raise ProtocolError("'inputSchema' must be an object", source=source, pointer=f"{at}/inputSchema")
            schema = Resolver(schema, source).schema(schema, f"{at}/inputSchema")
            if not isinstance(schema, dict):
                raise ProtocolError("'inputSchema' must resolve to an object", source=source,
                                    pointer=f"{at}/inputSchema")
            props = schema.get("properties")
            if props is not None and not isinstance(props, dict):
                raise ProtocolError("'properties' must be an object", source=source,
                                    pointer=f"{at}/inputSchema/properties")
            needed_raw = schema.get("required")
            needed = needed_raw if isinstance(needed_raw, list) else []
            params = ParamSet()
            for prop, sub in (props or {}).items():
                params.add(str(prop), "body", sub, required=prop in needed)
            output = item.get("outputSchema") or item.get("x-atc-response-schema")
            # examples a probe wrote (atc probe --out): arguments, a condensed answer, a program
            examples = [e for e in item.get("x-atc-examples") or [] if isinstance(e, dict)]
            annotations = item.get("annotations")
            notes = {str(k): v for k, v in annotations.items() if v is not None} if isinstance(annotations, dict) else {}
            title = clean_text(notes.get("title"))
            tools.append(Tool(
                name=names.take(python_identifier(item["name"])), collection=cname, method="MCP",
                path=item["name"],
                description=clean_text(item.get("description")) or clean_text(item.get("title")) or title,
                group=cname, parameters=params.schema(), bindings=params.bindings,
                body_media_type="application/json",
                response_schema=output if isinstance(output, dict) else None,
                annotations=notes, examples=examples,
            ))
        if not tools:
            raise ProtocolError("no operations: the tools list is empty", source=source, pointer=base)
        server = doc.get("mcpServer") if isinstance(doc, dict) else None
        return Collection(name=cname, tools=tools, description="MCP tools", source=source, source_format="mcp",
                          mcp_server=McpServer.from_dict(server) if isinstance(server, dict) else None)
