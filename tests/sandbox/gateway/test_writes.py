"""Writes you can trust: exactly once per task, a read-only mode, approvals, outcomes.

Every test runs real programs in a real sandbox (local, and Docker where the backend matters)
against the orders API on 127.0.0.1 (tests/support/apis/orders.py), which records what it really received:
the assertions count the orders the API made, not what atc says it did. Solves use the real
``openai`` client against the scripted OpenAI-compatible server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import atc
from atc.llm.client import OpenAIModel
from atc.loop.solving import solve
from protocols.loaders import load_data
from protocols.model import Collection
from sandbox.api import Limits
from sandbox.gateway.writes import LedgerFile, WriteLedger, WritePolicy, WriteRequest, Writes
from tests.support.apis.orders import OrdersAPI
from tests.support.fakes.openai_server import Reply, ScriptedOpenAI, call
from tests.support.strategies import client as client
from tests.support.strategies import fence
from tests.support.strategies import server as server

LIMITS = Limits(timeout=20)
BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture(scope="module")
def orders_api() -> Iterator[OrdersAPI]:
    with OrdersAPI() as api:
        yield api


@pytest.fixture()
def api(orders_api: OrdersAPI) -> OrdersAPI:
    orders_api.reset()
    return orders_api


@pytest.fixture()
def shop(api: OrdersAPI) -> Collection:
    return load_data(api.spec(), name="shop")


def sandbox_for(backend: str) -> str:
    if backend == "docker":
        from sandbox.docker.backend import docker_available

        if not docker_available():
            pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    return backend


# -- the rule ------------------------------------------------------------------------------------


def test_what_counts_as_a_write(shop: Collection) -> None:
    from protocols.writes import judge, looks_like_read

    verdicts = {t.name: judge(t).write for t in shop.tools}
    assert verdicts == {"list_products": False, "list_orders": False, "place_order": True, "search_orders": False,
                        "get_order": False, "update_order": True, "cancel_order": True, "pay": True}
    assert judge(shop.tool("search_orders")).reason == "marked read-only"  # type: ignore[arg-type]
    place = shop.tool("place_order")
    assert place is not None and looks_like_read(place) is None


# -- exactly once across attempts ------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_identical_write_across_a_repair_is_sent_once(
    server: ScriptedOpenAI, client: OpenAIModel, shop: Collection, api: OrdersAPI, backend: str
) -> None:
    good = "o = place_order(product_id=1, quantity=2)\nprint(o['number'])"
    server.push(fence(good.replace("o['number']", "o['order_number']")), fence(good))
    sol = solve("Order two desk lamps and give me the order number", shop, client=client, base_url=api.url,
                sandbox=sandbox_for(backend), limits=LIMITS)
    assert sol.ok and sol.answer.strip() == "A-1001"  # the FIRST write's answer
    assert api.writes_seen() == 1 and len(api.orders) == 1
    assert [a["ok"] for a in (x.to_dict() for x in sol.attempts)] == [False, True]
    assert [(c.tool, c.write, c.outcome) for c in sol.calls] == [("place_order", True, "replayed")]
    assert [(w["tool"], w["outcome"], w["sends"]) for w in sol.writes] == [("place_order", "done", 1)]
    assert sol.write_counts == {"done": 1, "replayed": 1}
    # the repair prompt listed the write already made, its id, and said it would not be repeated
    repair = server.request_text(1)
    assert "Writes already made in this task" in repair and "number=A-1001" in repair
    assert "NOT sent again" in repair
    doc = sol.to_dict()
    assert doc["calls"][0]["write"] is True and doc["calls"][0]["outcome"] == "replayed"


def test_a_changed_write_is_sent(shop: Collection, api: OrdersAPI) -> None:
    writes = Writes.of()
    first = atc.run("print(place_order(product_id=1, quantity=1)['id'])", shop, base_url=api.url, sandbox="local",
                    writes=writes)
    second = atc.run("print(place_order(product_id=1, quantity=3)['id'])", shop, base_url=api.url, sandbox="local",
                     writes=writes)
    assert first.answer.strip() == "1" and second.answer.strip() == "2"
    assert [c.outcome for c in second.calls] == ["done"] and api.writes_seen() == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loop_of_identical_writes_matches_one_for_one(shop: Collection, api: OrdersAPI, backend: str) -> None:
    writes = Writes.of()
    loop = "for _ in range({n}):\n    print(place_order(product_id=3, quantity=1)['id'])"
    first = atc.run(loop.format(n=2), shop, base_url=api.url, sandbox=sandbox_for(backend), writes=writes)
    again = atc.run(loop.format(n=3), shop, base_url=api.url, sandbox=sandbox_for(backend), writes=writes)
    assert first.answer.split() == ["1", "2"]
    assert again.answer.split() == ["1", "2", "3"]  # two answered from the ledger, the third sent
    assert [c.outcome for c in again.calls] == ["replayed", "replayed", "done"]
    assert api.writes_seen() == 3


def test_a_failed_write_is_sent_again(shop: Collection, api: OrdersAPI) -> None:
    writes = Writes.of()
    api.fail_next = [503]
    program = "print(place_order(product_id=2, quantity=1)['number'])"
    first = atc.run(program, shop, base_url=api.url, sandbox="local", writes=writes)
    assert not first.ok and [c.outcome for c in first.calls] == ["failed"]
    second = atc.run(program, shop, base_url=api.url, sandbox="local", writes=writes)
    assert second.ok and [c.outcome for c in second.calls] == ["done"]
    assert api.writes_seen() == 2 and len(api.orders) == 1
    assert writes.ledger is not None and [(e.outcome, e.sends) for e in writes.ledger.entries] == [("done", 2)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unknown_outcome_is_reported_and_not_silently_repeated(shop: Collection, api: OrdersAPI,
                                                                 backend: str) -> None:
    writes = Writes.of()
    api.slow_seconds = 1.5  # the order is made, the answer comes after the call gave up
    program = "print(place_order(product_id=1, quantity=1)['number'])"
    limits = Limits(timeout=20, call_timeout=0.5)
    first = atc.run(program, shop, limits, base_url=api.url, sandbox=sandbox_for(backend), writes=writes)
    assert not first.ok and [(c.outcome, c.failure) for c in first.calls] == [("unknown", "timeout")]
    api.slow_seconds = 0.0
    limits = Limits(timeout=20)  # the API answers now: a loaded machine must not turn that into a timeout
    second = atc.run(program, shop, limits, base_url=api.url, sandbox=sandbox_for(backend), writes=writes)
    assert not second.ok and second.error is not None and second.error.type == "ToolError"
    assert [c.outcome for c in second.calls] == ["refused"]
    assert "may have been applied" in second.error.message and "resend_unknown=True" in second.error.message
    assert api.writes_seen() == 1
    # The program (or the person) checked and decides: sent again on purpose.
    third = atc.run("print(place_order(product_id=1, quantity=1, resend_unknown=True)['number'])", shop, limits,
                    base_url=api.url, sandbox=sandbox_for(backend), writes=writes)
    assert third.ok and [c.outcome for c in third.calls] == ["done"] and api.writes_seen() == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_declared_idempotency_key_is_filled_and_kept_across_the_resend(shop: Collection, api: OrdersAPI,
                                                                        backend: str) -> None:
    writes = Writes.of()
    api.slow_seconds = 1.5
    limits = Limits(timeout=20, call_timeout=0.5)
    program = "print(pay(order_id=7)['id'])"
    first = atc.run(program, shop, limits, base_url=api.url, sandbox=sandbox_for(backend), writes=writes)
    assert [c.outcome for c in first.calls] == ["unknown"]
    api.slow_seconds = 0.0
    limits = Limits(timeout=20)  # the API answers now: a loaded machine must not turn that into a timeout
    second = atc.run(program, shop, limits, base_url=api.url, sandbox=sandbox_for(backend), writes=writes)
    # with a key, an unknown outcome is sent again under the SAME key, and the API applies it once
    assert second.ok and second.answer.strip() == "pay_1" and [c.outcome for c in second.calls] == ["done"]
    keys = [r.headers.get("Idempotency-Key") for r in api.requests if r.path == "/payments"]
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0] and len(api.payments) == 1
    # a key the program gives is its own
    own = atc.run("print(pay(order_id=8, idempotency_key='mine-1')['key'])", shop, base_url=api.url,
                  sandbox="local", writes=writes)
    assert own.answer.strip() == "mine-1"


# -- the policy -------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_deny_sends_nothing_but_reads(shop: Collection, api: OrdersAPI, backend: str) -> None:
    program = ("print(len(list_products()))\nprint(search_orders(product_id=1))\n"
               "try:\n    place_order(product_id=1, quantity=1)\nexcept ToolError as e:\n    print('refused:', e)\n"
               "cancel_order(order_id=1)")
    result = atc.run(program, shop, base_url=api.url, sandbox=sandbox_for(backend), writes="deny")
    assert not result.ok and result.error is not None and result.error.tool == "cancel_order"
    assert "read-only" in result.answer and "read-only" in result.error.message
    assert [(c.tool, c.write, c.outcome) for c in result.calls] == [
        ("list_products", False, None), ("search_orders", False, None), ("place_order", True, "refused"),
        ("cancel_order", True, "refused")]
    assert [(r.method, r.path) for r in api.requests] == [("GET", "/products"), ("POST", "/orders/search")]


def test_deny_tells_the_model_before_it_writes(server: ScriptedOpenAI, client: OpenAIModel, shop: Collection,
                                               api: OrdersAPI) -> None:
    server.push(fence("print(len(list_orders()))"))
    sol = solve("How many orders are there?", shop, client=client, base_url=api.url, sandbox="local",
                limits=LIMITS, writes="deny")
    assert sol.ok and sol.write_policy == "deny"
    assert "This run is read-only" in server.request_text(0)


def test_ask_with_a_scripted_approver_and_the_wait_is_not_the_programs(shop: Collection, api: OrdersAPI) -> None:
    import time

    seen: list[WriteRequest] = []

    def approve(request: WriteRequest) -> bool:
        seen.append(request)
        time.sleep(1.2)  # a person reading: longer than the program's whole deadline
        return request.args.get("quantity") == 1

    program = ("print(place_order(product_id=1, quantity=1)['id'])\n"
               "try:\n    place_order(product_id=1, quantity=5)\nexcept ToolError as e:\n    print('no:', e)")
    result = atc.run(program, shop, Limits(timeout=2.0), base_url=api.url, sandbox="local", writes="ask",
                     approve=approve)
    assert result.ok, result.error
    assert [c.outcome for c in result.calls] == ["done", "refused"]
    assert "declined by the approver" in result.answer
    assert [(r.tool, r.method, r.url) for r in seen] == [("place_order", "POST", f"{api.url}/orders")] * 2
    assert api.writes_seen() == 1


def test_ask_without_anyone_to_ask_refuses(shop: Collection, api: OrdersAPI) -> None:
    result = atc.run("place_order(product_id=1, quantity=1)", shop, base_url=api.url, sandbox="local",
                     writes=Writes(WritePolicy("ask"), WriteLedger()))
    assert not result.ok and result.error is not None and "no one to ask" in result.error.message
    assert api.writes_seen() == 0


def test_an_approver_that_breaks_refuses(shop: Collection, api: OrdersAPI) -> None:
    def broken(request: WriteRequest) -> bool:
        raise RuntimeError("the approval service is down")

    result = atc.run("place_order(product_id=1, quantity=1)", shop, base_url=api.url, sandbox="local", writes="ask",
                     approve=broken)
    assert not result.ok and result.error is not None and "approval service is down" in result.error.message
    assert api.writes_seen() == 0


# -- redirects of writes at run time ---------------------------------------------------------------


def test_a_redirected_write_is_asked_again_at_its_new_target(shop: Collection, api: OrdersAPI) -> None:
    api.redirect_writes = True
    api.orders[1] = {"id": 1, "number": "A-1001", "product_id": 1, "quantity": 1, "status": "placed"}
    asked: list[WriteRequest] = []

    def approve(request: WriteRequest) -> bool:
        asked.append(request)
        return request.hop == 0  # yes to the planned request, no to the redirect

    result = atc.run("update_order(order_id=1, quantity=2)", shop, base_url=api.url, sandbox="local", writes="ask",
                     approve=approve)
    assert not result.ok and result.calls[0].failure == "redirect" and result.calls[0].outcome == "failed"
    assert [(r.hop, r.url, r.query) for r in asked] == [(0, f"{api.url}/orders/1", ""),
                                                        (1, f"{api.url}/vault/orders/1", "from=orders")]
    assert api.vault_hits == 0
    allowed = atc.run("print(update_order(order_id=1, quantity=2))", shop, base_url=api.url, sandbox="local")
    assert allowed.ok and api.vault_hits == 1  # allow: a same-origin redirect of a write is followed


def test_a_guard_sees_the_redirect_of_a_post_marked_read_only(shop: Collection, api: OrdersAPI) -> None:
    api.redirect_writes = True
    seen: list[WriteRequest] = []

    def guard(request: WriteRequest) -> str | None:
        seen.append(request)
        return "outside the scope" if request.url.split("/")[3:4] == ["vault"] else None

    writes = Writes(WritePolicy("allow", guard=guard), WriteLedger())
    result = atc.run("print(search_orders(product_id=1))", shop, base_url=api.url, sandbox="local", writes=writes)
    assert not result.ok and result.calls[0].failure == "redirect" and not result.calls[0].write
    assert [(r.marked_read, r.hop, r.query) for r in seen] == [(True, 1, "scope=all")]
    assert api.vault_hits == 0
    # without a guard a marked read follows its redirect (the policy's mode is for writes)
    denied = atc.run("print(search_orders(product_id=1))", shop, base_url=api.url, sandbox="local", writes="deny")
    assert denied.ok and api.vault_hits == 1


# -- other strategies ---------------------------------------------------------------------------------


def test_react_replays_a_repeated_write(server: ScriptedOpenAI, client: OpenAIModel, shop: Collection,
                                        api: OrdersAPI) -> None:
    place = {"product_id": 2, "quantity": 1}
    server.push(Reply(tool_calls=(call("place_order", place),)), Reply(tool_calls=(call("place_order", place),)),
                Reply(tool_calls=(call("finish", {"answer": "A-1001"}),)))
    sol = solve("Order a floor lamp", shop, client=client, base_url=api.url, strategy="react", limits=LIMITS)
    assert sol.ok and api.writes_seen() == 1
    assert [c.outcome for c in sol.calls] == ["done", "replayed"]
    last_tool = [m for m in server.requests[2]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "not sent again" in last_tool and "A-1001" in last_tool


def test_dfsdt_backtracking_over_a_write_does_not_write_twice(server: ScriptedOpenAI, client: OpenAIModel,
                                                              shop: Collection, api: OrdersAPI) -> None:
    place = {"product_id": 1, "quantity": 1}
    server.push(
        Reply(tool_calls=(call("place_order", place),)),                          # node 1: writes
        Reply(tool_calls=(call("finish", {"return_type": "give_up_and_restart"}),)),  # node 2: gives up
        Reply(tool_calls=(call("place_order", place),)),                          # node 3: from the root again
        Reply(tool_calls=(call("finish", {"return_type": "give_answer", "final_answer": "A-1001"}),)),
    )
    sol = solve("Order a desk lamp", shop, client=client, base_url=api.url, strategy="dfsdt", limits=LIMITS)
    assert sol.ok and sol.answer == "A-1001"
    assert api.writes_seen() == 1
    outcomes = [n.get("status") for n in sol.trace["nodes"]]
    assert outcomes[:2] == ["root", "ok"] and "gave_up" in outcomes
    assert sol.write_counts == {"done": 1, "replayed": 1}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_session_is_one_task(shop: Collection, api: OrdersAPI, backend: str) -> None:
    with atc.session(shop, base_url=api.url, sandbox=sandbox_for(backend)) as s:
        one = s.run("o = place_order(product_id=3, quantity=4)\nprint(o['id'])")
        again = s.run("o2 = place_order(product_id=3, quantity=4)\nprint(o2['id'] == o['id'])")
    assert one.answer.strip() == "1" and again.answer.strip() == "True"
    assert [c.outcome for c in again.calls] == ["replayed"] and api.writes_seen() == 1


# -- the ledger's file: a task resumed after it wrote -------------------------------------------------


def test_a_ledger_file_keeps_the_writes_across_processes(tmp_path: Path, shop: Collection, api: OrdersAPI) -> None:
    path = tmp_path / "task.writes.jsonl"
    program = "print(place_order(product_id=1, quantity=1)['number'])"
    first = atc.run(program, shop, base_url=api.url, sandbox="local",
                    writes=Writes.of(ledger=LedgerFile(path).ledger("t1")))
    with path.open("ab") as f:
        f.write(b'{"task": "t1", "entry": {"torn')  # a process killed mid-line
    second = atc.run(program, shop, base_url=api.url, sandbox="local",
                     writes=Writes.of(ledger=LedgerFile(path).ledger("t1")))
    other = atc.run(program, shop, base_url=api.url, sandbox="local",
                    writes=Writes.of(ledger=LedgerFile(path).ledger("t2")))
    assert first.answer == second.answer == "A-1001\n" and other.answer == "A-1002\n"
    assert [c.outcome for c in second.calls] == ["replayed"] and api.writes_seen() == 2
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.endswith("}")]
    assert {x["task"] for x in lines} == {"t1", "t2"}
    assert len({x["ledger"] for x in lines}) == 2  # each task its own ledger id (its derived keys)


def test_only_an_allowing_policy_without_a_guard_skips_the_request() -> None:
    # the gate builds no request for a policy that reads none: every other policy must see each one
    assert not WritePolicy().reads_requests
    assert WritePolicy("deny").reads_requests and WritePolicy("ask").reads_requests
    assert WritePolicy(guard=lambda request: None).reads_requests
