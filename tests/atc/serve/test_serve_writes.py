"""``atc serve`` and writes: a session is one task (a host that calls ``run_program`` again with
the same write does not write twice), ``--writes deny``, and ``--writes ask`` through MCP
elicitation, with the SDK's real client against a real ``atc serve`` process and the orders API
on 127.0.0.1, which counts what it received."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.apis.orders import OrdersAPI
from tests.support.serve import HttpServe, http_client, serve_env

pytest.importorskip("mcp")

ORDER = "o = place_order(product_id=1, quantity={q})\nprint(o['number'])"


@pytest.fixture(scope="module")
def orders_api() -> Iterator[OrdersAPI]:
    with OrdersAPI() as api:
        yield api


@pytest.fixture()
def api(orders_api: OrdersAPI) -> OrdersAPI:
    orders_api.reset()
    return orders_api


def _serve(tmp_path: Path, api: OrdersAPI, *extra: str) -> HttpServe:
    spec = tmp_path / "orders.json"
    spec.write_text(json.dumps(api.spec()))
    return HttpServe.start(["serve", "--tools", str(spec), "--sandbox", "local", *extra],
                           serve_env(tmp_path / "home"), tmp_path / "serve.log")


def _structured(result: Any) -> dict[str, Any]:
    return dict(result.structured_content or {})


def test_a_session_that_runs_a_write_again_does_not_write_twice(tmp_path: Path, api: OrdersAPI) -> None:
    async def host() -> tuple[dict[str, Any], dict[str, Any], str]:
        async with http_client(server.url) as client:
            first = await client.call_tool("run_program", {"program": ORDER.format(q=2) + "\nprint(o['nope'])"})
            again = await client.call_tool("run_program", {"program": ORDER.format(q=2)})
            text = again.content[0].text
            return _structured(first), _structured(again), text

    with _serve(tmp_path, api) as server:
        first, again, text = anyio.run(host)
    assert not first["ok"] and [c["outcome"] for c in first["calls"]] == ["done"]
    assert again["ok"] and again["answer"].strip() == "A-1001"
    assert [(c["write"], c["outcome"]) for c in again["calls"]] == [(True, "replayed")]
    assert "not sent again" in text
    assert api.writes_seen() == 1


def test_deny_serves_reads_only(tmp_path: Path, api: OrdersAPI) -> None:
    async def host() -> dict[str, Any]:
        async with http_client(server.url) as client:
            result = await client.call_tool("run_program", {"program": "print(len(list_products()))\n"
                                                                       + ORDER.format(q=1)})
            return _structured(result)

    with _serve(tmp_path, api, "--writes", "deny") as server:
        doc = anyio.run(host)
    assert not doc["ok"] and doc["answer"].strip() == "3" and "read-only" in doc["error"]["message"]
    assert [c.get("outcome") for c in doc["calls"]] == [None, "refused"]
    assert api.writes_seen() == 0


def test_ask_goes_to_the_client_through_elicitation(tmp_path: Path, api: OrdersAPI) -> None:
    from mcp import types

    asked: list[str] = []

    async def person(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"send": '"quantity":1' in params.message})

    async def host() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        from tests.support.serve import TOKEN

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120) as http:
            async with Client(streamable_http_client(server.url, http_client=http), mode="legacy",
                              elicitation_callback=person) as client:
                yes = await client.call_tool("run_program", {"program": ORDER.format(q=1)})
                no = await client.call_tool("run_program", {"program": ORDER.format(q=9)})
        async with http_client(server.url) as mute:  # declares no elicitation: no one to ask
            mute_result = await mute.call_tool("run_program", {"program": ORDER.format(q=1) + "\n# again"})
        return _structured(yes), _structured(no), _structured(mute_result)

    with _serve(tmp_path, api, "--writes", "ask") as server:
        yes, no, mute = anyio.run(host)
    assert yes["ok"] and yes["answer"].strip() == "A-1001"
    assert not no["ok"] and "declined" in no["error"]["message"]
    assert not mute["ok"] and "cannot be asked" in mute["error"]["message"]
    assert [c["outcome"] for c in (yes["calls"] + no["calls"] + mute["calls"])] == ["done", "refused", "refused"]
    assert len(asked) == 2 and "place_order: POST" in asked[0]
    assert api.writes_seen() == 1
