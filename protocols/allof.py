"""``allOf`` folded into one schema, conjunctively: what the merged schema accepts is what every
member accepts.

Specs use ``allOf`` to extend a base (``allOf: [{$ref: Base}, {properties: {...}}]``) and to add
constraints to a referenced type (``allOf: [{$ref: Id}], maximum: 100``). Everything downstream
(the renderer, the gateway's validation, ``atc mock``'s generator) reads one flat schema, so the
import folds the members together. Folding must not lose a constraint: a property that two
members describe is the conjunction of both (the base's ``maximum`` survives an extension that
re-describes the property), lower bounds take the largest value, upper bounds the smallest,
``enum`` and ``type`` their intersection, ``required`` the union. Annotations (``description``,
``title``, ``example``...) are not constraints: the schema's own win over its members', and a
later member's over an earlier one's.

What cannot be combined into one keyword (two different ``pattern``\\ s, two ``oneOf`` lists, two
``const`` values) is kept in a residual ``allOf`` holding the later keywords, so validation still
checks every one of them; an empty ``type``/``enum`` intersection is kept the same way (such a
schema accepts nothing, which is what the spec said).

The name of a referenced component (``NAME_KEY``, set by :mod:`protocols.refs`) survives only
when one member is named and the others add no properties: an extended base is another type.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["merge_all_of", "conjoin", "NAME_KEY"]

#: Where the import keeps the name of the component a schema was referenced by (``WorkPoolFilter``).
NAME_KEY = "x-atc-ref"

_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains")
_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains")
#: Keywords that describe rather than constrain: later (or the schema's own) wins.
_ANNOTATIONS = frozenset({"description", "title", "example", "examples", "default", "deprecated", "readOnly",
                          "writeOnly", "xml", "externalDocs", "discriminator", "$comment", "contentMediaType",
                          "contentEncoding"})


def merge_all_of(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its (already resolved) ``allOf`` members folded in (see the module docstring)."""
    members = [m for m in schema.get("allOf") or [] if isinstance(m, dict)]
    own = {k: v for k, v in schema.items() if k != "allOf"}
    parts = [merge_all_of(m) if isinstance(m.get("allOf"), list) else m for m in members]
    named = [p for p in parts if NAME_KEY in p]
    merged: dict[str, Any] = {}
    residual: list[dict[str, Any]] = []
    for part in parts + [own]:
        merged = _conjoin(merged, part, residual)
    merged.pop(NAME_KEY, None)
    if NAME_KEY in own:
        merged[NAME_KEY] = own[NAME_KEY]
    elif len(named) == 1 and not any("properties" in p for p in parts + [own] if p is not named[0]):
        merged[NAME_KEY] = named[0][NAME_KEY]
    if "properties" in merged:
        merged.setdefault("type", "object")
    if residual:
        merged["allOf"] = residual
    return merged


def conjoin(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """One schema that accepts what both ``a`` and ``b`` accept (``b``'s annotations win)."""
    residual: list[dict[str, Any]] = []
    out = _conjoin(dict(a), b, residual)
    if residual:
        out["allOf"] = [*(out.get("allOf") or []), *residual] if isinstance(out.get("allOf"), list) else residual
    return out


def _conjoin(merged: dict[str, Any], part: dict[str, Any], residual: list[dict[str, Any]]) -> dict[str, Any]:
    """Fold ``part`` into ``merged`` (in place, returned); what cannot be folded goes to ``residual``."""
    for key, value in part.items():
        if key not in merged:
            merged[key] = value
            continue
        have = merged[key]
        if key in _ANNOTATIONS or key == NAME_KEY or key.startswith("x-"):
            merged[key] = value
        elif have == value:
            continue
        elif key == "properties" and isinstance(have, dict) and isinstance(value, dict):
            props = dict(have)
            for name, sub in value.items():
                old = props.get(name)
                props[name] = conjoin(old, sub) if isinstance(old, dict) and isinstance(sub, dict) else sub
            merged[key] = props
        elif key == "required" and isinstance(have, list) and isinstance(value, list):
            merged[key] = list(dict.fromkeys([*have, *value]))
        elif key in _LOWER and _number(have) and _number(value):
            merged[key] = max(have, value)
        elif key in _UPPER and _number(have) and _number(value):
            merged[key] = min(have, value)
        elif key == "type":
            both = _types(have, value)
            if both is None:
                residual.append({key: value})
            else:
                merged[key] = both
        elif key == "enum" and isinstance(have, list) and isinstance(value, list):
            common = [v for v in have if v in value]
            if common:
                merged[key] = common
            else:
                residual.append({key: value})
        elif key == "uniqueItems":
            merged[key] = have is True or value is True
        elif key == "multipleOf" and isinstance(have, int) and isinstance(value, int) \
                and not isinstance(have, bool) and not isinstance(value, bool):
            merged[key] = have * value // math.gcd(have, value)
        elif key in ("items", "additionalProperties", "unevaluatedProperties", "propertyNames") \
                and isinstance(have, dict | bool) and isinstance(value, dict | bool):
            merged[key] = _conjoin_schemas(have, value)
        else:
            residual.append({key: value})
    return merged


def _conjoin_schemas(a: dict[str, Any] | bool, b: dict[str, Any] | bool) -> dict[str, Any] | bool:
    if a is False or b is False:
        return False
    if a is True or a == {}:
        return b
    if b is True or b == {}:
        return a
    assert isinstance(a, dict) and isinstance(b, dict)
    return conjoin(a, b)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _types(a: Any, b: Any) -> str | list[str] | None:
    """The intersection of two ``type`` values (``integer`` is a ``number``), None when empty."""
    left = [a] if isinstance(a, str) else list(a) if isinstance(a, list) else None
    right = [b] if isinstance(b, str) else list(b) if isinstance(b, list) else None
    if left is None or right is None:
        return None
    out = []
    for t in left:
        if t in right:
            out.append(t)
        elif t == "number" and "integer" in right:
            out.append("integer")
        elif t == "integer" and "number" in right:
            out.append("integer")
    out = list(dict.fromkeys(out))
    if not out:
        return None
    return out[0] if len(out) == 1 else out
