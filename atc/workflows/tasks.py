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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from atc.errors import UsageError

__all__ = ["Task", "BadLine", "parse_tasks", "read_tasks", "task_key"]


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


def parse_tasks(lines: list[str]) -> tuple[list[Task], list[BadLine]]:
    tasks: list[Task] = []
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
        if not isinstance(obj, dict):
            bad.append(BadLine(number, f"not a JSON object but {type(obj).__name__}"))
            continue
        task_id = obj.get("id")
        if isinstance(task_id, bool) or not isinstance(task_id, (str, int)) or task_id == "":
            bad.append(BadLine(number, 'no "id" (a non-empty string or an integer)'))
            continue
        query, program = obj.get("query"), obj.get("program")
        if (query is None) == (program is None):
            bad.append(BadLine(number, 'give exactly one of "query" (a task to solve) or "program" (code to run)'))
            continue
        text_value = query if query is not None else program
        if not isinstance(text_value, str) or not text_value.strip():
            which = "query" if query is not None else "program"
            bad.append(BadLine(number, f'"{which}" must be a non-empty string'))
            continue
        key = task_key(task_id)
        if key in seen:
            bad.append(BadLine(number, f"duplicate id {task_id!r} (first on line {seen[key]})"))
            continue
        seen[key] = number
        tasks.append(Task(task_id, query=query, program=program, line=number))
    return tasks, bad


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
        shown = "\n  ".join(str(b) for b in bad[:20])
        more = f"\n  ... and {len(bad) - 20} more" if len(bad) > 20 else ""
        raise UsageError(f"{path}: {len(bad)} bad line{'s' if len(bad) != 1 else ''} (nothing was run):\n  {shown}{more}",
                         hint='each line is {"id": ..., "query": "..."} or {"id": ..., "program": "..."}, ids unique')
    return tasks
