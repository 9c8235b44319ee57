"""A small shop as an MCP server (official SDK), for the tests: ``python -m tests.support.mcp_servers.shop``.

Tools cover what a client meets in the wild: structured results with an ``outputSchema``, plain
text, JSON in text, several content items, an image, ``isError`` results, a slow tool, a tool that
kills the server, and one that reads its environment (the credential the host gave it).

Flags: ``--http PORT`` serves streamable HTTP on 127.0.0.1, ``--sse PORT`` the older SSE transport
(default: stdio); ``--crash-at-start``
exits before speaking; ``--hang-at-start`` never answers; ``--garbage`` writes non-MCP lines to
stdout. ``SHOP_PID_FILE`` (env): where the server writes its pid (tests check it is gone after).
"""

import json
import os
import sys
import time
from typing import Any

ITEMS: dict[int, dict[str, Any]] = {
    1: {"id": 1, "name": "teapot", "price": 25.0, "stock": 4, "supplier": "acme"},
    2: {"id": 2, "name": "mug", "price": 8.5, "stock": 40, "supplier": "acme"},
    3: {"id": 3, "name": "kettle", "price": 49.0, "stock": 0, "supplier": "globex"},
}
SUPPLIERS = {"acme": {"code": "acme", "country": "NL", "email": "sales@acme.test"},
             "globex": {"code": "globex", "country": "DE", "email": "info@globex.test"}}


def build() -> Any:
    # Imported here, not at the top: the start-failure modes below must not wait for the SDK. (No
    # ``from __future__ import annotations`` in this file: the SDK reads the tools' annotations.)
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError
    from mcp.types import ImageContent, TextContent, ToolAnnotations

    server = MCPServer("shop")
    read_only = ToolAnnotations(readOnlyHint=True)

    @server.tool(annotations=read_only)
    def search_items(query: str, in_stock: bool = False) -> dict[str, Any]:
        """Find items whose name contains the query. Returns {"items": [{"id", "name", "price"}]}."""
        found = [{"id": i["id"], "name": i["name"], "price": i["price"]} for i in ITEMS.values()
                 if query.lower() in i["name"] and (not in_stock or i["stock"] > 0)]
        return {"items": found}

    @server.tool(annotations=read_only)
    def get_item(item_id: int) -> dict[str, Any]:
        """One item by id, with its stock and supplier code."""
        if item_id not in ITEMS:
            raise ToolError(f"no item with id {item_id}")
        return ITEMS[item_id]

    @server.tool(structured_output=False, annotations=read_only)
    def supplier_info(code: str) -> str:
        """A supplier's details, as JSON text (no outputSchema)."""
        if code not in SUPPLIERS:
            raise ToolError(f"unknown supplier {code!r}")
        return json.dumps(SUPPLIERS[code])

    @server.tool(structured_output=False)
    def greet(name: str) -> str:
        """A plain-text greeting."""
        return f"Hello, {name}!"

    @server.tool(structured_output=False)
    def two_notes() -> list[TextContent]:
        """Two text items."""
        return [TextContent(type="text", text="first note"), TextContent(type="text", text="second note")]

    @server.tool(structured_output=False)
    def logo() -> list[Any]:
        """A caption and a tiny image."""
        return [TextContent(type="text", text="the logo"),
                ImageContent(type="image", data="iVBORw0KGgo=", mimeType="image/png")]

    @server.tool()
    def order(item_id: int, quantity: int) -> dict[str, Any]:
        """Order an item (changes stock)."""
        item = ITEMS.get(item_id)
        if item is None or item["stock"] < quantity:
            raise ToolError(f"cannot order {quantity} of item {item_id}: not enough stock")
        item["stock"] -= quantity
        return {"ordered": quantity, "left": item["stock"]}

    @server.tool(structured_output=False)
    def slow(seconds: float) -> str:
        """Sleeps, then answers."""
        time.sleep(seconds)
        return "done"

    @server.tool(structured_output=False)
    def crash() -> str:
        """Kills the server mid-call."""
        sys.stderr.write("shop: crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)

    @server.tool(structured_output=False)
    def lookup_code(code: str) -> str:
        """Answers a JSON-RPC error (not an isError result) for an unknown code."""
        if code != "ok":
            raise MCPError(-32602, f"invalid code {code!r}")
        return "fine"

    @server.tool()
    def whoami() -> dict[str, Any]:
        """Echoes the shop's API key (a server that leaks its credential)."""
        return {"key": os.environ.get("SHOP_API_KEY", ""), "pid": os.getpid()}

    return server


def main(argv: list[str]) -> None:
    pid_file = os.environ.get("SHOP_PID_FILE")
    if pid_file:
        with open(pid_file, "w") as f:
            f.write(str(os.getpid()))
    if "--crash-at-start" in argv:
        sys.stderr.write("shop: missing configuration, giving up\n")
        sys.exit(1)
    if "--hang-at-start" in argv:
        time.sleep(3600)
    if "--garbage" in argv:
        for _ in range(3):
            sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
        time.sleep(3600)
    server = build()
    if "--http" in argv:
        port = int(argv[argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    elif "--sse" in argv:
        port = int(argv[argv.index("--sse") + 1])
        server.run("sse", host="127.0.0.1", port=port)
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
