"""Copies of one tool in several collections, shown once.

A store often holds the same operation twice: a collection and the copy ``atc probe`` wrote of it
(response schemas and examples added), or one spec imported under two names. Ranked separately,
the copies fill the first places with the same tool. Documents with the same ``Doc.protocol``
(doc.protocol_key: method, path template, name, group, description, parameter names) form a
group, and a result shows each group once, at the place of its best-ranked copy, as the group's
**shown copy**; the other copies' names come with the hit (``Hit.duplicates``).

Which copy is shown: the best documented (``Doc.documented``: a response schema, examples, a
description), then the most recently imported collection, then the collection whose name sorts
first. The choice is made when the index is built: ``canon[i]`` is the shown copy of document
``i``'s group, and ``ring[i]`` the next member of that group (``i`` itself when it has no copy),
the shown copy first, so listing a group costs its size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from atc.retrieval.doc import Doc

__all__ = ["groups", "collapse", "copies_of", "Groups"]

#: (canon, ring): see the module doc
Groups = tuple[Sequence[int], Sequence[int]]


def groups(docs: Sequence[Doc], imported: Mapping[str, str] | None = None) -> tuple[list[int], list[int], int]:
    """``(canon, ring, copies)`` for ``docs``; ``imported``: collection -> when it was imported
    (ISO time; later is newer). ``copies`` counts the documents that are not shown."""
    imported = imported or {}
    n = len(docs)
    canon, ring = list(range(n)), list(range(n))
    by_key: dict[str, list[int]] = {}
    for i, d in enumerate(docs):
        if d.protocol:
            by_key.setdefault(d.protocol, []).append(i)
    hidden = 0
    for members in by_key.values():
        if len(members) < 2:
            continue
        # Name ascending first, then (stable) best documented and newest first.
        members = sorted(members, key=lambda j: (docs[j].collection, j))
        members.sort(key=lambda j: (docs[j].documented, imported.get(docs[j].collection, "")), reverse=True)
        shown = members[0]
        for a, b in zip(members, members[1:] + members[:1], strict=True):
            canon[a] = shown
            ring[a] = b
        hidden += len(members) - 1
    return canon, ring, hidden


def collapse(found: Groups | None, ranked: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """``ranked`` with each group once: its shown copy, at the place (and score) of its best-ranked member."""
    if found is None:
        return list(ranked)
    canon = found[0]
    out: list[tuple[int, float]] = []
    seen: set[int] = set()
    for i, score in ranked:
        shown = canon[i]
        if shown not in seen:
            seen.add(shown)
            out.append((shown, score))
    return out


def copies_of(found: Groups | None, i: int) -> list[int]:
    """The other members of ``i``'s group (none when it has no copy)."""
    if found is None:
        return []
    ring = found[1]
    out: list[int] = []
    j = ring[i]
    while j != i and len(out) < len(ring):
        out.append(j)
        j = ring[j]
    return out


def as_groups(value: Any) -> Groups | None:
    """A corpus's groups (``Corpus.duplicates()``), or None for a corpus that has none."""
    get = getattr(value, "duplicates", None)
    return get() if callable(get) else None
