"""Tools held in the process, searched as fast as the store: one corpus per set of tools.

A pipeline passes its tools to ``atc.search(query, tools)`` and ``atc.solve(query, tools=...)``
directly, call after call, without importing them into the store. Building a ``MemoryCorpus``
(documents, BM25F postings, character n-grams, the static stage's vectors) costs seconds at a
few thousand tools; a request on a built one costs what the stored index costs. So
``shared_corpus`` keeps the corpora it built (the ``MAX_CORPORA`` last used) and hands the same
one to every request over the same tools, in any thread: the concurrent tasks of a batch
(``solve_many``, ``atc batch``) share one, built once (a second request for a set being built
waits for it).

Two keys find a corpus:

- the same tool objects, in the same order, with the same names, descriptions, paths and
  collections (checked in C-speed passes over the list: a request over thousands of tools pays
  a millisecond or two for it). An entry keeps its tools alive, so their identities cannot be
  reused by other objects while it is cached. A tool whose parameters or response schema are
  changed in place, without a new ``Tool``, is not noticed: make a new ``Tool`` (or
  ``clear()``);
- their content: the hash of every document's texts (``Doc.hash``), for another list of equal
  tools (a spec loaded again, the same collections in a new ``Toolset``). Reading the documents
  again costs what it costs, once per new list; the indexes and vectors are not rebuilt.

A new corpus of more tools than a short list also gets the full model's vectors of all its
tools computed in a background thread (``fill_in_background``), as an import's filler does for
the store: until then, a request computes those of the tools it short-lists (and every vector
goes to the vector cache of ``ATC_HOME``, where the next process finds it).
"""

from __future__ import annotations

try:  # the C module: hashlib's import loads OpenSSL too
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without it
    from hashlib import blake2b

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

from atc.config import embed_background
from atc.retrieval.corpus import MemoryCorpus
from atc.retrieval.doc import docs_of
from atc.retrieval.embedders import make_embedder
from atc.retrieval.fill import BATCH
from atc.retrieval.hybrid import SHORT_LIST
from atc.toolsets import collections_of
from protocols.model import Collection, Tool
from sandbox.api import Toolset

__all__ = ["shared_corpus", "tools_of", "clear", "fill_in_background", "MAX_CORPORA"]

#: Corpora kept at once (the last used; each may hold tens of MB at tens of thousands of tools).
MAX_CORPORA = 4

_TEXTS = tuple(attrgetter(name) for name in ("name", "description", "path", "collection"))


@dataclass
class _Entry:
    ids: tuple[int, ...]
    stamp: int
    tools: list[Tool]  # kept alive: their ids cannot be reused while the entry is cached
    corpus: MemoryCorpus


_LOCK = threading.Lock()
_BY_OBJECTS: OrderedDict[tuple[int, int, str], _Entry] = OrderedDict()
_BY_CONTENT: OrderedDict[str, MemoryCorpus] = OrderedDict()
_BUILDING: dict[str, threading.Lock] = {}


def _stamp(tools: Sequence[Tool]) -> int:
    """The texts of the tools' documents that a user changes by assigning a new value."""
    return hash(tuple(hash(tuple(map(get, tools))) for get in _TEXTS))


def _content_key(corpus_docs: Sequence[Any], home: Path | None) -> str:
    digest = blake2b(digest_size=16)
    digest.update(str(home).encode("utf-8", "surrogatepass"))
    for doc in corpus_docs:
        digest.update(doc.hash().encode("ascii"))
    return digest.hexdigest()


def shared_corpus(tools: Sequence[Tool], home: Path | None = None) -> MemoryCorpus:
    """The corpus of ``tools`` (see the module docstring): a cached one when these tools (or
    equal ones) were searched before in this process, else a new one, kept."""
    listed = list(tools)
    ids = tuple(map(id, listed))
    quick = (hash(ids), len(ids), str(home))
    stamp = _stamp(listed)
    with _LOCK:
        entry = _BY_OBJECTS.get(quick)
        if entry is not None and entry.ids == ids and entry.stamp == stamp:
            _BY_OBJECTS.move_to_end(quick)
            if entry.corpus.content_key in _BY_CONTENT:
                _BY_CONTENT.move_to_end(entry.corpus.content_key)
            return entry.corpus
    docs = docs_of(listed)
    key = _content_key(docs, home)
    with _LOCK:
        building = _BUILDING.setdefault(key, threading.Lock())
    with building:  # one build per content; the others wait for it and take it
        with _LOCK:
            corpus = _BY_CONTENT.get(key)
        fresh = corpus is None
        if corpus is None:
            corpus = MemoryCorpus(listed, home=home, docs=docs)
            corpus.content_key = key
        with _LOCK:
            _BY_CONTENT[key] = corpus
            _BY_CONTENT.move_to_end(key)
            _BY_OBJECTS[quick] = _Entry(ids, stamp, listed, corpus)
            _BY_OBJECTS.move_to_end(quick)
            while len(_BY_CONTENT) > MAX_CORPORA:
                _BY_CONTENT.popitem(last=False)
            while len(_BY_OBJECTS) > 2 * MAX_CORPORA:
                _BY_OBJECTS.popitem(last=False)
            _BUILDING.pop(key, None)
    if fresh:
        fill_in_background(corpus)
    return corpus


def _cached(corpus: MemoryCorpus) -> bool:
    with _LOCK:
        return _BY_CONTENT.get(corpus.content_key) is corpus


def fill_in_background(corpus: MemoryCorpus) -> threading.Thread | None:
    """Compute the full model's vectors of every tool of ``corpus`` in a background thread, a
    batch at a time (what the store's filler, ``fill.py``, does after an import): requests
    short-list tools and find their vectors there, instead of computing them, as they do on the
    stored index. Only for a corpus larger than a short list, with an embedder of two stages,
    unless ``ATC_EMBED_BACKGROUND=off``; it stops when the corpus leaves the cache. ``filled``
    (an event on the corpus) is set when it is done."""
    done = threading.Event()
    corpus.filled = done
    if embed_background() == "off" or corpus.n <= SHORT_LIST:
        done.set()
        return None

    def work() -> None:
        try:
            embedder = make_embedder()
            stages = corpus.stages(embedder) if embedder is not None else None
            if stages is None or embedder is None:
                return
            lacking = [int(r) for r in stages.exact.missing()]
            for start in range(0, len(lacking), BATCH):
                if not _cached(corpus):
                    return
                rows = [int(r) for r in stages.exact.missing(lacking[start:start + BATCH])]
                stages.exact.compute(rows, embedder)
        except Exception:  # it only makes searches faster: a search computes what it needs itself
            return
        finally:
            done.set()

    thread = threading.Thread(target=work, name="atc-corpus-fill", daemon=True)
    thread.start()
    return thread


def clear() -> None:
    """Forget every cached corpus (tools changed in place, or memory to give back)."""
    with _LOCK:
        _BY_OBJECTS.clear()
        _BY_CONTENT.clear()


def tools_of(tools: Any) -> list[Tool]:
    """The ``Tool`` objects of what ``atc.search`` is given: tools, collections (what
    ``atc.load`` returns), a ``Toolset``, or anything ``tools=`` takes elsewhere (spec paths,
    stored collection names, MCP sources, Python functions), alone or in a list."""
    if isinstance(tools, Toolset):
        return list(tools.tools.values())
    if isinstance(tools, Collection):
        return list(tools.tools)
    if isinstance(tools, Tool):
        return [tools]
    items = [tools] if isinstance(tools, str | Path) or callable(tools) else list(tools)
    if set(map(type, items)) == {Tool}:  # the common case, checked at C speed
        return items
    out: list[Tool] = []
    others: list[Any] = []
    for item in items:
        if isinstance(item, Tool):
            out.append(item)
        elif isinstance(item, Collection):
            out.extend(item.tools)
        elif isinstance(item, Toolset):
            out.extend(item.tools.values())
        else:
            others.append(item)
    if others:
        out.extend(t for c in collections_of(others) for t in c.tools)
    return out
