"""``atc serve``'s sessions and budgets under attack, with the official SDK's client on both
protocol eras against a real ``atc serve --transport http`` process (local sandbox).

The attacks of issue 29 (item 3): a client that sends another client's session id (to use its
login cookie and spend its budget), a client that makes an id up, a stateless client (the
2026-07-28 protocol, which has no session) that runs as many programs as it likes, and calls
refused before sending that were charged as if they had been sent.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.support.serve import STATELESS, TOKEN, Apis, HttpServe, http_client, serve_args, serve_env
from tests.support.serve import apis as apis

pytestmark = pytest.mark.slow  # a server per test (~2 s to start), programs in a real sandbox

#: The second client's token, in its own variable: the server names the client by it.
TOKEN_B = "serve-test-token-b-8d2c51e07a3f"


def start(apis: Apis, tmp_path: Path, *flags: str) -> HttpServe:
    env = serve_env(tmp_path / "home", ATC_TOKEN_B=TOKEN_B)
    return HttpServe.start(serve_args(apis, "--proxy-tools", "--sandbox", "local", "--token-env", "ATC_SERVE_TOKEN",
                                      "--token-env", "ATC_TOKEN_B", *flags, shop=False), env, tmp_path / "stderr.log")


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


async def refusal(work: Callable[[], Awaitable[Any]]) -> str:
    """The error a client gets for ``work`` (which must fail)."""
    try:
        await work()
    except BaseException as exc:  # the SDK raises MCPError, inside task groups
        return " | ".join(str(e) for e in leaves(exc))
    raise AssertionError("the request was served")


def test_a_session_serves_only_the_client_it_was_issued_to(apis: Apis, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def mallory(sid: str, token: str, mode: str) -> str:
        async def work() -> None:
            async with http_client(server.url, token=token, mode=mode, headers={"Mcp-Session-Id": sid}) as c:
                whoami = text(await c.call_tool("current_user", {}))
                seen.setdefault("mallory-whoami", []).append(whoami)
                await c.call_tool("run_program", {"program": "print('mallory ran')"})

        return await refusal(work)

    async def go() -> None:
        issued: list[str] = []
        async with http_client(server.url, issued=issued) as alice:  # the 2025 protocol: a session
            await alice.call_tool("sign_in", {"user": "alice"})  # the API's login cookie, in alice's session
            assert json.loads(text(await alice.call_tool("current_user", {})))["user"] == "alice"
            assert (await alice.call_tool("run_program", {"program": "print(1)"})).structured_content["ok"]
            sid = issued[0]
            # another client with alice's id, on either protocol, or any client with a made-up one
            seen["other token, legacy"] = await mallory(sid, TOKEN_B, "legacy")
            seen["other token, stateless"] = await mallory(sid, TOKEN_B, STATELESS)
            seen["made up, stateless"] = await mallory("alice", TOKEN, STATELESS)
            seen["made up, legacy"] = await mallory(sid[::-1], TOKEN, "legacy")
            deleted = httpx.delete(server.url, headers={"Authorization": f"Bearer {TOKEN_B}", "Mcp-Session-Id": sid},
                                   timeout=10)
            seen["delete"] = deleted.status_code
            # alice's session is as she left it: her cookie, and her budget of 3 programs (1 used)
            seen["alice-whoami"] = json.loads(text(await alice.call_tool("current_user", {})))["user"]
            seen["alice-runs"] = [(await alice.call_tool("run_program", {"program": "print(2)"})).structured_content
                                  for _ in range(3)]

    with start(apis, tmp_path, "--session-max-runs", "3") as server:
        anyio.run(go)
        log = server.stderr()
    for case in ("other token, legacy", "other token, stateless", "made up, stateless", "made up, legacy"):
        assert "Session not found" in seen[case], (case, seen[case])
    assert "mallory-whoami" not in seen and "mallory ran" not in log
    assert seen["delete"] == 404
    assert seen["alice-whoami"] == "alice"
    assert [r["ok"] for r in seen["alice-runs"]] == [True, True, False]
    assert "its 3 programs" in seen["alice-runs"][2]["error"]["message"]
    assert TOKEN not in log and TOKEN_B not in log and "client ATC_SERVE_TOKEN" in log


def test_clients_without_a_session_are_held_to_their_tokens_and_the_servers_budgets(
        apis: Apis, tmp_path: Path) -> None:
    async def runs(token: str, count: int) -> list[Any]:
        async with http_client(server.url, token=token, mode=STATELESS) as c:
            return [await c.call_tool("run_program", {"program": "print('hi')"}) for _ in range(count)]

    with start(apis, tmp_path, "--session-max-runs", "3", "--token-max-runs", "5", "--server-max-runs", "7") as server:
        b = anyio.run(runs, TOKEN_B, 6)
        a = anyio.run(runs, TOKEN, 3)
        log = server.stderr()
    # every request is a session of its own, so --session-max-runs bounds nothing here: the token's does
    assert [r.structured_content["ok"] for r in b] == [True] * 5 + [False]
    refused = b[5].structured_content
    assert refused["error"]["type"] == "CallBudget" and refused["sandbox"] == "none"
    assert "the token $ATC_TOKEN_B has run its 5 programs (the server's --token-max-runs)" in refused["error"]["message"]
    # and the server's, over both tokens: 5 + 2
    assert [r.structured_content["ok"] for r in a] == [True, True, False]
    assert "this server has run its 7 programs" in a[2].structured_content["error"]["message"]
    for result in (b[5], a[2]):  # another call would be refused the same way: no request to try again
        shown = text(result)
        assert shown.startswith("The program was not run.") and "call run_program again" not in shown
        assert "ask" in shown.strip().splitlines()[-1]
    assert "(no session, client ATC_TOKEN_B)" in log
    numbers = [int(line.split("#")[1].split(":")[0]) for line in log.splitlines() if "run_program #" in line]
    assert numbers == list(range(1, 10))  # numbered over the server, not by JSON-RPC id


def test_only_calls_that_left_the_host_are_charged(apis: Apis, tmp_path: Path) -> None:
    careless = ("for bad in ('one', 'two'):\n    try:\n        get_book(book_id=bad)\n    except ToolError as e:\n"
                "        print('refused:', e)\nprint(get_stats()['books'])\n")
    greedy = "for i in range(6):\n    get_stats()\nprint('never')\n"

    async def go() -> dict[str, Any]:
        async with http_client(server.url) as c:
            first = await c.call_tool("run_program", {"program": careless})
            proxied = await c.call_tool("get_book", {"book_id": "twenty"})
            cut = await c.call_tool("run_program", {"program": greedy})
            refused = await c.call_tool("run_program", {"program": "print(get_stats())"})
            proxy_refused = await c.call_tool("get_stats", {})
            return {"first": first, "proxied": proxied, "cut": cut, "refused": refused, "proxy_refused": proxy_refused}

    with start(apis, tmp_path, "--session-max-calls", "4") as server:
        got = anyio.run(go)
    first = got["first"].structured_content
    assert first["ok"] and first["answer"].count("refused:") == 2 and first["answer"].endswith("5\n")
    assert [c["status"] for c in first["calls"]] == [None, None, 200]  # two refused before sending, one sent
    assert got["proxied"].is_error and "book_id" in text(got["proxied"])  # refused before sending too
    # the session was charged 1 call of 4: the next program gets the 3 left, then the budget stops it
    cut = got["cut"].structured_content
    assert cut["error"]["type"] == "CallBudget" and [c["ok"] for c in cut["calls"]] == [True] * 3 + [False]
    shown = text(got["cut"])
    assert shown.strip().splitlines()[-1].startswith("The budget of this session is spent")
    assert "call run_program again" not in shown
    refused = got["refused"].structured_content
    assert refused["error"]["type"] == "CallBudget" and "used its 4 tool calls" in refused["error"]["message"]
    assert "call run_program again" not in text(got["refused"])
    assert got["proxy_refused"].is_error and "--session-max-calls" in text(got["proxy_refused"])


def test_programs_wait_their_turn_and_a_large_body_is_refused(apis: Apis, tmp_path: Path) -> None:
    """``--concurrency 1``: two clients' programs run one after the other; a request body past the
    SDK's 4 MiB is answered 413 before anything parses it."""
    program = "import time\nbegan = time.time()\ntime.sleep(1.0)\nprint(began, time.time())\n"
    spans: list[tuple[float, float]] = []

    async def client(token: str) -> None:
        async with http_client(server.url, token=token, mode=STATELESS) as c:
            answer = (await c.call_tool("run_program", {"program": program})).structured_content["answer"]
            began, ended = map(float, answer.split())
            spans.append((began, ended))

    async def both() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(client, TOKEN)
            group.start_soon(client, TOKEN_B)

    with start(apis, tmp_path, "--concurrency", "1") as server:
        anyio.run(both)
        big = httpx.post(server.url, content=b"[" + b"1," * (2_200_000) + b"1]", timeout=30,
                         headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
                                  "Accept": "application/json, text/event-stream"})
    first, second = sorted(spans)
    assert first[1] <= second[0], spans  # never both at once
    assert big.status_code == 413
