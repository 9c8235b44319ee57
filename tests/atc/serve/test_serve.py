"""``atc serve`` with the official MCP SDK's client, over streamable HTTP and stdio.

One HTTP server (a real ``atc serve`` subprocess, local sandbox) serves the library API, the
catalog's account, a cookie-keeping API and the shop MCP server for the whole module; each test
opens its own client sessions. What a host sees is checked as a host sees it: the tool list and
schemas, search and describe answers, a program that chains an MCP tool into an HTTP tool, the
attributed failure with the blamed tool's real response, proxied tools, resources and the prompt,
secrets, two clients at once, cancellation, and the bearer token.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.support.apis.catalog import SECRET as CAT_SECRET
from tests.support.apis.library import SECRET as LIB_SECRET
from tests.support.serve import (
    SPIN,
    TOKEN,
    Apis,
    HttpServe,
    http_client,
    sandbox_pids,
    serve_args,
    serve_env,
    stdio_client,
    wait_gone,
    wait_spinning,
)
from tests.support.serve import apis as apis

pytestmark = pytest.mark.slow  # one server for the module (~2 s to start), programs in a real sandbox

CHAIN = """found = search_items(query="mug")
item = get_item(item_id=found["items"][0]["id"])
books = list_author_books(author_id=item["stock"] // 20)
print(item["name"], [b["title"] for b in books["books"]])
"""
CHAIN_ANSWER = "mug ['Solaris', 'The Cyberiad']"


@pytest.fixture(scope="module")
def server(apis: Apis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServe]:
    folder = tmp_path_factory.mktemp("serve")
    running = HttpServe.start(serve_args(apis, "--proxy-tools", "--sandbox", "local", "--timeout", "60",
                                         "--session-max-calls", "30"),
                              serve_env(folder / "home"), folder / "stderr.log")
    try:
        yield running
    finally:
        code = running.stop()
        assert code == 0, running.stderr()  # SIGTERM is a clean stop


def call(url: str, name: str, args: dict[str, Any], mode: str = "legacy") -> Any:
    async def go() -> Any:
        async with http_client(url, mode=mode) as client:
            return await client.call_tool(name, args)

    return anyio.run(go)


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


# -- what a host sees ------------------------------------------------------------------------------


def test_the_tools_resources_and_prompt_a_host_lists(server: HttpServe) -> None:
    async def go() -> tuple[Any, Any, Any, Any, Any]:
        async with http_client(server.url) as client:
            tools = await client.list_tools()
            resources = await client.list_resources()
            templates = await client.list_resource_templates()
            listed = await client.read_resource("atc://collections")
            prompt = await client.get_prompt("write_program", {"task": "the cheapest book by Lem"})
            return tools, resources, templates, listed, prompt

    tools, resources, templates, listed, prompt = anyio.run(go)
    by_name = {t.name: t for t in tools.tools}
    assert {"search_tools", "describe_tools", "run_program"} <= set(by_name)
    assert set(by_name["search_tools"].input_schema["properties"]) == {"query", "k"}
    assert by_name["describe_tools"].input_schema["properties"]["names"]["type"] == "array"
    run = by_name["run_program"]
    assert set(run.input_schema["properties"]) == {"program"} and run.input_schema["required"] == ["program"]
    assert {"ok", "answer", "error", "calls", "sandbox", "duration_ms"} <= set(run.output_schema["properties"])
    # few tools: run_program's description lists their signatures, so a host needs no search at all
    assert "list_author_books(author_id: int) ->" in run.description and "keyword arguments" in run.description
    # --proxy-tools: every served tool is there too, with its own schema
    assert by_name["get_book"].input_schema["required"] == ["book_id"] and "search_items" in by_name
    assert {str(r.uri) for r in resources.resources} >= {"atc://collections", "atc://guide"}
    assert [t.uri_template for t in templates.resource_templates] == ["atc://collections/{name}"]
    assert "library: 7 tools" in listed.contents[0].text and "shop:" in listed.contents[0].text
    guide = prompt.messages[0].content.text
    assert "run_program" in guide and "the cheapest book by Lem" in guide


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_search_describe_and_a_program_chaining_an_mcp_tool_into_an_http_tool(
        transport: str, server: HttpServe, apis: Apis, tmp_path: Path) -> None:
    async def session(client: Any) -> tuple[Any, Any, Any]:
        found = await client.call_tool("search_tools", {"query": "the books an author wrote", "k": 3})
        described = await client.call_tool("describe_tools", {"names": ["list_author_books", "get_item"]})
        ran = await client.call_tool("run_program", {"program": CHAIN})
        return found, described, ran

    async def go() -> tuple[Any, Any, Any]:
        if transport == "http":
            async with http_client(server.url) as client:
                return await session(client)
        async with stdio_client(serve_args(apis, "--sandbox", "local"), serve_env(tmp_path / "home")) as client:
            return await session(client)

    found, described, ran = anyio.run(go)
    assert [t["name"] for t in found.structured_content["tools"]][0] == "list_author_books"
    assert "list_author_books(author_id: int) -> {author_id: int, books: [" in text(found)
    assert "Parameters:" in text(described) and "author_id (int, required, in path)" in text(described)
    assert {t["name"] for t in described.structured_content["tools"]} == {"list_author_books", "get_item"}
    assert not ran.is_error, text(ran)
    result = ran.structured_content
    assert result["ok"] and result["answer"].strip() == CHAIN_ANSWER and result["error"] is None
    assert [(c["tool"], c["method"]) for c in result["calls"]] == [
        ("search_items", "MCP"), ("get_item", "MCP"), ("list_author_books", "GET")]
    assert text(ran).startswith(CHAIN_ANSWER + "\n[ok: 3 tool calls in ")


def test_a_failing_program_names_the_blamed_tool_and_carries_its_real_response(server: HttpServe) -> None:
    program = 'found = search_items(query="mug")\nitem = get_item(item_id=found["items"][0]["id"])\nprint(item["title"])\n'
    result = call(server.url, "run_program", {"program": program})
    assert result.is_error
    error = result.structured_content["error"]
    assert (error["type"], error["line"], error["tool"]) == ("KeyError", 3, "get_item")
    assert error["protocol"].startswith("get_item(item_id: int)")
    assert '"name": "mug"' in error["response"]["excerpt"] and "stock" in error["response"]["shape"]
    shown = text(result)
    assert "attributed to the tool `get_item`" in shown and '"name": "mug"' in shown
    assert "Line 3: print(item[\"title\"])" in shown and "call run_program again" in shown

    # an HTTP tool that answers 404: blamed, with the API's own error text and body
    missing = call(server.url, "run_program", {"program": "print(get_book(book_id=99)['title'])"})
    error = missing.structured_content["error"]
    assert (error["type"], error["tool"]) == ("ToolError", "get_book") and "HTTP 404" in error["message"]
    assert "book not found" in text(missing)

    # a mistake visible before running: reported at once, nothing ran
    static = call(server.url, "run_program", {"program": "print(get_book(id=1))"})
    error = static.structured_content["error"]
    assert static.structured_content["sandbox"] == "none" and error["static"] and error["tool"] == "get_book"
    assert "book_id" in error["message"] and static.structured_content["calls"] == []


def test_a_program_in_a_fenced_block_and_an_empty_one(server: HttpServe) -> None:
    fenced = call(server.url, "run_program", {"program": "Here it is:\n```python\nprint(get_stats()['books'])\n```"})
    assert fenced.structured_content["answer"] == "5\n"
    empty = call(server.url, "run_program", {"program": "   "})
    assert empty.is_error and empty.structured_content["error"]["type"] == "NoProgram"


def test_proxied_tools_go_through_the_gateway(server: HttpServe) -> None:
    book = call(server.url, "get_book", {"book_id": 20})
    assert not book.is_error and json.loads(text(book))["title"] == "Solaris"
    refused = call(server.url, "get_book", {"book_id": "twenty"})
    assert refused.is_error and "book_id" in text(refused)  # atc's validation, before any request
    mcp = call(server.url, "get_item", {"item_id": 2})
    assert json.loads(text(mcp))["name"] == "mug"


def test_secrets_never_reach_a_result_or_the_log(server: HttpServe, apis: Apis) -> None:
    apis.library.reset()
    shown = call(server.url, "run_program", {"program": "print(get_account())\nprint(create_order(book_id=20))"})
    assert shown.structured_content["ok"], text(shown)
    assert "[REDACTED]" in shown.structured_content["answer"] and "'order_id'" in shown.structured_content["answer"]
    assert any(r.headers.get("X-API-Key") == LIB_SECRET for r in apis.library.requests)  # the key was sent...
    failing = call(server.url, "run_program", {"program": "acct = get_account()\nprint(acct['owner'])"})
    proxied = call(server.url, "get_account", {})
    modern = call(server.url, "run_program", {"program": "print(get_account())"}, mode="auto")
    everything = json.dumps([r.model_dump(mode="json") for r in (shown, failing, proxied, modern)])
    assert failing.structured_content["error"]["tool"] == "get_account" and "[REDACTED]" in text(failing)
    for secret in (LIB_SECRET, CAT_SECRET, TOKEN):  # ...and no client, no log line ever sees it
        assert secret not in everything
        assert secret not in server.stderr()
    assert "run_program" in server.stderr()  # the log has a line per program


# -- sessions --------------------------------------------------------------------------------------


def test_two_concurrent_clients_stay_isolated(server: HttpServe) -> None:
    """Answers, cookies and budgets of one session never reach the other."""
    slow = "import time\nfor i in range(3):\n    get_stats()\n    time.sleep(0.3)\nprint('{who}', current_user()['user'])"
    results: dict[str, Any] = {}

    async def client(who: str) -> None:
        async with http_client(server.url) as c:
            if who == "ada":
                await c.call_tool("sign_in", {"user": "ada"})  # a proxied call: the session's cookie jar
                results["ada-whoami"] = json.loads(text(await c.call_tool("current_user", {})))["user"]
                results["ada-login-run"] = (await c.call_tool("run_program", {
                    "program": "sign_in(user='ada-run')\nprint(current_user()['user'])"})).structured_content["answer"]
            results[f"{who}-run"] = (await c.call_tool("run_program", {
                "program": slow.format(who=who)})).structured_content["answer"]
            results[f"{who}-proxied"] = json.loads(text(await c.call_tool("current_user", {})))["user"]
            if who == "bo":  # bo spends the session's 30 calls: the rest go over budget
                results["bo-over"] = (await c.call_tool("run_program", {
                    "program": "for i in range(40):\n    get_stats()\nprint('never')"})).structured_content
                results["bo-refused"] = (await c.call_tool("run_program", {
                    "program": "print(get_stats())"})).structured_content
                results["bo-proxy-refused"] = (await c.call_tool("get_stats", {})).is_error

    async def both() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(client, "ada")
            group.start_soon(client, "bo")

    anyio.run(both)
    assert results["ada-whoami"] == "ada"  # the cookie of ada's login came back in ada's session...
    assert results["ada-login-run"] == "ada-run\n"  # a program has a jar of its own
    assert results["ada-run"] == "ada None\n" and results["bo-run"] == "bo None\n"  # ...nowhere else
    assert results["ada-proxied"] == "ada" and results["bo-proxied"] is None
    over = results["bo-over"]
    # bo had made 5 calls (4 in its first program, 1 proxied): this program got the 25 left
    assert over["error"]["type"] == "CallBudget" and len([c for c in over["calls"] if c["ok"]]) == 30 - 5
    assert results["bo-refused"]["error"]["type"] == "CallBudget" and results["bo-refused"]["sandbox"] == "none"
    assert "session has used its 30 tool calls" in results["bo-refused"]["error"]["message"]
    assert results["bo-proxy-refused"]
    # ada's session was not charged for bo's calls
    fresh = call(server.url, "run_program", {"program": "print(get_stats()['authors'])"})
    assert fresh.structured_content["answer"] == "3\n"


def test_a_cancelled_call_stops_its_program_and_it_reported_progress(server: HttpServe) -> None:
    progress: list[tuple[float, str | None]] = []

    async def note(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    async def go() -> float:
        async with http_client(server.url) as client:
            with anyio.move_on_after(3):
                await client.call_tool("run_program", {"program": SPIN}, progress_callback=note)
            began = time.monotonic()
            after = await client.call_tool("run_program", {"program": "print('still serving')"})
            assert after.structured_content["answer"] == "still serving\n", after.structured_content["error"]
            return began

    pids: set[int] = set()

    def watch() -> None:
        pids.update(wait_spinning(server.proc.pid))

    async def both() -> float:
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.to_thread.run_sync, watch)
            return await go()

    anyio.run(both)
    # about one notification a second: the calls so far (a spinning program makes none) and the time
    assert progress and progress[0][0] == 0 and re.fullmatch(r"0 tool calls, \d+ s of 60 s", progress[0][1] or "")
    assert pids and wait_gone(pids, 10) == set(), "the cancelled program still runs"
    assert not (pids & sandbox_pids(server.proc.pid))


def test_the_bearer_token_is_required(server: HttpServe) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    for auth in (None, "Bearer wrong-token-0000000000", f"Basic {TOKEN}", f"Bearer {TOKEN}x"):
        sent = dict(headers, **({"Authorization": auth} if auth else {}))
        refused = httpx.post(server.url, json=init, headers=sent, timeout=10)
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
    accepted = httpx.post(server.url, json=init, headers=dict(headers, Authorization=f"Bearer {TOKEN}"), timeout=10)
    assert accepted.status_code == 200

    async def sdk() -> None:
        async with http_client(server.url, token="wrong-token-0000000000") as client:
            await client.list_tools()

    with pytest.raises(BaseException) as refused_sdk:
        anyio.run(sdk)
    # the SDK reports the 401 of its first request as an error response of the server
    assert any(type(e).__name__ == "MCPError" and "error response" in str(e) for e in leaves(refused_sdk.value))


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def test_an_http_client_that_drops_mid_run_stops_its_program(server: HttpServe) -> None:
    from tests.atc.serve.test_serve_lifecycle import drop_mid_run

    drop_mid_run(server, serve_env(Path(server.log).parent / "client-home"))
