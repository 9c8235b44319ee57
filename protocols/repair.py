"""Repairs of the schema mistakes real specs make, done once at import, each with a warning.

Specs written by hand or by generators often say ``type: int`` (a popular Flask generator),
``type: integer64``, ``bool``, ``double``; put ``required: true`` on a property (Swagger 1.x and
JSON Schema draft 3 style); write numbers as strings (``minimum: "0"``); use OpenAPI 3.0's boolean
``exclusiveMinimum`` in a 3.1 document; or ``type: [string, null]`` with a YAML null. Imported as
they are, jsonschema cannot compile such a schema, and every call of the tool would fail with a
schema error that says nothing to the model.

``repair_node`` fixes ONE schema object whose sub-schemas were already repaired (the resolver
calls it bottom-up for every node in a schema position, with the node's real JSON pointer, so a
component referenced by fifty operations is repaired and reported once). What has a sure meaning
is rewritten (``int`` -> ``integer``); what has none is dropped with a warning saying the value
is not checked (an unknown ``type: foo``), so that the rest of the schema still validates.
``finish_root`` handles what only the top of a schema can decide.

Nothing here raises: a repair never makes an import fail.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["repair_node", "finish_root", "Warn", "TYPE_ALIASES"]

#: ``warn(message, pointer)``
Warn = Callable[[str, str], None]

_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
_TYPE_SET = frozenset(_TYPES)

#: Type names generators write -> (JSON Schema type, format to add when the node has none).
TYPE_ALIASES: dict[str, tuple[str, str | None]] = {
    "int": ("integer", None), "integer32": ("integer", "int32"), "int32": ("integer", "int32"),
    "integer64": ("integer", "int64"), "int64": ("integer", "int64"), "long": ("integer", "int64"),
    "short": ("integer", None), "uint": ("integer", None), "bigint": ("integer", None),
    "float": ("number", "float"), "double": ("number", "double"), "decimal": ("number", None),
    "float32": ("number", "float"), "float64": ("number", "double"), "numeric": ("number", None),
    "bool": ("boolean", None), "str": ("string", None), "text": ("string", None), "char": ("string", None),
    "uuid": ("string", "uuid"), "date": ("string", "date"), "datetime": ("string", "date-time"),
    "date-time": ("string", "date-time"), "time": ("string", "time"), "email": ("string", "email"),
    "uri": ("string", "uri"), "url": ("string", "uri"), "binary": ("string", "binary"),
    "file": ("string", "binary"), "byte": ("string", "byte"), "password": ("string", "password"),
    "dict": ("object", None), "map": ("object", None), "hash": ("object", None), "json": ("object", None),
    "list": ("array", None), "tuple": ("array", None), "set": ("array", None), "none": ("null", None),
}
#: Type words that mean "anything": the type is removed (no warning needed beyond the repair one).
_ANY = frozenset({"any", "*", "mixed", "object|array", ""})

_NUMERIC = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
_LISTS = ("allOf", "anyOf", "oneOf")
_NUMBER_TEXT = re.compile(r"^\s*-?\d+(\.\d+)?([eE][-+]?\d+)?\s*$")
_TRUTH = {"true": True, "false": False}


def _as_number(value: Any) -> int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, str) and _NUMBER_TEXT.match(value):
        number = float(value)
        return int(number) if number.is_integer() and not any(c in value for c in ".eE") else number
    return None


def _type_word(word: Any) -> tuple[str | None, str | None, bool]:
    """(JSON Schema type or None, format to add, known?) for one member of ``type``."""
    if word is None:
        return "null", None, True
    if not isinstance(word, str):
        return None, None, False
    key = word.strip().lower()
    if key in _TYPES:
        return key, None, True
    if key in TYPE_ALIASES:
        kind, fmt = TYPE_ALIASES[key]
        return kind, fmt, True
    if key in _ANY:
        return None, None, True
    return None, None, False


def _repair_type(node: dict[str, Any], at: str, warn: Warn, dialect: str) -> None:
    raw = node["type"]
    if isinstance(raw, str) and raw in _TYPE_SET:
        return
    if raw == "file" and dialect == "2.0":  # Swagger 2's own type for uploads and downloads
        node["type"] = "string"
        node.setdefault("format", "binary")
        return
    if raw is None or raw == []:
        warn("type is empty: values here are not type-checked", f"{at}/type")
        del node["type"]
        return
    words: list[Any]
    if isinstance(raw, str) and re.search(r"[|,]", raw) and raw.strip() not in _ANY:
        words = [w for w in re.split(r"\s*[|,]\s*", raw.strip()) if w]
    elif isinstance(raw, list):
        words = list(raw)
    else:
        words = [raw]
    kinds: list[str] = []
    fmt: str | None = None
    unknown: list[str] = []
    anything = False
    for word in words:
        kind, extra, known = _type_word(word)
        if not known:
            unknown.append(repr(word))
        elif kind is None:
            anything = True
        elif kind not in kinds:
            kinds.append(kind)
            fmt = fmt or extra
    fixed: Any = None if anything or not kinds else (kinds[0] if len(kinds) == 1 and not isinstance(raw, list)
                                                    else kinds)
    if unknown:
        warn(f"unknown type {', '.join(unknown)}: values here are not type-checked", f"{at}/type")
    elif fixed != raw:
        shown = fixed if fixed is not None else "(any type)"
        warn(f"type {raw!r} is not a JSON Schema type; read as {shown!r}", f"{at}/type")
    if fixed is None:
        del node["type"]
    else:
        node["type"] = fixed
    if fmt and "format" not in node:
        node["format"] = fmt


def _repair_numbers(node: dict[str, Any], at: str, warn: Warn, dialect: str) -> None:
    for key in ("exclusiveMinimum", "exclusiveMaximum"):
        value = node.get(key)
        flag = _TRUTH.get(value.strip().lower()) if isinstance(value, str) else value
        if not isinstance(flag, bool):
            continue
        # OpenAPI 3.0 (JSON Schema draft 4): a boolean that makes minimum/maximum exclusive.
        # JSON Schema 2020-12 wants the bound itself; jsonschema would compare with True (== 1).
        bound = "minimum" if key == "exclusiveMinimum" else "maximum"
        del node[key]
        if flag and bound in node:
            node[key] = node.pop(bound)
        if dialect == "3.1":
            warn(f"boolean {key} is OpenAPI 3.0 style; read as the 3.1 form", f"{at}/{key}")
    for key in _NUMERIC + _COUNTS:
        if key not in node:
            continue
        value = node[key]
        number = _as_number(value)
        if number is None:
            warn(f"{key} {value!r} is not a number: ignored", f"{at}/{key}")
            del node[key]
            continue
        if key in _COUNTS:
            if number < 0 or not float(number).is_integer():
                warn(f"{key} {value!r} is not a count: ignored", f"{at}/{key}")
                del node[key]
                continue
            number = int(number)
        if key == "multipleOf" and number <= 0:
            warn(f"multipleOf {value!r} must be greater than 0: ignored", f"{at}/{key}")
            del node[key]
            continue
        if number != value or type(number) is not type(value):
            if isinstance(value, str):
                warn(f"{key} {value!r} is written as a string; read as {number!r}", f"{at}/{key}")
            node[key] = number


def _repair_required(node: dict[str, Any], at: str, warn: Warn) -> None:
    props = node.get("properties")
    moved: list[str] = []
    if isinstance(props, dict):
        for name, sub in list(props.items()):
            flag = sub.get("required") if isinstance(sub, dict) else None
            flag = _TRUTH.get(flag.strip().lower(), flag) if isinstance(flag, str) else flag
            if isinstance(flag, bool):
                # Swagger 1.x / draft 3 put "required: true" on the property; 2020-12 wants the
                # name in the object's list. The child may be shared (a $ref target): copy it.
                props[name] = {k: v for k, v in sub.items() if k != "required"}
                if flag:
                    moved.append(str(name))
    own = node.get("required")
    if own is None or isinstance(own, bool) or (isinstance(own, str) and own.strip().lower() in _TRUTH):
        names: list[str] = []
    elif isinstance(own, str):
        warn(f"required {own!r} should be a list of names; read as [{own!r}]", f"{at}/required")
        names = [own]
    elif isinstance(own, list):
        names = [n for n in own if isinstance(n, str)]
        if len(names) != len(own):
            warn("required lists something that is not a property name: ignored", f"{at}/required")
    else:
        warn(f"required {own!r} is not a list of names: ignored", f"{at}/required")
        names = []
    if moved:
        warn(f"'required: true' on {', '.join(repr(m) for m in moved)} moved into the object's required list",
             f"{at}/properties")
    merged = list(dict.fromkeys(names + moved))
    if merged:
        node["required"] = merged
    elif "required" in node and not isinstance(own, bool | str):
        del node["required"]


def _repair_shapes(node: dict[str, Any], at: str, warn: Warn, dialect: str) -> None:
    props = node.get("properties")
    if props is not None and not isinstance(props, dict):
        if isinstance(props, list) and all(isinstance(p, dict) and isinstance(p.get("name"), str) for p in props):
            # the resolver did not see these as schemas: repair each now
            node["properties"] = {
                p["name"]: repair_node({k: v for k, v in p.items() if k != "name"}, f"{at}/properties/{i}", warn,
                                       dialect=dialect) for i, p in enumerate(props)}
            warn("properties is a list of named schemas; read as an object", f"{at}/properties")
        else:
            warn("properties is not an object: ignored", f"{at}/properties")
            del node["properties"]
    elif isinstance(props, dict):
        for name, sub in list(props.items()):
            if not isinstance(sub, dict | bool):
                warn(f"property {name!r} has no schema object: any value accepted", f"{at}/properties/{name}")
                props[name] = {}
    items = node.get("items")
    if isinstance(items, list):
        if len(items) == 1 and isinstance(items[0], dict):
            node["items"] = items[0]
        else:
            node["prefixItems"] = [i for i in items if isinstance(i, dict | bool)]
            del node["items"]
        warn("items is a list (draft 4 tuple form); read as the 2020-12 form", f"{at}/items")
    elif items is not None and not isinstance(items, dict | bool):
        warn("items is not a schema: ignored", f"{at}/items")
        del node["items"]
    extra = node.get("additionalProperties")
    if isinstance(extra, str) and extra.strip().lower() in _TRUTH:
        node["additionalProperties"] = _TRUTH[extra.strip().lower()]
    elif extra is not None and not isinstance(extra, dict | bool):
        warn("additionalProperties is neither a schema nor a boolean: ignored", f"{at}/additionalProperties")
        del node["additionalProperties"]
    for key in _LISTS:
        value = node.get(key)
        if value is None:
            continue
        members = [value] if isinstance(value, dict) else value if isinstance(value, list) else []
        members = [m for m in members if isinstance(m, dict | bool)]
        if not members:
            warn(f"{key} has no schemas: ignored", f"{at}/{key}")
            del node[key]
        elif members != value:
            node[key] = members
    enum = node.get("enum")
    if enum is not None and (not isinstance(enum, list) or not enum):
        warn(f"enum {enum!r} is not a non-empty list: ignored", f"{at}/enum")
        del node["enum"]
    patterns = node.get("patternProperties")
    if isinstance(patterns, dict):
        for key in list(patterns):
            try:
                re.compile(key)
            except (re.error, TypeError):
                warn(f"patternProperties key {key!r} is not a valid regular expression: ignored",
                     f"{at}/patternProperties")
                del patterns[key]
    for key in ("format", "pattern"):
        if key in node and not isinstance(node[key], str):
            warn(f"{key} {node[key]!r} is not a string: ignored", f"{at}/{key}")
            del node[key]
    if isinstance(node.get("uniqueItems"), str):
        node["uniqueItems"] = node["uniqueItems"].strip().lower() == "true"


def _repair_nullable(node: dict[str, Any]) -> None:
    flag = node.get("nullable")
    if isinstance(flag, str):
        flag = _TRUTH.get(flag.strip().lower())
    if not isinstance(flag, bool):
        return
    del node["nullable"]
    if not flag:
        return
    kind = node.get("type")
    if isinstance(kind, str) and kind != "null":
        node["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        node["type"] = kind + ["null"]
    enum = node.get("enum")
    if isinstance(enum, list) and None not in enum:
        node["enum"] = enum + [None]


#: Keys that need no repair of their own (their sub-schemas are repaired as nodes of their own).
_PLAIN_KEYS = frozenset({"type", "description", "title", "example", "examples", "default", "deprecated",
                         "readOnly", "writeOnly", "xml", "externalDocs", "discriminator", "const", "properties",
                         "format", "items", "required", "enum"})


def _looks_fine(node: dict[str, Any]) -> bool:
    """True for a node that certainly needs no repair: only common keys, each well-formed."""
    if not _PLAIN_KEYS.issuperset(node):
        return False
    if "type" in node and not (isinstance(node["type"], str) and node["type"] in _TYPE_SET):
        return False
    if "format" in node and not isinstance(node["format"], str):
        return False
    if "items" in node and not isinstance(node["items"], dict | bool):
        return False
    if "required" in node and not (isinstance(node["required"], list) and
                                   all(isinstance(r, str) for r in node["required"])):
        return False
    if "enum" in node and not (isinstance(node["enum"], list) and node["enum"]):
        return False
    if "properties" not in node:
        return True
    props = node["properties"]
    return isinstance(props, dict) and all(isinstance(p, dict) and "required" not in p for p in props.values())


def repair_node(node: dict[str, Any], at: str, warn: Warn, *, dialect: str = "3.0") -> dict[str, Any]:
    """Repair one schema object in place (its sub-schemas already repaired) and return it.
    ``dialect`` is ``"2.0"`` (Swagger), ``"3.0"`` (OpenAPI 3.0; both draft-4 flavoured) or ``"3.1"``."""
    if _looks_fine(node):
        return node  # nothing here can need a repair (most nodes of a spec): skip the checks
    # A nested $schema/$id would make jsonschema pick another draft or base URI for the node.
    node.pop("$schema", None)
    node.pop("$id", None)
    if "type" in node:
        _repair_type(node, at, warn, dialect)
    _repair_nullable(node)
    _repair_numbers(node, at, warn, dialect)
    _repair_shapes(node, at, warn, dialect)
    _repair_required(node, at, warn)
    return node


def finish_root(schema: Any, at: str, warn: Warn) -> Any:
    """The top of a schema: a ``required: true`` that no parent took is a parameter-level flag
    (handled by the loader), not a list; it is dropped."""
    if isinstance(schema, dict) and isinstance(schema.get("required"), bool | str):
        del schema["required"]
    return schema
