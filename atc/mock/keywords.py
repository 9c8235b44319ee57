"""Keywords ``atc mock`` meets across several values at once, beside the one-value generators.

- :func:`more_keys` -- the entries of an object beyond its declared properties: a free-form map
  shows two, ``minProperties`` is met with keys the schema allows (``patternProperties`` first:
  a key generated from the pattern, its value from that pattern's schema; then
  ``additionalProperties`` unless it is false), every key meets ``propertyNames``, and
  ``maxProperties`` drops optional entries;
- :func:`finite_values` -- the distinct values an item schema allows when they are few (``enum``,
  ``const``, booleans), so that ``uniqueItems`` with ``minItems`` is met by drawing without
  replacement rather than by hoping.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from atc.mock.entities import rng, schema_type
from atc.mock.patterns import compiled, pattern_value
from atc.mock.request_checks import is_valid

__all__ = ["more_keys", "finite_values", "is_cut", "EXTRA_KEYS"]

#: Keys of generated free-form objects (``additionalProperties``, ``minProperties``).
EXTRA_KEYS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _matches_pattern(pattern: str, key: str) -> bool:
    regex = compiled(pattern)
    return regex is not None and regex.search(key) is not None


def more_keys(schema: dict[str, Any], out: dict[str, Any], make: Callable[[Any, str, int], Any], *,
              seed: tuple[Any, ...], free: bool, required: set[str]) -> None:
    """Add the entries ``schema`` wants beyond ``out`` (in place). ``make(schema, key, index)``
    generates a value (``schema`` may be None or True: any value); ``free``: the object declares no
    properties, so a map-like one shows a couple of entries even without ``minProperties``."""
    extra = schema.get("additionalProperties")
    raw_patterns = schema.get("patternProperties")
    patterns = sorted(raw_patterns.items()) if isinstance(raw_patterns, dict) else []
    names = schema.get("propertyNames") if isinstance(schema.get("propertyNames"), dict) else None
    low = _count(schema.get("minProperties")) or 0
    high = _count(schema.get("maxProperties"))
    want = max(low, len(out) + 2) if free and (isinstance(extra, dict) or patterns) else low
    want = min(want, high) if high is not None else want
    lo, hi = (_count(names.get("minLength")), _count(names.get("maxLength"))) if names else (None, None)
    for i in range(4 * max(0, want - len(out))):
        if len(out) >= want or not patterns:
            break
        pattern, sub = patterns[i % len(patterns)]
        key = pattern_value(pattern, rng(*seed, "pattern-key", i), lo, hi)
        if key is None or key in out or (names is not None and not is_valid(names, key)):
            continue
        out[key] = make(sub, key, i)
    if len(out) < want and extra is not False and not is_cut(extra):
        r = rng(*seed, "keys")
        keys = sorted({r.choice(EXTRA_KEYS) for _ in range(2)})
        keys += [k for k in EXTRA_KEYS if k not in keys]
        keys += [f"{k}{i}" for i in range(1, want // len(EXTRA_KEYS) + 2) for k in EXTRA_KEYS]
        for i, key in enumerate(keys):
            if len(out) >= want:
                break
            if key in out or any(_matches_pattern(p, key) for p, _ in patterns) \
                    or (names is not None and not is_valid(names, key)):
                continue
            out[key] = make(extra if isinstance(extra, dict) else None, key, i)
    if high is not None and len(out) > high:
        for key in [k for k in reversed(list(out)) if k not in required][:len(out) - high]:
            del out[key]


def is_cut(schema: Any) -> bool:
    """Whether the import cut this schema (a recursion, or a schema too deep or too large): it
    stands for a value the mock cannot describe, so it is better left out than made up."""
    if not isinstance(schema, dict) or "properties" in schema:
        return False
    d = schema.get("description")
    return isinstance(d, str) and d.startswith(("(recursive: ", "(nesting too deep", "(schema too large"))


def finite_values(items: dict[str, Any]) -> list[Any] | None:
    """The distinct values an item schema allows (``enum``, ``const``, boolean), else None."""
    if "const" in items:
        return [items["const"]]
    enum = items.get("enum")
    if isinstance(enum, list) and enum:
        distinct: dict[str, Any] = {}
        for e in enum:
            if is_valid(items, e):
                distinct.setdefault(json.dumps(e, sort_keys=True), e)
        return list(distinct.values()) or None
    if schema_type(items) == "boolean":
        return [False, True]
    return None
