"""Condense a tool response to what reflection shows the model: its shape and a short excerpt.

When a program fails on a tool's data, the most useful thing to tell the model is what that
data really looked like in this run. Many specs carry no response schema at all, so the model
guessed the keys; a JSON Schema inferred from the actual response (with genson, which merges the
items of an array into one schema) shows the real keys and types in a few hundred characters,
and a short excerpt shows real values. ``required`` is kept only where it says something: when
some items lacked some keys.

Both are bounded so that a huge response cannot flood the prompt: the schema is cut at a depth
and a number of properties per object (with a note saying how many were left out), and the
excerpt shortens long lists to their first items plus ``... (N more)``, long strings to their
head, and wide objects to their first keys, tightening until it fits ``max_chars``.
"""

from __future__ import annotations

import json
from typing import Any

from genson import SchemaBuilder

__all__ = ["shape", "condense", "excerpt", "MAX_PROPERTIES", "MAX_DEPTH"]

#: Properties shown per object in an inferred schema; the rest are counted in a note.
MAX_PROPERTIES = 30
#: Nesting levels of an inferred schema; deeper subschemas keep only their type.
MAX_DEPTH = 6
#: Array items fed to genson; merging more items rarely changes the schema, it only costs time.
MAX_SAMPLED_ITEMS = 200


def _json_safe(value: Any) -> Any:
    """A plain-JSON copy of ``value`` (tuples become lists, unknown objects their ``str``)."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def _sample(value: Any, depth: int = 0) -> Any:
    """Bound the work genson does: keep at most ``MAX_SAMPLED_ITEMS`` items of every array
    (first and last ones, since a trailing item often differs: a summary row, a null)."""
    if depth > 50:
        return None
    if isinstance(value, list):
        items = value
        if len(items) > MAX_SAMPLED_ITEMS:
            half = MAX_SAMPLED_ITEMS // 2
            items = items[:half] + items[-half:]
        return [_sample(v, depth + 1) for v in items]
    if isinstance(value, dict):
        return {k: _sample(v, depth + 1) for k, v in value.items()}
    return value


def _prune(schema: Any, depth: int) -> Any:
    """Cut an inferred schema at ``MAX_DEPTH`` and ``MAX_PROPERTIES`` per object."""
    if not isinstance(schema, dict):
        return schema
    if depth >= MAX_DEPTH:
        kept = {k: schema[k] for k in ("type",) if k in schema}
        if "properties" in schema or "items" in schema or "anyOf" in schema:
            kept["description"] = "deeper levels omitted"
        return kept
    out: dict[str, Any] = {}
    for key, sub in schema.items():
        if key == "properties" and isinstance(sub, dict):
            names = list(sub)
            out["properties"] = {n: _prune(sub[n], depth + 1) for n in names[:MAX_PROPERTIES]}
            if len(names) > MAX_PROPERTIES:
                out["description"] = (
                    f"{len(names) - MAX_PROPERTIES} more properties not shown: "
                    + ", ".join(names[MAX_PROPERTIES:MAX_PROPERTIES + 20])
                    + (" ..." if len(names) > MAX_PROPERTIES + 20 else "")
                )
        elif key == "required" and isinstance(sub, list):
            # "required" only informs when some keys were missing from some items; a list of
            # every key (one object, or uniform items) costs a quarter of the shape for nothing
            props = schema.get("properties")
            if not isinstance(props, dict) or set(sub) != set(props):
                out["required"] = sub[:MAX_PROPERTIES]
        elif key == "items":
            out["items"] = [_prune(s, depth + 1) for s in sub] if isinstance(sub, list) else _prune(sub, depth + 1)
        elif key == "anyOf" and isinstance(sub, list):
            out["anyOf"] = [_prune(s, depth) for s in sub]
        else:
            out[key] = sub
    return out


def shape(value: Any) -> dict[str, Any]:
    """The JSON Schema of ``value`` as genson infers it, bounded in depth and width.

    Arrays are described by one merged item schema, so a 10,000-item list costs as much prompt
    as a 2-item one. The ``$schema`` marker is dropped: it says nothing to the model.
    """
    builder = SchemaBuilder()
    builder.add_object(_sample(_json_safe(value)))
    schema = builder.to_schema()
    schema.pop("$schema", None)
    pruned = _prune(schema, 0)
    return pruned if isinstance(pruned, dict) else {}


def _render(value: Any, items: int, chars: int, keys: int, depth: int) -> str:
    """Compact JSON-like text with long lists, strings and objects cut and the cuts marked."""
    if isinstance(value, str):
        if len(value) > chars:
            return json.dumps(value[:chars], ensure_ascii=False)[:-1] + f'..." (+{len(value) - chars} chars)'
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        if not value:
            return "[]"
        if depth <= 0:
            return f"[... {len(value)} items]"
        parts = [_render(v, items, chars, keys, depth - 1) for v in value[:items]]
        if len(value) > items:
            parts.append(f"... ({len(value) - items} more)")
        return "[" + ", ".join(parts) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        if depth <= 0:
            return "{... " + f"{len(value)} keys" + "}"
        names = list(value)
        parts = [
            f"{json.dumps(str(k), ensure_ascii=False)}: {_render(value[k], items, chars, keys, depth - 1)}"
            for k in names[:keys]
        ]
        if len(names) > keys:
            parts.append(f"... ({len(names) - keys} more keys)")
        return "{" + ", ".join(parts) + "}"
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


#: Settings tried in turn, loosest first: (items per list, chars per string, keys per object, depth).
_LEVELS = (
    (3, 80, 20, 8),
    (2, 60, 12, 6),
    (2, 40, 8, 4),
    (1, 30, 6, 3),
    (1, 20, 4, 2),
)


def excerpt(value: Any, *, max_chars: int = 600) -> str:
    """A short, readable excerpt of ``value`` of at most ``max_chars`` characters."""
    text = ""
    for items, chars, keys, depth in _LEVELS:
        text = _render(value, items, chars, keys, depth)
        if len(text) <= max_chars:
            return text
    return text[: max(0, max_chars - 4)] + " ..."


def condense(value: Any, *, max_chars: int = 600) -> tuple[dict[str, Any] | None, str]:
    """``(shape, excerpt)`` of a tool response. The shape is None only when no schema can be
    inferred (genson refuses the value); the excerpt is always a string."""
    safe = _json_safe(value)
    try:
        schema: dict[str, Any] | None = shape(safe)
    except Exception:  # genson raises bare SchemaGenerationError/TypeError on odd input
        schema = None
    return schema, excerpt(safe, max_chars=max_chars)
