"""Retrieval: choose, out of many tools, the few a model should see for a query.

The room of retrieval: ``base`` (the seam: ``Retriever``, ``Embedder``, ``Hit``, ``SearchResult``
and the registry of retrievers by name), ``corpus`` (what retrievers rank: documents of tools,
in memory or in the store's index), ``index`` (the persistent index in ``ATC_HOME``),
``lexical`` (BM25F over memory-mapped postings), ``embedders`` and ``minilm`` (text -> vectors,
and their cache), ``hybrid`` (the LLM-free retrievers: ``bm25``, ``dense``, ``hybrid``), ``api``
(picking a retriever, ``atc.search``); the model-backed retrievers ``reinvoke`` (Re-Invoke:
synthetic queries per tool, intents per request; ``queries`` keeps the synthetic queries in
ATC_HOME) and ``anytool`` (AnyTool: hierarchical agents calling functions, with self-reflection;
``anytool_functions``); ``select`` (what the solve loop asks of a retriever: the first tool set,
and reopening the search after a failed attempt). See docs/retrieval.md and
docs/retrieval-agents.md.

Built-in retrievers register in ``base`` by name without importing their modules: the first use
of a name imports its module, whose own registration replaces the stand-in, so ``registered()``
lists every built-in from the start. The package itself imports nothing: the names below load
``base`` on first use, so that the search client (``warm``) starts without dataclasses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from atc.retrieval import base

if TYPE_CHECKING:
    from atc.retrieval.base import Embedder, Hit, Retriever, SearchResult, factory, register, registered

__all__ = ["Embedder", "Hit", "Retriever", "SearchResult", "factory", "register", "registered"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(base, name)
    raise AttributeError(f"module 'atc.retrieval' has no attribute {name!r}")
