"""``atc solve`` over an MCP server and an HTTP API at once: the scripted model (through atc's real
model client, over HTTP) writes programs that chain two MCP tools of the shop server into one HTTP
tool of the library API; the first program's mistake is blamed on the MCP tool and fed back. Also
the same chain in the Docker sandbox (the MCP server stays on the host; the container has no
network and never sees it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import atc
from sandbox.gateway.mcp.connections import close_servers
from tests.support.apis.library import LibraryAPI
from tests.support.fakes.openai_server import ScriptedOpenAI
from tests.support.mcp_servers import ROOT, SHOP

ATC = Path(sys.executable).with_name("atc")

WRONG = """```python
found = search_items(query="mug")
item = get_item(item_id=found["items"][0])
print(item)
```"""
RIGHT = """```python
found = search_items(query="mug")
item = get_item(item_id=found["items"][0]["id"])
books = list_author_books(author_id=item["stock"] // 20)
print(item["name"], [b["title"] for b in books["books"]])
```"""


@pytest.fixture(autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    close_servers()


def test_cli_solve_chains_mcp_and_http_tools_and_reflects_on_an_mcp_failure(api: LibraryAPI, tmp_path: Path) -> None:
    spec = api.write_spec(tmp_path / "library.json")
    with ScriptedOpenAI([WRONG, RIGHT]) as model:
        proc = subprocess.run(
            [str(ATC), "solve", "Which books are by the author whose id is the mug's stock divided by 20?",
             "--tools", SHOP, "--tools", str(spec), "--sandbox", "local", "--json"],
            capture_output=True, text=True, timeout=180, cwd=ROOT,
            env={**os.environ, "OPENAI_BASE_URL": model.base_url, "ATC_MODEL": "scripted-model"})
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        second_prompt = model.request_text(1)
        first_prompt = model.request_text(0)
    assert doc["ok"] is True and doc["answer"] == "mug ['Solaris', 'The Cyberiad']\n"
    assert [(c["tool"], c["method"], c["path"]) for c in doc["calls"]] == [
        ("search_items", "MCP", "search_items"), ("get_item", "MCP", "get_item"),
        ("list_author_books", "GET", "/authors/{author_id}/books")]
    assert [a["ok"] for a in doc["attempts"]] == [False, True]
    first_error = doc["attempts"][0]["error"]
    assert first_error["type"] == "ToolError" and first_error["tool"] == "get_item" and first_error["line"] == 2
    assert "get_item" in second_prompt and "is not of type 'integer'" in second_prompt
    assert "search_items(" in first_prompt and "list_author_books(" in first_prompt  # both sources shown
    assert {"search_items", "get_item", "list_author_books"} <= set(doc["tools"])
    assert "Traceback" not in proc.stderr


def test_python_solve_accepts_an_mcp_source(api: LibraryAPI, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    spec = api.write_spec(tmp_path / "library.json")
    with ScriptedOpenAI([RIGHT]) as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
        monkeypatch.setenv("ATC_MODEL", "scripted-model")
        solution = atc.solve("Books by the author whose id is the mug's stock / 20?", [SHOP, str(spec)],
                             sandbox="local")
    assert solution.ok, solution.error
    assert solution.answer == "mug ['Solaris', 'The Cyberiad']\n"
    assert [c["method"] for c in solution.to_dict()["calls"]] == ["MCP", "MCP", "GET"]


@pytest.mark.docker
def test_mcp_chain_in_the_docker_sandbox(api: LibraryAPI, tmp_path: Path) -> None:
    from sandbox.execute import resolve_backend_name

    if resolve_backend_name(None) != "docker":
        pytest.skip("no Docker engine or no sandbox image")
    spec = api.write_spec(tmp_path / "library.json")
    program = RIGHT.split("\n", 1)[1].rsplit("```", 1)[0]
    r = atc.run(program, [SHOP, str(spec)], sandbox="docker")
    assert r.sandbox == "docker" and r.ok, (r.error, r.stderr)
    assert r.answer == "mug ['Solaris', 'The Cyberiad']\n"
    assert [c.method for c in r.calls] == ["MCP", "MCP", "GET"]
