"""MCP collections get names of their own, and every source is checked before a program runs
(issue 21, items 2 and 9).

- Two ``mcp:"node ..."`` sources in one run (the reference memory and filesystem servers, real
  ones from npm) are named after their packages, and each tool goes to its own server.
- Two sources that would still get one name are refused before either starts, naming both.
- A stored server whose environment variable is missing stops the run before anything starts
  (exit 2), not at its first call after other APIs have been called.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from atc.cli import main
from protocols.errors import ConfigError
from protocols.model import Collection, McpServer, Tool
from sandbox.api import Toolset
from sandbox.gateway.mcp.connections import close_servers
from sandbox.gateway.mcp.sources import _command_name
from tests.support.apis.library import LibraryAPI
from tests.support.mcp_servers import ROOT, SHOP, shop_config

NPM = ROOT / ".cache" / "npm" / "node_modules" / "@modelcontextprotocol"
MEMORY = NPM / "server-memory" / "dist" / "index.js"
FILESYSTEM = NPM / "server-filesystem" / "dist" / "index.js"


@pytest.fixture(autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    close_servers()


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("argv", "name"), [
    (["node", "node_modules/@modelcontextprotocol/server-memory/dist/index.js"], "server-memory"),
    (["npx", "-y", "@modelcontextprotocol/server-filesystem@2026.1.1", "/srv"], "server-filesystem"),
    (["uvx", "--from", "git+https://example.test/x", "mcp-server-git"], "mcp-server-git"),
    (["uv", "run", "--with", "mcp", "weather_server.py"], "weather_server"),
    (["python3", "weather/server.py"], "weather"),
    (["python", "-m", "tests.support.mcp_servers.shop"], "shop"),
    (["env", "MEMORY_FILE_PATH=/tmp/m.jsonl", "node", "tickets/index.js"], "tickets"),
    (["docker", "run", "-i", "--rm", "-e", "TOKEN", "mcp/github:1.2"], "github"),
    (["/opt/bin/mcp-server-time", "--local-timezone", "UTC"], "mcp-server-time"),
])
def test_a_server_is_named_after_what_runs_not_the_interpreter(tmp_path: Path, argv: list[str], name: str) -> None:
    if argv[1].startswith("node_modules"):  # a real package layout: the name comes from package.json
        package = tmp_path / "node_modules" / "@modelcontextprotocol" / "server-memory"
        (package / "dist").mkdir(parents=True)
        (package / "package.json").write_text(json.dumps({"name": "@modelcontextprotocol/server-memory"}))
    assert _command_name(argv, str(tmp_path)) == name


def _need_npm_servers() -> None:
    if MEMORY.exists() and FILESYSTEM.exists():
        return
    message = "the reference memory/filesystem MCP servers are not installed (scripts/install-test-servers.sh)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.mark.slow
def test_two_node_servers_in_one_run_keep_their_own_tools(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _need_npm_servers()
    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.txt").write_text("hello")
    monkeypatch.chdir(tmp_path)
    program = tmp_path / "p.py"
    # read_graph is the memory server's (it only reads: an absent memory file is an empty graph)
    program.write_text("print(list_allowed_directories())\nprint(read_graph())\n")
    memory = "mcp:" + shlex.join(["node", str(MEMORY)])
    filesystem = "mcp:" + shlex.join(["node", str(FILESYSTEM), str(files)])
    code, out, err = _cli(["run", str(program), "--tools", filesystem, "--tools", memory, "--sandbox", "local",
                           "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["ok"], doc["error"]
    listing, graph = doc["answer"].splitlines()
    assert str(files.resolve()) in listing
    assert "entities" in graph and "relations" in graph  # answered by the memory server, not the other one
    assert [c["tool"] for c in doc["calls"]] == ["list_allowed_directories", "read_graph"]


def test_two_sources_with_one_name_are_refused_before_either_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, pid_file = shop_config(tmp_path)  # its server would be named "shop" too
    program = tmp_path / "p.py"
    program.write_text("print(1)\n")
    code, out, err = _cli(["run", str(program), "--tools", SHOP, "--tools", str(config), "--sandbox", "local"],
                          capsys)
    assert code == 2 and "would both be named 'shop'" in err
    assert "tests.support.mcp_servers.shop" in err and str(config) in err  # both sources are named
    assert not pid_file.exists()  # neither server was started
    code, out, err = _cli(["run", str(program), "--tools", SHOP, "--tools", SHOP, "--sandbox", "local"], capsys)
    assert code == 2 and "given twice" in err


def test_no_run_routes_by_a_name_two_collections_share() -> None:
    def server(name: str, script: str) -> Collection:
        return Collection(name=name, tools=[Tool(name=f"t_{script}", collection=name, method="MCP", path="t")],
                          mcp_server=McpServer(name=name, command="node", args=[f"{script}.js"]))

    with pytest.raises(ConfigError, match="two collections of this run are named 'node'") as info:
        Toolset([server("node", "memory"), server("node", "filesystem")])
    assert "node memory.js" in info.value.message and "node filesystem.js" in info.value.message


def test_a_stored_server_missing_its_variable_stops_the_run_before_any_call(
        tmp_path: Path, api: LibraryAPI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    config, pid_file = shop_config(tmp_path, env={"SHOP_API_KEY": "key-value-123456"})
    code, out, err = _cli(["tools", "import", str(config)], capsys)
    assert code == 0, err
    close_servers()
    pid_file.unlink()
    spec = api.write_spec(tmp_path / "lib.json")
    program = tmp_path / "p.py"
    # the HTTP API first, the stored MCP server second: neither may be called
    program.write_text("print(get_book(book_id=10)['title'])\nprint(whoami())\n")
    monkeypatch.delenv("SHOP_API_KEY", raising=False)
    monkeypatch.setenv("SHOP_PID_FILE", str(pid_file))
    code, out, err = _cli(["run", str(program), "--tools", str(spec), "--tools", "shop", "--sandbox", "local",
                           "--json"], capsys)
    assert code == 2, err
    assert "MCP server 'shop'" in err and "SHOP_API_KEY" in err and "Traceback" not in err
    assert json.loads(out)["ok"] is False
    assert api.requests == [] and not pid_file.exists()  # nothing was called, nothing started
    monkeypatch.setenv("SHOP_API_KEY", "key-value-123456")
    code, out, err = _cli(["run", str(program), "--tools", str(spec), "--tools", "shop", "--sandbox", "local",
                           "--json"], capsys)
    assert code == 0, err
    assert len(api.requests) == 1


def test_a_stored_server_whose_command_is_gone_is_refused_before_the_run(tmp_path: Path) -> None:
    from sandbox.gateway.mcp.sources import check_ready

    gone = McpServer(name="x", command=str(tmp_path / "no-such-server"), cwd=str(tmp_path))
    with pytest.raises(ConfigError, match="is not found"):
        check_ready(gone, os.environ)
    with pytest.raises(ConfigError, match="working directory"):
        check_ready(McpServer(name="x", command=sys.executable, cwd=str(tmp_path / "gone")), os.environ)
    check_ready(McpServer(name="x", command=Path(sys.executable).name, cwd=str(tmp_path)), os.environ)
