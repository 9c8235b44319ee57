"""The hybrid and dense retrievers in two stages, for an embedder with a static first stage (the
local model, static.py).

Stage one ranks every tool: BM25F, the character n-grams and the cosine of the tools' static
vectors with the whole request's, fused as the one-stage hybrid fuses (hybrid.py). Stage two
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

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from atc.retrieval.base import Embedder
    from atc.retrieval.exact import Stages

__all__ = ["SHORT_LIST", "stages_of", "hybrid_two_stage", "dense_two_stage"]

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
    import numpy as np

    low = float(exact_short.min())
    if len(static_short) < 2 or float(np.ptp(static_short)) < 1e-9:
        return low
    slope, intercept = np.polyfit(static_short.astype(np.float64), exact_short.astype(np.float64), 1)
    guess = float(slope * static_floor + intercept)
    return guess if np.isfinite(guess) and guess < float(exact_short.max()) else low


def _query_sims(embedder: Embedder, query: str, vectors: np.ndarray) -> np.ndarray:
    """Each row's best similarity to one of the query's sentences (or to the query)."""
    import numpy as np

    from atc.retrieval.hybrid import sentences

    texts = sentences(query) or [query]
    q = np.asarray(embedder.embed(texts), dtype=np.float32)
    sims: np.ndarray = (vectors @ q.T).max(axis=1) if len(texts) > 1 else vectors @ q[0]
    return sims


def hybrid_two_stage(stages: Stages, embedder: Embedder, query: str, lexical: np.ndarray, ngrams: np.ndarray,
                     alpha: float, chars: float, fusion: str = "score") -> list[tuple[int, float]]:
    """The ranking (documents, best first) for ``query`` given every document's BM25F and n-gram
    scores."""
    import numpy as np

    from atc.retrieval.hybrid import POOL, fuse_scores

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
        from atc.retrieval.hybrid import RRF_K

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
    import numpy as np

    from atc.retrieval.hybrid import _best

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
