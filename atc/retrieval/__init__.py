"""Retrieval: choose, out of many tools, the few a model should see for a query.

The room of retrieval: ``base`` (the seam: ``Retriever``, ``Embedder``, ``Hit``, ``SearchResult``
and the registry of retrievers by name).
"""

from __future__ import annotations

from atc.retrieval.base import Embedder, Hit, Retriever, SearchResult, factory, register, registered

__all__ = ["Embedder", "Hit", "Retriever", "SearchResult", "factory", "register", "registered"]
