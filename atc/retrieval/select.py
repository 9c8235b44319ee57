"""What the solve loop asks of a retriever: the tools to show first, and, after a failed
attempt, a reopened search (AnyTool's self-reflection) when the retriever can reflect.

Kept here rather than in ``atc.loop.solving`` so that the loop gains two calls, not the logic. A
retriever reflects when it has ``reflect(reason, blamed, *, broken, k) -> SearchResult | None``;
``broken`` says whether the run showed the blamed tool to be broken (gone, failing, no such
endpoint) rather than misused, since only a broken tool is dropped from the pool.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from atc import prompts
from atc.config import atc_home
from atc.retrieval.base import Retriever, SearchResult, factory
from atc.retrieval.corpus import MemoryCorpus
from atc.retrieval.hybrid import Bm25Retriever
from protocols.model import Tool
from protocols.render import render_compact
from protocols.store import Store

__all__ = ["build", "select", "reopen", "is_broken", "reopened_text", "corpus_tools", "lexical_choice"]

#: A 404 only means "broken" when the server says the route itself does not exist (a 404 for an
#: unknown id is the program's mistake, not the tool's).
_NO_ROUTE = re.compile(r"no such (endpoint|route|path|api)|no route|unknown (endpoint|route|path)|"
                       r"endpoint (does not|doesn't) exist|cannot (get|post|put|delete) /", re.I)


#: Failures of the model's writing, which other tools would not fix: no search is reopened for them.
_NOT_RETRIEVAL = frozenset({"NoProgram", "SyntaxError"})


def build(retriever: str | Retriever, *, tools: Sequence[Tool], client: Any = None,
          home: str | Path | None = None, **options: Any) -> Retriever:
    """A retriever object: ``retriever`` itself, or the registered one of that name built over ``tools``."""
    if not isinstance(retriever, str):
        return retriever
    return factory(retriever)(tools=list(tools), client=client, home=atc_home(home), **options)


def corpus_tools(tools: Sequence[Tool] | None, corpus: Any, home: str | Path | None) -> list[Tool]:
    """The ``Tool`` objects a model-backed retriever reads: ``tools``, else those of ``corpus``
    (anything with ``n``, ``tool(i)`` and ``doc(i)``, as the retrieval index offers); a document
    whose tool is not in memory is read from the store, one collection at a time."""
    if tools is not None or corpus is None:
        return list(tools or [])
    out: list[Tool | None] = [corpus.tool(i) for i in range(corpus.n)]
    missing = [i for i, t in enumerate(out) if t is None]
    if missing:
        store = Store(atc_home(home))
        loaded: dict[str, dict[str, Tool]] = {}
        for i in missing:
            doc = corpus.doc(i)
            if doc.collection not in loaded:
                loaded[doc.collection] = {t.name: t for t in store.get(doc.collection).tools}
            out[i] = loaded[doc.collection].get(doc.name)
    return [t for t in out if t is not None]


def lexical_choice(query: str, tools: Sequence[Tool], k: int) -> SearchResult:
    """BM25F's first ``k`` of ``tools``, with chain-aware expansion: what a search that found
    nothing falls back on (it needs no model and no index)."""
    return Bm25Retriever(MemoryCorpus(tools)).search(query, k)


def _tools_of(result: SearchResult, everything: Sequence[Tool]) -> list[Tool]:
    by_key = {(t.collection, t.name): t for t in everything}
    out = [by_key[(h.collection, h.name)] for h in result.hits if (h.collection, h.name) in by_key]
    return out


def select(query: str, everything: Sequence[Tool], retriever: Retriever, k: int) -> tuple[list[Tool], SearchResult]:
    """The tools ``retriever`` picks for ``query`` (BM25's first ``k`` if it picks none it knows)."""
    result = retriever.search(query, k)
    tools = _tools_of(result, everything)
    if not tools:
        tools = [h.tool for h in lexical_choice(query, everything, k).hits if h.tool is not None] \
            or list(everything)[:k]
        result.notes.append(f"{result.retriever} returned no known tool; BM25's choice instead")
    return tools, result


def is_broken(blamed: str | None, error: dict[str, Any] | None, calls: Sequence[Any]) -> bool:
    """Did the run show ``blamed`` to be broken: a 410, 501 or other 5xx, no connection, or a 404
    that says the route does not exist?"""
    if not blamed:
        return False
    for call in calls:
        if getattr(call, "tool", None) != blamed:
            continue
        status = getattr(call, "status", None)
        if status is not None and (status in (410, 501) or status >= 500):
            return True
        if getattr(call, "failure", None) == "connect":
            return True
        if status == 404 and _NO_ROUTE.search(f"{getattr(call, 'error', '')} {getattr(call, 'response', '')}"):
            return True
    return bool(_NO_ROUTE.search(str((error or {}).get("message") or "")))


def reopen(retriever: Retriever, error: dict[str, Any] | None, blamed: str | None, calls: Sequence[Any],
           everything: Sequence[Tool], k: int) -> tuple[list[Tool], SearchResult] | None:
    """Reopen the search after a failed attempt, when ``retriever`` can reflect: the new tools
    and the round's result (its usage is the caller's to add); None when nothing changes."""
    reflect = getattr(retriever, "reflect", None)
    err = error or {}
    if not callable(reflect) or err.get("type") in _NOT_RETRIEVAL:
        return None
    reason = f"{err.get('type', 'Error')}: {' '.join(str(err.get('message') or '').split())[:400]}"
    if blamed:
        reason += f" (attributed to {blamed})"
    result = reflect(reason, blamed, broken=is_broken(blamed, error, calls), k=k)
    if not isinstance(result, SearchResult):
        return None
    tools = _tools_of(result, everything)
    return (tools, result) if tools else None


def reopened_text(before: Sequence[Tool], after: Sequence[Tool]) -> str:
    """The note for the model's next prompt: what was dropped, and the tool set now shown."""
    now = {t.name for t in after}
    gone = [t.name for t in before if t.name not in now]
    dropped = f"These tools were removed: {', '.join(gone)}. " if gone else ""
    return prompts.render("retrieval_reopened", dropped=dropped, tools=render_compact(list(after)).strip())
