"""One tool as the retrievers see it: a ``Doc``, built from a ``Tool`` by ``doc_of``.

A :class:`Doc` holds what the lexical index weighs per field (name, group, description,
parameters, path), what chain-aware expansion needs (the path and whether it needs ids) and the
texts an embedder reads (:attr:`Doc.dense_text`, the whole tool in one sentence, and
:attr:`Doc.dense_views`: that sentence, the name alone and the description alone; a tool's vector
is the mean of its views' vectors, see ``embedders.doc_vectors``). ``Doc.key`` is ``(collection, name)``, the
key of a hit. The hash of a document's texts keys its cached vector: a tool whose texts did not
change is never embedded again.

Every index (lexical.py, chargrams.py, duplicates.py, the stored index.py) reads documents, and
corpus.py builds on those indexes, so the document has a module of its own below all of them.
"""

from __future__ import annotations

try:  # the C module: hashlib's import loads OpenSSL too (about 4 ms of a command's start)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without it
    from hashlib import blake2b

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from protocols.bm25 import DocInfo, tokenize
from protocols.model import Tool

#: the BM25F weight of the response fields (see FIELDS)
RETURNS_WEIGHT = 0.25

__all__ = ["Doc", "doc_of", "docs_of", "FIELDS", "humanize", "producer_lists", "protocol_key", "documentation",
           "response_fields"]

#: The lexical fields of a document and their weights (BM25F: a term's frequency counts this many
#: times in its field). The name says most about what a tool does; parameters and path say less,
#: and the names of the fields its answers hold ("returns") less still.
FIELDS: dict[str, float] = {"name": 2.0, "group": 1.0, "description": 1.0, "params": 0.5, "path": 0.5,
                            "returns": RETURNS_WEIGHT}


def humanize(name: str) -> str:
    """``getMovieCredits`` / ``get_movie_credits`` -> ``get movie credits``."""
    out = []
    prev = ""
    for ch in name:
        if ch in "_-./{}":
            out.append(" ")
        elif ch.isupper() and prev and (prev.islower() or prev.isdigit()):
            out.append(" " + ch.lower())
        else:
            out.append(ch.lower())
        prev = ch
    return " ".join("".join(out).split())


@dataclass
class Doc:
    """One tool as the retrievers see it."""

    collection: str
    name: str
    summary: str = ""
    fields: dict[str, str] = field(default_factory=dict)  # field -> its raw text
    path: str = ""
    needs_ids: bool = False
    dense_text: str = ""
    #: the texts whose vectors make the tool's vector (the first is ``dense_text``)
    dense_views: list[str] = field(default_factory=list)
    #: what identifies the tool's protocol whatever the collection (``protocol_key``): copies of one
    #: tool in several collections share it and are shown once (duplicates.py)
    protocol: str = ""
    #: how well the copy is documented (``documentation``): the best copy of a tool is the one shown
    documented: int = 0

    @property
    def views(self) -> list[str]:
        return self.dense_views or [self.dense_text]

    @property
    def key(self) -> tuple[str, str]:
        return (self.collection, self.name)

    def tokens(self) -> dict[str, list[str]]:
        return {f: tokenize(text) for f, text in self.fields.items() if text}

    def hash(self) -> str:
        h = blake2b(digest_size=12)
        for part in (self.collection, self.name, self.path, *self.views, *sorted(self.fields.items())):
            h.update(repr(part).encode("utf-8"))
        return h.hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {"c": self.collection, "n": self.name, "s": self.summary, "f": self.fields, "p": self.path,
                "i": self.needs_ids, "d": self.dense_text, "v": self.dense_views, "k": self.protocol,
                "q": self.documented}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Doc:
        return cls(collection=d["c"], name=d["n"], summary=d.get("s", ""), fields=dict(d.get("f") or {}),
                   path=d.get("p", ""), needs_ids=bool(d.get("i")), dense_text=d.get("d", ""),
                   dense_views=list(d.get("v") or []), protocol=str(d.get("k") or ""), documented=int(d.get("q") or 0))

    def info(self) -> DocInfo:
        return DocInfo(scope=self.collection, path=self.path, needs_ids=self.needs_ids)


def doc_of(tool: Tool) -> Doc:
    """The document of one tool."""
    params = " ".join(humanize(p) for p in tool.properties)
    path = tool.path if tool.path not in ("", "/") else ""
    description = " ".join(tool.description.split())
    group = " ".join(x for x in (tool.group, tool.category) if x)
    fields = {"name": humanize(tool.name), "group": humanize(group) if group else "",
              "description": description, "params": params, "path": humanize(path),
              "returns": " ".join(response_fields(tool))}
    # The embedder reads a short sentence: the name in words, where it belongs, what it does; and
    # two partial views of it. A request often matches the name or the description far better
    # than their sum (one vector of both is diluted by the part that does not match); the
    # mean of the three vectors was chosen on the dev split (benchmarks/RESULTS.md).
    where = f" ({tool.group})" if tool.group else ""
    named = f"{humanize(tool.name)}{where}".strip()
    dense = f"{named}: {description[:600]}".strip()
    views = [dense, named or dense, description[:600] or humanize(tool.name) or dense]
    return Doc(collection=tool.collection, name=tool.name, summary=tool.summary, fields=fields, path=path,
               needs_ids=DocInfo.of(tool).needs_ids, dense_text=dense, dense_views=views,
               protocol=protocol_key(tool), documented=documentation(tool))


#: at most this many response fields of a tool are indexed (a huge schema says little per field)
MAX_RESPONSE_FIELDS = 60


def response_fields(tool: Tool, limit: int = MAX_RESPONSE_FIELDS) -> list[str]:
    """The names of the fields a tool's answers hold, in words (``release_date`` -> ``release
    date``), outermost first: from its response schema (declared, or learnt by ``atc probe``),
    else from the responses of its examples. A request that names what it wants back ("the
    release date of...") then finds the tool that returns it."""
    out: dict[str, None] = {}
    level: list[Any] = [tool.response_schema] if tool.response_schema else \
        [e.get("response") for e in tool.examples if isinstance(e, dict)]
    from_schema = bool(tool.response_schema)
    for _ in range(5):  # breadth first, five levels deep
        nested: list[Any] = []
        for node in level:
            if not isinstance(node, dict | list):
                continue
            if isinstance(node, list):
                nested.extend(node[:2])
                continue
            if from_schema:
                for key in ("items", "additionalProperties"):
                    if isinstance(node.get(key), dict):
                        nested.append(node[key])
                for key in ("allOf", "anyOf", "oneOf"):
                    if isinstance(node.get(key), list):
                        nested.extend(node[key])
                props = node.get("properties")
                names = props.items() if isinstance(props, dict) else []
            else:
                names = node.items()
            for name, sub in names:
                words = humanize(str(name))
                if words and words not in out:
                    out[words] = None
                    if len(out) >= limit:
                        return list(out)
                nested.append(sub)
        level = nested
        if not level:
            break
    return list(out)


def protocol_key(tool: Tool) -> str:
    """A hash of what makes two tools the same operation, whichever collection holds them: the
    method, the path template (parameter names aside), the name, group and description (spaces
    and case aside) and the parameters' names. A collection imported twice, or its copy written
    by ``atc probe`` (which adds response schemas, examples and learnt ``required`` lists, none of
    them part of the key), gives the same keys; two APIs that merely share a path do not."""
    h = blake2b(digest_size=10)
    template = re.sub(r"\{[^}]*\}", "{}", tool.path or "")
    for part in (tool.method.upper(), template, tool.name.lower(), " ".join(tool.group.lower().split()),
                 " ".join(tool.description.lower().split()), ",".join(sorted(tool.properties))):
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def documentation(tool: Tool) -> int:
    """How much a copy of a tool says beyond its parameters: a response schema (4), examples (one
    each, up to 3), a description (1). Of several copies, the best documented one is shown."""
    return (4 if tool.response_schema else 0) + min(len(tool.examples), 3) + (1 if tool.description.strip() else 0)


def docs_of(tools: Sequence[Tool]) -> list[Doc]:
    return [doc_of(t) for t in tools]


def producer_lists(docs: Sequence[Doc]) -> list[list[list[int]]]:
    """For each document, one list per entity whose id its path needs (``/movie/{movie_id}`` ->
    movie): the documents of the same collection that need no id and whose path names that
    entity, best first (search endpoints, then the shorter path). Empty lists for the rest."""
    by_scope: dict[tuple[str, str], list[int]] = {}
    for j, d in enumerate(docs):
        if d.needs_ids or not d.path:
            continue
        for word in set(tokenize(d.path.replace("/", " "))):
            by_scope.setdefault((d.collection, word), []).append(j)
    out: list[list[list[int]]] = []
    for d in docs:
        groups: list[list[int]] = []
        if d.needs_ids and d.path:
            for entity in d.info().entities():
                cands = by_scope.get((d.collection, entity), [])
                groups.append(sorted(cands, key=lambda j: ("search" not in docs[j].name.lower(),
                                                            len(docs[j].path), j)))
        out.append(groups)
    return out
