"""The words and path facts every retriever shares (``protocols.bm25``), and BM25F with chain-aware
expansion measured on RestBench's real queries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from atc.retrieval.corpus import MemoryCorpus
from atc.retrieval.hybrid import Bm25Retriever
from protocols import Collection, Tool, load_data, load_spec
from protocols.bm25 import DocInfo, tokenize
from tests.support.apis.library import library_spec


def _route_names(c: Collection) -> dict[tuple[str, str], str]:
    return {(t.method, t.path): t.name for t in c.tools}


def test_tokenize() -> None:
    assert tokenize("getMovieCredits for_the Movies searching") == ["movie", "credit", "movie", "search"]
    assert tokenize("companies company status") == ["companie", "companie", "status"]
    assert tokenize("the of a") == []


def test_entities_a_path_needs() -> None:
    c = load_data(library_spec("http://127.0.0.1:9"))
    assert DocInfo.of(c.tool("list_book_reviews")).entities() == ["book"]  # type: ignore[arg-type]
    assert DocInfo.of(c.tool("get_author")).entities() == ["author"]  # type: ignore[arg-type]
    assert DocInfo.of(Tool(name="t", collection="c", path="/artists/{id}/albums")).entities() == ["artist"]


@pytest.mark.parametrize("dataset,spec,k,plain_min,chained_min", [
    # BM25F, measured when it replaced the plain BM25 (issue 32): tmdb 0.54 plain / 0.76 chained, spotify
    # 0.77 / 0.75 (top-10); the plain BM25 had 0.43 / 0.77 and 0.82 / 0.81
    ("tmdb", "tmdb_oas", 10, 0.40, 0.70),
    ("spotify", "spotify_oas", 10, 0.75, 0.75),
])
def test_restbench_gold_first_tool_in_top_k(bench_data: Path, dataset: str, spec: str, k: int,
                                            plain_min: float, chained_min: float) -> None:
    c = load_spec(bench_data / f"restbench/specs/{spec}.json")
    routes = _route_names(c)
    queries = json.loads((bench_data / f"restbench/datasets/{dataset}.json").read_text())
    corpus = MemoryCorpus(c.tools)
    rates = {}
    for producers in (False, True):
        retriever = Bm25Retriever(corpus, producers=producers)
        hits = 0
        for q in queries:
            gold = routes.get(tuple(q["solution"][0].strip().split(" ", 1)))  # type: ignore[arg-type]
            hits += gold in [h.name for h in retriever.search(q["query"], k).hits]
        rates[producers] = hits / len(queries)
    assert rates[False] >= plain_min
    assert rates[True] >= chained_min
    assert rates[True] > 0.5  # a majority
