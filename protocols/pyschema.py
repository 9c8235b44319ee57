"""Python types as JSON Schema, and JSON values back as those types.

A Python function used as a tool (``protocols.functions``) and a typed answer (``atc.loop.answers``)
are both described by type hints. ``schema_of(annotation)`` gives the JSON Schema the gateway
validates with and the prompt renders from; ``converter_of(annotation)`` gives the function that
turns a JSON value that passed that schema into what the Python code expects (None when the
JSON value already is that: ``str``, ``int``, ``list[dict]``...), so that a call of a plain
function pays nothing for it.

Understood: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``; ``list``/``Sequence``/``set``/
``tuple`` (fixed and ``...``), ``dict``/``Mapping``; ``Optional``, ``Union``, ``X | Y``, ``Literal``;
``Enum`` subclasses (their values); ``datetime``/``date``/``time`` (ISO strings), ``UUID``,
``Decimal``, ``Path``; ``TypedDict`` (``typing``'s too, which pydantic refuses on 3.11),
dataclasses, pydantic models (their own ``model_json_schema``, references inlined), and
``Annotated[X, "a note"]`` or ``Annotated[X, Field(description=...)]`` for a description. A
recursive type is expanded once and then cut to ``{"type": "object", "description": "(recursive:
Name)"}``, as ``protocols.refs`` cuts recursive specs. Anything else is ``{}`` (any value).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import pathlib
import types
import typing
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from protocols.docstrings import parse_docstring
from protocols.refs import Resolver

__all__ = ["schema_of", "converter_of", "type_hints", "json_default", "is_pydantic_model", "Converter"]

Converter = Callable[[Any], Any]

_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"}, int: {"type": "integer"}, float: {"type": "number"}, bool: {"type": "boolean"},
    type(None): {"type": "null"}, bytes: {"type": "string"},
    datetime.datetime: {"type": "string", "format": "date-time"}, datetime.date: {"type": "string", "format": "date"},
    datetime.time: {"type": "string", "format": "time"}, uuid.UUID: {"type": "string", "format": "uuid"},
    decimal.Decimal: {"type": ["number", "string"]}, pathlib.Path: {"type": "string"},
    pathlib.PurePath: {"type": "string"},
}
_PARSERS: dict[Any, Converter] = {
    datetime.datetime: lambda v: datetime.datetime.fromisoformat(v) if isinstance(v, str) else v,
    datetime.date: lambda v: datetime.date.fromisoformat(v) if isinstance(v, str) else v,
    datetime.time: lambda v: datetime.time.fromisoformat(v) if isinstance(v, str) else v,
    uuid.UUID: lambda v: uuid.UUID(v) if isinstance(v, str) else v,
    decimal.Decimal: lambda v: decimal.Decimal(str(v)) if isinstance(v, int | float | str) else v,
    pathlib.Path: lambda v: pathlib.Path(v) if isinstance(v, str) else v,
    pathlib.PurePath: lambda v: pathlib.PurePath(v) if isinstance(v, str) else v,
}
# (``typing.List`` and friends have these as their origin: ``get_origin(typing.List) is list``)
_SEQUENCES = (list, tuple, set, frozenset, Sequence, typing.Sequence, typing.AbstractSet, typing.MutableSequence,
              typing.Iterable, typing.Collection)
_MAPPINGS = (dict, Mapping, typing.Mapping, typing.MutableMapping)


def type_hints(obj: Any) -> dict[str, Any]:
    """``typing.get_type_hints`` with extras kept, or the raw annotations when a forward reference
    cannot be resolved (those parameters are then described as any value)."""
    try:
        return typing.get_type_hints(obj, include_extras=True)
    except Exception:
        raw = getattr(obj, "__annotations__", None)
        return {k: (v if not isinstance(v, str) else Any) for k, v in (raw or {}).items()}


def is_pydantic_model(tp: Any) -> bool:
    return isinstance(tp, type) and callable(getattr(tp, "model_json_schema", None)) and \
        callable(getattr(tp, "model_validate", None))


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__total__") and hasattr(tp, "__annotations__")


def _annotated_note(metadata: tuple[Any, ...]) -> dict[str, Any]:
    """What ``Annotated`` metadata adds: a plain string or a ``Field(description=...)`` as the
    description, and pydantic/annotated-types bounds."""
    out: dict[str, Any] = {}
    for item in metadata:
        if isinstance(item, str) and item.strip():
            out.setdefault("description", " ".join(item.split()))
        description = getattr(item, "description", None)
        if isinstance(description, str) and description.strip():
            out.setdefault("description", " ".join(description.split()))
        for inner in getattr(item, "metadata", None) or [item]:
            for attr, key in (("ge", "minimum"), ("le", "maximum"), ("gt", "exclusiveMinimum"),
                              ("lt", "exclusiveMaximum"), ("min_length", "minLength"), ("max_length", "maxLength")):
                value = getattr(inner, attr, None)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    out.setdefault(key, value)
    return out


def _inline(doc: dict[str, Any], name: str) -> dict[str, Any]:
    """A pydantic model's schema with its ``$defs`` inlined (recursion cut) and titles dropped."""
    resolved = Resolver(doc, f"the pydantic model {name}", dialect="3.1").schema(
        {k: v for k, v in doc.items() if k != "$defs"}, "#")
    out = _drop_titles(resolved)
    return out if isinstance(out, dict) else {}


def _drop_titles(node: Any) -> Any:
    if isinstance(node, dict):
        # a property named "title" maps to a schema (a dict): only the keyword's strings go
        return {k: _drop_titles(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [_drop_titles(v) for v in node]
    return node


def schema_of(tp: Any, *, _seen: tuple[Any, ...] = ()) -> dict[str, Any]:
    """The JSON Schema of annotation ``tp`` (see the module docstring)."""
    if tp is Any or tp is object or tp is typing.Any or tp is dataclasses.MISSING:
        return {}
    if tp is None:
        return {"type": "null"}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return {**schema_of(args[0], _seen=_seen), **_annotated_note(tuple(getattr(tp, "__metadata__", ())))}
    if tp in _SCALARS:
        return dict(_SCALARS[tp])
    if origin is typing.Literal:
        values = [a.value if isinstance(a, enum.Enum) else a for a in args]
        return {"enum": values, **_uniform_type(values)}
    if origin is typing.Union or origin is types.UnionType:
        variants = [schema_of(a, _seen=_seen) for a in args]
        if any(v == {} for v in variants):
            return {}
        simple = [v["type"] for v in variants if set(v) == {"type"} and isinstance(v["type"], str)]
        if len(simple) == len(variants):
            return {"type": list(dict.fromkeys(simple))}
        return {"anyOf": variants}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
        return {"enum": values, **_uniform_type(values)}
    if tp in _SEQUENCES or origin in _SEQUENCES:
        return _array(tp, origin, args, _seen)
    if tp in _MAPPINGS or origin in _MAPPINGS:
        value = args[1] if len(args) == 2 else Any
        inner = schema_of(value, _seen=_seen)
        return {"type": "object", **({"additionalProperties": inner} if inner else {})}
    if tp in _seen:
        return {"type": "object", "description": f"(recursive: {getattr(tp, '__name__', 'type')})"}
    if is_pydantic_model(tp):
        return _inline(tp.model_json_schema(), tp.__name__)
    if _is_typeddict(tp):
        hints = type_hints(tp)
        keys = [k for k in hints if k in getattr(tp, "__required_keys__", set(hints))]
        return _object({k: schema_of(v, _seen=(*_seen, tp)) for k, v in hints.items()}, keys, tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = type_hints(tp)
        props: dict[str, Any] = {}
        required: list[str] = []
        for f in dataclasses.fields(tp):
            if not f.init:
                continue
            prop = schema_of(hints.get(f.name, Any), _seen=(*_seen, tp))
            note = f.metadata.get("description") if f.metadata else None
            if isinstance(note, str) and note:
                prop.setdefault("description", note)
            if f.default is not dataclasses.MISSING:
                if _is_json(f.default):
                    prop.setdefault("default", f.default)
            elif f.default_factory is dataclasses.MISSING:
                required.append(f.name)
            props[f.name] = prop
        return _object(props, required, tp)
    return {}


def _uniform_type(values: list[Any]) -> dict[str, Any]:
    kinds = {type(v) for v in values}
    name = {str: "string", int: "integer", float: "number", bool: "boolean"}.get(next(iter(kinds))) \
        if len(kinds) == 1 else None
    return {"type": name} if name else {}


def _array(tp: Any, origin: Any, args: tuple[Any, ...], seen: tuple[Any, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "array"}
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if args == ((),):
            return {"type": "array", "maxItems": 0}
        out["prefixItems"] = [schema_of(a, _seen=seen) for a in args]
        out["minItems"] = out["maxItems"] = len(args)
        return out
    item = schema_of(args[0], _seen=seen) if args else {}
    if item:
        out["items"] = item
    if origin in (set, frozenset, typing.AbstractSet) or tp in (set, frozenset):
        out["uniqueItems"] = True
    return out


def _object(props: dict[str, Any], required: list[str], tp: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = required
    doc = (getattr(tp, "__doc__", None) or "").strip()
    # A dataclass without a docstring gets its signature as __doc__: that says nothing new.
    if doc and not doc.startswith(f"{getattr(tp, '__name__', '')}("):
        parsed = parse_docstring(doc)
        if parsed.summary:
            out["description"] = parsed.summary
        for name, note in parsed.params.items():
            if name in props and note:
                props[name].setdefault("description", note)
    return out


def _is_json(value: Any) -> bool:
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, list | tuple):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


def json_default(value: Any) -> tuple[bool, Any]:
    """A parameter default as it is shown (``(True, value)``), when it is JSON data."""
    if isinstance(value, enum.Enum):
        value = value.value
    return (True, list(value) if isinstance(value, tuple) else value) if _is_json(value) else (False, None)


# -- JSON values back into the types ------------------------------------------------------------


def converter_of(tp: Any, *, _memo: dict[Any, Converter | None] | None = None) -> Converter | None:
    """A function from a JSON value (already valid against ``schema_of(tp)``) to what a parameter
    annotated ``tp`` expects, or None when the JSON value is it already."""
    memo: dict[Any, Converter | None] = {} if _memo is None else _memo
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return converter_of(args[0], _memo=memo)
    if tp in _PARSERS:
        return _PARSERS[tp]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp
    if is_pydantic_model(tp):
        model: Any = tp
        return lambda v: model.model_validate(v) if isinstance(v, dict) else v
    if origin is typing.Union or origin is types.UnionType:
        return _union_converter(args, memo)
    if origin in (tuple, set, frozenset) or tp in (tuple, set, frozenset):
        kind: Any = origin or tp
        if kind is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            parts = [converter_of(a, _memo=memo) for a in args]
            return lambda v: tuple(p(x) if p else x for p, x in zip(parts, v, strict=False)) \
                if isinstance(v, list) else v
        inner = converter_of(args[0], _memo=memo) if args else None
        return lambda v: kind(inner(x) if inner else x for x in v) if isinstance(v, list) else v
    if origin in _SEQUENCES:
        inner = converter_of(args[0], _memo=memo) if args else None
        if inner is None:
            return None
        each = inner
        return lambda v: [each(x) for x in v] if isinstance(v, list) else v
    if origin in _MAPPINGS:
        inner = converter_of(args[1], _memo=memo) if len(args) == 2 else None
        if inner is None:
            return None
        value_of = inner
        return lambda v: {k: value_of(x) for k, x in v.items()} if isinstance(v, dict) else v
    if _is_typeddict(tp) or (dataclasses.is_dataclass(tp) and isinstance(tp, type)):
        if tp in memo:  # a recursive type: the converter being built, called when a value comes
            return memo[tp] or None
        cell: list[Converter | None] = []
        memo[tp] = lambda v: cell[0](v) if cell and cell[0] is not None else v
        built = _record_converter(tp, memo)
        cell.append(built)
        memo[tp] = built
        return built
    return None


def _union_converter(args: tuple[Any, ...], memo: dict[Any, Converter | None]) -> Converter | None:
    arms = [(a, converter_of(a, _memo=memo)) for a in args if a is not type(None)]
    rich = [(a, c) for a, c in arms if c is not None]
    if not rich:
        return None
    plain = tuple(a for a, c in arms if c is None and isinstance(a, type))

    def convert(value: Any) -> Any:
        if value is None or (plain and isinstance(value, plain)):
            return value
        for _, conv in rich:
            try:
                return conv(value)
            except (TypeError, ValueError, KeyError):
                continue
        return value

    return convert


def _record_converter(tp: Any, memo: dict[Any, Converter | None]) -> Converter | None:
    hints = type_hints(tp)
    inner = {k: c for k, c in ((k, converter_of(v, _memo=memo)) for k, v in hints.items()) if c is not None}
    if _is_typeddict(tp):
        if not inner:
            return None  # a dict of JSON values is what the function gets
        return lambda v: {k: inner[k](x) if k in inner and x is not None else x for k, x in v.items()} \
            if isinstance(v, dict) else v
    names = {f.name for f in dataclasses.fields(tp) if f.init}

    def build(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return tp(**{k: inner[k](x) if k in inner and x is not None else x for k, x in value.items() if k in names})

    return build
