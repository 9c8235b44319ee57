"""Routes of ``atc mock``: matching a request path to an operation, and what its answer is about.

An operation's path template says which *entities* it touches: ``{book_id}`` (or ``{id}`` after
``albums``) names an entity the API addresses by id, so it gets an id space (see
:class:`atc.mock.entities.IdSpaces`); the literal segments after the last id say what the endpoint
lists (``/authors/{author_id}/books`` lists books, ``/movie/{movie_id}/similar`` movies,
``/search/tv`` TV shows).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from atc.mock.entities import NON_ENTITY_WORDS, entity_from_name, id_entity, singular
from protocols.model import Collection, Tool

__all__ = ["Endpoint", "compile_endpoint", "known_entities", "PARAM"]

PARAM = re.compile(r"\{([^{}/]+)\}")


@dataclass
class Endpoint:
    """One operation, compiled: how to match its path and which entities its response is about.

    ``mode``: ``detail`` (path ends in an id: the root object *is* that entity), ``sub`` (a
    resource under an id, ``/movie/{id}/credits``: the root object carries that id), ``keyed``
    (non-id parameters after the last id, ``/tv/{id}/season/{n}``), ``create`` (a POST to a
    collection, ``/projects/{id}/tasks``: the root object is a NEW instance of ``root_entity``,
    its parents the path's ids), or ``free``."""

    tool: Tool
    regex: re.Pattern[str]
    groups: dict[str, str]
    rank: tuple[int, int]
    id_params: dict[str, str]
    mode: str
    root_entity: str | None
    root_param: str | None
    item_entity: str | None


def _segments(path: str) -> list[str]:
    return [s for s in path.strip("/").split("/") if s]


def _id_param_entity(param: str, previous_literal: str | None) -> str | None:
    """``{book_id}`` -> ``book``; ``{id}`` after ``albums`` -> ``album``; other params -> None."""
    ent = id_entity(param)
    if ent:
        return ent
    if param.lower() in ("id", "uid", "uuid", "key", "slug") and previous_literal:
        words = [w for w in re.split(r"[^A-Za-z0-9]+", previous_literal.lower()) if w]
        return singular("_".join(words)) if words else None
    return None


def known_entities(collection: Collection) -> frozenset[str]:
    """Entities the API addresses by id somewhere in a path: they get id spaces and 404s."""
    known: set[str] = set()
    for tool in collection.tools:
        previous: str | None = None
        for seg in _segments(tool.path):
            m = PARAM.fullmatch(seg)
            if m:
                ent = _id_param_entity(m.group(1), previous)
                if ent:
                    known.add(ent)
            else:
                previous = seg
    return frozenset(known)


def compile_endpoint(tool: Tool, known: frozenset[str]) -> Endpoint:
    segs = _segments(tool.path)
    pattern = ""
    groups: dict[str, str] = {}
    id_params: dict[str, str] = {}
    literal_segments = literal_chars = 0
    previous: str | None = None
    last_id = -1
    for i, seg in enumerate(segs):
        pattern += "/"
        pos = 0
        for m in PARAM.finditer(seg):
            pattern += re.escape(seg[pos:m.start()])
            group = f"g{len(groups)}"
            groups[group] = m.group(1)
            pattern += f"(?P<{group}>[^/]+?)"
            pos = m.end()
        pattern += re.escape(seg[pos:])
        whole = PARAM.fullmatch(seg)
        if whole:
            ent = _id_param_entity(whole.group(1), previous)
            if ent:
                id_params[whole.group(1)] = ent
                last_id = i
        else:
            literal_chars += len(PARAM.sub("", seg))
            if not PARAM.search(seg):
                literal_segments += 1
                previous = seg
    regex = re.compile("^" + (pattern or "/") + "/?$")
    tail = segs[last_id + 1:]
    tail_literals = [s for s in tail if not PARAM.search(s)]
    item_entity = next((e for s in reversed(tail_literals) if (e := entity_from_name(s, known))), None)
    root_param = PARAM.fullmatch(segs[last_id]).group(1) if last_id >= 0 else None  # type: ignore[union-attr]
    parent = id_params.get(root_param) if root_param else None
    if last_id >= 0 and last_id == len(segs) - 1:
        mode, root_entity = "detail", parent
    elif any(PARAM.search(s) for s in tail):
        last_lit = tail_literals[-1] if tail_literals else None
        mode, root_entity, root_param = "keyed", (singular(last_lit) if last_lit else None), None
    elif last_id >= 0:
        mode, root_entity = "sub", parent
    else:
        mode, root_entity = "free", item_entity
    if item_entity is None:
        item_entity = parent
    created = _created_entity(tool, segs, known)
    if created is not None:
        mode, root_entity, root_param, item_entity = "create", created, None, created
    return Endpoint(tool, regex, groups, (literal_segments, literal_chars), id_params, mode,
                     root_entity, root_param if mode in ("detail", "sub") else None, item_entity)


def _created_entity(tool: Tool, segs: list[str], known: frozenset[str]) -> str | None:
    """For a POST to a collection (a path ending in a plural noun or a known entity, not a view
    word like ``search``), the entity it creates; None for anything else (``/orders/{id}/cancel``)."""
    if tool.method.upper() != "POST" or not segs or PARAM.search(segs[-1]):
        return None
    last = segs[-1]
    words = [w for w in re.split(r"[^A-Za-z0-9]+", last.lower()) if w]
    if not words or any(w in NON_ENTITY_WORDS for w in words):
        return None
    entity = entity_from_name(last, known)
    if entity is not None and singular(words[-1]) == entity.split("_")[-1]:
        return entity
    return singular("_".join(words)) if singular(words[-1]) != words[-1] else None
