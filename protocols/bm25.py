"""The words of a text as atc's lexical indexes count them, and what chain-aware expansion knows
of a tool.

``tokenize`` is shared by the BM25F index (``atc.retrieval.lexical``), the documents
(``atc.retrieval.doc``) and Re-Invoke's views, so that a query and a tool are cut into words the
same way everywhere. ``DocInfo`` says which entity ids a tool's path needs (``/movie/{movie_id}``
-> movie): the retrievers put the tool that finds such ids right after a hit that needs them.
The ranking itself lives in ``atc.retrieval`` (the plain-BM25 index that was here, and the
``.search.json`` files the store wrote for it, were removed in issue 32: BM25F replaced both).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from protocols.model import Tool

__all__ = ["DocInfo", "tokenize", "STOPWORDS"]

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
