"""A benchmark suite: tasks with gold solutions, and the collections they use.

A suite on disk is a JSON Lines file of tasks, one object a line::

    {"id": "t1", "query": "Who wrote the cheapest book about gardens?",
     "solution": ["search_books", "GET /books/{book_id}", "get_author"],
     "answer": "optional reference answer", "tools": ["optional", "candidate tools"]}

``solution`` is the gold: tool names or ``METHOD /path`` routes (``atc.evaluation.gold``);
``tools``, when given, are the candidates the model is shown for that task (tool names, routes,
or collection names for all their tools: the paper gives each task 20 candidates that include
the gold ones); ``solvable`` (default true)
is ToolEval's flag for a task that no tool can solve. A task without ``id`` gets its line number; a
gold step may also be a ``[name, calls]`` pair (ToolFlow's). A JSON file holding a list of such
objects (RestBench's shape) is read the same way. Every bad line is reported with its number
before anything runs, as ``atc batch`` does.

The collections come from ``--tools``, or from a manifest, ``suite.json`` next to the tasks (or
given as SUITE itself): ``{"name", "tasks": "tasks.jsonl", "tools": [spec paths relative to the
manifest, or "example:NAME" for a bundled example], "api": "mock" | "real", "description"}``.
Readers of public formats (``atc.evaluation.readers``) build the same ``Suite`` in memory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atc import examples
from atc.errors import UsageError
from atc.evaluation.gold import GoldStep, parse_step
from atc.toolsets import collections_of
from atc.workflows.jobs import Job
from atc.workflows.tasks import bad_lines_error, parse_lines
from sandbox.api import Toolset

if TYPE_CHECKING:
    from protocols.model import Collection

__all__ = ["EvalTask", "Suite", "TaskNote", "parse_suite_lines", "read_tasks_file", "read_manifest", "BUILTIN"]

#: The suite shipped with atc, on the bundled example APIs (``atc eval examples``).
BUILTIN = "examples"


@dataclass(frozen=True)
class EvalTask:
    """One task of a suite. ``solution``: the gold steps as written; ``tools``: candidate tools
    shown to the model (empty: the solve's own choice); ``meta``: what a reader kept of the
    original (its id, call counts...)."""

    id: str
    query: str
    solution: tuple[str, ...]
    answer: str | None = None
    tools: tuple[str, ...] = ()
    solvable: bool = True
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def gold(self) -> list[GoldStep]:
        return [parse_step(s) for s in self.solution]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "query": self.query, "solution": list(self.solution)}
        if self.answer is not None:
            d["answer"] = self.answer
        if self.tools:
            d["tools"] = list(self.tools)
        if not self.solvable:
            d["solvable"] = False
        return d


@dataclass(frozen=True)
class TaskNote:
    """A note about particular tasks: what they share (``gold step(s) name a route the spec does
    not have``) and, per task, the detail (``("q3", "'GET /x'")``)."""

    what: str
    items: tuple[tuple[str, str], ...]

    def of(self, ids: set[str]) -> TaskNote:
        return TaskNote(self.what, tuple(i for i in self.items if i[0] in ids))

    def text(self) -> str:
        return f"{len(self.items)} {self.what}: " + "; ".join(f"{task}: {detail}" for task, detail in self.items[:6])


@dataclass
class Suite:
    """Tasks and the collections they use. ``api``: how the tools are reached by default
    (``mock``: ``atc mock`` of the specs; ``real``: the specs' servers); ``notes``: what a reader
    wants the user to know (data problems it fixed or could not), ending with the ``task_notes``
    of the suite's own tasks: a part of it (``head``) speaks only of the tasks it runs."""

    name: str
    tasks: list[EvalTask]
    collections: list[Collection] = field(default_factory=list)
    api: str = "mock"
    description: str = ""
    source: str = ""
    notes: list[str] = field(default_factory=list)
    task_notes: list[TaskNote] = field(default_factory=list)
    #: how each task's candidate tools were chosen (None: the suite gives none), for the summary
    candidates: str | None = None
    _wide: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._wide = list(self.notes)
        ids = {t.id for t in self.tasks}
        self.task_notes = [kept for n in self.task_notes if (kept := n.of(ids)).items]
        self.notes = self._wide + [n.text() for n in self.task_notes]

    def toolset(self) -> Toolset:
        if not self.collections:
            raise UsageError(f"suite {self.name!r} names no collections", hint="pass --tools SPEC (repeatable)")
        return Toolset(collections=list(self.collections))

    def make_job(self, toolset: Toolset, limits: Any, **options: Any) -> Any:
        """The batch job that runs this suite's tasks (``atc.workflows.jobs.Job``); a reader's
        suite whose tasks run otherwise gives its own (BFCL: each task its tools, one run per
        user turn)."""
        return Job(toolset, limits, **options)

    def head(self, limit: int | None) -> Suite:
        """The first ``limit`` tasks (a quick look at a large suite)."""
        if limit is None:
            return self
        return Suite(self.name, self.tasks[:limit], self.collections, self.api, self.description, self.source,
                     list(self._wide), list(self.task_notes), self.candidates)


def _strings(value: Any) -> list[str] | None:
    """Steps as strings; a ``[name, calls]`` pair (ToolFlow's gold) counts as its name."""
    if not isinstance(value, list):
        return None
    out = []
    for v in value:
        if isinstance(v, list) and len(v) == 2 and isinstance(v[1], int) and not isinstance(v[1], bool):
            v = v[0]
        if not isinstance(v, str) or not v.strip():
            return None
        out.append(v.strip())
    return out


def _task(obj: Any, number: int) -> EvalTask | str:
    """A task from one parsed line (its number is its id when it has none), or why it is not one."""
    if not isinstance(obj, dict):
        return f"not a JSON object but {type(obj).__name__}"
    task_id = obj.get("id", number)
    if isinstance(task_id, bool) or not isinstance(task_id, (str, int)) or task_id == "":
        return '"id" must be a non-empty string or an integer'
    query = obj.get("query")
    if not isinstance(query, str) or not query.strip():
        return '"query" must be a non-empty string'
    solution = _strings(obj.get("solution"))
    if solution is None:
        return '"solution" must be a list of tool names or "METHOD /path" steps'
    tools = _strings(obj.get("tools", []))
    if tools is None:
        return '"tools" must be a list of tool names or "METHOD /path" steps'
    answer = obj.get("answer")
    if answer is not None and not isinstance(answer, str):
        answer = json.dumps(answer, ensure_ascii=False)
    solvable = obj.get("solvable", True)
    if not isinstance(solvable, bool):
        return '"solvable" must be true or false'
    meta: dict[str, Any] = obj["meta"] if isinstance(obj.get("meta"), dict) else {}
    return EvalTask(str(task_id), query.strip(), tuple(solution), answer, tuple(tools), solvable, meta)


def parse_suite_lines(lines: Sequence[str], source: str = "<suite>") -> list[EvalTask]:
    """The tasks of a suite's JSONL text; ``UsageError`` listing every bad line (nothing runs),
    as ``atc batch`` reads its input (``atc.workflows.tasks.parse_lines``)."""
    tasks, bad = parse_lines(lines, _task)
    if bad:
        raise bad_lines_error(source, bad, hint='each line is {"id": ..., "query": "...", "solution": '
                                                '["tool or METHOD /path", ...]}')
    if not tasks:
        raise UsageError(f"{source}: no tasks", hint="a suite is a JSON Lines file, one task a line")
    return tasks


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"cannot read {path}: {reason}") from exc


def read_tasks_file(path: Path) -> list[EvalTask]:
    """The tasks of a JSONL file, or of a JSON file holding a list of task objects (RestBench's
    shape: the position is the id of a task without one)."""
    text = _read_text(path)
    if path.suffix == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from exc
        if isinstance(doc, list):
            return parse_suite_lines([json.dumps(item) for item in doc], str(path))
    return parse_suite_lines(text.splitlines(), str(path))


def _tool_source(item: str, base: Path) -> str:
    """A manifest's ``tools`` entry as a ``--tools`` value: ``example:NAME`` is a bundled example's
    spec, a relative path is relative to the manifest, anything else (a collection in the store,
    an MCP source) is kept as it is."""
    if item.startswith("example:"):
        folder = examples.path(item.split(":", 1)[1])
        if folder.is_file():
            return str(folder)
        specs = sorted(p for p in folder.iterdir() if p.suffix in (".json", ".yaml", ".yml"))
        if not specs:
            raise UsageError(f"bundled example {item!r} has no spec file")
        return str(specs[0])
    candidate = (base / item).expanduser()
    return str(candidate) if candidate.exists() else item


def read_manifest(path: Path, *, load_tools: bool = True) -> Suite:
    """A suite from its manifest (``suite.json``); the collections are loaded unless told not to
    (``--tools`` replaces them)."""
    try:
        doc = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("tasks"), str):
        raise UsageError(f"{path}: a suite manifest is an object with \"tasks\" (the tasks JSONL, relative to it)",
                         hint='example: {"name": "mine", "tasks": "tasks.jsonl", "tools": ["openapi.json"]}')
    tools = doc.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise UsageError(f"{path}: \"tools\" must be a list of spec paths or collection names")
    api = doc.get("api", "mock")
    if api not in ("mock", "real"):
        raise UsageError(f"{path}: \"api\" must be \"mock\" or \"real\", not {api!r}")
    base = path.parent
    tasks = read_tasks_file(base / doc["tasks"])
    collections = []
    if load_tools and tools:
        collections = collections_of([_tool_source(t, base) for t in tools])
    name = doc.get("name") if isinstance(doc.get("name"), str) else base.name
    return Suite(str(name), tasks, collections, api=api, description=str(doc.get("description") or ""),
                 source=str(path))
