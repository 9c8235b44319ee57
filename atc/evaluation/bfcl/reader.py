"""BFCL's multi-turn categories as ``atc eval`` suites.

``read_category(category, path)`` is the reader behind ``atc eval bfcl-multi-turn-base`` (and
``-miss-func``, ``-miss-param``, ``-long-context``): the data comes from the installed
``bfcl-eval`` package, or from ``path`` when it is (or holds) a copy of BFCL's ``data`` folder.
Each task of the suite is one BFCL entry: its query is the first user turn (what the progress
and the judge see), its gold the functions of its ground truth (for Path% and Prec%), and its
success BFCL's own checker's verdict. The suite has no collections of its own: every task
brings its tools (``state.TaskTools``), run by the suite's job (``job.BfclJob``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atc.evaluation.bfcl.data import CATEGORIES, BfclTask, load_tasks, package_data
from atc.evaluation.bfcl.job import BfclJob
from atc.evaluation.suite import EvalTask, Suite
from sandbox.api import Toolset

__all__ = ["BfclSuite", "read_category", "suite_name", "data_folder"]

_CALLED = re.compile(r"^\s*([A-Za-z_]\w*)\s*\(")


def suite_name(category: str) -> str:
    return f"bfcl-multi-turn-{category.replace('_', '-')}"


@dataclass
class BfclSuite(Suite):
    """A BFCL multi-turn category: the ``EvalTask`` of each entry, and the entries themselves."""

    entries: dict[str, BfclTask] = field(default_factory=dict)
    folder: Path | None = None

    def toolset(self) -> Any:
        return Toolset(collections=[])  # each task brings its own

    def head(self, limit: int | None) -> BfclSuite:
        if limit is None:
            return self
        return BfclSuite(self.name, self.tasks[:limit], [], self.api, self.description, self.source, list(self.notes),
                         entries=self.entries, folder=self.folder)

    def make_job(self, toolset: Any, limits: Any, **options: Any) -> Any:
        return BfclJob(toolset, limits, tasks=self.entries, folder=self.folder, **options)


def data_folder(path: Path | None) -> Path | None:
    """``path`` when it holds BFCL's multi-turn files (itself, or a ``data`` or ``bfcl_eval/data``
    below it), else None: the installed package's."""
    if path is None:
        return None
    for folder in (path, path / "data", path / "bfcl_eval" / "data"):
        if folder.is_dir() and any(folder.glob("BFCL_v*_multi_turn_base.json")):
            return folder
    return None


def _gold(entry: BfclTask) -> tuple[str, ...]:
    names = [m.group(1) for turn in entry.ground_truth for call in turn if (m := _CALLED.match(call))]
    return tuple(dict.fromkeys(names))


def read_category(category: str, path: Path | None = None) -> BfclSuite:
    """The suite of one multi-turn category (see the module docstring)."""
    folder = data_folder(path)
    entries = load_tasks(category, folder)
    tasks = []
    for entry in entries:
        first = next((str(m.get("content") or "") for m in entry.turns[0] if m.get("role", "user") == "user"), "") \
            if entry.turns else ""
        tasks.append(EvalTask(entry.id, first.strip() or entry.id, _gold(entry),
                              meta={"turns": len(entry.turns), "category": category,
                                    "classes": list(entry.involved_classes)}))
    source = str(folder or package_data())
    return BfclSuite(suite_name(category), tasks, [], api="real",
                     description=f"BFCL multi-turn {category}: {len(tasks)} tasks, scored by BFCL's own checker",
                     source=source, entries={e.id: e for e in entries}, folder=folder)


#: The categories, for the registration in ``atc.evaluation.readers``.
NAMES = {suite_name(c): c for c in CATEGORIES}
