"""Imperfect specs (issue #7 items 5, 13, 14): well-known mistakes repaired at import with a
warning and a JSON pointer, specs without a server URL, ``--base-url NAME=URL``, specs served at
a URL, and the auth schemes in ``tools show``. Through the real ``atc`` command line."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from atc.cli import main
from protocols import load_data
from protocols.errors import ProtocolError
from protocols.remote import fetch_spec
from sandbox.api import Toolset
from sandbox.gateway.core import Gateway
from tests.support.apis.realworld import SECRET, RealWorld


@pytest.fixture(scope="module")
def rw() -> Iterator[RealWorld]:
    server = RealWorld().start()
    yield server
    server.stop()


def sloppy_spec(server: str | None = None) -> dict[str, Any]:
    """What real generators write: ``type: int`` (a Flask generator), ``integer64``, ``bool``,
    ``double``, a YAML null in a type list, ``required: true`` on properties, numbers as strings,
    a 3.0-style exclusiveMinimum in a 3.1 document, and a type nobody knows."""
    doc: dict[str, Any] = {
        "openapi": "3.1.0", "info": {"title": "Sloppy", "version": "1"},
        "paths": {
            "/echo/items": {"get": {
                "operationId": "list_items",
                "parameters": [
                    {"name": "limit", "in": "query", "schema": {"type": "int", "minimum": "1", "maximum": "50"}},
                    {"name": "big", "in": "query", "schema": {"type": "integer64"}},
                    {"name": "flag", "in": "query", "schema": {"type": "bool"}},
                    {"name": "ratio", "in": "query", "schema": {"type": "double", "exclusiveMinimum": True,
                                                                "minimum": 0}},
                    {"name": "note", "in": "query", "schema": {"type": ["string", None]}},
                    {"name": "mystery", "in": "query", "schema": {"type": "foo"}},
                ],
                "responses": {"200": {"description": "ok"}}}},
            "/echo/items/new": {"post": {
                "operationId": "create_item",
                "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Item"}}}},
                "responses": {"201": {"description": "ok"}}}},
        },
        "components": {"schemas": {"Item": {"type": "object", "required": ["id", "name"], "properties": {
            "id": {"type": "int", "readOnly": True},
            "name": {"type": "str", "required": True},
            "size": {"type": "number", "required": "false"}}}}},
    }
    if server:
        doc["servers"] = [{"url": server}]
    return doc


def test_well_known_mistakes_are_repaired_with_warnings_and_pointers() -> None:
    col = load_data(sloppy_spec("http://127.0.0.1:9"), source="sloppy.json")
    tool = col.tool("list_items")
    assert tool is not None
    props = tool.properties
    assert props["limit"] == {"type": "integer", "minimum": 1, "maximum": 50}
    assert props["big"] == {"type": "integer", "format": "int64"}
    assert props["flag"] == {"type": "boolean"}
    assert props["ratio"] == {"type": "number", "format": "double", "exclusiveMinimum": 0}
    assert props["note"] == {"type": ["string", "null"]}
    assert "type" not in props["mystery"]
    messages = {w.pointer: w.message for w in col.warnings}
    base = "/paths/~1echo~1items/get/parameters"
    assert messages[f"{base}/0/schema/type"] == "type 'int' is not a JSON Schema type; read as 'integer'"
    assert messages[f"{base}/0/schema/minimum"] == "minimum '1' is written as a string; read as 1"
    assert messages[f"{base}/5/schema/type"] == "unknown type 'foo': values here are not type-checked"
    assert "OpenAPI 3.0 style" in messages[f"{base}/3/schema/exclusiveMinimum"]
    # the shared component is repaired and reported once, at its own pointer
    assert "moved into the object's required list" in messages["/components/schemas/Item/properties"]
    create = col.tool("create_item")
    assert create is not None
    # readOnly "id" is the server's: required for responses only
    assert create.required == ["name"]


def test_repaired_schemas_validate_at_call_time(rw: RealWorld) -> None:
    gw = Gateway(Toolset([load_data(sloppy_spec(rw.url), source="sloppy.json")]))
    out = gw.call("list_items", {"limit": "x"})
    assert out.error is not None and "'x' is not of type 'integer'" in out.error["message"]
    out = gw.call("list_items", {"limit": 0})
    assert out.error is not None and "less than the minimum of 1" in out.error["message"]
    out = gw.call("list_items", {"limit": 5, "big": 2**40, "flag": True, "ratio": 0.5, "note": None,
                                 "mystery": {"any": "thing"}})
    assert out.ok, out.error
    assert gw.call("create_item", {"name": "n"}).ok
    missing = gw.call("create_item", {"size": 1})
    assert missing.error is not None and "missing required argument 'name'" in missing.error["message"]


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_import_prints_warnings_and_json_lists_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "sloppy.json"
    spec.write_text(json.dumps(sloppy_spec()))
    code, out, err = _cli(["tools", "import", str(spec)], capsys)
    assert code == 0 and out.startswith("imported sloppy: 2 tools")
    assert "atc: warning: sloppy: /servers: the spec names no server URL: runs need --base-url URL" in err
    assert "type 'int' is not a JSON Schema type" in err
    code, out, err = _cli(["tools", "import", str(spec), "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and err == ""
    assert {"pointer": "/paths/~1echo~1items/get/parameters/1/schema/type",
            "message": "type 'integer64' is not a JSON Schema type; read as 'integer'"} in doc["warnings"]


def test_no_server_url_fails_before_running_with_the_hint(tmp_path: Path, rw: RealWorld,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "sloppy.json"
    spec.write_text(json.dumps(sloppy_spec()))
    program = tmp_path / "p.py"
    program.write_text("print(list_items(limit=2)['target'])\n")
    before = len(rw.requests)
    code, out, err = _cli(["run", str(program), "--tools", str(spec), "--sandbox", "local"], capsys)
    assert code == 2 and "collection 'sloppy': the spec names no server URL" in err and "--base-url" in err
    code, out, err = _cli(["run", str(program), "--tools", str(spec), "--sandbox", "local", "--json"], capsys)
    assert code == 2 and json.loads(out)["error"]["type"] == "ConfigError"
    assert len(rw.requests) == before
    code, out, err = _cli(["run", str(program), "--tools", str(spec), "--sandbox", "local", "--base-url", rw.url],
                          capsys)
    assert code == 0, err
    assert out.strip() == "/echo/items?limit=2"


def test_base_url_per_collection_when_a_run_mixes_collections(tmp_path: Path, rw: RealWorld,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    one = sloppy_spec()
    one["info"]["title"] = "First"
    two = {"openapi": "3.0.3", "info": {"title": "Second", "version": "1"},
           "servers": [{"url": "http://127.0.0.1:9/unreachable"}],
           "paths": {"/contents/{path}": {"get": {"operationId": "get_contents", "parameters": [
               {"name": "path", "in": "path", "required": True, "schema": {"type": "string"}}],
               "responses": {"200": {"description": "ok"}}}}}}
    first.write_text(json.dumps(one))
    second.write_text(json.dumps(two))
    program = tmp_path / "p.py"
    program.write_text("print(list_items(limit=1)['method'], get_contents(path='')['type'])\n")
    base = ["run", str(program), "--tools", str(first), "--tools", str(second), "--sandbox", "local"]
    code, out, err = _cli(base + ["--base-url", f"first={rw.url}"], capsys)
    assert code == 1 and "get_contents" in err  # second still points at its unreachable server
    code, out, err = _cli(base + ["--base-url", f"first={rw.url}", "--base-url", f"second={rw.url}"], capsys)
    assert code == 0, err
    assert out.strip() == "GET directory"
    code, out, err = _cli(base + ["--base-url", f"third={rw.url}"], capsys)
    assert code == 2 and "no collection 'third' in this run" in err
    code, out, err = _cli(base + ["--base-url", rw.url, "--base-url", rw.url], capsys)
    assert code == 2 and "--base-url given twice" in err


def test_tools_show_lists_the_auth_schemes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = {"openapi": "3.0.3", "info": {"title": "Keys", "version": "1"}, "servers": [{"url": "http://x"}],
            "components": {"securitySchemes": {"api_key": {"type": "apiKey", "in": "header", "name": "X-Key"},
                                               "token": {"type": "http", "scheme": "bearer"}}},
            "security": [{"api_key": []}],
            "paths": {"/a": {"get": {"operationId": "a", "responses": {"200": {"description": "ok"}}}},
                      "/b": {"get": {"operationId": "b", "security": [{"token": []}],
                                     "responses": {"200": {"description": "ok"}}}}}}
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(spec))
    assert _cli(["tools", "import", str(path)], capsys)[0] == 0
    code, out, _ = _cli(["tools", "show", "keys"], capsys)
    assert code == 0
    assert "api_key: API key in header 'X-Key'; used by 1 tool(s); --credential api_key=env:VAR" in out
    assert "token: HTTP bearer; used by 1 tool(s)" in out
    code, out, _ = _cli(["tools", "show", "keys", "--json"], capsys)
    assert json.loads(out)["security_schemes"]["api_key"]["param"] == "X-Key"
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(sloppy_spec("http://x")))
    _cli(["tools", "import", str(plain)], capsys)
    code, out, _ = _cli(["tools", "show", "sloppy"], capsys)
    assert "auth: the spec declares no security scheme" in out and "header:NAME=env:VAR" in out


# -- specs served at a URL (item 14) ----------------------------------------------------------------

def test_import_from_a_url_resolves_relative_servers(rw: RealWorld, capsys: pytest.CaptureFixture[str]) -> None:
    doc = sloppy_spec()
    doc["servers"] = [{"url": "/echo/v1"}]
    rw.files["openapi.json"] = (json.dumps(doc).encode(), "application/json")
    swagger = {"swagger": "2.0", "info": {"title": "Old", "version": "1"}, "basePath": "/api",
               "paths": {"/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "ok"}}}}}}
    rw.files["swagger.yaml"] = (yaml.safe_dump(swagger).encode(), "text/yaml")
    code, out, err = _cli(["tools", "import", f"{rw.url}/files/openapi.json", "--json"], capsys)
    doc_out = json.loads(out)
    assert code == 0, err
    assert doc_out["servers"] == [f"{rw.url}/echo/v1"] and doc_out["source"] == f"{rw.url}/files/openapi.json"
    assert not any("server" in w["message"] for w in doc_out["warnings"])
    code, out, err = _cli(["tools", "import", f"{rw.url}/files/swagger.yaml", "--json"], capsys)
    assert code == 0 and json.loads(out)["servers"] == [f"{rw.url}/api"]


def test_import_from_a_url_with_a_credential_never_stores_it(rw: RealWorld, monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rw.files["private.json"] = (json.dumps(sloppy_spec()).encode(), "application/json")
    code, out, err = _cli(["tools", "import", f"{rw.url}/files/private.json"], capsys)
    assert code == 2 and "HTML page" in err and "credential" in err
    monkeypatch.setenv("RW_TOKEN", f"token {SECRET}")
    code, out, err = _cli(["tools", "import", f"{rw.url}/files/private.json",
                           "--credential", "header:Authorization=env:RW_TOKEN"], capsys)
    assert code == 0, err
    # Bytes: the store holds binary files too (the retrieval index's postings and vectors).
    stored = b"".join(p.read_bytes() for p in Path(tmp_path / "atc-home").rglob("*") if p.is_file())
    assert stored and SECRET.encode() not in stored


@pytest.mark.parametrize(
    ("path", "fragment"),
    [("/files/missing.json", "HTTP 404"), ("/slow?s=3", "did not arrive within 1 s"),
     ("/go/loop", "more than 5 redirects")],
)
def test_fetching_a_spec_fails_clearly(rw: RealWorld, path: str, fragment: str) -> None:
    with pytest.raises(ProtocolError, match=fragment):
        fetch_spec(rw.url + path, timeout=1.0)


def test_fetch_caps_the_size_and_names_refused_connections(rw: RealWorld) -> None:
    rw.files["big.json"] = (b"{" + b" " * 5000 + b"}", "application/json")
    with pytest.raises(ProtocolError, match="larger than the 1000-byte cap"):
        fetch_spec(rw.url + "/files/big.json", max_bytes=1000)
    with pytest.raises(ProtocolError, match="cannot fetch the spec: ConnectError"):
        fetch_spec("http://127.0.0.1:9/spec.json")


def test_import_url_through_a_real_subprocess(rw: RealWorld, tmp_path: Path) -> None:
    rw.files["sub.json"] = (json.dumps(sloppy_spec(rw.url)).encode(), "application/json")
    env = {"ATC_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    atc = str(Path(sys.executable).parent / "atc")
    proc = subprocess.run([atc, "tools", "import", f"{rw.url}/files/sub.json"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "imported sloppy: 2 tools" in proc.stdout and "atc: warning: sloppy:" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- any schema, however broken: the import repairs what it can and a call never crashes -----------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_WEIRD = st.one_of(st.sampled_from(["int", "integer64", "bool", "double", "str", "foo", "", "string|null", "file",
                                    "Integer", "object", "array", "number"]),
                   st.lists(st.sampled_from(["string", None, "int", "x"]), max_size=3), st.none(), st.integers())
_NUMBERISH = st.one_of(st.integers(-5, 5), st.sampled_from(["1", "x", "2.5", "-3", True, None, 0]))


def _schemas(depth: int = 2) -> st.SearchStrategy[Any]:
    leaf = st.fixed_dictionaries({}, optional={
        "type": _WEIRD, "minimum": _NUMBERISH, "maximum": _NUMBERISH, "maxLength": _NUMBERISH,
        "multipleOf": _NUMBERISH, "exclusiveMinimum": _NUMBERISH, "enum": st.one_of(st.just([]), st.just("a"),
                                                                                     st.just([1, "a"])),
        "required": st.one_of(st.booleans(), st.just("true"), st.just(["a"]), st.just("a")),
        "nullable": st.one_of(st.booleans(), st.just("true")), "format": st.one_of(st.just(3), st.just("uuid")),
        "patternProperties": st.just({"[": {}}), "additionalProperties": st.sampled_from([True, "false", 3, {}]),
    })
    if depth == 0:
        return leaf
    sub = _schemas(depth - 1)
    return st.one_of(leaf, st.fixed_dictionaries({"type": st.just("object")}, optional={
        "properties": st.one_of(st.dictionaries(st.sampled_from(["a", "b"]), sub, max_size=2),
                                st.just([{"name": "a", "type": "int"}]), st.just("nope")),
        "items": st.one_of(sub, st.lists(sub, max_size=2)), "allOf": st.one_of(st.lists(sub, max_size=2), sub),
        "required": st.one_of(st.just(["a", 3]), st.booleans())}))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=_schemas(), value=st.one_of(st.none(), st.integers(), st.text(max_size=3), st.booleans(),
                                          st.lists(st.integers(), max_size=2),
                                          st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2)),
       version=st.sampled_from(["3.0.3", "3.1.0"]))
def test_any_broken_schema_imports_and_never_crashes_a_call(schema: Any, value: Any, version: str) -> None:
    spec = {"openapi": version, "info": {"title": "fuzz", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
            "paths": {"/x": {"post": {"operationId": "x", "responses": {"200": {"description": "ok"}},
                                      "parameters": [{"name": "q", "in": "query", "schema": schema}],
                                      "requestBody": {"content": {"application/json": {"schema": {
                                          "type": "object", "properties": {"b": schema}}}}}}}}}
    col = load_data(spec, source="fuzz.json")
    tool = col.tool("x")
    assert tool is not None
    gw = Gateway(Toolset([col]))
    problems, note = gw._problems(tool, {"q": value, "b": value}, first_only=False)
    assert all(isinstance(m, str) for m, _ in problems)
    # the import repaired everything jsonschema would choke on: the call is really checked
    assert note is None


def test_solve_refuses_a_missing_server_before_asking_the_model(rw: RealWorld, tmp_path: Path) -> None:
    from tests.support.fakes.openai_server import ScriptedOpenAI

    spec = tmp_path / "sloppy.json"
    spec.write_text(json.dumps(sloppy_spec()))
    atc = str(Path(sys.executable).parent / "atc")
    with ScriptedOpenAI() as model:
        model.push("```python\nprint(list_items(limit=1)['target'])\n```")
        env = {"PATH": "/usr/bin:/bin", "ATC_HOME": str(tmp_path / "home"), "OPENAI_BASE_URL": model.base_url,
               "ATC_MODEL": "scripted-model"}
        args = [atc, "solve", "List one item", "--tools", str(spec), "--sandbox", "local"]
        proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 2 and "names no server URL" in proc.stderr and "--base-url" in proc.stderr
        assert model.requests == []  # nothing was spent on the model
        proc = subprocess.run(args + ["--base-url", f"sloppy={rw.url}"], capture_output=True, text=True, env=env,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "/echo/items?limit=1" and len(model.requests) == 1


def test_a_bare_origin_override_keeps_a_relative_servers_path(rw: RealWorld) -> None:
    doc = sloppy_spec()
    doc["servers"] = [{"url": "/echo/v1"}]
    col = load_data(doc, source="relative.json")
    assert any("is relative" in w.message for w in col.warnings)
    gw = Gateway(Toolset([col], base_url=rw.url))
    assert gw.call("list_items", {"limit": 1}).data["target"] == "/echo/v1/echo/items?limit=1"
    # an override with a path of its own is taken as it is
    gw = Gateway(Toolset([col], base_url=rw.url + "/echo/proxy"))
    assert gw.call("list_items", {"limit": 1}).data["target"] == "/echo/proxy/echo/items?limit=1"


def test_json_in_a_declared_legacy_charset_is_parsed() -> None:
    from sandbox.gateway.http.decoding import to_data

    assert to_data('{"a": "café"}'.encode("latin-1"), "application/json; charset=iso-8859-1") == {"a": "café"}
    assert to_data('["é"]'.encode(), "application/json; charset=utf-8") == ["é"]
