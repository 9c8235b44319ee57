"""The two stages of a corpus for the local model: static vectors of every tool, and the full
model's vectors, computed for a tool the first time a search short-lists it (or in the
background after an import, fill.py) and kept.

Rows are the corpus's **shown** documents (one per group of copies, duplicates.py; every
document when there are none): a search ranks each tool once, and copies share their texts.

In the store's index (index.py) the full model's vectors live in two files of the generation:
``vectors.f32`` (``rows x dim`` float32) and ``exact.u8`` (one byte per row: 1 when its vector is
there). The build fills the rows whose texts the vector cache holds; the others are written in
place later, each vector before its byte, the vectors flushed to disk first, so that a byte
never stands for a vector that is not there. Every process that computes one also adds its
texts' vectors to the vector cache (vectorstore.py), from which the next generation is built.
Two processes that compute the same row write the same numbers. Where the index cannot be
written (a store of another user, read-only), vectors are kept in the process only.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atc.retrieval.embedders import VectorCache, embed_cached

if TYPE_CHECKING:
    import numpy as np

    from atc.retrieval.base import Embedder
    from atc.retrieval.embedders import Progress

__all__ = ["Stages", "ExactRows", "mean_of_views", "VECTORS", "FLAGS", "STATIC"]

VECTORS = "vectors.f32"
FLAGS = "exact.u8"
STATIC = "static.f32"


def mean_of_views(vectors: np.ndarray, counts: Sequence[int]) -> np.ndarray:
    """Each document's vector: the mean of its views' unit vectors (``counts`` views each, in order)."""
    # numpy: 60-120 ms to import, and a BM25-only search never needs it
    import numpy as np

    sizes = np.asarray(counts, dtype=np.int64)
    if not len(sizes):
        return np.zeros((0, vectors.shape[1]), dtype=np.float32)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return np.asarray(np.add.reduceat(vectors, starts, axis=0) / sizes[:, None], dtype=np.float32)


class ExactRows:
    """The full model's vectors of a corpus's rows: ``get(rows)`` computes what is missing.

    ``texts_of(row)``: the texts (views) of a row's document; ``folder``: the generation whose
    ``vectors.f32`` and ``exact.u8`` hold them (None: in memory); ``home``: where the vector
    cache is (None: no cache)."""

    def __init__(self, count: int, dim: int, texts_of: Callable[[int], list[str]], *,
                 folder: Path | None = None, home: Path | None = None) -> None:
        self.count = count
        self.dim = dim
        self.texts_of = texts_of
        self.folder = folder
        self.home = home
        self._vectors: Any = None
        self._flags: Any = None
        self._kept: dict[int, np.ndarray] = {}  # rows computed here that could not be written
        self._lock = threading.Lock()
        #: rows this object computed (the benchmark and the tests read it)
        self.computed = 0

    def _maps(self) -> tuple[Any, Any]:
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        if self._vectors is None:
            if self.folder is not None and self.count:
                self._vectors = np.memmap(self.folder / VECTORS, dtype="<f4", mode="r", shape=(self.count, self.dim))
                self._flags = np.memmap(self.folder / FLAGS, dtype=np.uint8, mode="r", shape=(self.count,))
            else:
                self._vectors = np.zeros((self.count, self.dim), dtype=np.float32)
                self._flags = np.zeros(self.count, dtype=np.uint8)
        return self._vectors, self._flags

    def missing(self, rows: Any = None) -> Any:
        """The rows (of ``rows``, default all) whose vectors are not there yet."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        _, flags = self._maps()
        rows = np.arange(self.count) if rows is None else np.asarray(rows, dtype=np.int64)
        lacking = rows[flags[rows] == 0]
        if self._kept:
            lacking = np.asarray([r for r in lacking.tolist() if r not in self._kept], dtype=np.int64)
        return lacking

    def get(self, rows: Any, embedder: Embedder) -> np.ndarray:
        """The vectors of ``rows``, computing the missing ones with ``embedder``."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        rows = np.asarray(rows, dtype=np.int64)
        lacking = self.missing(rows)
        if len(lacking):
            self.compute(lacking, embedder)
        vectors, _ = self._maps()
        out = np.array(vectors[rows], dtype=np.float32)
        if self._kept:
            for i, r in enumerate(rows.tolist()):
                kept = self._kept.get(r)
                if kept is not None:
                    out[i] = kept
        return out

    def compute(self, rows: Any, embedder: Embedder, progress: Progress | None = None) -> None:
        """Compute and keep the vectors of ``rows`` (tool texts: ``embed_documents``, with the
        vector cache)."""
        rows = [int(r) for r in rows]
        if not rows:
            return
        views = [self.texts_of(r) for r in rows]
        texts = [t for v in views for t in v]
        cache = VectorCache(self.home, embedder.name) if self.home is not None else None
        step: Progress | None = None
        if progress is not None:
            report = progress

            def step(done: int, total: int) -> None:  # in tools, as the user counts them, not texts
                report(done * len(rows) // total if total else 0, len(rows))

        vectors = mean_of_views(embed_cached(embedder, texts, cache, progress=step), [len(v) for v in views])
        with self._lock:
            self.computed += len(rows)
            if not self._write(rows, vectors):
                self._kept.update(zip(rows, vectors, strict=True))

    def _write(self, rows: list[int], vectors: np.ndarray) -> bool:
        """Put computed rows into the generation's files (see the module doc); False when it
        cannot be written (then the caller keeps them in memory)."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        if self.folder is None:
            vec, flags = self._maps()
            vec[rows] = vectors
            flags[rows] = 1
            return True
        try:
            fd = os.open(self.folder / VECTORS, os.O_WRONLY)
        except OSError:
            return False
        try:
            data = np.ascontiguousarray(vectors, dtype="<f4")
            row_bytes = 4 * self.dim
            for r, vector in zip(rows, data, strict=True):
                os.pwrite(fd, vector.tobytes(), r * row_bytes)
            os.fdatasync(fd)  # the vectors are on disk before any byte says so
        except OSError:
            return False
        finally:
            os.close(fd)
        try:
            fd = os.open(self.folder / FLAGS, os.O_WRONLY)
        except OSError:
            return False
        try:
            for r in rows:
                os.pwrite(fd, b"\x01", r)
        except OSError:
            return False
        finally:
            os.close(fd)
        return True


class Stages:
    """What the two-stage hybrid reads of a corpus: ``static`` (rows x dim), ``shown`` (the
    document of each row; None when row = document), ``exact`` (ExactRows) and ``row_of`` (the
    row of each document's group, for the best of the copies' lexical scores; None when row =
    document)."""

    def __init__(self, static: np.ndarray, shown: np.ndarray | None, exact: ExactRows,
                 row_of: np.ndarray | None = None) -> None:
        self.static = static
        self.shown = shown
        self.exact = exact
        self.row_of = row_of

    @classmethod
    def of(cls, static: np.ndarray, exact: ExactRows, groups: Any) -> Stages:
        """With ``groups`` (duplicates.py: ``(canon, ring)`` over the documents, or None)."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        if groups is None:
            return cls(static, None, exact)
        canon = np.asarray(groups[0], dtype=np.int64)
        shown = np.flatnonzero(canon == np.arange(len(canon)))
        row = np.full(len(canon), -1, dtype=np.int64)
        row[shown] = np.arange(len(shown))
        return cls(static, shown, exact, row[canon])

    @property
    def rows(self) -> int:
        return int(self.static.shape[0])

    def per_row(self, scores: np.ndarray) -> np.ndarray:
        """Document scores as row scores: each group takes its best copy's."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        if self.row_of is None:
            return scores
        out = np.zeros(self.rows, dtype=scores.dtype)
        hit = np.flatnonzero(scores)
        np.maximum.at(out, self.row_of[hit], scores[hit])
        return out

    def doc(self, row: int) -> int:
        return int(self.shown[row]) if self.shown is not None else row
