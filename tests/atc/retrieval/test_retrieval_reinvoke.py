"""Re-Invoke through the real model client against the scripted OpenAI-compatible server: synthetic
queries generated in batches, stored by document hash, resumed after a failure; intents
extracted per request; multi-view ranking with an embedder (a deterministic hashed bag of words
written here: the Embedder seam is ours) and with BM25 when there is none; the CLI entry."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from atc.llm.chat import ModelClient
from atc.llm.openai_http import HttpChatModel
from atc.retrieval import factory
from atc.retrieval.queries import QueryStore, document_hash, generate
from atc.retrieval.reinvoke import ReInvoke, extract_intents, merge_intents
from protocols.bm25 import tokenize
from protocols.model import Tool
from tests.support.fakes.openai_server import Reply, ScriptedOpenAI


class HashedBagOfWords:
    """A deterministic embedder: each stemmed word hashed into one of ``dim`` buckets."""

    name = "test-hashed-bow"
    dim = 512

    def embed(self, texts: Any) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in tokenize(text):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
            norm = np.linalg.norm(out[row])
            if norm:
                out[row] /= norm
        return out


def T(name: str, description: str) -> Tool:  # noqa: N802
    return Tool(name=name, collection="c", description=description)


# Documents that say little: only the synthetic queries tell what the tools are for.
TOOLS = [T("svc_geo", "Endpoint of service GEO."), T("svc_news", "Endpoint of service NEWS."),
         T("svc_wx", "Endpoint of service WX."), T("svc_fx", "Endpoint of service FX.")]
PURPOSE = {"svc_wx": ["weather forecast for a city tomorrow", "will it rain in Bergen this weekend"],
           "svc_fx": ["convert dollars to norwegian krone", "exchange rate euro to yen today"],
           "svc_geo": ["coordinates of a street address", "which country is this town in"],
           "svc_news": ["latest headlines about football", "news articles on elections"]}


def model(body: dict[str, Any]) -> Reply | str:
    """The scripted model: writes queries for the APIs it is shown, or extracts intents."""
    text = body["messages"][-1]["content"]
    if "different,\nrealistic user requests" in text or "realistic user requests" in text:
        lines = []
        for number, name in re.findall(r"### (\d+)\nAPI: (\w+)", text):
            lines += [f"{number}: {q}" for q in PURPOSE.get(name, [f"use {name}"])]
        return "\n".join(lines)
    if "Extract the underlying intents" in text:
        return "Intents:\n- rain forecast in Oslo next week\n- convert 100 dollars into krone"
    return Reply(400, "unexpected request")


@pytest.fixture()
def server() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI(router=model) as s:
        yield s


@pytest.fixture()
def client(server: ScriptedOpenAI) -> ModelClient:
    return HttpChatModel("scripted", base_url=server.base_url, backoff=0.01, max_retries=0)


def test_generation_is_batched_cached_and_resumable(server: ScriptedOpenAI, client: ModelClient, tmp_path: Path) -> None:
    store = QueryStore(tmp_path)
    many = [T(f"api_{i}", f"Operation {i}.") for i in range(10)]
    # the second request fails: the first batch stays stored, the rest is not sent
    server.router = None
    server.push(lambda body: model(body), Reply(400, "scripted failure"))
    seen: list[tuple[int, int]] = []
    first = generate(many, client, store, per_tool=2, batch=4, concurrency=1, on_progress=lambda d, t: seen.append((d, t)))
    assert (first.generated, first.failed, first.cached) == (4, 6, 0) and first.errors
    assert first.usage["llm_calls"] == 2 - 1  # the failed request raised; only the answered one is counted here
    assert seen[0] == (0, 10) and seen[-1] == (4, 10)
    assert store.get(document_hash(many[0])) == ["use api_0"]  # one per tool was all the model wrote
    # resumed: only the six left are asked for (two requests of at most four)
    server.router = model
    before = len(server.requests)
    second = generate(many, client, store, per_tool=1, batch=4, concurrency=1)
    assert (second.cached, second.generated, second.failed) == (4, 6, 0) and not second.errors
    assert len(server.requests) - before == 2 == second.usage["llm_calls"]
    # unchanged tools are never asked again; a changed document is
    before = len(server.requests)
    changed = [*many[:9], T("api_9", "Operation 9, now with paging.")]
    third = generate(changed, client, store, per_tool=1, batch=4)
    assert (third.cached, third.generated) == (9, 1) and len(server.requests) - before == 1
    assert "Operation 9, now with paging." in server.requests[-1]["messages"][0]["content"]
    # stored atomically, one file per document hash
    files = list((tmp_path / "retrieval" / "queries").rglob("*.json"))
    assert len(files) == 11 and not list((tmp_path / "retrieval" / "queries").rglob("*.tmp"))


def test_a_tool_left_out_by_the_model_is_retried(server: ScriptedOpenAI, client: ModelClient, tmp_path: Path) -> None:
    server.router = None
    server.push("1: headlines in Oslo")  # says nothing about the second tool
    report = generate(TOOLS[:2], client, QueryStore(tmp_path), per_tool=1)
    assert (report.generated, report.failed) == (1, 1)
    server.router = model
    again = generate(TOOLS[:2], client, QueryStore(tmp_path), per_tool=1)
    assert (again.cached, again.generated) == (1, 1)


@pytest.mark.parametrize("embedder", [HashedBagOfWords(), None], ids=["embedder", "bm25"])
def test_each_intent_gets_its_best_tool(server: ScriptedOpenAI, client: ModelClient, tmp_path: Path,
                                        embedder: HashedBagOfWords | None) -> None:
    retriever = ReInvoke(TOOLS, client=client, embedder=embedder, home=tmp_path, per_tool=2)
    query = ("My sister lives in Oslo and I am flying there next week; will it rain? "
             "Also I need to convert 100 dollars into krone before I go.")
    result = retriever.search(query, k=2)
    assert result.retriever == "reinvoke"
    assert {h.name for h in result.hits} == {"svc_wx", "svc_fx"}
    # the missing queries were generated during the search (one batch), then the intents asked for
    assert result.usage["llm_calls"] == len(server.requests) == 2
    assert result.usage["prompt_tokens"] > 0 and result.usage["completion_tokens"] > 0
    assert "intents: rain forecast in Oslo next week | convert 100 dollars into krone" in result.notes
    # a second search reuses the stored queries: one model call, for the intents
    again = retriever.search("exchange rate of the euro", k=1)
    assert again.usage["llm_calls"] == 1 and len(server.requests) == 3


def test_without_the_synthetic_queries_the_documents_cannot_tell(tmp_path: Path, server: ScriptedOpenAI,
                                                                 client: ModelClient) -> None:
    bare = ReInvoke(TOOLS, client=client, embedder=HashedBagOfWords(), home=tmp_path, generate_missing=0)
    result = bare.search("will it rain in Oslo, and convert dollars to krone", k=2)
    assert {h.name for h in result.hits} != {"svc_wx", "svc_fx"}
    assert any("have no synthetic queries" in n and "atc tools queries" in n for n in result.notes)


def test_merge_puts_every_intents_best_tool_first() -> None:
    per_intent = [{0: 0.9, 1: 0.8, 2: 0.1}, {3: 0.4, 1: 0.3}]
    assert merge_intents(per_intent, 4) == [(0, 0.9), (3, 0.4), (1, 0.8), (2, 0.1)]
    assert merge_intents(per_intent, 2) == [(0, 0.9), (3, 0.4)]
    assert merge_intents([], 3) == []


def test_intent_lines_are_cleaned() -> None:
    assert extract_intents("Intents:\n1. book a flight\n- find a hotel\n\nfind a hotel", "q") == \
        ["book a flight", "find a hotel"]
    assert extract_intents("", "the query") == ["the query"]
    assert len(extract_intents("\n".join(f"intent {i}" for i in range(30)), "q")) == 8


def test_model_failure_falls_back_to_the_request_as_its_intent(server: ScriptedOpenAI, client: ModelClient,
                                                               tmp_path: Path) -> None:
    generate(TOOLS, client, QueryStore(tmp_path), per_tool=2)
    server.router = lambda body: Reply(400, "no")
    retriever = factory("reinvoke")(tools=TOOLS, client=client, home=tmp_path)
    result = retriever.search("exchange rate euro to yen", k=1)
    assert [h.name for h in result.hits] == ["svc_fx"]
    assert any("intent extraction failed" in n for n in result.notes)
    no_model = factory("reinvoke")(tools=TOOLS, home=tmp_path).search("headlines about football", k=1)
    assert [h.name for h in no_model.hits] == ["svc_news"] and no_model.usage["llm_calls"] == 0


def test_cli_generates_for_stored_collections(server: ScriptedOpenAI, tmp_path: Path) -> None:
    spec = {"openapi": "3.0.3", "info": {"title": "Svc", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
            "paths": {f"/{t.name}": {"get": {"operationId": t.name, "summary": t.description,
                                             "responses": {"200": {"description": "ok"}}}} for t in TOOLS}}
    path = tmp_path / "svc.json"
    path.write_text(json.dumps(spec))
    atc = str(Path(sys.executable).parent / "atc")
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "ATC_MODEL": "scripted"}
    assert subprocess.run([atc, "tools", "import", str(path)], capture_output=True, env=env, timeout=60).returncode == 0
    run = subprocess.run([atc, "tools", "queries", "svc", "--per-tool", "2", "--json"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["ok"] and (doc["tools"], doc["generated"], doc["cached"]) == (4, 4, 0)
    assert doc["usage"]["llm_calls"] == len(server.requests) == 1
    again = subprocess.run([atc, "tools", "queries", "--per-tool", "2"], capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 0 and again.stdout.startswith("4 tools: 4 already done, 0 generated")
    bad = subprocess.run([atc, "tools", "queries", "nope"], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "no collection named 'nope'" in bad.stderr and "Traceback" not in bad.stderr


def test_cli_shows_progress_on_a_terminal(server: ScriptedOpenAI, tmp_path: Path) -> None:
    import pty

    spec = {"openapi": "3.0.3", "info": {"title": "Svc", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
            "paths": {f"/{t.name}": {"get": {"operationId": t.name, "summary": t.description,
                                             "responses": {"200": {"description": "ok"}}}} for t in TOOLS}}
    path = tmp_path / "svc.json"
    path.write_text(json.dumps(spec))
    atc = str(Path(sys.executable).parent / "atc")
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "ATC_MODEL": "scripted"}
    subprocess.run([atc, "tools", "import", str(path)], capture_output=True, env=env, timeout=60, check=True)
    leader, follower = pty.openpty()
    try:
        run = subprocess.run([atc, "tools", "queries", "--batch", "2"], stdout=subprocess.PIPE, stderr=follower,
                             text=True, env=env, timeout=60)
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(leader)
    assert run.returncode == 0
    assert b"\rsynthetic queries: 0/4 tools" in seen and b"synthetic queries: 4/4 tools" in seen
    assert run.stdout.startswith("4 tools: 0 already done, 4 generated, 0 failed; 2 model calls")


def test_factories_take_a_retrieval_corpus_with_tools_read_from_the_store(tmp_path: Path) -> None:
    from atc.retrieval.select import corpus_tools
    from protocols.model import Collection
    from protocols.store import Store

    Store(tmp_path).add(Collection(name="svc", tools=[Tool(name=t.name, collection="svc", description=t.description)
                                                      for t in TOOLS]))

    class Doc:
        def __init__(self, name: str) -> None:
            self.collection, self.name = "svc", name

    class StoreCorpus:  # the shape of the retrieval index: documents in memory, tools in the store
        n = len(TOOLS)

        def tool(self, i: int) -> None:
            return None

        def doc(self, i: int) -> Doc:
            return Doc(TOOLS[i].name)

    tools = corpus_tools(None, StoreCorpus(), tmp_path)
    assert [(t.collection, t.name) for t in tools] == [("svc", t.name) for t in TOOLS]
    retriever = factory("reinvoke")(corpus=StoreCorpus(), home=tmp_path)
    assert [h.name for h in retriever.search("service FX", k=1).hits] == ["svc_fx"]


def test_an_interrupted_generation_keeps_what_it_did(server: ScriptedOpenAI, tmp_path: Path) -> None:
    import signal
    import time

    many = [T(f"api_{i}", f"Operation {i}.") for i in range(12)]
    spec = {"openapi": "3.0.3", "info": {"title": "Many", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
            "paths": {f"/{t.name}": {"get": {"operationId": t.name, "summary": t.description,
                                             "responses": {"200": {"description": "ok"}}}} for t in many}}
    path = tmp_path / "many.json"
    path.write_text(json.dumps(spec))
    atc = str(Path(sys.executable).parent / "atc")
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "ATC_MODEL": "scripted"}
    subprocess.run([atc, "tools", "import", str(path)], capture_output=True, env=env, timeout=60, check=True)
    server.router = lambda body: Reply(text=str(model(body)), delay=0.4)
    proc = subprocess.Popen([atc, "tools", "queries", "--batch", "1", "--per-tool", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 30
    while len(server.requests) < 5 and time.monotonic() < deadline:  # the first four are answered
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    sent = len(server.requests)
    stored = len(list((Path(env["ATC_HOME"]) / "retrieval" / "queries").rglob("*.json")))
    assert 4 <= stored == sent < 12  # what was in flight finished and was kept; nothing more was sent
    server.router = model
    again = subprocess.run([atc, "tools", "queries", "--batch", "1", "--per-tool", "1", "--json"],
                           capture_output=True, text=True, env=env, timeout=60)
    doc = json.loads(again.stdout)
    assert (doc["cached"], doc["generated"]) == (stored, 12 - stored) and len(server.requests) == 12
