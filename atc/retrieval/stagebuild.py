"""Writing the two stages of an index generation (index.py, exact.py): the static vectors of the
shown documents, and the full model's vectors that are known already.

A document's vectors depend on its texts only (its views), so a rebuild takes them from the
previous generation for every document whose views did not change (an import into a store of
17,000 tools computes the new collection's, not the store's), and the full model's from the
vector cache (vectorstore.py) where a search or the background filler (fill.py) computed them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atc.retrieval.embedders import VectorCache, text_hash
from atc.retrieval.exact import FLAGS, STATIC, VECTORS, Stages, mean_of_views

if TYPE_CHECKING:
    import numpy as np

    from atc.retrieval.base import Embedder
    from atc.retrieval.doc import Doc
    from atc.retrieval.embedders import Progress

__all__ = ["write_stages", "static_rows", "STATIC_STEP"]

#: tools whose static vectors are computed per step (progress is reported per step)
STATIC_STEP = 2048


def static_rows(static: Embedder, views: Sequence[Sequence[str]], progress: Progress | None = None) -> np.ndarray:
    """The static vector of each document (the mean of its views'), in steps of ``STATIC_STEP``."""
    # numpy: 60-120 ms to import, and a BM25-only search never needs it
    import numpy as np

    out = np.zeros((len(views), static.dim), dtype=np.float32)
    if progress is not None and len(views):
        progress(0, len(views))
    for start in range(0, len(views), STATIC_STEP):
        part = views[start:start + STATIC_STEP]
        vectors = static.embed([t for v in part for t in v])
        out[start:start + len(part)] = mean_of_views(vectors, [len(v) for v in part])
        if progress is not None:
            progress(start + len(part), len(views))
    return out


def _previous_rows(stages: Stages | None,
                   previous_docs: Callable[[], list[Doc]]) -> tuple[dict[tuple[str, ...], int], Any, Any, Any]:
    """The previous generation's rows by their documents' views: (key -> row, static, vectors, flags)."""
    if stages is None or not stages.rows:
        return {}, None, None, None
    docs = previous_docs()
    keys = {tuple(docs[stages.doc(r)].views): r for r in range(stages.rows)}
    vectors, flags = stages.exact._maps()
    return keys, stages.static, vectors, flags


def write_stages(folder: Path, home: Path, docs: Sequence[Doc], canon: Sequence[int] | None, embedder: Embedder,
                 previous: Stages | None, previous_docs: Callable[[], list[Doc]],
                 progress: Progress | None = None) -> dict[str, Any]:
    """Write ``static.f32``, ``vectors.f32`` and ``exact.u8`` into a fresh generation; the meta
    fields of the two stages (``static``, ``rows``, ``dim``, ``exact``: rows with full vectors).
    ``previous``: the stages of the generation before (its rows are reused where the views are
    the same), with ``previous_docs`` its documents."""
    # numpy: 60-120 ms to import, and a BM25-only search never needs it
    import numpy as np

    static = embedder.static  # type: ignore[attr-defined]
    dim = int(static.dim)
    shown = [i for i in range(len(docs)) if canon is None or canon[i] == i]
    views = [list(docs[i].views) for i in shown]
    keys = [tuple(v) for v in views]
    old_keys, old_static, old_vectors, old_flags = _previous_rows(previous, previous_docs)
    old_rows = [old_keys.get(k, -1) for k in keys]
    static_out = np.zeros((len(shown), dim), dtype=np.float32)
    exact_out = np.zeros((len(shown), dim), dtype=np.float32)
    flags = np.zeros(len(shown), dtype=np.uint8)
    kept = [r for r, o in enumerate(old_rows) if o >= 0]
    if kept:
        source = np.asarray([old_rows[r] for r in kept], dtype=np.int64)
        static_out[kept] = old_static[source]
        have = np.asarray(old_flags[source], dtype=np.uint8)
        flags[kept] = have
        exact_out[kept] = np.asarray(old_vectors[source], dtype=np.float32) * have[:, None]
    fresh = [r for r, o in enumerate(old_rows) if o < 0]
    if fresh:
        static_out[fresh] = static_rows(static, [views[r] for r in fresh], progress)
    lacking = [r for r in range(len(shown)) if not flags[r]]
    if lacking:  # full vectors computed before (by a search, the filler, an earlier store)
        cache = VectorCache(home, embedder.name)
        texts = [t for r in lacking for t in views[r]]
        found = cache.get([text_hash(t) for t in texts])
        at = 0
        complete: list[int] = []
        parts: list[np.ndarray] = []
        for r in lacking:
            got = found[at:at + len(views[r])]
            at += len(views[r])
            if all(v is not None and len(v) == dim for v in got):
                complete.append(r)
                parts.extend(got)  # type: ignore[arg-type]
        if complete:
            exact_out[complete] = mean_of_views(np.vstack(parts), [len(views[r]) for r in complete])
            flags[complete] = 1
    (folder / STATIC).write_bytes(static_out.astype("<f4").tobytes())
    (folder / VECTORS).write_bytes(exact_out.astype("<f4").tobytes())
    (folder / FLAGS).write_bytes(flags.tobytes())
    return {"static": static.name, "rows": len(shown), "dim": dim, "exact": int(flags.sum())}
