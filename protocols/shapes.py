"""JSON Schemas as short text: the types, shapes and field lists that protocols are written with.

- :func:`type_label` -- a parameter's Python-like type: ``str``, ``list[int]``, ``"a"|"b"``, and
  for an object the name of the component it was referenced by (``WorkPoolFilter|None``);
- :func:`response_shape` -- what a call returns, on one line: ``{results: [{id: int, ...}], count: int}``;
- :func:`input_shape` -- what a structured argument must look like: ``{name: {any_: [str]},
  operator: "and_"|"or_"}``. It differs from a response shape where a caller needs it to: a
  ``null`` branch is dropped (None means "leave it out"), an ``anyOf``/``oneOf`` shows its useful
  branches, and in an object that has required fields the optional ones are marked ``?``;
- :func:`field_lines` / :func:`input_field_lines` -- one line per field, with its path
  (``results[].id``, ``work_pools.name.any_``), type and description, for the full protocol.

Depth and width are bounded everywhere (``...`` marks what was cut); the name of a component
(kept by the import under ``NAME_KEY``) stands for an object cut for depth.
"""

from __future__ import annotations

import json
from typing import Any

from protocols.allof import NAME_KEY

__all__ = ["type_label", "response_shape", "input_shape", "field_lines", "input_field_lines", "schema_name",
           "object_branches", "is_structured", "one_line", "without_null"]

_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None",
            "object": "dict", "array": "list"}


def one_line(text: str, limit: int) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3].rstrip() + "..."


def _variants(schema: dict[str, Any]) -> list[Any] | None:
    for key in ("oneOf", "anyOf"):
        v = schema.get(key)
        if isinstance(v, list) and v:
            return v
    return None


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and (schema.get("type") == "null" or schema.get("enum") == [None]
                                         or ("const" in schema and schema["const"] is None))


def _recursive_name(schema: dict[str, Any]) -> str | None:
    desc = schema.get("description")
    if isinstance(desc, str) and desc.startswith("(recursive: ") and desc.endswith(")"):
        return desc[len("(recursive: "):-1]
    return None


def _is_object(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or isinstance(schema.get("properties"), dict)


def schema_name(schema: Any) -> str | None:
    """The component name an object schema was referenced by (``WorkPoolFilter``), else None.
    Only objects are named: ``list[str]`` says more than the name of a list type."""
    if not isinstance(schema, dict):
        return None
    name = schema.get(NAME_KEY)
    if isinstance(name, str) and name and _is_object(schema):
        return name
    return _recursive_name(schema)


def type_label(schema: Any) -> str:
    """A short Python-like type for a parameter schema: ``str``, ``int``, ``list[str]``, ``"a"|"b"``,
    an object's component name (``WorkPoolFilter``), ``dict`` for an unnamed object."""
    if not isinstance(schema, dict) or not schema:
        return "any"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        shown = "|".join(json.dumps(e, ensure_ascii=False) for e in enum[:6])
        return shown + ("|..." if len(enum) > 6 else "")
    variants = _variants(schema)
    if variants and "properties" not in schema:
        return "|".join(dict.fromkeys(type_label(v) for v in variants[:3]))
    name = schema_name(schema)
    if name:
        return name
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(_SCALARS.get(str(k), str(k)) for k in kind[:3])
    if kind == "array":
        items = schema.get("items")
        return f"list[{type_label(items)}]" if isinstance(items, dict) and items else "list"
    if kind is None and isinstance(schema.get("properties"), dict):
        return "dict"
    return _SCALARS.get(str(kind), str(kind) if kind else "any")


def _key(name: str) -> str:
    return name if name.isidentifier() else json.dumps(name, ensure_ascii=False)


# -- responses ---------------------------------------------------------------------------------


def response_shape(schema: Any, *, max_depth: int = 3, max_props: int = 8) -> str:
    """A JSON Schema condensed to a one-line shape; ``...`` marks what depth or width limits cut."""
    return _shape(schema, max_depth, max_props, 0)


def _shape(schema: Any, max_depth: int, max_props: int, depth: int) -> str:
    if not isinstance(schema, dict) or not schema:
        return "any"
    desc = schema.get("description")
    if isinstance(desc, str) and desc.startswith("(recursive: "):
        return desc[len("(recursive: "):-1] if desc.endswith(")") else "{...}"
    variants = _variants(schema)
    if variants and "properties" not in schema:
        return " | ".join(dict.fromkeys(_shape(v, max_depth, max_props, depth) for v in variants[:2])) + \
            (" | ..." if len(variants) > 2 else "")
    kind = schema.get("type")
    props = schema.get("properties")
    if kind == "array" or (kind is None and "items" in schema):
        items = schema.get("items")
        if depth >= max_depth:
            return "[...]"
        return f"[{_shape(items, max_depth, max_props, depth + 1)}]" if isinstance(items, dict) and items else "[]"
    if isinstance(props, dict) and props:
        if depth >= max_depth:
            return "{...}"
        names = list(props)
        parts = [f"{_key(n)}: {_shape(props[n], max_depth, max_props, depth + 1)}" for n in names[:max_props]]
        if len(names) > max_props:
            parts.append("...")
        return "{" + ", ".join(parts) + "}"
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and extra:
        if depth >= max_depth:
            return "{...}"
        return "{str: " + _shape(extra, max_depth, max_props, depth + 1) + "}"
    if kind == "object" or kind is None and props is not None:
        return "{}" if kind == "object" else "any"
    return _plain_label(schema)


def _plain_label(schema: dict[str, Any]) -> str:
    """``type_label`` of a scalar-ish schema, without the component name (shapes show structure)."""
    if NAME_KEY in schema:
        schema = {k: v for k, v in schema.items() if k != NAME_KEY}
    return type_label(schema)


def field_lines(schema: Any, prefix: str = "", *, depth: int = 0, max_depth: int = 8) -> list[str]:
    """One line per field of a response schema: ``results[].id: int - the id``."""
    if not isinstance(schema, dict) or depth > max_depth:
        return []
    kind = schema.get("type")
    if kind == "array" or (kind is None and "items" in schema):
        return field_lines(schema.get("items"), prefix + "[]", depth=depth + 1, max_depth=max_depth)
    variants = _variants(schema)
    if variants and "properties" not in schema:
        out: list[str] = []
        for v in variants[:3]:
            out.extend(field_lines(v, prefix, depth=depth + 1, max_depth=max_depth))
        return list(dict.fromkeys(out))
    props = schema.get("properties")
    if not isinstance(props, dict):
        return []
    out = []
    for name, sub in props.items():
        path = f"{prefix}.{name}" if prefix else str(name)
        label = response_shape(sub, max_depth=0) if isinstance(sub, dict) else "any"
        if label in ("{...}", "[...]"):
            label = "object" if label == "{...}" else "list"
        desc = sub.get("description") if isinstance(sub, dict) else None
        line = f"{path}: {label}"
        if isinstance(desc, str) and desc.strip() and not desc.startswith("("):
            line += f" - {one_line(desc, 120)}"
        out.append(line)
        out.extend(field_lines(sub, path, depth=depth + 1, max_depth=max_depth))
    return out


# -- inputs ------------------------------------------------------------------------------------


def _useful(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The branches a value may take, without ``null`` ones (for an input, None means "leave it
    out"); a schema without ``anyOf``/``oneOf`` is its own single branch."""
    variants = _variants(schema)
    if not variants or "properties" in schema:
        return [schema]
    base = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
    out = []
    for v in variants:
        if isinstance(v, dict) and not _is_null(v):
            out.extend(_useful({**base, **v} if base and not _variants(v) else v))
    return out


def _object_paths(schema: Any, suffix: str = "") -> list[tuple[dict[str, Any], str]]:
    """The object schemas (with properties) a value of ``schema`` may be, each with the path step
    that reaches it: ``""`` for the value itself or an ``anyOf``/``oneOf`` branch of it, ``[]``
    for array items, ``.*`` for the values of a map."""
    if not isinstance(schema, dict):
        return []
    out: list[tuple[dict[str, Any], str]] = []
    for branch in _useful(schema):
        if isinstance(branch.get("properties"), dict) and branch["properties"]:
            out.append((branch, suffix))
        elif isinstance(branch.get("items"), dict):
            out.extend(_object_paths(branch["items"], suffix + "[]"))
        elif isinstance(branch.get("additionalProperties"), dict):
            out.extend(_object_paths(branch["additionalProperties"], suffix + ".*"))
    return out


def object_branches(schema: Any) -> list[dict[str, Any]]:
    """The object schemas (with properties) a value of ``schema`` may be, looking through
    ``anyOf``/``oneOf``, array items and map values."""
    return [branch for branch, _ in _object_paths(schema)]


def is_structured(schema: Any) -> bool:
    """Whether a value of ``schema`` holds objects whose fields a caller must know."""
    return bool(object_branches(schema))


def input_shape(schema: Any, *, max_depth: int = 3, max_props: int = 12) -> str:
    """What a structured argument must look like, on one line (see the module docstring)."""
    return _input(schema, max_depth, max_props, 0)


def _input(schema: Any, max_depth: int, max_props: int, depth: int) -> str:
    if not isinstance(schema, dict) or not schema:
        return "any"
    recursive = _recursive_name(schema)
    if recursive:
        return recursive
    branches = _useful(schema)
    if not branches:
        return "None"
    if len(branches) > 1:
        shown = list(dict.fromkeys(_input(b, max_depth, max_props, depth) for b in branches[:3]))
        return " | ".join(shown) + (" | ..." if len(branches) > 3 else "")
    schema = branches[0]
    if "enum" in schema or "const" in schema:
        return type_label({k: schema[k] for k in ("enum",) if k in schema}) if "enum" in schema \
            else json.dumps(schema["const"], ensure_ascii=False)
    props = schema.get("properties")
    kind = schema.get("type")
    if isinstance(props, dict) and props:
        if depth >= max_depth:
            return schema_name(schema) or "{...}"
        required = [n for n in schema.get("required") or [] if n in props]
        names = required + [n for n in props if n not in required]
        mark = "?" if required else ""
        parts = [f"{_key(n)}{'' if n in required else mark}: {_input(props[n], max_depth, max_props, depth + 1)}"
                 for n in names[:max_props]]
        if len(names) > max_props:
            parts.append("...")
        return "{" + ", ".join(parts) + "}"
    if kind == "array" or (kind is None and "items" in schema):
        items = schema.get("items")
        return f"[{_input(items, max_depth, max_props, depth)}]" if isinstance(items, dict) and items else "list"
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and extra:
        if depth >= max_depth:
            return "{...}"
        return "{str: " + _input(extra, max_depth, max_props, depth + 1) + "}"
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        return type_label({**schema, "type": kinds[0] if len(kinds) == 1 else kinds}) if kinds else "None"
    return _plain_label(schema)


def _facts(schema: dict[str, Any], required: bool) -> list[str]:
    """The facts of one input field besides its type: required, default, format, bounds."""
    bits = ["required"] if required else []
    if "default" in schema and schema["default"] is not None:
        bits.append(f"default {one_line(json.dumps(schema['default'], ensure_ascii=False), 40)}")
    branch = without_null(schema)
    items = branch.get("items")
    fmt = branch.get("format")
    if fmt is None and isinstance(items, dict):
        fmt = items.get("format")
    if isinstance(fmt, str) and fmt:
        bits.append(f"format {fmt}")
    for key, word in (("minimum", ">="), ("maximum", "<="), ("minLength", "length >="),
                      ("maxLength", "length <="), ("minItems", "items >="), ("maxItems", "items <=")):
        value = branch.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            bits.append(f"{word} {value}")
    return bits


def input_field_lines(schema: Any, prefix: str, *, max_depth: int = 5, limit: int = 100) -> list[str]:
    """One line per field of a structured argument, with its path from the argument:
    ``work_pools.name.any_: list[str] - A list of work pool names to include``. At most ``limit``
    lines (the last then says how many were left out) and ``max_depth`` levels of objects."""
    out: list[str] = []
    left = _walk_inputs(schema, prefix, 0, max_depth, limit, out, set())
    if left:
        out.append(f"... {left} more fields")
    return out


def _walk_inputs(schema: Any, prefix: str, depth: int, max_depth: int, limit: int, out: list[str],
                 seen: set[str]) -> int:
    """Append the field lines of ``schema`` under ``prefix``; returns how many did not fit."""
    left = 0
    for branch, step in _object_paths(schema):
        props = branch["properties"]
        required = set(branch.get("required") or [])
        for name, sub in props.items():
            path = f"{prefix}{step}.{name}"
            if path in seen:
                continue
            seen.add(path)
            if len(out) >= limit:
                left += 1
                continue
            sub = sub if isinstance(sub, dict) else {}
            bits = [type_label(without_null(sub)), *_facts(sub, name in required)]
            line = f"{path}: {', '.join(bits)}"
            desc = sub.get("description")
            if isinstance(desc, str) and desc.strip() and not desc.startswith("("):
                line += f" - {one_line(desc, 120)}"
            out.append(line)
            if depth + 1 < max_depth:
                left += _walk_inputs(sub, path, depth + 1, max_depth, limit, out, seen)
            elif is_structured(sub):
                out[-1] += f" (fields: {input_shape(sub, max_depth=1, max_props=8)})"
    return left


def without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without its null branch or null type (the label of an input says what to send)."""
    branches = _useful(schema)
    if len(branches) == 1 and branches[0] is not schema:
        return branches[0]
    kind = schema.get("type")
    if isinstance(kind, list) and "null" in kind:
        kinds = [k for k in kind if k != "null"]
        return {**schema, "type": kinds[0] if len(kinds) == 1 else kinds}
    return schema
