"""Plausible scalar values for ``atc mock``: names, titles, dates, numbers within bounds, strings
matching a pattern.

Each generator takes a seeded ``random.Random`` (see :func:`atc.mock.entities.rng`) and returns the
same value for the same seed. Field names steer plausibility (``year`` looks like a year,
``price`` has cents, ``email`` is an address, the ``name`` of an author is a person's); the
schema's constraints (``format``, ``minimum``/``maximum`` in every draft's spelling,
``multipleOf``, ``minLength``/``maxLength``, ``pattern``) always win.
"""

from __future__ import annotations

import math
import random
import string
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

from atc.mock.entities import name_words, stable_int
from atc.mock.patterns import compiled, pattern_value

__all__ = [
    "PERSON_ENTITIES",
    "TITLE_ENTITIES",
    "ORG_ENTITIES",
    "PLACE_ENTITIES",
    "string_value",
    "integer_value",
    "number_value",
    "pattern_value",
    "person_name",
    "title_text",
    "org_name",
    "SHORTEST",
]

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
PLACE_ENTITIES = frozenset("city town place location destination stop station airport region".split())
_WEATHER = "sunny cloudy rain showers snow windy fog clear".split()
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
    if fmt in ("date-time", "datetime"):
        dt = datetime.combine(_date(r), datetime.min.time(), tzinfo=UTC) + timedelta(seconds=r.randrange(86400))
        return dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    if fmt == "time":
        return f"{r.randrange(24):02d}:{r.choice((0, 15, 30, 45)):02d}:00Z"  # RFC 3339 full-time: with offset
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
    words = name_words(name)
    last = words[-1] if words else n
    value = _by_format(fmt, r) if isinstance(fmt, str) else None
    if value is not None:
        return _fit_string(value, schema, r)
    if last in ("date", "birthday", "deathday") or n.endswith("_date"):
        value = _date(r).isoformat()
    elif n.endswith("_at") or (last == "at" and len(words) > 1) or last in ("timestamp", "datetime"):
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
    elif last in ("conditions", "condition", "weather", "forecast", "sky"):
        value = r.choice(_WEATHER)
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
        elif ent in PLACE_ENTITIES and last == "name":
            value = r.choice(_CITIES) if ent in ("city", "town", "destination") else (
                f"{r.choice(_CITIES)} {r.choice(('Central', 'North', 'Harbour', 'Old Town'))}")
        elif ent in TITLE_ENTITIES or last == "title":
            value = title_text(r)
        else:
            value = f"{r.choice(_ADJ).title()} {r.choice(_NOUN).title()}"
    if value is None:
        value = f"{r.choice(_ADJ)} {r.choice(_NOUN)}"
    return _fit_string(value, schema, r)


def _fit_string(value: str, schema: dict[str, Any], r: random.Random) -> str:
    """``value``, or a replacement, that meets the schema's ``pattern`` and length bounds. A
    pattern is met by generating from it within the length window (never by padding a match)."""
    lo = schema.get("minLength")
    hi = schema.get("maxLength")
    lo = lo if isinstance(lo, int) and lo >= 0 else None
    hi = hi if isinstance(hi, int) and hi >= 0 else None
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        regex = compiled(pattern)
        fits = (lo is None or len(value) >= lo) and (hi is None or len(value) <= hi)
        if regex is not None and not (fits and regex.search(value)):
            candidate = pattern_value(pattern, r, lo, hi)
            if candidate is not None:
                return candidate
    if hi is not None and len(value) > hi:
        fmt = schema.get("format")
        short = _shortened(value, hi, fmt) if isinstance(fmt, str) else None
        value = short if short is not None else value[:hi].rstrip() or value[:hi]
    if lo is not None and len(value) < lo:
        value = _lengthened(value, lo, schema.get("format"), r)
        if hi is not None:
            value = value[:hi]
    return value


#: The shortest value of each format that has one (``maxLength`` below it cannot be met).
SHORTEST = {"email": "a@b.io", "idn-email": "a@b.io", "uri": "a:b", "url": "a:b", "iri": "a:b", "uri-reference": "",
            "iri-reference": "", "hostname": "a", "idn-hostname": "a", "ipv4": "1.1.1.1", "ipv6": "::1",
            "date": "2001-02-03", "date-time": "2001-02-03T04:05:06Z", "time": "04:05:06Z",
            "uuid": "00000000-0000-4000-8000-000000000000", "byte": ""}


def _shortened(value: str, length: int, fmt: str) -> str | None:
    """``value`` cut to ``length`` characters so that it still is a ``fmt``: an address keeps its
    ``@`` and a domain, a URI its scheme; None for a format that cannot be shorter than it is
    (a date, a uuid), or when even the shortest value of the format is too long."""
    if fmt in ("email", "idn-email") and "@" in value:
        local, domain = value.split("@", 1)
        for host in (domain, "example.com", "x.io"):
            room = length - len(host) - 1
            if room >= 1:
                return f"{local[:room].rstrip('.') or local[:1]}@{host}"
        return None
    if fmt in ("uri", "url", "iri"):
        for candidate in ("https://example.com", "https://x.io", "http://x.io", "a:b"):
            if len(candidate) <= length:
                return candidate
        return None
    if fmt in ("hostname", "idn-hostname"):
        labels = value.split(".")
        while len(labels) > 1 and len(".".join(labels)) > length:
            labels = labels[1:]
        host = ".".join(labels)[:length].strip(".-")
        return host or None
    shortest = SHORTEST.get(fmt)
    if shortest is not None and len(shortest) <= length:
        return shortest if fmt not in ("uri-reference", "iri-reference") else value[:length].replace(" ", "")
    return None


def _lengthened(value: str, length: int, fmt: Any, r: random.Random) -> str:
    """``value`` made ``length`` long in a way that keeps its format: more words for text, a
    longer local part for an email address, a longer path for a URI, more letters otherwise."""
    missing = length - len(value)
    letters = "".join(r.choice(string.ascii_lowercase) for _ in range(missing))
    if fmt in ("email", "idn-email") and "@" in value:
        local, domain = value.split("@", 1)
        return f"{local}{letters}@{domain}"
    if fmt in ("uri", "url", "uri-reference", "iri", "iri-reference"):
        return value + "/" + letters[:-1] if missing > 1 else value + "/"
    if " " in value:
        words = value + " " + " ".join(r.choice(_NOUN) for _ in range(length // 4 + 1))
        return words[:length]
    return value + letters


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
    words = name_words(name)
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
            k_lo, k_hi = -(-a // step), b // step
            if k_lo <= k_hi:
                return step * r.randint(k_lo, k_hi)
    return r.randint(ilo, ihi)


def number_value(name: str, schema: dict[str, Any], r: random.Random) -> float:
    """A plausible non-integral number (prices with cents, ratings with one decimal)."""
    words = name_words(name)
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
    elif "temp" in words or "temperature" in words:
        lo, hi, digits = -10.0, 35.0, 1
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

    def inside(v: float) -> bool:
        return (llo is None or v > llo or (v == llo and not lo_x)) and (lhi is None or v < lhi or (v == lhi and not hi_x))

    if not inside(value):
        if llo is not None and lhi is not None:
            value = (llo + lhi) / 2
        elif llo is not None:
            value = llo + abs(llo) * 0.1 + 1
        elif lhi is not None:
            value = lhi - abs(lhi) * 0.1 - 1
    step = schema.get("multipleOf")
    if isinstance(step, (int, float)) and not isinstance(step, bool) and step > 0:
        wide = (llo if llo is not None else lo, lhi if lhi is not None else hi)
        for a, b in ((lo, hi), wide):
            k_lo, k_hi = math.ceil(a / step), math.floor(b / step)
            for k in sorted(range(k_lo, k_hi + 1)[:50], key=lambda k: stable_int(value, k)):
                candidate = k * step
                if inside(candidate) and float(candidate / step).is_integer():
                    return candidate
    return value
