"""Plausible, deterministic values for ``atc mock``: the id spaces and the value generator.

Everything here is a pure function of its inputs: the same schema, field name and seed give the
same value in every process, so two mock servers answer the same request with the same bytes.
Seeds are strings hashed with BLAKE2 (Python's own ``hash`` is randomised per process).

Entity model (what makes ids consistent across endpoints):

- An *entity* is a noun of the API (``book``, ``movie``, ``author``). The mock learns the known
  entities from id-like path parameters (``/books/{book_id}``, ``/albums/{id}``).
- Each entity has a fixed *id space*: ``ID_SPACE_SIZE`` ids per kind (int, str, uuid), derived
  from the entity name alone. Lists and searches return ids drawn from it; a detail endpoint
  answers for exactly those ids and 404s for any other.
- An object that is an entity instance (it has an ``id`` and a known entity) is generated in the
  *scope* ``"<entity>#<id>"``: every scalar inside it is seeded by that scope and the field's
  path, so a search hit and the detail of the same id agree on ``title``, ``name`` and the rest.
- ``<entity>_name`` / ``<entity>_title`` next to ``<entity>_id`` is the name of *that* entity, so
  ``author_name`` in a book equals ``name`` of the author it points to.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import string
import uuid
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
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
    "string_value",
    "integer_value",
    "number_value",
    "pattern_value",
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

PERSON_ENTITIES = frozenset(
    "author person people user artist actor customer member employee owner writer director creator cast crew "
    "guest profile account contact staff player speaker host reviewer follower friend".split()
)
TITLE_ENTITIES = frozenset(
    "book movie film tv show series album track song episode season playlist collection article post podcast "
    "game event video story chapter novel course lesson talk".split()
)
ORG_ENTITIES = frozenset(
    "company network store shop publisher brand label organization organisation team venue branch studio "
    "library school agency provider vendor supplier station airline hotel restaurant".split()
)

_FIRST = ("Ada Amara Bruno Camille Dmitri Elena Farah Gustav Hana Ines Jonah Keiko Lena Mateo Nadia Oskar "
          "Priya Quentin Rosa Samir Tomas Una Viktor Wren Yara Zoltan").split()
_LAST = ("Almeida Brandt Castillo Dufresne Eriksen Fontaine Grant Haddad Ivanova Janssen Kowalski Lindqvist "
         "Moreau Nakamura Okafor Petrov Quinn Rossi Sato Tanaka Ueda Varga Whitfield Xu Yilmaz Zeller").split()
_ADJ = ("silent amber hidden northern last crimson quiet golden distant broken winter paper hollow bright "
        "secret wandering iron velvet endless forgotten").split()
_NOUN = ("harbor garden river lantern orchard mountain archive meadow voyage compass island kingdom signal "
         "forest library tide window bridge horizon letter").split()
_ORG_SUFFIX = {"store": "Books", "shop": "Books", "branch": "Books", "publisher": "Press", "company": "Studios",
               "studio": "Studios", "network": "TV", "label": "Records", "team": "FC", "library": "Library"}
_CITIES = ("Lisbon Oslo Kyoto Lyon Porto Tallinn Montreal Ghent Bologna Valencia Krakow Dublin Leipzig "
           "Bergen Seville").split()
_STREETS = "Harbour Mill Chapel Station Orchard Bridge Market Church Garden Castle".split()
_COUNTRIES = "US GB FR DE PT NO JP CA IT ES PL IE BE SE NL".split()
_LANGS = "en fr de pt no ja it es pl nl sv".split()
_CURRENCIES = "EUR USD GBP".split()
_GENRES = "fantasy history mystery poetry science travel biography romance drama comedy".split()
_SENTENCES = (
    "A patient, generous story about people who refuse to give up on each other.",
    "Critics praised its quiet humour and its sharp eye for small details.",
    "It follows a journey across three winters and one long summer.",
    "The first edition sold out within a week of its release.",
    "Readers return to it for the characters as much as for the plot.",
    "Set between the wars, it moves from the coast to the mountains.",
    "An ambitious debut that rewards a second look.",
    "Recommended for anyone who enjoys careful, layered storytelling.",
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


def _words(name: str) -> list[str]:
    """``production_companies`` / ``relatedArtists`` / ``top-tracks`` -> lower-case words."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", name.lower()) if w]


def id_entity(name: str) -> str | None:
    """The entity an id-like name points to: ``book_id`` / ``bookId`` -> ``book``; else None.

    A bare ``id`` has no entity of its own (the caller knows it from the path)."""
    m = re.fullmatch(r"(.+?)(?:_id|Id|ID)", name)
    if not m:
        return None
    words = _words(m.group(1))
    return singular("_".join(words)) if words else None


def entity_from_name(name: str, known: Iterable[str]) -> str | None:
    """The known entity a path segment or property name refers to, or None.

    The whole name is tried first (``companies`` -> ``company``), then its words from the left
    (``movie_credits`` -> ``movie``, ``related-artists`` -> ``artist``), skipping view words."""
    known = set(known)
    words = _words(name)
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


# -- scalar values ---------------------------------------------------------------------------


def person_name(r: random.Random) -> str:
    return f"{r.choice(_FIRST)} {r.choice(_LAST)}"


def title_text(r: random.Random) -> str:
    a, n, n2 = r.choice(_ADJ).title(), r.choice(_NOUN).title(), r.choice(_NOUN).title()
    plural = n + ("es" if n.endswith(("s", "x", "ch", "sh")) else "s")
    article = "An" if a[0] in "AEIOU" else "A"
    return r.choice((f"The {a} {n}", f"{n} of the {a} {n2}", f"{article} {a} {n}", f"{a} {plural}",
                     f"The {n} and the {n2}"))


def org_name(entity: str | None, r: random.Random) -> str:
    suffix = _ORG_SUFFIX.get(entity or "", "Group")
    return r.choice((f"{r.choice(_LAST)} & {r.choice(_LAST)} {suffix}", f"{r.choice(_ADJ).title()} {r.choice(_NOUN).title()} {suffix}"))


def _date(r: random.Random) -> date:
    return date(1950, 1, 1) + timedelta(days=r.randrange(0, 27_000))


def _slug(r: random.Random) -> str:
    return f"{r.choice(_ADJ)}-{r.choice(_NOUN)}"


def _by_format(fmt: str, r: random.Random) -> str | None:
    """A value of a JSON Schema / OpenAPI string ``format``, or None for a format not known here."""
    if fmt == "date":
        return _date(r).isoformat()
    if fmt == "date-time":
        dt = datetime.combine(_date(r), datetime.min.time(), tzinfo=UTC) + timedelta(seconds=r.randrange(86400))
        return dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    if fmt == "time":
        return f"{r.randrange(24):02d}:{r.choice((0, 15, 30, 45)):02d}:00"
    if fmt in ("email", "idn-email"):
        return f"{r.choice(_FIRST).lower()}.{r.choice(_LAST).lower()}@example.com"
    if fmt in ("uri", "url", "uri-reference", "iri", "iri-reference"):
        return f"https://example.com/{_slug(r)}"
    if fmt == "uuid":
        return str(uuid.UUID(int=r.getrandbits(128), version=4))
    if fmt in ("hostname", "idn-hostname"):
        return f"{r.choice(_NOUN)}.example.com"
    if fmt == "ipv4":
        return f"192.0.2.{r.randrange(1, 255)}"
    if fmt == "ipv6":
        return f"2001:db8::{r.randrange(1, 0xFFFF):x}"
    if fmt == "byte":
        return "aGVsbG8gd29ybGQ="
    if fmt == "password":
        return "".join(r.choice(_B62) for _ in range(16))
    return None


def string_value(name: str, schema: dict[str, Any], entity: str | None, r: random.Random) -> str:
    """A plausible string for a field: by ``format`` first, then by the field name, then generic.

    ``minLength``, ``maxLength`` and ``pattern`` are honoured last."""
    fmt = schema.get("format")
    n = name.lower()
    words = _words(name)
    last = words[-1] if words else n
    value = _by_format(fmt, r) if isinstance(fmt, str) else None
    if value is not None:
        return _fit_string(value, schema, r)
    if last in ("date", "birthday", "deathday") or n.endswith("_date"):
        value = _date(r).isoformat()
    elif n.endswith("_at") or last in ("timestamp", "datetime"):
        value = _by_format("date-time", r)
    elif last in ("opens", "open", "opening", "start", "starts"):
        value = f"{r.randrange(7, 11):02d}:{r.choice((0, 30)):02d}"
    elif last in ("closes", "close", "closing", "end", "ends"):
        value = f"{r.randrange(17, 22):02d}:{r.choice((0, 30)):02d}"
    elif last == "time":
        value = f"{r.randrange(24):02d}:{r.choice((0, 15, 30, 45)):02d}"
    elif last == "email":
        value = _by_format("email", r)
    elif last in ("url", "uri", "homepage", "href", "link", "website"):
        value = _by_format("uri", r)
    elif last in ("password", "secret", "token"):
        value = _by_format("password", r)
    elif last == "path" or n.endswith("_path"):
        value = "/" + "".join(r.choice(_B62) for _ in range(20)) + ".jpg"
    elif last == "isbn" or n.startswith("isbn"):
        value = "978" + "".join(str(r.randrange(10)) for _ in range(10))
    elif last in ("country", "nationality") or n in ("iso_3166_1", "country_code", "origin_country", "region"):
        value = r.choice(_COUNTRIES)
    elif last in ("language", "locale", "lang") or n in ("iso_639_1", "original_language"):
        value = r.choice(_LANGS)
    elif last == "currency":
        value = r.choice(_CURRENCIES)
    elif last == "city" or n in ("town", "location", "place_of_birth"):
        value = r.choice(_CITIES)
    elif last in ("address", "street"):
        value = f"{r.randrange(1, 200)} {r.choice(_STREETS)} Street"
    elif last in ("phone", "telephone", "mobile"):
        value = f"+1-555-{r.randrange(100, 1000)}-{r.randrange(1000, 10000)}"
    elif last in ("zip", "zipcode", "postcode") or n == "postal_code":
        value = f"{r.randrange(10000, 100000)}"
    elif last in ("description", "overview", "biography", "bio", "summary", "content", "text", "body",
                  "comment", "review", "tagline", "message", "note", "notes", "about"):
        value = " ".join(r.sample(_SENTENCES, 2))
    elif last in ("genre", "category", "tag", "subject", "topic"):
        value = r.choice(_GENRES)
    elif last == "slug":
        value = _slug(r)
    elif last in ("code", "key", "sku"):
        value = "".join(r.choice(string.ascii_uppercase + string.digits) for _ in range(8))
    elif last == "status":
        value = r.choice(("active", "available", "released"))
    elif last == "version":
        value = f"{r.randrange(1, 5)}.{r.randrange(10)}.{r.randrange(10)}"
    elif last == "id" or n.endswith("_id"):
        value = "".join(r.choice(_B62[:16]) for _ in range(24))
    elif last in ("name", "title", "username", "login", "handle", "label") or n == "display_name":
        ent = entity or ""
        if last in ("username", "login", "handle"):
            value = f"{r.choice(_FIRST).lower()}{r.randrange(10, 100)}"
        elif ent in PERSON_ENTITIES or (last == "name" and words[:1] in (["first"], ["last"], ["full"])):
            value = person_name(r)
        elif ent in ORG_ENTITIES:
            value = org_name(ent, r)
        elif ent in TITLE_ENTITIES or last == "title":
            value = title_text(r)
        else:
            value = f"{r.choice(_ADJ).title()} {r.choice(_NOUN).title()}"
    if value is None:
        value = f"{r.choice(_ADJ)} {r.choice(_NOUN)}"
    return _fit_string(value, schema, r)


def _fit_string(value: str, schema: dict[str, Any], r: random.Random) -> str:
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            if not re.search(pattern, value):
                candidate = pattern_value(pattern, r)
                if candidate is not None:
                    value = candidate
        except re.error:
            pass
    lo = schema.get("minLength")
    hi = schema.get("maxLength")
    if isinstance(hi, int) and hi >= 0 and len(value) > hi:
        value = value[:hi]
    if isinstance(lo, int) and len(value) < lo:
        value = value + "x" * (lo - len(value))
    return value


# Characters a generated string may contain where the pattern allows "anything" or a negated class.
_PRINTABLE = string.ascii_letters + string.digits + " -_.@:/"
_CATEGORIES: dict[str, str] = {
    "CATEGORY_DIGIT": string.digits,
    "CATEGORY_NOT_DIGIT": string.ascii_letters + "-_",
    "CATEGORY_WORD": string.ascii_letters + string.digits + "_",
    "CATEGORY_NOT_WORD": " -.:/",
    "CATEGORY_SPACE": " ",
    "CATEGORY_NOT_SPACE": string.ascii_letters + string.digits,
}


class _Unsupported(Exception):
    pass


def _class_chars(items: list[tuple[Any, Any]]) -> str:
    """The characters of a ``[...]`` class (negated: the printable ones it excludes)."""
    chars: list[str] = []
    negate = False
    for op, av in items:
        kind = str(op)
        if kind == "NEGATE":
            negate = True
        elif kind == "LITERAL":
            chars.append(chr(av))
        elif kind == "RANGE":
            lo, hi = av
            chars.extend(chr(c) for c in range(lo, min(hi, lo + 200) + 1))
        elif kind == "CATEGORY":
            chars.extend(_CATEGORIES.get(str(av), ""))
        else:
            raise _Unsupported(kind)
    if negate:
        excluded = set(chars)
        return "".join(c for c in _PRINTABLE if c not in excluded)
    return "".join(chars)


def _emit(parsed: Any, r: random.Random, out: list[str]) -> None:
    for op, av in parsed:
        kind = str(op)
        if kind == "LITERAL":
            out.append(chr(av))
        elif kind == "NOT_LITERAL":
            out.append(r.choice([c for c in _PRINTABLE if c != chr(av)]))
        elif kind == "ANY":
            out.append(r.choice(string.ascii_letters))
        elif kind == "IN":
            chars = _class_chars(av)
            if not chars:
                raise _Unsupported("empty class")
            out.append(r.choice(chars))
        elif kind in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, hi, sub = av
            for _ in range(r.randint(lo, min(hi, lo + 3))):
                _emit(sub, r, out)
        elif kind in ("SUBPATTERN", "ATOMIC_GROUP"):
            _emit(av[-1], r, out)
        elif kind == "BRANCH":
            _emit(r.choice(av[1]), r, out)
        elif kind == "AT":
            continue
        else:
            raise _Unsupported(kind)


def pattern_value(pattern: str, r: random.Random) -> str | None:
    """A string matching a regular expression, built from Python's own parse of it (literals,
    classes, quantifiers, groups, alternatives), or None when the pattern uses more than that
    (look-arounds, back-references). Every result is checked with ``re`` before it is returned."""
    try:
        from re import _parser as sre_parse  # the stdlib's regex parser (Python 3.11+)

        parsed = sre_parse.parse(pattern)
    except (ImportError, re.error, RecursionError, OverflowError):
        return None
    for _ in range(5):
        out: list[str] = []
        try:
            _emit(parsed, r, out)
        except (_Unsupported, ValueError, IndexError, TypeError):
            return None
        value = "".join(out)
        if re.search(pattern, value):
            return value
    return None


def _limits(schema: dict[str, Any]) -> tuple[float | None, float | None, bool, bool]:
    """``(low, high, low_exclusive, high_exclusive)`` of a numeric schema, any draft's spelling."""
    def num(v: Any) -> float | None:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    lo, hi = num(schema.get("minimum")), num(schema.get("maximum"))
    lo_x, hi_x = schema.get("exclusiveMinimum") is True, schema.get("exclusiveMaximum") is True
    emin, emax = num(schema.get("exclusiveMinimum")), num(schema.get("exclusiveMaximum"))
    if emin is not None and (lo is None or emin >= lo):
        lo, lo_x = emin, True
    if emax is not None and (hi is None or emax <= hi):
        hi, hi_x = emax, True
    return lo, hi, lo_x, hi_x


def _narrow(lo: float, hi: float, limit_lo: float | None, limit_hi: float | None) -> tuple[float, float]:
    """The name-based default range ``[lo, hi]`` moved inside the schema's limits."""
    if limit_lo is not None and limit_hi is not None:
        a, b = max(lo, limit_lo), min(hi, limit_hi)
        return (a, b) if a <= b else (limit_lo, limit_hi)
    if limit_lo is not None:
        return (max(lo, limit_lo), max(hi, limit_lo + (hi - lo)))
    if limit_hi is not None:
        return (min(lo, limit_hi - (hi - lo)), min(hi, limit_hi))
    return lo, hi


def integer_value(name: str, schema: dict[str, Any], r: random.Random) -> int:
    """A plausible integer for a field name (years look like years, counts like counts)."""
    words = _words(name)
    last = words[-1] if words else ""
    n = name.lower()
    if n in ("born", "died", "birth_year", "death_year"):
        lo, hi = 1900, 1995
    elif last == "year" or n == "founded":
        lo, hi = 1900, 2024
    elif n == "page":
        lo, hi = 1, 1
    elif n in ("total_pages", "pages_total"):
        lo, hi = 1, 20
    elif last in ("total", "count", "results") or n.startswith(("total", "num_", "number_of")):
        lo, hi = 0, 5000
    elif last == "pages":
        lo, hi = 80, 900
    elif last == "age":
        lo, hi = 18, 90
    elif last in ("rating", "stars"):
        lo, hi = 1, 5
    elif last in ("quantity", "copies", "stock", "available"):
        lo, hi = 0, 20
    elif last in ("runtime", "duration", "minutes"):
        lo, hi = 80, 180
    elif n.endswith("_ms"):
        lo, hi = 120_000, 400_000
    elif last in ("number", "position", "rank", "order", "index"):
        lo, hi = 1, 20
    elif last in ("width", "height"):
        lo, hi = 200, 2000
    else:
        lo, hi = 1, 1000
    llo, lhi, lo_x, hi_x = _limits(schema)
    if llo is not None:
        llo = math.floor(llo) + 1 if lo_x else math.ceil(llo)
    if lhi is not None:
        lhi = math.ceil(lhi) - 1 if hi_x else math.floor(lhi)
    flo, fhi = _narrow(lo, hi, llo, lhi)
    ilo, ihi = math.ceil(flo), math.floor(fhi)
    if ihi < ilo:
        ihi = ilo
    step = schema.get("multipleOf")
    if isinstance(step, int) and not isinstance(step, bool) and step > 0:
        # The name-based range may hold no multiple (page 1..1, multipleOf 2): widen to the limits.
        wide_lo = llo if llo is not None else (lhi - 10 * step if lhi is not None else ilo)
        wide_hi = lhi if lhi is not None else wide_lo + 10 * step
        for a, b in ((ilo, ihi), (wide_lo, wide_hi)):
            first, last = -(-a // step), b // step
            if first <= last:
                return step * r.randint(first, last)
    return r.randint(ilo, ihi)


def number_value(name: str, schema: dict[str, Any], r: random.Random) -> float:
    """A plausible non-integral number (prices with cents, ratings with one decimal)."""
    words = _words(name)
    last = words[-1] if words else ""
    digits = 2
    if last in ("price", "amount", "cost", "total", "fee", "balance"):
        lo, hi = 3.0, 80.0
    elif last in ("average", "rating", "score", "stars"):
        lo, hi, digits = 1.0, 9.9, 1
    elif last in ("lat", "latitude"):
        lo, hi, digits = -60.0, 70.0, 5
    elif last in ("lon", "lng", "longitude"):
        lo, hi, digits = -170.0, 170.0, 5
    elif last in ("popularity", "ratio"):
        lo, hi, digits = 0.5, 100.0, 3
    else:
        lo, hi = 0.5, 1000.0
    llo, lhi, lo_x, hi_x = _limits(schema)
    lo, hi = _narrow(lo, hi, llo, lhi)
    value = round(r.uniform(lo, hi), digits)
    if float(value).is_integer():
        # A whole number would also validate as "integer" and break oneOf [integer, number].
        for nudged in (value + 0.5, value - 0.5, (lo + hi) / 2):
            if lo <= nudged <= hi:
                value = nudged
                break
    if (llo is not None and (value < llo or (lo_x and value == llo))) or (
        lhi is not None and (value > lhi or (hi_x and value == lhi))
    ):
        value = (lo + hi) / 2
    step = schema.get("multipleOf")
    if isinstance(step, (int, float)) and not isinstance(step, bool) and step > 0:
        first, last = math.ceil(lo / step), math.floor(hi / step)
        for k in sorted(range(first, last + 1)[:50], key=lambda k: stable_int(value, k)):
            candidate = k * step
            inside = (llo is None or candidate > llo or (candidate == llo and not lo_x)) and (
                lhi is None or candidate < lhi or (candidate == lhi and not hi_x))
            if inside and float(candidate / step).is_integer():
                return candidate
    return value
