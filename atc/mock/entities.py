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

import functools
import hashlib
import random
import re
import string
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from atc.mock.patterns import pattern_value

__all__ = [
    "ID_SPACE_SIZE",
    "ANY_ENTITY",
    "IdSpaces",
    "IdProfile",
    "merge_profile",
    "rng",
    "stable_int",
    "singular",
    "id_entity",
    "entity_from_name",
    "id_kind",
    "schema_type",
    "as_dict",
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


_MASK = (1 << 64) - 1


class SeededRandom(random.Random):
    """``random.Random`` with a SplitMix64 core: seeding it costs a few operations where the
    Mersenne Twister fills 624 words, and the mock seeds one per generated value. Every method
    of ``random.Random`` works (they draw from ``random`` and ``getrandbits``); the sequence is
    fixed by the seed in every process and Python version."""

    _state: int = 0

    def seed(self, a: Any = None, version: int = 2) -> None:  # noqa: ARG002 - the stdlib's signature
        self._state = (a if isinstance(a, int) else stable_int(a)) & _MASK

    def _next(self) -> int:
        self._state = (self._state + 0x9E3779B97F4A7C15) & _MASK
        z = self._state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def random(self) -> float:
        return (self._next() >> 11) * (1.0 / (1 << 53))

    def getrandbits(self, k: int) -> int:
        if k <= 0:
            return 0
        value, bits = 0, 0
        while bits < k:
            value = (value << 64) | self._next()
            bits += 64
        return value >> (bits - k)

    def getstate(self) -> Any:
        return self._state

    def setstate(self, state: Any) -> None:
        self._state = int(state) & _MASK


def rng(*parts: object) -> random.Random:
    """A random generator seeded by ``parts``; the values it yields are reproducible."""
    return SeededRandom(stable_int(*parts))


@functools.lru_cache(maxsize=8192)
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
    return list(_name_words(name))


@functools.lru_cache(maxsize=8192)
def _name_words(name: str) -> tuple[str, ...]:
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return tuple(w for w in re.split(r"[^A-Za-z0-9]+", name.lower()) if w)


@functools.lru_cache(maxsize=8192)
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
    return _entity_from_name(name, known if isinstance(known, frozenset) else frozenset(known))


@functools.lru_cache(maxsize=8192)
def _entity_from_name(name: str, known: frozenset[str]) -> str | None:
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


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (spec fields are often absent or wrong)."""
    return value if isinstance(value, dict) else {}


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


@dataclass(frozen=True)
class IdProfile:
    """What the spec says an entity's ids look like, gathered from every place they appear (path
    parameters, ``id`` of its objects, ``<entity>_id`` fields): ``kind`` (``int``, ``uuid`` or
    ``str``) and the constraints the generated ids must meet."""

    kind: str = "int"
    minimum: int | None = None
    maximum: int | None = None
    pattern: str | None = None
    min_length: int | None = None
    max_length: int | None = None


def merge_profile(schemas: Iterable[dict[str, Any]]) -> IdProfile | None:
    """One profile for an entity from the schemas of its ids: a uuid anywhere makes uuids, an
    integer anywhere integers (rendered as decimal strings where a string is declared), else
    strings meeting the strictest pattern and length bounds seen."""
    schemas = [s for s in schemas if isinstance(s, dict)]
    if not schemas:
        return None
    types = [schema_type(s) for s in schemas]
    if any(s.get("format") == "uuid" for s in schemas):
        return IdProfile("uuid")

    def bound(key: str, pick: Any) -> Any:
        values = [s[key] for s in schemas if isinstance(s.get(key), (int, float)) and not isinstance(s.get(key), bool)]
        return pick(values) if values else None

    if any(t in ("integer", "number") for t in types):
        lo = bound("minimum", max)
        hi = bound("maximum", min)
        xlo = bound("exclusiveMinimum", max)
        xhi = bound("exclusiveMaximum", min)
        if xlo is not None:
            lo = max(lo, xlo + 1) if lo is not None else xlo + 1
        if xhi is not None:
            hi = min(hi, xhi - 1) if hi is not None else xhi - 1
        return IdProfile("int", int(lo) if lo is not None else None, int(hi) if hi is not None else None)
    pattern = next((s["pattern"] for s in schemas if isinstance(s.get("pattern"), str)), None)
    lo_len = bound("minLength", max)
    hi_len = bound("maxLength", min)
    return IdProfile("str", pattern=pattern, min_length=int(lo_len) if lo_len is not None else None,
                     max_length=int(hi_len) if hi_len is not None else None)


class IdSpaces:
    """The fixed, finite id space of every (entity, kind): the ids lists return and details accept.

    An entity with a :class:`IdProfile` has one canonical list of ids that meet it; asked for
    another kind, integer ids are rendered as decimal strings (and digit strings as integers), so
    that a ``{movie_id}`` declared as a string and an ``id`` declared as an integer name the same
    movies. Without a profile each kind has a list of its own (the old behaviour).

    Foreign keys are part of it: the ``author_id`` of book number *i* is a function of *i*
    (:meth:`foreign`), and :meth:`referrers` inverts it, so ``/authors/{id}/books`` can list
    exactly the books whose detail names that author. Lists, picks and foreign keys draw from the
    first ``len // FANOUT`` ids (the *active* ones) while referrers come from the whole space, so
    every author a response mentions has a handful of books; the rest of the space is reachable
    only through such relations (and still answers on detail endpoints)."""

    FANOUT = 5

    def __init__(self, size: int = ID_SPACE_SIZE, profiles: dict[str, IdProfile] | None = None) -> None:
        self.size = size
        self.active = max(1, size // self.FANOUT)
        self.profiles = dict(profiles or {})
        self._lists: dict[tuple[str, str], list[Any]] = {}
        self._index: dict[tuple[str, str], dict[Any, int]] = {}
        self._referrers: dict[tuple[str, str, str, str], dict[int, list[int]]] = {}

    def ids(self, entity: str, kind: str) -> list[Any]:
        key = (entity, kind)
        if key not in self._lists:
            values = self._derived(entity, kind)
            if values is None:
                values = self._generate(entity, kind, self.profiles.get(entity))
            self._lists[key] = values
            self._index[key] = {v: i for i, v in enumerate(values)}
        return self._lists[key]

    def _derived(self, entity: str, kind: str) -> list[Any] | None:
        """The canonical list in another kind's clothes, when the entity's profile allows it."""
        profile = self.profiles.get(entity)
        if profile is None or profile.kind == kind:
            return None
        if profile.kind == "int" and kind == "str":
            return [str(v) for v in self.ids(entity, "int")]
        if profile.kind == "str" and kind == "int":
            canonical = self.ids(entity, "str")
            if canonical and all(isinstance(v, str) and re.fullmatch(r"0|[1-9]\d{0,17}", v) for v in canonical):
                return [int(v) for v in canonical]
        return None

    def _generate(self, entity: str, kind: str, profile: IdProfile | None) -> list[Any]:
        r = rng("ids", entity, kind)
        if profile is not None and profile.kind != kind:
            profile = None
        if kind == "int":
            lo = profile.minimum if profile and profile.minimum is not None else None
            hi = profile.maximum if profile and profile.maximum is not None else None
            if lo is None and hi is None:
                lo, hi = 100, 1_000_000
            elif lo is None:
                lo = min(100, hi) if hi is not None and hi >= 1 else hi - 1_000_000  # type: ignore[operator]
            elif hi is None:
                hi = max(lo, 100) + 1_000_000
            assert lo is not None and hi is not None
            span = range(lo, hi + 1)
            # A small range keeps room for ids the mock never hands out: for creates to take, and
            # for "not found" to mean something.
            count = min(self.size, max(1, len(span) // 2))
            return r.sample(span, count) if len(span) else [lo]
        if kind == "uuid":
            return [str(uuid.UUID(int=r.getrandbits(128), version=4)) for _ in range(self.size)]
        return self._strings(r, profile)

    def _strings(self, r: random.Random, profile: IdProfile | None) -> list[str]:
        values: dict[str, None] = {}
        misses = 0
        while len(values) < self.size and misses < self.size:
            value = _one_string(r, profile)
            if value in values:
                misses += 1
            values.setdefault(value)
        return list(values)

    def _active(self, ids: list[Any]) -> int:
        return max(1, min(self.active, len(ids) // self.FANOUT or 1))

    def index(self, entity: str, kind: str, value: Any) -> int | None:
        """The position of ``value`` in the space, or None when it is not one of its ids."""
        self.ids(entity, kind)
        try:
            return self._index[(entity, kind)].get(value)
        except TypeError:  # an unhashable value is no id
            return None

    def pick(self, entity: str, kind: str, *seed: object) -> Any:
        ids = self.ids(entity, kind)
        return ids[stable_int("pick", *seed) % self._active(ids)]

    def sample(self, entity: str, kind: str, n: int, *seed: object) -> list[Any]:
        ids = self.ids(entity, kind)
        active = self._active(ids)
        return [ids[i] for i in rng("sample", *seed).sample(range(active), min(n, active))]

    def _target(self, source: str, position: int, target: str, kind: str) -> int:
        return stable_int("fk", source, target, position) % self._active(self.ids(target, kind))

    def foreign(self, source: str, source_kind: str, source_id: Any, target: str, kind: str) -> Any | None:
        """The ``<target>_id`` that instance ``source_id`` of ``source`` refers to (None: not an id)."""
        position = self.index(source, source_kind, source_id)
        if position is None:
            return None
        return self.ids(target, kind)[self._target(source, position, target, kind)]

    def referrers(self, source: str, source_kind: str, target: str, kind: str, target_id: Any) -> list[Any]:
        """The ``source`` ids whose :meth:`foreign` ``<target>_id`` is ``target_id``."""
        key = (source, source_kind, target, kind)
        ids = self.ids(source, source_kind)
        if key not in self._referrers:
            table: dict[int, list[int]] = {}
            for i in range(len(ids)):
                table.setdefault(self._target(source, i, target, kind), []).append(i)
            self._referrers[key] = table
        position = self.index(target, kind, target_id)
        return [ids[i] for i in self._referrers[key].get(position, [])] if position is not None else []

    def contains(self, entity: str, raw: str | int) -> bool:
        """Whether ``raw`` (a path segment or a value) is an id of ``entity`` in any kind."""
        text = str(raw).strip()
        if re.fullmatch(r"-?\d+", text) and self.index(entity, "int", int(text)) is not None:
            return True
        return self.index(entity, "str", text) is not None or self.index(entity, "uuid", text.lower()) is not None

    def mint(self, entity: str, kind: str, taken: Any) -> Any:
        """A new id of ``entity`` for an object a client creates: outside the space, meeting the
        entity's profile, and not in ``taken`` (a container of ids already handed out). Which id
        is minted depends only on how many were minted before, so fresh servers agree."""
        profile = self.profiles.get(entity)
        for attempt in range(1000):
            r = rng("mint", entity, kind, attempt)
            candidate: Any
            if kind == "uuid":
                candidate = str(uuid.UUID(int=r.getrandbits(128), version=4))
            elif profile is not None and profile.kind == "str":
                candidate = _one_string(r, profile)
                if kind == "int":
                    candidate = int(candidate) if re.fullmatch(r"0|[1-9]\d{0,17}", candidate) else None
            else:
                lo = profile.minimum if profile and profile.kind == "int" and profile.minimum is not None else 1_000_001
                hi = profile.maximum if profile and profile.kind == "int" and profile.maximum is not None \
                    else lo + 10_000_000
                candidate = r.randint(lo, max(lo, hi))
                if kind == "str":
                    candidate = str(candidate)
            if candidate is not None and candidate not in taken and not self.contains(entity, candidate):
                return candidate
        raise RuntimeError(f"no id left to mint for {entity}")


def _one_string(r: random.Random, profile: IdProfile | None) -> str:
    """One string id meeting ``profile`` (its pattern within its length bounds when it can be
    generated, else base62 characters of a length inside the bounds)."""
    lo = profile.min_length if profile and profile.min_length is not None else None
    hi = profile.max_length if profile and profile.max_length is not None else None
    if profile is not None and profile.pattern:
        value = pattern_value(profile.pattern, r, lo, hi)
        if value is not None:
            return value
    length = 22
    if lo is not None:
        length = max(length, lo)
    if hi is not None:
        length = min(length, hi)
    return "".join(r.choice(_B62) for _ in range(max(1, length)))
