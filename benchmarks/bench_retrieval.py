"""Retrieval quality and speed: every built retriever on the public sets, and the index at 16,000 tools.

Quality (nDCG@5 and Recall@5, binary relevance) on ToolE single (a fixed 2,000-query sample by
hash: embedding all 20,550 queries with the numpy model takes too long on the shared machine) and
multi, StableToolBench's test queries over their 2,479-API pool, RestBench TMDB and Spotify, and
ToolAlpaca's evaluation APIs (held out: added after every setting was chosen, never tuned on).
Rows: BM25F (the lexical baseline; the plain BM25 of ``protocols.bm25`` it was once measured
against was removed in issue 32), dense (all-MiniLM-L6-v2 alone), the hybrid of BM25F and dense alone (the hybrid before the
character n-grams: weight 0.4 on BM25F) and the hybrid, on the dev split (hash of the query,
20%), the test split and all. ``--tune`` prints the fusion grid (BM25F and n-gram weights) on
the dev split (the chosen setting is the module constants of ``atc.retrieval.hybrid``).

Speed (``--speed``): a store of 17,353 tools (the ToolBench pool imported as 7 collections),
index build time and size, in-process p50/p95 per query, and ``atc tools search`` wall time
including process start (``python -c pass`` in the same run is the floor; the ``Store.search``
rebuild it was once compared with was removed in issue 32).

Encoders (``--encoders``, issue #25; retrieval_encoders.py): each encoder of the model (numpy,
onnxruntime fp32 and int8, the shipped mix, a static distilled one) on every set, and its speed
and memory. Probed knowledge (``--probed``): TMDB and Spotify with their response schemas
stripped, then probed against ``atc mock``, with and without the response fields in the index.

Two stages (``--stages``, ``--stages-speed [--before TREE]``; retrieval_stages.py,
retrieval_speed.py): the static first stage re-ranked by the full model on a short list, its
quality on every set and its speed at 17,353 tools, against the code before in the same run.

Usage: .venv/bin/python benchmarks/bench_retrieval.py [--tune] [--speed] [--no-quality] [--encoders] [--probed]
       [--stages] [--stages-speed [--before TREE]]
Set OPENBLAS_NUM_THREADS=1 on a shared machine (the numpy model is faster single-threaded there).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from retrieval_sets import RetrievalSet, all_sets  # noqa: E402

CACHE_HOME = Path(os.environ.get("ATC_BENCH_HOME", Path(tempfile.gettempdir()) / "atc-bench-retrieval"))
Key = tuple[str, str]


def ndcg_recall(ranked: Sequence[Key], gold: set[Key], k: int = 5) -> tuple[float, float]:
    top = list(ranked)[:k]
    dcg = sum(1 / math.log2(i + 2) for i, key in enumerate(top) if key in gold)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / ideal, len(gold & set(top)) / len(gold)


class QueryVectors:
    """The embedder, with the queries' vectors computed in one batch (and cached on disk)."""

    def __init__(self, embedder: Any, texts: Sequence[str]) -> None:
        from atc.retrieval.embedders import VectorCache, embed_cached
        from atc.retrieval.hybrid import sentences

        self.inner = embedder
        self.name = embedder.name
        self.dim = embedder.dim
        self.cache = VectorCache(CACHE_HOME, embedder.name)
        every = sorted({*texts, *(s for t in texts for s in sentences(t))})
        vectors = embed_cached(embedder, every, self.cache)
        self.table = {t: vectors[i] for i, t in enumerate(every)}

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        from atc.retrieval.embedders import embed_cached

        if all(t in self.table for t in texts):
            return np.vstack([self.table[t] for t in texts])
        return embed_cached(self.inner, list(texts), self.cache)


def score_set(rset: RetrievalSet, rank: Callable[[str], list[Key]]) -> dict[str, tuple[float, float, int]]:
    parts: dict[str, list[tuple[float, float]]] = {"dev": [], "test": [], "all": []}
    for q in rset.queries:
        n, r = ndcg_recall(rank(q.text), q.gold)
        parts["dev" if q.dev else "test"].append((n, r))
        parts["all"].append((n, r))
    return {p: (statistics.fmean(x[0] for x in v), statistics.fmean(x[1] for x in v), len(v))
            for p, v in parts.items() if v}


def retrievers(rset: RetrievalSet, embedder: Any) -> dict[str, Callable[[str], list[Key]]]:
    from atc.retrieval.corpus import MemoryCorpus
    from atc.retrieval.hybrid import Bm25Retriever, DenseRetriever, HybridRetriever

    corpus = MemoryCorpus(rset.tools, home=CACHE_HOME)

    def keys(result: Any) -> list[Key]:
        return [(h.collection, h.name) for h in result.hits]

    out: dict[str, Callable[[str], list[Key]]] = {
        "bm25f": lambda q: keys(Bm25Retriever(corpus).search(q, 5)),
    }
    if embedder is not None:
        qv = QueryVectors(embedder, [q.text for q in rset.queries])
        corpus.vectors(qv)
        out["dense (MiniLM)"] = lambda q: keys(DenseRetriever(corpus, qv).search(q, 5))
        out["hybrid, no n-grams (before)"] = lambda q: keys(HybridRetriever(corpus, qv, alpha=0.4, chars=0.0)
                                                             .search(q, 5))
        out["hybrid"] = lambda q: keys(HybridRetriever(corpus, qv).search(q, 5))
        out["_corpus"] = corpus  # type: ignore[assignment]
        out["_qv"] = qv  # type: ignore[assignment]
    return out


def quality(sets: list[RetrievalSet], embedder: Any, tune: bool) -> None:
    print("\n## quality: nDCG@5 / Recall@5 (dev | test | all)\n")
    print("| set | tools | queries | retriever | dev nDCG | test nDCG | all nDCG | all R@5 |")
    print("|---|---|---|---|---|---|---|---|")
    grids: dict[str, dict[tuple[str, float, float], float]] = {}
    for rset in sets:
        started = time.perf_counter()
        found = retrievers(rset, embedder)
        corpus = found.pop("_corpus", None)
        qv = found.pop("_qv", None)
        for name, rank in found.items():
            res = score_set(rset, rank)
            print(f"| {rset.name} | {len(rset.tools)} | {len(rset.queries)} | {name} | {res['dev'][0]:.3f} | "
                  f"{res['test'][0]:.3f} | {res['all'][0]:.3f} | {res['all'][1]:.3f} |", flush=True)
        if tune and corpus is not None and "held out" not in rset.name:  # never tuned on
            from atc.retrieval.hybrid import HybridRetriever

            dev = RetrievalSet(rset.name, rset.tools, [q for q in rset.queries if q.dev])
            grid: dict[tuple[str, float, float], float] = {}
            for fusion in ("score", "rrf"):
                for alpha in (0.15, 0.2, 0.25, 0.3, 0.35, 0.4):
                    for chars in (0.0, 0.1, 0.15, 0.2, 0.25, 0.3):
                        h = HybridRetriever(corpus, qv, fusion=fusion, alpha=alpha, chars=chars)
                        grid[(fusion, alpha, chars)] = score_set(
                            dev, lambda q, h=h: [(x.collection, x.name) for x in h.search(q, 5).hits])["dev"][0]
            grids[rset.name] = grid
        print(f"<!-- {rset.name}: {time.perf_counter() - started:.1f} s -->", file=sys.stderr)
    if grids:
        print("\n## fusion grid, dev nDCG@5 (macro mean over sets)\n")
        settings = next(iter(grids.values())).keys()
        for s in settings:
            per = [grids[n][s] for n in grids]
            print(f"{s[0]:>5} alpha={s[1]:.2f} chars={s[2]:.2f}: mean {statistics.fmean(per):.4f}  " +
                  " ".join(f"{n}={grids[n][s]:.3f}" for n in grids))


# -- speed -------------------------------------------------------------------------------------


def _percentiles(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return statistics.median(samples), samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def speed(embedder: Any, runs: int) -> None:
    from atc.retrieval.api import make_retriever
    from atc.retrieval.index import index_dir, update_index
    from protocols.model import Collection
    from protocols.store import Store

    tb = next(s for s in all_sets(10, held_out=False) if s.name == "ToolBench")
    home = Path(tempfile.mkdtemp(prefix="atc-bench-16k-"))
    try:
        store = Store(home)
        copies = 7
        started = time.perf_counter()
        for c in range(copies):
            store.add(Collection(name=f"tb{c}", tools=[_copy(t, f"tb{c}") for t in tb.tools], source="bench",
                                 source_format="toolbench"))
        store_s = time.perf_counter() - started
        if embedder is not None:  # the pool's vectors, computed by the quality rows (or a run before)
            cached = CACHE_HOME / "embeddings"
            if cached.is_dir():
                shutil.copytree(cached, home / "embeddings")
        n = len(tb.tools) * copies
        queries = [q.text for q in tb.queries[:60]]
        print(f"\n## speed at {n:,} tools ({copies} copies of the ToolBench pool), {len(queries)} queries\n")
        print(f"store import (not part of the index): {store_s:.1f} s")
        # Vectors of identical texts come from the cache: the copies' embedding cost is that of one
        # pool (measured as embed_s below, on an empty cache).
        rows: list[str] = []
        started = time.perf_counter()
        update_index(home, store=store, embedder=None)
        bm25_build = time.perf_counter() - started
        gen = max((p for p in index_dir(home).iterdir() if p.name.startswith("gen-")), key=lambda p: p.stat().st_mtime)
        rows.append(f"| index build, BM25 only | {bm25_build * 1000:.0f} ms | size {_size(gen) / 1e6:.1f} MB |")
        if embedder is not None:
            started = time.perf_counter()
            update_index(home, store=store, embedder=embedder)
            hybrid_build = time.perf_counter() - started
            gen = max((p for p in index_dir(home).iterdir() if p.name.startswith("gen-")),
                      key=lambda p: p.stat().st_mtime)
            rows.append(f"| index build with vectors (cached texts) | {hybrid_build * 1000:.0f} ms | "
                        f"size {_size(gen) / 1e6:.1f} MB |")
        from atc.retrieval.index import open_index

        index = open_index(home, store=Store(home))
        names = ["bm25"] + (["hybrid"] if embedder is not None else [])
        for name in names:
            r = make_retriever(name, index, embedder=embedder)
            r.search(queries[0], 5)
            lat = []
            for q in queries:
                t0 = time.perf_counter()
                r.search(q, 5)
                lat.append((time.perf_counter() - t0) * 1000)
            p50, p95 = _percentiles(lat)
            rows.append(f"| in-process query, {name} (index open) | p50 {p50:.2f} ms | p95 {p95:.2f} ms |")
        if embedder is not None:
            one_line = [q.text for s in all_sets(10, held_out=False) if s.name in ("TMDB", "Spotify")
                        for q in s.queries][:60]
            r = make_retriever("hybrid", index, embedder=embedder)
            lat = []
            for q in one_line:
                t0 = time.perf_counter()
                r.search(q, 5)
                lat.append((time.perf_counter() - t0) * 1000)
            p50, p95 = _percentiles(lat)
            rows.append(f"| in-process query, hybrid, one-line requests (index open) | p50 {p50:.2f} ms | "
                        f"p95 {p95:.2f} ms |")
            from atc.retrieval.hybrid import HybridRetriever, sentences

            # The same run, the hybrid as before the n-grams (two signals), and the n-grams alone.
            before = HybridRetriever(index, embedder, alpha=0.4, chars=0.0)
            before.search(queries[0], 5)
            lat = []
            for q in queries:
                t0 = time.perf_counter()
                before.search(q, 5)
                lat.append((time.perf_counter() - t0) * 1000)
            p50, p95 = _percentiles(lat)
            rows.append(f"| in-process query, hybrid without n-grams (before) | p50 {p50:.2f} ms | p95 {p95:.2f} ms |")
            from atc.retrieval.chargrams import CharGramIndex

            docs = index.all_docs()
            started = time.perf_counter()
            CharGramIndex.build(docs)
            built = time.perf_counter() - started
            grams_mb = sum((index.folder / f).stat().st_size for f in ("grams.json", "grams.i32", "grams.f32")) / 1e6
            rows.append(f"| n-gram index build (part of the build with vectors) | {built * 1000:.0f} ms | "
                        f"size {grams_mb:.1f} MB |")
            started = time.perf_counter()
            CharGramIndex.open(index.folder).score_array(queries[0])
            rows.append(f"| n-gram index open + first query | {(time.perf_counter() - started) * 1000:.0f} ms | |")
            lat = []
            for q in queries:
                t0 = time.perf_counter()
                index.chargrams.score_array(q)
                lat.append((time.perf_counter() - t0) * 1000)
            p50, p95 = _percentiles(lat)
            rows.append(f"| in-process, the n-gram scores alone (part of hybrid) | p50 {p50:.2f} ms | p95 {p95:.2f} ms |")
            lat = []
            for q in queries:
                t0 = time.perf_counter()
                embedder.embed(sentences(q) or [q])
                lat.append((time.perf_counter() - t0) * 1000)
            p50, p95 = _percentiles(lat)
            rows.append(f"| in-process, the query's embedding alone (part of hybrid) | p50 {p50:.2f} ms | "
                        f"p95 {p95:.2f} ms |")
        import atc.retrieval.index as index_module
        import protocols.store as store_module

        cold = []
        for q in queries[:10]:
            # Opened for it: nothing of this process's caches of parsed files (see the next rows).
            index_module._OPENED.clear()
            store_module._PARSED.clear()
            t0 = time.perf_counter()
            i2 = open_index(home, store=Store(home))
            make_retriever("bm25", i2).search(q, 5)
            cold.append((time.perf_counter() - t0) * 1000)
        p50, p95 = _percentiles(cold)
        rows.append(f"| in-process query, bm25, index opened for it | p50 {p50:.2f} ms | p95 {p95:.2f} ms |")
        # What a Python caller sees: atc.search(...) again and again in one process (the store's
        # and the index's files are parsed once per version, the model loaded once).
        from atc.retrieval.api import search as atc_search

        for name in names:
            atc_search(queries[0], home=home, retriever=name)
            lat = []
            for q in queries:
                t0 = time.perf_counter()
                atc_search(q, home=home, retriever=name)
                lat.append((time.perf_counter() - t0) * 1000)
            p50, p95 = _percentiles(lat)
            rows.append(f"| atc.search(query, retriever={name!r}), repeated in one process | p50 {p50:.2f} ms | "
                        f"p95 {p95:.2f} ms |")
        # Wall times of whole commands. "cold": every command on its own (ATC_SEARCH_SERVER=off);
        # "warm server": the same commands answered by the store's search server (started once,
        # before the rows). Each run takes the next query of the list (long ToolBench requests of
        # 3-4 sentences, and one-line RestBench requests, closer to what a person types), so no
        # row sees one query only.
        short = [q.text for s in all_sets(10, held_out=False) if s.name in ("TMDB", "Spotify") for q in s.queries][:60]
        env = {**os.environ, "ATC_HOME": str(home), "OPENBLAS_NUM_THREADS": "1", "ATC_SEARCH_SERVER": "off"}
        warm_env = {**env, "ATC_SEARCH_SERVER": "auto"}
        atc = str(Path(sys.executable).parent / "atc")

        def search_cmd(*flags: str) -> Callable[[str], list[str]]:
            return lambda q: [atc, "tools", "search", q, *flags, "--json"]

        cmds: dict[str, tuple[Callable[[str], list[str]], dict[str, str], list[str]]] = {
            "python -c pass": (lambda q: [sys.executable, "-c", "pass"], env, queries),
            "atc tools search --retriever bm25, cold": (search_cmd("--retriever", "bm25"), env, queries),
            "atc tools search --retriever bm25, warm server": (search_cmd("--retriever", "bm25"), warm_env, queries),
        }
        if embedder is not None:
            cmds.update({
                "atc tools search (hybrid), cold, ToolBench requests": (search_cmd(), env, queries),
                "atc tools search (hybrid), warm server, ToolBench requests": (search_cmd(), warm_env, queries),
                "atc tools search (hybrid), cold, one-line requests": (search_cmd(), env, short),
                "atc tools search (hybrid), warm server, one-line requests": (search_cmd(), warm_env, short),
            })
        started = time.perf_counter()
        subprocess.run([atc, "tools", "server", "start"], env=warm_env, check=True, capture_output=True)
        rows.append(f"| search server start (until it answers) | {(time.perf_counter() - started) * 1000:.0f} ms | |")
        walls: dict[str, list[float]] = {c: [] for c in cmds}
        try:
            for i in range(runs * 3):
                for label, (make, e, qs) in cmds.items():  # interleaved: all rows see the same load
                    t0 = time.perf_counter()
                    subprocess.run(make(qs[i % len(qs)]), env=e, check=True, capture_output=True)
                    walls[label].append((time.perf_counter() - t0) * 1000)
            status = json.loads(subprocess.run([atc, "tools", "server", "status", "--json"], env=warm_env,
                                               capture_output=True, text=True).stdout)
            if status.get("pid"):
                rss = [line.split()[1] for line in Path(f"/proc/{status['pid']}/status").read_text().splitlines()
                       if line.startswith("VmRSS")]
                rows.append(f"| search server's resident memory after {status.get('queries')} queries | "
                            f"{int(rss[0]) / 1024:.0f} MB | |")
        finally:
            subprocess.run([atc, "tools", "server", "stop"], env=warm_env, capture_output=True)
        if embedder is not None:
            # The same warm rows as a user's machine runs them: BLAS with its default threads (the
            # server is started again without OPENBLAS_NUM_THREADS=1; the commands themselves do
            # not embed).
            free = {k: v for k, v in warm_env.items() if k != "OPENBLAS_NUM_THREADS"}
            subprocess.run([atc, "tools", "server", "start"], env=free, check=True, capture_output=True)
            threaded = {f"{label} (default BLAS threads)": (make, free, qs) for label, (make, e, qs) in cmds.items()
                        if e is warm_env and "hybrid" in label}
            walls.update({label: [] for label in threaded})
            try:
                for i in range(runs * 3):
                    for label, (make, e, qs) in threaded.items():
                        t0 = time.perf_counter()
                        subprocess.run(make(qs[i % len(qs)]), env=e, check=True, capture_output=True)
                        walls[label].append((time.perf_counter() - t0) * 1000)
            finally:
                subprocess.run([atc, "tools", "server", "stop"], env=free, capture_output=True)
        for label, w in walls.items():
            p50, p95 = _percentiles(w)
            rows.append(f"| wall, {label} | p50 {p50:.0f} ms | p95 {p95:.0f} ms |")
        print("| what | time | |\n|---|---|---|")
        print("\n".join(rows))
    finally:
        shutil.rmtree(home, ignore_errors=True)


def embed_speed(n_tools: int = 400, n_queries: int = 60) -> None:
    """The numpy MiniLM against its merged version (``minilm_padded.py``), in the same run: model
    load, one query's embedding (with its sentences, as the hybrid asks), and tools per second at
    index time, on ToolBench texts, with the largest difference between their vectors."""
    import numpy as np
    from minilm_padded import PaddedMiniLM

    from atc.retrieval.doc import docs_of
    from atc.retrieval.hybrid import sentences
    from atc.retrieval.minilm import MiniLM

    tb = next(s for s in all_sets(10, held_out=False) if s.name == "ToolBench")
    docs = docs_of(tb.tools)[:n_tools]
    queries = [q.text for q in tb.queries[:n_queries]]
    models: dict[str, Any] = {}
    loads: dict[str, float] = {}
    for label, cls in (("before (padded)", PaddedMiniLM), ("after (packed)", MiniLM)):
        t0 = time.perf_counter()
        models[label] = cls()
        loads[label] = (time.perf_counter() - t0) * 1000
    lat: dict[str, list[float]] = {label: [] for label in models}
    for q in queries:
        for label, m in models.items():  # interleaved: both see the same load
            t0 = time.perf_counter()
            m.embed([q, *sentences(q)])
            lat[label].append((time.perf_counter() - t0) * 1000)
    texts = [d.dense_text for d in docs]
    views = [t for d in docs for t in d.views]
    rate: dict[str, float] = {}
    vectors: dict[str, Any] = {}
    for label, m in models.items():
        t0 = time.perf_counter()
        vectors[label] = m.embed(texts)
        rate[label] = len(texts) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    models["after (packed)"].embed(views)
    views_rate = len(docs) / (time.perf_counter() - t0)
    diff = float(np.abs(vectors["before (padded)"] - vectors["after (packed)"]).max())
    print(f"\n## the numpy MiniLM, before/after in one run ({len(queries)} ToolBench queries, {len(docs)} tools; "
          f"largest vector difference {diff:.1e})\n")
    print("| what | before (padded) | after (packed) |\n|---|---|---|")
    b, a = "before (padded)", "after (packed)"
    print(f"| model load | {loads[b]:.0f} ms | {loads[a]:.0f} ms |")
    pb, pa = _percentiles(lat[b]), _percentiles(lat[a])
    print(f"| a query + its sentences | p50 {pb[0]:.1f} ms, p95 {pb[1]:.1f} ms | p50 {pa[0]:.1f} ms, p95 {pa[1]:.1f} ms |")
    print(f"| index time, one text a tool | {rate[b]:.0f} tools/s | {rate[a]:.0f} tools/s |")
    print(f"| index time, three views a tool (what the index now embeds) | | {views_rate:.0f} tools/s |")


def probed(embedder: Any) -> None:
    """What probing adds to retrieval: RestBench TMDB and Spotify as shipped, with their response
    schemas stripped, and that copy after probing; the response fields indexed or not."""
    from retrieval_sets import stripped_and_probed

    from atc.retrieval.corpus import MemoryCorpus
    from atc.retrieval.hybrid import Bm25Retriever, HybridRetriever

    print("\n## probed knowledge: nDCG@5 (all queries), the response fields in the index or not\n")
    print("| set | tools with response fields | BM25F, fields off | BM25F, fields on | hybrid, fields off "
          "| hybrid, fields on |\n|---|---|---|---|---|---|")
    sets = {s.name: s for s in all_sets(10, held_out=False)}
    for which, label in (("tmdb", "TMDB"), ("spotify", "Spotify")):
        stripped, probed_set, documented = stripped_and_probed(which)
        for rset in (sets[label], stripped, probed_set):
            row = []
            for retriever in ("bm25", "hybrid"):
                if retriever == "hybrid" and embedder is None:
                    row += ["", ""]
                    continue
                for fields_on in (False, True):
                    corpus = MemoryCorpus(rset.tools, home=CACHE_HOME)
                    if not fields_on:
                        for d in corpus.docs:
                            d.fields["returns"] = ""
                    if retriever == "bm25":
                        r: Any = Bm25Retriever(corpus)
                    else:
                        qv = QueryVectors(embedder, [q.text for q in rset.queries])
                        corpus.vectors(qv)
                        r = HybridRetriever(corpus, qv)
                    res = score_set(rset, lambda q, r=r: [(h.collection, h.name) for h in r.search(q, 5).hits])
                    row.append(f"{res['all'][0]:.3f}")
            with_fields = sum(1 for d in MemoryCorpus(rset.tools).docs if d.fields.get("returns"))
            note = f" ({documented} documented by probing)" if rset is probed_set else ""
            print(f"| {rset.name} | {with_fields} of {len(rset.tools)}{note} | " + " | ".join(row) + " |", flush=True)


def _copy(tool: Any, collection: str) -> Any:
    from dataclasses import replace

    return replace(tool, collection=collection)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tune", action="store_true", help="print the fusion grid on the dev split")
    parser.add_argument("--speed", action="store_true", help="the 16k-tool speed rows")
    parser.add_argument("--no-quality", action="store_true")
    parser.add_argument("--toole-limit", type=int, default=2000)
    parser.add_argument("-n", type=int, default=7, help="runs per wall-time row")
    parser.add_argument("--encoders", action="store_true", help="each encoder's quality, speed and memory")
    parser.add_argument("--encoder-speed", action="store_true", help="each encoder's speed and memory only")
    parser.add_argument("--probed", action="store_true", help="TMDB and Spotify stripped, then probed")
    parser.add_argument("--stages", action="store_true", help="the two-stage hybrid's quality against one stage")
    parser.add_argument("--stages-speed", action="store_true",
                        help="the two-stage hybrid's speed at 17,353 tools against the code before (--before)")
    parser.add_argument("--before", type=Path, default=None, metavar="TREE",
                        help="a source tree of the code before (git archive COMMIT atc protocols sandbox probes)")
    args = parser.parse_args(argv)
    from atc.retrieval.embedders import make_embedder

    embedder = make_embedder()
    print(f"embedder: {embedder.name if embedder else 'none (BM25 only)'}; vector cache {CACHE_HOME}")
    exact = embedder
    if getattr(embedder, "runtime", None) is not None:  # the local model: these rows are the exact one's
        from atc.retrieval.embedders import LocalMiniLM

        exact = LocalMiniLM("numpy")
    if not args.no_quality:
        quality(all_sets(args.toole_limit), exact, args.tune)
    if args.encoders or args.encoder_speed:
        import retrieval_encoders

        retrieval_encoders.run(CACHE_HOME, args.toole_limit, quality_rows=args.encoders)
    if args.probed:
        probed(exact)
    if args.stages:
        import retrieval_stages

        retrieval_stages.run(CACHE_HOME, args.toole_limit)
    if args.stages_speed:
        import retrieval_speed

        os.environ.setdefault("ATC_MODELS_DIR", str(CACHE_HOME / "models"))
        retrieval_speed.run(CACHE_HOME, args.before.resolve() if args.before else None, args.n)
    if args.speed and embedder is not None and embedder.name == "all-MiniLM-L6-v2":
        embed_speed()
    if args.speed:
        speed(embedder, args.n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
