"""Tool protocols as text for a model.

- :func:`render_compact` — many tools, one signature-like entry each: the call with typed
  parameters, a condensed response shape, and the one-line purpose. This is what a generation
  prompt shows; it is a fraction of the raw OpenAPI of the same operations.
- :func:`render_full` — one tool, everything about it (for reflection): full description, every
  parameter with its location and description, the response fields, examples, status codes.
- :func:`response_shape` — a JSON Schema condensed to ``{results: [{id: int, name: str, ...}], count: int}``;
  ``...`` marks everything that was cut for depth or width.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from protocols.model import Tool

__all__ = ["render_compact", "render_full", "response_shape", "type_label", "field_lines", "purpose"]

_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None",
            "object": "dict", "array": "list"}


def _one_line(text: str, limit: int) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3].rstrip() + "..."


def _variants(schema: dict[str, Any]) -> list[Any] | None:
    for key in ("oneOf", "anyOf"):
        v = schema.get(key)
        if isinstance(v, list) and v:
            return v
    return None


def type_label(schema: Any) -> str:
    """A short Python-like type for a parameter schema: ``str``, ``int``, ``list[str]``, ``"a"|"b"``."""
    if not isinstance(schema, dict) or not schema:
        return "any"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        shown = "|".join(json.dumps(e, ensure_ascii=False) for e in enum[:6])
        return shown + ("|..." if len(enum) > 6 else "")
    variants = _variants(schema)
    if variants:
        return "|".join(dict.fromkeys(type_label(v) for v in variants[:3]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(_SCALARS.get(str(k), str(k)) for k in kind[:3])
    if kind == "array":
        items = schema.get("items")
        return f"list[{type_label(items)}]" if isinstance(items, dict) and items else "list"
    if kind is None and isinstance(schema.get("properties"), dict):
        return "dict"
    return _SCALARS.get(str(kind), str(kind) if kind else "any")


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
    return type_label(schema)


def _key(name: str) -> str:
    return name if name.isidentifier() else json.dumps(name, ensure_ascii=False)


def _signature(tool: Tool) -> str:
    props = tool.properties
    required = [n for n in tool.required if n in props]
    optional = [n for n in props if n not in required]
    parts = [f"{n}: {type_label(props[n])}" for n in required]
    for n in optional:
        default = props[n].get("default") if isinstance(props[n], dict) else None
        shown = repr(default)  # the signature is Python: True/False/None, not JSON literals
        if len(shown) > 30:
            shown = "..."
        parts.append(f"{n}: {type_label(props[n])} = {shown}")
    return f"{tool.name}({', '.join(parts)})"


_MARKUP = re.compile(r"<[^>]+>|\[([^\]]*)\]\([^)]*\)|[`*_]{1,2}(?=\w)|(?<=\w)[`*_]{1,2}")


#: Words whose dot ends no sentence (``Filter by genre, e.g. mystery.`` is one sentence).
_ABBREVIATIONS = frozenset({"e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "incl.", "al.", "viz.", "resp.", "no.",
                            "nos.", "mr.", "mrs.", "ms.", "dr.", "st.", "jr.", "sr.", "fig."})


def _sentences(plain: str) -> list[str]:
    """``plain`` cut into sentences at ``.``, ``!`` or ``?`` before a space, but not after an
    abbreviation or an initial (``e.g.``, ``J. R. R.``)."""
    out: list[str] = []
    for piece in re.findall(r".+?(?:[.!?](?=\s|$)|$)", plain):
        piece = piece.strip()
        if not piece:
            continue
        last = out[-1].rsplit(None, 1)[-1].lstrip("([\"'") if out else ""
        if last.lower() in _ABBREVIATIONS or re.fullmatch(r"(?:[A-Z]\.)+", last):
            out[-1] += " " + piece
        else:
            out.append(piece)
    return out


def _first_sentence(text: str, limit: int, *, bare: int = 2) -> str:
    """The first sentence of a description without Markdown/HTML markup, at most ``limit`` characters;
    two sentences when the first has at most ``bare`` words (a title like ``Get Details.``, ``Optional.``)."""
    plain = " ".join(_MARKUP.sub(lambda m: m.group(1) or " ", text).split())
    sentences = _sentences(plain)
    if not sentences:
        return ""
    first = sentences[0]
    if len(first.split()) <= bare and len(sentences) > 1:
        first = f"{first} {sentences[1]}"
    return _one_line(first, limit)


def purpose(tool: Tool, limit: int = 160) -> str:
    """The one-line purpose: the first sentence, or two when the first is a bare title (``Get Details.``)."""
    return _first_sentence(tool.description, limit, bare=4) or f"{tool.method} {tool.path}"


def render_compact(tools: Sequence[Tool], *, max_depth: int = 3, max_props: int = 8,
                   param_notes: bool = True) -> str:
    """Signature-like protocols for a prompt, one block per tool::

        get_search_person(query: str, page: int = 1) -> {page: int, results: [{id: int, name: str, ...}], ...}
            Search for people.
            query: Pass a text query to search.

    ``param_notes`` adds the first sentence of each documented parameter's description."""
    blocks = []
    for tool in tools:
        head = _signature(tool)
        if tool.response_schema:
            head += " -> " + response_shape(tool.response_schema, max_depth=max_depth, max_props=max_props)
        lines = [head, f"    {purpose(tool)}"]
        if param_notes:
            for name, schema in tool.properties.items():
                desc = schema.get("description") if isinstance(schema, dict) else None
                if isinstance(desc, str) and desc.strip():
                    lines.append(f"    {name}: {_first_sentence(desc, 90)}")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


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
            line += f" - {_one_line(desc, 120)}"
        out.append(line)
        out.extend(field_lines(sub, path, depth=depth + 1, max_depth=max_depth))
    return out


def render_full(tool: Tool, *, max_fields: int = 120, max_example_chars: int = 800) -> str:
    """Everything about one tool, for reflection. Parameters are never dropped; the response field
    list is condensed (to a shape) only past ``max_fields`` lines."""
    lines = [f"{_signature(tool)}", f"  {tool.method} {tool.path}"
             + (f"  [collection {tool.collection}" + (f", {tool.category}" if tool.category else "") + "]")]
    if tool.deprecated:
        lines.append("  DEPRECATED")
    if tool.description:
        lines.append("")
        lines.extend("  " + ln for ln in tool.description.strip().splitlines() if ln.strip())
    lines.append("")
    props = tool.properties
    if props:
        lines.append("Parameters:")
        for name, schema in props.items():
            schema = schema if isinstance(schema, dict) else {}
            binding = tool.bindings.get(name)
            where = ""
            if binding is not None:
                wire = f" '{binding.name}'" if binding.name and binding.name != name else ""
                where = f"in {binding.location}{wire}" if binding.name or binding.location != "body" \
                    else "the whole request body"
            bits = [type_label(schema), "required" if name in tool.required else "optional"]
            if where:
                bits.append(where)
            if "default" in schema:
                bits.append(f"default {json.dumps(schema['default'], ensure_ascii=False)}")
            if "example" in schema:
                bits.append(f"example {_one_line(json.dumps(schema['example'], ensure_ascii=False), 60)}")
            fmt = schema.get("format")
            if isinstance(fmt, str):
                bits.append(f"format {fmt}")
            line = f"  {name} ({', '.join(bits)})"
            desc = schema.get("description")
            if isinstance(desc, str) and desc.strip():
                line += f": {_one_line(desc, 300)}"
            lines.append(line)
        if tool.body_media_type:
            lines.append(f"  (request body: {tool.body_media_type})")
    else:
        lines.append("Parameters: none")
    if tool.response_schema:
        fields = field_lines(tool.response_schema)
        lines.append("")
        lines.append("Returns: " + response_shape(tool.response_schema, max_depth=2, max_props=12))
        if fields:
            lines.append("Response fields:")
            lines.extend("  " + f for f in fields[:max_fields])
            if len(fields) > max_fields:
                lines.append(f"  ... {len(fields) - max_fields} more fields, condensed: "
                             + response_shape(tool.response_schema, max_depth=6, max_props=20))
    else:
        lines.append("")
        lines.append("Returns: not documented (look at a real response)")
    for ex in tool.examples[:2]:
        shown = json.dumps(ex.get("response"), ensure_ascii=False, default=str)
        if len(shown) > max_example_chars:
            shown = shown[: max_example_chars - 3] + "..."
        args = json.dumps(ex.get("args") or {}, ensure_ascii=False, default=str)
        lines.append(f"Example{' ' + args if args != '{}' else ''}: {shown}")
    if tool.status_codes:
        codes = "; ".join(f"{c} {_one_line(d, 80)}".strip() for c, d in tool.status_codes.items())
        lines.append(f"Status codes: {codes}")
    if tool.security:
        lines.append("Credentials: " + " or ".join(" + ".join(alt) for alt in tool.security)
                     + " (added by the gateway)")
    return "\n".join(lines)
