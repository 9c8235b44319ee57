"""The input of a batch: one JSON object a line, ``{"id", "query"}`` (a solve) or
``{"id", "program"}`` (a run).

The whole file is checked before anything runs. Every bad line is reported with its number --
not JSON, not an object, no ``id`` (a string or an integer), neither or both of ``query`` and
``program``, an empty one, a duplicate ``id`` -- and then the batch does not start (``UsageError``,
exit 2): a batch is fixed and run again rather than half run, and since results are resumable no
work is lost by stopping early. Blank lines are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from atc.errors import UsageError

__all__ = ["Task", "BadLine", "parse_tasks", "parse_lines", "bad_lines_error", "read_tasks", "task_key"]


@dataclass(frozen=True)
class Task:
    """One task: ``query`` (solve) or ``program`` (run); ``line`` is its line in the input (1-based)."""

    id: str | int
    query: str | None = None
    program: str | None = None
    line: int = 0

    @property
    def key(self) -> str:
        return task_key(self.id)

    @property
    def kind(self) -> str:
        return "solve" if self.query is not None else "run"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id}
        if self.query is not None:
            d["query"] = self.query
        else:
            d["program"] = self.program
        return d


@dataclass(frozen=True)
class BadLine:
    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


def task_key(task_id: Any) -> str:
    """How ids are compared: ``7`` and ``"7"`` are the same task (they would be the same line
    in a spreadsheet of results)."""
    return str(task_id)


class _Identified(Protocol):
    @property
    def id(self) -> str | int: ...


Item = TypeVar("Item", bound=_Identified)


def parse_lines(lines: Sequence[str], parse: Callable[[Any, int], Item | str]) -> tuple[list[Item], list[BadLine]]:
    """The items of JSON Lines text, for every input that is one object a line (a batch's tasks,
    an evaluation suite): each non-blank line is decoded and handed to ``parse(obj, number)``,
    which returns the item or why the line is bad; an item whose id came before (``task_key``)
    is a bad line too. Every bad line is kept with its number."""
    items: list[Item] = []
    bad: list[BadLine] = []
    seen: dict[str, int] = {}
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            bad.append(BadLine(number, f"not JSON ({exc.msg} at column {exc.colno})"))
            continue
        item = parse(obj, number)
        if isinstance(item, str):
            bad.append(BadLine(number, item))
            continue
        key = task_key(item.id)
        if key in seen:
            bad.append(BadLine(number, f"duplicate id {item.id!r} (first on line {seen[key]})"))
            continue
        seen[key] = number
        items.append(item)
    return items, bad


def bad_lines_error(source: str | Path, bad: Sequence[BadLine], hint: str) -> UsageError:
    """The error that lists an input's bad lines (the first 20) before anything runs."""
    shown = "\n  ".join(str(b) for b in bad[:20])
    more = f"\n  ... and {len(bad) - 20} more" if len(bad) > 20 else ""
    return UsageError(f"{source}: {len(bad)} bad line{'s' if len(bad) != 1 else ''} (nothing was run):\n  {shown}{more}",
                      hint=hint)


def _task(obj: Any, number: int) -> Task | str:
    if not isinstance(obj, dict):
        return f"not a JSON object but {type(obj).__name__}"
    task_id = obj.get("id")
    if isinstance(task_id, bool) or not isinstance(task_id, (str, int)) or task_id == "":
        return 'no "id" (a non-empty string or an integer)'
    query, program = obj.get("query"), obj.get("program")
    if (query is None) == (program is None):
        return 'give exactly one of "query" (a task to solve) or "program" (code to run)'
    text_value = query if query is not None else program
    if not isinstance(text_value, str) or not text_value.strip():
        which = "query" if query is not None else "program"
        return f'"{which}" must be a non-empty string'
    return Task(task_id, query=query, program=program, line=number)


def parse_tasks(lines: list[str]) -> tuple[list[Task], list[BadLine]]:
    return parse_lines(lines, _task)


def read_tasks(path: str | Path) -> list[Task]:
    """The tasks of a JSONL file (``-`` reads stdin); ``UsageError`` listing every bad line."""
    import sys

    try:
        text = sys.stdin.read() if str(path) == "-" else Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"cannot read {path}: {reason}", hint="give a UTF-8 JSON Lines file") from exc
    tasks, bad = parse_tasks(text.splitlines())
    if bad:
        raise bad_lines_error(path, bad, hint='each line is {"id": ..., "query": "..."} or {"id": ..., "program": '
                                              '"..."}, ids unique')
    return tasks
