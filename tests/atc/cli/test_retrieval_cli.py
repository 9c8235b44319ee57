"""``atc tools search --retriever`` and ``atc solve --retriever`` as a user runs them (subprocesses),
with embeddings from a real HTTP server on 127.0.0.1 and the scripted model server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.apis.library import LibraryAPI
from tests.support.fakes.embedding_server import FakeEmbeddings
from tests.support.fakes.openai_server import ScriptedOpenAI

ATC = Path(sys.executable).with_name("atc")


def atc(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **(env or {})}
    return subprocess.run([str(ATC), *args], capture_output=True, text=True, env=full, timeout=120)


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout


@pytest.fixture()
def emb() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(dim=48) as server:
        yield server


@pytest.fixture()
def spec(api: LibraryAPI, tmp_path: Path) -> Path:
    return api.write_spec(tmp_path / "library.json")


def emb_env(server: FakeEmbeddings) -> dict[str, str]:
    return {"ATC_EMBED_MODEL": "fake-embed", "ATC_EMBED_BASE_URL": server.base_url}


def test_search_json_says_which_retriever_ran(emb: FakeEmbeddings, spec: Path) -> None:
    env = emb_env(emb)
    proc = atc("tools", "import", str(spec), "--name", "library", env=env)
    assert proc.returncode == 0, proc.stderr
    imported = len(emb.texts)
    assert imported > 5  # every tool embedded once, at import
    auto = json.loads(atc("tools", "search", "reviews of a book", "--json", env=env).stdout)
    assert auto["retriever"] == "hybrid" and auto["query"] == "reviews of a book"
    assert auto["hits"][0]["name"] == "list_book_reviews"
    assert set(auto["hits"][0]) == {"name", "collection", "score", "description", "duplicates"}
    assert auto["usage"]["llm_calls"] == 0
    assert len(emb.texts) == imported + 1  # the query alone: tool vectors come from the index
    bm25 = json.loads(atc("tools", "search", "reviews of a book", "--retriever", "bm25", "-k", "2", "--json",
                          env=env).stdout)
    assert bm25["retriever"] == "bm25" and len(bm25["hits"]) == 2 and len(emb.texts) == imported + 1
    text = atc("tools", "search", "reviews of a book", "--retriever", "bm25", env=env)
    assert "list_book_reviews" in text.stdout and "(bm25)" in text.stdout
    # Without embeddings configured, the automatic choice is BM25.
    plain = json.loads(atc("tools", "search", "reviews", "--json", env={"ATC_EMBED_MODEL": "none"}).stdout)
    assert plain["retriever"] == "bm25"


def test_search_errors_exit_2_or_1_without_traceback(emb: FakeEmbeddings, spec: Path) -> None:
    proc = atc("tools", "search", "books", "--retriever", "nosuch")
    assert proc.returncode == 2 and "unknown retriever 'nosuch'" in proc.stderr and "bm25" in proc.stderr
    no_traceback(proc)
    proc = atc("tools", "import", str(spec), env={"ATC_EMBED_MODEL": "some-model"})
    assert proc.returncode == 2 and "ATC_EMBED_BASE_URL" in proc.stderr
    no_traceback(proc)
    down = {"ATC_EMBED_MODEL": "m", "ATC_EMBED_BASE_URL": "http://127.0.0.1:9/v1"}
    proc = atc("tools", "import", str(spec), env=down)
    assert proc.returncode == 1 and "cannot be reached" in proc.stderr
    no_traceback(proc)
    assert atc("tools", "import", str(spec), "--name", "lib", env=emb_env(emb)).returncode == 0
    proc = atc("tools", "search", "books", "--retriever", "hybrid", env={**down, "ATC_EMBED_MODEL": "fake-embed"})
    assert proc.returncode == 1 and "cannot be reached" in proc.stderr
    no_traceback(proc)
    # The import whose embedding failed stored its collection: BM25 finds its tools anyway.
    from atc.examples import path

    other = path("transit/swagger.json")
    proc = atc("tools", "import", str(other), "--name", "other", env={**down, "ATC_EMBED_MODEL": "fake-embed"})
    assert proc.returncode == 1 and "cannot be reached" in proc.stderr
    found = atc("tools", "search", "departures from a stop", "--retriever", "bm25", "--json",
                env={**down, "ATC_EMBED_MODEL": "fake-embed"})
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["hits"][0]["collection"] == "other"


def test_solve_with_bm25_shows_the_chosen_tools(spec: Path) -> None:
    with ScriptedOpenAI() as model:
        model.push("```python\nprint(len(list_book_reviews(book_id=20)))\n```")
        env = {"OPENAI_BASE_URL": model.base_url, "ATC_MODEL": "scripted-model", "ATC_EMBED_MODEL": "none"}
        proc = atc("solve", "How many reviews does book 20 have?", "--tools", str(spec), "--sandbox", "local",
                   "--retriever", "bm25", "--top-k", "3", "--json", env=env)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["retriever"] == "bm25" and len(doc["tools"]) == 3 and "list_book_reviews" in doc["tools"]
        prompt = model.request_text(0)
        shown = [name for name in ("list_book_reviews", "create_order", "get_stats") if f"{name}(" in prompt]
        assert "list_book_reviews" in shown and all(n in doc["tools"] for n in shown)
        proc = atc("solve", "x", "--tools", str(spec), "--retriever", "nosuch", env=env)
        assert proc.returncode == 2 and "unknown retriever" in proc.stderr
        no_traceback(proc)
