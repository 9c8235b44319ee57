"""Whether any value can meet a schema, and whether the one ``atc mock`` made does.

The generator meets the keywords it knows together (bounds with formats, ``uniqueItems`` with
``minItems``, ``minProperties`` with ``patternProperties``...). Two things can still leave an
answer outside its schema, and the answer then says so in ``X-Atc-Mock-Unsatisfiable: <where>:
<why>`` rather than let a client find out:

- a schema that no value satisfies: ``minLength: 5`` with ``maxLength: 3``, an ``email`` of at
  most 4 characters, more ``minItems`` than a ``uniqueItems`` enum has values, a required property
  that ``additionalProperties: false`` does not allow, an ``enum`` none of whose values has the
  declared type. :func:`impossible` finds these by walking the schema once (cached per schema
  object, bounded in nodes and depth);
- keywords the generator does not steer by (``not``, ``if``/``then``, ``contains``,
  ``dependentRequired``, a second ``pattern`` kept in a residual ``allOf``...): only for schemas
  that have one (:func:`risky`, cached) is the generated value validated (:func:`unmet`), so a
  common answer pays nothing for the check.
"""

from __future__ import annotations

import math
from typing import Any

from atc.mock.entities import schema_type
from atc.mock.request_checks import first_error, is_valid
from atc.mock.values import SHORTEST
from protocols.perschema import PerSchema

__all__ = ["HEADER", "impossible", "risky", "unmet", "verdict"]

HEADER = "X-Atc-Mock-Unsatisfiable"
#: Keywords the generator does not steer by: a value of a schema that has one is validated.
_RISKY = frozenset({"not", "if", "then", "else", "contains", "dependentRequired", "dependentSchemas",
                    "dependencies", "allOf", "unevaluatedProperties", "unevaluatedItems", "propertyNames",
                    "patternProperties", "minContains", "maxContains"})
_MAX_NODES = 2000
_MAX_DEPTH = 16

def impossible(schema: Any) -> str | None:
    """Why no value can meet ``schema`` (``<where>: <why>``), or None when nothing says so."""
    if not isinstance(schema, dict) or not schema:
        return None
    verdict: str | None = _IMPOSSIBLE(schema)
    return verdict


def risky(schema: Any) -> bool:
    """Whether ``schema`` has a keyword the generator does not steer by (anywhere inside)."""
    if not isinstance(schema, dict) or not schema:
        return False
    risky: bool = _IS_RISKY(schema)
    return risky


def unmet(schema: Any, value: Any) -> str | None:
    """Why ``value`` does not meet ``schema``, checked only for a risky schema (else None)."""
    return first_error(schema, value) if risky(schema) else None


def verdict(schema: Any, value: Any) -> str | None:
    """What to put in ``HEADER`` for an answer generated from ``schema``, or None."""
    reason = impossible(schema) or unmet(schema, value)
    return reason.encode("ascii", "replace").decode()[:300] if reason else None


def _has_risky(schema: dict[str, Any]) -> bool:
    stack: list[tuple[Any, int]] = [(schema, 0)]
    seen = 0
    while stack and seen < _MAX_NODES:
        node, depth = stack.pop()
        seen += 1
        if isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))
            continue
        if not isinstance(node, dict) or depth > _MAX_DEPTH:
            continue
        if _RISKY.intersection(node):
            return True
        for key, value in node.items():
            if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                stack.extend((v, depth + 1) for v in value.values())
            elif key in ("items", "additionalProperties", "anyOf", "oneOf", "prefixItems"):
                stack.append((value, depth + 1))
    return False


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class _Walk:
    """One walk over a schema; the first contradiction found wins."""

    def __init__(self) -> None:
        self.left = _MAX_NODES

    def node(self, schema: Any, where: str, depth: int) -> str | None:
        if not isinstance(schema, dict) or depth > _MAX_DEPTH:
            return None
        self.left -= 1
        if self.left < 0:
            return None
        if schema.get("not") == {}:
            return f"{where or '/'}: 'not: {{}}' allows no value"
        for check in (self._types, self._enum, self._numbers, self._strings, self._arrays, self._objects):
            reason = check(schema)
            if reason:
                return f"{where or '/'}: {reason}"
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                reasons = [self.node(b, f"{where}/{key}/{i}", depth + 1) for i, b in enumerate(branches)]
                if all(reasons):
                    return f"{where or '/'}: no branch of {key} can be met ({reasons[0]})"
        props = schema.get("properties")
        if isinstance(props, dict):
            for name, sub in props.items():
                reason = self.node(sub, f"{where}/{name}", depth + 1)
                if reason:
                    return reason
        items = schema.get("items")
        if isinstance(items, dict):
            return self.node(items, f"{where}/items", depth + 1)
        return None

    @staticmethod
    def _types(schema: dict[str, Any]) -> str | None:
        kinds = schema.get("type")
        own = {kinds} if isinstance(kinds, str) else set(kinds) if isinstance(kinds, list) else None
        for member in schema.get("allOf") or []:
            other = member.get("type") if isinstance(member, dict) else None
            theirs = {other} if isinstance(other, str) else set(other) if isinstance(other, list) else None
            if own is None or theirs is None:
                continue
            common = own & theirs | ({"integer"} if ("number" in own and "integer" in theirs)
                                     or ("integer" in own and "number" in theirs) else set())
            if not common:
                return f"type {sorted(own)} and type {sorted(theirs)} have no value in common"
        if "const" in schema and own is not None and not is_valid({"type": kinds}, schema["const"]):
            return f"const {schema['const']!r} is not of type {kinds}"
        return None

    @staticmethod
    def _enum(schema: dict[str, Any]) -> str | None:
        enum = schema.get("enum")
        if not isinstance(enum, list):
            return None
        rest = {k: v for k, v in schema.items() if k in ("type", "minimum", "maximum", "minLength", "maxLength",
                                                         "exclusiveMinimum", "exclusiveMaximum", "multipleOf")}
        if not enum or (rest and not any(is_valid(rest, e) for e in enum)):
            return f"no value of enum {enum[:5]!r} meets {rest}"
        return None

    @staticmethod
    def _numbers(schema: dict[str, Any]) -> str | None:
        if schema_type(schema) not in ("integer", "number"):
            return None
        lo, hi = _number(schema.get("minimum")), _number(schema.get("maximum"))
        xlo, xhi = _number(schema.get("exclusiveMinimum")), _number(schema.get("exclusiveMaximum"))
        lo_x = hi_x = False
        if xlo is not None and (lo is None or xlo >= lo):
            lo, lo_x = xlo, True
        if xhi is not None and (hi is None or xhi <= hi):
            hi, hi_x = xhi, True
        if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_x or hi_x))):
            return f"the lower bound {lo:g} is not below the upper bound {hi:g}"
        step = _number(schema.get("multipleOf"))
        integer = schema_type(schema) == "integer"
        if lo is not None and hi is not None and (integer or step):
            first = math.floor(lo) + 1 if lo_x and lo.is_integer() else math.ceil(lo)
            last = math.ceil(hi) - 1 if hi_x and hi.is_integer() else math.floor(hi)
            if integer and first > last:
                return f"no integer lies between {lo:g} and {hi:g}"
            if step and step > 0 and (integer or float(step).is_integer()) and hi - lo < 1e9:
                k_lo, k_hi = math.ceil(lo / step), math.floor(hi / step)
                if not any((lo < k * step or (k * step == lo and not lo_x)) and
                           (k * step < hi or (k * step == hi and not hi_x)) for k in range(k_lo, min(k_hi, k_lo + 3) + 1)):
                    return f"no multiple of {step:g} lies between {lo:g} and {hi:g}"
        return None

    @staticmethod
    def _strings(schema: dict[str, Any]) -> str | None:
        if schema_type(schema) != "string":
            return None
        lo, hi = _number(schema.get("minLength")), _number(schema.get("maxLength"))
        if lo is not None and hi is not None and lo > hi:
            return f"minLength {lo:g} is above maxLength {hi:g}"
        fmt = schema.get("format")
        shortest = SHORTEST.get(fmt) if isinstance(fmt, str) else None
        if shortest is not None and hi is not None and len(shortest) > hi:
            return f"no {fmt} is at most {hi:g} characters long (the shortest has {len(shortest)})"
        return None

    @staticmethod
    def _arrays(schema: dict[str, Any]) -> str | None:
        if schema_type(schema) != "array":
            return None
        lo, hi = _number(schema.get("minItems")), _number(schema.get("maxItems"))
        if lo is not None and hi is not None and lo > hi:
            return f"minItems {lo:g} is above maxItems {hi:g}"
        items = schema.get("items")
        prefix = schema.get("prefixItems")
        if items is False and lo is not None and lo > (len(prefix) if isinstance(prefix, list) else 0):
            return f"minItems {lo:g} but no item beyond prefixItems is allowed"
        if schema.get("uniqueItems") is True and isinstance(items, dict) and lo is not None:
            choices = _finite(items)
            if choices is not None and choices < lo:
                return f"minItems {lo:g} with uniqueItems, but the items can take only {choices} distinct values"
        return None

    @staticmethod
    def _objects(schema: dict[str, Any]) -> str | None:
        if schema_type(schema) != "object":
            return None
        lo, hi = _number(schema.get("minProperties")), _number(schema.get("maxProperties"))
        if lo is not None and hi is not None and lo > hi:
            return f"minProperties {lo:g} is above maxProperties {hi:g}"
        raw_props = schema.get("properties")
        props: dict[str, Any] = raw_props if isinstance(raw_props, dict) else {}
        required = [r for r in schema.get("required") or [] if isinstance(r, str)]
        if hi is not None and len(required) > hi:
            return f"{len(required)} required properties but maxProperties {hi:g}"
        closed = schema.get("additionalProperties") is False and not schema.get("patternProperties")
        if closed:
            missing = [r for r in required if r not in props]
            if missing:
                return f"required {missing[0]!r} is not a property and additionalProperties is false"
            if lo is not None and lo > len(props):
                return f"minProperties {lo:g} but only {len(props)} properties are allowed"
        return None


def _finite(items: dict[str, Any]) -> int | None:
    """How many distinct values an item schema allows, when that is a small known number."""
    if "const" in items:
        return 1
    enum = items.get("enum")
    if isinstance(enum, list):
        return len({repr(e) for e in enum if is_valid(items, e)})
    if schema_type(items) == "boolean":
        return 2
    if schema_type(items) == "null":
        return 1
    return None


# Computed once per schema object: the walks look at the whole schema.
_IMPOSSIBLE: PerSchema[str | None] = PerSchema(lambda schema: _Walk().node(schema, "", 0), most=8192)
_IS_RISKY: PerSchema[bool] = PerSchema(_has_risky, most=8192)
