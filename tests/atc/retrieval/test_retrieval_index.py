"""The persistent retrieval index: BM25F files, incremental updates, atomic switch, embeddings cache.

Embeddings come from a real HTTP server on 127.0.0.1 (tests/support/fakes/embedding_server.py) through
atc's OpenAI-compatible client, so request counts show what was (not) embedded again.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from atc.errors import ConfigError, ModelError
from atc.retrieval.api import make_retriever, search
from atc.retrieval.corpus import MemoryCorpus
from atc.retrieval.doc import doc_of, humanize
from atc.retrieval.embedders import RemoteEmbedder, make_embedder
from atc.retrieval.index import index_dir, open_index, update_index
from atc.retrieval.lexical import LexicalIndex
from protocols import Collection, Tool
from protocols.store import Store
from tests.support.fakes.embedding_server import FakeEmbeddings


def _tools(collection: str, words: list[str]) -> list[Tool]:
    return [Tool(name=f"get_{w}_info", collection=collection, path=f"/{w}", description=f"Details about a {w}.")
            for w in words]


def _coll(name: str, words: list[str]) -> Collection:
    return Collection(name=name, tools=_tools(name, words), source="test", source_format="openapi-3.0")


@pytest.fixture()
def emb_server() -> FakeEmbeddings:
    with FakeEmbeddings(dim=32) as server:
        yield server


def test_humanize_and_documents() -> None:
    assert humanize("getMovieCredits") == "get movie credits"
    assert humanize("get_movie_movie_id_credits") == "get movie movie id credits"
    d = doc_of(Tool(name="searchArtist", collection="c", path="/artists/{id}", description="Find artists.",
                    parameters={"type": "object", "properties": {"artist_name": {}}}))
    assert d.fields["name"] == "search artist" and d.fields["params"] == "artist name"
    assert d.dense_text.startswith("search artist: Find artists.")
    assert d.views == [d.dense_text, "search artist", "Find artists."]


def test_document_vector_is_the_mean_of_its_views(emb_server: FakeEmbeddings, tmp_path: Path) -> None:
    """The stored vector of a tool is the mean of its views' unit vectors, in memory and in the
    index alike, and a query ranks by the mean of its similarities to the views."""
    import numpy as np

    from atc.retrieval.embedders import doc_vectors

    emb = RemoteEmbedder("fake", emb_server.base_url)
    tools = _tools("zoo", ["lion", "tiger"])
    docs = MemoryCorpus(tools).docs
    views = [emb.embed(d.views) for d in docs]
    expected = np.vstack([v.mean(axis=0) for v in views])
    assert np.allclose(doc_vectors(emb, docs, None), expected, atol=1e-6)
    assert np.allclose(MemoryCorpus(tools, home=tmp_path).vectors(emb), expected, atol=1e-6)
    home = tmp_path / "home"
    store = Store(home)
    store.add(_coll("zoo", ["lion", "tiger"]))
    index = update_index(home, store=store, embedder=emb)
    assert index.meta["version"] == 5  # vectors of version 1 (one view) are never reused
    assert np.allclose(index.vectors(emb), expected, atol=1e-6)
    q = emb.embed(["lion"])[0]
    assert np.allclose(expected @ q, [float(np.mean(v @ q)) for v in views], atol=1e-6)


def test_lexical_roundtrip_and_field_weights(tmp_path: Path) -> None:
    tools = [Tool(name="weather_now", collection="c", description="Current conditions for a city."),
             Tool(name="city_guide", collection="c", description="Tips about the weather and places to see.")]
    docs = MemoryCorpus(tools).docs
    built = LexicalIndex.build(docs)
    scores = built.scores("weather")
    assert scores[0] > scores[1] > 0  # a word of the name weighs more than one of the description
    built.save(tmp_path)
    opened = LexicalIndex.open(tmp_path)
    assert opened.scores("weather city tips") == pytest.approx(built.scores("weather city tips"))
    assert opened.scores("nothing matches") == {}


def test_index_persists_and_updates_incrementally(emb_server: FakeEmbeddings, tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = Store(home)
    emb = RemoteEmbedder("fake", emb_server.base_url, batch_size=3)
    store.add(_coll("zoo", ["lion", "tiger", "zebra", "panda"]))
    update_index(home, store=store, embedder=emb)
    # Three views per tool (the sentence, the name, the description), batches of 3.
    assert len(emb_server.texts) == 12 and len(emb_server.requests) == 4
    store.add(_coll("farm", ["cow", "goat"]))
    index = update_index(home, store=store, embedder=emb)
    assert len(emb_server.texts) == 18  # only the new collection's two tools
    assert index.n == 6 and index.embedder == "openai:fake"
    store.remove("zoo")
    index = update_index(home, store=store, embedder=emb)
    assert len(emb_server.texts) == 18 and index.n == 2
    # Re-import with one tool changed: exactly that one is embedded again.
    changed = _coll("farm", ["cow", "goat"])
    changed.tools[1] = replace(changed.tools[1], description="Details about a goat, and its cheese.")
    store.add(changed)
    index = update_index(home, store=store, embedder=emb)
    # The name view did not change: it comes from the cache.
    assert emb_server.texts[18:] == [doc_of(changed.tools[1]).dense_text, "Details about a goat, and its cheese."]
    # A fresh process sees the same index, memory-mapped, and ranks with it.
    reopened = open_index(home, store=Store(home))
    assert reopened.folder == index.folder
    result = make_retriever("hybrid", reopened, embedder=emb).search("goat cheese", 1)
    assert result.retriever == "hybrid" and result.hits[0].name == "get_goat_info"
    assert make_retriever("bm25", reopened).search("cow", 1).hits[0].name == "get_cow_info"


def test_index_follows_a_store_changed_behind_its_back(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = Store(home)
    store.add(_coll("zoo", ["lion"]))
    assert open_index(home).n == 1
    store.add(_coll("farm", ["cow"]))  # Store.add alone does not update the index
    index = open_index(home)
    assert index.n == 2
    assert search("cow", home=home, k=1).hits[0].collection == "farm"


def test_an_index_of_an_older_version_is_rebuilt_from_the_store(tmp_path: Path) -> None:
    """Its documents lack fields of this version (protocol keys, response fields): none is reused."""
    import json

    home = tmp_path / "home"
    store = Store(home)
    store.add(_coll("zoo", ["lion", "tiger"]))
    folder = open_index(home).folder
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps({**meta, "version": meta["version"] - 1}))
    lines = [json.loads(line) for line in (folder / "docs.jsonl").read_text().splitlines()]
    (folder / "docs.jsonl").write_text("".join(json.dumps({k: v for k, v in d.items() if k != "k"}) + "\n"
                                               for d in lines))
    import atc.retrieval.index as index_module

    index_module._OPENED.clear()
    index = open_index(home)
    assert index.folder != folder and index.meta["version"] == meta["version"]
    assert all(index.doc(i).protocol for i in range(index.n))


def test_a_crash_mid_build_leaves_the_old_index_live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    store = Store(home)
    store.add(_coll("zoo", ["lion", "tiger"]))
    old = update_index(home, store=store)
    store.add(_coll("farm", ["cow"]))

    def crash(self: LexicalIndex, folder: Path) -> None:
        (folder / "postings.i32").write_bytes(b"\x00" * 3)  # half a file, then the process "dies"
        raise KeyboardInterrupt

    monkeypatch.setattr(LexicalIndex, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        update_index(home, store=store)
    monkeypatch.undo()
    assert (index_dir(home) / "CURRENT").read_text().strip() == old.folder.name
    assert sorted(p.name for p in index_dir(home).iterdir() if p.name.startswith("gen-")) == [old.folder.name]
    live = open_index(home, store=store, refresh=False)
    assert make_retriever("bm25", live).search("tiger", 1).hits[0].name == "get_tiger_info"
    assert open_index(home, store=store).n == 3  # the next reader catches up


def test_memory_corpus_caches_vectors_by_text(emb_server: FakeEmbeddings, tmp_path: Path) -> None:
    emb = RemoteEmbedder("fake", emb_server.base_url)
    tools = _tools("zoo", ["lion", "tiger", "zebra"])
    MemoryCorpus(tools, home=tmp_path).vectors(emb)
    assert len(emb_server.texts) == 9  # three views each
    more = tools + _tools("zoo", ["okapi"])
    vectors = MemoryCorpus(more, home=tmp_path).vectors(emb)
    assert len(emb_server.texts) == 12 and vectors is not None and vectors.shape == (4, 32)
    assert 0.0 < float((vectors[0] ** 2).sum()) <= 1.0 + 1e-5  # a mean of unit vectors


@pytest.mark.parametrize("mode,message", [("garbage", "not an embeddings list"), ("short", "2 vectors for 3"),
                                          ("error", "HTTP 500")])
def test_bad_embedding_servers_are_model_errors(mode: str, message: str) -> None:
    with FakeEmbeddings(mode=mode) as server:
        with pytest.raises(ModelError, match=message):
            RemoteEmbedder("fake", server.base_url).embed(["a", "b", "c"])


def test_embedding_dimension_change_and_server_down() -> None:
    with FakeEmbeddings(mode="dim") as server:
        emb = RemoteEmbedder("fake", server.base_url, batch_size=1)
        with pytest.raises(ModelError, match="changed the vector length"):
            emb.embed(["a", "b"])
        base = server.base_url
    with pytest.raises(ModelError, match="cannot be reached"):
        RemoteEmbedder("fake", base).embed(["a"])


def test_embedder_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATC_EMBED_MODEL", "none")
    assert make_embedder() is None
    with pytest.raises(ConfigError):
        make_embedder(required=True)
    monkeypatch.setenv("ATC_EMBED_MODEL", "text-embedding-3-small")
    with pytest.raises(ConfigError, match="no server"):
        make_embedder()
    monkeypatch.setenv("ATC_EMBED_BASE_URL", "http://127.0.0.1:9/v1")
    made = make_embedder()
    assert isinstance(made, RemoteEmbedder) and made.name == "openai:text-embedding-3-small"


def test_automatic_choice_embeds_only_small_new_specs(emb_server: FakeEmbeddings, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import atc.retrieval.api as api

    monkeypatch.setenv("ATC_EMBED_MODEL", "fake")
    monkeypatch.setenv("ATC_EMBED_BASE_URL", emb_server.base_url)
    monkeypatch.setattr(api, "MAX_AUTO_EMBED", 2)
    tools = _tools("zoo", ["lion", "tiger", "zebra"])
    first = search("tiger", tools, k=1, home=tmp_path)
    assert first.retriever == "bm25" and "3 tools have no vectors yet" in first.notes[0]
    assert emb_server.texts == []  # nothing was embedded for the automatic choice
    assert search("tiger", tools, k=1, retriever="hybrid", home=tmp_path).retriever == "hybrid"
    again = search("big cat with stripes", tools, k=1, home=tmp_path)  # now cached: hybrid
    assert again.retriever == "hybrid" and again.notes == []
    assert [h.tool.name for h in again] == [again.hits[0].name]  # hits carry their Tool, and iterate


def test_a_killed_build_leaves_a_directory_that_is_ignored_then_swept(tmp_path: Path) -> None:
    import os
    import time

    home = tmp_path / "home"
    store = Store(home)
    store.add(_coll("zoo", ["lion"]))
    live = update_index(home, store=store)
    half = index_dir(home) / "gen-deadbeef0000"  # what a SIGKILL mid-build leaves: no meta, no CURRENT switch
    half.mkdir()
    (half / "docs.jsonl").write_text('{"c": "zoo", "n": "trunc')
    assert open_index(home, store=store).folder == live.folder
    old = time.time() - 3600
    os.utime(half, (old, old))
    store.add(_coll("farm", ["cow"]))
    newer = open_index(home, store=store)
    assert newer.n == 2 and not half.exists()


def test_search_of_an_empty_store_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "empty"
    result = search("anything", home=home)
    assert result.hits == [] and result.retriever == "bm25" and not home.exists()


def test_bm25_needs_no_numpy(tmp_path: Path) -> None:
    """BM25 works where numpy is not installed (``import numpy`` fails in the child process)."""
    import subprocess
    import sys

    home = tmp_path / "home"
    Store(home).add(_coll("zoo", ["lion", "tiger"]))
    code = ("import sys; sys.modules['numpy'] = None\n"
            "from atc.retrieval.api import search\n"
            f"r = search('tiger', home={str(home)!r}, k=1)\n"
            "print(r.retriever, r.hits[0].name, 'numpy' in sys.modules and sys.modules['numpy'] is not None)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"ATC_EMBED_MODEL": "none", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["bm25", "get_tiger_info", "False"]


def test_open_index_is_reused_until_the_store_or_index_changes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = Store(home)
    store.add(_coll("zoo", ["lion", "tiger"]))
    update_index(home, store=store, embedder=None)
    first = open_index(home)
    assert open_index(home) is first and open_index(home, store=Store(home)) is first
    assert [h.name for h in search("lion", home=home, retriever="bm25").hits][:1] == ["get_lion_info"]
    Store(home).add(_coll("farm", ["cow"]))  # another process's import: the index is behind
    second = open_index(home)
    assert second is not first and second.n == 3 and open_index(home) is second
    assert [h.name for h in search("cow", home=home, retriever="bm25").hits][:1] == ["get_cow_info"]
    Store(home).remove("farm")
    assert open_index(home).n == 2
