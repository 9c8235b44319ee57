"""Retrieval: choose, out of many tools, the few a model should see for a query.

The room of retrieval: ``base`` (the seam: ``Retriever``, ``Embedder``, ``Hit``, ``SearchResult``
and the registry of retrievers by name); the model-backed retrievers ``reinvoke`` (Re-Invoke:
synthetic queries per tool, intents per request; ``queries`` keeps the synthetic queries in
ATC_HOME) and ``anytool`` (AnyTool: hierarchical agents calling functions, with self-reflection;
``anytool_functions``); ``solving`` (what the solve loop asks of a retriever: the first tool set,
and reopening the search after a failed attempt).

Built-in retrievers register here by name without importing their modules: the factory in the
registry imports its module on first use, so ``import atc.retrieval`` stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from atc.retrieval.base import Embedder, Hit, Retriever, SearchResult, factory, register, registered

__all__ = ["Embedder", "Hit", "Retriever", "SearchResult", "factory", "register", "registered"]

#: Built-in retrievers: name -> "module:factory", imported when first built.
_BUILTIN = {
    "reinvoke": "atc.retrieval.reinvoke:make",
    "anytool": "atc.retrieval.anytool:make",
}


def _lazy(target: str) -> Callable[..., Retriever]:
    module, attr = target.split(":")

    def make(**options: Any) -> Retriever:
        built: Retriever = getattr(import_module(module), attr)(**options)
        return built

    return make


for _name, _target in _BUILTIN.items():
    register(_name, _lazy(_target))
