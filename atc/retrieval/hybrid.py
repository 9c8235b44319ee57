"""The LLM-free retrievers: ``bm25`` (BM25F), ``dense`` (embeddings alone) and ``hybrid`` (three signals, fused).

Fusion is normalised-score: the lexical (BM25F) and character n-gram (chargrams.py: of names
and groups) scores are divided by their best, the dense similarities mapped to [0, 1] between
the ``POOL``-th best and the best, and the fused score is ``ALPHA * lexical + CHARS * ngrams + (1 - ALPHA - CHARS) *
dense`` over the union of each side's top ``POOL``. The n-grams catch what whole words miss
(``weatherforecast``, ``crypto`` against ``cryptocurrency``). The dense side takes, per tool,
the best similarity to the whole query or to one of its sentences (a tool's vector is the mean
of three views of it: doc.doc_of, embedders.doc_vectors). Reciprocal-rank fusion is available
(``fusion="rrf"``) and was measured against it (benchmarks/RESULTS.md); the global settings below
were chosen on the dev split of the public sets, never per data set.

Every retriever ends with chain-aware expansion (``protocols.bm25.DocInfo``): right after a
hit that needs an entity's id (``/movie/{movie_id}/credits``) comes the best tool of the same
collection that finds such ids without needing one (``/search/movie``), unless already shown.

Two stages, for an embedder with a static first stage (the local model, static.py): stage one
ranks every tool: BM25F, the character n-grams and the cosine of the tools' static vectors with
the whole request's, fused as the one-stage hybrid fuses. Stage two
takes its first ``SHORT_LIST`` tools and fuses again with the full model's similarities in place
of the static ones: each tool's best similarity to one of the request's sentences, as the
one-stage hybrid computes it, from tool vectors computed when a search first short-lists the tool
(exact.py). The one-stage fusion maps the dense similarities to [0, 1] between the ``POOL``-th
best of all tools and the best; stage two knows the full model's similarities of its short list
only, so it takes the best among them, and estimates the ``POOL``-th best of all by a line fitted
from the short list's static similarities to its full ones, applied to the ``POOL``-th best
static similarity. The rest of stage one's ranking follows, below the short list.

A corpus of at most ``SHORT_LIST`` tools gets every full similarity, and exactly the one-stage
ranking. On the public sets, stage two after the static first stage stays within 0.003 nDCG@5 of
the one-stage hybrid on the full model's vectors (benchmarks/RESULTS.md, issue #25). Which tools
were short-listed depends on the request and the tools only, so a search gives the same answer
whether the full vectors were computed before or by it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from atc.retrieval.base import Embedder, Hit, SearchResult, register
from atc.retrieval.corpus import Corpus, MemoryCorpus
from atc.retrieval.duplicates import as_groups, collapse, copies_of
from atc.retrieval.embedders import make_embedder

if TYPE_CHECKING:
    import numpy as np

    from atc.retrieval.exact import Stages

__all__ = ["Bm25Retriever", "DenseRetriever", "HybridRetriever", "expand", "finish", "fuse_scores", "ALPHA", "CHARS",
           "POOL", "RRF_K", "SHORT_LIST", "stages_of", "hybrid_two_stage", "dense_two_stage"]

#: the weights of BM25F and of the character n-grams in the fused score (the embedder has the rest)
ALPHA = 0.3
CHARS = 0.15
POOL = 100
RRF_K = 60


_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")


def sentences(query: str, limit: int = 8) -> list[str]:
    """The sentences of a query of several (of 3 words or more), else none."""
    parts = [p for p in _SENTENCE_END.split(query.strip()) if len(p.split()) >= 3]
    return parts[:limit] if len(parts) > 1 else []


def _top(scores: dict[int, float], k: int) -> list[tuple[int, float]]:
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def _best(values: np.ndarray, depth: int) -> np.ndarray:
    """Indices of the ``depth`` largest values, best first (ties: the lower index first)."""
    # numpy: 60-120 ms to import, and a BM25-only search never needs it
    import numpy as np

    idx = np.arange(len(values))
    if len(values) > depth > 0:
        idx = np.argpartition(-values, depth - 1)[:depth]
    elif depth <= 0:
        idx = idx[:0]
    return idx[np.lexsort((idx, -values[idx]))]


def expand(corpus: Corpus, ranked: Sequence[tuple[int, float]], k: int,
           canon: Sequence[int] | None = None) -> list[tuple[int, float]]:
    """The first ``k`` of ``ranked`` with each hit's id producers inserted after it (see module
    doc); ``canon``: the shown copy of each document (duplicates.py), so that a producer with a
    copy elsewhere appears as that group's shown copy, and once."""
    out: list[tuple[int, float]] = []
    seen: set[int] = set()
    relevance = dict(ranked)
    for i, score in ranked:
        if len(out) >= k:
            break
        if i in seen:
            continue
        out.append((i, score))
        seen.add(i)
        for group in corpus.producers(i):
            cands = [j for j in group if (canon[j] if canon is not None else j) not in seen]
            if not cands:
                continue
            # Candidates come best-first by shape (search endpoints, short paths); relevance to
            # the query breaks in only among search endpoints of equal standing.
            best = max(cands[:8], key=lambda j: (relevance.get(j, 0.0) > 0, -cands.index(j)))
            best = canon[best] if canon is not None else best
            out.append((best, score))
            seen.add(best)
    return out[:k]


def finish(corpus: Corpus, ranked: Sequence[tuple[int, float]], k: int, producers: bool = True) -> list[Hit]:
    """The hits of a ranking: copies of one tool shown once (duplicates.py), then chain-aware
    expansion, then the first ``k``."""
    found = as_groups(corpus)
    ranked = collapse(found, ranked)
    top = expand(corpus, ranked, k, found[0] if found else None) if producers else ranked[:k]
    return _hits(corpus, top, found)


def _hits(corpus: Corpus, ranked: Sequence[tuple[int, float]], found: Any = None) -> list[Hit]:
    in_memory = isinstance(corpus, MemoryCorpus)  # the store's tools are read only when asked for
    out = []
    for i, score in ranked:
        d = corpus.doc(i)
        copies = [corpus.doc(j).key for j in copies_of(found, i)]
        out.append(Hit(collection=d.collection, name=d.name, score=float(score), description=d.summary,
                       tool=corpus.tool(i) if in_memory else None, duplicates=copies))
    return out


def fuse_scores(lexical: np.ndarray, ngrams: np.ndarray, sims: np.ndarray, alpha: float, chars: float,
                fusion: str = "score") -> list[tuple[int, float]]:
    """The first ``POOL`` of the fused ranking of three score arrays over the same documents
    (see the module doc), best first; ``fusion="rrf"``: reciprocal-rank fusion instead."""
    # numpy: 60-120 ms to import, and a BM25-only search never needs it
    import numpy as np

    hit = np.flatnonzero(lexical)
    lex_top = hit[_best(lexical[hit], POOL)]
    dense_top = _best(sims, POOL)
    dense_w = 1.0 - alpha - chars
    if chars > 0:
        hit = np.flatnonzero(ngrams)
        gram_top = hit[_best(ngrams[hit], POOL)]
    else:
        gram_top = np.zeros(0, dtype=np.int64)
    if fusion == "rrf":
        acc: dict[int, float] = {}
        for weight, top in ((alpha, lex_top), (chars, gram_top), (dense_w, dense_top)):
            for rank, i in enumerate(top):
                acc[int(i)] = acc.get(int(i), 0.0) + weight / (RRF_K + rank + 1)
        return _top(acc, POOL)
    # The union, sorted, by a mask: np.union1d would import numpy.ma (40 ms of a command's start).
    chosen = np.zeros(len(sims), dtype=bool)
    chosen[lex_top] = True
    chosen[gram_top] = True
    chosen[dense_top] = True
    candidates = np.flatnonzero(chosen)
    lex_max = float(lexical[lex_top[0]]) if len(lex_top) else 1.0
    gram_max = float(ngrams[gram_top[0]]) if len(gram_top) else 1.0
    dense_max = float(sims[dense_top[0]]) if len(dense_top) else 1.0
    dense_floor = float(sims[dense_top[-1]]) if len(dense_top) else 0.0
    span = (dense_max - dense_floor) or 1.0
    fused = (alpha * lexical[candidates] / (lex_max or 1.0)
             + chars * ngrams[candidates] / (gram_max or 1.0)
             + dense_w * np.maximum(sims[candidates] - dense_floor, 0.0) / span)
    order = np.lexsort((candidates, -fused))[:POOL]
    return [(int(candidates[j]), float(fused[j])) for j in order]


#: tools that stage one hands to the full model (64 measured within 0.003 of one stage on every
#: public set; 50 within 0.006, 80 within 0.002)
SHORT_LIST = 64


def stages_of(corpus: Any, embedder: Embedder) -> Stages | None:
    """The corpus's two stages for ``embedder``, when both have them (else the one-stage path)."""
    if getattr(embedder, "static", None) is None:
        return None
    get = getattr(corpus, "stages", None)
    return get(embedder) if callable(get) else None


def _floor(static_short: np.ndarray, exact_short: np.ndarray, static_floor: float) -> float:
    """The full model's ``POOL``-th best similarity of all tools, estimated (see the module doc)."""
    # numpy: 60-120 ms to import, and a BM25-only search never needs it
    import numpy as np

    low = float(exact_short.min())
    if len(static_short) < 2 or float(np.ptp(static_short)) < 1e-9:
        return low
    slope, intercept = np.polyfit(static_short.astype(np.float64), exact_short.astype(np.float64), 1)
    guess = float(slope * static_floor + intercept)
    return guess if np.isfinite(guess) and guess < float(exact_short.max()) else low


def _query_sims(embedder: Embedder, query: str, vectors: np.ndarray) -> np.ndarray:
    """Each row's best similarity to one of the query's sentences (or to the query)."""
    # numpy: 60-120 ms to import, and a BM25-only search never needs it
    import numpy as np

    texts = sentences(query) or [query]
    q = np.asarray(embedder.embed(texts), dtype=np.float32)
    sims: np.ndarray = (vectors @ q.T).max(axis=1) if len(texts) > 1 else vectors @ q[0]
    return sims


def hybrid_two_stage(stages: Stages, embedder: Embedder, query: str, lexical: np.ndarray, ngrams: np.ndarray,
                     alpha: float, chars: float, fusion: str = "score") -> list[tuple[int, float]]:
    """The ranking (documents, best first) for ``query`` given every document's BM25F and n-gram
    scores."""
    # numpy: 60-120 ms to import, and a BM25-only search never needs it
    import numpy as np

    lexical, ngrams = stages.per_row(lexical), stages.per_row(ngrams)
    static_q = embedder.static.embed([query])[0]  # type: ignore[attr-defined]
    static_sims = stages.static @ static_q
    if stages.rows <= SHORT_LIST:  # every full similarity: the one-stage ranking
        sims = _query_sims(embedder, query, stages.exact.get(np.arange(stages.rows), embedder))
        return _docs(stages, fuse_scores(lexical, ngrams, sims, alpha, chars, fusion))
    first = fuse_scores(lexical, ngrams, static_sims, alpha, chars, fusion)
    short = np.asarray([i for i, _ in first[:SHORT_LIST]], dtype=np.int64)
    sims = _query_sims(embedder, query, stages.exact.get(short, embedder))
    dense_w = 1.0 - alpha - chars
    lex_max = float(lexical.max()) if len(lexical) else 0.0
    gram_max = float(ngrams.max()) if len(ngrams) else 0.0
    if fusion == "rrf":
        def ranks(values: np.ndarray) -> np.ndarray:
            order = np.lexsort((short, -values))
            out = np.empty(len(values))
            out[order] = np.arange(len(values))
            return out

        fused = sum(w / (RRF_K + ranks(v) + 1) for w, v in ((alpha, lexical[short]), (chars, ngrams[short]),
                                                             (dense_w, sims)) if w > 0)
        fused = np.asarray(fused, dtype=np.float64)
    else:
        depth = min(POOL, stages.rows)
        static_floor = float(np.partition(static_sims, stages.rows - depth)[stages.rows - depth])
        best = float(sims.max())
        floor = _floor(static_sims[short], sims, static_floor)
        span = (best - floor) or 1.0
        fused = (alpha * lexical[short] / (lex_max or 1.0) + chars * ngrams[short] / (gram_max or 1.0)
                 + dense_w * np.maximum(sims - floor, 0.0) / span)
    order = np.lexsort((short, -fused))
    ranked = [(int(short[j]), float(fused[j])) for j in order]
    return _docs(stages, _with_tail(ranked, first[SHORT_LIST:POOL]))


def dense_two_stage(stages: Stages, embedder: Embedder, query: str, depth: int) -> list[tuple[int, float]]:
    """The dense retriever's ranking: the first ``SHORT_LIST`` tools by static similarity,
    ordered by the full model's, then the rest of the static order."""
    # numpy: 60-120 ms to import, and a BM25-only search never needs it
    import numpy as np

    static_q = embedder.static.embed([query])[0]  # type: ignore[attr-defined]
    static_sims = stages.static @ static_q
    first = _best(static_sims, max(depth, SHORT_LIST))
    short = first[:SHORT_LIST]
    sims = _query_sims(embedder, query, stages.exact.get(short, embedder))
    order = np.lexsort((short, -sims))
    ranked = [(int(short[j]), float(sims[j])) for j in order]
    tail = [(int(i), float(static_sims[i])) for i in first[SHORT_LIST:depth]]
    return _docs(stages, _with_tail(ranked, tail))


def _with_tail(ranked: list[tuple[int, float]], tail: Any) -> list[tuple[int, float]]:
    """``ranked`` followed by ``tail`` in its order, each score below the one before it."""
    out = list(ranked)
    last = out[-1][1] if out else 0.0
    for i, score in tail:
        last = min(float(score), last - 1e-6)
        out.append((int(i), last))
    return out


def _docs(stages: Stages, ranked: list[tuple[int, float]]) -> list[tuple[int, float]]:
    if stages.shown is None:
        return ranked
    return [(stages.doc(r), s) for r, s in ranked]


class Bm25Retriever:
    """BM25F over names (split at case and underscores), groups, descriptions, parameters and paths."""

    name = "bm25"

    def __init__(self, corpus: Corpus, *, producers: bool = True, notes: Sequence[str] = ()) -> None:
        self.corpus = corpus
        self.producers = producers
        self.notes = list(notes)

    def rank(self, query: str, depth: int) -> list[tuple[int, float]]:
        return self.corpus.lexical.top(query, depth)

    def search(self, query: str, k: int = 5) -> SearchResult:
        ranked = self.rank(query, max(k, POOL))
        return SearchResult(hits=finish(self.corpus, ranked, k, self.producers), retriever=self.name,
                            notes=list(self.notes))


class DenseRetriever:
    """Cosine similarity between the query's and the tools' embeddings."""

    name = "dense"

    def __init__(self, corpus: Corpus, embedder: Embedder, *, producers: bool = True) -> None:
        self.corpus = corpus
        self.embedder = embedder
        self.producers = producers

    def similarities(self, query: str) -> np.ndarray | None:
        """Each document's best cosine similarity to one of the query's sentences (a query of one
        sentence: to the query): a long request that asks for several things is several
        intents, and one vector of all of them matches each tool weakly. The whole request of
        several sentences is not embedded as well: that doubled the cost of a long request for
        under 0.005 nDCG@5 on every public set (benchmarks/RESULTS.md, issue #25)."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        vectors = self.corpus.vectors(self.embedder)
        if vectors is None:
            return None
        texts = sentences(query) or [query]
        q = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        sims: np.ndarray = (vectors @ q.T).max(axis=1) if len(texts) > 1 else vectors @ q[0]
        return sims

    def search(self, query: str, k: int = 5) -> SearchResult:
        stages = stages_of(self.corpus, self.embedder)
        if stages is not None:
            ranked = dense_two_stage(stages, self.embedder, query, max(k, POOL))
            return SearchResult(hits=finish(self.corpus, ranked, k, self.producers), retriever=self.name)
        sims = self.similarities(query)
        if sims is None:
            return _fallback(self.corpus, query, k, self.embedder)
        order = _best(sims, max(k, POOL))
        ranked = [(int(i), float(sims[i])) for i in order]
        return SearchResult(hits=finish(self.corpus, ranked, k, self.producers), retriever=self.name)


class HybridRetriever:
    """BM25F and character n-grams fused with embeddings (see the module doc)."""

    name = "hybrid"

    def __init__(self, corpus: Corpus, embedder: Embedder, *, fusion: str = "score", alpha: float = ALPHA,
                 chars: float = CHARS, producers: bool = True) -> None:
        if alpha < 0 or chars < 0 or alpha + chars > 1:
            raise ValueError(f"fusion weights need 0 <= alpha, chars and alpha + chars <= 1 (got {alpha}, {chars})")
        self.corpus = corpus
        self.embedder = embedder
        self.fusion = fusion
        self.alpha = alpha
        self.chars = chars
        self.producers = producers
        self._dense = DenseRetriever(corpus, embedder)

    def fused(self, query: str) -> list[tuple[int, float]] | None:
        """The fused ranking (documents, best first), or None when the corpus has no vectors."""
        stages = stages_of(self.corpus, self.embedder)
        if stages is not None:
            return hybrid_two_stage(stages, self.embedder, query, self.corpus.lexical.score_array(query),
                                    self._ngrams(query), self.alpha, self.chars, self.fusion)
        sims = self._dense.similarities(query)
        if sims is None:
            return None
        return fuse_scores(self.corpus.lexical.score_array(query), self._ngrams(query), sims, self.alpha,
                           self.chars, self.fusion)

    def _ngrams(self, query: str) -> np.ndarray:
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        if self.chars > 0:
            scores: np.ndarray = self.corpus.chargrams.score_array(query)
            return scores
        return np.zeros(self.corpus.n)

    def search(self, query: str, k: int = 5) -> SearchResult:
        ranked = self.fused(query)
        if ranked is None:
            return _fallback(self.corpus, query, k, self.embedder)
        return SearchResult(hits=finish(self.corpus, ranked, k, self.producers), retriever=self.name)


def _fallback(corpus: Corpus, query: str, k: int, embedder: Embedder) -> SearchResult:
    note = (f"the index has no vectors of {embedder.name}: BM25 ran instead "
            "(import the collections again with this embedder configured)")
    return Bm25Retriever(corpus, notes=[note]).search(query, k)


def _embedder(options: dict[str, Any]) -> Embedder:
    given = options.get("embedder")
    if given is not None:
        return given  # type: ignore[no-any-return]
    made = make_embedder(required=True)
    assert made is not None
    return made


register("bm25", lambda **o: Bm25Retriever(o["corpus"]))
register("dense", lambda **o: DenseRetriever(o["corpus"], _embedder(o)))
register("hybrid", lambda **o: HybridRetriever(o["corpus"], _embedder(o)))
