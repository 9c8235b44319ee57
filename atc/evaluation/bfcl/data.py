"""BFCL's multi-turn data, from the installed ``bfcl-eval`` package, read as plain files.

``package_data()`` finds the package's ``data`` folder without importing the package (its
``__init__`` is empty today, but nothing of it is needed); ``load_tasks(category)`` reads a
category's questions (``BFCL_v*_multi_turn_CATEGORY.json``, one JSON object a line) and its
ground truth (``possible_answer/`` of the same name) into ``BfclTask`` objects;
``function_docs(class_name)`` reads the function docs BFCL shows every model for an API class
(``multi_turn_func_doc/*.json``). A folder given instead (``atc eval bfcl-...:PATH``) is read the
same way: a copy of that ``data`` folder (BFCL's repository has it at
``berkeley-function-call-leaderboard/bfcl_eval/data``).

``to_json_schema`` turns a function doc's parameters into JSON Schema: BFCL writes ``dict`` for
``object``, ``float`` for ``number``, ``tuple`` for ``array`` and ``any`` for any value.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atc.errors import ConfigError, UsageError

__all__ = ["BfclTask", "CATEGORIES", "package_data", "load_tasks", "function_docs", "to_json_schema", "INSTALL"]

#: The multi-turn categories read (BFCL's names, as in its file names).
CATEGORIES = ("base", "miss_func", "miss_param", "long_context")
#: How to get the data (the package's other dependencies are not needed here).
INSTALL = "pip install --no-deps bfcl-eval==2026.3.23 mpmath   (or: pip install 'atc[bfcl]' and the first part)"

_TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array", "str": "string",
          "int": "integer", "bool": "boolean"}


@dataclass(frozen=True)
class BfclTask:
    """One multi-turn entry: its user turns (each a list of messages; empty for a turn of
    ``miss_func`` where held-out functions come back), initial state, API classes, the functions
    held out until a turn (``missed``: turn index -> names), and the ground-truth calls of each
    turn (BFCL's call strings)."""

    id: str
    category: str
    turns: list[list[dict[str, Any]]]
    initial_config: dict[str, Any]
    involved_classes: list[str]
    ground_truth: list[list[str]]
    missed: dict[int, list[str]] = field(default_factory=dict)

    @property
    def long_context(self) -> bool:
        return "long_context" in self.category

    def entry(self) -> dict[str, Any]:
        """The entry as BFCL's checker reads it."""
        return {"id": self.id, "initial_config": self.initial_config, "involved_classes": self.involved_classes}


def package_data() -> Path:
    """The ``data`` folder of the installed ``bfcl-eval`` (``ConfigError`` with the install line)."""
    spec = importlib.util.find_spec("bfcl_eval")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        data = Path(folder) / "data"
        if data.is_dir():
            return data
    raise ConfigError("BFCL's data comes from the bfcl-eval package, which is not installed", hint=INSTALL)


def _find(folder: Path, pattern: str, what: str) -> Path:
    found = sorted(folder.glob(pattern))
    if not found:
        raise UsageError(f"no {what} in {folder} (looked for {pattern})",
                         hint=f"give BFCL's data folder, or install the package: {INSTALL}")
    return found[-1]  # the newest version when several are there


def _lines(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{path}:{number}: not JSON ({exc})") from None
        if isinstance(item, dict):
            out.append(item)
    return out


def load_tasks(category: str, folder: Path | None = None) -> list[BfclTask]:
    """The tasks of one multi-turn category (``CATEGORIES``), with their ground truth."""
    if category not in CATEGORIES:
        raise UsageError(f"unknown BFCL multi-turn category {category!r}", hint=f"one of {', '.join(CATEGORIES)}")
    data = folder if folder is not None else package_data()
    questions = _find(data, f"BFCL_v*_multi_turn_{category}.json", f"BFCL multi_turn_{category} questions")
    answers = _find(data / "possible_answer", f"BFCL_v*_multi_turn_{category}.json",
                    f"BFCL multi_turn_{category} ground truth")
    truth = {str(a.get("id")): a.get("ground_truth") for a in _lines(answers)}
    tasks = []
    for q in _lines(questions):
        task_id = str(q.get("id"))
        gt = truth.get(task_id)
        if not isinstance(gt, list) or not isinstance(q.get("question"), list):
            continue
        missed = {int(k): list(v) for k, v in (q.get("missed_function") or {}).items()}
        tasks.append(BfclTask(task_id, category, list(q["question"]), dict(q.get("initial_config") or {}),
                              list(q.get("involved_classes") or []), [list(t) for t in gt], missed))
    return tasks


def function_docs(class_name: str, folder: Path | None = None) -> list[dict[str, Any]]:
    """BFCL's function docs of an API class (what every model is shown for it)."""
    # bfcl-eval: optional (atc[bfcl]); only BFCL suites need it
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    data = folder if folder is not None else package_data()
    name = MULTI_TURN_FUNC_DOC_FILE_MAPPING.get(class_name)
    if name is None:
        raise UsageError(f"BFCL names no function docs for the class {class_name!r}")
    return _lines(data / "multi_turn_func_doc" / name)


def to_json_schema(node: Any) -> Any:
    """A BFCL parameter schema as JSON Schema (see the module docstring)."""
    if isinstance(node, list):
        return [to_json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str):
            if value == "any":
                continue
            out[key] = _TYPES.get(value, value)
        elif key in ("properties",) and isinstance(value, dict):
            out[key] = {k: to_json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf"):
            out[key] = to_json_schema(value)
        else:
            out[key] = value
    return out
