"""Parameter serialisation: a Python value -> the text a spec's ``style``/``explode`` asks for.

OpenAPI 3 defines how arrays and objects are written in each location (RFC 6570 flavoured);
Swagger 2's ``collectionFormat`` is mapped onto the same styles at import (``Binding``). With
``id = [3, 4, 5]`` and ``color = {"R": 100, "G": 200}``::

    query  form, explode        id=3&id=4&id=5          R=100&G=200
    query  form                 id=3,4,5                color=R,100,G,200
    query  spaceDelimited       id=3%204%205            pipeDelimited  id=3|4|5   tabDelimited  id=3%094%095
    query  deepObject                                   color[R]=100&color[G]=200
    path   simple               3,4,5                   R,100,G,200   (explode: R=100,G=200)
    path   label                .3.4.5 (explode)        .3,4,5        .R,100,G,200
    path   matrix               ;id=3;id=4;id=5 (explode)  ;id=3,4,5  ;R=100;G=200 (explode)
    header simple               3,4,5                   R,100,G,200   (explode: R=100,G=200)
    cookie form                 id=3,4,5 (explode: id=3; id=4; id=5)

Scalars are written as JSON would spell them (``true``, ``false``, ``null`` as an empty value);
a nested array or object where the style has no place for one is written as compact JSON.
Every piece of a value is percent-encoded on its own, so the delimiters the style adds are the
only structure the server sees: a comma inside a value arrives as ``%2C``, a ``/`` in a path value
as ``%2F`` (a path value can never add a segment or climb with ``..``).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from protocols.model import Binding

__all__ = ["scalar_text", "query_pairs", "path_value", "header_value", "cookie_pairs", "encode_pairs",
           "QUERY_SAFE_RESERVED"]

#: Characters RFC 3986 reserves that ``allowReserved`` lets through unencoded in a query value.
QUERY_SAFE_RESERVED = ":/?#[]@!$&'()*+,;="
#: The delimiter each query style puts between array items, already in its encoded form.
_JOINS = {"form": ",", "spaceDelimited": "%20", "pipeDelimited": "|", "tabDelimited": "%09"}


def scalar_text(value: Any) -> str:
    """A scalar as it appears on the wire; lists and objects as compact JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _enc(text: str, *, reserved: bool = False) -> str:
    return quote(text, safe=QUERY_SAFE_RESERVED if reserved else "")


def _name(text: str) -> str:
    # Wire names like ``page[size]`` (JSON:API) keep their brackets readable.
    return quote(text, safe="[]")


def _flat(obj: dict[str, Any]) -> list[str]:
    """``{"R": 100, "G": 200}`` -> ``["R", "100", "G", "200"]``."""
    out: list[str] = []
    for key, value in obj.items():
        out += [str(key), scalar_text(value)]
    return out


def query_pairs(name: str, value: Any, binding: Binding) -> list[tuple[str, str]]:
    """The encoded ``(name, value)`` pairs of one query (or form body) parameter."""
    style, explode = binding.effective_style(), binding.effective_explode()
    reserved = binding.allow_reserved
    if isinstance(value, list):
        if explode or style == "deepObject":
            return [(_name(name), _enc(scalar_text(v), reserved=reserved)) for v in value]
        joined = _JOINS.get(style, ",").join(_enc(scalar_text(v), reserved=reserved) for v in value)
        return [(_name(name), joined)]
    if isinstance(value, dict):
        if style == "deepObject":
            return _deep(name, value, reserved)
        if explode:
            return [(_name(str(k)), _enc(scalar_text(v), reserved=reserved)) for k, v in value.items()]
        parts = [_enc(p, reserved=reserved) for p in _flat(value)]
        return [(_name(name), _JOINS.get(style, ",").join(parts))]
    return [(_name(name), _enc(scalar_text(value), reserved=reserved))]


def _deep(prefix: str, value: Any, reserved: bool) -> list[tuple[str, str]]:
    """deepObject: ``color[R]=100``; deeper objects nest brackets, arrays index them
    (``f[tags][0]=a``): OpenAPI leaves nesting undefined, and this is what the common query-string
    parsers (qs, Rack, PHP) read back as the same structure."""
    if isinstance(value, dict):
        out: list[tuple[str, str]] = []
        for key, sub in value.items():
            out += _deep(f"{prefix}[{key}]", sub, reserved)
        return out
    if isinstance(value, list):
        out = []
        for i, sub in enumerate(value):
            out += _deep(f"{prefix}[{i}]", sub, reserved)
        return out
    return [(_name(prefix), _enc(scalar_text(value), reserved=reserved))]


def encode_pairs(pairs: list[tuple[str, str]]) -> str:
    """Already-encoded pairs joined into a query string (or a form body)."""
    return "&".join(f"{k}={v}" for k, v in pairs)


def path_value(name: str, value: Any, binding: Binding) -> str:
    """The encoded text that replaces ``{name}`` in a path template."""
    style, explode = binding.style or "simple", binding.explode is True
    if style == "label":
        prefix = "."
        if isinstance(value, list):
            sep = "." if explode else ","
            return prefix + sep.join(_enc(scalar_text(v)) for v in value)
        if isinstance(value, dict):
            if explode:
                return prefix + ".".join(f"{_enc(str(k))}={_enc(scalar_text(v))}" for k, v in value.items())
            return prefix + ",".join(_enc(p) for p in _flat(value))
        return prefix + _enc(scalar_text(value))
    if style == "matrix":
        if isinstance(value, list):
            if explode:
                return "".join(f";{_enc(name)}={_enc(scalar_text(v))}" for v in value)
            return f";{_enc(name)}=" + ",".join(_enc(scalar_text(v)) for v in value)
        if isinstance(value, dict):
            if explode:
                return "".join(f";{_enc(str(k))}={_enc(scalar_text(v))}" for k, v in value.items())
            return f";{_enc(name)}=" + ",".join(_enc(p) for p in _flat(value))
        text = scalar_text(value)
        return f";{_enc(name)}" + (f"={_enc(text)}" if text != "" else "")
    return _simple(value, explode, _enc)


def _simple(value: Any, explode: bool, enc: Any) -> str:
    if isinstance(value, list):
        return ",".join(enc(scalar_text(v)) for v in value)
    if isinstance(value, dict):
        if explode:
            return ",".join(f"{enc(str(k))}={enc(scalar_text(v))}" for k, v in value.items())
        return ",".join(enc(p) for p in _flat(value))
    return str(enc(scalar_text(value)))


def header_value(value: Any, binding: Binding) -> str:
    """A header parameter (style ``simple``; not percent-encoded: header values are text)."""
    return _simple(value, binding.explode is True, lambda s: s)


def cookie_pairs(name: str, value: Any, binding: Binding) -> list[tuple[str, str]]:
    """``(name, value)`` cookies of one cookie parameter (style ``form``)."""
    explode = binding.effective_explode()
    if isinstance(value, list):
        if explode:
            return [(name, scalar_text(v)) for v in value]
        return [(name, ",".join(scalar_text(v) for v in value))]
    if isinstance(value, dict):
        if explode:
            return [(str(k), scalar_text(v)) for k, v in value.items()]
        return [(name, ",".join(_flat(value)))]
    return [(name, scalar_text(value))]
