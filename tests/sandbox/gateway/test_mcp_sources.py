"""The ``--tools`` forms that name MCP servers, without starting any (parsing and its errors)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from protocols.errors import ConfigError, UsageError
from protocols.model import Collection, McpServer
from sandbox.gateway.mcp.sources import is_mcp_source, resolve_env, servers_from_config, servers_from_source


def test_command_lines_split_like_a_shell_and_run_here() -> None:
    (server,) = servers_from_source('mcp:python -m pkg.my_server --root "/srv/a b"')
    assert (server.name, server.transport, server.command, server.args) == (
        "my_server", "stdio", "python", ["-m", "pkg.my_server", "--root", "/srv/a b"])
    assert server.cwd == os.getcwd()
    assert servers_from_source("mcp:npx -y @modelcontextprotocol/server-everything stdio")[0].name == \
        "server-everything"
    assert servers_from_source("mcp:/opt/bin/mcp-server-time")[0].name == "mcp-server-time"


def test_urls() -> None:
    (server,) = servers_from_source("mcp+http://127.0.0.1:8931/mcp")
    assert (server.transport, server.url, server.name) == ("http", "http://127.0.0.1:8931/mcp", "127.0.0.1")
    assert servers_from_source("mcp+https://tools.example.test/mcp")[0].url == "https://tools.example.test/mcp"
    assert servers_from_source("mcp+sse://127.0.0.1:9/sse")[0].transport == "sse"


def test_config_file_shape(tmp_path: Path) -> None:
    doc = {"mcpServers": {
        "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"TOKEN": "t0k3n"}, "cwd": "repo"},
        "web": {"url": "http://127.0.0.1:1/mcp"},
        "old": {"url": "http://127.0.0.1:2/sse"},
        "typed": {"url": "http://127.0.0.1:3/events", "type": "sse"}}}
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(doc))
    assert is_mcp_source(str(path))
    git, web, old, typed = servers_from_source(str(path))
    assert git.env == {"TOKEN": "t0k3n"} and git.cwd == str(tmp_path / "repo")
    assert (web.transport, old.transport, typed.transport) == ("http", "sse", "sse")


@pytest.mark.parametrize(("doc", "words"), [
    ({"mcpServers": {}}, "expected"),
    ({"mcpServers": {"a": []}}, "must be an object"),
    ({"mcpServers": {"a": {"command": "x", "args": "not-a-list"}}}, "args must be a list"),
    ({"mcpServers": {"a": {"command": "x", "env": {"K": ["v"]}}}}, "env must map"),
    ({"mcpServers": {"a": {"url": "ftp://x"}}}, "needs 'command'"),
])
def test_config_errors_name_the_entry(doc: object, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        servers_from_config(doc, source="s.json")


def test_not_mcp_sources(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"openapi": "3.0.0", "info": {"description": 'see "mcpServers" in the docs'}}))
    assert not is_mcp_source(str(spec)) and not is_mcp_source("shop") and not is_mcp_source("http://x/spec.json")
    with pytest.raises(UsageError, match="needs a command line"):
        servers_from_source("mcp:   ")
    with pytest.raises(UsageError, match="not an MCP server URL"):
        servers_from_source("mcp+http://")


def test_stored_servers_read_env_values_from_the_host() -> None:
    stored = McpServer.from_dict(McpServer(name="s", command="x", env={"K": "secret"}).to_dict())
    assert resolve_env(stored, {"K": "from-host"}).env == {"K": "from-host"}
    with pytest.raises(ConfigError, match="environment variable K"):
        resolve_env(stored, {})


def test_collections_round_trip_their_server_and_annotations() -> None:
    from protocols.loaders import load_data

    c = load_data({"tools": [{"name": "read-file", "inputSchema": {"type": "object"},
                              "annotations": {"readOnlyHint": True, "title": None}}]}, name="fs")
    c.mcp_server = McpServer(name="fs", command="srv", env={"K": "v"})
    again = Collection.from_dict(json.loads(json.dumps(c.to_dict())))
    assert again.kind == "mcp" and again.mcp_server is not None and again.mcp_server.env == {"K": None}
    assert again.tools[0].annotations == {"readOnlyHint": True} and again.tools[0].path == "read-file"
    plain = Collection(name="http")
    assert plain.kind == "http" and "mcp_server" not in plain.to_dict()
