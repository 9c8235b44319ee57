"""Protocol documenting: from the responses a tool gave to its protocol.

- **Response schema**: every successful response of the tool merged with genson (every sample, and
  every item of every list in it; not the first list element, as the paper's code does), so a
  field that only some items or some samples carry is still in the schema.
- **Gaps**: the places a schema cannot describe from what was seen (an empty list says nothing
  about its items, a ``null`` nothing about its type). They steer extra samples (``probes.rounds``).
- **Examples**: one to three short, condensed responses with the arguments that produced them and a
  program that reproduces the call, written from the chain that worked (``example_program``):
  every argument that came from another tool's response is read from that response, so the
  example shows how the tools chain.
- **Dependencies**: the tools whose output fed the call, and the parameter -> field mapping.
"""

from __future__ import annotations

import json
import keyword
from collections.abc import Sequence
from typing import Any

from genson import SchemaBuilder

from probes.calls import Observation, Source

__all__ = [
    "merge_schema",
    "gaps",
    "leaf_paths",
    "condense_value",
    "example_program",
    "resolve",
    "dependencies",
    "choose_examples",
]

#: Items of one list fed to genson (first and last ones): more rarely changes the schema.
MAX_SAMPLED_ITEMS = 100
_MAX_DEPTH = 60


def _bounded(value: Any, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        return None
    if isinstance(value, list):
        items = value
        if len(items) > MAX_SAMPLED_ITEMS:
            half = MAX_SAMPLED_ITEMS // 2
            items = items[:half] + items[-half:]
        return [_bounded(v, depth + 1) for v in items]
    if isinstance(value, dict):
        return {str(k): _bounded(v, depth + 1) for k, v in value.items()}
    return value


def merge_schema(samples: Sequence[Any]) -> dict[str, Any] | None:
    """One JSON Schema describing every sample (None when there is none, or genson refuses)."""
    if not samples:
        return None
    builder = SchemaBuilder()
    try:
        for sample in samples:
            builder.add_object(_bounded(json.loads(json.dumps(sample, default=str))))
        schema: dict[str, Any] = builder.to_schema()
    except Exception:  # genson raises bare errors on values it cannot type
        return None
    schema.pop("$schema", None)
    return schema


def _variants(schema: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list):
            out.extend(o for o in options if isinstance(o, dict))
    return out


def _types(schema: dict[str, Any]) -> list[str]:
    t = schema.get("type")
    if isinstance(t, str):
        return [t]
    if isinstance(t, list):
        return [x for x in t if isinstance(x, str)]
    return []


def gaps(schema: Any, depth: int = 0) -> int:
    """How many places of an inferred schema are unknown: lists seen only empty (no ``items``),
    values seen only as ``null``, objects seen only as ``{}``."""
    if not isinstance(schema, dict) or depth > 30:
        return 0
    count = sum(gaps(v, depth + 1) for v in _variants(schema))
    types = _types(schema)
    if types == ["null"]:
        count += 1
    if "array" in types:
        items = schema.get("items")
        count += gaps(items, depth + 1) if isinstance(items, dict) and items else 1
    if "object" in types:
        props = schema.get("properties")
        if isinstance(props, dict) and props:
            count += sum(gaps(v, depth + 1) for v in props.values())
        elif not isinstance(schema.get("additionalProperties"), dict):
            count += 1
    return count


def leaf_paths(schema: Any, prefix: str = "", depth: int = 0) -> set[str]:
    """The paths of a schema's scalar leaves (``results[].id``); lists add ``[]``. Variants
    (``anyOf``/``oneOf``/``allOf``) contribute all their paths. Used to measure recall."""
    if not isinstance(schema, dict) or depth > 40:
        return set()
    out: set[str] = set()
    for variant in _variants(schema):
        out |= leaf_paths(variant, prefix, depth + 1)
    types = _types(schema)
    props = schema.get("properties")
    items = schema.get("items")
    structured = False
    if isinstance(props, dict) and props:
        structured = True
        for name, sub in props.items():
            out |= leaf_paths(sub, f"{prefix}.{name}" if prefix else str(name), depth + 1)
    if isinstance(items, dict) and items:
        structured = True
        out |= leaf_paths(items, prefix + "[]", depth + 1)
    scalar = any(t in ("string", "integer", "number", "boolean", "null") for t in types)
    if scalar or (not structured and not _variants(schema) and not types):
        out.add(prefix or "$")
    return out


def condense_value(value: Any, *, items: int = 2, chars: int = 80, keys: int = 15, depth: int = 5) -> Any:
    """A short copy of a response that is still valid JSON of the same shape: lists cut to their
    first ``items``, strings to ``chars`` characters, objects to ``keys`` keys, and containers
    deeper than ``depth`` emptied."""
    if isinstance(value, str):
        return value if len(value) <= chars else value[: chars - 1] + "\u2026"
    if isinstance(value, list):
        if depth <= 0:
            return []
        return [condense_value(v, items=items, chars=chars, keys=keys, depth=depth - 1) for v in value[:items]]
    if isinstance(value, dict):
        if depth <= 0:
            return {}
        return {str(k): condense_value(v, items=items, chars=chars, keys=keys, depth=depth - 1)
                for k, v in list(value.items())[:keys]}
    return value


# -- where the arguments came from ----------------------------------------------------------------


def resolve(source: Source, observations: Sequence[Observation], depth: int = 0) -> Source:
    """The ultimate origin of an argument: an inherited value is followed to the response it was
    first read from (or to the schema value it was made from)."""
    if source.get("kind") != "inherit" or depth > 10:
        return source
    obs_id = source.get("obs")
    if not isinstance(obs_id, int) or not 0 <= obs_id < len(observations):
        return source
    origin = observations[obs_id]
    inner = origin.provenance.get(str(source.get("arg")))
    return resolve(inner, observations, depth + 1) if inner else {"kind": "given"}


def dependencies(obs: Observation, observations: Sequence[Observation]) -> tuple[list[str], dict[str, Any]]:
    """(tools whose output fed the call, parameter -> ``{"tool", "field"}`` or ``{"source"}``)."""
    tools: list[str] = []
    mapping: dict[str, Any] = {}
    for arg in obs.args:
        src = resolve(obs.provenance.get(arg) or {"kind": "given"}, observations)
        if src.get("kind") == "harvest" and isinstance(src.get("tool"), str):
            mapping[arg] = {"tool": src["tool"], "field": src.get("field")}
            if src["tool"] != obs.tool and src["tool"] not in tools:
                tools.append(src["tool"])
        else:
            mapping[arg] = {"source": src.get("kind") or "given"}
    return tools, mapping


# -- the example program ----------------------------------------------------------------------------

_LEAF_KEYS = ("name", "title", "id")


def _leaf(data: Any) -> str:
    """An indexing expression to a telling value of a response (``["results"][0]["title"]``)."""
    def pick(obj: dict[str, Any]) -> str | None:
        for key in _LEAF_KEYS:
            if isinstance(obj.get(key), str | int) and not isinstance(obj.get(key), bool):
                return f"[{json.dumps(key)}]"
        return None

    if isinstance(data, dict):
        direct = pick(data)
        if direct:
            return direct
        for key, value in data.items():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                inner = pick(value[0])
                if inner:
                    return f"[{json.dumps(key)}][0]{inner}"
    if isinstance(data, list) and data and isinstance(data[0], dict):
        inner = pick(data[0])
        if inner:
            return f"[0]{inner}"
    return ""


def _var_base(tool: str) -> str:
    """A variable name for a tool's result: its name without the verb, repeated words and ``id``
    (``get_person_person_id_tv_credits`` -> ``person_tv_credits``)."""
    parts = [p for p in tool.lower().split("_") if p]
    if len(parts) > 1 and parts[0] in ("get", "list", "fetch", "read", "search", "show", "retrieve", "find"):
        parts = parts[1:]
    kept = [p for p in dict.fromkeys(parts) if p not in ("id", "by")] or parts
    base = "_".join(kept[-3:]) or "result"
    if not base.isidentifier() or keyword.iskeyword(base) or base[0].isdigit():
        base = "result"
    return base


def example_program(target: Observation, observations: Sequence[Observation], tool_names: Sequence[str] = (),
                    *, question: str | None = None) -> str:
    """A program that makes the call ``target`` made, reading every harvested argument from the
    response of the call that produced it, and prints a telling field of the result."""
    taken = set(tool_names) | {"print", "ToolError"}
    names: dict[int, str] = {}
    lines: list[str] = []

    def var_for(obs: Observation) -> str:
        base = _var_base(obs.tool)
        name, n = base, 2
        while name in taken:
            name = f"{base}_{n}"
            n += 1
        taken.add(name)
        return name

    def expr(obs: Observation, arg: str, depth: int) -> str:
        source = obs.provenance.get(arg) or {}
        origin_id = source.get("obs")
        origin = observations[origin_id] if isinstance(origin_id, int) and 0 <= origin_id < obs.id else None
        if origin is not None and depth < 12:
            if source.get("kind") == "harvest" and isinstance(source.get("path"), list):
                var = emit(origin, depth + 1)
                return var + "".join(f"[{json.dumps(p) if isinstance(p, str) else int(p)}]" for p in source["path"])
            if source.get("kind") == "harvest":
                emit(origin, depth + 1)  # read from a line of that call's text answer
                return repr(obs.args[arg])
            if source.get("kind") == "inherit" and str(source.get("arg")) in origin.args:
                emit(origin, depth + 1)
                return expr(origin, str(source["arg"]), depth + 1)
        return repr(obs.args[arg])

    def emit(obs: Observation, depth: int) -> str:
        if obs.id in names:
            return names[obs.id]
        call = ", ".join(f"{k}={expr(obs, k, depth)}" for k in obs.args)
        var = var_for(obs)
        names[obs.id] = var
        lines.append(f"{var} = {obs.tool}({call})")
        return var

    head = [f"# {' '.join(question.split())}"] if question else []
    final = emit(target, 0)
    lines.append(f"print({final}{_leaf(target.data)})")
    return "\n".join(head + lines) + "\n"


def choose_examples(successes: Sequence[Observation], limit: int = 3) -> list[Observation]:
    """The richest success first (the one showing the most fields: an empty search result is a
    poor example), then others with other arguments that show fields the earlier ones lack."""
    scored = [(len(leaf_paths(merge_schema([obs.data]) or {})), i, obs) for i, obs in enumerate(successes)]
    scored.sort(key=lambda item: (-item[0], item[1]))
    chosen: list[Observation] = []
    known: set[str] = set()
    shown: list[dict[str, Any]] = []
    for _, _, obs in scored:
        if len(chosen) >= limit:
            break
        paths = leaf_paths(merge_schema([obs.data]) or {})
        if chosen and (obs.args in shown or not paths - known):
            continue
        chosen.append(obs)
        shown.append(obs.args)
        known |= paths
    return chosen
