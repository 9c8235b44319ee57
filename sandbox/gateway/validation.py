"""A call's arguments checked against its tool's JSON Schema, for a bounded amount of work.

The gateway checks every call before any request (``Gateway._validate``). The arguments come
from a program, so the work is the program's to choose: a million invalid items are two million
``ValidationError`` objects if all are kept, an ``anyOf`` collects every error of every branch
before it fails, and ``jsonschema`` costs 10-30 microseconds per keyword per value. So:

- the values of the arguments are counted first (``HostBounds.checked_values``); more than that
  is not checked at all (``ValidationCut`` with reason ``values``);
- every keyword check is metered while the validator runs (``HostBounds.validation_steps``), and
  so is every error made, kept or not (``HostBounds.validation_errors``); the run's deadline is
  looked at every few hundred steps (reason ``deadline``);
- ``strict`` stops at the first error (``best_match`` then only descends into that error's own
  context), ``warn`` at ``MAX_WARNINGS``.

``pattern`` is never checked on the host (a spec regex like ``^(a+)+$`` backtracks exponentially
on a string the program chose; ``re`` cannot be interrupted) and ``uniqueItems`` only on arrays
of up to ``MAX_UNIQUE_CHECK`` items (quadratic on arrays of objects); the API checks both itself.
Validators are compiled once per schema and cached (``validator_for``). A call that
``sandbox.gateway.fastcheck`` proves valid (most calls, on most schemas) skips jsonschema altogether.

A problem names where the value is (``argument 'work_pools.name.any_'``, ``argument 'items[2]'``)
and, for a value that has structure, what was expected (``expected WorkPoolFilterName = {any_:
[str]} or None, got [...]``; ``explain``): a model cannot learn an API's filter language from
"is not valid under any of the given schemas".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from protocols.model import Tool
from protocols.perschema import PerSchema
from protocols.shapes import input_shape, schema_name
from sandbox.gateway.fastcheck import Check, compile_quick
from sandbox.gateway.http.decoding import is_binary_object
from sandbox.hostbounds import HostBounds

__all__ = ["validator_for", "problems", "ValidationCut", "count_values", "explain", "where_in", "MAX_UNIQUE_CHECK",
           "MAX_WARNINGS"]

#: Longest array whose ``uniqueItems`` the gateway checks (jsonschema compares objects pairwise).
MAX_UNIQUE_CHECK = 500
#: Most problems a ``warn`` call records.
MAX_WARNINGS = 20
#: Most values a call may hold to be proven valid by the quick check (``sandbox.gateway.fastcheck``).
QUICK_VALUES = 5000
#: Steps between two looks at the clock.
_CLOCK_EVERY = 256

_SAFE_CLASSES: dict[Any, Any] = {}
_METER = threading.local()


class ValidationCut(Exception):
    """Checking stopped before the end: ``reason`` is ``values``, ``steps``, ``errors`` or
    ``deadline``; the message says what was passed."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _Meter:
    """The work of one check, against its caps (installed for the checking thread only)."""

    __slots__ = ("steps", "errors", "max_steps", "max_errors", "deadline")

    def __init__(self, max_steps: int, max_errors: int, deadline: float | None) -> None:
        self.steps = 0
        self.errors = 0
        self.max_steps = max_steps
        self.max_errors = max_errors
        self.deadline = deadline

    def step(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise ValidationCut("steps", f"checking them took more than {self.max_steps} schema steps")
        if self.deadline is not None and self.steps % _CLOCK_EVERY == 0 and time.monotonic() > self.deadline:
            raise ValidationCut("deadline", "the run's time ran out while they were being checked")

    def count(self, errors: Iterable[Any]) -> Iterator[Any]:
        for error in errors:
            self.errors += 1
            if self.errors > self.max_errors:
                raise ValidationCut("errors", f"checking them made more than {self.max_errors} errors")
            yield error


def _metered(keyword: Any) -> Any:
    """A keyword function that reports to the thread's meter, when one is installed."""

    def check(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        meter: _Meter | None = getattr(_METER, "meter", None)
        if meter is None:
            return keyword(validator, value, instance, schema)
        meter.step()
        errors = keyword(validator, value, instance, schema)
        return None if errors is None else meter.count(errors)

    return check


def _skip_pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> None:
    return None


def _safe_validator_class(cls: Any) -> Any:
    """``cls`` with ``pattern`` ignored, ``uniqueItems`` bounded and every keyword metered."""
    safe = _SAFE_CLASSES.get(cls)
    if safe is None:
        import jsonschema  # lazy: ~0.1 s of imports, which a run with no call never pays

        unique = cls.VALIDATORS.get("uniqueItems")

        def bounded_unique(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
            if unique is None or (isinstance(instance, list) and len(instance) > MAX_UNIQUE_CHECK):
                return None
            return unique(validator, value, instance, schema)

        keywords = {**cls.VALIDATORS, "pattern": _skip_pattern, "uniqueItems": bounded_unique}
        safe = _SAFE_CLASSES[cls] = jsonschema.validators.extend(
            cls, {name: _metered(fn) for name, fn in keywords.items()})
    return safe


def _build_validator(schema: dict[str, Any]) -> Any:
    import jsonschema  # lazy: about 40 ms, and only a call to a tool with a schema needs it

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return _safe_validator_class(cls)(schema)


_VALIDATORS: PerSchema[Any] = PerSchema(_build_validator)
_QUICK: PerSchema[Check | None] = PerSchema(compile_quick)


def validator_for(schema: dict[str, Any]) -> Any:
    """The compiled jsonschema validator of a parameters schema, built once per schema object.
    Outside a gateway check (no meter installed) it is a plain validator without the meter's caps."""
    return _VALIDATORS(schema)


def quick_check(schema: dict[str, Any]) -> Check | None:
    """The quick proof of validity of a parameters schema (``sandbox.gateway.fastcheck``), or None
    where it cannot decide; compiled once per schema object."""
    return _QUICK(schema)


def count_values(value: Any, stop: int) -> int:
    """How many values (containers, items, keys) ``value`` holds, counting no further than just
    past ``stop``."""
    if not isinstance(value, dict | list):
        return 1
    count = 1
    stack = [value]
    while stack and count <= stop:
        item = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        count += 2 * len(item) if isinstance(item, dict) else len(item)
        stack.extend(v for v in children if isinstance(v, dict | list))
    return count


def problems(tool: Tool, args: dict[str, Any], *, first_only: bool, bounds: HostBounds,
             deadline: float | None = None) -> tuple[list[tuple[str, str | None]], str | None]:
    """What is wrong with ``args`` ((message, parameter) pairs, the most useful first: one with
    ``first_only``, at most ``MAX_WARNINGS`` else), and a note when the tool's schema itself could
    not be used (the call then goes out unchecked). Raises ``ValidationCut`` when checking would
    pass the work bounds or the ``deadline`` (see the module docstring)."""
    props = tool.properties
    allowed = sorted(props)
    out: list[tuple[str, str | None]] = []
    for key in args:
        if props and key not in props or not props and tool.parameters.get("additionalProperties") is False:
            expected = ", ".join(allowed) if allowed else "no arguments"
            out.append((f"{tool.name}: unknown argument {_short(repr(key))} (expected: {expected})", key[:200]))
            if len(out) > MAX_WARNINGS:
                break
    for key in tool.required:
        if key not in args:
            out.append((f"{tool.name}: missing required argument {key!r}", key))
    if out and first_only:
        return out[:1], None
    values = count_values(args, bounds.checked_values)
    if values > bounds.checked_values:
        raise ValidationCut("values", f"they hold more than {bounds.checked_values} values")
    checked = _for_validation(tool, args)
    # the quick check does not look at the clock: only calls small enough to check in a moment
    # take it (a few microseconds a value), the rest go to the metered jsonschema run
    quick = quick_check(tool.parameters) if not out and values <= QUICK_VALUES else None
    if quick is not None and quick(checked):
        return out, None  # proven valid without jsonschema (sandbox/gateway/fastcheck.py)
    wanted = 1 if first_only else MAX_WARNINGS + 1 - len(out)
    found: list[Any] = []
    _METER.meter = _Meter(bounds.validation_steps, bounds.validation_errors, deadline)
    try:
        validator = validator_for(tool.parameters)
        for error in validator.iter_errors(checked):
            if error.validator in ("additionalProperties", "required") and not error.absolute_path:
                continue  # already said above, with the expected names
            found.append(error)
            if len(found) >= wanted:
                break
    except ValidationCut:
        raise
    except Exception as exc:  # a schema jsonschema cannot use: the spec's fault, not the call's
        return out, (f"{tool.name}: the spec's parameter schema cannot be checked "
                     f"({type(exc).__name__}: {str(exc)[:120]}); the arguments were sent unchecked")
    finally:
        _METER.meter = None
    import jsonschema  # lazy: as above

    best = jsonschema.exceptions.best_match(found) if found else None
    for error in ([best] if best is not None else []) + [e for e in found if e is not best]:
        param = str(error.absolute_path[0]) if error.absolute_path else None
        where = f"argument {where_in(error.absolute_path)!r}: " if param else ""
        out.append((f"{tool.name}: {where}{explain(error)}", param))
    if len(out) > MAX_WARNINGS:
        out = out[:MAX_WARNINGS] + [(f"{tool.name}: more problems, not listed (the first {MAX_WARNINGS} are)", None)]
    return out, None


def where_in(path: Iterable[Any]) -> str:
    """A value's place in the arguments as a program writes it: ``work_pools.name.any_``, ``items[2]``."""
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return _short(out)


def explain(error: Any) -> str:
    """What is wrong with a value and, where the value has structure, what was expected.

    jsonschema says ``[...] is not valid under any of the given schemas`` for an ``anyOf`` (every
    ``Optional[Model]`` of a FastAPI spec is one): that names neither the fields nor their types,
    so the expected shape of the branches (``WorkPoolFilterName = {any_: [str]} or None``) is
    said instead. An object of the wrong type, a missing or an unexpected field add the shape or
    the expected field names to jsonschema's own message."""
    schema = error.schema if isinstance(error.schema, dict) else {}

    def shape(sub: Any) -> str:
        name = schema_name(sub)
        text = input_shape(sub, max_depth=2, max_props=10)
        return _short(f"{name} = {text}" if name and text.startswith("{") else text)

    if error.validator in ("anyOf", "oneOf") and isinstance(error.validator_value, list) \
            and "valid under each of" not in error.message:
        branches = [b for b in error.validator_value if isinstance(b, dict)]
        useful = [b for b in branches if not _is_null(b)]
        expected = " or ".join(dict.fromkeys(shape(b) for b in useful[:3])) or "None"
        if len(useful) < len(branches):
            expected += " or None"
        return f"expected {expected}, got {_short(_shown(error.instance))}"
    message = _short(error.message)
    if error.validator == "type" and isinstance(schema.get("properties"), dict) and schema["properties"]:
        return f"expected {shape(schema)}, got {_short(_shown(error.instance))}"
    if error.validator in ("additionalProperties", "unevaluatedProperties", "required") \
            and isinstance(schema.get("properties"), dict):
        fields = ", ".join(list(schema["properties"])[:30])
        return f"{message} (expected fields: {_short(fields)})" if fields else message
    return message


def _is_null(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "null" or schema.get("enum") == [None]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _short(message: str) -> str:
    """jsonschema quotes the offending value whole: a megabyte string makes a megabyte message
    (and so would a megabyte argument name)."""
    return message if len(message) <= 500 else message[:500] + f"... ({len(message) - 500} more characters)"


def _for_validation(tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` with binary objects (``{"base64": ...}``) stood in for by a string where the schema
    asks for a ``format: binary`` string: an upload is checked as the string the spec describes.
    Only the arguments whose schema says so are looked at."""
    out = args
    for key, value in args.items():
        schema = tool.properties.get(key)
        if not isinstance(schema, dict):
            continue
        items = schema.get("items")
        if is_binary_object(value) and schema.get("format") in ("binary", "byte"):
            out = dict(out) if out is args else out
            out[key] = ""
        elif isinstance(value, list) and isinstance(items, dict) and items.get("format") in ("binary", "byte"):
            out = dict(out) if out is args else out
            out[key] = ["" if is_binary_object(v) else v for v in value]
    return out
