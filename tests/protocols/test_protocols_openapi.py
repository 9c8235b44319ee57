"""OpenAPI 3.0/3.1 and Swagger 2.0 import: real benchmark specs, the library fixture, and edge cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from atc.errors import ProtocolError
from protocols import Binding, Collection, load_data, load_spec
from tests.support.apis.library import library_spec

CITIES = Path(__file__).resolve().parents[3] / "shared" / "checks" / "cities_openapi.json"


def _spec(paths: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "T", "version": "1"}, "paths": paths, **extra}


def _ok(schema: dict[str, Any]) -> dict[str, Any]:
    return {"200": {"description": "OK", "content": {"application/json": {"schema": schema}}}}


@pytest.fixture(scope="module")
def tmdb(bench_data: Path) -> Collection:
    return load_spec(bench_data / "restbench/specs/tmdb_oas.json", name="tmdb")


@pytest.fixture(scope="module")
def spotify(bench_data: Path) -> Collection:
    return load_spec(bench_data / "restbench/specs/spotify_oas.json", name="spotify")


def _by_route(c: Collection) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for t in c.tools:
        out.setdefault((t.method, t.path), []).append(t.name)
    return out


def test_restbench_counts(tmdb: Collection, spotify: Collection) -> None:
    assert len(tmdb.tools) == 54
    assert len(spotify.tools) == 40
    assert tmdb.source_format == "openapi-3.0" and spotify.source_format == "openapi-3.0"
    assert tmdb.servers == ["https://api.themoviedb.org/3"]
    for c in (tmdb, spotify):
        names = [t.name for t in c.tools]
        assert len(set(names)) == len(names)
        assert all(n.isidentifier() for n in names)


def test_tmdb_spot_checks(tmdb: Collection) -> None:
    person = tmdb.tool("get_search_person")
    assert person is not None and person.path == "/search/person" and person.method == "GET"
    assert "query" in person.required
    assert person.bindings["query"] == Binding("query", "query")
    assert person.properties["page"]["default"] == 1
    shape = person.response_schema
    assert shape is not None and shape["properties"]["results"]["type"] == "array"
    assert "name" in shape["properties"]["results"]["items"]["properties"]
    # $ref'd schemas are expanded: profile_path came from #/components/schemas/image-path
    assert "$ref" not in json.dumps(shape)
    credits = tmdb.tool("get_movie_movie_id_credits")
    assert credits is not None and credits.bindings["movie_id"] == Binding("path", "movie_id")
    assert credits.required == ["movie_id"]
    assert set(credits.response_schema["properties"]) >= {"id", "cast", "crew"}  # type: ignore[index]
    assert credits.security == [["api_key"]]
    assert tmdb.security_schemes["api_key"].location == "query"
    keywords = tmdb.tool("get_movie_movie_id_keywords")
    assert keywords is not None  # from operationId GET_movie-movie_id-keywords
    assert person.examples and person.examples[0]["status"] == 200


def test_spotify_spot_checks(spotify: Collection) -> None:
    by_route = _by_route(spotify)
    albums = spotify.tool(by_route[("GET", "/artists/{id}/albums")][0])
    assert albums is not None
    # "required": "false" (a string) in the spec must not make market required
    assert albums.required == ["id"]
    assert albums.bindings["market"] == Binding("query", "market")
    assert albums.properties["limit"]["default"] == 20  # written as the string "20" in the spec
    put = [spotify.tool(n) for (m, _), names in by_route.items() if m == "PUT" for n in names]
    assert any(t and any(b.location == "body" for b in t.bindings.values()) for t in put)
    assert spotify.security_schemes["oauth_2_0"].type == "oauth2"


@pytest.mark.parametrize("dataset,spec,known_bad", [
    ("tmdb", "tmdb_oas", {"GET /person/{movie_id}/movie_credits"}),
    ("spotify", "spotify_oas", {"GET /track/{id}"}),
])
def test_every_restbench_solution_step_maps_to_one_tool(bench_data: Path, dataset: str, spec: str,
                                                        known_bad: set[str]) -> None:
    c = load_spec(bench_data / f"restbench/specs/{spec}.json")
    routes = _by_route(c)
    queries = json.loads((bench_data / f"restbench/datasets/{dataset}.json").read_text())
    steps = {s.strip() for q in queries for s in q["solution"]}
    assert known_bad <= steps  # the documented typos are really there
    checked = 0
    for step in sorted(steps - known_bad):
        method, path = step.split(" ", 1)
        assert len(routes.get((method, path), [])) == 1, step
        checked += 1
    assert checked >= 40 if dataset == "tmdb" else checked >= 25


def test_library_fixture_spec() -> None:
    c = load_data(library_spec("http://127.0.0.1:9"), source="library")
    assert c.name == "library"
    assert [t.name for t in c.tools] == ["search_authors", "get_author", "list_author_books", "get_book",
                                         "list_book_reviews", "create_order", "get_stats"]
    order = c.tool("create_order")
    assert order is not None and order.method == "POST" and order.body_media_type == "application/json"
    assert order.bindings == {"book_id": Binding("body", "book_id"), "quantity": Binding("body", "quantity")}
    assert order.required == ["book_id"] and order.security == [["api_key"]]
    assert order.status_codes == {"201": "Created", "401": "Missing or wrong key"}
    assert order.response_schema == {"type": "object", "properties": {"order_id": {"type": "integer"},
                                                                      "total": {"type": "number"}}}
    assert c.security_schemes["api_key"].param == "X-API-Key"
    assert c.tool("get_stats").parameters["properties"] == {}  # type: ignore[union-attr]
    assert c.servers == ["http://127.0.0.1:9"]
    no_resp = load_data(library_spec("http://x", responses=False))
    assert all(t.response_schema is None for t in no_resp.tools if t.method == "GET")


def test_cities_spec() -> None:
    if not CITIES.exists():
        pytest.skip("shared checks not present")
    c = load_spec(CITIES)
    assert [t.name for t in c.tools] == ["search_cities", "get_weather"]
    w = c.tool("get_weather")
    assert w is not None and w.path == "/cities/{city_id}/weather" and w.bindings["city_id"].location == "path"
    moved = load_spec(CITIES, base_url="http://127.0.0.1:5555/")
    assert moved.servers == ["http://127.0.0.1:5555"] and moved.tools[0].servers == ["http://127.0.0.1:5555"]


def test_naming_without_operation_ids_and_duplicates() -> None:
    ok = _ok({"type": "object"})
    c = load_data(_spec({
        "/books/{book_id}/reviews": {"get": {"responses": ok}},
        "/a": {"get": {"operationId": "searchAuthors", "responses": ok},
               "post": {"operationId": "searchAuthors", "responses": ok}},
        "/b": {"get": {"operationId": "class", "responses": ok}},
        "/c": {"get": {"operationId": "print", "responses": ok}},
    }))
    assert [t.name for t in c.tools] == ["get_books_book_id_reviews", "search_authors", "search_authors_2",
                                         "class_", "print_"]


def test_parameters_path_level_override_and_python_names() -> None:
    c = load_data(_spec({"/items/{item-id}": {
        "parameters": [{"name": "item-id", "in": "path", "required": True, "schema": {"type": "string"}},
                       {"name": "limit", "in": "query", "schema": {"type": "integer"}, "description": "path level"}],
        "get": {"parameters": [
            {"name": "limit", "in": "query", "required": True, "schema": {"type": "integer", "maximum": 5}},
            {"name": "from", "in": "query", "schema": {"type": "string"}},
            {"name": "page[size]", "in": "query", "schema": {"type": "integer"}},
            {"name": "page_size", "in": "header", "schema": {"type": "integer"}},
            {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
            {"name": "sid", "in": "cookie", "schema": {"type": "string", "nullable": True}},
            {"name": "flag", "in": "query", "schema": {"type": "boolean", "default": "false"}}],
            "responses": _ok({"type": "array", "items": {"type": "string"}})}}}))
    t = c.tools[0]
    assert list(t.properties) == ["item_id", "limit", "from_", "page_size", "page_size_2", "x_trace", "sid", "flag"]
    assert t.properties["sid"] == {"type": ["string", "null"]}
    assert t.properties["flag"] == {"type": "boolean", "default": False}
    assert t.properties["limit"] == {"type": "integer", "maximum": 5}  # operation-level won
    assert t.required == ["item_id", "limit"]
    assert t.bindings["item_id"] == Binding("path", "item-id")
    assert t.bindings["from_"] == Binding("query", "from")
    assert t.bindings["page_size"] == Binding("query", "page[size]")
    assert t.bindings["page_size_2"] == Binding("header", "page_size")
    assert t.bindings["sid"] == Binding("cookie", "sid")


def test_request_bodies() -> None:
    ok = _ok({"type": "object"})
    c = load_data(_spec({
        "/json": {"post": {"requestBody": {"content": {"application/json": {"schema": {
            "allOf": [{"$ref": "#/components/schemas/Base"},
                      {"type": "object", "required": ["b"], "properties": {"b": {"type": "integer"}}}]}}}},
            "responses": ok}},
        "/list": {"post": {"requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "array", "items": {"type": "string"}}}}}, "responses": ok}},
        "/form": {"post": {"requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {
            "type": "object", "properties": {"user": {"type": "string"}}}}}}, "responses": ok}},
        "/text": {"put": {"requestBody": {"content": {"text/plain": {"schema": {"type": "string"}}}},
                          "responses": ok}},
    }, components={"schemas": {"Base": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}}}))
    j, lst, form, text = c.tools
    assert j.bindings == {"a": Binding("body", "a"), "b": Binding("body", "b")}
    assert j.required == ["a", "b"]
    assert lst.bindings == {"body": Binding("body", "")} and lst.required == ["body"]
    assert lst.properties["body"]["type"] == "array"
    assert form.body_media_type == "application/x-www-form-urlencoded" and form.bindings["user"].location == "body"
    assert text.bindings == {"body": Binding("body", "")} and text.body_media_type == "text/plain"


def test_recursive_schema_is_cut_not_an_error() -> None:
    node = {"type": "object", "properties": {"name": {"type": "string"},
                                             "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}
    c = load_data(_spec({"/tree": {"get": {"responses": _ok({"$ref": "#/components/schemas/Node"})}}},
                        components={"schemas": {"Node": node}}))
    schema = c.tools[0].response_schema
    assert schema is not None
    child = schema["properties"]["children"]["items"]
    assert child == {"type": "object", "description": "(recursive: Node)"}


def test_mutually_recursive_schemas() -> None:
    schemas = {"A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
               "B": {"type": "object", "properties": {"a": {"$ref": "#/components/schemas/A"}}}}
    c = load_data(_spec({"/x": {"get": {"responses": _ok({"$ref": "#/components/schemas/A"})}}},
                        components={"schemas": schemas}))
    assert c.tools[0].response_schema["properties"]["b"]["properties"]["a"]["description"] == "(recursive: A)"  # type: ignore[index]


@pytest.mark.parametrize("doc,pointer,words", [
    (_spec({"/x": {"get": {"responses": _ok({"$ref": "#/components/schemas/Missing"})}}}),
     "/paths/~1x/get/responses/200/content/application~1json/schema", "points to nothing"),
    (_spec({"/x": {"get": {"responses": _ok({"$ref": "other.json#/Thing"})}}}),
     "/paths/~1x/get/responses/200/content/application~1json/schema", "external $ref"),
    (_spec({"/x": {"get": {"responses": _ok({"$ref": "https://example.com/s.json"})}}}),
     "/paths/~1x/get/responses/200/content/application~1json/schema", "external $ref"),
    (_spec({"/x": {"get": {"responses": _ok({"$ref": "#/components/schemas/A"})}}},
           components={"schemas": {"A": {"$ref": "#/components/schemas/B"}, "B": {"$ref": "#/components/schemas/A"}}}),
     "/paths/~1x/get/responses/200/content/application~1json/schema", "cyclic $ref"),
    (_spec({"/x": {"$ref": "#/paths/~1x"}}), "/paths/~1x", "cyclic $ref"),
    ({"openapi": "4.0", "paths": {}}, "/openapi", "unsupported OpenAPI version"),
    ({"swagger": "1.2", "paths": {}}, "/swagger", "unsupported Swagger version"),
    (_spec([]), "/paths", "'paths' must be an object"),  # type: ignore[arg-type]
    (_spec({}), "/paths", "no operations"),
    (_spec({"/x": {"get": {"responses": []}}}), "/paths/~1x/get/responses", "must be an object"),
    (_spec({"/x": {"get": {"requestBody": {"$ref": "#/components/requestBodies/Nope"}}}}),
     "/paths/~1x/get/requestBody", "points to nothing"),
    (_spec({"/x": {"get": {"parameters": {"a": 1}}}}), "/paths/~1x/get/parameters", "must be a list"),
    (_spec({"/x": {"get": {"parameters": [{"name": "a", "in": "body"}]}}}), "/paths/~1x/get/parameters/0/in",
     "unknown location"),
    (_spec({"/x": {"get": "nope"}}), "/paths/~1x/get", "must be an object"),
])
def test_errors_name_source_and_pointer(doc: Any, pointer: str, words: str) -> None:
    with pytest.raises(ProtocolError) as info:
        load_data(doc, source="spec.json")
    assert info.value.source == "spec.json"
    assert info.value.pointer == pointer
    assert words in info.value.reason


def test_openapi_31_and_server_variables() -> None:
    doc = {"openapi": "3.1.0", "info": {"title": "Pet Store 3.1", "version": "2"},
           "servers": [{"url": "https://{region}.example.com/{base}",
                        "variables": {"region": {"default": "eu"}, "base": {"default": "v2"}}}],
           "paths": {"/pets/{petId}": {"get": {"operationId": "getPet", "tags": ["pets"], "parameters": [
               {"name": "petId", "in": "path", "required": True, "schema": {"type": ["integer", "null"]}}],
               "responses": {"default": {"description": "d", "content": {"application/json": {
                   "schema": {"$ref": "#/components/schemas/Pet", "description": "a pet"},
                   "examples": {"one": {"value": {"id": 1}}}}}}}}}},
           "components": {"schemas": {"Pet": {"type": "object", "properties": {"id": {"type": "integer"}}}}}}
    c = load_data(doc)
    assert c.source_format == "openapi-3.1" and c.name == "pet_store_3_1"
    assert c.servers == ["https://eu.example.com/v2"]
    t = c.tools[0]
    assert t.name == "get_pet" and t.category == "pets" and t.bindings["pet_id"] == Binding("path", "petId")
    assert t.response_schema == {"type": "object", "properties": {"id": {"type": "integer"}}, "description": "a pet",
                                 "x-atc-ref": "Pet"}  # the component's name is kept
    assert t.examples == [{"args": {}, "response": {"id": 1}, "status": None}]


def test_swagger_20() -> None:
    doc = {"swagger": "2.0", "info": {"title": "Old", "version": "1"}, "host": "api.example.com",
           "basePath": "/v1", "schemes": ["http", "https"],
           "securityDefinitions": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"},
                                   "basic": {"type": "basic"}},
           "security": [{"key": []}],
           "definitions": {"User": {"type": "object", "properties": {"name": {"type": "string"}}}},
           "paths": {"/users": {"post": {"operationId": "createUser", "parameters": [
               {"name": "user", "in": "body", "required": True, "schema": {"$ref": "#/definitions/User"}}],
               "responses": {"200": {"description": "ok", "schema": {"$ref": "#/definitions/User"}}}},
               "get": {"parameters": [{"name": "q", "in": "query", "type": "string", "enum": ["a", "b"]}],
                       "security": [], "responses": {"200": {"description": "ok", "schema": {
                           "type": "array", "items": {"$ref": "#/definitions/User"}}}}}},
               "/upload": {"post": {"consumes": ["multipart/form-data"], "parameters": [
                   {"name": "file", "in": "formData", "type": "file", "required": True}],
                   "responses": {"204": {"description": "done"}}}}}}
    c = load_data(doc)
    assert c.source_format == "swagger-2.0" and c.servers == ["https://api.example.com/v1"]
    create, listing, upload = c.tools
    assert create.name == "create_user" and create.bindings == {"name": Binding("body", "name")}
    assert create.response_schema == {"type": "object", "properties": {"name": {"type": "string"}}, "x-atc-ref": "User"}
    assert create.security == [["key"]] and listing.security == []
    assert listing.name == "get_users" and listing.properties["q"]["enum"] == ["a", "b"]
    assert upload.body_media_type == "multipart/form-data" and upload.required == ["file"]
    assert upload.response_schema is None and upload.status_codes == {"204": "done"}
    assert c.security_schemes["basic"].type == "http" and c.security_schemes["basic"].scheme == "basic"


def test_yaml_and_default_names(tmp_path: Path) -> None:
    y = tmp_path / "my-api.yaml"
    y.write_text("openapi: 3.0.0\ninfo: {title: API, version: 1}\npaths:\n  /ping:\n    get:\n"
                 "      responses:\n        '200': {description: pong}\n")
    c = load_spec(y)
    assert c.name == "my_api"  # the title "API" says nothing: the file stem names it
    assert [t.name for t in c.tools] == ["get_ping"]
    assert load_spec(y, name="pinger").tools[0].collection == "pinger"


def test_file_errors(tmp_path: Path) -> None:
    cases = {"empty.json": "", "trunc.json": json.dumps(library_spec("http://x"))[:300],
             "text.json": "this is : not : a spec\n- at all", "scalar.yaml": "42\n"}
    for fname, text in cases.items():
        p = tmp_path / fname
        p.write_text(text)
        with pytest.raises(ProtocolError) as info:
            load_spec(p)
        assert info.value.source == str(p), fname
    with pytest.raises(ProtocolError, match="no such file"):
        load_spec(tmp_path / "missing.json")


def test_toolalpaca_documentation_specs(bench_data: Path) -> None:
    total = 0
    apis = 0
    for name in ("eval_real.json", "eval_simulated.json"):
        for entry in json.loads((bench_data / "toolalpaca/data" / name).read_text()):
            c = load_data(json.loads(entry["Documentation"]), source=f"{name}:{entry['Name']}")
            routes = {(t.path, t.method.lower()) for t in c.tools}
            for path, method in entry["Function_Projection"].values():
                # some of these specs forget the leading "/" of a path; the loader adds it
                assert ("/" + path.lstrip("/"), method.lower()) in routes, (entry["Name"], path)
            total += len(c.tools)
            apis += 1
    assert apis == 21
    assert total == 94  # 40 real + 54 simulated functions, as the README counts


def test_tools_do_not_share_schema_objects() -> None:
    ref = {"$ref": "#/components/schemas/Item"}
    c = load_data(_spec({"/a": {"get": {"responses": _ok(ref)}}, "/b": {"get": {"responses": _ok(ref)}}},
                        components={"schemas": {"Item": {"type": "object", "properties": {"id": {"type": "integer"}}}}}))
    a, b = c.tools
    assert a.response_schema == b.response_schema
    a.response_schema["properties"]["id"]["type"] = "string"  # type: ignore[index]
    assert b.response_schema["properties"]["id"]["type"] == "integer"  # type: ignore[index]


def test_undeclared_path_placeholders_become_parameters() -> None:
    c = load_data(_spec({"/users/{userId}/posts/{post_id}": {"get": {
        "parameters": [{"name": "post_id", "in": "path", "required": True, "schema": {"type": "integer"},
                        "examples": {"one": {"value": 7}}}],
        "responses": _ok({"type": "object"})}}}))
    t = c.tools[0]
    assert t.bindings == {"post_id": Binding("path", "post_id"), "user_id": Binding("path", "userId")}
    assert t.required == ["post_id", "user_id"]
    assert t.properties["post_id"]["example"] == 7


def test_percent_encoded_and_escaped_ref_pointers() -> None:
    doc = _spec({"/users/{id}": {"get": {"responses": _ok({"type": "object", "properties": {"n": {"type": "integer"}}})}},
                 "/copy": {"get": {"responses": {"200": {
                     "$ref": "#/paths/~1users~1%7Bid%7D/get/responses/200"}}}}})
    c = load_data(doc)
    assert c.tools[1].response_schema == c.tools[0].response_schema
