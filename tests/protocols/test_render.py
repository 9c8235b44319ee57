"""Rendering protocols for a model: compact signatures, full protocols, condensed response shapes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from protocols import Binding, Tool, load_data, load_spec, render_compact, render_full, response_shape
from protocols.refs import Resolver
from protocols.render import purpose, type_label
from tests.support.apis.library import library_spec


def test_response_shape_basics() -> None:
    schema = {"type": "object", "properties": {
        "results": {"type": "array", "items": {"type": "object", "properties": {
            "id": {"type": "integer"}, "name": {"type": "string"}, "score": {"type": "number"}}}},
        "count": {"type": "integer"}}}
    assert response_shape(schema) == "{results: [{id: int, name: str, score: float}], count: int}"
    assert response_shape(schema, max_props=1) == "{results: [{id: int, ...}], ...}"
    assert response_shape(schema, max_depth=1) == "{results: [...], count: int}"
    assert response_shape(schema, max_depth=0) == "{...}"
    assert response_shape({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}) == '["a"|"b"]'
    assert response_shape({"type": "object", "additionalProperties": {"type": "integer"}}) == "{str: int}"
    assert response_shape({"oneOf": [{"type": "string"}, {"type": "integer"}]}) == "str | int"
    assert response_shape({"type": "object", "properties": {"page-size": {"type": "integer"}}}) == '{"page-size": int}'
    assert response_shape(None) == "any"
    assert response_shape({"type": "object", "description": "(recursive: Node)"}) == "Node"


def test_type_labels() -> None:
    assert type_label({"type": "array", "items": {"type": "integer"}}) == "list[int]"
    assert type_label({"type": ["string", "null"]}) == "str|None"
    assert type_label({"enum": list(range(8))}) == "0|1|2|3|4|5|..."
    assert type_label({}) == "any"


def test_render_compact_library() -> None:
    c = load_data(library_spec("http://127.0.0.1:9"))
    text = render_compact(c.tools)
    assert text.splitlines()[0] == ("search_authors(name: str) -> {results: [{id: int, name: str, born: int, "
                                    "country: str}], count: int}")
    assert "list_book_reviews(book_id: int, limit: int = 10) -> [{user: str, rating: int, text: str}]" in text
    assert "create_order(book_id: int, quantity: int = 1) -> {order_id: int, total: float}" in text
    assert "    Order copies of a book." in text
    assert "get_stats() -> {books: int, authors: int}" in text


def test_render_compact_required_first_and_notes() -> None:
    tool = Tool(name="find", collection="c", description="Find things.", parameters={
        "type": "object", "required": ["q"], "properties": {
            "limit": {"type": "integer", "default": 5, "description": "How many. At most 50."},
            "q": {"type": "string", "description": "The **query** text, see [docs](http://x)."},
            "mode": {"type": "string", "enum": ["a", "b"]}}})
    text = render_compact([tool])
    assert text.splitlines()[0] == 'find(q: str, limit: int = 5, mode: "a"|"b" = None)'
    assert "    limit: How many." in text and "    q: The query text, see docs." in text
    assert "    limit:" not in render_compact([tool], param_notes=False)


def test_purpose_skips_bare_titles() -> None:
    t = Tool(name="t", collection="c", description="Get Details. Get the primary person details by id.")
    assert purpose(t) == "Get Details. Get the primary person details by id."
    assert purpose(Tool(name="t", collection="c", method="GET", path="/x")) == "GET /x"


def test_render_full_has_everything() -> None:
    c = load_data(library_spec("http://127.0.0.1:9"))
    text = render_full(c.tool("create_order"))  # type: ignore[arg-type]
    assert "POST /orders" in text
    assert "book_id (int, required, in body)" in text and "quantity (int, optional, in body, default 1)" in text
    assert "Returns: {order_id: int, total: float}" in text
    assert "Status codes: 201 Created; 401 Missing or wrong key" in text
    assert "Credentials: api_key" in text
    tool = Tool(name="t", collection="c", method="GET", path="/x/{x-id}", description="Line one.\nLine two.",
                parameters={"type": "object", "required": ["x_id"], "properties": {
                    "x_id": {"type": "string", "description": "the id"}, "body": {"type": "array"}}},
                bindings={"x_id": Binding("path", "x-id"), "body": Binding("body", "")},
                examples=[{"args": {"x_id": "1"}, "response": {"ok": True}, "status": 200}])
    full = render_full(tool)
    assert "x_id (str, required, in path 'x-id'): the id" in full
    assert "body (list, optional, the whole request body)" in full
    assert "Line one.\n  Line two." in full
    assert 'Example {"x_id": "1"}: {"ok": true}' in full
    assert "Returns: not documented" in full


def test_render_full_huge_schema_is_condensed_but_params_never_dropped() -> None:
    props: dict[str, Any] = {f"f{i}": {"type": "object", "properties": {f"g{j}": {"type": "string"} for j in range(10)}}
                             for i in range(40)}
    params = {f"p{i}": {"type": "string", "description": f"parameter {i}"} for i in range(60)}
    tool = Tool(name="big", collection="c", parameters={"type": "object", "properties": params, "required": []},
                response_schema={"type": "object", "properties": props})
    full = render_full(tool)
    assert all(f"p{i} (str, optional" in full for i in range(60))
    assert "more fields, condensed:" in full
    assert len(full) < 20_000


def test_restbench_compact_is_small_and_complete(bench_data: Path) -> None:
    for spec in ("tmdb_oas", "spotify_oas"):
        path = bench_data / f"restbench/specs/{spec}.json"
        c = load_spec(path)
        tools = c.tools[:20]
        text = render_compact(tools)
        for t in tools:
            assert len(re.findall(rf"^{t.name}\(", text, re.M)) == 1
            for p in t.properties:
                assert re.search(rf"\b{re.escape(p)}\b", text), (t.name, p)
        doc = json.loads(path.read_text())
        resolver = Resolver(doc, spec)
        # the raw OpenAPI operations with their $refs resolved, as a model would otherwise see them
        raw = sum(len(json.dumps(resolver.schema(doc["paths"][t.path][t.method.lower()], ""))) for t in tools)
        assert len(text) <= 0.25 * raw
    # every rendering of every tool works (no exceptions on real data)
    for t in c.tools:
        assert render_full(t).startswith(t.name + "(")


def test_signature_defaults_are_python_literals() -> None:
    tool = Tool(name="find", collection="c", parameters={
        "type": "object", "required": ["q"],
        "properties": {"q": {"type": "string"}, "adult": {"type": "boolean", "default": False},
                       "sort": {"type": "string", "default": "asc"}, "region": {"type": "string"}}})
    first = render_compact([tool]).splitlines()[0]
    assert "find(q: str, adult: bool = False, sort: str = 'asc', region: str = None)" in first
