"""Tool protocols as text for a model.

- :func:`render_compact` — many tools, one signature-like entry each: the call with typed
  parameters, a condensed response shape, the one-line purpose, and the shape of every structured
  argument (``WorkPoolFilter = {name: {any_: [str]}, ...}``, each named type once per rendering).
  This is what a generation prompt shows; it is a fraction of the raw OpenAPI of the same operations.
- :func:`render_full` — one tool, everything about it (for reflection, ``atc tools show``,
  ``describe_tools``): full description, every parameter with its location and description, every
  field of a structured argument with its path (``work_pools.name.any_``), the response fields,
  examples, status codes.

The schema-to-text pieces (types, shapes, field lines) live in :mod:`protocols.shapes`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from protocols.model import Tool
from protocols.shapes import (
    field_lines,
    input_field_lines,
    input_shape,
    object_branches,
    one_line,
    response_shape,
    schema_name,
    type_label,
    without_null,
)

__all__ = ["render_compact", "render_full", "response_shape", "type_label", "field_lines", "purpose",
           "param_label"]

_one_line = one_line
#: Depth and width of a named type's shape in the compact protocol, and of an unnamed one inlined
#: in a signature (kept smaller: it sits in the call's line).
_DEF_DEPTH, _DEF_PROPS = 3, 12
_INLINE_DEPTH, _INLINE_PROPS = 2, 6


def param_label(schema: Any) -> str:
    """The type a signature shows for a parameter: ``type_label`` for plain values and for objects
    of named types (``WorkPoolFilter``, ``list[Track]``; a null branch is left out, None is what
    the default says), the shape itself for an unnamed object (``[{uri: str}]``)."""
    branches = object_branches(schema)
    if not branches:
        return type_label(schema)
    label = type_label(without_null(schema) if isinstance(schema, dict) else schema)
    names = [schema_name(b) for b in branches]
    if all(name and name in label for name in names):  # (a map of named values is labelled "dict")
        return label
    return input_shape(schema, max_depth=_INLINE_DEPTH, max_props=_INLINE_PROPS)


def _signature(tool: Tool) -> str:
    props = tool.properties
    required = [n for n in tool.required if n in props]
    optional = [n for n in props if n not in required]
    parts = [f"{n}: {param_label(props[n])}" for n in required]
    for n in optional:
        default = props[n].get("default") if isinstance(props[n], dict) else None
        shown = repr(default)  # the signature is Python: True/False/None, not JSON literals
        if len(shown) > 30:
            shown = "..."
        parts.append(f"{n}: {param_label(props[n])} = {shown}")
    return f"{tool.name}({', '.join(parts)})"


def _definitions(tool: Tool, defined: dict[str, str]) -> list[str]:
    """``Name = {shape}`` for each named type the tool's parameters take that ``defined`` (name ->
    shape, shared by one rendering) does not hold yet."""
    lines = []
    for schema in tool.properties.values():
        for branch in object_branches(schema):
            name = schema_name(branch)
            if not name:
                continue
            shape = input_shape(branch, max_depth=_DEF_DEPTH, max_props=_DEF_PROPS)
            if defined.get(name) == shape:
                continue
            defined[name] = shape
            lines.append(f"    {name} = {shape}")
    return lines


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
                   param_notes: bool = True, shapes: bool = True) -> str:
    """Signature-like protocols for a prompt, one block per tool::

        get_search_person(query: str, page: int = 1) -> {page: int, results: [{id: int, name: str, ...}], ...}
            Search for people.
            query: Pass a text query to search.
        read_work_pools(work_pools: WorkPoolFilter = None, limit: int = None) -> [{id: str, name: str, ...}]
            Read work pools.
            WorkPoolFilter = {operator: "and_"|"or_", name: {any_: [str]}, type: {any_: [str]}}

    ``param_notes`` adds the first sentence of each documented parameter's description;
    ``shapes`` the shape of each named type a parameter takes (once per rendering: the tools that
    take it again show its name). In a shape, ``?`` marks the optional fields of an object that
    has required ones.

    Args:
        tools: the tools to render.
        max_depth: nesting shown in a shape; ``max_props``: fields shown per object.
        param_notes: add each documented parameter's first sentence.
        shapes: add the shape of each named type a parameter takes.

    Returns:
        The text, one block per tool.
    """
    blocks = []
    defined: dict[str, str] = {}
    for tool in tools:
        head = _signature(tool)
        if tool.response_schema:
            head += " -> " + response_shape(tool.response_schema, max_depth=max_depth, max_props=max_props)
        lines = [head, f"    {purpose(tool)}"]
        if shapes:
            lines.extend(_definitions(tool, defined))
        if param_notes:
            for name, schema in tool.properties.items():
                desc = schema.get("description") if isinstance(schema, dict) else None
                if isinstance(desc, str) and desc.strip():
                    lines.append(f"    {name}: {_first_sentence(desc, 90)}")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def render_full(tool: Tool, *, max_fields: int = 120, max_example_chars: int = 800,
                max_input_fields: int = 120) -> str:
    """Everything about one tool, for reflection. Parameters are never dropped; the fields of
    structured arguments are listed up to ``max_input_fields`` lines (then counted), the response
    field list is condensed (to a shape) only past ``max_fields`` lines.

    Args:
        tool: the tool.
        max_fields: response field lines before condensing; ``max_input_fields``: argument field
            lines before counting; ``max_example_chars``: the length of an example.

    Returns:
        The text.
    """
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
        budget_used = 0
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
            if object_branches(schema):
                fields = input_field_lines(schema, name, limit=max(1, max_input_fields - budget_used))
                budget_used += len(fields)
                lines.extend("    " + f for f in fields)
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
