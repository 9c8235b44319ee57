"""Structured request bodies, shown and checked (issue 30, item 1): the names of referenced
components survive the import, ``allOf`` folds without losing a constraint, the compact and the
full protocol show what a filter body looks like, and a wrong shape is refused with the path and
the expected fields.

The FastAPI-style orchestrator (``tests/support/apis/orchestrator.py``, Prefect 3's shape of API) is the
real server: a scripted model learns its filter language from atc's reflection alone.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from atc.llm.client import OpenAIModel
from atc.loop.solving import solve
from protocols import load_data, load_spec, render_compact, render_full
from protocols.allof import NAME_KEY, merge_all_of
from protocols.model import Collection
from protocols.refs import Resolver
from protocols.shapes import input_shape
from sandbox.api import Limits, Toolset
from sandbox.execute import run
from sandbox.gateway.core import Gateway
from tests.support.apis.orchestrator import OrchestratorAPI, ident
from tests.support.fakes.openai_server import ScriptedOpenAI

READ_POOLS = "read_work_pools_work_pools_filter_post"
READ_RUNS = "read_flow_runs_flow_runs_filter_post"
POOL_FILTER = 'WorkPoolFilter = {operator: "and_"|"or_", id: {any_: [str]}, name: {any_: [str]}, type: {any_: [str]}}'


@pytest.fixture(scope="module")
def api() -> Iterator[OrchestratorAPI]:
    with OrchestratorAPI() as running:
        yield running


@pytest.fixture(scope="module")
def orchestrator(api: OrchestratorAPI) -> Collection:
    return load_data(api.spec())


# -- the import keeps names and constraints -----------------------------------------------------


def test_references_keep_the_component_name_and_their_siblings() -> None:
    doc = {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {"/a": {"post": {
        "operationId": "a", "parameters": [{"$ref": "#/components/parameters/Q"}],
        "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {
            "first": {"$ref": "#/components/schemas/Filter", "description": "the first"},
            "second": {"$ref": "#/components/schemas/Filter", "description": "the second", "default": None},
            "mode": {"$ref": "#/components/schemas/Alias"}}}}}},
        "responses": {"200": {"description": "ok"}}}}},
        "components": {"parameters": {"Q": {"name": "q", "in": "query", "schema": {"type": "string"}}},
                       "schemas": {"Filter": {"type": "object", "properties": {"any_": {"type": "array"}}},
                                   "Alias": {"$ref": "#/components/schemas/Filter"}}}}
    tool = load_data(doc).tools[0]
    first, second, mode = (tool.properties[k] for k in ("first", "second", "mode"))
    assert first[NAME_KEY] == second[NAME_KEY] == "Filter" and mode[NAME_KEY] == "Alias"
    # the second use of a component comes from the resolver's cache: its own siblings still apply
    assert first["description"] == "the first" and second["description"] == "the second" and "default" in second
    assert NAME_KEY not in tool.properties["q"]  # a parameter object is no named schema
    swagger = Resolver({"definitions": {"Pet": {"type": "object", "properties": {"id": {"type": "integer"}}}}}, "s")
    assert swagger.schema({"$ref": "#/definitions/Pet"}, "")[NAME_KEY] == "Pet"
    defs = Resolver({"$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}}}, "m")
    assert defs.schema({"$ref": "#/$defs/Point"}, "")[NAME_KEY] == "Point"


def test_all_of_folds_every_constraint_of_every_member() -> None:
    base = {NAME_KEY: "Base", "type": "object", "required": ["id"], "properties": {
        "id": {"type": "integer", "minimum": 1, "maximum": 100}, "code": {"type": "string", "pattern": "^[A-Z]+$"},
        "kind": {"enum": ["a", "b", "c"]}}}
    extension = {"type": "object", "required": ["name"], "properties": {
        "id": {"type": "integer", "description": "re-described", "maximum": 500},
        "code": {"type": "string", "pattern": "^.{3}$", "maxLength": 3},
        "kind": {"enum": ["b", "c", "d"]}, "name": {"type": "string"}}}
    merged = merge_all_of({"allOf": [base, extension], "description": "own"})
    props = merged["properties"]
    assert props["id"] == {"type": "integer", "minimum": 1, "maximum": 100, "description": "re-described"}
    assert props["kind"] == {"enum": ["b", "c"]}
    assert props["code"]["pattern"] == "^[A-Z]+$" and props["code"]["allOf"] == [{"pattern": "^.{3}$"}]
    assert merged["required"] == ["id", "name"] and merged["description"] == "own"
    assert NAME_KEY not in merged  # an extended base is another type
    assert merge_all_of({"allOf": [base], "description": "a Base"})[NAME_KEY] == "Base"
    bounds = merge_all_of({"allOf": [{"type": "number", "minimum": 0, "maxLength": 9},
                                     {"type": "integer", "minimum": 5, "maxLength": 4}], "maximum": 10})
    assert bounds == {"type": "integer", "minimum": 5, "maxLength": 4, "maximum": 10}
    assert merge_all_of({"allOf": [{"type": "string"}, {"type": "integer"}]})["allOf"] == [{"type": "integer"}]


# -- the protocols show the shapes --------------------------------------------------------------


def test_the_compact_protocol_shows_each_named_body_type_once(orchestrator: Collection) -> None:
    text = render_compact(orchestrator.tools)
    pools = text.split("\n")[[i for i, ln in enumerate(text.split("\n")) if ln.startswith(READ_POOLS)][0]]
    assert pools.startswith(f"{READ_POOLS}(work_pools: WorkPoolFilter = None, limit: int = None, offset: int = 0)")
    assert text.count(f"    {POOL_FILTER}") == 1 and text.count("work_pools: WorkPoolFilter = None") == 7
    assert re.search(r"^    FlowRunFilter = \{operator: .*state: \{operator: \"and_\"\|\"or_\", type: \{any_: "
                     r"\[\"SCHEDULED\"\|.*start_time: \{before_: str, after_: str, is_null_: bool\}", text, re.M)
    # an object with required fields marks the optional ones
    assert '    StateCreate = {type: "SCHEDULED"|' in text and "name?: str, message?: str}" in text
    # each tool alone defines what it takes
    alone = render_compact([orchestrator.tool(READ_RUNS)])  # type: ignore[list-item]
    assert all(f"    {name} = {{" in alone for name in ("FlowFilter", "FlowRunFilter", "DeploymentFilter",
                                                            "WorkPoolFilter"))
    assert "    WorkPoolFilter =" not in render_compact([orchestrator.tool(READ_RUNS)], shapes=False)  # type: ignore[list-item]


def test_the_full_protocol_lists_every_nested_field_by_its_path(orchestrator: Collection) -> None:
    full = render_full(orchestrator.tool(READ_RUNS))  # type: ignore[arg-type]
    assert "  work_pools (WorkPoolFilter|None, optional, in body)" in full
    for line in ('work_pools.operator: "and_"|"or_", default "and_" - Operator for combining filter criteria.',
                 "work_pools.name: WorkPoolFilterName - Filter criteria for `WorkPool.name`",
                 "work_pools.name.any_: list[str] - A list of work pool names to include",
                 "flow_runs.id.any_: list[str], format uuid - A list of flow run ids to include",
                 'flow_runs.state.type.any_: list["SCHEDULED"|"PENDING"|',
                 "flow_runs.start_time.after_: str, format date-time - Only include flow runs starting at or after"):
        assert f"\n    {line}" in full, line
    create = render_full(orchestrator.tool("create_flow_run_flow_runs_post"))  # type: ignore[arg-type]
    assert "\n    state.type: " in create and "required" in create.split("\n    state.type: ")[1].split("\n")[0]
    capped = render_full(orchestrator.tool(READ_RUNS), max_input_fields=10)  # type: ignore[arg-type]
    assert re.search(r"\.\.\. \d+ more fields", capped) and capped.count("\n    flow") < 12


def test_unnamed_objects_are_shown_inline_and_shapes_are_bounded(bench_data: Path) -> None:
    spotify = load_spec(bench_data / "restbench/specs/spotify_oas.json")
    line = render_compact([spotify.tool("remove_tracks_playlist")]).splitlines()[0]  # type: ignore[list-item]
    assert line.startswith("remove_tracks_playlist(playlist_id: str, tracks: [{uri: str}], snapshot_id: str = None)")
    node: dict[str, Any] = {"type": "object", "properties": {"child": {"type": "object", "description": "(recursive: "
                                                                       "Node)"}, "n": {"type": "integer"}}}
    assert input_shape(node) == "{child: Node, n: int}"
    deep: dict[str, Any] = {"type": "integer"}
    for i in range(8):
        deep = {"type": "object", NAME_KEY: f"L{i}", "properties": {"x": deep}}
    assert input_shape(deep, max_depth=2) == "{x: {x: L5}}"
    wide = {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(30)}}
    assert input_shape(wide, max_props=3) == "{f0: str, f1: str, f2: str, ...}"
    choice = {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                        {"type": "object", "properties": {"b": {"type": "string"}}}, {"type": "null"}]}
    assert input_shape(choice) == "{a: int} | {b: str}"
    assert input_shape({"type": "object", "additionalProperties": {"type": "object", "properties": {
        "v": {"type": ["number", "null"]}}}}) == "{str: {v: float}}"


def test_the_compact_goal_holds_on_the_orchestrator(orchestrator: Collection, api: OrchestratorAPI) -> None:
    doc = api.spec()
    resolver = Resolver(doc, "orchestrator")
    raw = sum(len(json.dumps(resolver.schema(doc["paths"][t.path][t.method.lower()], ""))) for t in orchestrator.tools)
    text = render_compact(orchestrator.tools)
    assert len(text) <= 0.25 * raw, (len(text), raw)
    for tool in orchestrator.tools:
        assert all(re.search(rf"\b{re.escape(p)}\b", text) for p in tool.properties), tool.name


# -- a wrong shape is refused with the path and the expected fields -----------------------------


@pytest.mark.parametrize(("args", "message"), [
    ({"work_pools": {"name": ["precious-pool"]}},
     "argument 'work_pools.name': expected WorkPoolFilterName = {any_: [str]} or None, got ['precious-pool']"),
    ({"work_pools": {"name": {"any": ["precious-pool"]}}},
     "argument 'work_pools.name': Additional properties are not allowed ('any' was unexpected) "
     "(expected fields: any_)"),
    ({"work_pools": "precious-pool"},
     f"argument 'work_pools': expected {POOL_FILTER} or None, got 'precious-pool'"),
    ({"work_pools": {"name": {"any_": "precious-pool"}}},
     "argument 'work_pools.name.any_': expected [str] or None, got 'precious-pool'"),
    ({"work_pools": {"type": {"any_": ["docker", 7]}}}, "argument 'work_pools.type.any_[1]': 7 is not of type 'string'"),
])
def test_a_wrong_filter_is_refused_with_its_path_and_the_expected_shape(
        orchestrator: Collection, api: OrchestratorAPI, args: dict[str, Any], message: str) -> None:
    gateway = Gateway(Toolset([orchestrator]))
    before = len(api.requests)
    out = gateway.call(READ_POOLS, args)
    assert not out.ok and out.error is not None
    assert out.error["message"] == f"{READ_POOLS}: {message}"
    assert len(api.requests) == before  # never sent
    assert gateway.calls[0].error is not None and "work_pools" in gateway.calls[0].error
    # ``warn`` mode records the same words and sends the call: the server refuses it its own way
    warn = Gateway(Toolset([orchestrator], validation="warn"))
    warned = warn.call(READ_POOLS, args)
    assert not warned.ok and warned.status == 422 and warn.calls[0].warnings[0] == f"{READ_POOLS}: {message}"


def test_a_program_chains_filters_names_in_paths_and_upserts(orchestrator: Collection, api: OrchestratorAPI) -> None:
    program = """
pool = read_work_pool_work_pools_name_get(name="precious-pool")
failed = read_flow_runs_flow_runs_filter_post(
    flow_runs={"state": {"type": {"any_": ["FAILED"]}}},
    work_pools={"name": {"any_": [pool["name"]]}}, sort="START_TIME_DESC")
count = count_flow_runs_flow_runs_count_post(flow_runs={"tags": {"all_": ["nightly"]}},
                                            work_pools={"type": {"any_": ["docker"]}})
first = create_flow_flows_post(name="ingest", tags=["new"])
again = create_flow_flows_post(name="ingest")
run1 = create_flow_run_flow_runs_post(flow_id=first["id"], idempotency_key="k-1", state={"type": "SCHEDULED"})
run2 = create_flow_run_flow_runs_post(flow_id=first["id"], idempotency_key="k-1")
deployment = read_deployment_by_name_deployments_name_flow_name_deployment_name_get(
    flow_name="backup", deployment_name="nightly-backup")
print([r["name"] for r in failed], count, first["id"] == again["id"], run1["id"] == run2["id"],
      run2["state_type"], deployment["work_pool_name"])
"""
    result = run(program, orchestrator, sandbox="local", limits=Limits(timeout=30))
    assert result.ok, result.error
    assert result.answer.strip() == "['gentle-moose', 'quiet-badger'] 1 True True SCHEDULED precious-pool"
    sent = [(m, p, b) for m, p, b in api.requests if p == "/api/flow_runs/filter"][-1]
    assert sent[2] == {"flow_runs": {"state": {"type": {"any_": ["FAILED"]}}},
                       "work_pools": {"name": {"any_": ["precious-pool"]}}, "sort": "START_TIME_DESC"}
    assert [c.tool for c in result.calls][:2] == ["read_work_pool_work_pools_name_get", READ_RUNS]
    assert ("GET", "/api/work_pools/precious-pool", None) in api.requests
    assert any(f["name"] == "ingest" and f["id"] == ident("flow", "ingest") for f in api.data["flows"])


def test_a_model_learns_the_filter_language_from_the_reflection(api: OrchestratorAPI,
                                                                  orchestrator: Collection) -> None:
    bad = 'runs = read_flow_runs_flow_runs_filter_post(work_pools={"name": ["precious-pool"]})\n' \
          'print(sorted(r["name"] for r in runs))'
    good = bad.replace('{"name": ["precious-pool"]}', '{"name": {"any_": ["precious-pool"]}}')
    with ScriptedOpenAI() as server:
        server.push(f"```python\n{bad}\n```", f"```python\n{good}\n```")
        client = OpenAIModel("scripted-model", base_url=server.base_url, backoff=0.01)
        sol = solve("Which flow runs ran on the precious-pool work pool?", orchestrator, client=client,
                    sandbox="local", limits=Limits(timeout=30))
        first, second = server.request_text(0), server.request_text(1)
    assert sol.ok and sol.answer.strip() == "['eager-lynx', 'gentle-moose', 'quiet-badger', 'swift-crane']"
    assert POOL_FILTER in first  # the generation prompt already shows the shape
    assert "argument 'work_pools.name': expected WorkPoolFilterName = {any_: [str]} or None" in second
    assert "work_pools.name.any_: list[str] - A list of work pool names to include" in second


# -- where a user and a host's model read protocols ---------------------------------------------


@pytest.mark.slow
def test_tools_show_and_describe_tools_show_the_body(api: OrchestratorAPI, tmp_path: Path) -> None:
    import anyio

    from tests.support.serve import ATC, serve_env, stdio_client

    spec = api.write_spec(tmp_path / "orchestrator.json")
    env = serve_env(tmp_path / "home")
    imported = subprocess.run([str(ATC), "tools", "import", str(spec)], capture_output=True, text=True, env=env,
                              timeout=120)
    assert imported.returncode == 0, imported.stderr
    shown = subprocess.run([str(ATC), "tools", "show", f"orchestrator.{READ_POOLS}"], capture_output=True,
                           text=True, env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "  work_pools (WorkPoolFilter|None, optional, in body)\n" \
           "    work_pools.operator: \"and_\"|\"or_\", default \"and_\"" in shown.stdout
    assert "    work_pools.name.any_: list[str] - A list of work pool names to include" in shown.stdout
    listed = subprocess.run([str(ATC), "tools", "show", "orchestrator"], capture_output=True, text=True, env=env,
                            timeout=120)
    assert listed.stdout.count(POOL_FILTER) == 1

    async def session() -> tuple[Any, Any]:
        async with stdio_client(["serve", "--tools", str(spec), "--sandbox", "local"], env) as client:
            described = await client.call_tool("describe_tools", {"names": [READ_POOLS]})
            found = await client.call_tool("search_tools", {"query": "filter work pools by name", "k": 3})
            return described, found

    described, found = anyio.run(session)
    text = "\n".join(c.text for c in described.content if hasattr(c, "text"))
    assert "work_pools.name.any_: list[str]" in text and "work_pools (WorkPoolFilter|None" in text
    found_text = "\n".join(c.text for c in found.content if hasattr(c, "text"))
    assert READ_POOLS in found_text and f"    {POOL_FILTER}" in found_text
