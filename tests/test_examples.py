"""The example collections shipped with atc: each loads, is served by ``atc mock``, and its example
program chains its tools through the real sandbox and gateway, with credentials added on the host."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from atc import examples
from atc.loop.checks import check_program
from atc.mock import MockServer
from protocols import load_spec
from sandbox.api import Limits, Toolset
from sandbox.local.backend import LocalBackend

ATC = Path(sys.executable).parent / "atc"
#: example -> (spec file, source format, tools, the first tools its program calls)
EXPECTED = {
    "bookshop": ("openapi.json", "openapi-3.0", 9, ["search_books", "get_book", "get_author", "get_book_stock"]),
    "tasks": ("openapi.yaml", "openapi-3.1", 8, ["list_projects", "list_project_tasks"]),
    "transit": ("swagger.json", "swagger-2.0", 7, ["find_stops"]),
}
KEY = "transit-key-5e0c1d"


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(pool_size=1) as b:
        yield b


def test_every_bundled_example_is_known() -> None:
    assert examples.names() == sorted(EXPECTED)
    for name, (spec, *_rest) in EXPECTED.items():
        folder = examples.path(name)
        assert {spec, "program.py", "README.md"} <= {p.name for p in folder.iterdir()}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_spec_loads_with_its_format(name: str) -> None:
    spec, fmt, count, _ = EXPECTED[name]
    collection = load_spec(examples.path(f"{name}/{spec}"))
    assert collection.source_format == fmt and len(collection.tools) == count
    assert collection.servers and all(t.summary for t in collection.tools)
    program = examples.path(f"{name}/program.py").read_text()
    assert check_program(program, {t.name: t for t in collection.tools}) is None


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_program_chains_the_tools_against_the_mock(name: str, backend: LocalBackend,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    spec, _, _, first_calls = EXPECTED[name]
    collection = load_spec(examples.path(f"{name}/{spec}"))
    credentials = {}
    if name == "transit":
        monkeypatch.setenv("TRANSIT_KEY", KEY)
        credentials = {"api_key": "env:TRANSIT_KEY"}
    elif name == "tasks":  # a bearer token on every call, as the spec declares (the mock takes any)
        monkeypatch.setenv("TASKS_TOKEN", KEY)
        credentials = {"bearerAuth": "env:TASKS_TOKEN"}
    with MockServer(collection) as api:
        toolset = Toolset([collection], base_url=api.url, credentials=credentials)
        result = backend.run(examples.path(f"{name}/program.py").read_text(), toolset, Limits(timeout=60))
        seen = list(api.requests)
    assert result.ok, result.error
    assert result.answer.strip()
    tools = [c.tool for c in result.calls]
    assert tools[: len(first_calls)] == first_calls
    assert all(c.ok and c.status in (200, 201) for c in result.calls)
    # Every call reached the API, and only those: the chain ran through the gateway.
    assert [(r.tool, r.status) for r in seen] == [(c.tool, c.status) for c in result.calls]
    if name == "transit":
        # The key rode on every request, added on the host; the program's result never holds it.
        assert all(r.query.get("api_key") == [KEY] for r in seen)
        assert KEY not in json.dumps(result.to_dict())


def test_tasks_program_follows_ids_from_one_response_into_the_next(backend: LocalBackend,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    collection = load_spec(examples.path("tasks/openapi.yaml"))
    monkeypatch.setenv("TASKS_TOKEN", KEY)
    with MockServer(collection) as api:
        result = backend.run(examples.path("tasks/program.py").read_text(),
                             Toolset([collection], base_url=api.url, credentials={"bearerAuth": "env:TASKS_TOKEN"}),
                             Limits(timeout=60))
    assert result.ok, result.error
    projects = result.calls[0].response["projects"]
    busiest = max(projects, key=lambda p: p["open_tasks"])
    assert result.calls[1].args["project_id"] == busiest["id"]
    assert {"user_id": busiest["lead"]["user_id"]} in [c.args for c in result.calls if c.tool == "get_user"]
    assert result.answer.startswith(busiest["name"])


def test_atc_mock_serves_the_yaml_example() -> None:
    proc = subprocess.Popen([str(ATC), "mock", str(examples.path("tasks/openapi.yaml")), "--port", "0", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        doc = json.loads(proc.stdout.readline())
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    assert doc["collection"] == "tasks" and doc["operations"] == 8
