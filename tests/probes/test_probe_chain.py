"""Probing without a model against a real HTTP API on 127.0.0.1 (tests/support/apis/catalog.py): ids that
only two-, three- and four-step chains reach, a free-text search whose required parameter the spec
forgot, unsafe operations, a credential, and tools that fail, time out and answer garbage."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probes import ProbeInterrupted, probe
from protocols import load_data, load_spec
from sandbox.execute import run
from tests.support.apis.catalog import SECRET, CatalogAPI

CRED = {"key": "env:CATALOG_KEY"}


@pytest.fixture(scope="module")
def server() -> Iterator[CatalogAPI]:
    with CatalogAPI(slow=2.0) as api:
        yield api


@pytest.fixture()
def catalog(server: CatalogAPI, monkeypatch: pytest.MonkeyPatch) -> CatalogAPI:
    monkeypatch.setenv("CATALOG_KEY", SECRET)
    server.reset()
    server.mode = "open"
    server.delay = 0.0
    return server


def _probe(api: CatalogAPI, **kw: Any) -> Any:
    kw.setdefault("request_timeout", 0.8)
    kw.setdefault("credentials", CRED)
    return probe(load_data(api.spec(), source="catalog"), no_llm=True, **kw)


def test_chains_of_two_three_and_four_steps_are_found(catalog: CatalogAPI, tmp_path: Path) -> None:
    report = _probe(catalog, out=tmp_path / "out")
    status = {t.name: t.status for t in report.tools}
    assert {n for n, s in status.items() if s == "documented"} == {
        "list_shelves", "list_shelf_items", "get_item", "get_item_variant", "get_maker", "search_items", "get_account"}
    items, item, maker, variant = (report.tool(n) for n in ("list_shelf_items", "get_item", "get_maker",
                                                             "get_item_variant"))
    assert items.depends_on == ["list_shelves"] and items.mapping["shelf_id"]["field"] == "shelves[].shelf_id"
    assert item.depends_on == ["list_shelf_items"] and item.mapping["sku"]["field"] == "items[].sku"
    assert maker.depends_on == ["get_item"] and maker.mapping["maker_ref"]["field"] == "maker.maker_ref"
    assert report.tool("list_shelves").round == 0 and maker.round >= 1
    # The variant number must belong to the item: the pair comes from one response, so it works at once.
    assert variant.calls == 1 and set(variant.depends_on) == {"list_shelf_items", "get_item"}
    assert variant.response_schema["properties"]["stock"]["type"] == "integer"
    assert item.response_schema["properties"]["maker"]["properties"]["maker_ref"]["type"] == "string"
    # Every request the server saw is counted, and no tool had more than its cap.
    assert report.calls == len(catalog.requests) <= 2 * len(report.tools)
    assert max(t.calls for t in report.tools) <= 5


def test_search_learns_its_required_parameter_and_finds_real_words(catalog: CatalogAPI) -> None:
    report = _probe(catalog)
    search = report.tool("search_items")
    assert search.status == "documented" and search.required_learned == ["q"]
    assert search.status_codes.get("400") == 1
    # Common words find nothing here; a name seen in another response does, and that example comes first.
    assert search.examples[0]["response"]["hits"], search.examples
    assert search.response_schema["properties"]["hits"]["items"]["properties"]["sku"]["type"] == "string"


def test_unsafe_operations_are_never_sent(catalog: CatalogAPI) -> None:
    report = _probe(catalog)
    for name in ("create_item", "delete_item", "delete_item_via_get"):
        tool = report.tool(name)
        assert tool.status == "skipped" and "--allow-unsafe" in tool.reason and tool.calls == 0
    assert catalog.paths("POST") == [] and catalog.paths("DELETE") == []
    assert not any(p.endswith("/delete") for p in catalog.paths())


def test_allow_unsafe_without_a_scope_sends_nothing_unsafe(catalog: CatalogAPI) -> None:
    """``POST /items`` creates at the top of the API and ``DELETE /items/{sku}`` would delete an item
    the probe did not create: with no ``--scope`` neither has anywhere to go (tests/probes/test_probe_writes.py
    shows what a scope allows)."""
    plain = _probe(catalog)
    catalog.reset()
    report = _probe(catalog, allow_unsafe=True)
    assert catalog.paths("POST") == [] and catalog.paths("DELETE") == []
    assert not any(p.endswith("/delete") for p in catalog.paths())
    assert "outside the scope" in report.tool("create_item").reason
    for name in ("delete_item", "delete_item_via_get"):
        assert "deletes only what this probe created" in report.tool(name).reason
    assert [(t.name, t.status) for t in report.tools] == [(t.name, t.status) for t in plain.tools]


def test_failures_have_reasons_and_never_crash(catalog: CatalogAPI) -> None:
    report = _probe(catalog)
    reasons = {t.name: (t.status, t.reason or "") for t in report.tools}
    assert reasons["get_broken"][0] == "failed" and "500" in reasons["get_broken"][1]
    assert "database is on fire" in reasons["get_broken"][1]
    assert reasons["get_slow"][0] == "failed" and "no response within" in reasons["get_slow"][1]
    assert reasons["get_garbage"][0] == "failed" and "not JSON" in reasons["get_garbage"][1]
    assert reasons["get_html"][0] == "failed" and "HTML" in reasons["get_html"][1]
    assert reasons["get_quota"][0] == "failed" and "error body: the quota service is unavailable" in reasons["get_quota"][1]
    assert report.tool("get_slow").calls == 1  # a timeout is not retried
    history = report.tool("get_item_history")  # a server failing whatever it is sent: given up after two
    assert history.status == "failed" and history.calls == 2 and "history service is down" in history.reason


def test_credentials_stay_on_the_host(catalog: CatalogAPI, tmp_path: Path) -> None:
    report = _probe(catalog, out=tmp_path / "out")
    account = report.tool("get_account")
    assert account.status == "documented"
    assert [r.headers.get("X-Key") for r in catalog.requests if r.path == "/account"] == [SECRET]
    assert SECRET not in json.dumps(report.to_dict())
    home = Path(__import__("os").environ["ATC_HOME"])
    written = [p for p in [*home.rglob("*"), *(tmp_path / "out").rglob("*")] if p.is_file()]
    assert written and all(SECRET not in p.read_text(errors="replace") for p in written)


def test_a_second_probe_reuses_recorded_answers(catalog: CatalogAPI) -> None:
    first = _probe(catalog)
    catalog.reset()
    second = _probe(catalog)
    # Only what was not recorded is asked again: server errors, timeouts, garbage and error bodies.
    failing = ["/broken", "/garbage", "/html", "/items/SKU-4K7P/history", "/items/SKU-91X2/history", "/quota",
               "/slow"]
    assert sorted(catalog.paths()) == failing
    assert second.calls == len(failing) and second.cached == first.calls - len(failing)
    assert [(t.name, t.status, t.response_schema) for t in second.tools] == \
        [(t.name, t.status, t.response_schema) for t in first.tools]
    catalog.reset()
    _probe(catalog, refresh=True)
    assert len(catalog.requests) == first.calls
    catalog.reset()
    _probe(catalog, cache=False)
    assert len(catalog.requests) == first.calls


def test_ctrl_c_keeps_what_was_learnt(catalog: CatalogAPI, tmp_path: Path) -> None:
    seen: list[str] = []

    def stop_after_three(event: str, state: Any) -> None:
        if event == "documented":
            seen.append(state.name)
            if len(seen) == 3:
                raise KeyboardInterrupt

    with pytest.raises(ProbeInterrupted) as caught:
        _probe(catalog, out=tmp_path / "out", on_event=stop_after_three)
    partial = caught.value.report
    assert partial.interrupted and partial.count("documented") == 3
    on_disk = json.loads((tmp_path / "out" / "report.json").read_text())
    assert on_disk["interrupted"] is True and on_disk["documented"] == 3
    assert load_spec(tmp_path / "out" / "openapi.json").tool(seen[0]).response_schema is not None
    sent_before = len(catalog.requests)
    catalog.reset()
    resumed = _probe(catalog)
    assert resumed.count("documented") == 7
    assert resumed.cached >= sent_before - 1  # what the interrupted run learnt is not asked again


def test_the_budget_is_global_and_per_tool(catalog: CatalogAPI) -> None:
    report = _probe(catalog, max_calls=3)
    assert report.calls == len(catalog.requests) == 3
    assert any(t.status == "skipped" and "budget" in (t.reason or "") for t in report.tools)
    catalog.reset()
    report = _probe(catalog, per_tool=1, cache=False)
    per_path = Counter(r.path for r in catalog.requests)
    assert max(per_path.values()) == 1
    assert report.tool("search_items").status == "failed"  # its one request learnt that q is required


def test_an_api_that_wants_credentials_stops_the_probe_early(catalog: CatalogAPI) -> None:
    catalog.mode = "locked"
    report = _probe(catalog, credentials=None)
    assert not report.ok and report.calls == 3 == len(catalog.requests)
    assert all("credential" in (t.reason or "") or "--allow-unsafe" in (t.reason or "") for t in report.tools)


def test_the_example_program_runs_in_the_sandbox(catalog: CatalogAPI) -> None:
    report = _probe(catalog)
    program = report.tool("get_maker").examples[0]["program"]
    assert "list_shelves()" in program and "get_maker(maker_ref=" in program
    result = run(program, load_data(catalog.spec(), source="catalog"), sandbox="local")
    assert result.ok, result.error
    assert result.answer.strip() in ("Okafor and Sons", "Lindqvist Works")
    assert [c.tool for c in result.calls] == ["list_shelves", "list_shelf_items", "get_item", "get_maker"]


def test_the_openapi_document_round_trips(catalog: CatalogAPI, tmp_path: Path) -> None:
    """``atc tools import`` of the written document gives back the documented tools as they are."""
    from probes.results.outputs import learnt_collection

    original = load_data(catalog.spec(), source="catalog")
    report = probe(original, no_llm=True, request_timeout=0.8, credentials=CRED, out=tmp_path / "out")
    learnt = learnt_collection(original, report)
    again = load_spec(tmp_path / "out" / "openapi.json")
    assert again.source_format == "openapi-3.1" and again.servers == original.servers
    assert [t.name for t in again.tools] == [t.name for t in learnt.tools]
    for before, after in zip(learnt.tools, again.tools, strict=True):
        assert (after.method, after.path, after.bindings) == (before.method, before.path, before.bindings)
        assert after.parameters == before.parameters, before.name
        assert after.response_schema == before.response_schema, before.name
        assert [(e["args"], e["response"], e.get("program")) for e in after.examples] == \
            [(e["args"], e["response"], e.get("program")) for e in before.examples], before.name
        assert after.security == before.security
    assert again.tool("search_items").required == ["q"]  # learnt as required, kept as required
    assert set(again.security_schemes) == {"key"}
