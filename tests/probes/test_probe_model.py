"""Probing with a model: the real ``openai`` client talks HTTP to a scripted OpenAI-compatible
server, the model's programs run in the local sandbox against the catalog API on 127.0.0.1.

The script answers like a model would, including badly: replies without a program, a program
calling a tool that does not exist, a program with made-up ids, a program reading a key the
response does not have, a helper choice that names no tool, and a tool the model never manages
(the model-free prober must take it over)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from atc.llm.client import OpenAIModel
from probes import probe
from protocols import load_data
from tests.support.apis.catalog import CatalogAPI
from tests.support.fakes.openai_server import Reply, ScriptedOpenAI

SPEC_PATHS = ("/shelves", "/shelves/{shelf_id}/items", "/items/{sku}", "/makers/{maker_ref}", "/search")

PROGRAMS: dict[str, list[str]] = {
    # tool -> replies for round 0 samples, then (after "|") for rounds with helpers
    "list_shelves": ["Question: Which shelves are there?\n```python\nr = list_shelves()\n"
                     "print([s['label'] for s in r['shelves']])\n```"],
    "search_items": ["Question: Do they sell lanterns?\n```python\nprint(search_items(q='lantern'))\n```"],
}


def _tool_of(text: str) -> str | None:
    m = re.search(r"Make up a question that `(\w+)` answers", text)
    return m.group(1) if m else None


def router(body: dict[str, Any]) -> str:
    messages = body["messages"]
    first_user = next(m["content"] for m in messages if m["role"] == "user")
    if first_user.startswith("The tool `"):
        name = re.match(r"The tool `(\w+)`", first_user).group(1)  # type: ignore[union-attr]
        if name == "list_shelf_items":
            return 'I would call these first: ["list_shelves"]'
        return "hmm, hard to say"  # names no tool: the prober falls back to its own ranking
    tool = _tool_of(first_user)
    turn = sum(1 for m in messages if m["role"] == "assistant")
    with_helpers = "## Tools that can supply its arguments\n\n(none)" not in first_user
    if tool in PROGRAMS:
        return PROGRAMS[tool][0]
    if tool == "list_shelf_items":
        if not with_helpers:
            return ["I am not sure how to do that.",
                    "Question: q\n```python\nprint(list_shelvez())\n```",
                    "Question: What is on shelf sh-0000?\n```python\nprint(list_shelf_items(shelf_id='sh-0000'))\n```",
                    ][turn]
        return ("Question: What is on the first shelf?\n```python\nshelves = list_shelves()\n"
                "first = shelves['shelves'][0]['shelf_id']\nprint(list_shelf_items(shelf_id=first))\n```")
    if tool == "get_item":
        if not with_helpers:
            return "You should look the item up in the catalog."
        if turn == 0:
            return ("Question: What does the first item cost?\n```python\nitems = list_shelf_items(shelf_id="
                    "list_shelves()['shelves'][0]['shelf_id'])\nprint(get_item(sku=items['items'][0]['id']))\n```")
        return ("Question: What does the first item cost?\n```python\nitems = list_shelf_items(shelf_id="
                "list_shelves()['shelves'][0]['shelf_id'])\nprint(get_item(sku=items['items'][0]['sku'])['price'])\n```")
    return "<think>no idea</think>Sorry, I cannot write that."  # get_maker: never a program


@pytest.fixture()
def catalog() -> Iterator[CatalogAPI]:
    with CatalogAPI() as api:
        yield api


@pytest.fixture()
def model() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI(router=router) as server:
        yield server


def _client(server: ScriptedOpenAI) -> OpenAIModel:
    return OpenAIModel("scripted", base_url=server.base_url, max_retries=0)


def _collection(api: CatalogAPI) -> Any:
    return load_data(api.spec(only=SPEC_PATHS), source="catalog")


def test_model_mode_follows_the_paper_and_survives_bad_replies(catalog: CatalogAPI, model: ScriptedOpenAI) -> None:
    report = probe(_collection(catalog), client=_client(model), sandbox="local", request_timeout=2)
    assert report.mode == "model" and report.model == "scripted" and report.sandbox == "local"
    status = {t.name: (t.status, t.source, t.round) for t in report.tools}
    assert status["list_shelves"] == ("documented", "model", 0)
    assert status["search_items"] == ("documented", "model", 0)
    assert status["list_shelf_items"] == ("documented", "model", 1)
    assert status["get_item"] == ("documented", "model", 1)
    # The model never wrote a program for get_maker: the model-free chain documented it afterwards.
    assert status["get_maker"][:2] == ("documented", "no-llm")

    shelves = report.tool("list_shelves")
    assert shelves.examples[0]["question"] == "Which shelves are there?"
    assert "list_shelves()" in shelves.examples[0]["program"]
    assert shelves.response_schema["properties"]["shelves"]["items"]["properties"]["shelf_id"]["type"] == "string"

    items = report.tool("list_shelf_items")
    assert items.depends_on == ["list_shelves"]  # traced from the value the program passed on
    assert items.mapping["shelf_id"] == {"tool": "list_shelves", "field": "shelves[].shelf_id"}
    assert "/shelves/sh-0000/items" in catalog.paths()  # the made-up id was really sent (and 404'd)

    texts = [model.request_text(i) for i in range(len(model.requests))]
    # Feedback reached the model: the missing program, the static NameError, the 404, the KeyError.
    assert any("held no Python program" in t for t in texts)
    assert any("NameError" in t and "list_shelvez" in t for t in texts)
    assert any("HTTP 404" in t for t in texts)
    assert any("KeyError" in t and "get_item" in t for t in texts)
    # Helpers are offered with the response schemas learnt for them.
    select = next(t for t in texts if t.startswith("The tool `get_item`"))
    assert "list_shelf_items(shelf_id: str) -> {shelf_id: str, items: [{sku: str, name: str}]}" in select

    assert report.usage["llm_calls"] == len(model.requests)
    assert report.calls == len(catalog.requests)


def test_a_second_model_probe_reuses_its_findings(catalog: CatalogAPI, model: ScriptedOpenAI) -> None:
    first = probe(_collection(catalog), client=_client(model), sandbox="local", request_timeout=2)
    asked = len(model.requests)
    catalog.reset()
    second = probe(_collection(catalog), client=_client(model), sandbox="local", request_timeout=2)
    assert len(model.requests) == asked  # no question was asked again
    assert catalog.requests == []  # and no request sent
    assert [(t.name, t.status, t.source) for t in second.tools] == [(t.name, t.status, t.source) for t in first.tools]
    assert second.tool("list_shelf_items").depends_on == ["list_shelves"]
    assert second.tool("list_shelves").examples[0]["question"] == "Which shelves are there?"


def test_a_model_server_that_fails_does_not_stop_the_probe(catalog: CatalogAPI) -> None:
    with ScriptedOpenAI(router=lambda body: Reply(500, "overloaded")) as broken:
        report = probe(_collection(catalog), client=_client(broken), sandbox="local", request_timeout=2)
    assert report.mode == "model" and "the model failed" in (report.note or "")
    assert len(broken.requests) == 1  # the first failure ends the model's part
    assert report.count("documented") == 5 and {t.source for t in report.tools} == {"no-llm"}


def test_without_a_configured_model_it_probes_without_one(catalog: CatalogAPI) -> None:
    report = probe(_collection(catalog))
    assert report.mode == "no-llm" and "without a model" in (report.note or "")
    assert report.count("documented") == 5


def _docker_ready() -> bool:
    try:
        from sandbox.docker.backend import docker_available
    except ImportError:
        return False
    try:
        return bool(docker_available())
    except Exception:
        return False


@pytest.mark.docker
def test_model_programs_run_in_the_docker_sandbox(catalog: CatalogAPI, model: ScriptedOpenAI) -> None:
    if not _docker_ready():
        pytest.skip("no Docker engine or no sandbox image")
    collection = load_data(catalog.spec(only=("/shelves", "/shelves/{shelf_id}/items")), source="catalog")
    report = probe(collection, client=_client(model), sandbox="docker", request_timeout=2)
    assert report.sandbox == "docker"
    assert [(t.name, t.status, t.source) for t in report.tools] == [
        ("list_shelves", "documented", "model"), ("list_shelf_items", "documented", "model")]
    assert report.tool("list_shelf_items").depends_on == ["list_shelves"]
    assert report.calls == len(catalog.requests)


def test_the_python_api_exposes_probe() -> None:
    import atc
    import probes.probing

    assert atc.probe is probes.probing.probe and atc.ProbeReport.__name__ == "ProbeReport"
