"""What ``atc tools import`` says while it embeds, ``--no-embed``, copies of one tool shown once, and
the response fields in the index: ``atc`` run as a user runs it (subprocesses, stderr a pipe, not
a terminal), embeddings from the fake OpenAI-compatible server on 127.0.0.1 (``delay`` makes it
a slow model)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from atc.retrieval.corpus import MemoryCorpus
from atc.retrieval.doc import Doc, response_fields
from atc.retrieval.duplicates import groups
from atc.retrieval.hybrid import Bm25Retriever
from protocols import load_data
from protocols.model import Tool
from tests.support.fakes.embedding_server import FakeEmbeddings

ATC = Path(sys.executable).with_name("atc")


def atc(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ATC), *args], capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=120)


def spec_doc(title: str, n: int, *, schemas: bool = True) -> dict[str, Any]:
    """An OpenAPI document of ``n`` read operations about different things."""
    things = ["invoice", "shipment", "warehouse", "supplier", "customer", "refund", "coupon", "parcel",
              "courier", "pallet", "barcode", "receipt", "voucher", "ledger", "payroll", "contract"]
    paths: dict[str, Any] = {}
    for i in range(n):
        thing = f"{things[i % len(things)]}{i // len(things) or ''}"
        response: dict[str, Any] = {"description": "OK"}
        if schemas:
            response["content"] = {"application/json": {"schema": {"type": "object", "properties": {
                f"{thing}_id": {"type": "integer"}, f"{thing}_status": {"type": "string"}}}}}
        paths[f"/{thing}s/{{id}}"] = {"get": {
            "operationId": f"get_{thing}", "summary": f"Get one {thing} by its id",
            "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}],
            "responses": {"200": response}}}
    return {"openapi": "3.0.3", "info": {"title": title, "version": "1"},
            "servers": [{"url": "http://127.0.0.1:9"}], "paths": paths}


@pytest.fixture()
def slow_model() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(dim=32, delay=0.8) as server:
        yield server


@pytest.fixture()
def model() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(dim=32) as server:
        yield server


def embed_env(server: FakeEmbeddings) -> dict[str, str]:
    return {"ATC_EMBED_MODEL": "fake-embed", "ATC_EMBED_BASE_URL": server.base_url}


def test_a_long_embedding_says_so_off_a_terminal(slow_model: FakeEmbeddings, model: FakeEmbeddings,
                                                 tmp_path: Path) -> None:
    spec = tmp_path / "big.json"
    spec.write_text(json.dumps(spec_doc("Big", 40)))
    proc = atc("tools", "import", str(spec), env=embed_env(slow_model))
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "embed" in line]
    # One line when the wait will pass a second, the count when done; no bar, no carriage return.
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith("atc: embedding 40 tools for search") and "s more" in lines[0]
    assert "--no-embed" in lines[0]
    assert lines[1].startswith("atc: embedded 40 tools in ") and "openai:fake-embed" in lines[1]
    assert "\r" not in proc.stderr
    assert proc.stdout.strip() == "imported big: 40 tools (openapi-3.0, server http://127.0.0.1:9)"
    # A quick one says nothing about embedding; --json tells what was embedded.
    small = tmp_path / "small.json"
    small.write_text(json.dumps(spec_doc("Small", 3)))
    quick = atc("tools", "import", str(small), "--json", env=embed_env(model))
    assert quick.returncode == 0 and "embed" not in quick.stderr, quick.stderr
    embedded = json.loads(quick.stdout)["embedded"]
    assert embedded["tools"] == 3 and embedded["runtime"] == "openai:fake-embed"
    # Nothing new to embed (the 40 are cached by text): nothing to say, and null in --json.
    again = atc("tools", "import", str(spec), "--json", env=embed_env(slow_model))
    assert again.returncode == 0 and json.loads(again.stdout)["embedded"] is None
    assert "embed" not in again.stderr


def test_no_embed_then_hybrid_by_name_embeds_once(model: FakeEmbeddings, tmp_path: Path) -> None:
    spec = tmp_path / "shop.json"
    spec.write_text(json.dumps(spec_doc("Shop", 8)))
    proc = atc("tools", "import", str(spec), "--no-embed", "--json", env=embed_env(model))
    assert proc.returncode == 0, proc.stderr
    assert model.texts == [] and json.loads(proc.stdout)["embedded"] is None
    auto = json.loads(atc("tools", "search", "status of a refund", "--json", env=embed_env(model)).stdout)
    assert auto["retriever"] == "bm25" and any("--no-embed" in n for n in auto["notes"])
    assert model.texts == []  # the automatic choice loads no model over an index without vectors
    hybrid = atc("tools", "search", "status of a refund", "--retriever", "hybrid", "--json", env=embed_env(model))
    assert hybrid.returncode == 0, hybrid.stderr
    assert json.loads(hybrid.stdout)["retriever"] == "hybrid"
    embedded = len(model.texts)
    assert embedded >= 8 * 2  # the tools' views, and the query
    again = json.loads(atc("tools", "search", "status of a refund", "--json", env=embed_env(model)).stdout)
    assert again["retriever"] == "hybrid" and again["hits"][0]["name"] == "get_refund"
    assert len(model.texts) == embedded + 1  # from now on only the query is embedded


def test_copies_of_a_tool_are_shown_once(tmp_path: Path) -> None:
    """A collection, its probed copy (response schemas added) and the same spec imported under
    another name: each tool once, the best documented copy shown, the others named with it."""
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(spec_doc("Depot", 6, schemas=False)))
    probed = tmp_path / "probed.json"
    probed.write_text(json.dumps(spec_doc("Depot", 6, schemas=True)))
    env = {"ATC_EMBED_MODEL": "none"}
    for path, name in ((bare, "depot"), (probed, "depot-probed"), (bare, "depot-again")):
        assert atc("tools", "import", str(path), "--name", name, env=env).returncode == 0
    other = spec_doc("Elsewhere", 1)  # the same path, another API: not a copy
    other["paths"]["/invoices/{id}"]["get"]["summary"] = "Fetch a scanned invoice image"
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert atc("tools", "import", str(tmp_path / "other.json"), "--name", "elsewhere", env=env).returncode == 0
    found = json.loads(atc("tools", "search", "invoice", "-k", "6", "--json", env=env).stdout)
    keys = [(h["collection"], h["name"]) for h in found["hits"]]
    assert len(keys) == len(set(keys))
    invoice = [h for h in found["hits"] if h["name"] == "get_invoice"]
    assert [h["collection"] for h in invoice] == ["depot-probed", "elsewhere"] or \
        [h["collection"] for h in invoice] == ["elsewhere", "depot-probed"]
    shown = next(h for h in invoice if h["collection"] == "depot-probed")
    assert sorted((d["collection"], d["name"]) for d in shown["duplicates"]) == [
        ("depot", "get_invoice"), ("depot-again", "get_invoice")]
    assert next(h for h in invoice if h["collection"] == "elsewhere")["duplicates"] == []
    # Every one of the six tools is there once: the copies do not take the other places.
    every = json.loads(atc("tools", "search", "get one by its id", "-k", "10", "--json", env=env).stdout)["hits"]
    names = [h["name"] for h in every if h["collection"] != "elsewhere"]
    assert len(names) == len(set(names)) == 6


def test_which_copy_is_shown() -> None:
    """Best documented first; then the newest import; then the collection name that sorts first."""
    def doc(collection: str, documented: int) -> Doc:
        return Doc(collection=collection, name="t", protocol="same", documented=documented)

    docs = [doc("a", 1), doc("b", 5), doc("c", 5), doc("d", 1), Doc(collection="e", name="u", protocol="other")]
    canon, ring, hidden = groups(docs, {"a": "2026-01-01T00:00:00", "b": "2026-01-01T00:00:00",
                                        "c": "2026-02-01T00:00:00", "d": "2026-03-01T00:00:00"})
    assert hidden == 3 and canon[:4] == [2, 2, 2, 2] and canon[4] == 4 and ring[4] == 4
    order, j = [2], ring[2]
    while j != 2:
        order.append(j)
        j = ring[j]
    assert order == [2, 1, 3, 0]  # c (documented, newest), b, then d (newer) before a
    assert groups(docs[:2] + [doc("c", 1)])[0][:3] == [1, 1, 1]
    tie = groups([doc("z", 1), doc("m", 1)], {})  # same time: the name that sorts first
    assert tie[0] == [1, 1]


def test_a_request_naming_a_returned_field_finds_the_tool() -> None:
    doc = spec_doc("Films", 0)
    for name, fields in (("film_details", ["release_date", "budget"]), ("film_summary", ["overview", "tagline"])):
        doc["paths"][f"/{name}/{{id}}"] = {"get": {
            "operationId": name, "summary": "About one film",
            "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}],
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {
                "type": "object", "properties": {f: {"type": "string"} for f in fields}}}}}}}}
    tools = load_data(copy.deepcopy(doc), source="films").tools
    assert response_fields(tools[0]) == ["release date", "budget"]
    corpus = MemoryCorpus(tools)
    for query, best in (("the release date of a film", "film_details"), ("a film's tagline", "film_summary")):
        assert Bm25Retriever(corpus).search(query, 1).hits[0].name == best
    # Learnt by probing (an example's response, no schema) counts the same.
    learnt = Tool(name="film_info", collection="x", description="About one film",
                  examples=[{"args": {"id": 1}, "response": {"results": [{"release_date": "2020"}]}}])
    assert response_fields(learnt) == ["results", "release date"]
