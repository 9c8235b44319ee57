"""Readers of public benchmark formats: a dataset somewhere on disk -> a ``Suite`` in memory.

The data is not ours to ship, so a reader reads it from the path the user gives (``atc eval
NAME:PATH``), or from ``$ATC_BENCH_DATA`` when no path is given. PATH may be the file itself, the
benchmark's own folder, or a folder holding several benchmarks (``restbench/``, ``toolflow/``,
``toolbench/``...): each reader looks for its files under the layouts of the upstream repositories.

- ``restbench-tmdb``, ``restbench-spotify``: RestBench (RestGPT): ``datasets/{tmdb,spotify}.json``
  (``{query, solution: ["METHOD /path", ...]}``) and ``specs/{tmdb,spotify}_oas.json``. Each task
  is shown 20 candidate tools, as in the Chain-of-Tools paper: for TMDB, ToolFlow's published
  lists (``dataset/tmdb/tmdb.data.candidate=20.v2.json``, when found under the same root); where
  no list is published (Spotify; TMDB without that file) they are built the way those lists are:
  the task's gold tools first, then tools drawn at random from the rest up to 20, with a fixed
  seed (``sample_candidates``), so that both datasets run the same way and every run draws the
  same lists.
- ``toolflow-examples`` (all 131), ``toolflow-examples-movie`` (40), ``-food`` (41), ``-weather``
  (50): the example tasks the ATC repository publishes of ToolFlow
  (``example_ToolFlow_data_v0/*.example.data.json``), not the paper's 224-task ToolFlow, which is
  not released; the tools are the union of the queries' ``api_list`` entries, each query's list
  its candidates, the gold its ``[api_name, calls]`` pairs. ``toolflow-movie`` and the like are
  the older names of the three.
- ``toolbench``: ToolBench / StableToolBench test queries (``G1_instruction.json``...: ``query``,
  ``api_list``, ``relevant APIs``); one collection per ToolBench tool, each query's ``api_list``
  its candidates, its relevant APIs the gold. A folder reads every query file under it.

Readers register by name as a plug-in would (``register_reader``).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from atc.errors import UsageError
from atc.evaluation.bfcl.reader import read_category
from atc.evaluation.gold import parse_step, route_key
from atc.evaluation.suite import EvalTask, Suite, TaskNote
from protocols.building import collection_slug
from protocols.loaders import load_spec
from protocols.model import Collection, python_identifier, snake_case
from protocols.toolbench import ToolBenchLoader

__all__ = ["SuiteReader", "register_reader", "readers", "read_suite_data", "find_file", "sample_candidates",
           "CANDIDATES", "CANDIDATE_SEED", "packaged"]

#: Candidate tools per task where a benchmark publishes none (the paper's 20), and the seed of the draw.
CANDIDATES = 20
CANDIDATE_SEED = 0

#: A reader: the data path -> the suite.
SuiteReader = Callable[[Path], Suite]
_READERS: dict[str, tuple[SuiteReader, str]] = {}


_PACKAGED: set[str] = set()


def register_reader(name: str, reader: SuiteReader, description: str = "", *, packaged: bool = False) -> None:
    """Make ``atc eval NAME:PATH`` read PATH with ``reader`` (a later registration replaces one).
    ``packaged``: the data comes with an installed package, PATH is optional (``atc eval NAME``)."""
    _READERS[name] = (reader, description)
    if packaged:
        _PACKAGED.add(name)


def packaged(name: str) -> bool:
    """Does reader ``name`` find its data without a path?"""
    return name in _PACKAGED


def readers() -> dict[str, str]:
    """Registered reader names and what each reads."""
    return {name: desc for name, (_, desc) in sorted(_READERS.items())}


def read_suite_data(name: str, path: Path) -> Suite:
    if name not in _READERS:
        raise UsageError(f"unknown suite format {name!r}", hint=f"formats: {', '.join(sorted(_READERS))}")
    if not path.exists():
        raise UsageError(f"{name}: no such file or folder: {path}",
                         hint=f"give the data's path: atc eval {name}:PATH (or set ATC_BENCH_DATA)")
    return _READERS[name][0](path)


def find_file(path: Path, candidates: list[str], what: str) -> Path:
    """``path`` itself when it is a file, else the first of ``candidates`` found under it."""
    if path.is_file():
        return path
    for rel in candidates:
        if (path / rel).is_file():
            return path / rel
    raise UsageError(f"no {what} under {path}", hint=f"looked for: {', '.join(candidates)}")


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc


def _root_of(path: Path, marker: str) -> Path | None:
    """The folder holding ``marker`` (a folder name) among ``path`` and its parents."""
    for folder in [path if path.is_dir() else path.parent, *path.parents]:
        if folder.name == marker:
            return folder.parent
        if (folder / marker).is_dir():
            return folder
    return None


# -- RestBench --------------------------------------------------------------------------------


def _gold_notes(tasks: list[EvalTask], collection: Collection) -> list[TaskNote]:
    """What the user should know about gold routes: those matched only with their parameter
    names ignored or stray spaces trimmed, and those no tool of the spec serves."""
    exact = {f"{t.method} {t.path}" for t in collection.tools}
    keyed = {route_key(t.method, t.path) for t in collection.tools}
    loose: list[tuple[str, str]] = []
    missing: list[tuple[str, str]] = []
    for task in tasks:
        for step in task.solution:
            gold = parse_step(step)
            if gold.kind == "route" and gold.key not in keyed:
                missing.append((task.id, repr(step.strip())))
            elif gold.kind == "route" and step not in exact:
                loose.append((task.id, repr(step)))
    return [TaskNote("gold step(s) match a route only with stray spaces or parameter names ignored", tuple(loose)),
            TaskNote("gold step(s) name a route the spec does not have (no call can match them)", tuple(missing))]


def _restbench(which: str) -> SuiteReader:
    def read(path: Path) -> Suite:
        dataset = find_file(path, [f"datasets/{which}.json", f"restbench/datasets/{which}.json", f"{which}.json"],
                            f"RestBench {which} dataset")
        data = _load_json(dataset)
        if not isinstance(data, list) or not all(isinstance(d, dict) and "query" in d for d in data):
            raise UsageError(f"{dataset}: not a RestBench dataset (a list of {{query, solution}})")
        spec = find_file(dataset.parent.parent if path.is_file() else path,
                         [f"specs/{which}_oas.json", f"restbench/specs/{which}_oas.json"], f"RestBench {which} spec")
        collection = load_spec(spec)
        tasks = [EvalTask(f"q{i}", str(d["query"]).strip(), tuple(s.strip() for s in d.get("solution") or []),
                          meta={"index": i}) for i, d in enumerate(data)]
        notes: list[str] = []
        gold_notes = _gold_notes(tasks, collection)
        published = _toolflow_candidates(path, dataset, tasks, collection) if which == "tmdb" else None
        if published is not None and published[0] is not None:
            tasks, how = published[0], published[1]
        else:
            if published is not None:
                notes.append(published[1])
            tasks = sample_candidates(tasks, collection, salt=f"restbench-{which}")
            how = (f"{CANDIDATES} per task: the gold tools, then tools drawn at random from the rest "
                   f"(seed {CANDIDATE_SEED}; none published for this dataset)")
        notes.append(f"candidates: {how}")
        return Suite(f"restbench-{which}", tasks, [collection], api="mock",
                     description=f"RestBench {which.upper() if which == 'tmdb' else which.title()}: "
                                 f"{len(tasks)} tasks on {len(collection.tools)} tools",
                     source=str(dataset), notes=notes, task_notes=gold_notes, candidates=how)

    return read


def sample_candidates(tasks: list[EvalTask], collection: Collection, *, size: int = CANDIDATES,
                      seed: int = CANDIDATE_SEED, salt: str = "") -> list[EvalTask]:
    """Each task with ``size`` candidate tools built as ToolFlow's published lists are: its gold
    tools first (those the spec has), then tools drawn at random from the others. The draw of a
    task depends only on ``seed``, ``salt`` and the task's id, so it is the same in every run."""
    by_route: dict[str, str] = {}
    for tool in collection.tools:
        by_route.setdefault(route_key(tool.method, tool.path), tool.name)
    names = [t.name for t in collection.tools]
    out = []
    for task in tasks:
        gold: list[str] = []
        for step in task.gold:
            found = by_route.get(step.key) if step.kind == "route" else step.key if step.key in names else None
            if found is not None and found not in gold:
                gold.append(found)
        rest = [n for n in names if n not in gold]
        draw = random.Random(f"{seed}:{salt}:{task.id}")
        picked = draw.sample(rest, max(0, min(size - len(gold), len(rest))))
        out.append(EvalTask(task.id, task.query, task.solution, task.answer, tuple(gold + picked), task.solvable,
                            {**task.meta, "candidates": "sampled"}))
    return out


def _toolflow_candidates(path: Path, dataset: Path, tasks: list[EvalTask],
                         collection: Collection) -> tuple[list[EvalTask] | None, str]:
    """TMDB tasks with ToolFlow's 20 candidates each, when its file is under the data root (None
    and why not otherwise)."""
    root = _root_of(dataset, "restbench")
    rel = "toolflow/dataset/tmdb/tmdb.data.candidate=20.v2.json"
    found = root / rel if root is not None and (root / rel).is_file() else None
    if found is None:
        return None, "ToolFlow's tmdb.data.candidate=20.v2.json not found: the candidates are drawn as for Spotify"
    rows = _load_json(found)
    if not isinstance(rows, list) or len(rows) != len(tasks):
        return None, f"{found}: not {len(tasks)} candidate lists; not used"
    names = {snake_case(t.name): t.name for t in collection.tools}
    out, unknown = [], 0
    for task, row in zip(tasks, rows, strict=True):
        listed = row.get("api_list") if isinstance(row, dict) else None
        if not isinstance(listed, list):
            out.append(task)
            continue
        tools = [names[snake_case(str(n))] for n in listed if snake_case(str(n)) in names]
        unknown += len(listed) - len(tools)
        out.append(EvalTask(task.id, task.query, task.solution, task.answer, tuple(tools), task.solvable, task.meta))
    more = f" ({unknown} unknown names skipped)" if unknown else ""
    return out, f"ToolFlow's published 20 per task, {found}{more}"


# -- ToolFlow ---------------------------------------------------------------------------------


def _api_tool_names(collection: Collection) -> dict[tuple[str, str], str]:
    """(method, route key) -> tool name, to find a ToolBench-style API's tool by its URL."""
    return {(t.method.upper(), route_key(t.method, t.path)): t.name for t in collection.tools}


def _api_to_tool(api: dict[str, Any], names: set[str], by_route: dict[tuple[str, str], str]) -> str | None:
    """The tool a ToolBench/ToolFlow ``api_list`` entry became: by the loader's naming
    (``<api>_for_<tool>``), else by method and URL path."""
    api_name = str(api.get("api_name") or api.get("name") or "")
    tool_name = str(api.get("tool_name") or "")
    guess = python_identifier(f"{api_name}_for_{tool_name}")
    if guess in names:
        return guess
    url = str(api.get("url") or "")
    m = re.match(r"^[a-z]+://[^/]+(/[^?#]*)", url)
    if m:
        method = str(api.get("method") or "GET").upper()
        return by_route.get((method, route_key(method, m.group(1))))
    return None


def _toolflow(which: str) -> SuiteReader:
    def read(path: Path) -> Suite:
        rel = f"example_ToolFlow_data_v0/{which}.example.data.json"
        data_file = find_file(path, [rel, f"toolflow/{rel}", f"{which}.example.data.json"], f"ToolFlow {which} set")
        data = _load_json(data_file)
        if not isinstance(data, list) or not all(isinstance(d, dict) and isinstance(d.get("api_list"), list)
                                                  for d in data):
            raise UsageError(f"{data_file}: not a ToolFlow example set (a list of queries with api_list)")
        collection = ToolBenchLoader().load(data, source=str(data_file), name=f"toolflow_{which}")
        names = {t.name for t in collection.tools}
        by_route = _api_tool_names(collection)
        tasks, unknown = [], []
        for i, row in enumerate(data):
            by_api = {str(a.get("api_name")): a for a in row["api_list"] if isinstance(a, dict)}
            gold, counts = [], {}
            for item in row.get("solution") or []:
                api_name, calls = (item[0], item[1]) if isinstance(item, list) and len(item) == 2 else (item, 1)
                api = by_api.get(str(api_name)) or {"api_name": api_name, "tool_name": which}
                tool = _api_to_tool(api, names, by_route)
                if tool is None:
                    unknown.append((str(row.get("qid", i)), str(api_name)))
                    tool = str(api_name)
                gold.append(tool)
                counts[tool] = calls
            candidates = [t for a in row["api_list"] if (t := _api_to_tool(a, names, by_route))]
            tasks.append(EvalTask(str(row.get("qid", i)), str(row["query"]).strip(), tuple(gold),
                                  tools=tuple(dict.fromkeys(candidates)), meta={"calls": counts}))
        notes = ["the spec is the union of the queries' api_list entries; each task is shown its own list",
                 f"ToolFlow's published examples ({which}: {len(tasks)} of the 131 the ATC repository releases), "
                 "not the paper's 224-task ToolFlow, which is not released"]
        return Suite(f"toolflow-examples-{which}", tasks, [collection], api="mock",
                     description=f"ToolFlow {which} examples: {len(tasks)} of the 131 published example tasks, on "
                                 f"{len(collection.tools)} tools (the paper's 224-task set is unreleased)",
                     source=str(data_file), notes=notes, candidates="each query's own api_list (published)",
                     task_notes=[TaskNote("gold API(s) not among the tools", tuple(unknown))])

    return read


def _toolflow_all(path: Path) -> Suite:
    """The three ToolFlow example sets as one suite (ids prefixed with the set's name)."""
    parts = [_toolflow(which)(path) for which in ("movie", "food", "weather")]
    prefix = {id(part): part.name.rsplit("-", 1)[-1] for part in parts}
    tasks = [EvalTask(f"{prefix[id(part)]}-{t.id}", t.query, t.solution, t.answer, t.tools, t.solvable, t.meta)
             for part in parts for t in part.tasks]
    about: dict[str, list[tuple[str, str]]] = {}
    for part in parts:
        for note in part.task_notes:
            about.setdefault(note.what, []).extend((f"{prefix[id(part)]}-{task}", detail) for task, detail in note.items)
    per_task = {n.text() for part in parts for n in part.task_notes}
    notes = list(dict.fromkeys(n for part in parts for n in part.notes
                               if n not in per_task and not n.startswith("ToolFlow's published examples")))
    notes.append(f"ToolFlow's published examples: all {len(tasks)} the ATC repository releases (movie, food, "
                 "weather), not the paper's 224-task ToolFlow, which is not released")
    return Suite("toolflow-examples", tasks, [c for part in parts for c in part.collections], api="mock",
                 description=f"ToolFlow's {len(tasks)} published example tasks (movie, food, weather)",
                 source=str(path), notes=notes, candidates="each query's own api_list (published)",
                 task_notes=[TaskNote(what, tuple(items)) for what, items in about.items()])


# -- ToolBench / StableToolBench ---------------------------------------------------------------


def _query_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    for sub in ("stabletoolbench/solvable_queries/test_instruction", "solvable_queries/test_instruction",
                "toolbench/stabletoolbench/solvable_queries/test_instruction", "test_instruction", "."):
        found = sorted(p for p in (path / sub).glob("*.json") if p.is_file())
        if found:
            return found
    raise UsageError(f"no ToolBench query files under {path}",
                     hint="give a query file (G1_instruction.json...) or StableToolBench's solvable_queries folder")


def _solvable_ids(query_file: Path) -> set[str] | None:
    ids_file = query_file.parent.parent / "test_query_ids" / query_file.name
    if not ids_file.is_file():
        return None
    doc = _load_json(ids_file)
    return {str(k) for k in doc} if isinstance(doc, dict) else None


def _toolbench(path: Path) -> Suite:
    rows: list[tuple[str, dict[str, Any]]] = []
    for query_file in _query_files(path):
        data = _load_json(query_file)
        if not isinstance(data, list) or not all(isinstance(d, dict) and isinstance(d.get("api_list"), list)
                                                  for d in data):
            raise UsageError(f"{query_file}: not a ToolBench query file (a list of queries with api_list)")
        keep = _solvable_ids(query_file)
        rows += [(query_file.stem, d) for d in data if keep is None or str(d.get("query_id")) in keep]
    by_tool: dict[str, dict[str, Any]] = {}
    for _, row in rows:
        for api in row["api_list"]:
            if not isinstance(api, dict) or not api.get("tool_name"):
                continue
            slug = collection_slug(str(api["tool_name"])) or "tool"
            entry = by_tool.setdefault(slug, {"tool_name": api["tool_name"], "category_name": api.get("category_name"),
                                              "api_list": [], "_seen": set()})
            key = str(api.get("api_name"))
            if key not in entry["_seen"]:
                entry["_seen"].add(key)
                entry["api_list"].append(api)
    collections = []
    for slug, entry in sorted(by_tool.items()):
        doc = {k: v for k, v in entry.items() if k != "_seen"}
        collections.append(ToolBenchLoader().load(doc, source=str(path), name=slug))
    names = {t.name for c in collections for t in c.tools}
    routes: dict[tuple[str, str], str] = {}
    tasks, unknown = [], []
    for group, row in rows:
        gold = []
        for pair in row.get("relevant APIs") or []:
            if not (isinstance(pair, list) and len(pair) == 2):
                continue
            tool = _api_to_tool({"tool_name": pair[0], "api_name": pair[1]}, names, routes)
            if tool is None:
                unknown.append((f"{group}-{row.get('query_id')}", f"{pair[1]} of {pair[0]}"))
                tool = python_identifier(f"{pair[1]}_for_{pair[0]}")
            gold.append(tool)
        candidates = [t for a in row["api_list"] if isinstance(a, dict) and (t := _api_to_tool(a, names, routes))]
        tasks.append(EvalTask(f"{group}-{row.get('query_id')}", str(row.get("query") or "").strip(), tuple(gold),
                              tools=tuple(dict.fromkeys(candidates)), meta={"group": group}))
    tasks = [t for t in tasks if t.query]
    notes = ["one collection per ToolBench tool; each task is shown its own api_list; the real APIs are "
             "RapidAPI's (--api real needs a key), atc mock answers from the template responses"]
    name = "toolbench" if len({g for g, _ in rows}) != 1 else f"toolbench-{rows[0][0]}"
    return Suite(name, tasks, collections, api="mock",
                 description=f"ToolBench test queries: {len(tasks)} tasks on {len(names)} APIs of "
                             f"{len(collections)} tools", source=str(path), notes=notes,
                 task_notes=[TaskNote("relevant API(s) not among the tools", tuple(unknown))],
                 candidates="each query's own api_list (published)")


for _which in ("tmdb", "spotify"):
    register_reader(f"restbench-{_which}", _restbench(_which),
                    f"RestBench {_which}: datasets/{_which}.json with specs/{_which}_oas.json (RestGPT)")
register_reader("toolflow-examples", _toolflow_all,
                "ToolFlow's 131 published example tasks, the three sets together (not the paper's 224)")
for _which in ("movie", "food", "weather"):
    register_reader(f"toolflow-examples-{_which}", _toolflow(_which),
                    f"ToolFlow's published {_which} examples (example_ToolFlow_data_v0/{_which}.example.data.json)")
    register_reader(f"toolflow-{_which}", _toolflow(_which), f"the older name of toolflow-examples-{_which}")
register_reader("toolbench", _toolbench, "ToolBench / StableToolBench test queries (G1_instruction.json...)")


def _bfcl(category: str) -> SuiteReader:
    def read(path: Path) -> Suite:
        return read_category(category, path)

    return read


for _category in ("base", "miss_func", "miss_param", "long_context"):
    register_reader(f"bfcl-multi-turn-{_category.replace('_', '-')}", _bfcl(_category),
                    f"BFCL multi-turn {_category}: from the installed bfcl-eval package (or PATH), BFCL's checker",
                    packaged=True)
