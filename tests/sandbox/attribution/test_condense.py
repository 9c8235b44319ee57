"""condense(): a tool response reduced to its inferred shape and a short excerpt."""

from __future__ import annotations

import json
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.attribution.condense import MAX_DEPTH, MAX_PROPERTIES, condense, excerpt, shape

BOOKS = {
    "author_id": 1,
    "books": [
        {"id": 10, "title": "A Wizard of Earthsea", "year": 1968, "price": 9.5},
        {"id": 11, "title": "The Left Hand of Darkness", "year": 1969, "price": 12.0, "note": None},
    ],
}


def test_shape_shows_real_keys_and_merges_array_items() -> None:
    s = shape(BOOKS)
    assert "$schema" not in s
    assert s["type"] == "object" and set(s["properties"]) == {"author_id", "books"}
    item = s["properties"]["books"]["items"]
    assert set(item["properties"]) == {"id", "title", "year", "price", "note"}
    assert item["properties"]["note"] == {"type": "null"}
    assert sorted(item["required"]) == ["id", "price", "title", "year"]  # "note" is in one item only
    assert item["properties"]["price"]["type"] == "number"


def test_shape_caps_properties_with_a_note() -> None:
    wide = {f"k{i:03d}": i for i in range(MAX_PROPERTIES + 12)}
    s = shape(wide)
    assert len(s["properties"]) == MAX_PROPERTIES
    assert s["description"].startswith("12 more properties not shown: k030, k031")
    assert "required" not in s  # every key was present: nothing to say


def test_required_is_kept_only_when_keys_can_be_missing() -> None:
    s = shape([{"a": 1, "b": 2}, {"a": 3}])
    assert s["items"]["required"] == ["a"]
    assert "required" not in shape({"a": 1, "b": 2})


def test_shape_caps_depth() -> None:
    deep: Any = "leaf"
    for _ in range(MAX_DEPTH + 4):
        deep = {"next": deep}
    s = shape(deep)
    depth = 0
    while "properties" in s:
        s = s["properties"]["next"]
        depth += 1
    assert depth == MAX_DEPTH
    assert s == {"type": "object", "description": "deeper levels omitted"}


def test_shape_of_a_huge_list_is_cheap_and_complete() -> None:
    items = [{"id": i, "name": f"n{i}"} for i in range(50_000)]
    items[-1] = {"id": None, "name": "last", "extra": True}
    started = time.perf_counter()
    s = shape({"items": items})
    assert time.perf_counter() - started < 2.0
    props = s["properties"]["items"]["items"]["properties"]
    assert set(props) == {"id", "name", "extra"}  # the odd last item is sampled too
    assert props["id"]["type"] == ["integer", "null"]


def test_excerpt_cuts_long_lists_and_strings() -> None:
    value = {"results": [{"id": i, "bio": "x" * 500} for i in range(40)], "count": 40}
    text = excerpt(value)
    assert len(text) <= 600
    assert '"count": 40' in text
    assert "more)" in text and "chars)" in text
    assert text.startswith('{"results": [{"id": 0, "bio": "xxx')


def test_excerpt_of_small_values_is_their_json() -> None:
    assert excerpt({"books": 5, "authors": 3}) == '{"books": 5, "authors": 3}'
    assert excerpt([]) == "[]"
    assert excerpt("plain text body") == '"plain text body"'
    assert excerpt([1, 2, 3, 4, 5]) == "[1, 2, 3, ... (2 more)]"


def test_condense_odd_values_never_raise() -> None:
    assert condense(None) == ({"type": "null"}, "null")
    schema, text = condense({"when": object(), "raw": b"bytes", "tags": {"a"}})
    assert schema is not None and set(schema["properties"]) == {"when", "raw", "tags"}
    assert text.startswith('{"when": "<object object')


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=300),
    lambda inner: st.lists(inner, max_size=30) | st.dictionaries(st.text(max_size=20), inner, max_size=40),
    max_leaves=300,
)


@settings(max_examples=200, deadline=None)
@given(value=json_values, limit=st.integers(min_value=40, max_value=1200))
def test_any_json_condenses_within_bounds(value: Any, limit: int) -> None:
    schema, text = condense(value, max_chars=limit)
    assert isinstance(schema, dict) and ("type" in schema or "anyOf" in schema)
    assert isinstance(text, str) and len(text) <= limit
    json.dumps(schema)
