"""A tool's response schema after probing: the declared one kept, what was learnt merged into it.

Specs often declare response schemas that answers cannot teach: formats, titles, descriptions,
lengths, foreign keys, ``uuid | null`` for a field that happened to be ``null`` in every answer.
A schema learnt from a few answers is poorer, so it never replaces a declared one (an OpenAPI
response schema, an MCP ``outputSchema``). ``combine(declared, learnt)`` returns the declared
schema with:

- **fields seen that it does not declare** added (their learnt schema, marked
  ``"x-atc-learnt": true``);
- **observed nullability**: a field declared non-null that answered ``null`` becomes nullable;
- **an example** for a declared leaf that has none (the first value seen, short);
- an ``items`` schema for a list declared without one;

and a note for every disagreement: a field of another type than declared, a declared required
field missing from an answer, a field seen where ``additionalProperties`` is false, null where
null was not allowed. The declared parts themselves are never changed. ``$ref``s into the
schema's own ``$defs``/``definitions`` are followed.

``cap(schema)`` bounds a learnt schema, so that an answer that is a big document (a GET that
returns the API's own spec) cannot make a huge schema: an object whose keys are data (paths,
ids, dates, or more than ``MAP_KEYS`` of them) becomes a map (``additionalProperties`` with its
values merged), nesting deeper than ``MAX_DEPTH`` is cut, and the whole is cut further until its
JSON is at most ``MAX_BYTES`` (cut places say ``"x-atc-truncated": true``).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from genson import SchemaBuilder

__all__ = ["combine", "cap", "MAX_BYTES", "MAX_DEPTH", "MAP_KEYS"]

#: The most a learnt schema may weigh, as JSON.
MAX_BYTES = 32_000
#: Nesting kept in a learnt schema.
MAX_DEPTH = 10
#: An object with more keys than this is a map, whatever its keys look like.
MAP_KEYS = 48
_DATA_KEY = re.compile(r"^(/|\d+$|[0-9a-f]{8}-[0-9a-f]{4}-|\d{4}-\d{2}-\d{2}|[0-9a-f]{16,}$)", re.IGNORECASE)
_MAX_NOTES = 40


# -- capping -------------------------------------------------------------------------------------


def _is_map(props: dict[str, Any]) -> bool:
    keys = list(props)
    if len(keys) > MAP_KEYS:
        return True
    data = sum(1 for k in keys if _DATA_KEY.match(str(k)))
    return len(keys) >= 3 and data >= 0.8 * len(keys)


def _merged(schemas: list[Any]) -> dict[str, Any]:
    builder = SchemaBuilder()
    try:
        for schema in schemas[:200]:
            if isinstance(schema, dict):
                builder.add_schema(schema)
        out: dict[str, Any] = builder.to_schema()
    except Exception:  # genson refuses shapes it cannot merge: keep nothing rather than fail
        return {}
    out.pop("$schema", None)
    return out


def _cap(node: Any, depth: int, limit: int) -> Any:
    if not isinstance(node, dict):
        return node
    if depth >= limit:
        kept = {k: node[k] for k in ("type",) if k in node and isinstance(node[k], str | list)}
        return {**kept, "x-atc-truncated": True} if any(k in node for k in ("properties", "items", "anyOf")) \
            else node
    out = dict(node)
    props = node.get("properties")
    if isinstance(props, dict) and props:
        if _is_map(props):
            out.pop("properties", None)
            out.pop("required", None)
            out["additionalProperties"] = _cap(_merged(list(props.values())), depth + 1, limit)
            out["x-atc-keys"] = [str(k) for k in list(props)[:5]]
        else:
            out["properties"] = {k: _cap(v, depth + 1, limit) for k, v in props.items()}
    if isinstance(node.get("items"), dict):
        out["items"] = _cap(node["items"], depth + 1, limit)
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list):
            out[key] = [_cap(v, depth + 1, limit) for v in node[key]]
    return out


def cap(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """``schema`` bounded (see the module docstring)."""
    if schema is None:
        return None
    limit = MAX_DEPTH
    out = _cap(schema, 0, limit)
    while len(json.dumps(out, default=str)) > MAX_BYTES and limit > 1:
        limit = max(1, limit // 2 if limit > 4 else limit - 1)
        out = _cap(schema, 0, limit)
    if len(json.dumps(out, default=str)) > MAX_BYTES:
        out = {"type": schema.get("type", "object"), "x-atc-truncated": True}
    result: dict[str, Any] = out
    return result


# -- combining -----------------------------------------------------------------------------------


def _types(node: dict[str, Any]) -> set[str]:
    t = node.get("type")
    out = {t} if isinstance(t, str) else {x for x in t if isinstance(x, str)} if isinstance(t, list) else set()
    for key in ("anyOf", "oneOf"):
        for option in node.get(key) or []:
            if isinstance(option, dict):
                out |= _types(option)
    if "const" in node and node["const"] is None or isinstance(node.get("enum"), list) and None in node["enum"]:
        out.add("null")
    if node.get("nullable") is True:
        out.add("null")
    return out


class _Combiner:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        if len(self.notes) < _MAX_NOTES and text not in self.notes:
            self.notes.append(text)

    def resolve(self, node: Any, depth: int = 0) -> Any:
        """``node`` with a local ``$ref`` followed (the target is the shared definition)."""
        ref = node.get("$ref") if isinstance(node, dict) else None
        if not isinstance(ref, str) or not ref.startswith("#/") or depth > 20:
            return node
        target: Any = self.root
        for part in ref[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
        return self.resolve(target, depth + 1) if isinstance(target, dict) else node

    def variant(self, node: dict[str, Any], kind: str) -> dict[str, Any] | None:
        """The declared alternative that describes values of JSON type ``kind``."""
        for key in ("anyOf", "oneOf"):
            for option in node.get(key) or []:
                option = self.resolve(option)
                if isinstance(option, dict) and kind in _types(option) | ({"number"} if "integer" in _types(option)
                                                                          else set()):
                    return option
        return node if kind in _types(node) or not _types(node) else None

    def merge(self, declared: dict[str, Any], learnt: dict[str, Any], where: str, sample: Any, depth: int = 0) -> None:
        if depth > 30:
            return
        declared = self.resolve(declared)
        seen = _types(learnt)
        allowed = _types(declared)
        if "null" in seen and allowed and "null" not in allowed:
            self.note(f"{where}: null seen, the declared schema does not allow it (now nullable)")
            self._nullable(declared)
        for kind in seen - {"null"}:
            ok = not allowed or kind in allowed or (kind == "integer" and "number" in allowed)
            if not ok:
                self.note(f"{where}: declared {'/'.join(sorted(allowed - {'null'})) or '?'}, "
                          f"seen {kind} (the declared type is kept)")
        obj = self.variant(declared, "object")
        lprops = self._learnt_part(learnt, "properties")
        if obj is not None and isinstance(lprops, dict):
            self._object(obj, learnt, lprops, where, sample, depth)
        arr = self.variant(declared, "array")
        litems = self._learnt_part(learnt, "items")
        if arr is not None and isinstance(litems, dict):
            first = sample[0] if isinstance(sample, list) and sample else None
            ditems = arr.get("items")
            if isinstance(ditems, dict) and ditems:
                self.merge(ditems, litems, f"{where}[]", first, depth + 1)
            elif "items" not in arr:
                arr["items"] = {**cap(litems), "x-atc-learnt": True}  # type: ignore[dict-item]
        if not (seen - {"null"}) & {"object", "array"} and _leaf(sample) and depth <= 4 \
                and "example" not in declared and "examples" not in declared and declared.get("type"):
            declared["examples"] = [_short(sample)]

    def _learnt_part(self, learnt: dict[str, Any], key: str) -> Any:
        if key in learnt:
            return learnt[key]
        for option in learnt.get("anyOf") or []:
            if isinstance(option, dict) and key in option:
                return option[key]
        return None

    def _object(self, obj: dict[str, Any], learnt: dict[str, Any], lprops: dict[str, Any], where: str,
                sample: Any, depth: int) -> None:
        props = obj.get("properties")
        if not isinstance(props, dict):
            if isinstance(obj.get("additionalProperties"), dict):
                return  # a declared map: its values are described already
            props = obj["properties"] = {}
        closed = obj.get("additionalProperties") is False
        values = sample if isinstance(sample, dict) else {}
        for name, sub in lprops.items():
            at = f"{where}.{name}"
            if name in props and isinstance(props[name], dict):
                self.merge(props[name], sub, at, values.get(name), depth + 1)
            elif isinstance(sub, dict):
                if closed:
                    self.note(f"{at}: seen, although the declared schema allows no other fields")
                else:
                    self.note(f"{at}: seen, not declared (added)")
                props[name] = {**(cap(sub) or {}), "x-atc-learnt": True}
        learnt_required = set(self._learnt_part(learnt, "required") or [])
        for name in obj.get("required") or []:
            if name not in learnt_required:
                self.note(f"{where}.{name}: declared required, missing from an answer")

    def _nullable(self, node: dict[str, Any]) -> None:
        t = node.get("type")
        if isinstance(t, str):
            node["type"] = [t, "null"]
        elif isinstance(t, list):
            node["type"] = [*t, "null"]
        elif isinstance(node.get("anyOf"), list):
            node["anyOf"] = [*node["anyOf"], {"type": "null"}]
        elif isinstance(node.get("oneOf"), list):
            node["oneOf"] = [*node["oneOf"], {"type": "null"}]
        elif isinstance(node.get("enum"), list):
            node["enum"] = [*node["enum"], None]


def _leaf(value: Any) -> bool:
    return value is not None and not isinstance(value, dict | list)


def _short(value: Any) -> Any:
    return value[:79] + "\u2026" if isinstance(value, str) and len(value) > 80 else value


def combine(declared: dict[str, Any] | None, learnt: dict[str, Any] | None,
            sample: Any = None) -> tuple[dict[str, Any] | None, list[str]]:
    """(the response schema after probing, the disagreements found): see the module docstring.
    ``sample`` is one answer, for the examples of declared leaves."""
    if not isinstance(declared, dict) or not declared:
        return cap(learnt), []
    if not isinstance(learnt, dict):
        return declared, []
    out = copy.deepcopy(declared)
    combiner = _Combiner(out)
    combiner.merge(out, learnt, "$", sample)
    return out, combiner.notes
