"""The character n-gram index (the hybrid's third signal) and its place in the fusion and the store index.

Embeddings come from the real HTTP fake server on 127.0.0.1 (tests/support/fakes/embedding_server.py):
bags of hashed words, so "weatherforecast" shares nothing with "weather forecast" there, nor in
BM25F; only the n-grams see it.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from atc.retrieval.chargrams import GRAM_FIELDS, CharGramIndex, grams
from atc.retrieval.corpus import MemoryCorpus
from atc.retrieval.embedders import RemoteEmbedder
from atc.retrieval.hybrid import HybridRetriever
from atc.retrieval.index import open_index, update_index
from protocols import Collection, Tool
from protocols.store import Store
from tests.support.fakes.embedding_server import FakeEmbeddings

TOOLS = [
    Tool(name="weather_forecast", collection="c", description="Hourly forecast of rain and wind for a city."),
    Tool(name="cryptocurrency_prices", collection="c", description="Live prices of coins on exchanges."),
    Tool(name="translate_text", collection="c", description="Translate a paragraph between languages."),
    Tool(name="stock_quote", collection="c", description="The latest price of a listed company."),
]


@pytest.fixture()
def emb_server() -> FakeEmbeddings:
    with FakeEmbeddings(dim=32) as server:
        yield server


def test_grams_of_words() -> None:
    assert grams("Cat") == Counter({" ca": 1, "cat": 1, "at ": 1, " cat": 1, "cat ": 1, " cat ": 1})
    assert grams("a") == Counter({" a ": 1})  # shorter than three: the padded word once
    assert grams("ab") == Counter({" ab": 1, "ab ": 1, " ab ": 1})
    twice = grams("go go")
    assert twice[" go "] == 2 and sum(twice.values()) == 6


def test_scores_are_tfidf_dot_products() -> None:
    """Each score is the query's (1 + log tf) * idf weights against the document's unit-length
    weights, computed here from the definition."""
    docs = MemoryCorpus(TOOLS).docs
    index = CharGramIndex.build(docs)
    query = "weatherforecast for tomorrow"
    texts = [" ".join(d.fields[f] for f in GRAM_FIELDS) for d in docs]
    counted = [grams(t) for t in texts]
    n = len(docs)
    df = Counter(g for c in counted for g in c)

    def idf(g: str) -> float:
        return math.log((1 + n) / (1 + df[g])) + 1

    expected = []
    for c in counted:
        w = {g: (1 + math.log(tf)) * idf(g) for g, tf in c.items()}
        norm = math.sqrt(sum(v * v for v in w.values()))
        expected.append(sum((1 + math.log(tf)) * idf(g) * w.get(g, 0.0) / norm for g, tf in grams(query).items()))
    got = index.score_array(query)
    assert got.tolist() == pytest.approx(expected, rel=1e-5)
    assert int(got.argmax()) == 0  # the compound finds "weather forecast"
    assert MemoryCorpus(TOOLS).lexical.score_array("weatherforecast").max() == 0  # BM25F cannot


def test_save_and_open_give_the_same_scores(tmp_path: Path) -> None:
    index = CharGramIndex.build(MemoryCorpus(TOOLS).docs)
    assert not CharGramIndex.exists(tmp_path)
    index.save(tmp_path)
    reopened = CharGramIndex.open(tmp_path)
    for q in ("crypto coins", "translation", "zzzz"):
        assert reopened.score_array(q).tolist() == pytest.approx(index.score_array(q).tolist())
    assert reopened.score_array("zzzz").max() == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    CharGramIndex.build([]).save(empty)
    assert CharGramIndex.open(empty).score_array("anything").shape == (0,)


def test_hybrid_fuses_the_ngrams(emb_server: FakeEmbeddings) -> None:
    """The fused score is ALPHA * BM25F / best + CHARS * n-grams / best + the rest * the dense
    similarity mapped to [0, 1] between the pool's worst and best (here the pool is every tool)."""
    import numpy as np

    from atc.retrieval.hybrid import ALPHA, CHARS, DenseRetriever

    emb = RemoteEmbedder("fake", emb_server.base_url)
    corpus = MemoryCorpus(TOOLS)
    query = "crypto coins and the weatherforecast"
    lex = corpus.lexical.score_array(query)
    ngrams = corpus.chargrams.score_array(query)
    sims = DenseRetriever(corpus, emb).similarities(query)
    assert sims is not None and lex.max() > 0 and ngrams.max() > 0
    expected = (ALPHA * lex / lex.max() + CHARS * ngrams / ngrams.max()
                + (1 - ALPHA - CHARS) * (sims - sims.min()) / (sims.max() - sims.min()))
    fused = HybridRetriever(corpus, emb).fused(query)
    assert fused is not None and len(fused) == len(TOOLS)
    assert [score for _, score in sorted(fused)] == pytest.approx(expected.tolist(), rel=1e-5)
    assert [i for i, _ in fused] == sorted(range(len(TOOLS)), key=lambda i: (-expected[i], i))
    # The n-grams alone: "crypto" is a part of the tool's one word "cryptocurrency", which
    # neither BM25F nor the hashed bags of words see.
    alone = "crypto market value"
    assert corpus.lexical.score_array(alone)[1] == 0
    for fusion in ("score", "rrf"):
        assert HybridRetriever(corpus, emb, fusion=fusion, alpha=0.0, chars=1.0).search(alone, 1).hits[0].name == \
            "cryptocurrency_prices"
    assert int(np.argmax(corpus.chargrams.score_array(alone))) == 1
    for alpha, chars in ((0.7, 0.4), (-0.1, 0.2), (0.2, -0.1)):
        with pytest.raises(ValueError, match="fusion weights"):
            HybridRetriever(corpus, emb, alpha=alpha, chars=chars)


def test_store_index_writes_the_ngrams_with_its_vectors(emb_server: FakeEmbeddings, tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = Store(home)
    store.add(Collection(name="c", tools=TOOLS, source="test", source_format="openapi-3.0"))
    bm25_only = update_index(home, store=store, embedder=None)
    assert not CharGramIndex.exists(bm25_only.folder)  # a BM25-only import skips them
    # ... and a reader that asks builds them from the documents.
    memory = MemoryCorpus(store.get("c").tools).chargrams.score_array("weatherforecast")
    assert bm25_only.chargrams.score_array("weatherforecast").tolist() == pytest.approx(memory.tolist())
    emb = RemoteEmbedder("fake", emb_server.base_url)
    index = update_index(home, store=store, embedder=emb)
    assert CharGramIndex.exists(index.folder)
    reopened = open_index(home, store=Store(home))
    assert reopened.folder == index.folder
    assert reopened.chargrams.score_array("weatherforecast").tolist() == pytest.approx(memory.tolist())
    hit = HybridRetriever(reopened, emb, alpha=0.0, chars=1.0).search("weatherforecast please", 1).hits[0]
    assert hit.name == "weather_forecast"
    assert HybridRetriever(reopened, emb).search("weatherforecast please", 4).retriever == "hybrid"
