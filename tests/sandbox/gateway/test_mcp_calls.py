"""Programs call MCP tools through the gateway: the shop server (tests/support/mcp_servers/shop.py, the
official SDK) over stdio and streamable HTTP, run by ``atc.run`` in the local sandbox."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import atc
from protocols.model import McpServer
from sandbox.api import Limits
from sandbox.gateway.mcp.connections import close_servers, servers
from sandbox.gateway.mcp.transport import result_data
from tests.support.mcp_servers import ROOT, SHOP, alive, http_shop, read_pid, shop_config, wait_gone

CHAIN = """
found = search_items(query="t", in_stock=True)
item = get_item(item_id=found["items"][0]["id"])
supplier = supplier_info(code=item["supplier"])
print(item["name"], supplier["country"], len(found["items"]))
"""


@pytest.fixture(autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    close_servers()


def _run(program: str, tools: object = SHOP, **limits: float) -> atc.ExecutionResult:
    return atc.run(program, tools, Limits(**limits) if limits else None, sandbox="local")  # type: ignore[arg-type]


def test_a_program_chains_three_mcp_tools_over_stdio() -> None:
    r = _run(CHAIN)
    assert r.ok, r.error
    assert r.answer == "teapot NL 1\n"
    assert [(c.tool, c.method, c.path, c.status, c.line) for c in r.calls] == [
        ("search_items", "MCP", "search_items", None, 2), ("get_item", "MCP", "get_item", None, 3),
        ("supplier_info", "MCP", "supplier_info", None, 4)]
    assert r.calls[1].response["supplier"] == "acme"  # kept for attribution and reflection


@pytest.mark.slow
def test_a_program_chains_mcp_tools_over_streamable_http() -> None:
    with http_shop() as source:
        r = _run(CHAIN, source)
        again = _run('print(greet(name="web"))', source)
    assert r.ok and r.answer == "teapot NL 1\n", r.error
    assert again.ok and again.answer == "Hello, web!\n"


@pytest.mark.slow
def test_a_program_calls_an_sse_server_named_in_a_config_file(tmp_path: Path) -> None:
    with http_shop("sse") as source:
        config = tmp_path / "servers.json"
        config.write_text(json.dumps({"mcpServers": {"legacy": {"url": source.replace("mcp+sse", "http")}}}))
        (collection,) = atc.load_mcp(str(config))
        assert collection.name == "legacy" and collection.mcp_server is not None
        assert collection.mcp_server.transport == "sse"
        r = _run(CHAIN, [collection])
    assert r.ok and r.answer == "teapot NL 1\n", r.error


def test_concurrent_calls_from_many_threads_share_one_server(tmp_path: Path) -> None:
    config, pid_file = shop_config(tmp_path)
    server = atc.load_mcp(str(config))[0].mcp_server
    assert server is not None
    manager = servers()

    def call(i: int) -> tuple[str, int]:
        greeting = manager.call(server, "greet", {"name": f"n{i}"}, 10)["content"][0]["text"]
        return greeting, manager.call(server, "whoami", {}, 10)["structuredContent"]["pid"]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, range(40)))
    assert [g for g, _ in results] == [f"Hello, n{i}!" for i in range(40)]
    assert {pid for _, pid in results} == {read_pid(pid_file)}


def test_a_missing_key_in_an_mcp_result_is_blamed_on_that_tool() -> None:
    r = _run('item = get_item(item_id=1)\ncolour = item["colour"]\n')
    assert r.error is not None and r.error.type == "KeyError"
    assert r.error.tool == "get_item" and r.error.line == 2
    assert r.error.attribution is not None and "supplier" in json.dumps(r.error.attribution["response_shape"])


def test_missing_sdk_says_how_to_install_it() -> None:
    code = ("import sys; sys.modules['mcp'] = None\n"
            "from sandbox.gateway.mcp.sources import load_source\n"
            "from protocols.errors import ConfigError\n"
            "try:\n    load_source('mcp:true')\nexcept ConfigError as e:\n    print(e.message, '|', e.hint)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert "need the MCP SDK" in out.stdout and "pip install 'atc[mcp]'" in out.stdout, out.stderr


def test_result_shapes_text_json_text_several_items_and_images() -> None:
    r = _run("""
print(repr(greet(name="Ada")))
print(supplier_info(code="globex")["email"])
print(two_notes())
caption, image = logo()
print(caption, image["type"], image["mimeType"], image["data"])
""")
    assert r.ok, r.error
    assert r.answer.splitlines() == ["'Hello, Ada!'", "info@globex.test", "['first note', 'second note']",
                                     "the logo image image/png iVBORw0KGgo="]


def test_result_data_rules() -> None:
    assert result_data({"structuredContent": {"a": 1}, "content": [{"type": "text", "text": "x"}]}) == {"a": 1}
    assert result_data({"content": [{"type": "text", "text": "[1, 2]"}]}) == [1, 2]
    assert result_data({"content": [{"type": "text", "text": "42"}]}) == 42
    assert result_data({"content": [{"type": "text", "text": "-not json"}]}) == "-not json"
    assert result_data({"content": []}) is None
    assert result_data({"content": [{"type": "text", "text": '{"a": 1}'}, {"type": "text", "text": "b"}]}) == \
        [{"a": 1}, "b"]


def test_is_error_result_is_a_tool_error_naming_the_tool() -> None:
    r = _run('item = get_item(item_id=99)\nprint(item)\n')
    assert not r.ok and r.error is not None
    assert r.error.type == "ToolError" and r.error.tool == "get_item" and r.error.line == 1
    assert "get_item" in r.error.message and "no item with id 99" in r.error.message
    assert r.calls[0].failure == "tool" and r.calls[0].status is None


def test_protocol_error_is_a_tool_error_and_the_program_can_catch_it() -> None:
    r = _run("""
try:
    lookup_code(code="zz")
except ToolError as exc:
    print("caught:", exc)
print(lookup_code(code="ok"))
""")
    assert r.ok, r.error
    assert r.answer.splitlines() == ["caught: lookup_code: MCP error -32602: invalid code 'zz'", "fine"]
    assert [c.failure for c in r.calls] == ["protocol", None]


def test_arguments_are_validated_against_the_input_schema_before_sending() -> None:
    r = _run('get_item(item_id="seven")')
    assert r.error is not None and r.error.type == "ToolError" and r.error.tool == "get_item"
    assert "'seven' is not of type 'integer'" in r.error.message
    assert r.calls[0].failure == "arguments" and not r.calls[0].sent
    r = _run('search_items(q="tea")')
    assert r.error is not None and "unknown argument 'q'" in r.error.message


def test_a_slow_tool_times_out_per_call_and_is_attributed(tmp_path: Path) -> None:
    config, pid_file = shop_config(tmp_path)
    r = _run('x = 1\nslow(seconds=30)\n', str(config), call_timeout=0.5)
    assert r.error is not None and r.error.type == "ToolError" and r.error.tool == "slow" and r.error.line == 2
    assert r.calls[0].failure == "timeout" and "no answer from the MCP server" in r.error.message
    assert r.calls[0].duration_ms < 5000
    close_servers()  # a server still busy with the hung call is stopped all the same
    assert wait_gone(read_pid(pid_file))


@pytest.mark.slow
def test_the_program_deadline_cuts_a_slow_mcp_call() -> None:
    r = _run('greet(name="a")\nslow(seconds=60)\nprint("never")\n', timeout=2)
    assert r.error is not None and r.error.type == "Timeout" and r.error.tool == "slow"
    assert r.duration_ms < 20000  # cut at the deadline, not after the tool's minute


def test_size_cap_and_call_budget_apply() -> None:
    r = _run("get_item(item_id=1)", max_response_bytes=40)
    assert r.error is not None and r.calls[0].failure == "response" and "larger than 40 bytes" in r.error.message
    r = _run('greet(name="a")\ngreet(name="b")\n', max_calls=1)
    assert r.error is not None and r.error.type == "CallBudget"


@pytest.mark.slow
def test_a_server_that_dies_mid_call_gives_a_tool_error_and_is_started_again(tmp_path: Path) -> None:
    config, pid_file = shop_config(tmp_path)
    r = _run('greet(name="a")\ncrash()\n', str(config))
    assert r.error is not None and r.error.type == "ToolError" and r.error.tool == "crash" and r.error.line == 2
    assert r.calls[1].failure == "request"
    assert "went away" in r.error.message and "crashing on purpose" in r.error.message
    first = read_pid(pid_file)
    assert wait_gone(first)
    pid_file.unlink()
    again = _run('print(greet(name="b"))', str(config))  # the next run starts it again
    assert again.ok and again.answer == "Hello, b!\n"
    assert read_pid(pid_file) != first


def test_server_env_reaches_the_server_and_its_values_never_reach_the_program(tmp_path: Path) -> None:
    secret = "shop-secret-7f3a9c"
    config, _ = shop_config(tmp_path, env={"SHOP_API_KEY": secret})
    r = _run('me = whoami()\nimport os\nprint(me["key"], os.environ.get("SHOP_API_KEY"))\n', str(config))
    assert r.ok, r.error
    assert secret not in r.answer and r.answer == "[REDACTED] None\n"
    assert r.calls[0].redacted == 1 and secret not in repr(r.calls[0].response)


def test_servers_start_once_and_are_reused_across_runs(tmp_path: Path) -> None:
    config, pid_file = shop_config(tmp_path)
    collections = atc.load_mcp(str(config))
    pid = read_pid(pid_file)
    for name in ("a", "b", "c"):
        r = _run(f'print(greet(name="{name}"))', collections)
        assert r.ok
    assert read_pid(pid_file) == pid and alive(pid)
    close_servers()
    assert wait_gone(pid)


def test_a_tools_list_file_without_a_server_is_refused_before_the_run(tmp_path: Path) -> None:
    listing = tmp_path / "tools.json"
    listing.write_text('{"tools": [{"name": "ping", "inputSchema": {"type": "object"}}]}')
    with pytest.raises(atc.ConfigError, match="no server to call"):
        _run("ping()", [atc.load(listing)])


def test_descriptor_keeps_env_names_not_values() -> None:
    server = McpServer(name="s", command="srv", args=["--x"], env={"TOKEN": "v3ry-secret"})
    stored = server.to_dict()
    assert stored == {"name": "s", "transport": "stdio", "command": "srv", "args": ["--x"], "env": ["TOKEN"]}
    assert McpServer.from_dict(stored).env == {"TOKEN": None}


def test_a_python_caller_that_never_closes_leaves_no_server_at_exit() -> None:
    code = ("import atc\n"
            f"tools = atc.load({SHOP!r})\n"
            "print(atc.run('print(whoami()[\"pid\"])', [tools], sandbox='local').answer.strip())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert wait_gone(int(out.stdout.strip()))
