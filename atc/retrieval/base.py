"""The retrieval seam: what every retriever takes and returns.

A retriever picks, out of a corpus of tools (every tool of the store, or the tools of one run),
the few a model should see for a query. Built-ins (BM25, the hybrid of BM25 and embeddings,
Re-Invoke, AnyTool) register by name exactly as a plugin would (``register``), and callers pick
one by name (``--retriever NAME``, ``atc.search(..., retriever=NAME)``).

Results name tools by ``(collection, name)``, the key that is unique across the store; the caller
reads protocols from wherever the corpus came from. ``SearchResult.to_dict()`` is the JSON of
``atc tools search --json``; ``retriever`` says which one really ran (an automatic choice, or a
fallback, is reported as what ran, not as what was asked for).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from atc.errors import UsageError

if TYPE_CHECKING:
    import numpy

__all__ = ["Hit", "SearchResult", "Retriever", "Embedder", "register", "registered", "factory"]


@dataclass
class Hit:
    """One retrieved tool: its key, its score under the retriever that ran (higher is better;
    scores of different retrievers are not comparable) and a one-line description."""

    collection: str
    name: str
    score: float
    description: str = ""
    #: the ``Tool`` itself when the corpus holds it in memory (``atc.search(query, tools)``); not in the JSON
    tool: Any = field(default=None, repr=False, compare=False)
    #: other copies of this tool, ``(collection, name)``: the same protocol in other collections,
    #: shown once as this hit (atc/retrieval/duplicates.py says which copy is shown)
    duplicates: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "collection": self.collection, "score": round(self.score, 4),
                "description": self.description,
                "duplicates": [{"collection": c, "name": n} for c, n in self.duplicates]}


@dataclass
class SearchResult:
    """The hits of one query, best first, which retriever ran, and what a model-backed retriever
    spent (``llm_calls``, ``prompt_tokens``, ``completion_tokens``; zeros without a model)."""

    hits: list[Hit]
    retriever: str
    usage: dict[str, int] = field(default_factory=lambda: {"llm_calls": 0, "prompt_tokens": 0,
                                                           "completion_tokens": 0})
    notes: list[str] = field(default_factory=list)

    # A result reads like the list of hits it holds (``atc.search`` used to return that list).
    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i: int) -> Hit:
        return self.hits[i]

    def to_dict(self) -> dict[str, Any]:
        return {"retriever": self.retriever, "hits": [h.to_dict() for h in self.hits], "usage": dict(self.usage),
                "notes": list(self.notes)}


@runtime_checkable
class Retriever(Protocol):
    """Anything that ranks tools for a query. ``name`` is what ``SearchResult.retriever`` reports."""

    name: str

    def search(self, query: str, k: int = 5) -> SearchResult: ...


@runtime_checkable
class Embedder(Protocol):
    """Text -> unit vectors. ``name`` identifies the model (stored vectors are keyed by it, so that
    vectors of two models are never mixed); ``dim`` is the vector length. ``embed`` returns a
    float32 array of shape ``(len(texts), dim)`` whose rows have L2 norm 1."""

    name: str

    @property
    def dim(self) -> int: ...  # read-only: a plain attribute satisfies it; a remote model learns it late

    def embed(self, texts: Sequence[str]) -> numpy.ndarray: ...


#: name -> factory(**options) -> Retriever. Factories receive keyword options only (the corpus,
#: the model client, the embedder...) and ignore what they do not use.
_FACTORIES: dict[str, Callable[..., Retriever]] = {}


def register(name: str, make: Callable[..., Retriever]) -> None:
    """Make a retriever available under ``name`` (a later registration replaces an earlier one)."""
    _FACTORIES[name] = make


def registered() -> list[str]:
    return sorted(_FACTORIES)


def factory(name: str) -> Callable[..., Retriever]:
    """The factory registered under ``name``; an unknown name is a ``UsageError`` listing the known ones."""
    make = _FACTORIES.get(name)
    if make is None:
        raise UsageError(f"unknown retriever {name!r}", hint=f"use one of: {', '.join(registered()) or '(none)'}")
    return make


#: Built-in retrievers: name -> the module that registers it (its stand-in imports it on first use).
_BUILTIN = {
    "bm25": "atc.retrieval.hybrid",
    "dense": "atc.retrieval.hybrid",
    "hybrid": "atc.retrieval.hybrid",
    "reinvoke": "atc.retrieval.reinvoke",
    "anytool": "atc.retrieval.anytool",
}


def _lazy(name: str, module: str) -> Callable[..., Retriever]:
    def make(**options: Any) -> Retriever:
        from importlib import import_module

        import_module(module)
        real = factory(name)
        if real is make:  # the module did not register the name: a bug, not a loop
            raise RuntimeError(f"{module} does not register the retriever {name!r}")
        return real(**options)

    return make


for _name, _module in _BUILTIN.items():
    register(_name, _lazy(_name, _module))
