"""A host function's result as the JSON data a program gets, and its error as safe text.

``jsonable(value, max_values)`` turns what a Python function returns into plain JSON data (the
program in the sandbox gets exactly what an HTTP API's parsed body would be):

- JSON data stays as it is; a float that is NaN or infinite becomes ``None`` (JSON has neither;
  pandas writes them as ``null`` too); a ``tuple``, ``set`` or ``frozenset`` becomes a list (a
  named tuple an object), a dict key that is a number, a bool or None becomes its JSON text, as
  ``json.dumps`` does;
- dataclasses and pydantic models become objects, enums their value, ``datetime``/``date``/
  ``time`` ISO text, ``UUID``/``Decimal``/``Path`` text;
- ``bytes`` become ``{"content_type", "size", "base64"}``, the shape of a binary HTTP response;
- a pandas ``DataFrame`` becomes its rows (``to_dict(orient="records")``), a ``Series`` an object,
  numpy arrays and scalars lists and numbers (pandas and numpy are never imported here: their
  objects are recognised by their module);
- anything else is refused with a ``NotJson`` that names its type and where it was
  (``$.rows[3].when: a value of type Connection is not JSON data``).

Work is bounded: at most ``max_values`` values (the run's ``HostBounds.frame_values``) and
``MAX_DEPTH`` levels (a cycle ends there).

``error_text(exc)`` is what the program is told of an exception the function raised: its class
and message, never the host's traceback, with absolute paths of the host reduced to their last
part (``.../report.csv``).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import math
import os
import pathlib
import re
import uuid
from typing import Any

__all__ = ["jsonable", "NotJson", "error_text", "MAX_DEPTH"]

#: Deepest nesting of a result (as frames: ``sandbox.frames.MAX_FRAME_DEPTH``).
MAX_DEPTH = 100
_TEXT = (datetime.datetime, datetime.date, datetime.time)
_STRINGS = (uuid.UUID, decimal.Decimal, pathlib.PurePath)


class NotJson(ValueError):
    """A result that cannot be made JSON data (the message says what, and where)."""


class _Walk:
    def __init__(self, max_values: int) -> None:
        self.left = max_values

    def count(self, where: str) -> None:
        self.left -= 1
        if self.left < 0:
            raise NotJson(f"{where}: the result holds more JSON values than a run of this --memory may take")

    def value(self, value: Any, where: str, depth: int) -> Any:
        self.count(where)
        kind = type(value)
        if value is None or kind is str or kind is bool or kind is int:
            return value
        if kind is float:
            return value if math.isfinite(value) else None
        if depth >= MAX_DEPTH:
            raise NotJson(f"{where}: the result is nested more than {MAX_DEPTH} levels deep (a cycle?)")
        if kind is dict:
            return self.mapping(value, where, depth)
        if kind is list:
            return [self.value(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
        return self.other(value, where, depth)

    def mapping(self, value: Any, where: str, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(key, enum.Enum):
                key = key.value
            if isinstance(key, bool) or key is None:
                key = "true" if key is True else "false" if key is False else "null"
            elif isinstance(key, int | float):
                key = str(key)
            elif not isinstance(key, str):
                raise NotJson(f"{where}: a key of type {type(key).__name__} is not JSON (keys are strings)")
            out[key] = self.value(item, f"{where}.{key}" if key.isidentifier() else f"{where}[{key!r}]", depth + 1)
        return out

    def other(self, value: Any, where: str, depth: int) -> Any:
        if isinstance(value, str):  # a str subclass
            return str(value)
        if isinstance(value, bool):
            return bool(value)
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return float(value) if math.isfinite(value) else None
        if isinstance(value, enum.Enum):
            return self.value(value.value, where, depth + 1)
        if isinstance(value, _TEXT):
            return value.isoformat()
        if isinstance(value, _STRINGS):
            return str(value)
        if isinstance(value, bytes | bytearray | memoryview):
            data = bytes(value)
            return {"content_type": "application/octet-stream", "size": len(data),
                    "base64": base64.b64encode(data).decode("ascii")}
        if isinstance(value, tuple) and hasattr(value, "_asdict"):
            return self.mapping(value._asdict(), where, depth)
        if isinstance(value, dict):
            return self.mapping(value, where, depth)
        if isinstance(value, list | tuple | set | frozenset):
            items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
            return [self.value(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(items)]
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self.mapping({f.name: getattr(value, f.name) for f in dataclasses.fields(value)}, where, depth)
        dump = getattr(value, "model_dump", None)
        if callable(dump) and not isinstance(value, type):
            return self.value(dump(mode="json"), where, depth + 1)
        return self.foreign(value, where, depth)

    def foreign(self, value: Any, where: str, depth: int) -> Any:
        """pandas and numpy objects, known by their module (neither is imported here)."""
        module = type(value).__module__.split(".", 1)[0]
        name = type(value).__name__
        if module == "pandas":
            if name == "DataFrame":
                return self.value(value.to_dict(orient="records"), where, depth + 1)
            if name == "Series":
                return self.value(value.to_dict(), where, depth + 1)
            if name in ("Timestamp", "Timedelta"):
                return value.isoformat()
            if name in ("NaTType", "NAType"):
                return None
        if module == "numpy":
            if name == "ndarray":
                return self.value(value.tolist(), where, depth + 1)
            item = getattr(value, "item", None)
            if callable(item):
                return self.value(item(), where, depth + 1)
        raise NotJson(f"{where}: a value of type {name} is not JSON data")


def jsonable(value: Any, max_values: int) -> Any:
    """``value`` as plain JSON data (see the module docstring); ``NotJson`` when it cannot be."""
    return _Walk(max_values).value(value, "$", 0)


_ABSOLUTE = re.compile(r"(?<![\w.:/\\-])(/(?:[^\s/'\"<>:,;()\[\]{}]+/)+[^\s/'\"<>:,;()\[\]{}]*)")
_ROOTS: list[set[str]] = []


def _host_roots() -> set[str]:
    if not _ROOTS:
        try:
            _ROOTS.append({name for name in os.listdir("/") if name})
        except OSError:
            _ROOTS.append(set())
    return _ROOTS[0]


def _short(match: re.Match[str]) -> str:
    path = match.group(1)
    first = path.strip("/").split("/", 1)[0]
    if first not in _host_roots():
        return path  # not a place on this host (an API path: /books/3)
    last = path.rstrip("/").rsplit("/", 1)[-1]
    return f".../{last}" if last else "..."


def error_text(exc: BaseException, limit: int = 500) -> str:
    """``ClassName: message`` of an exception a host function raised, safe to show a program."""
    try:
        message = repr(exc.args[0]) if isinstance(exc, KeyError) and len(exc.args) == 1 else str(exc)
    except Exception:
        message = ""
    message = _ABSOLUTE.sub(_short, " ".join(message.split()))
    if len(message) > limit:
        message = message[:limit] + "..."
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
