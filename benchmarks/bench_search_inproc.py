"""Search over tools held in the process (issue 33, item 4): ``atc.search(query, tools)`` with
thousands of tools given directly, call after call in one process.

The tools are the pools of the public retrieval sets (``retrieval_sets.all_sets``: ToolE,
ToolBench's 2,479 APIs, RestBench TMDB and Spotify, ToolAlpaca), read from ../shared/bench-data;
the requests are ToolBench's test queries. In the same run:

- before: a corpus built for every request (what ``atc.search(q, tools)`` did: documents,
  indexes and the static stage rebuilt each time), ``--before N`` requests;
- now: ``atc.search`` as it is (``atc.retrieval.inmemory``): the first request (which builds the
  corpus and starts computing the full vectors in the background), ``--filling N`` requests
  made meanwhile, the time until every vector is there, then ``--queries N`` later requests,
  p50 and p95; and a second list of equal tools (loaded again: the content key), its first
  request.

``ATC_HOME`` is a fresh temporary folder (no cached vectors), so the first requests embed what
they short-list, as a first run on a machine does. Run: ``python benchmarks/bench_search_inproc.py``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _data() -> Path:
    here = Path(__file__).resolve()
    return next((p / "shared" / "bench-data" for p in here.parents if (p / "shared" / "bench-data").is_dir()),
                here.parents[2] / "shared" / "bench-data")


def _pool() -> tuple[list, list[str], list[str]]:  # type: ignore[type-arg]
    """The tools, ToolBench's requests (3-4 sentences) and ToolE's one-line requests."""
    import retrieval_sets

    retrieval_sets.DATA = _data()
    sets = retrieval_sets.all_sets(None)
    tools, seen = [], set()
    for s in sets:
        for t in s.tools:
            if (t.collection, t.name) not in seen:
                seen.add((t.collection, t.name))
                tools.append(t)
    long = [q.text for s in sets if s.name == "ToolBench" for q in s.queries]
    short = [q.text for s in sets if s.name == "ToolE single" for q in s.queries]
    return tools, long, short


def _stored_index(tools: list, long: list[str], short: list[str]) -> tuple[float, float]:  # type: ignore[type-arg]
    """p50 seconds of ``search_store`` over the same tools imported into the store of ATC_HOME,
    the full vectors computed first (the in-memory fill left them in the vector cache)."""
    import statistics as stats

    from atc.config import atc_home
    from atc.retrieval.api import search_store
    from atc.retrieval.index import open_index
    from protocols.model import Collection
    from protocols.store import Store

    store = Store(atc_home())
    by_name: dict[str, list] = {}  # type: ignore[type-arg]
    for t in tools:
        by_name.setdefault(t.collection, []).append(t)
    for name, members in by_name.items():
        store.add(Collection(name=name, tools=members))
    open_index(atc_home(), store=store)
    search_store(long[0], 5, "hybrid", home=atc_home())  # embeds what the cache lacks, once
    out = []
    for group in (long, short):
        times = []
        for q in group:
            t0 = time.perf_counter()
            search_store(q, 5, "hybrid", home=atc_home())
            times.append(time.perf_counter() - t0)
        out.append(stats.median(times))
    return out[0], out[1]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--before", type=int, default=2)
    ap.add_argument("--filling", type=int, default=5, help="requests made while the vectors are being computed")
    ap.add_argument("--stored", action="store_true", help="also the same tools imported into a store, searched "
                                                          "in process (the baseline: what the stored index costs)")
    args = ap.parse_args()
    os.environ["ATC_HOME"] = tempfile.mkdtemp(prefix="bench-inproc-")
    os.environ.setdefault("ATC_SEARCH_SERVER", "off")
    # The background fill stays as a user has it (on by default): with it off, every request
    # computes the full vectors of the tools it short-lists, which is not the steady state.
    tools, queries, short = _pool()
    queries = queries[: args.filling + args.queries + 1]
    short = short[: args.queries]
    import atc
    from atc.config import atc_home
    from atc.retrieval.api import make_retriever
    from atc.retrieval.corpus import MemoryCorpus

    print(f"{len(tools)} tools given directly, {len(queries)} ToolBench requests")
    before = []
    for q in queries[: args.before]:
        t0 = time.perf_counter()
        make_retriever(None, MemoryCorpus(tools, home=atc_home())).search(q, 5)
        before.append(time.perf_counter() - t0)
    from atc.retrieval.inmemory import shared_corpus

    t0 = time.perf_counter()
    first = atc.search(queries[0], tools, k=5)
    first_s = time.perf_counter() - t0
    filling = []
    corpus = shared_corpus(tools, home=atc_home())
    for q in queries[1: 1 + args.filling]:
        t0 = time.perf_counter()
        atc.search(q, tools, k=5)
        filling.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    if corpus.filled is not None:
        corpus.filled.wait()
    filled_s = time.perf_counter() - t0 + sum(filling)
    later = []
    for q in queries[1 + args.filling: 1 + args.filling + args.queries]:
        t0 = time.perf_counter()
        atc.search(q, tools, k=5)
        later.append(time.perf_counter() - t0)
    lines = []
    for q in short:
        t0 = time.perf_counter()
        atc.search(q, tools, k=5)
        lines.append(time.perf_counter() - t0)
    from atc.retrieval.embedders import make_embedder
    from atc.retrieval.hybrid import sentences

    embedder = make_embedder()
    embeds = {"long": [], "short": []}  # the request's own embedding: what the stored index pays too
    for kind, group in (("long", queries[1 + args.filling: 1 + args.filling + args.queries]), ("short", short)):
        for q in group:
            t0 = time.perf_counter()
            if embedder is not None:
                embedder.embed(sentences(q) or [q])
            embeds[kind].append(time.perf_counter() - t0)
    stored = _stored_index(tools, queries[1 + args.filling: 1 + args.filling + args.queries], short) \
        if args.stored else None
    again, _, _ = _pool()  # equal tools, other objects
    t0 = time.perf_counter()
    atc.search(queries[1], again, k=5)
    equal_s = time.perf_counter() - t0
    p50, p95 = statistics.median(later), sorted(later)[int(0.95 * (len(later) - 1))]
    base = statistics.median(before) if before else float("nan")
    print(f"retriever: {first.retriever}")
    print(f"before (a corpus per request): {[_ms(b) for b in before]} ms, median {_ms(base)} ms")
    print(f"now: first request {_ms(first_s)} ms; while the full vectors are computed in the background: "
          f"{[_ms(f) for f in filling]} ms; they were all there {filled_s:.1f} s after the first request")
    print(f"now, later requests: p50 {_ms(p50)} ms, p95 {_ms(p95)} ms ({len(later)} requests); "
          f"an equal list of new objects, first request {_ms(equal_s)} ms")
    med = statistics.median
    print(f"one-line requests (ToolE): p50 {_ms(med(lines))} ms, p95 {_ms(sorted(lines)[int(0.95 * (len(lines) - 1))])} ms")
    print(f"the request's embedding alone (the stored index pays it too): ToolBench p50 {_ms(med(embeds['long']))} ms, "
          f"one-line p50 {_ms(med(embeds['short']))} ms; so the rest of a request (ranking, the corpus found): "
          f"ToolBench {_ms(p50 - med(embeds['long']))} ms, one-line {_ms(med(lines) - med(embeds['short']))} ms")
    if stored is not None:
        print(f"the same tools imported into a store (ATC_HOME), searched in process (search_store, its "
              f"vectors all there): ToolBench p50 {_ms(stored[0])} ms, one-line p50 {_ms(stored[1])} ms; "
              f"given directly / stored: {p50 / stored[0]:.2f}x, {med(lines) / stored[1]:.2f}x")
    print(f"ratio: later p50 is {base / p50:.0f}x faster than before (goal: later p50 <= 10 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
