"""A spec whose references fan out combinatorially (issue 29): schema ``L9`` refers ten times to
``L8``, which refers ten times to ``L7``, ... down to ``L0``: 3 KB of JSON that would inline to
10^9 nodes. ``atc tools import``, ``atc mock`` and ``atc run`` given it finish in bounded time,
with the schema cut and a warning saying so (the resolver bounds the *expanded* schema; every
later walk over it is bounded by that budget)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from protocols.loaders import load_data
from protocols.refs import MAX_NODES, Resolver

ATC = Path(sys.executable).with_name("atc")
#: Far above what the bounded import takes (well under a second), far below the unbounded one's (minutes).
BOUND_S = 30


def fanout_spec(levels: int = 10, fan: int = 10) -> dict[str, Any]:
    """``L{levels-1}`` -> ``fan`` x ``L{levels-2}`` -> ... -> ``L0``, as a response and as a request body."""
    schemas: dict[str, Any] = {"L0": {"type": "object", "properties": {"v": {"type": "integer"}}}}
    for k in range(1, levels):
        schemas[f"L{k}"] = {"type": "object", "properties": {
            f"p{i}": {"$ref": f"#/components/schemas/L{k - 1}"} for i in range(fan)}}
    top = {"$ref": f"#/components/schemas/L{levels - 1}"}
    return {"openapi": "3.0.3", "info": {"title": "fanout", "version": "1"},
            "servers": [{"url": "http://127.0.0.1:9"}],
            "paths": {"/top": {
                "get": {"operationId": "get_top", "responses": {"200": {
                    "description": "ok", "content": {"application/json": {"schema": top}}}}},
                "put": {"operationId": "put_top", "requestBody": {"content": {"application/json": {"schema": top}}},
                        "responses": {"200": {"description": "ok"}}}}},
            "components": {"schemas": schemas}}


def _count(node: Any) -> int:
    """Nodes of a schema as a tree (a shared subtree counted each time it is reached)."""
    stack, seen = [node], 0
    while stack:
        item = stack.pop()
        seen += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return seen


def _atc(*args: str) -> subprocess.CompletedProcess[str]:
    started = time.monotonic()
    done = subprocess.run([str(ATC), *args], capture_output=True, text=True, timeout=BOUND_S)
    assert time.monotonic() - started < BOUND_S
    return done


def test_the_expanded_schema_is_bounded_and_the_cut_is_reported() -> None:
    started = time.monotonic()
    collection = load_data(fanout_spec(), source="fanout.json")
    assert time.monotonic() - started < 5
    get_top = next(t for t in collection.tools if t.name == "get_top")
    put_top = next(t for t in collection.tools if t.name == "put_top")
    assert _count(get_top.response_schema) <= 2 * MAX_NODES
    assert _count(put_top.parameters) <= 2 * MAX_NODES
    assert "(schema too large: cut)" in json.dumps(get_top.response_schema)
    assert any("expands to more than" in w.message for w in collection.warnings)
    # What fits is expanded as written (depth first: the first path reaches L0), the rest is cut.
    node = get_top.response_schema
    for _ in range(9):
        node = node["properties"]["p0"]
    assert node["properties"]["v"] == {"type": "integer"}
    assert get_top.response_schema["properties"]["p9"] == {"description": "(schema too large: cut)"}


def test_a_shared_subtree_reused_below_the_depth_limit_stays_under_it() -> None:
    """A cached expansion is reused only where it still fits under ``MAX_DEPTH``."""
    chain: dict[str, Any] = {"type": "integer"}
    for _ in range(20):
        chain = {"type": "array", "items": chain}
    doc = {"definitions": {"Deep": chain}}
    resolver = Resolver(doc, "deep.json")
    shallow = resolver.schema({"$ref": "#/definitions/Deep"}, "#/a")
    nested: Any = {"$ref": "#/definitions/Deep"}
    for _ in range(30):
        nested = {"type": "array", "items": nested}
    deep = resolver.schema(nested, "#/b")
    assert "cut" not in json.dumps(shallow)
    assert "(nesting too deep: cut)" in json.dumps(deep)


def test_atc_tools_import_mock_and_run_finish_in_bounded_time(tmp_path: Path) -> None:
    spec = tmp_path / "fanout.json"
    spec.write_text(json.dumps(fanout_spec()))
    env = {**os.environ, "ATC_HOME": str(tmp_path / "home")}
    imported = subprocess.run([str(ATC), "tools", "import", str(spec), "--no-embed", "--json"], capture_output=True,
                              text=True, timeout=BOUND_S, env=env)
    assert imported.returncode == 0, imported.stderr
    doc = json.loads(imported.stdout)
    assert any("expands to more than" in w["message"] for w in doc["warnings"]), doc["warnings"]

    mock = subprocess.Popen([str(ATC), "mock", str(spec), "--port", "0", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert mock.stdout is not None
        started = time.monotonic()
        url = json.loads(mock.stdout.readline())["url"]
        assert time.monotonic() - started < BOUND_S
        answer = httpx.get(url + "/top", timeout=BOUND_S)
        assert answer.status_code == 200 and isinstance(answer.json(), dict)
        program = tmp_path / "p.py"
        program.write_text("top = get_top()\nprint(sorted(top)[:2])\nput_top(**top)\nprint('sent')\n")
        ran = _atc("run", str(program), "--tools", str(spec), "--base-url", url, "--sandbox", "local", "--json")
        result = json.loads(ran.stdout)
        assert ran.returncode == 0 and result["ok"], (ran.stderr, result.get("error"))
        assert result["answer"].endswith("sent\n") and [c["tool"] for c in result["calls"]] == ["get_top", "put_top"]
    finally:
        mock.terminate()
        mock.wait(10)
