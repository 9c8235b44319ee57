"""The parts of the prober one by one: names, schema-made values, harvest matching, the planner's
coherence, documenting, the cache, safety and the report contract."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.arguments.harvest import Harvest
from probes.arguments.naming import endpoint_nouns, param_role, same_entity, singular
from probes.arguments.planner import Planner
from probes.arguments.values import schema_values
from probes.cache import ResponseCache, cacheable
from probes.calls import Observation, classify_body
from probes.plan.safety import call_safety
from probes.results.document import (
    choose_examples,
    condense_value,
    dependencies,
    example_program,
    gaps,
    leaf_paths,
    merge_schema,
)
from probes.results.report import ProbeReport, ProbeSettings, ToolReport
from protocols.errors import UsageError
from protocols.model import Binding, Collection, Tool


def tool(name: str, path: str, params: dict[str, Any] | None = None, *, method: str = "GET",
         where: dict[str, str] | None = None) -> Tool:
    params = params or {}
    where = where or {}
    bindings = {p: Binding(where.get(p, "path" if "{" + p + "}" in path else "query"), p) for p in params}
    required = [p for p in params if bindings[p].location == "path"]
    return Tool(name=name, collection="t", method=method, path=path, bindings=bindings,
                parameters={"type": "object", "properties": params, "required": required,
                            "additionalProperties": False})


# -- names --------------------------------------------------------------------------------------


def test_param_roles_read_entity_and_attribute_from_names_and_paths() -> None:
    movie = tool("get_movie", "/movie/{movie_id}", {"movie_id": {"type": "integer"}})
    role = param_role(movie, "movie_id")
    assert (role.entity, role.attribute, role.id_like, role.text) == ("movie", "id", True, False)
    album = tool("get_album", "/albums/{id}", {"id": {"type": "string"}})
    assert param_role(album, "id").entity == "album"
    camel = tool("get_artist", "/artist", {"artistId": {"type": "string"}})
    assert (param_role(camel, "artistId").entity, param_role(camel, "artistId").attribute) == ("artist", "id")
    search = tool("search", "/search", {"query": {"type": "string"}}, where={"query": "query"})
    assert param_role(search, "query").text and not param_role(search, "query").id_like
    season = tool("s", "/tv/{tv_id}/season/{season_number}", {"tv_id": {"type": "integer"},
                                                               "season_number": {"type": "integer"}})
    assert param_role(season, "season_number").id_like
    trend = tool("t", "/trending/{media_type}", {"media_type": {"type": "string", "enum": ["movie", "tv"]}})
    assert not param_role(trend, "media_type").id_like


def test_endpoint_nouns_and_singulars() -> None:
    assert singular("companies") == singular("company") == "company"
    assert singular("reviews") == "review" and singular("people") == "person" and singular("boxes") == "box"
    assert same_entity("company", "production_company") and not same_entity("movie", "person")
    reviews = endpoint_nouns(tool("r", "/movie/{movie_id}/reviews", {"movie_id": {"type": "integer"}}))
    assert (reviews.root, reviews.items) == ("movie", "review")
    assert endpoint_nouns(tool("p", "/search/person")).items == "person"
    assert endpoint_nouns(tool("searchItems", "/search")).items == "item"  # the name when the path says nothing
    assert endpoint_nouns(tool("find", "/pet/findByStatus")).items == "pet"  # "by status" qualifies, names nothing


# -- values ---------------------------------------------------------------------------------------


def test_schema_values_prefer_declared_values_and_respect_bounds() -> None:
    plain = param_role(tool("x", "/x", {"n": {}}), "n")
    assert [m.value for m in schema_values({"type": "string", "enum": ["b", "a"], "default": "a"}, plain)] == ["a", "b"]
    assert schema_values({"type": "integer", "minimum": 5, "maximum": 9}, plain)[0].value == 5
    assert schema_values({"type": "integer", "maximum": 0}, plain)[0].value == 0
    assert schema_values({"type": "string", "format": "date"}, plain)[0].value == "2024-01-15"
    assert schema_values({"const": 3}, plain)[0].score > 0.9
    ident = param_role(tool("g", "/things/{thing_id}", {"thing_id": {"type": "integer"}}), "thing_id")
    guess = schema_values({"type": "integer"}, ident)
    assert guess[0].score < 0.5  # a made-up id is only a last resort
    text = param_role(tool("s", "/s", {"q": {"type": "string"}}, where={"q": "query"}), "q")
    assert len(schema_values({"type": "string"}, text)) > 1


# -- harvest and planning -------------------------------------------------------------------------------


def obs(i: int, tool_name: str, args: dict[str, Any], data: Any, **kw: Any) -> Observation:
    return Observation(id=i, tool=tool_name, args=args, kind="ok", status=200, data=data, **kw)


def test_harvest_matches_ids_by_entity_and_exact_names() -> None:
    popular = tool("get_movie_popular", "/movie/popular")
    tv = tool("get_tv", "/tv/{tv_id}", {"tv_id": {"type": "integer"}})
    albums = tool("search_albums", "/search/albums")
    h = Harvest()
    h.add(obs(0, popular.name, {}, {"results": [{"id": 11, "title": "A"}, {"id": 12, "title": "B"}]}), popular)
    h.add(obs(1, tv.name, {"tv_id": 5}, {"id": 5, "networks": [{"id": 77, "name": "N"}],
                                         "seasons": [{"season_number": 2}]}), tv)
    h.add(obs(2, albums.name, {}, {"albums": {"items": [{"id": "alb9", "name": "X"}]}}), albums)

    def best(t: Tool, p: str) -> Any:
        return h.candidates(t, p, param_role(t, p))[0]

    movie = tool("get_movie", "/movie/{movie_id}", {"movie_id": {"type": "integer"}})
    assert best(movie, "movie_id").value == 11 and best(movie, "movie_id").source["field"] == "results[].id"
    network = tool("get_network", "/network/{network_id}", {"network_id": {"type": "integer"}})
    assert best(network, "network_id").value == 77
    album = tool("get_album", "/albums/{id}", {"id": {"type": "string"}})
    assert best(album, "id").value == "alb9"
    season = tool("s", "/tv/{tv_id}/season/{season_number}", {"tv_id": {"type": "integer"},
                                                               "season_number": {"type": "integer"}})
    assert best(season, "season_number").score == 0.95
    person = tool("get_person", "/person/{person_id}", {"person_id": {"type": "integer"}})
    assert h.candidates(person, "person_id", param_role(person, "person_id")) == []  # no person seen: no strong value
    assert h.candidates(person, "person_id", param_role(person, "person_id"), weak=True)  # but guesses exist


def test_planner_keeps_arguments_coherent() -> None:
    """A value found in a response goes with the arguments of the request that returned it."""
    season = tool("get_season", "/tv/{tv_id}/season/{season_number}", {"tv_id": {"type": "integer"},
                                                                        "season_number": {"type": "integer"}})
    episode = tool("get_episode", "/tv/{tv_id}/season/{season_number}/episode/{episode_number}",
                   {"tv_id": {"type": "integer"}, "season_number": {"type": "integer"},
                    "episode_number": {"type": "integer"}})
    popular = tool("get_tv_popular", "/tv/popular")
    h = Harvest()
    observations = [obs(0, popular.name, {}, {"results": [{"id": 1}, {"id": 2}]}),
                    obs(1, season.name, {"tv_id": 2, "season_number": 4},
                        {"id": 9, "episodes": [{"episode_number": 7, "season_number": 4}]})]
    h.add(observations[0], popular)
    h.add(observations[1], season)
    plans = Planner(h, observations).plans(episode, episode.required)
    assert plans[0].args == {"tv_id": 2, "season_number": 4, "episode_number": 7}
    assert plans[0].provenance["tv_id"] == {"kind": "inherit", "obs": 1, "arg": "tv_id"}
    tried = {json.dumps(plans[0].args, sort_keys=True, separators=(",", ":"))}
    again = Planner(h, observations).plans(episode, episode.required, tried=tried)
    assert all(p.args != plans[0].args for p in again)  # a tried plan is never proposed again


# -- documenting ---------------------------------------------------------------------------------------


def test_schema_merges_every_sample_and_counts_gaps() -> None:
    schema = merge_schema([{"a": 1, "items": []}, {"a": 2, "b": "x", "items": [{"id": 1}, {"id": 2, "tag": None}]}])
    assert schema is not None and "$schema" not in schema
    assert leaf_paths(schema) >= {"a", "b", "items[].id", "items[].tag"}
    assert gaps(merge_schema([{"items": [], "x": None, "o": {}}])) == 3
    assert gaps(schema) == 1  # "tag" was only ever null


def test_condense_keeps_shape_and_json() -> None:
    big = {"results": [{"t": "x" * 500, "n": i} for i in range(50)], "deep": {"a": {"b": {"c": {"d": {"e": 1}}}}}}
    small = condense_value(big)
    assert len(small["results"]) == 2 and len(small["results"][0]["t"]) == 80
    assert json.loads(json.dumps(small)) == small


def test_example_program_replays_the_chain(tmp_path: Path) -> None:
    observations = [
        obs(0, "list_shelves", {}, {"shelves": [{"shelf_id": "s1"}]}),
        obs(1, "list_items", {"shelf_id": "s1"}, {"items": [{"sku": "K"}]},
            provenance={"shelf_id": {"kind": "harvest", "obs": 0, "path": ["shelves", 0, "shelf_id"],
                                     "tool": "list_shelves", "field": "shelves[].shelf_id"}}),
        obs(2, "get_variant", {"shelf_id": "s1", "sku": "K", "n": 3}, {"name": "v"},
            provenance={"sku": {"kind": "harvest", "obs": 1, "path": ["items", 0, "sku"], "tool": "list_items",
                                "field": "items[].sku"},
                        "shelf_id": {"kind": "inherit", "obs": 1, "arg": "shelf_id"}, "n": {"kind": "enum"}}),
    ]
    program = example_program(observations[2], observations, ["list_shelves", "list_items", "get_variant"])
    assert program.splitlines() == [
        "shelves = list_shelves()",
        'items = list_items(shelf_id=shelves["shelves"][0]["shelf_id"])',
        'variant = get_variant(shelf_id=shelves["shelves"][0]["shelf_id"], sku=items["items"][0]["sku"], n=3)',
        'print(variant["name"])',
    ]
    deps, mapping = dependencies(observations[2], observations)
    assert deps == ["list_shelves", "list_items"]
    assert mapping["shelf_id"] == {"tool": "list_shelves", "field": "shelves[].shelf_id"}
    assert mapping["n"] == {"source": "enum"}


def test_the_richest_example_comes_first() -> None:
    empty = obs(0, "s", {"q": "a"}, {"hits": []})
    full = obs(1, "s", {"q": "b"}, {"hits": [{"id": 1, "name": "x"}]})
    assert [o.id for o in choose_examples([empty, full])] == [1]


def test_bodies_are_classified() -> None:
    assert classify_body({"a": 1}) == "ok" and classify_body([]) == "ok" and classify_body("plain text") == "ok"
    assert classify_body(None) == classify_body("") == "empty"
    assert classify_body('{"a": ') == classify_body("<!DOCTYPE html><p>") == "garbage"
    # Errors answered with status 200: only error-ish keys, and one of them says it failed.
    assert classify_body({"success": False, "error": {"message": "no"}}) == "refused"
    assert classify_body({"ok": False, "message": "quota"}) == "refused"
    assert classify_body({"status": "ok", "message": "hello"}) == "ok"
    assert classify_body({"error": None, "data": [1]}) == "ok"


# -- the cache ----------------------------------------------------------------------------------------


def test_cache_keys_names_not_secrets_and_honours_ttl_and_refresh(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    t = tool("get_x", "/x/{x_id}", {"x_id": {"type": "integer"}})
    monkeypatch.setenv("SOME_KEY", "very-secret-value")
    cache = ResponseCache(tmp_path, "coll", "http://h", credentials={"k": "env:SOME_KEY"})
    key = cache.key(t, {"x_id": 1}, "http://h")
    assert key != cache.key(t, {"x_id": 2}, "http://h") != cache.key(t, {"x_id": 1}, "http://other")
    moved = tool("get_x", "/y/{x_id}", {"x_id": {"type": "integer"}})
    assert cache.key(moved, {"x_id": 1}, "http://h") != key  # a changed operation misses its old entries
    cache.put(key, {"tool": "get_x", "args": {"x_id": 1}, "kind": "ok", "status": 200, "data": {"a": 1}})
    assert cache.get(key)["data"] == {"a": 1}
    files = list(cache.dir.iterdir())
    assert all("very-secret-value" not in f.read_text() for f in files)
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600 and stat.S_IMODE(cache.dir.stat().st_mode) == 0o700
    assert ResponseCache(tmp_path, "coll", "http://h", credentials={"k": "env:SOME_KEY"}, refresh=True).get(key) is None
    assert ResponseCache(tmp_path, "coll", "http://h", credentials={"k": "env:SOME_KEY"}, enabled=False).get(key) is None
    old = time.time() - 8 * 24 * 3600
    os.utime(files[0], (old, old))
    record = json.loads(files[0].read_text())
    record["at"] = old
    files[0].write_text(json.dumps(record))
    assert cache.get(key) is None  # older than the ttl
    assert cacheable("ok", 200) and cacheable("http", 404) and cacheable("empty", 204)
    assert not any([cacheable("http", 500), cacheable("http", 429), cacheable("http", 401), cacheable("timeout", None),
                    cacheable("garbage", 200), cacheable("network", None)])


# -- safety ----------------------------------------------------------------------------------------------


def test_only_reading_operations_are_safe() -> None:
    assert call_safety(tool("get_x", "/x")).safe
    assert call_safety(tool("head_x", "/x", method="HEAD")).safe
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        verdict = call_safety(tool("x", "/x", method=method))
        assert not verdict.safe and "--allow-unsafe" in verdict.reason
    assert not call_safety(tool("get_thing", "/things/{id}/delete", {"id": {}})).safe
    assert not call_safety(tool("cancel_order", "/orders/{id}", {"id": {}})).safe
    assert call_safety(tool("x", "/x", method="DELETE"), allow_unsafe=True).safe


def test_mcp_tools_are_safe_only_when_annotated_read_only() -> None:
    mcp_tool = Tool(name="lookup", collection="m", method="POST", path="/tools/call/lookup")
    mcp = Collection(name="m", tools=[mcp_tool], source_format="mcp")
    assert not call_safety(mcp_tool, mcp).safe
    mcp_tool.annotations = {"readOnlyHint": True}  # type: ignore[attr-defined]
    assert call_safety(mcp_tool, mcp).safe
    mcp_tool.annotations = {"readOnlyHint": True, "destructiveHint": True}  # type: ignore[attr-defined]
    assert not call_safety(mcp_tool, mcp).safe


# -- the report -------------------------------------------------------------------------------------------


def test_report_json_has_the_contract_fields_first() -> None:
    report = ProbeReport(tools=[ToolReport(name="a", status="documented", calls=2, response_schema={"type": "object"},
                                           examples=[{"args": {}}], depends_on=["b"]),
                                ToolReport(name="b", status="failed", reason="HTTP 500")], calls=3)
    doc = report.to_dict()
    assert list(doc)[:2] == ["tools", "calls"] and doc["calls"] == 3 and doc["ok"] is True
    assert list(doc["tools"][0])[:7] == ["name", "status", "calls", "response_schema", "examples", "depends_on",
                                         "reason"]
    assert doc["documented"] == 1 and doc["failed"] == 1 and doc["calls_per_documented_tool"] == 3.0
    assert not ProbeReport(tools=[]).ok


@pytest.mark.parametrize("bad", [{"per_tool": 0}, {"samples": 0}, {"rounds": 0}, {"max_calls": -1},
                                 {"request_timeout": 0}])
def test_settings_refuse_nonsense(bad: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        ProbeSettings(**bad)
    assert ProbeSettings().budget_for(10) == 50 and ProbeSettings(max_calls=7).budget_for(10) == 7


# -- any response -------------------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=40)


@settings(max_examples=150, deadline=None)
@given(_json)
def test_any_response_is_harvested_documented_and_condensed(data: Any) -> None:
    """Whatever an API answers, documenting it yields JSON and never raises."""
    source = tool("list_things", "/things")
    target = tool("get_thing", "/things/{thing_id}", {"thing_id": {"type": "string"}})
    h = Harvest()
    first = Observation(id=0, tool=source.name, args={}, kind=classify_body(data), status=200, data=data)
    h.add(first, source)
    plans = Planner(h, [first]).plans(target, target.required, weak=True)
    schema = merge_schema([data])
    json.dumps(schema)
    assert gaps(schema) >= 0 and isinstance(leaf_paths(schema), set)
    json.dumps(condense_value(data))
    for plan in plans:
        second = Observation(id=1, tool=target.name, args=plan.args, kind="ok", status=200, data=data,
                             provenance=plan.provenance)
        program = example_program(second, [first, second], [source.name, target.name])
        compile(program, "<example>", "exec")
