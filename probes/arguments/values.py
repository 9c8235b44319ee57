"""Argument values that need no response: made from a parameter's schema, or common search words.

Each value carries a *score*, the prober's belief that it makes the call succeed (0..1). The scale
is shared with harvested values (``probes.arguments.harvest``), so the planner can compare them:

======  ========================================================================================
0.95    ``const``; a value the API itself handed out under the parameter's exact name
0.9     ``enum`` members and ``default``
0.8     the spec's ``example`` of a parameter that takes no id
0.7     a common value for a parameter known by its name alone (``language`` -> ``en``, ``limit`` -> 10)
0.6     a spec example of an id-like parameter; a value made for a ``format`` (date, email...);
        a common search word for a free-text parameter
0.5     a value of the right type and bounds, made up (``1``, ``false``, ``"test"``)
0.1     a made-up id: only worth one try once nothing better is left
======  ========================================================================================
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from probes.arguments.naming import PATH_PARAM_WORDS, ParamRole, norm, param_role
from protocols.model import Tool

__all__ = ["Made", "schema_values", "made_value", "MARK", "COMMON_WORDS", "NAMED", "coerce", "within", "type_ok", "STRONG", "GUESS"]

#: The lowest score a plan needs in the ordinary rounds (below it only the last, guessing round).
STRONG = 0.5
#: The score of a value that is a pure guess.
GUESS = 0.1

#: Words that find something in almost any search index (tried after names seen in responses).
COMMON_WORDS = ("love", "the", "star", "world", "time", "music", "new", "life")

#: Plausible values for parameters known by their name alone: the generic vocabulary of web APIs.
NAMED: dict[str, Any] = {
    "language": "en", "lang": "en", "locale": "en-US", "hl": "en", "country": "US", "country_code": "US",
    "region": "US", "currency": "USD", "units": "metric", "unit": "metric", "format": "json", "order": "asc",
    "direction": "asc", "page": 1, "per_page": 10, "limit": 10, "page_size": 10, "pagesize": 10, "size": 10,
    "count": 10, "max_results": 10, "offset": 0, "start": 0, "year": 2020, "month": 1, "day": 1, "lat": 51.5,
    "latitude": 51.5, "lon": -0.12, "lng": -0.12, "longitude": -0.12, "city": "London", "timezone": "UTC",
    "tz": "UTC", "date": "2024-01-15",
}

_FORMATS: dict[str, Any] = {
    "date": "2024-01-15",
    "date-time": "2024-01-15T12:00:00Z",
    "time": "12:00:00",
    "email": "user@example.com",
    "uri": "https://example.com",
    "url": "https://example.com",
    "hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uuid": str(uuid.UUID(int=1)),
    "year": 2024,
    "language": "en",
}


@dataclass(frozen=True)
class Made:
    """A value for a parameter and the belief in it; ``source`` says where it came from
    (``const``, ``enum``, ``default``, ``example``, ``format``, ``type``, ``guess``, ``words``)."""

    value: Any
    score: float
    source: str


def _kind(schema: dict[str, Any]) -> str | None:
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    if isinstance(t, str):
        return t
    for key in ("oneOf", "anyOf"):
        options = schema.get(key)
        if isinstance(options, list):
            for option in options:
                if isinstance(option, dict) and (k := _kind(option)) and k != "null":
                    return k
    return None


def type_ok(value: Any, schema: dict[str, Any]) -> bool:
    """Whether ``value`` has the JSON type the schema asks for (no type: anything goes)."""
    kind = _kind(schema)
    if kind is None:
        return not isinstance(value, dict | list)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True


def coerce(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` in the type the parameter wants, when that loses nothing (``"42"`` -> 42 for an
    integer, 42 -> ``"42"`` for a string); None when it cannot be had."""
    kind = _kind(schema)
    if isinstance(value, bool):
        return value if kind in ("boolean", None) else None
    if kind == "integer":
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 19:
            return int(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return None
    if kind == "number":
        if isinstance(value, int | float):
            return value
        return None
    if kind == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, int):
            return str(value)
        return None
    if kind is None:
        return value if isinstance(value, str | int | float) else None
    if kind == "array" and not isinstance(value, list):
        items = schema.get("items")
        inner = coerce(value, items if isinstance(items, dict) else {})
        return [inner] if inner is not None else None
    return value if type_ok(value, schema) else None


def within(value: Any, schema: dict[str, Any]) -> bool:
    """Whether a value (already of the right type) keeps the schema's ``enum`` and bounds."""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, int | float) and not isinstance(low, bool) and value < low:
            return False
        if isinstance(high, int | float) and not isinstance(high, bool) and value > high:
            return False
    if isinstance(value, str):
        short, long_ = schema.get("minLength"), schema.get("maxLength")
        if isinstance(short, int) and len(value) < short or isinstance(long_, int) and len(value) > long_:
            return False
    return True


def _number(schema: dict[str, Any], integer: bool) -> Any:
    low = schema.get("minimum")
    ex_low = schema.get("exclusiveMinimum")
    high = schema.get("maximum")
    value: Any = 1
    if isinstance(low, int | float) and not isinstance(low, bool):
        value = low
    elif isinstance(ex_low, int | float) and not isinstance(ex_low, bool):
        value = ex_low + 1
    if isinstance(high, int | float) and not isinstance(high, bool) and value > high:
        value = high
    return int(value) if integer else value


def schema_values(schema: Any, role: ParamRole) -> list[Made]:
    """Values for a parameter from its schema alone, best first (at most a handful)."""
    schema = schema if isinstance(schema, dict) else {}
    out: list[Made] = []
    id_like = role.id_like
    if "const" in schema:
        return [Made(schema["const"], 0.95, "const")]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        default = schema.get("default")
        ordered = ([default] if default in enum else []) + [e for e in enum if e != default and e is not None]
        return [Made(v, 0.9, "enum") for v in ordered[:3]]
    if "default" in schema and schema["default"] is not None:
        out.append(Made(schema["default"], 0.9 if not id_like else 0.6, "default"))
    examples: list[Any] = []
    if "example" in schema:
        examples.append(schema["example"])
    if isinstance(schema.get("examples"), list):
        examples.extend(schema["examples"][:2])
    for ex in examples:
        if ex is not None and type_ok(ex, schema):
            out.append(Made(ex, 0.6 if id_like else 0.8, "example"))
    kind = _kind(schema)
    named = NAMED.get(norm(role.name))
    if named is not None and coerce(named, schema) is not None:
        out.append(Made(coerce(named, schema), 0.7, "name"))
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS and type_ok(_FORMATS[fmt], schema):
        out.append(Made(_FORMATS[fmt], 0.6, "format"))
    elif role.text:
        out.extend(Made(w, 0.6, "words") for w in COMMON_WORDS[:4])
    elif kind == "integer":
        out.append(Made(_number(schema, True), 0.5 if not id_like else 0.1, "type" if not id_like else "guess"))
    elif kind == "number":
        out.append(Made(_number(schema, False), 0.5 if not id_like else 0.1, "type" if not id_like else "guess"))
    elif kind == "boolean":
        out.append(Made(False, 0.5, "type"))
    elif kind == "array":
        items = schema.get("items")
        inner = schema_values(items, role) if isinstance(items, dict) else []
        if inner:
            out.append(Made([inner[0].value], min(inner[0].score, 0.5), inner[0].source))
    elif kind in ("string", None) and role.attribute not in PATH_PARAM_WORDS:
        # (a made-up path -- ``test`` -- finds no file: a path comes from an answer, or not at all)
        low = schema.get("minLength")
        text = "test" if not isinstance(low, int) or low <= 4 else "x" * low
        out.append(Made(text, 0.1 if id_like else 0.5, "guess" if id_like else "type"))
    seen: list[Any] = []
    unique: list[Made] = []
    for made in out:
        if made.value not in seen:
            seen.append(made.value)
            unique.append(made)
    return unique


#: The text the probe writes where it must make up a value (so that a person can spot it).
MARK = "atc-probe"


def made_value(schema: Any, tool: Tool | None = None, pname: str = "", depth: int = 0) -> Any:
    """A value of a parameter that names nothing, from its schema (``const``, ``enum``,
    ``default``, an example, a bounded number, ``MARK`` for text); objects get their required
    fields, lists one item. None when the schema allows nothing the probe can make."""
    schema = schema if isinstance(schema, dict) else {}
    if depth > 6:
        return None
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    for key in ("oneOf", "anyOf"):
        if kind is None and isinstance(schema.get(key), list):
            option = next((o for o in schema[key] if isinstance(o, dict) and o.get("type") != "null"), None)
            if option is not None:
                return made_value(option, tool, pname, depth + 1)
    if kind == "object" or (kind is None and isinstance(schema.get("properties"), dict)):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        out: dict[str, Any] = {}
        for name in schema.get("required") or []:
            value = made_value(props.get(name), None, str(name), depth + 1)
            if value is None:
                return None
            out[str(name)] = value
        return out
    if kind == "array":
        item = made_value(schema.get("items"), None, pname, depth + 1)
        if item is None:
            return [] if not schema.get("minItems") else None
        return [item] * max(1, int(schema.get("minItems") or 1)) if schema.get("minItems") else [item]
    if tool is not None and pname:
        options = schema_values(schema, param_role(tool, pname))
        good = [m for m in options if m.source in ("const", "enum", "default", "example", "name", "format")]
        if good:
            return good[0].value
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return next((e for e in schema["enum"] if e is not None), None)
    if schema.get("default") is not None:
        return schema["default"]
    if kind in ("integer", "number"):
        low = schema.get("minimum")
        return low if isinstance(low, int | float) and not isinstance(low, bool) else 1
    if kind == "boolean":
        return False
    if kind in ("string", None):
        fmt = schema.get("format")
        made = [m for m in schema_values({"type": "string", "format": fmt}, _NO_ROLE) if m.source == "format"]
        if made:
            return made[0].value
        low = schema.get("minLength")
        return MARK if not isinstance(low, int) or low <= len(MARK) else MARK + "-" * (low - len(MARK))
    return None


class _NoRole:
    name = ""
    entity = None
    attribute = ""
    id_like = False
    text = False
    in_path = False


_NO_ROLE: Any = _NoRole()
