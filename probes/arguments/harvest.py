"""Values harvested from responses already seen, and how well each fits a parameter.

After every successful probe request the response is walked (a text answer is read line by line,
``probes.arguments.text``) and its scalar fields are kept
(a few per field path and tool, so that a 10,000-item list costs no more than a short one). Each
kept value remembers where it was: the field's name, its concrete path (``["results", 0, "id"]``,
for the example program), the *owner* entity of the object that holds it (``probes.arguments.naming``),
its sibling fields, and the request that produced it (whose arguments a later call can inherit).

``Harvest.candidates`` then ranks values for a parameter on the scale of ``probes.arguments.values``:

======  ========================================================================================
0.97    for a path parameter, an item's id in the list its path picks from: ``{row_id}`` of
        ``/tables/movie/{row_id}/`` <- ``items[].id`` of ``GET /tables/movie/``, whatever the
        names and types (a number where the spec says string is sent as a string)
0.95    a field with the parameter's exact name (``season_number`` <- ``seasons[].season_number``)
0.9     the parameter's attribute of an object of its entity (``movie_id`` <- ``id`` of a movie,
        ``network_id`` <- ``networks[].id``, ``{id}`` under ``/albums/`` <- ``albums.items[].id``),
        the entity's id under its full name (``{id}`` under ``/users/`` <- ``userId``), or a
        synonym of the name (``username`` <- ``login``)
0.8-87  for a parameter named by a bare noun (``{owner}``, ``{repo}``): an identifying field of an
        object of that entity (``owner.login``, a repo's ``name``; handles before ids before names)
0.85    for free text: a name or title of the kind of thing the endpoint searches
0.7     a field whose name ends with the parameter's name (``primary_movie_id``); any name/title
0.3     a bare ``id`` for a bare ``id`` parameter with no noun to check against
0.15    any id-like field of the right type (only for the last, guessing round)
======  ========================================================================================
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from probes.arguments.naming import (
    ID_WORDS,
    IDENT_FIELDS,
    NAME_FIELDS,
    SYNONYMS,
    EndpointNouns,
    ParamRole,
    endpoint_nouns,
    key_entity,
    norm,
    parent_template,
    path_template,
    same_entity,
    singular,
)
from probes.arguments.text import text_records
from probes.arguments.values import coerce, within
from probes.calls import Observation, Source
from protocols.model import Tool

__all__ = ["Seen", "Candidate", "Harvest", "field_path", "MAX_PER_FIELD"]

#: Distinct values kept per (tool, field path): enough to try alternatives, bounded for huge lists.
MAX_PER_FIELD = 5
#: Nodes of one response walked at most.
MAX_NODES = 5000
_MAX_TEXT = 200
#: Candidates a (tool, parameter) keeps (more than it shows, so that values ruled out leave others).
_KEEP = 40
#: Matches below this score are loose guesses, used only when ``weak`` is asked for.
STRONG_MATCH = 0.3


@dataclass(frozen=True)
class Seen:
    """One scalar value seen in a response. ``text``: read from a line of a text answer
    (``probes.arguments.text``); ``path`` is then empty (there is nothing to index into)."""

    value: Any
    key: str
    path: tuple[str | int, ...]
    field: str
    owner: str | None
    obs: int
    tool: str
    siblings: dict[str, Any]
    text: bool = False

    @property
    def norm_key(self) -> str:
        return norm(self.key)


@dataclass(frozen=True)
class Candidate:
    """A value for a parameter, the belief that it works, and where it came from."""

    value: Any
    score: float
    source: Source
    seen: Seen | None = None


def field_path(path: tuple[str | int, ...]) -> str:
    """``("results", 0, "id")`` -> ``results[].id``; the root is ``$``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += "[]"
        else:
            out += f".{part}" if out else str(part)
    return out or "$"


class Harvest:
    """Every value kept so far, in the order seen (earlier and first-in-list values first)."""

    def __init__(self) -> None:
        self.values: list[Seen] = []
        self._per_field: dict[tuple[str, str], list[Any]] = {}
        self._nouns: dict[str, EndpointNouns] = {}
        self._by_key: dict[str, list[int]] = {}
        self._key_order: list[str] = []
        self._memo: dict[tuple[str, str, bool], _Memo] = {}
        self._templates: dict[str, str] = {}

    def _endpoint(self, tool: Tool) -> EndpointNouns:
        nouns = self._nouns.get(tool.name)
        if nouns is None:
            nouns = self._nouns[tool.name] = endpoint_nouns(tool)
        return nouns

    def add(self, obs: Observation, tool: Tool) -> int:
        """Keep the values of a successful response; returns how many were new."""
        if not obs.ok:
            return 0
        if tool.method.upper() in ("GET", "HEAD"):
            self._templates[tool.name] = path_template(tool.path)
        nouns = self._endpoint(tool)
        added = 0
        text = isinstance(obs.data, str)
        found = ([((), nouns.items, record) for record in text_records(obs.data, obs.args)] if text
                 else _objects(obs.data, nouns))
        for path, owner, obj in found:
            scalars = {k: v for k, v in obj.items() if _scalar(v)}
            for key, value in scalars.items():
                fpath = f"(text) {key}" if text else field_path((*path, key))
                kept = self._per_field.setdefault((tool.name, fpath), [])
                if value in kept or len(kept) >= MAX_PER_FIELD:
                    continue
                kept.append(value)
                nkey = norm(key)
                if nkey not in self._by_key:
                    self._by_key[nkey] = []
                    self._key_order.append(nkey)
                self._by_key[nkey].append(len(self.values))
                self.values.append(Seen(value=value, key=key, path=() if text else (*path, key), field=fpath,
                                        owner=owner, obs=obs.id, tool=tool.name, siblings=scalars, text=text))
                added += 1
        return added

    # -- matching -----------------------------------------------------------------------------

    def candidates(self, tool: Tool, pname: str, role: ParamRole, *, weak: bool = False,
                   limit: int = 8) -> list[Candidate]:
        """Harvested values for parameter ``pname`` of ``tool``, best first. ``weak`` also admits
        loose matches (any id-like field of the right type) for the last, guessing round.

        Incremental: each (tool, parameter) remembers how far it has read the harvest, so asking
        again after a few more responses costs only those responses (probing a collection of
        hundreds of tools asks this thousands of times)."""
        memo = self._memo.get((tool.name, pname, weak))
        if memo is None:
            memo = self._memo[(tool.name, pname, weak)] = _Memo()
        if memo.size == len(self.values):
            return memo.top[:limit]
        binding = tool.bindings.get(pname)
        wire = norm(binding.name if binding and binding.name else pname)
        declared = tool.properties.get(pname)
        parts = wire.split("_")
        if isinstance(declared, dict) and declared.get("type") == "array" and parts[-1] not in ("ids", "id"):
            # a list parameter (``names``, ``paths``) takes what one item is called in responses
            wire = "_".join([*parts[:-1], singular(parts[-1])])
        for key in self._key_order[memo.keys_seen:]:
            if _relevant(key, wire, role, weak):
                memo.positions[key] = 0
        memo.keys_seen = len(self._key_order)
        schema = tool.properties.get(pname)
        schema = schema if isinstance(schema, dict) else {}
        searched = self._endpoint(tool).items
        parent = parent_template(tool.path, binding.name if binding and binding.name else pname) \
            if role.in_path else None
        fresh = False
        for key, pos in memo.positions.items():
            indices = self._by_key[key]
            for index in indices[pos:]:
                seen = self.values[index]
                listed = parent is not None and self._templates.get(seen.tool) == parent and _parent_field(seen, role)
                score = (0.1 + IDENT_FIELDS.get(seen.norm_key, 0.87) if role.attribute == "" else 0.97) if listed else \
                    text_score(seen, searched) if role.text else match_score(role, wire, seen)
                if score <= 0 or (score < STRONG_MATCH and not weak):
                    continue
                value = coerce(seen.value, schema)
                if value is None or not _fits(value, role) or not within(value, schema):
                    continue
                if type(value) is not type(seen.value) and not listed:
                    score -= 0.1  # a number where the API wants text is a weaker fit (a repo's id vs its name)
                source: Source = {"kind": "harvest", "obs": seen.obs, "path": None if seen.text else list(seen.path),
                                  "tool": seen.tool, "field": seen.field}
                memo.scored.append((score, index, Candidate(value, score, source, seen)))
                fresh = True
            memo.positions[key] = len(indices)
        memo.size = len(self.values)
        if fresh:
            memo.scored.sort(key=lambda item: (-item[0], item[1]))
            del memo.scored[_KEEP:]
            memo.top = []
            taken: list[Any] = []
            for _, _, cand in memo.scored:
                if cand.value not in taken:
                    taken.append(cand.value)
                    memo.top.append(cand)
        return memo.top[:limit]


    def from_others(self, tool: Tool, pname: str, role: ParamRole, limit: int = 4,
                    also: tuple[str, ...] = ()) -> list[Candidate]:
        """Values for ``pname`` that other tools handed out, best first: what an optional filter
        that links to another resource is tried with (``probes.arguments.filters``). An object's own
        identifier (``users[].id`` for ``userId``) ranks above a field of that name in a third
        resource (``posts[].userId``), which is itself a link. ``also``: more field names that
        may hold the value (``login``, ``username`` for an ``owner``), at 0.9."""
        binding = tool.bindings.get(pname)
        wire = norm(binding.name if binding and binding.name else pname)
        schema = tool.properties.get(pname)
        schema = schema if isinstance(schema, dict) else {}
        scored: list[tuple[float, int, Candidate]] = []
        listed = self._endpoint(tool).items
        for key in self._key_order:
            if not _relevant(key, wire, role, False) and key not in also:
                continue
            for index in self._by_key[key]:
                seen = self.values[index]
                if seen.tool == tool.name or seen.text or same_entity(seen.owner, listed):
                    continue  # a value of the listed kind of thing itself links to nothing else
                score = 0.9 if key in also else match_score(role, wire, seen)
                if role.entity and seen.norm_key == role.attribute and same_entity(seen.owner, role.entity):
                    score = 0.96
                value = coerce(seen.value, schema)
                if score < STRONG_MATCH or value is None or not within(value, schema):
                    continue
                source: Source = {"kind": "harvest", "obs": seen.obs, "path": list(seen.path), "tool": seen.tool,
                                  "field": seen.field}
                scored.append((score, index, Candidate(value, score, source, seen)))
        scored.sort(key=lambda item: (-item[0], item[1]))
        out: list[Candidate] = []
        for _, _, cand in scored:
            if cand.value not in [c.value for c in out]:
                out.append(cand)
        return out[:limit]


@dataclass
class _Memo:
    """How far one (tool, parameter) has read the harvest, and its best candidates so far."""

    size: int = -1
    keys_seen: int = 0
    positions: dict[str, int] = field(default_factory=dict)
    scored: list[tuple[float, int, Candidate]] = field(default_factory=list)
    top: list[Candidate] = field(default_factory=list)


def _parent_field(seen: Seen, role: ParamRole) -> bool:
    """Whether ``seen`` is an item's identifier in the list a path parameter picks from: the
    ``id`` (or the parameter's own attribute: ``slug``, ``number``) of an item of that list."""
    if seen.text or not any(isinstance(p, int) for p in seen.path) and seen.path[:1] != ("id",):
        return seen.text and seen.norm_key in ("name", "path") and role.attribute in ("", "name", "path")
    key = seen.norm_key
    return key == role.attribute or (key == "id" and role.attribute in ID_WORDS) or (
        role.attribute == "" and key in IDENT_FIELDS)


def _relevant(key: str, wire: str, role: ParamRole, weak: bool) -> bool:
    """Whether values under field name ``key`` can match the parameter at all (see ``match_score``)."""
    if role.in_path and key == "id" and role.attribute in ID_WORDS:
        return True  # the ``id`` of an item of the parent list (``Harvest.candidates``)
    if role.text:
        return key in NAME_FIELDS
    if key in (wire, role.attribute) or key.endswith("_" + wire) or key in SYNONYMS.get(wire, ()):
        return True
    if role.entity and role.attribute and key == f"{role.entity}_{role.attribute}":
        return True
    if role.attribute == "" and key in IDENT_FIELDS:
        return True
    return weak and role.id_like and (key in ID_WORDS or key.endswith("_id"))


def match_score(role: ParamRole, pname: str, seen: Seen) -> float:
    """How well a seen value fits an identifying (not free-text) parameter (see the module table)."""
    key = seen.norm_key
    bare = pname in ID_WORDS
    if key == pname and not bare:
        return 0.95
    if key in SYNONYMS.get(pname, ()):
        return 0.9
    if role.entity and role.attribute == "" and key in IDENT_FIELDS:
        return IDENT_FIELDS[key] if same_entity(seen.owner, role.entity) else 0.0
    if role.entity and role.attribute and key == f"{role.entity}_{role.attribute}":
        return 0.9  # ``{id}`` under ``/users/`` <- ``userId`` of a post
    if role.entity and key == role.attribute:
        if same_entity(seen.owner, role.entity):
            return 0.9
        return 0.15 if role.id_like and key in ID_WORDS else 0.0
    if key.endswith("_" + pname) and not bare:
        return 0.7
    if bare and key == pname:
        return 0.3
    if role.id_like and (key in ID_WORDS or key.endswith("_id")):
        return 0.15
    return 0.0


def text_score(seen: Seen, searched: str | None) -> float:
    """How good a seen value is as a free-text search word for an endpoint that lists ``searched``."""
    if seen.norm_key not in NAME_FIELDS or not isinstance(seen.value, str):
        return 0.0
    text = seen.value.strip()
    if not text or len(text) > 60 or not any(c.isalpha() for c in text):
        return 0.0
    return 0.85 if same_entity(seen.owner, searched) else 0.7


def _fits(value: Any, role: ParamRole) -> bool:
    """Identifiers have no spaces and are short (anything else is a sentence, not an id), and a
    path segment holds no ``/`` (``/poster.jpg`` is a path, not an id)."""
    if role.in_path and isinstance(value, str) and "/" in value:
        return False
    if role.id_like and isinstance(value, str):
        return 0 < len(value) <= 100 and not any(c.isspace() for c in value)
    return True


def _scalar(value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, str):
        return 0 < len(value) <= _MAX_TEXT
    return isinstance(value, int | float)


def _objects(data: Any, nouns: EndpointNouns) -> Iterator[tuple[tuple[str | int, ...], str | None, dict[str, Any]]]:
    """(path, owner entity, object) of every object in a response, breadth first, bounded."""
    queue: deque[tuple[Any, tuple[str | int, ...], str | None]] = deque([(data, (), nouns.root)])
    visited = 0
    while queue and visited < MAX_NODES:
        node, path, owner = queue.popleft()
        visited += 1
        if isinstance(node, dict):
            yield path, owner, node
            for key, value in node.items():
                if isinstance(value, dict | list):
                    named = key_entity(str(key))
                    inner = named if named else (nouns.items if not path and isinstance(value, list) else owner)
                    queue.append((value, (*path, str(key)), inner))
        elif isinstance(node, list):
            # A root list holds what the endpoint lists; a list keeps its container's owner.
            inner = nouns.items if not path else owner
            for i, item in enumerate(node[:50]):
                if isinstance(item, dict | list):
                    queue.append((item, (*path, i), inner))
