"""``sandbox.execute``: what ``run``/``arun`` accept, backend choice and caching, input errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import sandbox
from atc.errors import ConfigError, UsageError
from protocols import load_spec
from protocols.model import Collection
from sandbox import execute
from sandbox.api import Limits, Toolset
from sandbox.local.backend import LocalBackend
from tests.support.apis.library import SECRET, LibraryAPI

LIMITS = Limits(timeout=10)


@pytest.fixture()
def library(api: LibraryAPI, tmp_path: Path) -> Collection:
    return load_spec(api.write_spec(tmp_path / "library.json"))


def test_package_exports() -> None:
    for name in ("run", "arun", "get_backend", "Limits", "Toolset", "ExecutionResult", "ToolCall", "ErrorInfo",
                 "LocalBackend", "Gateway"):
        assert getattr(sandbox, name) is not None


@pytest.mark.parametrize("form", ["collection", "list", "toolset"])
def test_run_accepts_collections_and_toolsets(library: Collection, form: str) -> None:
    tools = {"collection": library, "list": [library], "toolset": Toolset([library])}[form]
    r = execute.run("print(get_stats()['books'])", tools, LIMITS, sandbox="local")
    assert r.ok and r.answer == "5\n" and r.sandbox == "local"


def test_base_url_and_credentials(library: Collection, api: LibraryAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIB_KEY", SECRET)
    library.servers = ["http://127.0.0.1:9"]
    r = execute.run("print(create_order(book_id=30, quantity=3)['total'])", library, LIMITS, sandbox="local",
                    base_url=api.url, credentials={"api_key": "env:LIB_KEY"})
    assert r.ok and r.answer == "30.0\n"
    assert api.requests[-1].headers["X-API-Key"] == SECRET


def test_credential_problems_are_config_errors(library: Collection, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE_VAR", raising=False)
    with pytest.raises(ConfigError, match="environment variable NOPE_VAR is not set"):
        execute.run("print(1)", library, LIMITS, sandbox="local", credentials={"api_key": "env:NOPE_VAR"})
    monkeypatch.setenv("SOME_VAR", "x")
    with pytest.raises(ConfigError, match="no security scheme 'bogus'"):
        execute.run("print(1)", library, LIMITS, sandbox="local", credentials={"bogus": "env:SOME_VAR"})


def test_bad_inputs(library: Collection) -> None:
    with pytest.raises(UsageError, match="unknown sandbox 'vm'"):
        execute.run("print(1)", library, sandbox="vm")
    with pytest.raises(UsageError):
        execute.run(b"print(1)", library, sandbox="local")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        execute.run("print(1)", ["not a collection"], sandbox="local")  # type: ignore[list-item]


def test_backends_are_cached_per_process() -> None:
    first = execute.get_backend("local")
    assert isinstance(first, LocalBackend) and execute.get_backend("local") is first


def test_auto_picks_local_without_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(execute, "_docker_available", lambda: False)
    assert execute.resolve_backend_name(None) == "local"
    assert execute.resolve_backend_name("auto") == "local"
    monkeypatch.setattr(execute, "_docker_available", lambda: True)
    assert execute.resolve_backend_name(None) == "docker"
    assert execute.resolve_backend_name("local") == "local"


def test_backend_instance_is_used_as_given(library: Collection) -> None:
    with LocalBackend(pool_size=0) as mine:
        r = execute.run("print(2)", library, LIMITS, sandbox=mine)
    assert r.ok and r.answer == "2\n"


def test_arun_runs_programs_concurrently(library: Collection) -> None:
    async def main() -> list[str]:
        results = await asyncio.gather(*(execute.arun(f"print(get_book(book_id={i})['year'])", library, LIMITS,
                                                      sandbox="local") for i in (10, 20, 30)))
        return [r.answer for r in results]

    assert asyncio.run(main()) == ["1968\n", "1961\n", "1979\n"]
