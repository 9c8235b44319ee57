"""The parts of safe unsafe probing and of what probing keeps, one by one: what a tool does
(``probes.plan.actions``), the write plan's rules on any API (``probes.plan.steps``, property-tested), text
answers (``probes.arguments.text``), declared and learnt schemas (``probes.results.schemas``), filters that narrow
(``probes.arguments.filters``)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.arguments.filters import narrowing
from probes.arguments.text import text_records
from probes.plan.actions import action_of
from probes.plan.scope import Scope, fresh_name, outside_roots, parse_scope
from probes.plan.steps import Bound, plan_writes
from probes.results.schemas import MAX_BYTES, cap, combine
from protocols.errors import UsageError
from protocols.model import Binding, Collection, Tool


def http(method: str, path: str, name: str, params: dict[str, Any] | None = None,
         required: tuple[str, ...] = ()) -> Tool:
    params = dict(params or {})
    for m in re.findall(r"\{([^}]+)\}", path):
        params.setdefault(m, {"type": "string"})
    bindings = {p: Binding("path" if "{" + p + "}" in path else "body", p) for p in params}
    return Tool(name=name, collection="c", method=method, path=path, bindings=bindings,
                parameters={"type": "object", "properties": params,
                            "required": [p for p in params if "{" + p + "}" in path or p in required]})


def mcp(name: str, props: dict[str, Any], required: list[str], read_only: bool = False) -> Tool:
    return Tool(name=name, collection="m", method="MCP", path=name, bindings={p: Binding("body", p) for p in props},
                parameters={"type": "object", "properties": props, "required": required},
                annotations={"readOnlyHint": True} if read_only else {})


@pytest.mark.parametrize(("method", "path", "verb", "own"), [
    ("DELETE", "/accounts", "bulk", None),
    ("DELETE", "/accounts/{id}", "delete", "id"),
    ("DELETE", "/buckets/{bucket_id}/collections", "bulk", None),
    ("DELETE", "/users/{id}/avatar", "delete", "id"),
    ("POST", "/buckets/{bucket_id}/collections", "create", None),
    ("POST", "/items/{id}/publish", "other", "id"),
    ("GET", "/items/{sku}/delete", "delete", "sku"),
    ("PUT", "/buckets/{id}", "update", "id"),
    ("PATCH", "/buckets/{bucket_id}/collections/{id}", "update", "id"),
    ("POST", "/search", "other", None),
    ("POST", "/__flush__", "other", None),
    ("PUT", "/settings", "bulk", None),
])
def test_what_an_http_tool_does(method: str, path: str, verb: str, own: str | None) -> None:
    action = action_of(http(method, path, "t"))
    assert action.verb == verb
    assert (action.own.param if action.own else None) == own


def test_what_an_mcp_tool_does() -> None:
    entities = {"entities": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string"}, "entityType": {"type": "string"}}}}}
    create = action_of(mcp("create_entities", entities, ["entities"]))
    assert create.verb == "create" and [(t.field, t.role, t.key) for t in create.targets] == [("name", "own", "entity_name")]
    delete = action_of(mcp("delete_entities", {"entityNames": {"type": "array", "items": {"type": "string"}}},
                           ["entityNames"]))
    assert delete.verb == "delete" and delete.own is not None and delete.own.key == "entity_name"
    assert action_of(mcp("clear_graph", {}, [])).verb == "bulk"
    move = action_of(mcp("move_file", {"source": {"type": "string"}, "destination": {"type": "string"}},
                         ["source", "destination"]))
    assert move.verb == "update" and [t.role for t in move.targets] == ["ref", "new"]
    assert action_of(mcp("read_graph", {}, [], read_only=True)).verb == "read"


def test_scope_pins_paths_and_new_names() -> None:
    assert parse_scope(["bucket_id=a", "path=/tmp/x"]) == (("bucket_id", "a"), ("path", "/tmp/x"))
    for bad in (["nonsense"], ["=v"], ["a="], ["a=1", "A=2"]):
        with pytest.raises(UsageError):
            parse_scope(bad)
    scope = Scope((("path", "/tmp/x"),))
    assert scope.under_root("/tmp/x/a/b") and scope.under_root("/tmp/x")
    assert not scope.under_root("/tmp/xy") and not scope.under_root("/tmp/x/../y") and not scope.under_root("rel")
    # The last look before a write is sent: any path-like argument, at any depth, inside a root.
    assert outside_roots(scope, {"path": "/tmp/x/new", "edits": [{"file": "/tmp/x/a"}]}) is None
    assert outside_roots(scope, {"source": "/tmp/x/a", "destination": "/etc/passwd"}) == "/etc/passwd"
    assert outside_roots(scope, {"edits": [{"path": "/tmp/x/../y"}]}) == "/tmp/x/../y"
    assert outside_roots(Scope((("bucket_id", "b"),)), {"path": "/etc/passwd"}) is None  # no root pinned
    name = fresh_name({"type": "string"})
    assert name.startswith("atc-probe-") and fresh_name({"type": "string"}) != name
    assert fresh_name({"type": "integer"}) is None and fresh_name({"type": "string", "maxLength": 4}) is None
    assert fresh_name({"type": "string"}, root="/tmp/x", entity="file").startswith("/tmp/x/atc-probe-")


# -- the plan's rules on any API ---------------------------------------------------------------------

_KINDS = ["buckets", "collections", "records", "accounts", "groups"]


@st.composite
def apis(draw: Any) -> tuple[list[Tool], dict[str, str], set[str]]:
    tools: list[Tool] = []
    roots = draw(st.lists(st.sampled_from(_KINDS), min_size=1, max_size=3, unique=True))
    pins: dict[str, str] = {}

    def resource(prefix: str, kind: str, depth: int, above: tuple[str, ...] = ()) -> None:
        one = kind[:-1]
        own = draw(st.sampled_from(["id", f"{one}_id"]))
        item = f"{prefix}/{kind}/{{{own if own == 'id' else own}}}"
        ops = draw(st.sets(st.sampled_from(["post", "bulk", "put", "patch", "delete", "action"])))
        if "post" in ops:
            tools.append(http("POST", f"{prefix}/{kind}", f"create_{one}_{len(tools)}"))
        if "bulk" in ops:
            tools.append(http("DELETE", f"{prefix}/{kind}", f"delete_{kind}_{len(tools)}"))
        if "put" in ops:
            tools.append(http("PUT", item, f"update_{one}_{len(tools)}"))
        if "patch" in ops:
            tools.append(http("PATCH", item, f"patch_{one}_{len(tools)}"))
        if "delete" in ops:
            tools.append(http("DELETE", item, f"delete_{one}_{len(tools)}"))
        if "action" in ops:
            tools.append(http("POST", f"{item}/publish", f"publish_{one}_{len(tools)}"))
        if draw(st.booleans()):
            pins[f"{one}_id"] = draw(st.sampled_from(["throwaway", "scratch"]))
        if depth < 2:
            others = [k for k in _KINDS if k not in (*above, kind)]
            for child in draw(st.lists(st.sampled_from(others), max_size=2, unique=True)):
                resource(f"{prefix}/{kind}/{{{one}_id}}", child, depth + 1, (*above, kind))

    for kind in roots:
        resource("", kind, 0)
    bulk = {t.name for t in tools if t.method == "DELETE" and draw(st.booleans())}
    return tools, pins, bulk


def _bounds(value: Any) -> list[Bound]:
    if isinstance(value, Bound):
        return [value]
    if isinstance(value, list):
        return [b for v in value for b in _bounds(v)]
    if isinstance(value, dict):
        return [b for v in value.values() for b in _bounds(v)]
    return []


@given(apis())
@settings(max_examples=60, deadline=None)
def test_the_write_plan_keeps_its_rules_on_any_api(api: tuple[list[Tool], dict[str, str], set[str]]) -> None:
    tools, pins, bulk = api
    collection = Collection(name="c", tools=tools)
    unsafe = [(t, action_of(t, collection)) for t in tools]
    plan = plan_writes(unsafe, Scope(tuple(pins.items())), bulk)
    order = {"create": 0, "update": 1, "other": 2, "delete": 3, "bulk": 3}
    phases = [order[s.verb] for s in plan.steps]
    assert phases == sorted(phases), [(s.verb, s.tool) for s in plan.steps]
    creates = {s.index for s in plan.steps if s.verb == "create"}
    deleted: list[int] = []
    for step in plan.steps:
        tool = next(t for t in tools if t.name == step.tool)
        bounds = {p: b for p, v in step.args.items() for b in _bounds(v)}
        # every path parameter: pinned (the pin's value), created by an earlier create, or the new
        # name of what a create makes
        for pname, binding in tool.bindings.items():
            if binding.location != "path":
                continue
            bound = bounds.get(pname)
            assert bound is not None, (step.tool, pname)
            if bound.kind == "scope":
                assert bound.value in pins.values()
            elif bound.kind == "created":
                assert bound.step in creates and bound.step < step.index
            else:
                assert bound.kind == "new" and step.verb == "create" and bound.own
        if step.verb in ("delete", "bulk") and step.deletes is not None:
            assert step.deletes in creates
            deleted.append(step.deletes)
        if step.verb == "delete":
            own = action_of(tool).own
            assert own is not None and bounds[own.param].kind == "created"  # never a pinned or seen object
        if step.verb == "bulk":
            assert step.tool in bulk
        assert any(b.kind in ("scope", "created") for b in bounds.values()) or step.verb == "bulk"
    assert deleted == sorted(deleted, reverse=True)  # newest first
    for tool, action in unsafe:
        assert tool.name in {s.tool for s in plan.steps} or plan.never.get(tool.name), tool.name
        if action.verb == "bulk" and tool.name not in bulk:
            assert "--allow-bulk" in plan.never[tool.name]


# -- text, schemas, filters ---------------------------------------------------------------------------


def test_text_answers_give_records() -> None:
    assert text_records("Allowed directories:\n/srv/a\n") == [{"path": "/srv/a", "name": "a"}]
    listed = text_records("[FILE] notes.txt\n[DIR] src\n[FILE] big.bin      12 B", {"path": "/srv/a"})
    assert [r["path"] for r in listed] == ["/srv/a/notes.txt", "/srv/a/src", "/srv/a/big.bin"]
    assert text_records("size: 1204\nowner = ada\nJust a sentence here.") == [{"size": 1204}, {"owner": "ada"}]
    assert text_records("a3f9c2\nb7d1e0") == [{"name": "a3f9c2"}, {"name": "b7d1e0"}]
    assert text_records("/srv/a/x.txt: Error - not a file")[0]["path"] == "/srv/a/x.txt"


def test_a_declared_schema_wins_and_learning_is_merged() -> None:
    declared = {"type": "object", "required": ["id", "owner"], "additionalProperties": False,
                "properties": {"id": {"type": "string", "format": "uuid", "description": "the key"},
                               "owner": {"$ref": "#/$defs/User"}, "tags": {"type": "array"}},
                "$defs": {"User": {"type": "object", "properties": {"name": {"type": "string"}}}}}
    learnt = {"type": "object", "required": ["id", "tags", "extra"], "properties": {
        "id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": "null"}, "owner": {"type": "object", "properties": {"name": {"type": "null"}}}}}
    out, notes = combine(declared, learnt, {"id": 5, "tags": ["a"], "extra": None, "owner": {"name": None}})
    assert out is not None and out["properties"]["id"]["type"] == "string" and out["properties"]["id"]["format"] == "uuid"
    assert out["properties"]["tags"]["items"]["type"] == "string"
    assert out["$defs"]["User"]["properties"]["name"]["type"] == ["string", "null"]  # observed null, merged
    assert any("$.id: declared string, seen integer" in n for n in notes)
    assert any("$.extra: seen, although the declared schema allows no other fields" in n for n in notes)
    assert any("$.owner: declared required, missing" in n for n in notes)
    assert declared["properties"]["tags"] == {"type": "array"}  # the input is not changed
    assert combine(None, learnt)[0] == learnt and combine(declared, None) == (declared, [])


def test_learnt_schemas_are_capped() -> None:
    from probes.results.document import merge_schema

    doc = {"paths": {f"/p{i}/{{id}}": {"get": {"parameters": [{"name": "id", f"x{i}": i}],
                                               "responses": {str(200 + i % 3): {"description": "x" * 20}}}}
                     for i in range(300)},
           "info": {"title": "t", "deep": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": {"j": 1}}}}}}}}}}}}
    learnt = merge_schema([doc])
    assert learnt is not None and len(json.dumps(learnt)) > 4 * MAX_BYTES
    small = cap(learnt)
    assert small is not None and len(json.dumps(small)) <= MAX_BYTES
    assert "additionalProperties" in small["properties"]["paths"] and small["properties"]["paths"]["x-atc-keys"]
    assert "x-atc-truncated" in json.dumps(small)


def test_a_filter_narrows_or_is_ignored() -> None:
    base = [{"id": i, "postId": i % 3} for i in range(9)]
    assert narrowing(base, [x for x in base if x["postId"] == 1], "postId", 1) == "9 -> 3 items, all with postId=1"
    assert narrowing(base, base, "postId", 1) is None
    assert narrowing(base, [], "postId", 1) == ""
    assert narrowing({"items": base}, {"items": base[:2]}, "q", "x") == "9 -> 2 items"


def test_a_written_tools_json_reads_back_with_its_examples() -> None:
    from probes.results.outputs import mcp_tools_document
    from probes.results.report import ProbeReport, ToolReport
    from protocols import load_data

    tool = mcp("open_nodes", {"names": {"type": "array", "items": {"type": "string"}}}, ["names"], read_only=True)
    tool.examples = [{"args": {"names": ["Ada"]}, "response": {"entities": []}, "program":
                      'nodes = open_nodes(names=["Ada"])\nprint(nodes)\n'}]
    report = ProbeReport(tools=[ToolReport(name="open_nodes", status="documented", calls=1),
                                ToolReport(name="never", status="skipped", reason="never sent: outside the scope")])
    doc = mcp_tools_document(Collection(name="m", tools=[tool]), report)
    assert doc["tools"][0]["x-atc-probe"]["status"] == "documented"
    again = load_data(doc, source="tools.json")
    assert again.tools[0].examples == tool.examples
