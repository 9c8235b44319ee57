"""``atc tools`` end to end: real subprocesses of ``.venv/bin/atc`` against an ATC_HOME in tmp."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.apis.library import library_spec

ATC = str(Path(sys.executable).parent / "atc")


def atc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ATC, *args], capture_output=True, text=True, timeout=120, env=os.environ.copy())


@pytest.fixture()
def spec(tmp_path: Path) -> Path:
    p = tmp_path / "library.json"
    p.write_text(json.dumps(library_spec("http://127.0.0.1:9")))
    return p


def test_import_list_show_search_remove(spec: Path) -> None:
    r = atc("tools", "import", str(spec))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "imported library: 7 tools (openapi-3.0, server http://127.0.0.1:9)"

    r = atc("tools", "list")
    assert r.returncode == 0 and r.stdout.startswith("library") and "7 tools" in r.stdout
    listed = json.loads(atc("tools", "list", "--json").stdout)["collections"]
    assert [(c["name"], c["tools"], c["source_format"]) for c in listed] == [("library", 7, "openapi-3.0")]

    r = atc("tools", "show", "library")
    assert r.returncode == 0
    assert "search_authors(name: str) -> {results: [{id: int, name: str, born: int, country: str}], count: int}" \
        in r.stdout
    assert "list_book_reviews(book_id: int, limit: int = 10)" in r.stdout

    r = atc("tools", "show", "create_order")
    assert r.returncode == 0 and "POST /orders" in r.stdout and "book_id (int, required, in body)" in r.stdout
    tool = json.loads(atc("tools", "show", "create_order", "--json").stdout)
    for key in ("name", "collection", "category", "description", "parameters", "response_schema", "examples",
                "method", "path"):
        assert key in tool
    assert tool["collection"] == "library" and tool["parameters"]["required"] == ["book_id"]
    whole = json.loads(atc("tools", "show", "library", "--json").stdout)
    assert whole["name"] == "library" and len(whole["tools"]) == 7 and whole["tools"][0]["method"] == "GET"

    r = atc("tools", "search", "books written by an author", "-k", "2")
    assert r.returncode == 0 and r.stdout.splitlines()[0].split()[1] == "list_author_books"
    hits = json.loads(atc("tools", "search", "reviews", "-k", "3", "--json").stdout)["hits"]
    assert hits[0]["name"] == "list_book_reviews" and hits[0]["collection"] == "library"

    assert atc("tools", "remove", "library").stdout.strip() == "removed library"
    assert json.loads(atc("tools", "list", "--json").stdout) == {"collections": []}


def test_import_options(spec: Path) -> None:
    r = atc("tools", "import", str(spec), "--name", "books", "--base-url", "http://127.0.0.1:7777", "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["collection"] == "books" and doc["servers"] == ["http://127.0.0.1:7777"]
    assert doc["names"][0] == "search_authors"
    tool = json.loads(atc("tools", "show", "books.get_book", "--json").stdout)
    assert tool["servers"] == ["http://127.0.0.1:7777"]
    r = atc("tools", "import", str(spec), "--name", "../bad")
    assert r.returncode == 2 and "invalid collection name" in r.stderr


def test_unknown_names_and_bad_input_exit_2(tmp_path: Path) -> None:
    r = atc("tools", "show", "no_such_tool")
    assert r.returncode == 2 and "no tool named 'no_such_tool'" in r.stderr and "Traceback" not in r.stderr
    r = atc("tools", "remove", "nothing", "--json")
    assert r.returncode == 2 and json.loads(r.stdout)["error"]["type"] == "NotFound"
    r = atc("tools", "import", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "missing.yaml" in r.stderr and "no such file" in r.stderr
    r = atc("tools", "search", "x", "-k", "0")
    assert r.returncode == 2
    r = atc("tools", "search", "anything")
    assert r.returncode == 0 and "store is empty" in r.stdout
    r = atc("tools", "frobnicate")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_help_and_show_do_not_import_heavy_modules(spec: Path) -> None:
    assert atc("tools", "import", str(spec)).returncode == 0
    probe = ("import sys, io, contextlib; from atc.cli import main\n"
             "for argv in (['--help'], ['tools', 'show', 'get_book']):\n"
             "    with contextlib.redirect_stdout(io.StringIO()):\n"
             "        try: main(argv)\n"
             "        except SystemExit: pass\n"
             "print(sorted(m for m in ('httpx', 'openai', 'docker', 'yaml', 'jsonschema') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_import_toolbench_folder_and_mcp(tmp_path: Path) -> None:
    folder = tmp_path / "toolenv" / "Weather"
    folder.mkdir(parents=True)
    (folder / "forecast.json").write_text(json.dumps({"tool_name": "Forecast", "api_list": [
        {"name": "Daily", "url": "https://f.p.rapidapi.com/daily", "method": "GET", "description": "Daily forecast.",
         "required_parameters": [{"name": "city", "type": "STRING", "description": "", "default": "Oslo"}],
         "optional_parameters": []}]}))
    r = atc("tools", "import", str(tmp_path / "toolenv"), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["names"] == ["daily_for_forecast"]
    mcp = tmp_path / "tools_list.json"
    mcp.write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [
        {"name": "echo", "description": "Echo text back.", "inputSchema": {
            "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}]}}))
    r = atc("tools", "import", str(mcp))
    assert r.returncode == 0 and r.stdout.startswith("imported tools_list: 1 tools (mcp")
    tool = json.loads(atc("tools", "show", "echo", "--json").stdout)
    assert tool["method"] == "MCP" and tool["path"] == "echo" and tool["parameters"]["required"] == ["text"]
    r = atc("tools", "show", "toolenv")
    assert "daily_for_forecast(city: str)\n    Daily forecast." in r.stdout
