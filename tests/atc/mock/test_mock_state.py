"""The state properties of ``atc mock``, on every spec the mock is tested with.

Driven by the spec itself, not by hand-written paths: for every list operation whose items are
instances of an entity with a detail operation, the listed ids resolve on the detail operation with
the same names; every detail operation that documents a not-found answer refuses an id it never
handed out with it (one that documents none serves every well-formed id); every create (a POST to a collection) reads back on the created entity's detail
operation, under the parents it was created in; and two fresh servers given the same requests
answer byte for byte alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from atc import examples
from atc.mock import MockApp
from atc.mock.entities import GENERIC_CONTAINERS, singular
from atc.mock.gen import RequestContext
from atc.mock.responses import MockResponse, documents_not_found, error_status
from atc.mock.routes import Endpoint
from protocols import load_data, load_spec
from protocols.model import Collection
from tests.atc.mock.test_mock_conformance import repaired
from tests.atc.mock.test_mock_fidelity import SPEC as EDGE

NAMES = ("name", "title", "display_name", "label")


def _collections(bench_data: Path) -> Iterator[tuple[str, Collection]]:
    for rel in ("bookshop/openapi.json", "tasks/openapi.yaml", "transit/swagger.json"):
        yield rel.split("/")[0], load_spec(examples.path(rel))
    for name in ("tmdb", "spotify"):
        doc = repaired(json.loads((bench_data / "restbench" / "specs" / f"{name}_oas.json").read_text()))
        yield name, load_data(doc, source=name)
    yield "edge", load_data(EDGE, source="edge")


@pytest.fixture(scope="module")
def collections(bench_data: Path) -> dict[str, Collection]:
    return dict(_collections(bench_data))


class Driver:
    """Requests made from the spec: required query, header and body values generated from their
    schemas (valid by construction), path ids taken from what the server listed."""

    def __init__(self, collection: Collection) -> None:
        self.app = MockApp(collection, auth=False)
        self.log: list[tuple[str, str, bytes]] = []

    def call(self, ep: Endpoint, path_values: dict[str, Any], body: Any = None) -> MockResponse:
        tool = ep.tool
        path = tool.path
        query: dict[str, Any] = {}
        headers = {"content-type": "application/json"}
        for pname in tool.required:
            binding = tool.bindings[pname]
            if binding.location == "path":
                value = path_values[binding.name] if binding.name in path_values else \
                    self.value(tool.properties[pname], f"{tool.name}.{pname}")
                path = path.replace("{" + binding.name + "}", str(value))
            elif binding.location in ("query", "header"):
                value = self.value(tool.properties[pname], f"{tool.name}.{pname}")
                text = ",".join(map(str, value)) if isinstance(value, list) else \
                    json.dumps(value) if isinstance(value, bool) else str(value)
                if binding.location == "query":
                    query[binding.name] = text
                else:
                    headers[binding.name] = text
        target = path + ("?" + urlencode(query) if query else "")
        data = b"" if body is None else json.dumps(body).encode()
        self.log.append((tool.method, target, data))
        return self.app.handle(tool.method, target, headers, data)

    def value(self, schema: dict[str, Any], seed: str) -> Any:
        return self.app.faker.response(schema, RequestContext(tool="driver", root_key=seed))

    def body(self, ep: Endpoint) -> dict[str, Any] | None:
        props = {b.name: ep.tool.properties[p] for p, b in ep.tool.bindings.items() if b.location == "body" and b.name}
        if not props:
            return None
        needed = [ep.tool.bindings[p].name for p in ep.tool.required if ep.tool.bindings[p].location == "body"]
        schema = {"type": "object", "properties": props, "required": needed}
        value = self.value(schema, f"{ep.tool.name}.body")
        return {k: v for k, v in value.items() if not (isinstance(props.get(k), dict) and props[k].get("readOnly"))}


def _details(app: MockApp) -> dict[str, Endpoint]:
    """Entity -> its detail GET with a single path parameter."""
    out: dict[str, Endpoint] = {}
    for ep in app.endpoints:
        if ep.mode == "detail" and ep.tool.method == "GET" and len(ep.id_params) == 1 and ep.root_entity:
            out.setdefault(ep.root_entity, ep)
    return out


def _instances(body: Any, entity: str, depth: int = 0) -> list[dict[str, Any]]:
    """Objects with an ``id`` in the main list of a list answer: the answer itself, or a list
    under a generic name (``results``, ``items``...) or named after the entity (``books``)."""
    if depth > 3:
        return []
    if isinstance(body, list):
        return [b for b in body if isinstance(b, dict) and "id" in b]
    found: list[dict[str, Any]] = []
    if isinstance(body, dict):
        for key, value in body.items():
            if key in GENERIC_CONTAINERS or singular(key) == entity or isinstance(value, dict):
                found += _instances(value, entity, depth + 1)
    return found


@pytest.mark.parametrize("name", ["bookshop", "tasks", "transit", "tmdb", "spotify", "edge"])
def test_listed_ids_resolve_with_the_same_names(collections: dict[str, Collection], name: str) -> None:
    driver = Driver(collections[name])
    details = _details(driver.app)
    checked = 0
    for ep in driver.app.endpoints:
        if ep.tool.method != "GET" or ep.id_params or ep.item_entity not in details:
            continue
        listed = driver.call(ep, {})
        assert listed.status == 200, (ep.tool.name, listed.body)
        detail = details[ep.item_entity]  # type: ignore[index]
        for item in _instances(listed.body, ep.item_entity or "")[:3]:
            got = driver.call(detail, {next(iter(detail.id_params)): item["id"]})
            assert got.status == 200, (detail.tool.name, item["id"], got.body)
            for key in NAMES:
                if key in item and isinstance(got.body, dict) and key in got.body:
                    assert got.body[key] == item[key], (ep.tool.name, detail.tool.name, key)
                    checked += 1
    assert checked or name in ("transit", "spotify"), "no list of a detailed entity to check"


@pytest.mark.parametrize("name", ["bookshop", "tasks", "transit", "tmdb", "spotify", "edge"])
def test_ids_never_handed_out_are_not_found(collections: dict[str, Collection], name: str) -> None:
    driver = Driver(collections[name])
    for entity, ep in _details(driver.app).items():
        if not documents_not_found(ep.tool):
            continue  # the spec gives it no way to say so: every well-formed id is served
        wire = next(iter(ep.id_params))
        pname = next(p for p, b in ep.tool.bindings.items() if b.location == "path" and b.name == wire)
        profile = driver.app.spaces.profiles.get(entity)
        kind = "str" if ep.tool.properties[pname].get("type") == "string" else profile.kind if profile else "int"
        fresh = driver.app.spaces.mint(entity, kind, set())
        resp = driver.call(ep, {wire: fresh})
        status, _ = error_status(ep.tool, "not_found")
        assert resp.status == status and 400 <= status < 500, (ep.tool.name, fresh, resp.status, resp.body)


@pytest.mark.parametrize("name", ["bookshop", "tasks", "edge"])
def test_creates_read_back_under_their_parents(collections: dict[str, Collection], name: str) -> None:
    driver = Driver(collections[name])
    app = driver.app
    details = {ep.root_entity: ep for ep in app.endpoints if ep.mode == "detail" and ep.tool.method == "GET"}
    lists = {ep.item_entity: ep for ep in app.endpoints
             if ep.tool.method == "GET" and not ep.id_params and ep.item_entity}
    made = 0
    for ep in app.endpoints:
        if ep.mode != "create" or ep.root_entity not in details:
            continue
        parents: dict[str, Any] = {}
        for wire, entity in ep.id_params.items():
            listed = driver.call(lists[entity], {})
            parents[wire] = _instances(listed.body, entity)[0]["id"]
        created = driver.call(ep, parents, driver.body(ep))
        assert 200 <= created.status < 300 and isinstance(created.body, dict), (ep.tool.name, created.body)
        detail = details[ep.root_entity]
        values = dict(parents)
        values[detail.root_param or ""] = created.body.get("id")
        for wire in detail.id_params:
            values.setdefault(wire, created.body.get(wire))
        again = driver.call(detail, values)
        assert again.status == 200 and again.body == created.body, (ep.tool.name, again.body, created.body)
        made += 1
    assert made, "the spec has a create with a detail operation"


@pytest.mark.parametrize("name", ["bookshop", "tasks", "tmdb", "edge"])
def test_two_fresh_servers_answer_alike(collections: dict[str, Collection], name: str) -> None:
    first = Driver(collections[name])
    for ep in first.app.endpoints:
        if ep.tool.method == "GET" and not ep.id_params:
            first.call(ep, {})
        elif ep.mode == "create" and not ep.id_params:
            first.call(ep, {}, first.body(ep))
    one, two = MockApp(collections[name], auth=False), MockApp(collections[name], auth=False)
    for method, target, data in first.log:
        a = one.handle(method, target, {"content-type": "application/json"}, data)
        b = two.handle(method, target, {"content-type": "application/json"}, data)
        assert (a.status, a.content(), a.headers) == (b.status, b.content(), b.headers), target
    assert first.log
