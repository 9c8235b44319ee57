"""What retrievers rank: the documents (doc.py) of the tools, from the store or from a list of
``Tool`` objects, with the indexes over them.

``Corpus`` is what a retriever reads; ``MemoryCorpus`` builds one from ``Tool`` objects in memory,
each part (lexical index, character n-grams, duplicates, vectors, stages) when first asked for.
The stored index (index.py) is the other ``Corpus``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from atc.retrieval.chargrams import CharGramIndex
from atc.retrieval.doc import Doc, docs_of, producer_lists
from atc.retrieval.duplicates import groups
from atc.retrieval.embedders import VectorCache, doc_vectors, text_hash
from atc.retrieval.exact import ExactRows, Stages
from atc.retrieval.lexical import LexicalIndex
from atc.retrieval.stagebuild import static_rows
from protocols.model import Tool

if TYPE_CHECKING:
    import numpy as np

    from atc.retrieval.base import Embedder

__all__ = ["Corpus", "MemoryCorpus"]



class Corpus(Protocol):
    """The documents a retriever ranks: numbered 0..n-1, with a lexical index (BM25F) and a
    character n-gram index (chargrams.py, read by the hybrid only) over them.

    ``vectors(embedder)`` is the matrix of the documents' vectors under that embedder (rows in
    document order; each the mean of its views' unit vectors, so of norm at most 1), computed
    once and kept (stored with the index, or cached by text hash),
    or None when the corpus has none and ``compute`` is false."""

    @property
    def n(self) -> int: ...

    @property
    def lexical(self) -> LexicalIndex: ...

    @property
    def chargrams(self) -> CharGramIndex: ...

    def doc(self, i: int) -> Doc: ...

    def producers(self, i: int) -> list[list[int]]: ...

    def vectors(self, embedder: Embedder, *, compute: bool = True) -> np.ndarray | None: ...

    def tool(self, i: int) -> Tool | None: ...


class MemoryCorpus:
    """A corpus of ``Tool`` objects in memory (a spec given with ``--tools``, a list in Python).
    Vectors are cached in ``home`` (``ATC_HOME``) by text hash when ``home`` is given."""

    def __init__(self, tools: Sequence[Tool], *, home: Path | None = None, docs: Sequence[Doc] | None = None) -> None:
        self.tools = list(tools)
        self.docs = list(docs) if docs is not None else docs_of(self.tools)
        self.home = home
        #: what identifies it in the process's cache of corpora (``inmemory.shared_corpus``), and
        #: the event set once its full vectors are computed (``inmemory.fill_in_background``)
        self.content_key = ""
        self.filled: threading.Event | None = None
        # Requests of concurrent tasks share one corpus: each part is built once, by the first.
        self._build = threading.RLock()
        self._lexical: LexicalIndex | None = None
        self._chargrams: CharGramIndex | None = None
        self._producers: list[list[list[int]]] | None = None
        self._vectors: dict[str, np.ndarray] = {}
        self._stages: dict[str, Stages] = {}
        self._groups: tuple[list[int], list[int]] | None | bool = False

    @property
    def n(self) -> int:
        return len(self.docs)

    @property
    def lexical(self) -> LexicalIndex:
        if self._lexical is None:
            with self._build:
                if self._lexical is None:
                    self._lexical = LexicalIndex.build(self.docs)
        return self._lexical

    @property
    def chargrams(self) -> CharGramIndex:
        if self._chargrams is None:
            with self._build:
                if self._chargrams is None:
                    self._chargrams = CharGramIndex.build(self.docs)
        return self._chargrams

    def doc(self, i: int) -> Doc:
        return self.docs[i]

    def tool(self, i: int) -> Tool | None:
        return self.tools[i]

    def producers(self, i: int) -> list[list[int]]:
        if self._producers is None:
            with self._build:
                if self._producers is None:
                    self._producers = producer_lists(self.docs)
        return self._producers[i]

    def duplicates(self) -> tuple[list[int], list[int]] | None:
        """Copies of one tool among these tools (duplicates.py; the first collection's wins ties)."""
        if self._groups is False:
            canon, ring, hidden = groups(self.docs)
            self._groups = (canon, ring) if hidden else None
        return self._groups  # type: ignore[return-value]

    def stages(self, embedder: Embedder) -> Stages | None:
        """The two stages of an embedder with a static first stage (the local model: exact.py):
        static vectors of every tool now (about 0.2 s per thousand tools), the full
        model's for the tools a search short-lists, when it does (cached in ``home``)."""
        static = getattr(embedder, "static", None)
        if static is None:
            return None
        with self._build:
            return self._stages_of(embedder, static)

    def _stages_of(self, embedder: Embedder, static: Any) -> Stages:
        found = self._stages.get(embedder.name)
        if found is None:
            # numpy: 60-120 ms to import, and a BM25-only search never needs it
            import numpy as np

            found_groups = self.duplicates()
            shown = [i for i in range(self.n) if found_groups is None or found_groups[0][i] == i]
            matrix = static_rows(static, [self.docs[i].views for i in shown]) if shown \
                else np.zeros((0, static.dim), dtype=np.float32)
            exact = ExactRows(len(shown), int(static.dim), lambda r: list(self.docs[shown[r]].views), home=self.home)
            found = Stages.of(matrix, exact, found_groups)
            self._stages[embedder.name] = found
        return found

    def uncached(self, embedder: Embedder) -> int:
        """How many documents' vectors are neither in memory nor in the cache (what ``vectors``
        would have to compute)."""
        if embedder.name in self._vectors:
            return 0
        if self.home is None:
            return self.n
        texts = [t for d in self.docs for t in d.views]
        found = VectorCache(self.home, embedder.name).get([text_hash(t) for t in texts])
        missing = {t for t, v in zip(texts, found, strict=True) if v is None}
        return sum(1 for d in self.docs if any(t in missing for t in d.views))

    def vectors(self, embedder: Embedder, *, compute: bool = True) -> np.ndarray | None:
        found = self._vectors.get(embedder.name)
        if found is None and compute:
            with self._build:
                return self._computed(embedder)
        return found

    def _computed(self, embedder: Embedder) -> np.ndarray:
        found = self._vectors.get(embedder.name)
        if found is None:
            cache = VectorCache(self.home, embedder.name) if self.home else None
            found = doc_vectors(embedder, self.docs, cache)
            self._vectors[embedder.name] = found
        return found
