"""``atc mock`` against an edge-case spec: one test per way a mock can be unfaithful (issue #24).

Real HTTP to a live ``MockServer`` on 127.0.0.1. Every answer is also checked against the spec's
own, unresolved schemas (a validator over the raw document, so recursion and ``$ref`` are judged
as the spec wrote them, not as atc imported them).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest

from atc.mock import MockApp, MockServer
from protocols import load_data

SNOWFLAKE = r"^(0|[1-9][0-9]*)$"

SPEC: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Edge", "version": "1"},
    "servers": [{"url": "https://edge.example.com/api"}],
    "components": {
        "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"}},
        "schemas": {
            "Problem": {"type": "object", "required": ["code", "detail"],
                        "properties": {"code": {"type": "integer"}, "detail": {"type": "string", "maxLength": 300},
                                       "title": {"type": "string", "enum": ["Bad", "Missing"]}}},
            "User": {"type": "object", "required": ["id", "name", "email"], "properties": {
                "id": {"type": "string", "pattern": SNOWFLAKE, "readOnly": True},
                "name": {"type": "string", "minLength": 2},
                "email": {"type": "string", "format": "email"},
                "password": {"type": "string", "writeOnly": True, "minLength": 8},
                "tags": {"type": "object", "minProperties": 2, "additionalProperties": {"type": "string"}},
                "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string", "format": "time"}],
                         "items": False},
                "handle": {"type": "string", "pattern": r"^(?=.*\d)[a-z\d]{6,10}$"},
                "display": {"type": "string", "pattern": r"^\p{Lu}\p{L}+$", "minLength": 5}}},
            "Node": {"type": "object", "required": ["label"], "properties": {
                "label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
                "parent": {"$ref": "#/components/schemas/Node"}}},
            "Stop": {"type": "object", "required": ["stop_id", "name"], "properties": {
                "stop_id": {"type": "integer", "minimum": 1, "maximum": 40}, "name": {"type": "string"}}},
            "Task": {"type": "object", "required": ["id", "project_id", "title"], "properties": {
                "id": {"type": "string", "format": "uuid", "readOnly": True},
                "project_id": {"type": "string", "format": "uuid"},
                "title": {"type": "string"}}},
        },
    },
    "paths": {
        "/users": {
            "get": {"operationId": "listUsers", "responses": {"200": {"description": "ok", "content": {
                "application/json": {"schema": {"type": "object", "required": ["results"], "properties": {
                    "results": {"type": "array", "items": {"$ref": "#/components/schemas/User"}}}}}}}}},
            "post": {"operationId": "createUser", "security": [{"key": []}],
                     "requestBody": {"required": True, "content": {"application/json": {"schema": {
                         "$ref": "#/components/schemas/User"}}}},
                     "responses": {"201": {"description": "made", "headers": {
                         "X-Request-Id": {"required": True, "schema": {"type": "string", "format": "uuid"}}},
                         "content": {"application/json": {"schema": {"$ref": "#/components/schemas/User"}}}},
                         "422": {"description": "bad", "content": {"application/problem+json": {
                             "schema": {"$ref": "#/components/schemas/Problem"}}}},
                         "401": {"description": "no key", "content": {"application/problem+json": {
                             "schema": {"$ref": "#/components/schemas/Problem"}}}}}}},
        "/users/{user_id}": {"get": {"operationId": "getUser", "parameters": [
            {"name": "user_id", "in": "path", "required": True, "example": "4242",
             "schema": {"type": "string", "pattern": SNOWFLAKE}}],
            "responses": {"200": {"description": "ok", "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/User"},
                "example": {"id": "4242", "name": "Ada Example", "email": "ada@example.com"}}}},
                "404": {"description": "none", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Problem"}}}}}}},
        "/stops": {"get": {"operationId": "listStops", "parameters": [
            {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}},
            {"name": "email", "in": "query", "schema": {"type": "string", "format": "email"}},
            {"name": "code", "in": "query", "schema": {"type": "string", "pattern": "^[A-Z]{3}$"}},
            {"name": "X-Trace", "in": "header", "schema": {"type": "string", "format": "uuid"}}],
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "type": "array", "items": {"$ref": "#/components/schemas/Stop"}}}}},
                "default": {"description": "error", "content": {"application/json": {"schema": {
                    "$ref": "#/components/schemas/Problem"}}}}}}},
        "/stops/{stop_id}": {"get": {"operationId": "getStop", "parameters": [
            {"name": "stop_id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1,
                                                                            "maximum": 40}}],
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "$ref": "#/components/schemas/Stop"}}}}, "404": {"description": "none"}}}},
        "/tree": {"get": {"operationId": "getTree", "responses": {"200": {"description": "ok", "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}}}}},
        "/report": {"get": {"operationId": "getReport", "responses": {"200": {"description": "ok", "content": {
            "application/json": {"schema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
            "application/xml": {"schema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
            "text/csv": {"schema": {"type": "string"}}}}}}},
        "/motd": {"get": {"operationId": "getMotd", "responses": {"200": {"description": "ok", "content": {
            "text/plain": {"schema": {"type": "string", "maxLength": 80}}}}}}},
        "/logo": {"get": {"operationId": "getLogo", "responses": {"200": {"description": "ok", "content": {
            "image/png": {"schema": {"type": "string", "format": "binary"}}}}}}},
        "/ping": {"post": {"operationId": "ping", "responses": {"204": {"description": "done"}}},
                  "get": {"operationId": "getPing", "responses": {"200": {"description": "alive, no content"}}}},
        "/files": {"post": {"operationId": "upload", "requestBody": {"required": True, "content": {
            "multipart/form-data": {"schema": {"type": "object", "required": ["file", "label"], "properties": {
                "file": {"type": "string", "format": "binary"}, "label": {"type": "string", "maxLength": 20},
                "copies": {"type": "integer", "minimum": 1}}}}}},
            "responses": {"201": {"description": "stored", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"label": {"type": "string"}, "copies": {"type": "integer"}}}}}},
                "400": {"description": "bad"}}}},
        "/forms": {"post": {"operationId": "submitForm", "requestBody": {"content": {
            "application/x-www-form-urlencoded": {"schema": {"type": "object", "required": ["name"],
                                                             "additionalProperties": False,
                                                             "properties": {"name": {"type": "string"}}}}}},
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"name": {"type": "string"}}}}}}, "400": {"description": "bad"}}}},
        "/projects/{project_id}/tasks": {
            "parameters": [{"name": "project_id", "in": "path", "required": True,
                            "schema": {"type": "string", "format": "uuid"}}],
            "get": {"operationId": "listTasks", "responses": {"200": {"description": "ok", "content": {
                "application/json": {"schema": {"type": "object", "properties": {"tasks": {
                    "type": "array", "items": {"$ref": "#/components/schemas/Task"}}}}}}}}},
            "post": {"operationId": "createTask", "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"type": "object", "required": ["title"], "properties": {"title": {"type": "string"}}}}}},
                "responses": {"201": {"description": "made", "content": {"application/json": {"schema": {
                    "$ref": "#/components/schemas/Task"}}}}, "404": {"description": "no project"}}}},
        "/projects/{project_id}/tasks/{task_id}": {"get": {"operationId": "getTask", "parameters": [
            {"name": "project_id", "in": "path", "required": True, "schema": {"type": "string", "format": "uuid"}},
            {"name": "task_id", "in": "path", "required": True, "schema": {"type": "string", "format": "uuid"}}],
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "$ref": "#/components/schemas/Task"}}}}, "404": {"description": "none"}}}},
        "/projects/{project_id}": {"get": {"operationId": "getProject", "parameters": [
            {"name": "project_id", "in": "path", "required": True, "schema": {"type": "string", "format": "uuid"}}],
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
                                                 "name": {"type": "string"}}}}}}, "404": {"description": "none"}}}},
        "/projects": {"get": {"operationId": "listProjects", "responses": {"200": {"description": "ok", "content": {
            "application/json": {"schema": {"type": "array", "items": {"type": "object", "properties": {
                "id": {"type": "string", "format": "uuid"}, "name": {"type": "string"}}}}}}}}}},
        "/pages/{slug}": {
            "parameters": [{"name": "slug", "in": "path", "required": True,
                            "schema": {"type": "string", "pattern": "^[a-z0-9-]{3,40}$"}}],
            "get": {"operationId": "getPage", "responses": {"200": {"description": "ok", "content": {
                "application/json": {"schema": {"type": "object", "properties": {
                    "slug": {"type": "string"}, "body": {"type": "string"}}}}}}, "404": {"description": "none"}}},
            "put": {"operationId": "putPage", "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"type": "object", "required": ["body"], "properties": {"body": {"type": "string"}}}}}},
                "responses": {"200": {"description": "saved", "content": {"application/json": {"schema": {
                    "type": "object", "properties": {"slug": {"type": "string"}, "body": {"type": "string"}}}}}}}},
            "delete": {"operationId": "deletePage", "responses": {"204": {"description": "gone"},
                                                                  "404": {"description": "none"}}}},
        "/search": {"get": {"operationId": "search", "parameters": [
            {"name": "q", "in": "query", "required": True, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"artists": {"type": "object", "properties": {
                    "items": {"type": "array", "items": {"$ref": "#/components/schemas/Artist"}},
                    "total": {"type": "integer"}}}}}}}}}}},
        "/artists/{id}": {"get": {"operationId": "getArtist", "parameters": [
            {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "$ref": "#/components/schemas/Artist"}}}}, "404": {"description": "none"}}}},
    },
}
SPEC["components"]["schemas"]["Artist"] = {"type": "object", "properties": {
    "id": {"type": "string"}, "name": {"type": "string"}, "genres": {"type": "array", "items": {"type": "string"}}}}
KEY = {"X-Key": "anything"}


def raw_validator(schema: dict[str, Any]) -> Any:
    """A validator of the spec's own (unresolved) schema: its ``$ref`` resolve inside a root that
    carries the spec's ``components`` (an unknown keyword to JSON Schema, a place to point into)."""
    root = {**schema, "components": SPEC["components"]}
    # Python's re has no Unicode property classes: judge them by an ASCII reading of their own.
    text = json.dumps(root).replace("\\\\p{Lu}", "[A-Z]").replace("\\\\p{L}", "[A-Za-z]")
    return jsonschema.Draft202012Validator(json.loads(text),
                                           format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def conforms(schema_ref: str, value: Any) -> list[str]:
    return [e.message for e in raw_validator({"$ref": schema_ref}).iter_errors(value)]


@pytest.fixture(scope="module")
def server() -> Iterator[MockServer]:
    with MockServer(load_data(SPEC, source="edge")) as mock:
        yield mock


@pytest.fixture()
def http(server: MockServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as c:
        yield c


# -- 1. ids meet the id schema ---------------------------------------------------------------


def test_ids_meet_their_schema_and_resolve(http: httpx.Client) -> None:
    users = http.get("/users").json()["results"]
    assert users and all(re.fullmatch(SNOWFLAKE, u["id"]) for u in users), users
    for u in users:
        detail = http.get(f"/users/{u['id']}")
        assert detail.status_code == 200 and detail.json()["name"] == u["name"]
    stops = http.get("/stops").json()
    assert stops and all(1 <= s["stop_id"] <= 40 for s in stops), stops
    assert all(http.get(f"/stops/{s['stop_id']}").json()["name"] == s["name"] for s in stops)
    projects = http.get("/projects").json()
    assert all(uuid.UUID(p["id"]) for p in projects)
    # A well-formed id the API never handed out is not found, in the documented shape.
    missing = http.get("/users/98765432109876")
    assert missing.status_code == 404 and not conforms("#/components/schemas/Problem", missing.json())


# -- 2. invalid requests are refused ---------------------------------------------------------


@pytest.mark.parametrize("params, headers, bad", [
    ({"offset": "-1"}, {}, "offset"),
    ({"email": "not-an-email"}, {}, "email"),
    ({"code": "abcd"}, {}, "code"),
    ({"offset": "x"}, {}, "offset"),
    ({}, {"X-Trace": "not-a-uuid"}, "X-Trace"),
])
def test_every_constraint_of_a_parameter_is_checked(http: httpx.Client, params: dict[str, str],
                                                    headers: dict[str, str], bad: str) -> None:
    resp = http.get("/stops", params=params, headers=headers)
    # /stops documents no 4xx, only "default": the natural 400 with the default's schema.
    assert resp.status_code == 400, resp.text
    body = resp.json()
    assert not conforms("#/components/schemas/Problem", body)
    assert bad in body["detail"] and body["code"] == 400
    assert http.get("/stops", params={"offset": "0", "email": "a@b.co", "code": "ABC"},
                    headers={"X-Trace": str(uuid.uuid4())}).status_code == 200


@pytest.mark.parametrize("body, why", [
    ({"name": "Al", "email": "x@y.z"}, None),
    ({"email": "x@y.z"}, "name"),
    ({"name": "A", "email": "x@y.z"}, "name"),
    ({"name": "Al", "email": "nope"}, "email"),
    ({"name": "Al", "email": "x@y.z", "password": "short"}, "password"),
])
def test_a_body_is_checked_against_its_schema(http: httpx.Client, body: dict[str, Any], why: str | None) -> None:
    resp = http.post("/users", json=body, headers=KEY)
    if why is None:
        assert resp.status_code == 201, resp.text
        return
    assert resp.status_code == 422 and resp.headers["content-type"] == "application/problem+json"
    problem = resp.json()
    assert not conforms("#/components/schemas/Problem", problem) and why in problem["detail"]


def test_declared_credentials_are_required_unless_turned_off(server: MockServer) -> None:
    user = {"name": "Al", "email": "x@y.z"}
    missing = httpx.post(server.url + "/users", json=user)
    assert missing.status_code == 401 and "X-Key" in missing.json()["detail"]
    assert httpx.post(server.url + "/users", json=user, headers=KEY).status_code == 201
    strict = MockServer(load_data(SPEC, source="edge"), credentials={"key": {"right"}})
    with strict:
        assert httpx.post(strict.url + "/users", json=user, headers={"X-Key": "wrong"}).status_code == 401
        assert httpx.post(strict.url + "/users", json=user, headers={"X-Key": "right"}).status_code == 201
    with MockServer(load_data(SPEC, source="edge"), auth=False) as loose:
        assert httpx.post(loose.url + "/users", json=user).status_code == 201


# -- 3. errors in the spec's shape and a documented status ------------------------------------


def test_errors_use_a_documented_status_and_schema(http: httpx.Client) -> None:
    # /stops/{stop_id} documents 404 without content: refused with 404 and no body.
    resp = http.get("/stops/abc")
    assert resp.status_code == 404 and resp.content == b"" and "integer" in resp.headers["x-atc-mock-error"]
    # /files documents 400 without content.
    resp = http.post("/files", files={"label": (None, "x")})
    assert resp.status_code == 400 and resp.content == b""


# -- 4. media types ----------------------------------------------------------------------------


def test_declared_media_types_are_served(http: httpx.Client) -> None:
    motd = http.get("/motd")
    assert motd.headers["content-type"] == "text/plain" and 0 < len(motd.text) <= 80
    logo = http.get("/logo")
    assert logo.headers["content-type"] == "image/png" and logo.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert http.post("/ping").status_code == 204 and http.post("/ping").content == b""
    alive = http.get("/ping")
    assert alive.status_code == 200 and alive.content == b"" and "content-type" not in alive.headers
    assert http.get("/report").headers["content-type"] == "application/json"
    xml = http.get("/report", headers={"Accept": "application/xml"})
    assert xml.headers["content-type"] == "application/xml" and xml.text.startswith("<?xml")
    csv = http.get("/report", headers={"Accept": "text/csv;q=0.9, application/json;q=0.1"})
    assert csv.headers["content-type"] == "text/csv"
    assert http.get("/report", headers={"Accept": "image/gif"}).status_code == 406


# -- 5. multipart and form bodies ------------------------------------------------------------


def test_multipart_uploads_and_forms_are_parsed(http: httpx.Client) -> None:
    made = http.post("/files", files={"file": ("a.bin", b"\x00\x01binary"), "label": (None, "scan"),
                                      "copies": (None, "2")})
    assert made.status_code == 201 and made.json()["label"] == "scan" and made.json()["copies"] == 2
    assert http.post("/files", files={"file": ("a.bin", b"x"), "label": (None, "y" * 30)}).status_code == 400
    assert http.post("/files", files={"label": (None, "no file")}).status_code == 400
    assert http.post("/forms", data={"name": "Ada"}).json() == {"name": "Ada"}
    assert http.post("/forms", data={"name": "Ada", "extra": "1"}).status_code == 400
    assert http.post("/forms", content=b"{}", headers={"content-type": "text/csv"}).status_code == 400


# -- 6. creates in sub-collections ---------------------------------------------------------------


def test_a_create_in_a_sub_collection_is_a_new_child_that_reads_back(http: httpx.Client) -> None:
    project = http.get("/projects").json()[0]["id"]
    made = http.post(f"/projects/{project}/tasks", json={"title": "Write the docs"})
    assert made.status_code == 201
    task = made.json()
    assert task["id"] != project and task["project_id"] == project and task["title"] == "Write the docs"
    assert not conforms("#/components/schemas/Task", task)
    assert http.get(f"/projects/{project}/tasks/{task['id']}").json() == task
    assert task in http.get(f"/projects/{project}/tasks").json()["tasks"]
    other = http.get("/projects").json()[1]["id"]
    assert task["id"] not in [t["id"] for t in http.get(f"/projects/{other}/tasks").json()["tasks"]]


# -- 7. readOnly and writeOnly ---------------------------------------------------------------


def test_read_only_is_the_servers_and_write_only_never_comes_back(http: httpx.Client) -> None:
    made = http.post("/users", json={"id": "1", "name": "Grace", "email": "g@example.com", "password": "s3cret-pass"},
                     headers=KEY)
    assert made.status_code == 201
    user = made.json()
    assert user["id"] != "1" and re.fullmatch(SNOWFLAKE, user["id"]) and "password" not in user
    uuid.UUID(made.headers["x-request-id"])  # a required response header, in its format
    again = http.get(f"/users/{user['id']}").json()
    assert again["name"] == "Grace" and "password" not in again


# -- 8. nested search results are the same objects ---------------------------------------------


def test_nested_search_results_match_their_details(http: httpx.Client) -> None:
    hits = http.get("/search", params={"q": "x"}).json()["artists"]["items"]
    assert hits
    for hit in hits:
        assert http.get(f"/artists/{hit['id']}").json() == hit


# -- 9. client-chosen keys and the spec's examples ---------------------------------------------


def test_client_keys_and_spec_examples_exist(http: httpx.Client) -> None:
    assert http.get("/pages/my-notes").status_code == 404
    saved = http.put("/pages/my-notes", json={"body": "hello"})
    assert saved.status_code == 200 and saved.json()["body"] == "hello"
    assert http.get("/pages/my-notes").json()["body"] == "hello"
    assert http.delete("/pages/my-notes").status_code == 204
    assert http.get("/pages/my-notes").status_code == 404
    example = http.get("/users/4242")
    assert example.status_code == 200 and example.json()["name"] == "Ada Example"


# -- 10. generator gaps ----------------------------------------------------------------------


def test_generated_values_meet_every_keyword(http: httpx.Client) -> None:
    tree = http.get("/tree").json()
    assert not conforms("#/components/schemas/Node", tree)
    for user in http.get("/users").json()["results"]:
        assert not conforms("#/components/schemas/User", user), user
        assert len(user["tags"]) >= 2
        assert re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d:[0-5]\d(Z|[+-]\d\d:\d\d)", user["pair"][1])
        assert re.fullmatch(r"(?=.*\d)[a-z\d]{6,10}", user["handle"])
        assert len(user["display"]) >= 5 and user["display"][0].isupper() and "x" * 3 not in user["display"]


# -- 11. small things ------------------------------------------------------------------------


def test_methods_head_trace_and_allow(http: httpx.Client) -> None:
    get = http.get("/users")
    head = http.head("/users")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == get.headers["content-length"]
    trace = http.request("TRACE", "/users")
    assert trace.status_code == 405 and set(trace.headers["allow"].split(", ")) == {"GET", "HEAD", "POST"}
    assert trace.headers["content-type"] == "application/json"
    put = http.put("/users", json={})
    assert put.status_code == 405 and "POST" in put.headers["allow"]
    options = http.options("/users")
    assert options.status_code == 204 and "OPTIONS" in options.headers["allow"]
    assert http.request("PROPFIND", "/nowhere").status_code == 404


def test_an_empty_required_array_is_present() -> None:
    spec = {"openapi": "3.0.3", "info": {"title": "A", "version": "1"}, "paths": {"/tags": {"put": {
        "operationId": "setTags", "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "required": ["tags"], "properties": {"tags": {"type": "array",
                                                                            "items": {"type": "string"}}}}}}},
        "responses": {"200": {"description": "ok"}, "400": {"description": "bad"}}}}}}
    app = MockApp(load_data(spec, source="tags"))
    assert app.handle("PUT", "/tags", {"content-type": "application/json"}, b'{"tags": []}').status == 200
    assert app.handle("PUT", "/tags", {"content-type": "application/json"}, b"{}").status == 400
    assert app.handle("PUT", "/tags", {"content-type": "application/json"}, b"null").status == 400


def test_an_operation_without_a_not_found_answer_serves_any_well_formed_id() -> None:
    """A spec that documents only the success of a detail operation gives the mock no way to say
    "not found": every well-formed id is served. A name the schema requires without describing
    it is still there (a spec's slip the answer must not repeat)."""
    spec = {"openapi": "3.0.3", "info": {"title": "Cats", "version": "1"}, "paths": {
        "/cats/{cat_id}": {"get": {"operationId": "getCat", "parameters": [
            {"name": "cat_id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}],
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "type": "object", "required": ["file", "tags"],
                "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}},
                               "createdAt": {"type": "string", "format": "datetime"}}}}}}}}}}}
    app = MockApp(load_data(spec, source="cats"))
    cat = app.handle("GET", "/cats/987654321")
    assert cat.status == 200 and cat.body["id"] == 987654321 and "file" in cat.body and "tags" in cat.body
    assert re.match(r"\d{4}-\d\d-\d\dT", cat.body["createdAt"])
    # Input that breaks the schema is still refused (with 400: the operation documents no refusal).
    assert app.handle("GET", "/cats/0").status == 400


def test_a_parameter_that_names_parts_of_the_answer_selects_them() -> None:
    """``/search?type=album,track`` answers albums and tracks only, as the API documents it (the
    parameter's enum names the answer's properties), and each list holds items of that type even
    though every item has a ``type`` property the query's array also filters on."""
    def page(kind: str) -> dict[str, Any]:
        return {"type": "object", "properties": {"total": {"type": "integer"}, "items": {"type": "array", "items": {
            "type": "object", "required": ["id", "name", "type"], "properties": {
                "id": {"type": "string"}, "name": {"type": "string"}, "type": {"type": "string", "enum": [kind]}}}}}}

    spec = {"openapi": "3.0.3", "info": {"title": "Music", "version": "1"}, "paths": {
        "/search": {"get": {"operationId": "search", "parameters": [
            {"name": "q", "in": "query", "required": True, "schema": {"type": "string"}},
            {"name": "type", "in": "query", "required": True, "explode": False, "schema": {
                "type": "array", "items": {"type": "string", "enum": ["album", "artist", "track", "playlist"]}}},
            {"name": "sort", "in": "query", "schema": {"type": "string", "enum": ["name", "popularity"]}}],
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "type": "object", "required": ["meta"], "properties": {
                    "meta": {"type": "object", "properties": {"took": {"type": "integer"}}},
                    "albums": page("album"), "artists": page("artist"), "tracks": page("track"),
                    "playlists": page("playlist")}}}}}}}}}}
    app = MockApp(load_data(spec, source="music"))
    both = app.handle("GET", "/search?q=sun&type=album,track&sort=name")
    assert both.status == 200 and set(both.body) == {"albums", "tracks", "meta"}  # required parts stay
    assert both.body["tracks"]["items"] and all(i["type"] == "track" for i in both.body["tracks"]["items"])
    assert both.body["albums"]["items"] and all(i["type"] == "album" for i in both.body["albums"]["items"])
    one = app.handle("GET", "/search?q=sun&type=playlist")
    assert set(one.body) == {"playlists", "meta"} and one.body["playlists"]["items"]
    # ``sort``'s enum names no part of the answer: it selects nothing
    assert app.handle("GET", "/search?q=sun&type=album&sort=popularity").body.keys() == {"albums", "meta"}
