"""Re-Invoke: unsupervised tool retrieval with synthetic queries and intent extraction
(Chen et al. 2024).

Index time: a model writes a few user requests per tool (``atc.retrieval.queries``, stored in
ATC_HOME). A tool then has several views: its document and each synthetic query. Query time:
the model extracts the request's intents (one line each, background dropped); each intent
scores every tool by its best-matching view; tools are ranked within each intent, and intents
are merged by the paper's ordering: a tool's key is its best (rank, -score) over the intents,
so that the top tool of every intent comes before the second tool of any.

Similarity is the cosine of the ``Embedder``'s vectors when one is given, else BM25 over the
views, so that Re-Invoke also works without embeddings. Without a model client the request is
its own single intent; tools without stored queries keep their document view (a few missing
ones are generated on the spot when a client is there; for a large store run
``atc tools queries`` first).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from atc import prompts
from atc.config import atc_home
from atc.errors import ModelError
from atc.llm.chat import ModelClient
from atc.retrieval.base import Embedder, Hit, SearchResult, register
from atc.retrieval.queries import QueryStore, document_hash, generate, tool_document
from atc.retrieval.select import corpus_tools
from protocols.bm25 import tokenize
from protocols.model import Tool

__all__ = ["ReInvoke", "extract_intents", "merge_intents", "make"]

#: At most this many intents are used (a runaway answer cannot multiply the work).
MAX_INTENTS = 8
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")


def extract_intents(text: str, query: str) -> list[str]:
    """The intent lines of a model's answer (bullets and numbers stripped); the query itself
    when the answer holds none."""
    intents: list[str] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip().strip('"')
        if not line or line.lower().rstrip(":") in ("intents", "intent") or line.endswith(":"):
            continue
        if line not in intents:
            intents.append(line)
    return intents[:MAX_INTENTS] or [query]


def merge_intents(per_intent: Sequence[dict[int, float]], k: int) -> list[tuple[int, float]]:
    """Merge per-intent scores ``{tool index: score}`` into ``k`` (tool index, best score),
    ordered by the best rank a tool reaches in any intent, then by its score there."""
    best: dict[int, tuple[int, float]] = {}
    for scores in per_intent:
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
        for rank, (tool, score) in enumerate(ranked):
            mine = (rank, -score)
            if tool not in best or mine < best[tool]:
                best[tool] = mine
    ordered = sorted(best.items(), key=lambda kv: (kv[1][0], kv[1][1], kv[0]))
    return [(tool, -key[1]) for tool, key in ordered[:max(k, 0)]]


class ViewIndex:
    """Okapi BM25 over the views, with every posting list built once: a Re-Invoke retriever
    answers many queries over the same views."""

    def __init__(self, texts: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        from collections import Counter

        self.k1, self.b = k1, b
        self.postings: dict[str, list[tuple[int, int]]] = {}
        lengths = []
        for i, text in enumerate(texts):
            words = tokenize(text)
            lengths.append(len(words))
            for term, count in Counter(words).items():
                self.postings.setdefault(term, []).append((i, count))
        avg = (sum(lengths) / len(lengths)) if lengths else 1.0
        self.norms = [k1 * (1 - b + b * n / (avg or 1.0)) for n in lengths]
        self.n = len(lengths)

    def scores(self, query: str) -> dict[int, float]:
        import math

        acc: dict[int, float] = {}
        for term in set(tokenize(query)):
            posting = self.postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (self.n - len(posting) + 0.5) / (len(posting) + 0.5))
            for i, f in posting:
                acc[i] = acc.get(i, 0.0) + idf * f * (self.k1 + 1) / (f + self.norms[i])
        return acc


class ReInvoke:
    """The retriever. ``per_tool`` synthetic queries per tool; up to ``generate_missing`` tools
    without stored queries get theirs generated during a search (0: never)."""

    name = "reinvoke"

    def __init__(self, tools: Sequence[Tool], *, client: ModelClient | None = None, embedder: Embedder | None = None,
                 home: str | Path, per_tool: int = 5, generate_missing: int = 64) -> None:
        self.tools = list(tools)
        self.client = client
        self.embedder = embedder
        self.store = QueryStore(home)
        self.per_tool = per_tool
        self.generate_missing = generate_missing
        self._views: list[tuple[int, str]] | None = None
        self._index: Any = None
        self._matrix: Any = None

    def views(self, usage: dict[str, int], notes: list[str]) -> list[tuple[int, str]]:
        """(tool index, text) of every view, grouped by tool; built once per retriever."""
        if self._views is not None:
            return self._views
        keys = [document_hash(t) for t in self.tools]
        stored = {key: self.store.get(key) for key in set(keys)}
        missing = [t for t, key in zip(self.tools, keys, strict=True) if stored[key] is None]
        if missing and self.client is not None and len(missing) <= self.generate_missing:
            report = generate(missing, self.client, self.store, per_tool=self.per_tool)
            for name in usage:
                usage[name] += report.usage.get(name, 0)
            notes.extend(f"query generation: {e}" for e in report.errors)
            stored.update({key: self.store.get(key) for key in {document_hash(t) for t in missing}})
            missing = [t for t, key in zip(self.tools, keys, strict=True) if stored[key] is None]
        if missing:
            notes.append(f"{len(missing)} of {len(self.tools)} tools have no synthetic queries (their document is "
                         "their only view): run 'atc tools queries'")
        views: list[tuple[int, str]] = []
        for i, (tool, key) in enumerate(zip(self.tools, keys, strict=True)):
            views.append((i, tool_document(tool)))
            views.extend((i, q) for q in (stored[key] or [])[:self.per_tool])
        self._views = views
        return views

    def intents(self, query: str, usage: dict[str, int], notes: list[str]) -> list[str]:
        if self.client is None:
            notes.append("no model: the request is its own only intent")
            return [query]
        try:
            completion = self.client.complete([{"role": "user", "content": prompts.render("reinvoke_intents",
                                                                                          query=query)}])
        except ModelError as exc:
            notes.append(f"intent extraction failed ({exc.message}); the request is its own only intent")
            return [query]
        usage["llm_calls"] += completion.requests
        usage["prompt_tokens"] += completion.prompt_tokens
        usage["completion_tokens"] += completion.completion_tokens
        return extract_intents(completion.text, query)

    def scores(self, intents: Sequence[str], views: list[tuple[int, str]]) -> list[dict[int, float]]:
        """Per intent, each tool's best score over its views (tools matching nothing left out)."""
        if self.embedder is not None:
            # numpy: 60-120 ms to import, and a BM25-only search never needs it
            import numpy as np

            if self._matrix is None:
                self._matrix = self.embedder.embed([text for _, text in views])
            sims = self.embedder.embed(list(intents)) @ self._matrix.T
            owners = np.array([i for i, _ in views])
            starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
            best = np.maximum.reduceat(sims, starts, axis=1)
            tools = owners[starts]
            return [{int(t): float(s) for t, s in zip(tools, row, strict=True)} for row in best]
        if self._index is None:
            self._index = ViewIndex([text for _, text in views])
        out: list[dict[int, float]] = []
        for intent in intents:
            per: dict[int, float] = {}
            for view, score in self._index.scores(intent).items():
                tool = views[view][0]
                per[tool] = max(per.get(tool, 0.0), score)
            out.append(per)
        return out

    def search(self, query: str, k: int = 5) -> SearchResult:
        usage = {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        notes: list[str] = []
        views = self.views(usage, notes)
        intents = self.intents(query, usage, notes)
        ranked = merge_intents(self.scores(intents, views), k)
        hits = [Hit(self.tools[i].collection, self.tools[i].name, score, self.tools[i].summary) for i, score in ranked]
        notes.append("intents: " + " | ".join(intents))
        return SearchResult(hits, self.name, usage, notes)


def make(*, tools: Sequence[Tool] | None = None, client: ModelClient | None = None, embedder: Embedder | None = None,
         home: str | Path | None = None, per_tool: int = 5, corpus: Any = None, **_: Any) -> ReInvoke:
    """The registry's factory (``--retriever reinvoke``): over ``tools``, or a retrieval ``corpus``."""
    return ReInvoke(corpus_tools(tools, corpus, home), client=client, embedder=embedder, home=atc_home(home), per_tool=per_tool)


# Importing the module registers it too (``atc.retrieval`` registers it lazily by name already).
register("reinvoke", make)
