"""The scalar generators and the id spaces of ``atc mock`` (atc/mockvalues.py, atc/mockdata.py), at their edges.

Hypothesis draws numeric schemas with any mix of bounds (inclusive, draft-4 boolean and draft-6
numeric exclusive ones) and ``multipleOf``, and string schemas with lengths, formats and patterns;
every generated value must validate. Values must also be reproducible from the seed alone.
"""

from __future__ import annotations

import math
import random
import re
from datetime import date, datetime
from typing import Any
from uuid import UUID

import jsonschema
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from atc.mock.entities import IdSpaces, rng
from atc.mock.values import integer_value, number_value, pattern_value, string_value

NAMES = ["x", "year", "born", "page", "total", "count", "pages", "rating", "price", "vote_average", "latitude",
         "duration_ms", "season_number", "quantity", "popularity"]


@st.composite
def numeric_schemas(draw: st.DrawFn, kind: str) -> tuple[dict[str, Any], type[Any]]:
    schema: dict[str, Any] = {"type": kind}
    bound = st.integers(-10**6, 10**6) if kind == "integer" else st.floats(-1e6, 1e6, allow_nan=False)
    lo, hi = draw(st.none() | bound), draw(st.none() | bound)
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    style = draw(st.sampled_from(["inclusive", "draft4", "draft6"]))
    validator: type[Any] = jsonschema.Draft4Validator if style == "draft4" else jsonschema.Draft7Validator
    if lo is not None:
        if style == "draft6":
            schema["exclusiveMinimum"] = lo
        else:
            schema["minimum"] = lo
            if style == "draft4":
                schema["exclusiveMinimum"] = True
    if hi is not None:
        if style == "draft6":
            schema["exclusiveMaximum"] = hi
        else:
            schema["maximum"] = hi
            if style == "draft4":
                schema["exclusiveMaximum"] = True
    step = draw(st.none() | (st.integers(1, 40) if kind == "integer" else st.sampled_from([0.5, 0.25, 2, 5])))
    if step is not None:
        schema["multipleOf"] = step
    # Only satisfiable schemas: some value strictly or inclusively inside, on the step grid.
    exclusive = style != "inclusive"
    if lo is not None and hi is not None:
        first = math.floor(lo / (step or 1)) + 1 if exclusive else math.ceil(lo / (step or 1))
        last = math.ceil(hi / (step or 1)) - 1 if exclusive else math.floor(hi / (step or 1))
        # A real open interval is satisfiable only if some double lies strictly inside it:
        # (0, 5e-324) is empty in floating point.
        inside = math.nextafter(lo, math.inf) < hi if exclusive else hi >= lo
        # The grid bounds can underflow (5e-324 / 2 == 0.0): check a witness on the grid too.
        witness = first * (step or 1)
        in_bounds = (lo < witness < hi) if exclusive else (lo <= witness <= hi)
        assume(first <= last and in_bounds if (step or kind == "integer") else inside)
    return schema, validator


@settings(max_examples=400, deadline=None)
@given(case=numeric_schemas("integer"), name=st.sampled_from(NAMES), seed=st.integers(0, 10**9))
def test_integers_satisfy_any_satisfiable_bounds(case: tuple[dict[str, Any], type[Any]], name: str, seed: int) -> None:
    schema, validator = case
    value = integer_value(name, schema, random.Random(seed))
    assert isinstance(value, int)
    assert validator(schema).is_valid(value), (schema, value)


@settings(max_examples=400, deadline=None)
@given(case=numeric_schemas("number"), name=st.sampled_from(NAMES), seed=st.integers(0, 10**9))
def test_numbers_satisfy_any_satisfiable_bounds(case: tuple[dict[str, Any], type[Any]], name: str, seed: int) -> None:
    schema, validator = case
    value = number_value(name, schema, random.Random(seed))
    assert validator(schema).is_valid(value), (schema, value)


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(NAMES), seed=st.integers(0, 10**9))
def test_plain_numbers_are_not_integral(name: str, seed: int) -> None:
    """oneOf [integer, number] (TMDB's vote_average) needs a number that is not also an integer."""
    branches = {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    value = number_value(name, {"type": "number"}, random.Random(seed))
    assert jsonschema.Draft7Validator(branches).is_valid(value)


PATTERNS = [r"^(asc|desc)$", r"^[^@\s]+@[a-z\d.]+$", r"\w{2,}\s?.", r"^tt[0-9]{7}", r"^\+?[1-9]\d{1,14}$",
            r"^[A-Z]{2}$", r"^97[89][0-9]{10}$", r"^[0-2][0-9]:[0-5][0-9]$", r"^v\d+(\.\d+){0,2}$",
            r"^[a-z][a-z0-9-]{2,15}$", r"^(?:[A-Fa-f0-9]{2}:){5}[A-Fa-f0-9]{2}$"]


@settings(max_examples=300, deadline=None)
@given(pattern=st.sampled_from(PATTERNS), seed=st.integers(0, 10**9))
def test_patterns_are_matched(pattern: str, seed: int) -> None:
    value = pattern_value(pattern, random.Random(seed))
    assert value is not None and re.search(pattern, value)
    # The same generator behind string_value, with the pattern next to a name-based default.
    s = string_value("code", {"type": "string", "pattern": pattern}, None, random.Random(seed))
    assert re.search(pattern, s)


@pytest.mark.parametrize("pattern", [r"^(\d)-\1$", r"(a)\1", r"^[^\s\S]$"])
def test_unsupported_patterns_say_so(pattern: str) -> None:
    assert pattern_value(pattern, random.Random(1)) is None


def _check_format(fmt: str, value: str) -> None:
    if fmt == "date":
        date.fromisoformat(value)
    elif fmt == "date-time":
        assert datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is not None
    elif fmt == "uuid":
        UUID(value)
    elif fmt == "email":
        assert re.fullmatch(r"[a-z.]+@example\.com", value)
    elif fmt in ("uri", "url"):
        assert value.startswith("https://example.com/")
    elif fmt == "ipv4":
        assert all(0 <= int(p) < 256 for p in value.split("."))


@settings(max_examples=300, deadline=None)
@given(fmt=st.sampled_from([None, "date", "date-time", "uuid", "email", "uri", "ipv4", "time", "hostname"]),
       name=st.sampled_from(["name", "title", "email", "homepage", "release_date", "created_at", "isbn",
                             "overview", "country", "poster_path", "x"]),
       entity=st.sampled_from([None, "book", "author", "shop", "movie", "person"]),
       lengths=st.tuples(st.none() | st.integers(0, 30), st.none() | st.integers(0, 30)),
       seed=st.integers(0, 10**9))
def test_strings_respect_format_and_length(fmt: str | None, name: str, entity: str | None,
                                           lengths: tuple[int | None, int | None], seed: int) -> None:
    lo, hi = lengths
    schema: dict[str, Any] = {"type": "string"}
    if fmt:
        schema["format"] = fmt
    if lo is not None:
        schema["minLength"] = lo
    if hi is not None:
        schema["maxLength"] = hi
    assume(lo is None or hi is None or lo <= hi)
    value = string_value(name, schema, entity, random.Random(seed))
    assert isinstance(value, str) and jsonschema.Draft7Validator(schema).is_valid(value)
    if fmt and lo is None and hi is None:
        _check_format(fmt, value)


def test_values_depend_only_on_the_seed() -> None:
    a = [string_value("title", {"type": "string"}, "book", rng("book#1", "/title")) for _ in range(3)]
    assert len(set(a)) == 1
    assert string_value("title", {}, "book", rng("book#1", "/title")) != string_value(
        "title", {}, "book", rng("book#2", "/title"))


def test_id_spaces_are_fixed_and_foreign_keys_invert() -> None:
    one, two = IdSpaces(), IdSpaces()
    assert one.ids("book", "int") == two.ids("book", "int")
    assert len(set(one.ids("book", "int"))) == one.size
    assert one.ids("book", "int") != one.ids("author", "int")
    picked = one.pick("book", "int", "seed")
    assert one.contains("book", picked) and one.contains("book", str(picked))
    assert not one.contains("book", 1) and not one.contains("book", "nope")
    uid = one.ids("order", "uuid")[0]
    assert one.contains("order", uid.upper())
    # Every author a book refers to lists that book among its books, and only such books.
    for book in one.ids("book", "int")[:100]:
        author = one.foreign("book", "int", book, "author", "int")
        assert author is not None
        books = one.referrers("book", "int", "author", "int", author)
        assert book in books
        assert all(one.foreign("book", "int", b, "author", "int") == author for b in books)
    sizes = [len(one.referrers("book", "int", "author", "int", a)) for a in one.ids("author", "int")[:one.active]]
    assert sum(sizes) == one.size and min(sizes) >= 0 and max(sizes) < 20
