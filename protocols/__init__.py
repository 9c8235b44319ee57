"""Tool protocols: what a tool is, how specs are loaded, stored and rendered for a model.

    from protocols import load_spec, Store, render_compact
    tmdb = load_spec("tmdb_oas.json")          # OpenAPI / Swagger / ToolBench / MCP -> Collection
    Store(home).add(tmdb)                        # ATC_HOME/collections
    print(render_compact(tmdb.tools[:20]))       # signature-like protocols for a prompt

This is the bottom layer: it imports nothing from ``sandbox``, ``atc`` or ``probes``; the exception
tree lives here (``protocols.errors``) and ``atc.errors`` re-exports it.
Names are imported lazily (PEP 562): ``sandbox`` imports ``protocols.model`` in every process, and
should not pay for the loaders, the store and the renderer it does not use.

Searching tools is ``atc.search`` (``atc.retrieval``); ``protocols.bm25`` keeps only the
tokenizer and the path facts every retriever shares.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from protocols.loaders import Loader, load_data, load_spec, register_loader
    from protocols.model import Binding, Collection, SecurityScheme, Tool
    from protocols.render import render_compact, render_full, response_shape
    from protocols.store import CollectionInfo, Store

_LAZY: dict[str, str] = {
    "load_spec": "protocols.loaders",
    "load_data": "protocols.loaders",
    "Loader": "protocols.loaders",
    "register_loader": "protocols.loaders",
    "Store": "protocols.store",
    "CollectionInfo": "protocols.store",
    "Tool": "protocols.model",
    "Collection": "protocols.model",
    "Binding": "protocols.model",
    "SecurityScheme": "protocols.model",
    "render_compact": "protocols.render",
    "render_full": "protocols.render",
    "response_shape": "protocols.render",
}

__all__ = [
    "Binding",
    "Collection",
    "CollectionInfo",
    "Loader",
    "SecurityScheme",
    "Store",
    "Tool",
    "load_data",
    "load_spec",
    "register_loader",
    "render_compact",
    "render_full",
    "response_shape",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'protocols' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
