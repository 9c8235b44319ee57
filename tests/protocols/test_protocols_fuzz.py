"""Any input to any loader ends in a Collection or a ProtocolError with its source set: never a
KeyError, TypeError, RecursionError... Inputs: arbitrary JSON-ish values, values dressed up as each
format, mutated real specs (nodes deleted, replaced, or turned into ``$ref``s, which makes cycles),
and arbitrary file contents through ``load_spec`` and the CLI."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atc.errors import ProtocolError
from protocols import Collection, load_data, load_spec
from protocols.loaders import LOADERS
from tests.conftest import BENCH_DATA

SOURCE = "fuzz.json"

scalars = st.none() | st.booleans() | st.integers(-10, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | \
    st.sampled_from(["", "get", "#/paths", "#/components/schemas/x", "3.0.0", "2.0", "/x/{id}", "object",
                     "application/json", "query", "path", "body"]) | st.text(max_size=8)
keys = st.sampled_from(["openapi", "swagger", "paths", "get", "post", "parameters", "$ref", "schema", "name",
                        "in", "required", "responses", "200", "default", "content", "application/json",
                        "properties", "items", "allOf", "oneOf", "type", "requestBody", "servers", "url",
                        "components", "schemas", "api_list", "tool_name", "tools", "inputSchema", "result",
                        "security", "securitySchemes", "/a", "/a/{id}", "examples", "value"]) | st.text(max_size=5)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) |
                           st.dictionaries(keys, inner, max_size=5), max_leaves=40)
dressed = st.one_of(
    st.builds(lambda p, v: {"openapi": v, "info": {"title": "t"}, "paths": p}, json_values,
              st.sampled_from(["3.0.0", "3.1.0", "3.0"])),
    st.builds(lambda p: {"swagger": "2.0", "paths": p}, json_values),
    st.builds(lambda a: {"tool_name": "t", "api_list": a}, json_values),
    st.builds(lambda a: [{"api_list": a}], json_values),
    st.builds(lambda t: {"tools": t}, json_values),
    st.builds(lambda t: {"result": {"tools": t}}, json_values),
)


def _check(doc: Any) -> None:
    try:
        c = load_data(doc, source=SOURCE)
    except ProtocolError as exc:
        assert exc.source == SOURCE
        return
    assert isinstance(c, Collection) and c.tools
    names = [t.name for t in c.tools]
    assert len(set(names)) == len(names) and all(n.isidentifier() for n in names)
    json.dumps(c.to_dict())  # storable


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_any_json_value(doc: Any) -> None:
    _check(doc)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values | dressed)
def test_every_loader_directly(doc: Any) -> None:
    """Each registered loader, even on input its ``detect`` would have refused."""
    for loader in LOADERS:
        try:
            c = loader.load(doc, source=SOURCE)
        except ProtocolError as exc:
            assert exc.source == SOURCE
        else:
            assert isinstance(c, Collection) and c.tools


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dressed)
def test_values_dressed_as_each_format(doc: Any) -> None:
    _check(doc)


def _pointers(node: Any, prefix: tuple[Any, ...] = (), out: list[tuple[Any, ...]] | None = None) -> list[tuple[Any, ...]]:
    out = [] if out is None else out
    if isinstance(node, dict):
        for k, v in node.items():
            out.append(prefix + (k,))
            _pointers(v, prefix + (k,), out)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.append(prefix + (i,))
            _pointers(v, prefix + (i,), out)
    return out


def _small_spec(name: str, n_paths: int) -> dict[str, Any]:
    doc = json.loads((BENCH_DATA / "restbench/specs" / name).read_text())
    doc["paths"] = dict(list(doc["paths"].items())[:n_paths])
    return doc


SPECS = {}
if BENCH_DATA.exists():
    SPECS = {"tmdb": _small_spec("tmdb_oas.json", 8), "spotify": _small_spec("spotify_oas.json", 8)}
POINTERS = {k: _pointers(v) for k, v in SPECS.items()}

mutation = st.tuples(
    st.sampled_from(sorted(SPECS) or ["none"]),
    st.lists(st.tuples(st.integers(min_value=0), st.sampled_from(["delete", "replace", "ref", "ref-up"]),
                       json_values), min_size=1, max_size=4),
)


@pytest.mark.skipif(not SPECS, reason="public benchmark data not present")
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutation)
def test_mutated_real_specs(m: tuple[str, list[tuple[int, str, Any]]]) -> None:
    which, edits = m
    doc = copy.deepcopy(SPECS[which])
    pointers = POINTERS[which]
    for index, op, value in edits:
        path = pointers[index % len(pointers)]
        parent = doc
        try:
            for step in path[:-1]:
                parent = parent[step]
            last = path[-1]
            parent[last]  # noqa: B018 - the node may be gone after an earlier edit
        except (KeyError, IndexError, TypeError):
            continue
        if op == "delete":
            del parent[last]
        elif op == "replace":
            parent[last] = value
        elif op == "ref":
            parent[last] = {"$ref": "#/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)}
        else:  # a reference to an ancestor: recursion or a cycle
            up = path[: max(1, len(path) // 2)]
            parent[last] = {"$ref": "#/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in up)}
    _check(doc)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300) | st.binary(max_size=100).map(lambda b: b.decode("latin-1")))
def test_any_file_content(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    path = tmp_path_factory.mktemp("f") / "spec.json"
    path.write_text(text, encoding="utf-8")
    try:
        load_spec(path)
    except ProtocolError as exc:
        assert exc.source == str(path)


def test_deep_nesting_is_a_protocol_error_or_cut(tmp_path: Path) -> None:
    deep: Any = {"type": "string"}
    for _ in range(3000):
        deep = {"type": "array", "items": deep}
    doc = {"openapi": "3.0.0", "paths": {"/x": {"get": {"responses": {
        "200": {"description": "", "content": {"application/json": {"schema": deep}}}}}}}}
    c = load_data(doc)
    assert "nesting too deep" in json.dumps(c.tools[0].response_schema)
    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ProtocolError):
        load_spec(p)


@pytest.mark.parametrize("content", ['{"openapi": "3.0.0", "paths": {"/x": ', "not: [valid", '{"openapi": "9"}'])
def test_cli_prints_the_error_and_exits_2(tmp_path: Path, content: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    atc = Path(sys.executable).parent / "atc"
    r = subprocess.run([str(atc), "tools", "import", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert str(bad) in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([str(atc), "tools", "import", str(bad), "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    err = json.loads(r.stdout)["error"]
    assert err["type"] == "ProtocolError" and err["source"] == str(bad)
