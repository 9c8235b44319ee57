"""Values in text answers: many tools (most MCP servers, some HTTP APIs) answer with lines of text,
not JSON, and those lines hold the values the next call needs.

``text_records(text, args)`` reads a text answer line by line into small records that
``probes.arguments.harvest`` keeps like the objects of a JSON answer:

==========================================  =====================================================
line                                        record
==========================================  =====================================================
``/srv/data`` (a path, or a URI)            ``{"path": "/srv/data", "name": "data"}``
``[FILE] notes.txt`` / ``[DIR] src``        ``{"name": "notes.txt", "type": "file", "path":
                                            "<the listed directory>/notes.txt"}``
``size: 1204``, ``Owner = ada``             ``{"size": 1204}``, ``{"owner": "ada"}``
``a3f9c2`` (one word: an id, a name)        ``{"name": "a3f9c2"}``
==========================================  =====================================================

A listed entry becomes a full path when the request named a directory (a path-like argument):
``list_directory(path="/srv/data")`` answering ``[FILE] notes.txt`` gives ``/srv/data/notes.txt``,
what ``read_file(path=...)`` wants. Sentences and headings ("Allowed directories:") give nothing.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["text_records", "is_path_like", "MAX_LINES"]

#: Lines of one text answer read at most.
MAX_LINES = 400
_TAG = re.compile(r"^\[([A-Za-z][\w -]{0,15})\]\s+(.+)$")
_KEYVAL = re.compile(r"^([A-Za-z][\w .-]{0,40}?)\s*(?::|=)\s+(\S.*)$")
_BULLET = re.compile(r"^(?:[-*\u2022]|\d+[.)])\s+")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")


def is_path_like(value: Any) -> bool:
    """A string that reads as a filesystem path or a file URI."""
    return isinstance(value, str) and 1 < len(value) <= 400 and (
        value.startswith(("/", "~/", "file:")) or bool(re.match(r"^[A-Za-z]:[\\/]", value)))


def _number(text: str) -> Any:
    if _NUMBER.match(text):
        return float(text) if "." in text else int(text)
    return text


def _base(args: dict[str, Any]) -> str | None:
    for value in args.values():
        if is_path_like(value):
            return str(value).rstrip("/\\") or "/"
    return None


def text_records(text: str, args: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The records of a text answer, one per line that holds a value (see the module docstring)."""
    base = _base(args or {})
    out: list[dict[str, Any]] = []
    for raw in text.splitlines()[:MAX_LINES]:
        line = _BULLET.sub("", raw.strip()).strip()
        if not line or len(line) > 400:
            continue
        tag = _TAG.match(line)
        if tag:
            name = re.split(r"\s{2,}|\t", tag.group(2).strip())[0].strip()
            record: dict[str, Any] = {"name": name, "type": tag.group(1).strip().lower()}
            if is_path_like(name):
                record["path"] = name
            elif base is not None and "/" not in name:
                record["path"] = f"{'' if base == '/' else base}/{name}"
            out.append(record)
        elif is_path_like(line):
            path = line.split(": ", 1)[0].rstrip(":")  # "/srv/a.txt: 12 lines" names /srv/a.txt
            out.append({"path": path, "name": re.split(r"[\\/]", path.rstrip("/\\"))[-1] or path})
        elif (pair := _KEYVAL.match(line)) is not None:
            key = "_".join(pair.group(1).strip().lower().split())
            value = pair.group(2).strip()
            record = {key: _number(value)}
            if is_path_like(value) and key != "path":
                record["path"] = value
            out.append(record)
        elif not any(c.isspace() for c in line) and len(line) <= 100 and not line.endswith(":"):
            out.append({"name": _number(line)})
    return out
