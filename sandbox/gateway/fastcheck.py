"""A quick proof that a call's arguments are valid, without ``jsonschema``.

``jsonschema`` costs 10-30 microseconds per keyword per value, which made argument checking the
largest part of a call to a Python function tool (about half of its 0.33 ms on the host). Most
parameter schemas use a small set of keywords (types, properties, required, items, enum, bounds),
and most calls are valid. So a schema made only of that set is compiled once into plain Python
checks, and a call they pass is valid. Anything else is left to ``jsonschema``, which also writes
every message: the quick check only ever says "valid" or "don't know".

It must never say "valid" where ``jsonschema`` (as ``sandbox.gateway.validation`` runs it) would find an
error, so where the two could differ it says "don't know": a float where an integer is asked for
(``1.0`` is an integer to jsonschema), ``enum`` values compared across types (``True == 1`` in
Python, not in JSON Schema), unknown keywords in an assertion position. ``pattern`` is not
checked by ``sandbox.gateway.validation`` either (see its docstring); ``format`` is an annotation there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["compile_quick", "Check"]

Check = Callable[[Any], bool]

#: Keywords that assert nothing (annotations, and OpenAPI's own words jsonschema ignores).
_ANNOTATIONS = frozenset({
    "description", "title", "default", "examples", "example", "format", "deprecated", "readOnly", "writeOnly",
    "$comment", "nullable", "xml", "externalDocs", "discriminator", "pattern", "contentMediaType",
    "contentEncoding", "$schema", "$id",
})
_SCALARS = (str, int, float, bool, type(None))
_TYPES: dict[str, Check] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}

class _Unsupported(Exception):
    """The schema uses a keyword the quick check does not know: jsonschema decides."""


def compile_quick(schema: dict[str, Any]) -> Check | None:
    """The quick check of a parameters schema (True: valid), or None when the schema uses keywords
    outside the quick set. Compiling walks the schema once; the gateway keeps the result per
    schema (``sandbox.gateway.validation``)."""
    try:
        return _compile(schema, depth=0)
    except _Unsupported:
        return None


def _compile(schema: Any, depth: int) -> Check:
    if schema is True or schema == {}:
        return lambda v: True
    if not isinstance(schema, dict) or depth > 32:
        raise _Unsupported
    checks: list[Check] = []
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS or keyword.startswith("x-"):
            continue
        checks.append(_keyword(schema, keyword, value, depth))
    checks = [c for c in checks if c is not _ALWAYS]
    if not checks:
        return _ALWAYS
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(c(v) for c in checks)


def _always(value: Any) -> bool:
    return True


_ALWAYS: Check = _always


def _keyword(schema: dict[str, Any], keyword: str, value: Any, depth: int) -> Check:
    if keyword == "type":
        names = value if isinstance(value, list) else [value]
        if not names or not all(isinstance(n, str) and n in _TYPES for n in names):
            raise _Unsupported
        tests = [_TYPES[n] for n in names]
        return tests[0] if len(tests) == 1 else (lambda v: any(t(v) for t in tests))
    if keyword in ("enum", "const"):
        options = value if keyword == "enum" else [value]
        if not isinstance(options, list) or not all(isinstance(o, _SCALARS) for o in options):
            raise _Unsupported
        # same type and equal: True is not 1 and 1.0 is not 1 here (jsonschema would take 1.0)
        allowed = {(type(o), o) for o in options}
        return lambda v: isinstance(v, _SCALARS) and (type(v), v) in allowed
    if keyword == "properties":
        if not isinstance(value, dict):
            raise _Unsupported
        props = {name: _compile(sub, depth + 1) for name, sub in value.items()}
        return lambda v: not isinstance(v, dict) or all(p(v[k]) for k, p in props.items() if k in v)
    if keyword == "required":
        if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
            raise _Unsupported
        required = tuple(value)
        return lambda v: not isinstance(v, dict) or all(n in v for n in required)
    if keyword == "additionalProperties":
        if value is True or value == {}:
            return _ALWAYS
        known = schema.get("properties", {})
        if not isinstance(known, dict) or "patternProperties" in schema:
            raise _Unsupported
        if value is False:
            return lambda v: not isinstance(v, dict) or all(k in known for k in v)
        extra = _compile(value, depth + 1)
        return lambda v: not isinstance(v, dict) or all(extra(x) for k, x in v.items() if k not in known)
    if keyword == "items":
        if not isinstance(value, dict) and value is not True:
            raise _Unsupported  # a list of schemas (draft 4's tuple form), or prefixItems' partner
        item = _compile(value, depth + 1)
        return lambda v: not isinstance(v, list) or all(item(x) for x in v)
    if keyword in ("anyOf", "allOf"):
        # a branch's check says True only when the value is valid under it, so "any passes" proves
        # anyOf and "all pass" proves allOf; oneOf would need a proof that the others fail
        if not isinstance(value, list) or not value:
            raise _Unsupported
        branches = [_compile(sub, depth + 1) for sub in value]
        if keyword == "anyOf":
            return lambda v: any(b(v) for b in branches)
        return lambda v: all(b(v) for b in branches)
    if keyword in ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"):
        if type(value) is not int:
            raise _Unsupported
        return _size(keyword, value)
    if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if type(value) not in (int, float):
            raise _Unsupported  # draft 4's boolean exclusiveMinimum among them
        return _bound(keyword, value)
    raise _Unsupported


def _size(keyword: str, n: int) -> Check:
    kinds: dict[str, type] = {"Items": list, "Length": str, "Properties": dict}
    kind = kinds[keyword[3:]]

    def size(v: Any) -> int | None:
        return len(v) if isinstance(v, list | str | dict) and isinstance(v, kind) else None

    # a string's length is counted in code points by jsonschema too
    if keyword.startswith("min"):
        return lambda v: (got := size(v)) is None or got >= n
    return lambda v: (got := size(v)) is None or got <= n


def _bound(keyword: str, limit: float) -> Check:
    # Not a number (booleans included): the bound does not apply. NaN compares False: "don't know".
    if keyword == "minimum":
        return lambda v: (type(v) is not int and type(v) is not float) or v >= limit
    if keyword == "maximum":
        return lambda v: (type(v) is not int and type(v) is not float) or v <= limit
    if keyword == "exclusiveMinimum":
        return lambda v: (type(v) is not int and type(v) is not float) or v > limit
    return lambda v: (type(v) is not int and type(v) is not float) or v < limit
