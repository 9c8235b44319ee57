"""Picking and running a retriever: what ``atc tools search``, ``atc solve`` and ``atc.search`` call.

``retriever=None`` is the automatic choice: ``hybrid`` when an embedder is available and the
corpus has (or, for an in-memory corpus, can compute and cache) its vectors, else ``bm25``. The
result's ``retriever`` field says what ran.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from atc.config import atc_home
from atc.errors import UsageError
from atc.retrieval.base import Embedder, Retriever, SearchResult, factory
from atc.retrieval.corpus import Corpus, MemoryCorpus
from atc.retrieval.embedders import make_embedder
from atc.retrieval.hybrid import stages_of
from atc.retrieval.index import open_index, update_index
from protocols.model import Tool
from protocols.store import Store

__all__ = ["make_retriever", "search", "search_store", "store_corpus", "load_builtins", "AUTO"]

AUTO = "auto"
#: The automatic choice embeds at most this many new tools of an in-memory corpus on the spot
#: (seconds with the local model); a larger spec gets BM25 until its tools are imported, which
#: embeds them once.
MAX_AUTO_EMBED = 300


def load_builtins() -> None:
    """Make sure every built-in retriever name is registered. The package registers stand-ins
    that import a retriever's module on first use (atc/retrieval/base.py), so nothing is
    imported here: ``atc tools search --retriever hybrid`` never loads Re-Invoke or AnyTool."""
    importlib.import_module("atc.retrieval.base")


def store_corpus(home: Path, embedder: Embedder | None = None) -> Corpus:
    """The persistent index of the store in ``home``, brought up to date if the store changed."""
    return open_index(home, embedder=embedder)


def make_retriever(name: str | None, corpus: Corpus, *, embedder: Embedder | None = None,
                   **options: Any) -> Retriever:
    """The retriever ``name`` over ``corpus`` (None or ``"auto"``: see the module doc). Options
    (``client`` for the model-based ones...) go to the factory as keywords."""
    load_builtins()
    if name in (None, "", AUTO):
        if embedder is None and getattr(corpus, "embedder", "") is None:
            # A stored index without vectors: BM25, without loading an embedding model at all.
            chosen = factory("bm25")(corpus=corpus, **options)
            if (getattr(corpus, "meta", None) or {}).get("deferred") and hasattr(chosen, "notes"):
                chosen.notes.append("the tools were imported with --no-embed: BM25 ran "
                                    "(--retriever hybrid embeds them once, then the automatic choice is hybrid)")
            return chosen
        emb = embedder or make_embedder()
        notes: list[str] = []
        if emb is not None:
            in_memory = isinstance(corpus, MemoryCorpus)
            if stages_of(corpus, emb) is not None:  # two stages: static vectors now, full ones as needed
                return factory("hybrid")(corpus=corpus, embedder=emb, **options)
            missing = corpus.uncached(emb) if isinstance(corpus, MemoryCorpus) else 0
            if missing > MAX_AUTO_EMBED:
                notes.append(f"{missing} tools have no vectors yet: BM25 ran "
                             "(import the collection to embed it once, or ask for --retriever hybrid)")
            elif corpus.vectors(emb, compute=in_memory) is not None:
                return factory("hybrid")(corpus=corpus, embedder=emb, **options)
        chosen = factory("bm25")(corpus=corpus, **options)
        if notes and hasattr(chosen, "notes"):
            chosen.notes.extend(notes)
        return chosen
    make = factory(name)
    return make(corpus=corpus, embedder=embedder, **options)


def search_store(query: str, k: int, retriever: str | None = None, *, home: Path, embedder: Embedder | None = None,
                 embed_progress: Any = None, **options: Any) -> tuple[SearchResult, bool]:
    """The ``k`` tools of the whole store in ``home`` most relevant to ``query``, and whether the
    store is empty (no index is made for an empty store). What ``atc.search``, ``atc tools
    search`` and the search server (server.py) run, so that their answers cannot drift apart.
    ``hybrid`` or ``dense`` by name over an index without their vectors embeds the tools first
    (``embed_progress(done, total)`` hears how it goes)."""
    store = Store(home)
    # The store's own index.json (800 KB at 17k tools) is not parsed when the retrieval index is
    # current: that is known from file stamps, and the index names the collections.
    if not (store.dir / "index.json").exists():
        return SearchResult(hits=[], retriever=retriever or "bm25"), True
    corpus = open_index(home, store=store, embedder=embedder)
    if corpus.n == 0:
        return SearchResult(hits=[], retriever=retriever or "bm25"), not corpus.collections
    if retriever in EMBEDDING_RETRIEVERS:
        corpus = _embedded(home, store, corpus, embedder, embed_progress)
    return make_retriever(retriever, corpus, embedder=embedder, **options).search(query, k), False


#: the retrievers that need the tools' vectors: asked for by name, they get them (embedded on the spot)
EMBEDDING_RETRIEVERS = ("hybrid", "dense")


def _embedded(home: Path, store: Any, corpus: Any, embedder: Embedder | None, progress: Any) -> Any:
    """The index with the vectors of ``embedder`` (default: the configured one): a store imported
    with ``--no-embed``, or embedded by another model, is embedded now, once (cached vectors are
    reused), so that asking for the hybrid by name gives the hybrid."""
    emb = embedder or make_embedder(required=True)
    assert emb is not None
    if stages_of(corpus, emb) is not None or corpus.vectors(emb, compute=False) is not None:
        return corpus
    if progress is not None and getattr(progress, "embedder", False) is None:
        progress.embedder = emb  # a reporter that prepares the model and names the runtime
    return update_index(home, store=store, embedder=emb, progress=progress)


def search(query: str, tools: Sequence[Tool] | Any = None, k: int = 5, retriever: str | None = None, *,
           home: Path | str | None = None, embedder: Embedder | None = None, **options: Any) -> SearchResult:
    """The ``k`` tools most relevant to ``query``: among ``tools`` (``Tool`` objects, collections
    such as ``atc.load`` returns, a ``Toolset``, or anything ``tools=`` takes), or (None) every
    tool of the store in ``home`` (default ``ATC_HOME``), ranked by ``retriever`` (None:
    automatic). Tools given directly are indexed once per set and process
    (``atc.retrieval.inmemory``): from the second request on, a search costs what the stored
    index's does.

    Args:
        query: what the tools are for, in words.
        tools: the tools to search (None: the store's).
        k: how many to return.
        retriever: a registered name (None: automatic).
        home: the store (default ``ATC_HOME``); ``embedder``: the dense retriever's.

    Returns:
        The ``SearchResult``, best first.

    Raises:
        UsageError: an unknown retriever.
    """
    if k < 1:
        raise UsageError("k must be at least 1")
    if not query or not query.strip():
        raise UsageError("the query is empty")
    where = atc_home(home)
    if tools is None:
        return search_store(query, k, retriever, home=where, embedder=embedder, **options)[0]
    # Lazy though it is atc's own: tools in memory need atc.toolsets, the spec loaders and sandbox's
    # api (about 40 modules, 20-50 ms), which `atc tools search` over the store never uses.
    from atc.retrieval.inmemory import shared_corpus, tools_of

    corpus = shared_corpus(tools_of(tools), home=where)
    if corpus.n == 0:
        return SearchResult(hits=[], retriever=retriever or "bm25")
    return make_retriever(retriever, corpus, embedder=embedder, **options).search(query, k)
