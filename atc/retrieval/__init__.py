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

Built-in retrievers register here by name without importing their modules: the first use of a
name imports its module, whose own registration replaces the stand-in, so ``import
atc.retrieval`` stays cheap and ``registered()`` lists every built-in from the start.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from atc.retrieval.base import Embedder, Hit, Retriever, SearchResult, factory, register, registered

__all__ = ["Embedder", "Hit", "Retriever", "SearchResult", "factory", "register", "registered"]

#: Built-in retrievers: name -> the module that registers it.
_BUILTIN = {
    "bm25": "atc.retrieval.hybrid",
    "dense": "atc.retrieval.hybrid",
    "hybrid": "atc.retrieval.hybrid",
    "reinvoke": "atc.retrieval.reinvoke",
    "anytool": "atc.retrieval.anytool",
}


def _lazy(name: str, module: str) -> Callable[..., Retriever]:
    def make(**options: Any) -> Retriever:
        import_module(module)
        real = factory(name)
        if real is make:  # the module did not register the name: a bug, not a loop
            raise RuntimeError(f"{module} does not register the retriever {name!r}")
        return real(**options)

    return make


for _name, _module in _BUILTIN.items():
    register(_name, _lazy(_name, _module))
