"""Retrieval: choose, out of many tools, the few a model should see for a query.

The room of retrieval: ``base`` (the seam: ``Retriever``, ``Embedder``, ``Hit``, ``SearchResult``
and the registry of retrievers by name), ``corpus`` (what retrievers rank: documents of tools,
in memory or in the store's index), ``index`` (the persistent index in ``ATC_HOME``),
``lexical`` (BM25F over memory-mapped postings), ``embedders`` and ``minilm`` (text -> vectors,
and their cache), ``hybrid`` (the LLM-free retrievers: ``bm25``, ``dense``, ``hybrid``) and
``api`` (picking a retriever, ``atc.search``). See docs/retrieval.md.
"""

from __future__ import annotations

from atc.retrieval.base import Embedder, Hit, Retriever, SearchResult, factory, register, registered

__all__ = ["Embedder", "Hit", "Retriever", "SearchResult", "factory", "register", "registered"]
