"""``atc serve --tools py:...``: an MCP host gets Python functions of the server's process as
tools: in programs (``run_program``) and, with ``--proxy-tools``, one by one, their read-only mark
as the ``readOnlyHint`` (issue 33)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.serve import serve_env, stdio_client

pytestmark = pytest.mark.slow  # a real atc serve process over stdio (~2 s to start)


def _text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def test_serve_gives_a_host_the_functions_of_a_py_source(tmp_path: Path) -> None:
    args = ["serve", "--tools", "py:tests.support.fakes.functions:INVENTORY", "--proxy-tools", "--sandbox", "local",
            "--transport", "stdio"]

    async def go() -> tuple[Any, Any, Any, Any]:
        async with stdio_client(args, serve_env(tmp_path / "home")) as client:
            listed = await client.list_tools()
            found = await client.call_tool("search_tools", {"query": "where is an item kept, move it", "k": 2})
            ran = await client.call_tool("run_program", {"program": (
                "low = list_items(filter={'min_count': 1})\nprint(low[0]['name'], supplier_of(sku=low[0]['sku']))\n")})
            one = await client.call_tool("get_item", {"sku": "B-7"})
            return listed, found, ran, one

    listed, found, ran, one = anyio.run(go)
    by_name = {t.name: t for t in listed.tools}
    assert by_name["list_items"].annotations.read_only_hint is True
    assert by_name["move_item"].annotations.read_only_hint is False
    assert by_name["move_item"].input_schema["required"] == ["sku", "to"]
    assert "move_item" in _text(found)
    assert ran.structured_content["ok"] is True, ran.structured_content
    assert ran.structured_content["answer"] == "teapot {'sku': 'A-1', 'supplier': 'acme'}\n"
    assert [c["method"] for c in ran.structured_content["calls"]] == ["PYTHON", "PYTHON"]
    assert json.loads(_text(one))["name"] == "cup"
