"""What a host's model reads about the tools: search, full protocols, the collections.

``search_tools`` ranks the tools of the served collections with the configured retriever
(``atc.retrieval``; BM25, dense or hybrid, no model) and answers with compact signatures
(``protocols.render.render_compact``: the call, the response shape, the purpose): enough to pick
tools, a fraction of their specs. ``describe_tools`` gives the full protocol of the tools a
program will use (``render_full``: every parameter, the response fields -- learnt by probing when
the collection was documented that way -- examples, status codes, which credentials the gateway
adds). Each answer is a dataclass: ``text()`` is what the host's model reads, ``to_dict()`` the
structured result.

The retriever is made once, in the background when the server starts (the hybrid one embeds the
tools first), and shared by every session: a search reads it and changes nothing. The automatic
choice is BM25 for up to ``LISTING_MAX_TOOLS`` tools (run_program's description lists them all
anyway, and an embedding model costs seconds to load), else hybrid when embeddings are available.
"""

from __future__ import annotations

import difflib
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from atc.config import atc_home
from atc.errors import UsageError
from atc.retrieval.api import make_retriever
from atc.retrieval.corpus import MemoryCorpus
from protocols.model import Tool
from protocols.render import purpose, render_compact, render_full
from sandbox.api import Toolset

__all__ = ["Catalog", "Found", "Described", "MAX_K", "LISTING_MAX_TOOLS"]

#: The most tools one search returns.
MAX_K = 50
#: Served collections with at most this many tools are listed in full in run_program's description
#: (the host's model then needs no search at all).
LISTING_MAX_TOOLS = 30


@dataclass
class Found:
    """The answer of ``search_tools``."""

    query: str
    retriever: str
    tools: list[Tool]
    scores: list[float]
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        if not self.tools:
            return f"No tool matches {self.query!r}. Try other words (what the API does, not how you would name it)."
        head = f"{len(self.tools)} tools for {self.query!r}, best first (describe_tools gives a tool's full protocol):"
        return head + "\n" + render_compact(self.tools, param_notes=False) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "retriever": self.retriever, "notes": self.notes,
                "tools": [{"name": t.name, "collection": t.collection, "score": round(s, 4),
                           "signature": render_compact([t], param_notes=False).splitlines()[0],
                           "purpose": purpose(t)} for t, s in zip(self.tools, self.scores, strict=True)]}


@dataclass
class Described:
    """The answer of ``describe_tools``: the protocols found, and the names that are no tool."""

    tools: list[Tool]
    unknown: dict[str, list[str]]  # name -> close tool names

    def text(self) -> str:
        parts = [render_full(t).strip() for t in self.tools]
        for name, close in self.unknown.items():
            hint = f" Did you mean {', '.join(close)}?" if close else " Use search_tools to find the right name."
            parts.append(f"{name}: no such tool.{hint}")
        return "\n\n".join(parts) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {"tools": [{"name": t.name, "collection": t.collection, "protocol": render_full(t)} for t in self.tools],
                "unknown": sorted(self.unknown)}


class Catalog:
    """The served tools as a host's model sees them (thread-safe)."""

    def __init__(self, toolset: Toolset, retriever: str | None = None) -> None:
        self.toolset = toolset
        self.retriever_name = retriever
        self._finder: Any = None
        self._lock = threading.Lock()

    # -- search --------------------------------------------------------------------------------

    def finder(self) -> Any:
        """The retriever over the served tools, made on first use (``warm`` makes it sooner)."""
        with self._lock:
            if self._finder is None:
                corpus = MemoryCorpus(list(self.toolset.tools.values()), home=atc_home())
                name = self.retriever_name
                if name in (None, "auto") and len(self.toolset.tools) <= LISTING_MAX_TOOLS:
                    name = "bm25"  # so few tools are all listed to the model: no embedding model to load
                self._finder = make_retriever(name, corpus)
            return self._finder

    def warm(self) -> threading.Thread:
        """Make the retriever in a background thread (a failure shows at the first search)."""

        def make() -> None:
            try:
                self.finder()
            except Exception:  # reported when a search needs it
                pass

        thread = threading.Thread(target=make, name="atc-serve-retriever", daemon=True)
        thread.start()
        return thread

    def search(self, query: str, k: int = 8) -> Found:
        if not query or not query.strip():
            raise UsageError("the query is empty: say what the tools should do")
        k = max(1, min(int(k), MAX_K))
        result = self.finder().search(query, k)
        tools: list[Tool] = []
        scores: list[float] = []
        for hit in result.hits:
            tool = hit.tool if isinstance(hit.tool, Tool) else self.toolset.tools.get(hit.name)
            if tool is not None:
                tools.append(tool)
                scores.append(hit.score)
        return Found(query=query, retriever=result.retriever, tools=tools, scores=scores, notes=list(result.notes))

    # -- protocols -----------------------------------------------------------------------------

    def describe(self, names: list[str]) -> Described:
        if not names:
            raise UsageError("name at least one tool (search_tools finds them)")
        known = self.toolset.tools
        tools: list[Tool] = []
        unknown: dict[str, list[str]] = {}
        for raw in dict.fromkeys(str(n).strip() for n in names[:MAX_K]):
            name = raw.rsplit(".", 1)[-1].split("(", 1)[0].strip()  # "library.get_book" or "get_book(...)"
            snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()  # an operationId: "getBook"
            if name in known or snake in known:
                tool = known[name if name in known else snake]
                if tool not in tools:
                    tools.append(tool)
            else:
                unknown[raw] = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
        return Described(tools=tools, unknown=unknown)

    # -- collections ---------------------------------------------------------------------------

    def collections(self) -> list[dict[str, Any]]:
        return [{"name": c.name, "tools": len(c.tools), "kind": c.kind,
                 "description": " ".join((c.description or "").split())[:300]}
                for c in self.toolset.collections]

    def collections_text(self) -> str:
        lines = [f"- {c['name']}: {c['tools']} tools" + (f". {c['description']}" if c["description"] else "")
                 for c in self.collections()]
        return "Collections served by atc (read atc://collections/NAME for a collection's tools):\n" + \
            "\n".join(lines) + "\n"

    def collection_text(self, name: str) -> str:
        found = next((c for c in self.toolset.collections if c.name == name), None)
        if found is None:
            names = ", ".join(c.name for c in self.toolset.collections)
            raise UsageError(f"no collection {name!r}", hint=f"collections: {names}")
        return f"# {found.name}: {len(found.tools)} tools\n\n" + render_compact(found.tools) + "\n"

    def summary(self) -> str:
        """One line: how many tools in which collections."""
        cols = ", ".join(f"{c.name} ({len(c.tools)})" for c in self.toolset.collections)
        return f"{len(self.toolset.tools)} tools in {cols}"

    def listing(self) -> str | None:
        """Every tool's compact signature when there are few enough to list (else None)."""
        if len(self.toolset.tools) > LISTING_MAX_TOOLS:
            return None
        return render_compact(list(self.toolset.tools.values()), param_notes=False)
