"""The encoders of all-MiniLM-L6-v2 side by side (``bench_retrieval.py --encoders``, issue #25).

Rows, each against the exact numpy model measured in the same run:

* quality: the hybrid's nDCG@5 (all queries) on the five public sets and the held-out ToolAlpaca
  set, with the tools' texts and the requests embedded by each encoder;
* speed: a request's embedding, p50/p95 (ToolBench requests, sentence by sentence as the hybrid
  embeds them, and one-line RestBench requests), interleaved so that every encoder sees the same
  load; tool texts embedded per second (three views a tool, so ``1000 / rate`` is the import's
  embedding time per 1,000 tools); the resident memory of a fresh process that loaded the encoder
  and embedded one request.

Encoders: ``numpy`` (exact, the baseline and the fallback), ``onnx fp32``, ``onnx int8`` (both
sides), ``auto`` (what ships: tool texts on int8, requests exact), ``static`` (a model2vec-style
static embedder distilled here from the same weights: each vocabulary token embedded alone by the
full model, the table centred, a text the IDF-weighted mean of its tokens' rows) and ``static,
exact re-rank`` (the static hybrid's first 50, ordered by the exact hybrid).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from retrieval_sets import RetrievalSet, all_sets

Key = tuple[str, str]


class Named:
    """An encoder under a name of the bench's own: its tools' and requests' vectors are cached
    under ``name`` and ``queries`` (encoders that give the same vectors share a cache)."""

    def __init__(self, name: str, inner: Any, documents: Any = None, queries: str | None = None) -> None:
        self.name, self.inner, self.dim = name, inner, 384
        self.documents = documents or inner
        self.queries = queries or name

    def embed(self, texts: Sequence[str]) -> Any:
        return self.inner.embed(texts)

    def embed_documents(self, texts: Sequence[str]) -> Any:
        return self.documents.embed(texts)


class StaticMiniLM:
    """The static embedder (see the module doc). ``table``: one unit row per vocabulary token."""

    dim = 384

    def __init__(self, cache: Path, idf_texts: Sequence[str]) -> None:
        import numpy as np

        from atc.retrieval.weights import model_dir
        from atc.retrieval.wordpiece import WordPiece

        folder = model_dir()
        assert folder is not None
        self.name = "bench-static"
        self.wordpiece = WordPiece(folder / "vocab.txt")
        path = cache / "static-table.npy"
        if not path.exists():
            from atc.retrieval.minilm import MiniLM

            model = MiniLM()
            tokens = [t for t, _ in sorted(self.wordpiece.vocab.items(), key=lambda kv: kv[1])]
            rows = np.zeros((len(tokens), 384), dtype=np.float32)
            for start in range(0, len(tokens), 2048):  # "[CLS] token [SEP]", mean-pooled
                ids = [[101, i, 102] for i in range(start, min(len(tokens), start + 2048))]
                rows[start:start + len(ids)] = model._forward(ids)
            cache.mkdir(parents=True, exist_ok=True)
            np.save(path, rows)
        table = np.load(path)
        table = table - table.mean(axis=0)  # the direction every token shares says nothing
        self.table = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-9)
        df = np.zeros(len(table))
        for text in idf_texts:
            for i in set(self.wordpiece.ids(text, special=False)):
                df[i] += 1
        self.idf = np.log((len(idf_texts) + 1) / (df + 0.5)).astype(np.float32)

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        out = np.zeros((len(texts), 384), dtype=np.float32)
        for r, text in enumerate(texts):
            ids = np.array(self.wordpiece.ids(text or " ", special=False) or [100])
            v = (self.table[ids] * self.idf[ids][:, None]).sum(axis=0)
            out[r] = v / max(float(np.linalg.norm(v)), 1e-9)
        return out


def encoders(cache: Path, models: Path, sets: Sequence[RetrievalSet]) -> dict[str, Any]:
    from atc.retrieval.minilm import MiniLM
    from atc.retrieval.onnx_minilm import OnnxMiniLM, onnx_available

    exact = MiniLM()
    exact.keep_resident()
    out: dict[str, Any] = {"numpy": Named("all-MiniLM-L6-v2", exact)}
    if onnx_available():
        fp32, int8 = OnnxMiniLM(models, "fp32", threads=1), OnnxMiniLM(models, "int8", threads=1)
        out["onnx fp32"] = Named("bench-onnx-fp32", fp32)
        out["onnx int8"] = Named("bench-onnx-int8", int8)
        out["auto: int8 tools, exact requests"] = Named("bench-onnx-int8", exact, documents=int8,
                                                        queries="all-MiniLM-L6-v2")
    from atc.retrieval.doc import docs_of

    texts = [t for s in sets for d in docs_of(s.tools) for t in d.views]
    out["static"] = Named("bench-static", StaticMiniLM(cache, texts))
    return out


def ndcg(ranked: Sequence[Key], gold: set[Key], k: int = 5) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, key in enumerate(list(ranked)[:k]) if key in gold)
    return dcg / sum(1 / math.log2(i + 2) for i in range(min(len(gold), k)))


def quality(sets: Sequence[RetrievalSet], found: dict[str, Any], cache: Path) -> None:
    from atc.retrieval.corpus import MemoryCorpus
    from atc.retrieval.embedders import VectorCache, doc_vectors, embed_cached
    from atc.retrieval.hybrid import HybridRetriever, sentences

    print("\n## encoders: the hybrid's nDCG@5 (all queries), each encoder for tools and requests\n")
    labels = [*found, "static, exact re-rank of its first 50"]
    print("| set | " + " | ".join(labels) + " |\n|---|" + "---|" * len(labels))
    for rset in sets:
        texts = sorted({t for q in rset.queries for t in (sentences(q.text) or [q.text])})
        rankers: dict[str, Callable[[str], list[tuple[int, float]]]] = {}
        corpus_of: dict[str, Any] = {}
        for label, enc in found.items():
            asked = Named(enc.queries, enc.inner)  # requests: the encoder's own embed, not embed_documents
            table = dict(zip(texts, embed_cached(asked, texts, VectorCache(cache, enc.queries)), strict=True))

            class Requests:  # the requests' vectors, computed in one batch above
                name, dim = label, 384

                def embed(self, batch: Sequence[str], table: dict[str, Any] = table) -> Any:
                    import numpy as np

                    return np.vstack([table[t] for t in batch])

            corpus = MemoryCorpus(rset.tools)
            corpus._vectors[label] = doc_vectors(enc, corpus.docs, VectorCache(cache, enc.name))
            rankers[label] = HybridRetriever(corpus, Requests()).fused  # type: ignore[assignment]
            corpus_of[label] = corpus
        row = []
        for label in labels:
            scores = []
            for q in rset.queries:
                if label.startswith("static, exact"):
                    first = {i for i, _ in (rankers["static"](q.text) or [])[:50]}
                    ranked = [(i, s) for i, s in (rankers["numpy"](q.text) or []) if i in first]
                    corpus = corpus_of["numpy"]
                else:
                    ranked = rankers[label](q.text) or []
                    corpus = corpus_of[label]
                from atc.retrieval.hybrid import finish

                hits = finish(corpus, ranked, 5)
                scores.append(ndcg([(h.collection, h.name) for h in hits], q.gold))
            row.append(f"{statistics.fmean(scores):.3f}")
        print(f"| {rset.name} | " + " | ".join(row) + " |", flush=True)


def _pct(samples: list[float]) -> str:
    samples = sorted(samples)
    return f"p50 {statistics.median(samples):.1f} ms, p95 {samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]:.1f} ms"


def speed(found: dict[str, Any], models: Path) -> None:
    from atc.retrieval.doc import docs_of
    from atc.retrieval.hybrid import sentences

    sets = {s.name: s for s in all_sets(10, held_out=False)}
    long = [sentences(q.text) or [q.text] for q in sets["ToolBench"].queries[:60]]
    short = [[q.text] for q in [*sets["TMDB"].queries, *sets["Spotify"].queries][:60]]
    docs = docs_of(sets["ToolBench"].tools[:300])
    views = [t for d in docs for t in d.views]
    print("\n## encoders: speed (one thread each, interleaved) and memory\n")
    print("| encoder | ToolBench request (its sentences) | one-line request | tool texts | per 1,000 tools "
          "| memory of a fresh process |\n|---|---|---|---|---|---|")
    lat: dict[str, dict[str, list[float]]] = {label: {"long": [], "short": []} for label in found}
    for group, queries in (("long", long), ("short", short)):
        for q in queries:
            for label, enc in found.items():
                t0 = time.perf_counter()
                enc.embed(q)
                lat[label][group].append((time.perf_counter() - t0) * 1000)
    for label, enc in found.items():
        t0 = time.perf_counter()
        enc.embed_documents(views)
        rate = len(docs) / (time.perf_counter() - t0)
        print(f"| {label} | {_pct(lat[label]['long'])} | {_pct(lat[label]['short'])} | {rate:.0f} tools/s "
              f"| {1000 / rate:.1f} s | {_memory(label, models)} |", flush=True)


_LOAD = {
    "numpy": "from atc.retrieval.minilm import MiniLM; m = MiniLM()",
    "onnx fp32": "from atc.retrieval.onnx_minilm import OnnxMiniLM; m = OnnxMiniLM(M, 'fp32', threads=1)",
    "onnx int8": "from atc.retrieval.onnx_minilm import OnnxMiniLM; m = OnnxMiniLM(M, 'int8', threads=1)",
    "auto: int8 tools, exact requests": "from atc.retrieval.embedders import LocalMiniLM; m = LocalMiniLM('auto', M)",
}


def _memory(label: str, models: Path) -> str:
    """Resident memory (VmRSS) of a fresh Python that loaded the encoder and embedded one request."""
    code = _LOAD.get(label)
    if code is None:
        return "(bench only)"
    script = (f"import pathlib; M = pathlib.Path({str(models)!r}); {code}; m.embed(['find a movie by its title']); "
              "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmRSS')][0])")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    return f"{int(out.stdout.strip()) / 1024:.0f} MB" if out.returncode == 0 else "failed"


def run(cache: Path, toole_limit: int | None, quality_rows: bool = True) -> None:
    from atc.config import models_dir

    models = Path(os.environ.get("ATC_MODELS_DIR") or cache / "models")
    os.environ.setdefault("ATC_MODELS_DIR", str(models))
    assert models_dir() == models
    sets = all_sets(toole_limit)
    found = encoders(cache, models, sets)
    if quality_rows:
        quality(sets, found, cache)
    speed(found, models)
    print(json.dumps({"encoders": list(found)}), file=sys.stderr)
