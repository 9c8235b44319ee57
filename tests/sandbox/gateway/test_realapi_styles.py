"""Parameter styles (issue #7 item 8): every parameter is written as its spec says, checked by a
server that parses each style strictly (tests/support/apis/realworld.py), for specs imported from
OpenAPI 3 (style/explode/allowReserved, requestBody encoding) and Swagger 2 (collectionFormat)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from protocols import load_data
from protocols.model import Binding, Collection, Tool
from sandbox.api import Toolset
from sandbox.gateway.core import Gateway
from tests.support.apis.realworld import PNG, RealWorld


@pytest.fixture(scope="module")
def rw() -> Iterator[RealWorld]:
    server = RealWorld().start()
    yield server
    server.stop()


def _param(name: str, where: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "schema": schema, **extra}


ARRAY = {"type": "array", "items": {"type": "string"}}
OBJECT = {"type": "object", "properties": {"R": {"type": "integer"}, "G": {"type": "integer"}}}


def openapi3(url: str) -> dict[str, Any]:
    """A spec whose operations each use one style; the paths are the strict parsers."""
    def op(op_id: str, params: list[dict[str, Any]]) -> dict[str, Any]:
        return {"get": {"operationId": op_id, "parameters": params, "responses": {"200": {"description": "ok"}}}}

    return {
        "openapi": "3.0.3", "info": {"title": "styles", "version": "1"}, "servers": [{"url": url}],
        "paths": {
            "/q/form-explode": op("form_explode", [_param("id", "query", ARRAY)]),
            "/q/form": op("form_flat", [_param("id", "query", ARRAY, style="form", explode=False),
                                        _param("color", "query", OBJECT, style="form", explode=False)]),
            "/q/spaceDelimited": op("space", [_param("id", "query", ARRAY, style="spaceDelimited", explode=False)]),
            "/q/pipeDelimited": op("pipes", [_param("id", "query", ARRAY, style="pipeDelimited", explode=False)]),
            "/q/deepObject": op("deep", [_param("color", "query", OBJECT, style="deepObject", explode=True)]),
            "/q/form-explode/reserved": op("reserved", [_param("next", "query", {"type": "string"},
                                                               allowReserved=True)]),
            "/p/simple/{ids}": op("path_simple", [_param("ids", "path", ARRAY, required=True)]),
            "/p/label/{ids}": op("path_label", [_param("ids", "path", ARRAY, required=True, style="label",
                                                       explode=True)]),
            "/p/matrix/{ids}": op("path_matrix", [_param("ids", "path", ARRAY, required=True, style="matrix",
                                                         explode=False)]),
            "/p/matrix/{color}/x": op("path_matrix_obj", [_param("color", "path", OBJECT, required=True,
                                                                 style="matrix", explode=True)]),
            "/h": op("headers", [_param("X-Ids", "header", ARRAY), _param("X-Obj", "header", OBJECT, explode=True)]),
            "/c": op("cookies", [_param("sid", "cookie", {"type": "string"}),
                                 _param("tags", "cookie", ARRAY, explode=False)]),
            "/form": {"post": {"operationId": "post_form", "responses": {"200": {"description": "ok"}},
                               "requestBody": {"content": {"application/x-www-form-urlencoded": {
                                   "schema": {"type": "object", "properties": {
                                       "name": {"type": "string"}, "tags": ARRAY, "color": OBJECT,
                                       "meta": {"type": "object"}}},
                                   "encoding": {"color": {"style": "deepObject", "explode": True},
                                                "meta": {"contentType": "application/json"}}}}}}},
            "/multipart": {"post": {"operationId": "upload", "responses": {"200": {"description": "ok"}},
                                    "requestBody": {"content": {"multipart/form-data": {
                                        "schema": {"type": "object", "properties": {
                                            "file": {"type": "string", "format": "binary"},
                                            "note": {"type": "string"}, "meta": {"type": "object"},
                                            "tags": ARRAY}},
                                        "encoding": {"file": {"contentType": "image/png"}}}}}}},
        },
    }


def swagger2(host: str) -> dict[str, Any]:
    def op(op_id: str, fmt: str | None) -> dict[str, Any]:
        p: dict[str, Any] = {"name": "id", "in": "query", "type": "array", "items": {"type": "string"}}
        if fmt:
            p["collectionFormat"] = fmt
        return {"get": {"operationId": op_id, "parameters": [p], "responses": {"200": {"description": "ok"}}}}

    return {
        "swagger": "2.0", "info": {"title": "old", "version": "1"}, "host": host, "schemes": ["http"],
        "paths": {
            "/q/form": op("csv_default", None),
            "/q/spaceDelimited": op("ssv", "ssv"),
            "/q/tabDelimited": op("tsv", "tsv"),
            "/q/pipeDelimited": op("pipes", "pipes"),
            "/q/form-explode": op("multi", "multi"),
            "/form": {"post": {"operationId": "post_form", "consumes": ["application/x-www-form-urlencoded"],
                               "parameters": [{"name": "tags", "in": "formData", "type": "array",
                                               "items": {"type": "string"}, "collectionFormat": "multi"},
                                              {"name": "ids", "in": "formData", "type": "array",
                                               "items": {"type": "string"}}],
                               "responses": {"200": {"description": "ok"}}}},
        },
    }


def _gw(spec: dict[str, Any]) -> Gateway:
    return Gateway(Toolset([load_data(spec, source="styles.json")]))


def _ok(gw: Gateway, tool: str, args: dict[str, Any]) -> Any:
    out = gw.call(tool, args)
    assert out.ok, out.error
    return out.data


TRICKY = ["a,b", "c d", "e|f", "g&h=i", "ü/é"]


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("form_explode", {"id": TRICKY}, {"id": TRICKY}),
        ("form_flat", {"id": ["3", "4", "5"], "color": {"R": 100, "G": 200}},
         {"id": ["3", "4", "5"], "color": ["R", "100", "G", "200"]}),
        ("space", {"id": ["3", "4", "x|y"]}, {"id": ["3", "4", "x|y"]}),
        ("pipes", {"id": ["3", "4", "a b", "c,d"]}, {"id": ["3", "4", "a b", "c,d"]}),
        ("deep", {"color": {"R": 100, "G": 200}}, {"color": {"R": "100", "G": "200"}}),
    ],
)
def test_query_styles_reach_a_strict_parser_intact(rw: RealWorld, tool: str, args: dict[str, Any],
                                                   expected: Any) -> None:
    assert _ok(_gw(openapi3(rw.url)), tool, args) == expected


def test_allow_reserved_leaves_reserved_characters_alone(rw: RealWorld) -> None:
    gw = _gw(openapi3(rw.url))
    gw.call("reserved", {"next": "/a/b?c=d"})
    assert rw.requests[-1].target == "/q/form-explode/reserved?next=/a/b?c=d"


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("path_simple", {"ids": ["3", "4", "a/b"]}, ["3", "4", "a/b"]),
        ("path_label", {"ids": ["3", "4", "5"]}, ["3", "4", "5"]),
        ("path_matrix", {"ids": ["3", "4,5"]}, ["ids=3,4,5"]),
        ("path_matrix_obj", {"color": {"R": 1, "G": 2}}, ["R=1", "G=2"]),
    ],
)
def test_path_styles(rw: RealWorld, tool: str, args: dict[str, Any], expected: Any) -> None:
    data = _ok(_gw(openapi3(rw.url)), tool, args)
    if tool == "path_matrix":
        # the comma inside a value is encoded, so the server reads it as part of the value
        assert rw.requests[-1].target == "/p/matrix/;ids=3,4%2C5"
    else:
        assert data["items"] == expected


def test_header_and_cookie_styles(rw: RealWorld) -> None:
    gw = _gw(openapi3(rw.url))
    assert _ok(gw, "headers", {"x_ids": ["1", "2"], "x_obj": {"a": 1, "b": True}}) == {
        "ids": ["1", "2"], "obj": {"a": "1", "b": "true"}}
    assert _ok(gw, "cookies", {"sid": "s1", "tags": ["x", "y"]}) == {"cookies": [["sid", "s1"], ["tags", "x,y"]]}


def test_form_body_arrays_objects_and_json_fields(rw: RealWorld) -> None:
    data = _ok(_gw(openapi3(rw.url)), "post_form", {"name": "a b&c", "tags": ["x", "y"], "color": {"R": 1},
                                                     "meta": {"k": [1, 2]}})
    assert data["content_type"] == "application/x-www-form-urlencoded"
    assert data["pairs"] == [["name", "a b&c"], ["tags", "x"], ["tags", "y"], ["color[R]", "1"],
                             ["meta", '{"k":[1,2]}']]


def test_multipart_file_text_json_and_repeated_parts(rw: RealWorld) -> None:
    png = {"base64": base64.b64encode(PNG).decode(), "filename": "dot.png"}
    data = _ok(_gw(openapi3(rw.url)), "upload", {"file": png, "note": "hi", "meta": {"a": 1}, "tags": ["p", "q"]})
    parts = {(p["name"], i): p for i, p in enumerate(data["parts"])}
    by_name = [p["name"] for p in data["parts"]]
    assert by_name == ["file", "note", "meta", "tags", "tags"]
    file_part = parts[("file", 0)]
    assert base64.b64decode(file_part["b64"]) == PNG
    assert (file_part["filename"], file_part["content_type"]) == ("dot.png", "image/png")
    assert json.loads(base64.b64decode(parts[("meta", 2)]["b64"])) == {"a": 1}
    assert parts[("meta", 2)]["content_type"] == "application/json"
    assert [base64.b64decode(p["b64"]).decode() for p in data["parts"][3:]] == ["p", "q"]


@pytest.mark.parametrize(
    ("tool", "expected_target"),
    [
        ("csv_default", "/q/form?id=a%2Cb,c"),
        ("ssv", "/q/spaceDelimited?id=a%2Cb%20c"),
        ("tsv", "/q/tabDelimited?id=a%2Cb%09c"),
        ("pipes", "/q/pipeDelimited?id=a%2Cb|c"),
        ("multi", "/q/form-explode?id=a%2Cb&id=c"),
    ],
)
def test_swagger_collection_formats(rw: RealWorld, tool: str, expected_target: str) -> None:
    gw = _gw(swagger2(rw.url.removeprefix("http://")))
    assert _ok(gw, tool, {"id": ["a,b", "c"]}) == {"id": ["a,b", "c"]}
    assert rw.requests[-1].target == expected_target


def test_swagger_form_fields_multi_and_csv(rw: RealWorld) -> None:
    gw = _gw(swagger2(rw.url.removeprefix("http://")))
    data = _ok(gw, "post_form", {"tags": ["a", "b"], "ids": ["1", "2"]})
    assert data["pairs"] == [["tags", "a"], ["tags", "b"], ["ids", "1,2"]]


def test_styles_are_recorded_at_import_and_old_bindings_still_load() -> None:
    col = load_data(swagger2("h:1"), source="s.json")
    tool = col.tool("pipes")
    assert tool is not None and tool.bindings["id"] == Binding("query", "id", style="pipeDelimited", explode=False)
    stored = Collection.from_dict(json.loads(json.dumps(col.to_dict())))
    assert stored.tool("pipes").bindings["id"].style == "pipeDelimited"  # type: ignore[union-attr]
    # a collection stored before styles existed: "in" and "name" only
    old = Tool.from_dict({"name": "t", "bindings": {"id": {"in": "query", "name": "id"}}})
    assert old.bindings["id"] == Binding("query", "id")
    assert old.bindings["id"].to_dict() == {"in": "query", "name": "id"}
    assert (old.bindings["id"].effective_style(), old.bindings["id"].effective_explode()) == ("form", True)
