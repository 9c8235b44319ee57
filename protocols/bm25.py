"""BM25 retrieval of tools for a query.

A tool's document is its name split on ``_``, its description, group, category and parameter
names (also split). The index is plain Python (no dependencies): build it once per tool set
(:class:`BM25Index`), or from precomputed texts (:meth:`BM25Index.from_texts`), which is what the
store does so that a search does not parse every stored protocol.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from protocols.model import Tool

__all__ = ["SearchHit", "BM25Index", "DocInfo", "search", "tokenize", "document_text"]

_TOKEN = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
#: Words too common in queries and API descriptions to tell tools apart.
STOPWORDS = frozenset(
    "a an the of for to in on at by with and or is are be was were it its this that these those from as "
    "i me my we our you your he she they them their what which who whom how when where can could would "
    "should will do does did get give gets find tell show list some any all about into than then also "
    "please want need know".split()
)


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens, camelCase and snake_case split, stopwords dropped, light stemming."""
    words = _TOKEN.findall(_CAMEL.sub(r"\1 \2", text).lower())
    return [_stem(w) for w in words if w not in STOPWORDS]


@functools.lru_cache(maxsize=1 << 16)  # indexing 16k tools stems the same words again and again
def _stem(word: str) -> str:
    """A tiny suffix stripper: ``movies``/``movie``, ``companies``/``company``, ``searching``/``search``."""
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 3 and word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ie"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def document_text(tool: Tool) -> str:
    """The text BM25 indexes for one tool."""
    parts = [tool.name.replace("_", " "), tool.description, tool.group, tool.category,
             " ".join(p.replace("_", " ") for p in tool.properties), tool.path.replace("/", " ")]
    return " ".join(p for p in parts if p)


@dataclass
class SearchHit:
    """One search result: the tool and its BM25 score (higher is more relevant)."""

    tool: Tool
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.tool.name, "collection": self.tool.collection, "score": round(self.score, 4),
                "description": self.tool.summary}


@dataclass(frozen=True)
class DocInfo:
    """What chain-aware expansion needs to know of a document besides its text."""

    scope: str  # the collection: producers are looked for in the same one
    path: str
    needs_ids: bool  # a required path parameter: the tool cannot start a chain

    @classmethod
    def of(cls, tool: Tool) -> DocInfo:
        needs = any(b.location == "path" for n, b in tool.bindings.items() if n in tool.required)
        return cls(scope=tool.collection, path=tool.path, needs_ids=needs)

    def entities(self) -> list[str]:
        """The entities whose ids the path needs: ``/movie/{movie_id}`` -> movie; ``/artists/{id}`` -> artist."""
        out = []
        segments = [s for s in self.path.split("/") if s]
        for i, seg in enumerate(segments):
            if not (seg.startswith("{") and seg.endswith("}")):
                continue
            words = tokenize(seg[1:-1])
            if len(words) > 1 and words[-1] == "id":
                out.append(words[-2])
            elif i > 0 and not segments[i - 1].startswith("{"):
                prev = tokenize(segments[i - 1])
                if prev:
                    out.append(prev[-1])
        return out


class BM25Index:
    """Okapi BM25 over tool documents. ``keys`` are whatever identifies a document to the caller;
    ``infos`` (optional, one per document) enable chain-aware expansion in :meth:`top`."""

    def __init__(self, keys: Sequence[Any], texts: Sequence[str], infos: Sequence[DocInfo] | None = None, *,
                 k1: float = 1.2, b: float = 0.75, pretokenized: bool = False) -> None:
        """``pretokenized``: each text is already ``" ".join(tokenize(original))`` (what the store keeps,
        so that a search does not stem every stored word again)."""
        self.keys = list(keys)
        self.infos = list(infos) if infos is not None else None
        self.k1 = k1
        self.b = b
        # Postings are computed per query term on first use (a scan of the token lists, in C):
        # most indexes answer one query, and building every term's postings would cost more.
        self._docs: list[list[str]] = [t.split() if pretokenized else tokenize(t) for t in texts]
        self._len = [len(d) for d in self._docs]
        self._avg = (sum(self._len) / len(self._len)) if self._len else 0.0
        self._postings: dict[str, list[tuple[int, int]]] = {}
        self._producers: dict[tuple[str, str], list[int]] = {}
        self._scopes_mapped: set[str] = set()

    def _posting(self, term: str) -> list[tuple[int, int]]:
        """(document, term frequency) for every document containing ``term``."""
        found = self._postings.get(term)
        if found is None:
            found = [(i, d.count(term)) for i, d in enumerate(self._docs) if term in d]
            self._postings[term] = found
        return found

    @classmethod
    def from_tools(cls, tools: Sequence[Tool]) -> BM25Index:
        return cls(list(tools), [document_text(t) for t in tools], [DocInfo.of(t) for t in tools])

    def scores(self, query: str) -> list[tuple[int, float]]:
        """(document index, score) for every document sharing a term with the query, best first.

        Ties keep document order, so results are deterministic."""
        acc: dict[int, float] = {}
        n = len(self._docs)
        for term in set(tokenize(query)):
            posting = self._posting(term)
            if not posting:
                continue
            idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            for i, f in posting:
                norm = self.k1 * (1 - self.b + self.b * self._len[i] / (self._avg or 1.0))
                acc[i] = acc.get(i, 0.0) + idf * f * (self.k1 + 1) / (f + norm)
        return sorted(acc.items(), key=lambda kv: (-kv[1], kv[0]))

    def top(self, query: str, k: int = 5, *, producers: bool = True) -> list[tuple[Any, float]]:
        """The ``k`` best documents. With ``producers`` (and infos), chain-aware: a tool that needs a
        ``movie_id`` is useless without a tool that finds movies, so right after each hit that needs
        an entity id comes the best tool of the same collection that needs no id and whose path names
        that entity (search endpoints first, then relevance, then the shorter path)."""
        ranked = self.scores(query)
        infos = self.infos
        if not producers or infos is None:
            return [(self.keys[i], s) for i, s in ranked[: max(k, 0)]]
        relevance = dict(ranked)
        out: list[tuple[int, float]] = []
        seen: set[int] = set()
        for i, score in ranked[: max(k, 0)]:
            if i not in seen:
                out.append((i, score))
                seen.add(i)
            for entity in infos[i].entities():
                scope = infos[i].scope
                candidates = [j for j in self._producer_map(scope).get((scope, entity), []) if j not in seen]
                if candidates:
                    best = max(candidates, key=lambda j: ("search" in self._text_name(j),
                                                          relevance.get(j, 0.0), -len(infos[j].path), -j))
                    out.append((best, score))
                    seen.add(best)
        return [(self.keys[i], s) for i, s in out[: max(k, 0)]]

    def _text_name(self, j: int) -> str:
        key = self.keys[j]
        name = getattr(key, "name", None)
        if isinstance(name, str):
            return name
        return str(key[-1]) if isinstance(key, tuple) and key else str(key)

    def _producer_map(self, scope: str) -> dict[tuple[str, str], list[int]]:
        """(scope, entity word) -> documents that need no id and whose path has that word; built
        per scope on first use."""
        if scope not in self._scopes_mapped:
            self._scopes_mapped.add(scope)
            for j, info in enumerate(self.infos or []):
                if info.scope != scope or info.needs_ids:
                    continue
                for word in set(tokenize(info.path.replace("/", " "))):
                    self._producers.setdefault((scope, word), []).append(j)
        return self._producers


def search(query: str, tools: Sequence[Tool], k: int = 5, *, producers: bool = True) -> list[SearchHit]:
    """The ``k`` tools most relevant to ``query`` (only tools sharing a word with it, plus, with
    ``producers``, the tools that find the ids those need; see :meth:`BM25Index.top`)."""
    index = BM25Index.from_tools(list(tools))
    return [SearchHit(tool=t, score=s) for t, s in index.top(query, k, producers=producers)]
