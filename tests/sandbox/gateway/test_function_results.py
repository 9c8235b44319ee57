"""A function tool's result taken as it is (``_plain_json``, the quick path of plain results) is
exactly what ``jsonable``'s bounded walk would make of it.

Hypothesis draws results of every kind a function returns: JSON data, and what is not quite JSON
(tuples, NaN and infinities, number, bool and None keys, enums, dates, sets, nesting deeper than
``MAX_DEPTH``); wherever the quick path takes one, its bytes decode to ``jsonable``'s value, and it
leaves to the walk every result the walk would change or refuse.
"""

from __future__ import annotations

import datetime
import enum
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.gateway.functions.results import MAX_DEPTH, NotJson, jsonable
from sandbox.gateway.functions.transport import _plain_json


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    LOW = 1


scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=True),
                    st.text(max_size=6), st.just(Color.RED), st.just(Level.LOW), st.just(datetime.date(2026, 12, 2)))
keys = st.one_of(st.text(max_size=4), st.integers(-3, 3), st.booleans(), st.none(), st.just(1.5), st.just(Level.LOW))
results = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.tuples(inner, inner), st.frozensets(st.integers(0, 3), max_size=3),
    st.dictionaries(keys, inner, max_size=5)), max_leaves=25)


def _walked(value: Any) -> Any:
    try:
        return jsonable(value, 1 << 20)
    except NotJson:
        return NotJson


@settings(max_examples=600, deadline=None)
@given(results)
def test_the_quick_path_takes_only_what_the_walk_keeps_as_it_is(value: Any) -> None:
    raw = _plain_json(value, 1 << 20)
    if raw is not None:
        assert json.loads(raw) == _walked(value)


def test_it_takes_plain_records_and_leaves_the_rest() -> None:
    record = {"id": 7, "name": "user 7", "tags": ["a", "b"], "score": 0.5, "parent": None, "ok": True}
    assert _plain_json(record, 1 << 20) == json.dumps(record, separators=(",", ":")).encode()
    assert _plain_json([record, record], 1 << 20) is not None
    assert _plain_json([record] * 50, 100) is None  # over the byte cap: the walk says so
    for other in (float("nan"), {"x": float("inf")}, {"when": datetime.date(2026, 1, 1)}, {"c": Color.RED},
                  (1, 2), {1: "a"}, {"s": {1, 2}}, list(range(300)), "text", 5):
        assert _plain_json(other, 1 << 20) is None, other


def test_a_result_nested_past_the_bound_is_refused_as_before() -> None:
    import atc  # lazy: the end-to-end check runs a program in the local sandbox

    def tree() -> dict[str, Any]:
        """A result nested deeper than a run takes."""
        deep: Any = []
        for _ in range(MAX_DEPTH + 5):
            deep = [deep]
        return {"deep": deep}

    assert _plain_json(tree(), 1 << 20) is None  # json could write it: left to the walk, which refuses it
    r = atc.run("tree()\n", [tree], sandbox="local")
    assert not r.ok and r.error is not None and r.error.tool == "tree"
    assert f"nested more than {MAX_DEPTH} levels" in r.error.message and r.calls[0].failure == "response"
