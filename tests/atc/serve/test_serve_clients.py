"""``atc serve`` as real clients use it (issue 30, item 5): the TypeScript SDK running
docs/serve.md's own example, with the timeout it gives and with one shorter than a program; every
client example of the docs giving its timeout; ``describe_tools`` given one name as a string;
arguments a model got wrong answered in one line; the host log numbering programs over the server;
and collection resources that do not cut a description at "e.g.".

The TypeScript SDK is the one scripts/install-test-servers.sh installs into .cache/npm (under the
MCP inspector); the test skips, saying why, without node or it, and fails so under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import atc
from atc.examples import path as example
from atc.mock import MockServer
from atc.serve.catalog import Catalog
from protocols.model import Collection, Tool
from sandbox.api import Toolset
from tests.support.serve import STATELESS, TOKEN, HttpServe, http_client, serve_env
from tests.test_docs import blocks

ROOT = Path(__file__).resolve().parents[3]
SERVE_MD = ROOT / "docs" / "serve.md"
NODE_MODULES = ROOT / ".cache" / "npm" / "node_modules"
SLOW = "import time\ntime.sleep(5)\nprint('late but right')"


@pytest.fixture(scope="module")
def bookshop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServe]:
    """``atc serve`` over the bundled bookshop, its API faked by ``atc mock`` on 127.0.0.1."""
    folder = tmp_path_factory.mktemp("bookshop")
    spec = example("bookshop/openapi.json")
    with MockServer(atc.load(spec)) as api:
        server = HttpServe.start(["serve", "--tools", str(spec), "--base-url", api.url, "--sandbox", "local"],
                                 serve_env(folder / "home"), folder / "stderr.log")
        try:
            yield server
        finally:
            assert server.stop() == 0


def _typescript() -> str:
    (code,) = [b.text for b in blocks(SERVE_MD) if b.lang == "typescript"]
    return code


@pytest.fixture(scope="module")
def node_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where an ES module can import ``@modelcontextprotocol/sdk``."""
    missing = "node is not installed" if shutil.which("node") is None else \
        None if (NODE_MODULES / "@modelcontextprotocol" / "sdk" / "package.json").exists() else \
        "the MCP TypeScript SDK is not installed (scripts/install-test-servers.sh installs it)"
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"under CI the TypeScript SDK must be installed: {missing}")
        pytest.skip(missing)
    folder = tmp_path_factory.mktemp("node-client")
    (folder / "node_modules").symlink_to(NODE_MODULES)
    return folder


def _node(folder: Path, code: str, name: str) -> subprocess.CompletedProcess[str]:
    script = folder / f"{name}.mjs"
    script.write_text(code)
    env = {**os.environ, "ATC_SERVE_TOKEN": TOKEN}
    return subprocess.run(["node", str(script)], cwd=folder, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_the_typescript_example_runs_and_its_timeout_is_what_keeps_a_long_program(
        bookshop: HttpServe, node_client: Path) -> None:
    code = _typescript().replace("http://127.0.0.1:8765/mcp", bookshop.url)
    assert "{ timeout: 90_000 }" in code
    shown = _node(node_client, code, "example")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert re.fullmatch(r"\d+\n", shown.stdout), shown.stdout
    # a timeout shorter than the program: the client gives up, and atc stops the program
    slow = code.replace('"print(len(list_shops()))"', json.dumps(SLOW))
    hasty = _node(node_client, slow.replace("timeout: 90_000", "timeout: 1_000"), "hasty")
    assert hasty.returncode != 0 and "timed out" in hasty.stderr.lower(), hasty.stderr[-2000:]
    deadline = time.monotonic() + 10
    while not re.search(r"run_program #\d+: Cancelled", bookshop.stderr()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert re.search(r"run_program #\d+: Cancelled, 0 calls, \d+ ms", bookshop.stderr()), bookshop.stderr()


def test_every_client_example_gives_its_timeout() -> None:
    """The default timeouts of clients are shorter than a program may run (the OpenAI Agents SDK:
    5 s; httpx: 5 s without a byte): every example says how to set them."""
    settings = {"MCPServerStreamableHttp(": "client_session_timeout_seconds=", "httpx2.AsyncClient(": "timeout=",
                "MultiServerMCPClient(": '"timeout"', "stdio_client(": "read_timeout_seconds=",
                "client.callTool(": "timeout:"}
    seen = set()
    for block in blocks(SERVE_MD):
        for client, setting in settings.items():
            if client in block.text:
                seen.add(client)
                assert setting in block.text, f"{block.where}: {client} without {setting}"
    assert seen == set(settings)
    text = SERVE_MD.read_text()
    assert "### Timeouts: longer than a program" in text and "after 5 s" in text


@pytest.mark.slow
def test_describe_tools_takes_one_name_and_bad_arguments_get_one_line(bookshop: HttpServe) -> None:
    async def go() -> dict[str, Any]:
        async with http_client(bookshop.url, mode=STATELESS) as client:
            return {
                "one": await client.call_tool("describe_tools", {"names": "get_book"}),
                "some": await client.call_tool("describe_tools", {"names": "get_book, list_shops"}),
                "int": await client.call_tool("describe_tools", {"names": 5}),
                "k": await client.call_tool("search_tools", {"query": "books", "k": "many"}),
                "none": await client.call_tool("run_program", {}),
                "ran": await client.call_tool("run_program", {"program": "print(len(list_shops()))"}),
            }

    got = anyio.run(go)
    assert not got["one"].is_error and [t["name"] for t in got["one"].structured_content["tools"]] == ["get_book"]
    assert [t["name"] for t in got["some"].structured_content["tools"]] == ["get_book", "list_shops"]
    for case, expected in (("int", "describe_tools: argument 'names': Input should be a valid list (got int 5)"),
                           ("k", "search_tools: argument 'k': Input should be a valid integer"),
                           ("none", "run_program: argument 'program' is required")):
        result = got[case]
        shown = "".join(c.text for c in result.content)
        assert result.is_error and shown.startswith(expected) and "\n" not in shown.strip(), shown
        assert "pydantic" not in shown and "http" not in shown
    # the log: programs numbered over the server, and "1 call"
    log = bookshop.stderr()
    assert re.search(r"run_program #\d+: ok, 1 call, \d+ ms \(no session, client ATC_SERVE_TOKEN\)", log), log


def test_a_collection_resource_keeps_a_description_past_e_g() -> None:
    tool = Tool(name="search_books", collection="shop", description="Search the catalogue by a word, e.g. garden or "
                "sea, in titles and subjects. Results are paged.", method="GET", path="/books",
                parameters={"type": "object", "properties": {"q": {"type": "string"}}})
    text = Catalog(Toolset([Collection(name="shop", tools=[tool])]), "bm25").collection_text("shop")
    assert "    Search the catalogue by a word, e.g. garden or sea, in titles and subjects.\n" in text
