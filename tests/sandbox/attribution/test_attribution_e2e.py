"""The attribution suite through the REAL sandbox: runner, gateway, session, backend.

Every case of tests/support/attribution_cases.py runs with ``sandbox.execute.run`` against the library
API on 127.0.0.1, on the local backend and (marked ``docker``) in a container. The assertions
are on the contract result: ``error.type``, ``error.line`` and ``error.tool``, plus the
condensed response that reflection will show.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from protocols import load_spec
from sandbox.api import Limits, Toolset
from sandbox.execute import run
from tests.support.apis.library import SECRET, LibraryAPI
from tests.support.attribution_cases import CASES, Case

LIMITS = Limits(timeout=30, max_calls=50)


def _docker_ready() -> bool:
    try:
        from sandbox.docker.backend import docker_available
    except ImportError:
        return False
    try:
        return bool(docker_available())
    except Exception:
        return False


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "docker" and not _docker_ready():
        pytest.skip("no Docker engine or no sandbox image")
    return str(request.param)


@pytest.fixture()
def toolset(api: LibraryAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Toolset]:
    # no response schemas in the spec: the model would only know the real keys from attribution
    spec = api.write_spec(tmp_path / "library.json", responses=False)
    monkeypatch.setenv("LIBRARY_KEY", SECRET)
    yield Toolset([load_spec(spec)], credentials={"api_key": "env:LIBRARY_KEY"})


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_through_the_sandbox(backend: str, toolset: Toolset, case: Case) -> None:
    result = run(case.program, toolset, LIMITS, sandbox=backend)
    assert result.sandbox == backend
    assert not result.ok and result.error is not None
    err = result.error
    assert (err.type, err.line, err.tool) == (case.expected_type, case.expected_line, case.expected_tool), (
        err.message, err.attribution)
    att = err.attribution
    assert att is not None and att["reason"] and "attribution failed" not in att["reason"]
    assert att["tool"] == err.tool
    if case.expected_tool is None:
        assert att["call_index"] is None
        return
    index = att["call_index"]
    if index is not None:
        assert result.calls[index].tool == case.expected_tool
    if case.shape_keys and case.expected_type != "ToolError":
        assert index is not None
        shape = repr(att["response_shape"])
        assert all(f"'{k}'" in shape for k in case.shape_keys), att["response_shape"]
        assert att["excerpt"]


def test_key_error_shows_the_real_keys(backend: str, toolset: Toolset) -> None:
    program = 'r = search_authors(name="Le Guin")\nfirst = r["authors"][0]\nprint(first)\n'
    result = run(program, toolset, LIMITS, sandbox=backend)
    err = result.error
    assert err is not None and (err.type, err.line, err.tool) == ("KeyError", 2, "search_authors")
    att = err.attribution
    assert att is not None and att["call_index"] == 0
    shape = att["response_shape"]
    assert set(shape["properties"]) == {"results", "count"}
    assert set(shape["properties"]["results"]["items"]["properties"]) == {"id", "name", "born", "country"}
    assert '"results": [{"id": 1, "name": "Ursula K. Le Guin"' in att["excerpt"]
    assert "`r` = `search_authors(name=\"Le Guin\")` (line 1)" in att["reason"]


def test_result_json_carries_the_attribution(backend: str, toolset: Toolset) -> None:
    program = "total = 0\nfor i in (10, 11, 12):\n    total += get_book(book_id=i)['price']\nprint(total)\n"
    doc = run(program, toolset, LIMITS, sandbox=backend).to_dict()
    err = doc["error"]
    assert (err["type"], err["line"], err["tool"]) == ("ToolError", 3, "get_book")
    assert err["attribution"]["call_index"] == 2
    assert doc["calls"][2]["status"] == 404
    assert err["attribution"]["excerpt"] == '{"error": "book not found"}'
