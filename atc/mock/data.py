"""The entity model of ``atc mock``: seeds, entity names, and the id spaces.

Everything here is a pure function of its inputs, so two mock servers answer the same request
with the same bytes. Seeds are strings hashed with BLAKE2 (Python's own ``hash`` is randomised
per process). The scalar values themselves are made in :mod:`atc.mock.values`.

Entity model (what makes ids consistent across endpoints):

- An *entity* is a noun of the API (``book``, ``movie``, ``author``). The mock learns the known
  entities from id-like path parameters (``/books/{book_id}``, ``/albums/{id}``).
- Each entity has a fixed *id space*: ``ID_SPACE_SIZE`` ids per kind (int, str, uuid), derived
  from the entity name alone. Lists and searches return ids drawn from it; a detail endpoint
  answers for them (and, so that a chain through a list the mock cannot attribute does not
  break, for the ids of any other entity) and 404s for ids no response ever contains.
- An object that is an entity instance (it has an ``id`` and a known entity) is generated in the
  *scope* ``"<entity>#<id>"``: every scalar inside it is seeded by that scope and the field's
  path, so a search hit and the detail of the same id agree on ``title``, ``name`` and the rest.
- ``<entity>_name`` / ``<entity>_title`` next to ``<entity>_id`` is the name of *that* entity, so
  ``author_name`` in a book equals ``name`` of the author it points to.
"""

from __future__ import annotations

import hashlib
import random
import re
import string
import uuid
from collections.abc import Iterable
from typing import Any

__all__ = [
    "ID_SPACE_SIZE",
    "ANY_ENTITY",
    "IdSpaces",
    "rng",
    "stable_int",
    "singular",
    "id_entity",
    "entity_from_name",
    "id_kind",
    "schema_type",
    "name_words",
    "GENERIC_CONTAINERS",
    "NON_ENTITY_WORDS",
]

ID_SPACE_SIZE = 500
#: The space of ids of things the mock cannot name (``id`` of a ``cast`` item, of a TV season).
ANY_ENTITY = "*"

# Property names that hold "the list this endpoint returns" rather than naming an entity.
GENERIC_CONTAINERS = frozenset(
    "results items data hits records entries list content elements values objects rows docs response "
    "payload matches found".split()
)
# Path words that describe a view of a collection, not a thing (``/movie/popular``, ``/search/tv``).
NON_ENTITY_WORDS = frozenset(
    "search discover similar recommendations recommended popular top rated latest upcoming now playing on "
    "the air airing today trending new recent related featured me browse list all api find lookup query by "
    "current my stats count info details detail summary v1 v2 v3 v4 public private of for and in".split()
)

_B62 = string.digits + string.ascii_letters


def stable_int(*parts: object) -> int:
    """A 64-bit integer that depends only on ``parts`` (the same in every process)."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def rng(*parts: object) -> random.Random:
    """A random generator seeded by ``parts``; the values it yields are reproducible."""
    return random.Random(stable_int(*parts))


def singular(word: str) -> str:
    """A crude singular for path and property nouns: ``companies`` -> ``company``, ``books`` -> ``book``."""
    w = word.lower()
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("sses", "ches", "shes", "xes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    if w == "people":
        return "person"
    return w


def name_words(name: str) -> list[str]:
    """``production_companies`` / ``relatedArtists`` / ``top-tracks`` -> lower-case words."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", name.lower()) if w]


def id_entity(name: str) -> str | None:
    """The entity an id-like name points to: ``book_id`` / ``bookId`` -> ``book``; else None.

    A bare ``id`` has no entity of its own (the caller knows it from the path)."""
    m = re.fullmatch(r"(.+?)(?:_id|Id|ID)", name)
    if not m:
        return None
    words = name_words(m.group(1))
    return singular("_".join(words)) if words else None


def entity_from_name(name: str, known: Iterable[str]) -> str | None:
    """The known entity a path segment or property name refers to, or None.

    The whole name is tried first (``companies`` -> ``company``), then its words from the left
    (``movie_credits`` -> ``movie``, ``related-artists`` -> ``artist``), skipping view words."""
    known = set(known)
    words = name_words(name)
    if not words:
        return None
    whole = singular("_".join(words))
    if whole in known:
        return whole
    for w in words:
        if w in NON_ENTITY_WORDS:
            continue
        s = singular(w)
        if s in known:
            return s
    return None


def id_kind(schema: dict[str, Any] | None) -> str:
    """Which id space a value with this schema draws from: ``int``, ``uuid`` or ``str``."""
    t = schema_type(schema or {})
    if t in ("integer", "number"):
        return "int"
    if (schema or {}).get("format") == "uuid":
        return "uuid"
    return "str"


def schema_type(schema: dict[str, Any]) -> str | None:
    """The JSON type of a schema: its ``type`` (first non-null of a list), else inferred from keywords."""
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if isinstance(t, str):
        return t
    if "properties" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return None


class IdSpaces:
    """The fixed, finite id space of every (entity, kind): the ids lists return and details accept.

    Foreign keys are part of it: the ``author_id`` of book number *i* is a function of *i*
    (:meth:`foreign`), and :meth:`referrers` inverts it, so ``/authors/{id}/books`` can list
    exactly the books whose detail names that author. Lists, picks and foreign keys draw from the
    first ``size // FANOUT`` ids (the *active* ones) while referrers come from the whole space, so
    every author a response mentions has a handful of books; the rest of the space is reachable
    only through such relations (and still answers on detail endpoints)."""

    FANOUT = 5

    def __init__(self, size: int = ID_SPACE_SIZE) -> None:
        self.size = size
        self.active = max(1, size // self.FANOUT)
        self._lists: dict[tuple[str, str], list[Any]] = {}
        self._index: dict[tuple[str, str], dict[Any, int]] = {}
        self._referrers: dict[tuple[str, str, str, str], dict[int, list[int]]] = {}

    def ids(self, entity: str, kind: str) -> list[Any]:
        key = (entity, kind)
        if key not in self._lists:
            r = rng("ids", entity, kind)
            values: list[Any]
            if kind == "int":
                values = r.sample(range(100, 1_000_000), self.size)
            elif kind == "uuid":
                values = [str(uuid.UUID(int=r.getrandbits(128), version=4)) for _ in range(self.size)]
            else:
                values = ["".join(r.choice(_B62) for _ in range(22)) for _ in range(self.size)]
            self._lists[key] = values
            self._index[key] = {v: i for i, v in enumerate(values)}
        return self._lists[key]

    def index(self, entity: str, kind: str, value: Any) -> int | None:
        """The position of ``value`` in the space, or None when it is not one of its ids."""
        self.ids(entity, kind)
        return self._index[(entity, kind)].get(value)

    def pick(self, entity: str, kind: str, *seed: object) -> Any:
        ids = self.ids(entity, kind)
        return ids[stable_int("pick", *seed) % min(self.active, len(ids))]

    def sample(self, entity: str, kind: str, n: int, *seed: object) -> list[Any]:
        ids = self.ids(entity, kind)
        active = min(self.active, len(ids))
        return [ids[i] for i in rng("sample", *seed).sample(range(active), min(n, active))]

    def _target(self, source: str, position: int, target: str) -> int:
        return stable_int("fk", source, target, position) % self.active

    def foreign(self, source: str, source_kind: str, source_id: Any, target: str, kind: str) -> Any | None:
        """The ``<target>_id`` that instance ``source_id`` of ``source`` refers to (None: not an id)."""
        position = self.index(source, source_kind, source_id)
        if position is None:
            return None
        return self.ids(target, kind)[self._target(source, position, target)]

    def referrers(self, source: str, source_kind: str, target: str, kind: str, target_id: Any) -> list[Any]:
        """The ``source`` ids whose :meth:`foreign` ``<target>_id`` is ``target_id``."""
        key = (source, source_kind, target, kind)
        if key not in self._referrers:
            table: dict[int, list[int]] = {}
            for i in range(self.size):
                table.setdefault(self._target(source, i, target), []).append(i)
            self._referrers[key] = table
        position = self.index(target, kind, target_id)
        ids = self.ids(source, source_kind)
        return [ids[i] for i in self._referrers[key].get(position, [])] if position is not None else []

    def contains(self, entity: str, raw: str | int) -> bool:
        """Whether ``raw`` (a path segment or a value) is an id of ``entity`` in any kind."""
        text = str(raw).strip()
        if re.fullmatch(r"-?\d+", text) and self.index(entity, "int", int(text)) is not None:
            return True
        return self.index(entity, "str", text) is not None or self.index(entity, "uuid", text.lower()) is not None
