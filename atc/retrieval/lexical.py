"""Field-weighted BM25 (BM25F) whose postings are precomputed, saved, and memory-mapped back.

A term's postings are two runs of fixed-width numbers: document ids (int32) and the document's
saturated, length-normalised term weight (float32), so that answering a query reads a few slices
of two files and does one multiply-add per posting. No numpy: ``atc tools search`` with BM25
starts fast. ``idf`` is computed at query time from the posting length.

Files (in an index generation directory): ``lexical.json`` (the document count),
``lexical.terms`` and ``lexical.idx`` (the vocabulary: the terms sorted, and per term its start and
document count), ``postings.i32`` and ``weights.f32``.
"""

from __future__ import annotations

import json
import math
import mmap
import sys
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from atc.retrieval.doc import FIELDS, Doc
from protocols.bm25 import tokenize

__all__ = ["LexicalIndex", "K1", "B"]

K1 = 1.2
B = 0.75


def _le(a: array[Any]) -> array[Any]:
    if sys.byteorder != "little":  # the files are little-endian everywhere
        a = array(a.typecode, a)
        a.byteswap()
    return a


class SortedVocab:
    """term -> ``(start, df)`` from a sorted list of terms and two int32 runs: opening it splits
    one string, where a JSON dict of 16,000 n-grams took 10 ms to parse in every command."""

    def __init__(self, terms: list[str], starts: Any, dfs: Any) -> None:
        self.terms = terms
        self.starts = starts
        self.dfs = dfs

    def get(self, term: str) -> tuple[int, int] | None:
        i = bisect_left(self.terms, term)
        if i < len(self.terms) and self.terms[i] == term:
            return self.starts[i], self.dfs[i]
        return None

    def __len__(self) -> int:
        return len(self.terms)


def _side(folder: Path, meta: str, suffix: str) -> Path:
    return folder / (meta.rsplit(".", 1)[0] + suffix)


def save_postings(folder: Path, names: tuple[str, str, str], vocab: dict[str, list[int]] | SortedVocab, docs: Any,
                  weights: Any, n: int) -> None:
    """Write a posting index (``names``: its meta JSON, int32 documents, float32 weights) into a
    fresh generation directory (no atomicity needed there). Shared by BM25F and the n-grams. The
    vocabulary goes beside the meta: its terms sorted, one a line (``.terms``), and per term its
    start and document count (``.idx``, int32 pairs)."""
    meta, ids, ws = names
    (folder / ids).write_bytes(_le(array("i", docs)).tobytes())
    (folder / ws).write_bytes(_le(array("f", weights)).tobytes())
    pairs = array("i")
    if isinstance(vocab, SortedVocab):  # an opened index, saved again
        terms = list(vocab.terms)
        for start, df in zip(vocab.starts, vocab.dfs, strict=True):
            pairs.extend((start, df))
    else:
        terms = sorted(vocab)
        for t in terms:
            pairs.extend(vocab[t][:2])
    if any("\n" in t for t in terms):  # neither tokens nor n-grams hold white space
        raise ValueError("a term of the index holds a line break")
    _side(folder, meta, ".terms").write_bytes("\n".join(terms).encode("utf-8"))
    _side(folder, meta, ".idx").write_bytes(_le(pairs).tobytes())
    (folder / meta).write_text(json.dumps({"n": n, "terms": len(terms)}, separators=(",", ":")))


def open_postings(folder: Path, names: tuple[str, str, str]) -> tuple[SortedVocab, Any, Any, int, list[Any]]:
    """Read what ``save_postings`` wrote: (vocab, documents, weights, n, memory maps to keep
    open). The arrays are memory-mapped where the machine is little-endian and they are not
    empty (an empty file cannot be mapped), else read and byte-swapped."""
    meta_name, ids, ws = names
    meta = json.loads((folder / meta_name).read_bytes())
    text = _side(folder, meta_name, ".terms").read_bytes().decode("utf-8")
    terms = text.split("\n") if text else []
    pairs = array("i", _side(folder, meta_name, ".idx").read_bytes())
    if sys.byteorder != "little":
        pairs.byteswap()
    if len(terms) != int(meta["terms"]) or len(pairs) != 2 * len(terms):
        raise ValueError(f"{folder / meta_name}: the vocabulary does not match its meta")
    views: list[Any] = []
    keep: list[Any] = []
    for name, code in ((ids, "i"), (ws, "f")):
        path = folder / name
        if path.stat().st_size == 0 or sys.byteorder != "little":
            data = array(code, path.read_bytes())
            if sys.byteorder != "little":
                data.byteswap()
            views.append(data)
            continue
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        keep.append(mm)
        views.append(memoryview(mm).cast(code))  # type: ignore[call-overload]
    return SortedVocab(terms, pairs[0::2], pairs[1::2]), views[0], views[1], int(meta["n"]), keep


_FILES = ("lexical.json", "postings.i32", "weights.f32")


class LexicalIndex:
    """BM25F over documents; build with :meth:`build`, persist with :meth:`save`, reopen with :meth:`open`."""

    def __init__(self, vocab: Any, docs: Any, weights: Any, n: int) -> None:
        self.vocab = vocab
        self._docs = docs  # int32 sequence (array or memoryview)
        self._weights = weights  # float32 sequence
        self.n = n
        self._keep: list[Any] = []
        self._np: tuple[Any, Any] | None = None

    @classmethod
    def build(cls, docs: Sequence[Doc], *, k1: float = K1, b: float = B,
              field_weights: dict[str, float] | None = None) -> LexicalIndex:
        weights_of = field_weights or FIELDS
        tfs: list[dict[str, float]] = []
        lengths: list[float] = []
        for d in docs:
            tf: dict[str, float] = {}
            length = 0.0
            for fname, toks in d.tokens().items():
                w = weights_of.get(fname, 1.0)
                length += w * len(toks)
                for t in toks:
                    tf[t] = tf.get(t, 0.0) + w
            tfs.append(tf)
            lengths.append(length)
        avg = (sum(lengths) / len(lengths)) if lengths else 1.0
        postings: dict[str, list[tuple[int, float]]] = {}
        for i, tf in enumerate(tfs):
            norm = k1 * (1 - b + b * lengths[i] / (avg or 1.0))
            for t, f in tf.items():
                postings.setdefault(t, []).append((i, f * (k1 + 1) / (f + norm)))
        vocab: dict[str, list[int]] = {}
        ids = array("i")
        ws = array("f")
        for t in sorted(postings):
            plist = postings[t]
            vocab[t] = [len(ids), len(plist)]
            ids.extend(p[0] for p in plist)
            ws.extend(p[1] for p in plist)
        return cls(vocab, ids, ws, len(docs))

    def save(self, folder: Path) -> None:
        """Write the three files into ``folder`` (a fresh generation directory: no atomicity needed here)."""
        save_postings(folder, _FILES, self.vocab, self._docs, self._weights, self.n)

    @classmethod
    def open(cls, folder: Path) -> LexicalIndex:
        vocab, docs, weights, n, keep = open_postings(folder, _FILES)
        index = cls(vocab, docs, weights, n)
        index._keep = keep
        return index

    def top(self, query: str, depth: int) -> list[tuple[int, float]]:
        """The ``depth`` best (document, score) pairs, best first (ties: the lower document first).

        With numpy already loaded (a long-lived process, the hybrid), the postings are added as
        arrays; otherwise in plain Python, which beats paying numpy's import for one query."""
        if sys.modules.get("numpy") is not None:
            # numpy: 60-120 ms to import, and a BM25-only search never needs it
            import numpy as np

            arr = self.score_array(query)
            hit = np.flatnonzero(arr)
            if len(hit) > depth:
                hit = hit[np.argpartition(-arr[hit], depth - 1)[:depth]] if depth > 0 else hit[:0]
            order = hit[np.lexsort((hit, -arr[hit]))]
            return [(int(i), float(arr[i])) for i in order[:depth]]
        ranked = sorted(self.scores(query).items(), key=lambda kv: (-kv[1], kv[0]))
        return ranked[:depth]

    def score_array(self, query: str) -> Any:
        """Every document's score as a float64 numpy array (0 where no query term occurs)."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        if self._np is None:
            self._np = (np.frombuffer(self._docs, dtype="<i4"), np.frombuffer(self._weights, dtype="<f4"))
        docs, weights = self._np
        out = np.zeros(self.n, dtype=np.float64)
        n = self.n
        for term in set(tokenize(query)):
            entry = self.vocab.get(term)
            if not entry:
                continue
            start, df = entry
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            # A term occurs once per document in its postings: no repeated index in one add.
            out[docs[start:start + df]] += idf * weights[start:start + df]
        return out

    def scores(self, query: str) -> dict[int, float]:
        """document -> BM25F score, for every document sharing a term with the query."""
        acc: dict[int, float] = {}
        n = self.n
        for term in set(tokenize(query)):
            entry = self.vocab.get(term)
            if not entry:
                continue
            start, df = entry
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            docs = self._docs[start:start + df]
            ws = self._weights[start:start + df]
            get = acc.get
            for i, w in zip(docs, ws, strict=True):
                acc[i] = get(i, 0.0) + idf * w
        return acc
