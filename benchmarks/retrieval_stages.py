"""Issue #25, round 2: the two-stage hybrid's quality against the one-stage one, per public set.

``bench_retrieval.py --no-quality --stages``. Every row runs the product's retrievers
(``HybridRetriever`` over a ``MemoryCorpus``) with the tools' full vectors from onnxruntime int8
and the requests' from the exact model (what ships), all read from the bench's vector cache
(``--encoders`` computes them), so that rows differ only in what is said:

* one stage: every tool's full vector (the hybrid as shipped before);
* two stages: the static first stage (static.py: the model's token embeddings, log-rank weights)
  over every tool, the full model over its first ``SHORT_LIST`` (50, 64 as shipped, 80);
* the static stage alone (its vectors in place of the full ones);
* the choices made on the way, as two-stage rows: token weights by the corpus's IDF instead of
  the vocabulary rank, or none; rows distilled by the full model ("[CLS] token [SEP]",
  model2vec-style, when ``static-table.npy`` of ``--encoders`` is in the cache) instead of the
  input embeddings.

nDCG@5 on all queries, and on the dev split (20% by hash of the query, where choices are made).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval_sets import RetrievalSet, all_sets

Key = tuple[str, str]


def ndcg(ranked: Sequence[Key], gold: set[Key], k: int = 5) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, key in enumerate(list(ranked)[:k]) if key in gold)
    return dcg / sum(1 / math.log2(i + 2) for i in range(min(len(gold), k)))


class Cached:
    """Vectors from the bench's cache under ``name``: requests exact, tools int8 (computed by
    ``--encoders``; a missing one is computed by ``model`` and cached)."""

    dim = 384

    def __init__(self, cache: Path, requests: str, documents: str, static: Any = None, models: Any = None) -> None:
        from atc.retrieval.embedders import VectorCache

        self.name = documents
        self.requests = VectorCache(cache, requests)
        self.documents = VectorCache(cache, documents)
        self.models = models
        if static is not None:
            self.static = static

    def _get(self, cache: Any, texts: Sequence[str], which: str) -> Any:
        import numpy as np

        from atc.retrieval.embedders import text_hash

        hashes = [text_hash(t) for t in texts]
        found = cache.get(hashes)
        missing = [i for i, v in enumerate(found) if v is None]
        if missing:
            model = self.models[which]()
            computed = model.embed([texts[i] for i in missing])
            cache.put([hashes[i] for i in missing], computed)
            for i, v in zip(missing, computed, strict=True):
                found[i] = v
        return np.vstack(found)

    def embed(self, texts: Sequence[str]) -> Any:
        return self._get(self.requests, texts, "requests")

    def embed_documents(self, texts: Sequence[str]) -> Any:
        return self._get(self.documents, texts, "documents")


def _statics(cache: Path, sets: Sequence[RetrievalSet]) -> dict[str, Any]:
    """The static stage as shipped and the variants measured against it."""
    import numpy as np

    from atc.retrieval.doc import docs_of
    from atc.retrieval.static import StaticEmbedder

    shipped = StaticEmbedder()
    texts = [t for s in sets for d in docs_of(s.tools) for t in d.views]

    class CorpusIdf(StaticEmbedder):
        def weights(self) -> Any:
            if self._weights is None:
                df = np.zeros(len(self._table))
                for seq in self.token_ids(texts):
                    df[list(set(seq))] += 1
                self._weights = np.log((len(texts) + 1) / (df + 0.5)).astype(np.float32)
            return self._weights

    class Unweighted(StaticEmbedder):
        def weights(self) -> Any:
            return np.ones(len(self._table), dtype=np.float32)

    out: dict[str, Any] = {"shipped": shipped, "IDF of the sets' tools": CorpusIdf(), "unweighted": Unweighted()}
    distilled = cache / "static-table.npy"
    if distilled.exists():
        table = np.load(distilled)

        class Distilled(StaticEmbedder):
            def __init__(self) -> None:
                super().__init__()
                self._table = table

            def center(self) -> Any:
                return table.mean(axis=0)

        out["rows distilled by the full model"] = Distilled()
    return out


def run(cache: Path, toole_limit: int | None) -> None:
    import atc.retrieval.hybrid as hybrid
    from atc.retrieval.corpus import MemoryCorpus
    from atc.retrieval.hybrid import HybridRetriever

    sets = all_sets(toole_limit)
    statics = _statics(cache, sets)

    def models() -> dict[str, Any]:
        from atc.config import models_dir
        from atc.retrieval.minilm import MiniLM
        from atc.retrieval.onnx_minilm import OnnxMiniLM

        return {"requests": MiniLM, "documents": lambda: OnnxMiniLM(models_dir(), "int8", threads=1)}

    rows: list[tuple[str, str, int]] = [("one stage (before)", "", 0), ("static stage alone", "shipped", -1)]
    rows += [(f"two stages, short list {r}" + (" (shipped)" if r == 64 else ""), "shipped", r) for r in (50, 64, 80)]
    rows += [(f"two stages, {name}", name, 64) for name in statics if name != "shipped"]
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for rset in sets:
        for label, static_name, short in rows:
            static = statics.get(static_name)
            embedder = Cached(cache, "all-MiniLM-L6-v2", "bench-onnx-int8", models=models())
            corpus = MemoryCorpus(rset.tools, home=cache)
            if short == 0:
                retriever = HybridRetriever(corpus, embedder)
            elif short < 0:  # the static vectors in place of the full ones, one stage
                retriever = HybridRetriever(corpus, _StaticAsFull(static))
            else:
                embedder.static = static
                hybrid.SHORT_LIST = short
                retriever = HybridRetriever(corpus, embedder)
            scores = {"dev": [], "all": []}
            for q in rset.queries:
                hits = retriever.search(q.text, 5).hits
                value = ndcg([(h.collection, h.name) for h in hits], q.gold)
                scores["all"].append(value)
                if q.dev:
                    scores["dev"].append(value)
            hybrid.SHORT_LIST = 64
            table.setdefault(label, {})[rset.name] = (statistics.fmean(scores["all"]),
                                                      statistics.fmean(scores["dev"]) if scores["dev"] else math.nan)
        print(f"<!-- {rset.name} done -->", flush=True)
    names = [s.name for s in sets]
    print("\n## two stages: the hybrid's nDCG@5, all queries (dev split in brackets)\n")
    print("| hybrid | " + " | ".join(names) + " | worst against one stage |\n|---|" + "---|" * (len(names) + 1))
    base = table["one stage (before)"]
    for label in table:
        cells = [f"{table[label][n][0]:.3f} ({table[label][n][1]:.3f})" for n in names]
        worst = min(table[label][n][0] - base[n][0] for n in names)
        print(f"| {label} | " + " | ".join(cells) + f" | {worst:+.3f} |")


class _StaticAsFull:
    """The static stage standing in for the full model (one stage, its own vector cache name)."""

    dim = 384

    def __init__(self, static: Any) -> None:
        self.inner = static
        self.name = f"bench-{static.name}"

    def embed(self, texts: Sequence[str]) -> Any:
        return self.inner.embed(texts)
