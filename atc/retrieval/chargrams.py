"""Character n-grams of words, TF-IDF weighted: the hybrid's third signal, next to BM25F and the embedder.

BM25F matches whole (stemmed) words; a request says ``weatherforecast``, ``crypto`` or
``geocoding`` where a tool says ``weather forecast``, ``cryptocurrency`` or ``geocode``, and
neither the tokens nor a small embedder see that they share most of their letters. Here every
word (lower-cased, split at white space), padded with a space on both sides, gives its
substrings of ``N_MIN``..``N_MAX`` characters (``" crypto "`` -> ``" cr"``, ``"cry"``, ...,
``"pto "``); a document is the vector of its grams weighted by ``(1 + log tf) * idf`` and normalised to length 1, and a query's score
against it is the dot product with the query's ``(1 + log tf) * idf`` weights (the query's
own length is left out: the hybrid divides every score by the best one).

Same layout as the BM25F index (lexical.py): a vocabulary (``grams.terms``, ``grams.idx``: per
gram its start and document count; ``grams.json``: the document count) and two runs of postings, document ids (``grams.i32``) and the
document's normalised weight (``grams.f32``); ``idf`` is recomputed at query time from df.
The index reads a tool's name and group only (the words a request shares letters with most
often: ``geocoding`` and ``geocode``, brand names written as one word): grams of the description
too made 2.4 times the postings and, fused, scored lower on the dev split (benchmarks/RESULTS.md).
The grams of each distinct word are computed once (a store repeats its words across thousands
of tools).
"""

from __future__ import annotations

import functools
import math
import re
from array import array
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from atc.retrieval.doc import Doc
from atc.retrieval.lexical import open_postings, save_postings

__all__ = ["CharGramIndex", "grams", "N_MIN", "N_MAX", "GRAM_FIELDS"]

_FILES = ("grams.json", "grams.i32", "grams.f32")  # meta, documents, weights

N_MIN = 3
N_MAX = 5
#: the document fields whose text is read (see the module doc)
GRAM_FIELDS = ("name", "group")

#: a word is what lies between white space, punctuation included (``artist's``): splitting at
#: punctuation as well scored the same on the dev split and lower on Spotify (benchmarks/RESULTS.md)
_WORD = re.compile(r"\S+")


@functools.lru_cache(maxsize=1 << 17)
def _word_grams(word: str) -> tuple[str, ...]:
    padded = f" {word} "
    out: list[str] = []
    for n in range(N_MIN, N_MAX + 1):
        if len(padded) <= n:  # a short word is one gram of itself, counted once
            out.append(padded)
            break
        out.extend(padded[i:i + n] for i in range(len(padded) - n + 1))
    return tuple(out)


def grams(text: str) -> Counter[str]:
    """The character n-grams of the words of ``text`` (lower-cased), with their counts."""
    counts: Counter[str] = Counter()
    for word in _WORD.findall(text.lower()):
        counts.update(_word_grams(word))
    return counts


def _idf(n: int, df: int) -> float:
    return math.log((1 + n) / (1 + df)) + 1.0


def _text(d: Doc) -> str:
    return " ".join(d.fields.get(f, "") for f in GRAM_FIELDS)


class CharGramIndex:
    """TF-IDF over character n-grams; build with :meth:`build`, persist with :meth:`save`, reopen with :meth:`open`."""

    def __init__(self, vocab: Any, docs: Any, weights: Any, n: int) -> None:
        self.vocab = vocab
        self._docs = docs  # int32 sequence
        self._weights = weights  # float32 sequence
        self.n = n
        self._keep: list[Any] = []
        self._np: tuple[Any, Any] | None = None

    @classmethod
    def build(cls, docs: Sequence[Doc]) -> CharGramIndex:
        """The index of ``docs``. Counting is Python (one ``Counter`` update per word); the
        weights, norms and the grouping into postings are array operations (numpy is loaded
        wherever this runs: next to vectors, or in the hybrid)."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        ids: dict[str, int] = {}
        doc_of: list[int] = []
        gram_of: list[int] = []
        tf_of: list[int] = []
        for i, d in enumerate(docs):
            counted = grams(_text(d))
            gram_of.extend(ids.setdefault(g, len(ids)) for g in counted)
            tf_of.extend(counted.values())
            doc_of.extend([i] * len(counted))
        n = len(docs)
        doc = np.asarray(doc_of, dtype=np.int64)
        gram = np.asarray(gram_of, dtype=np.int64)
        df = np.bincount(gram, minlength=len(ids))
        idf = np.log((1 + n) / (1 + df)) + 1.0
        weight = (1.0 + np.log(np.asarray(tf_of, dtype=np.float64))) * idf[gram]
        norm = np.sqrt(np.bincount(doc, weights=weight * weight, minlength=n))
        weight /= np.where(norm > 0, norm, 1.0)[doc]
        order = np.argsort(gram, kind="stable")  # by gram, each gram's documents in order
        starts = np.concatenate([[0], np.cumsum(df)[:-1]]).tolist()
        counts = df.tolist()
        vocab = {g: [starts[j], counts[j]] for g, j in ids.items()}
        return cls(vocab, array("i", doc[order].astype(np.int32).tobytes()),
                   array("f", weight[order].astype(np.float32).tobytes()), n)

    def save(self, folder: Path) -> None:
        """Write ``grams.json``, ``grams.i32`` and ``grams.f32`` into a fresh generation directory."""
        save_postings(folder, _FILES, self.vocab, self._docs, self._weights, self.n)

    @classmethod
    def exists(cls, folder: Path) -> bool:
        return (folder / _FILES[0]).is_file()

    @classmethod
    def open(cls, folder: Path) -> CharGramIndex:
        vocab, docs, weights, n, keep = open_postings(folder, _FILES)
        index = cls(vocab, docs, weights, n)
        index._keep = keep
        return index

    def score_array(self, query: str) -> Any:
        """Every document's score as a float64 numpy array (0 where no gram is shared).

        The postings of the query's grams are gathered and summed per document in one
        ``bincount``: a long request shares a few hundred grams with the tools, some of them
        in thousands of documents, and one scattered add per gram cost twice as much. The sums
        are the same, added in the same order (float32 products, float64 sums)."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        if self._np is None:
            self._np = (np.frombuffer(self._docs, dtype="<i4"), np.frombuffer(self._weights, dtype="<f4"))
        docs, weights = self._np
        ids: list[Any] = []
        parts: list[Any] = []
        for gram, tf in grams(query).items():
            entry = self.vocab.get(gram)
            if not entry:
                continue
            start, df = entry
            ids.append(docs[start:start + df])
            parts.append(np.float32((1.0 + math.log(tf)) * _idf(self.n, df)) * weights[start:start + df])
        if not ids:
            return np.zeros(self.n, dtype=np.float64)
        return np.bincount(np.concatenate(ids), weights=np.concatenate(parts), minlength=self.n)
