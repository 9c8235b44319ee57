"""The evaluation as one call: ``load_suite`` and ``evaluate`` (what ``atc eval`` runs).

``evaluate`` runs the strategies (``runner``), scores what is in the run files (``scoring``),
with a judge when one is configured, and writes the outputs (``report``). Given an output
directory that already holds an evaluation of the same suite it resumes it: tasks already run
are not run again, verdicts already given are not asked again. ``DIR/eval.json`` says which suite
a directory belongs to, so that two suites never mix in one.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from atc.config import bench_data, judge_settings
from atc.errors import UsageError
from atc.evaluation.execution import OutcomeHook, RunSettings, run_strategies, runs_file
from atc.evaluation.judge import JUDGE_TEMPERATURE, Judge
from atc.evaluation.readers import packaged, read_suite_data, readers
from atc.evaluation.report import write_outputs
from atc.evaluation.scoring import EvalResult, VerdictCache, score_runs
from atc.evaluation.suite import BUILTIN, Suite, read_manifest, read_tasks_file
from atc.llm.client import configured_settings, make_client
from atc.toolsets import collections_of
from atc.workflows.replay import Recording, RecordingModel, ReplayModel
from protocols.files import atomic_write

if TYPE_CHECKING:
    from atc.llm.chat import ModelClient
    from sandbox.api import Toolset

__all__ = ["load_suite", "evaluate", "make_judge", "JudgeOptions", "builtin_suite_path"]


def builtin_suite_path() -> Path:
    from importlib import resources

    return Path(str(resources.files("atc.evaluation").joinpath("suites", BUILTIN, "suite.json")))


def _bench_root() -> Path | None:
    return bench_data()


def load_suite(spec: str, *, tools: list[str] | None = None) -> Suite:
    """The suite named by ``spec``: ``examples`` (built in), ``FORMAT:PATH`` (a reader of
    ``atc.evaluation.readers``; PATH defaults to ``$ATC_BENCH_DATA``), a tasks ``.jsonl`` (with
    ``suite.json`` beside it, if any), a manifest ``.json``, or a folder holding ``suite.json``.
    ``tools`` (``--tools`` values) replace the suite's collections."""
    replace = bool(tools)
    name, sep, rest = spec.partition(":")
    if spec == BUILTIN:
        suite = read_manifest(builtin_suite_path(), load_tools=not replace)
    elif name in readers():
        root = Path(rest).expanduser() if sep and rest else _bench_root()
        if root is None and packaged(name):  # its data comes with a package
            root = Path()
        if root is None:
            raise UsageError(f"{name}: where is the data?", hint=f"give its path: atc eval {name}:PATH "
                             "(or set ATC_BENCH_DATA to the folder holding the benchmarks)")
        suite = read_suite_data(name, root)
        if replace:
            suite.collections = []
    else:
        path = Path(spec).expanduser()
        if path.is_dir() and (path / "suite.json").is_file():
            suite = read_manifest(path / "suite.json", load_tools=not replace)
        elif path.is_file() and path.suffix == ".jsonl":
            manifest = path.parent / "suite.json"
            if manifest.is_file() and json.loads(manifest.read_text(encoding="utf-8")).get("tasks") == path.name:
                suite = read_manifest(manifest, load_tools=not replace)
            else:
                suite = Suite(path.stem, read_tasks_file(path), source=str(path))
        elif path.is_file() and _is_task_list(path):
            suite = Suite(path.stem, read_tasks_file(path), source=str(path))
        elif path.is_file():
            suite = read_manifest(path, load_tools=not replace)
        else:
            raise UsageError(f"no suite {spec!r}", hint=f"give a tasks .jsonl, a suite.json, '{BUILTIN}', or FORMAT:PATH "
                             f"with FORMAT one of: {', '.join(readers())}")
    if replace:
        suite.collections = collections_of(tools or [])
    return suite


def _is_task_list(path: Path) -> bool:
    """A JSON file holding a list (of tasks), rather than a manifest object."""
    try:
        with path.open("rb") as f:
            head = f.read(4096).lstrip()
    except OSError:
        return False
    return head[:1] == b"["


@dataclass
class JudgeOptions:
    """Which judge: ``model`` (else ``$ATC_JUDGE_MODEL``; neither: no judge), its server
    (``$ATC_JUDGE_BASE_URL``, else the solving model's), ``votes`` per verdict (3), or a
    ``client``; ``structured``: how a label is asked for (``auto``: a forced function call, JSON
    text where the server takes no functions; ``function``; ``json``); ``retries``: re-asks of an
    unreadable reply."""

    model: str | None = None
    votes: int = 3
    client: ModelClient | None = None
    rejudge: bool = False
    structured: str = "auto"
    retries: int = 2


def make_judge(settings: JudgeOptions, *, record: str | None = None, replay: str | None = None) -> Judge | None:
    """The judge (None when none is configured). With ``replay``, a recording's judge answers
    (``DIR/judge/``) are used when they hold the judge asked for; any other judge is asked live
    (re-judging). With ``record``, the judge's answers are recorded there too."""
    if settings.votes < 1:
        raise UsageError("--judge-votes must be at least 1")
    if settings.structured not in ("auto", "function", "json"):
        raise UsageError(f"--judge-format {settings.structured!r}: use auto, function or json")
    if settings.retries < 0:
        raise UsageError("--judge-retries must be 0 or more")

    client = settings.client
    configured = judge_settings(settings.model)
    if client is None and replay:
        tape = Path(replay).expanduser() / "judge"
        recording = Recording(tape, "replay")
        recorded = {e["request"].get("model") for e in recording.model.entries() if isinstance(e.get("request"), dict)}
        if recorded and (configured.model is None or configured.model in recorded):
            client = ReplayModel(recording, model=configured.model)
    if client is not None:
        return Judge(client, votes=settings.votes, structured=settings.structured, retries=settings.retries)
    if configured.model is None:
        return None
    model = configured.model

    def make() -> ModelClient:
        live = make_client(model, base_url=configured.base_url,
                           temperature=JUDGE_TEMPERATURE if settings.votes > 1 else None)
        if record:
            return RecordingModel(live, Recording(Path(record).expanduser() / "judge", "record"))
        return live

    return Judge(make=make, name=model, votes=settings.votes, structured=settings.structured,
                 retries=settings.retries)


def check_judge(judge: Judge | None) -> None:
    """A judge that is not configured well enough to ask (no server): ``ConfigError`` now."""
    if judge is not None and judge.client is None:
        configured_settings(judge.name, base_url=judge_settings().base_url)


def _claim(out: Path, suite: Suite) -> None:
    """Mark ``out`` as this suite's evaluation, or refuse one that holds another suite's."""
    marker = out / "eval.json"
    if marker.is_file():
        try:
            doc = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            doc = {}
        if doc.get("suite") not in (None, suite.name):
            raise UsageError(f"--out {out} holds an evaluation of suite {doc.get('suite')!r}, not {suite.name!r}",
                             hint="give another --out directory (results of two suites never mix)")
        return
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(marker, json.dumps({"suite": suite.name, "tasks": len(suite.tasks), "source": suite.source,
                                     "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, indent=2) + "\n")


def pending(suite: Suite, strategies: list[str], folder: Path | None) -> int:
    """How many (strategy, task) runs are still to do: all without a folder, else those whose id
    is not in the strategy's run file."""
    if folder is None:
        return len(suite.tasks) * len(strategies)
    todo = 0
    for name in strategies:
        done: set[str] = set()
        try:
            text = runs_file(folder, name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        for raw in text.splitlines():  # read only: the runner's ResultLog repairs what is torn
            try:
                done.add(str(json.loads(raw)["id"]))
            except (ValueError, KeyError, TypeError):
                continue
        todo += sum(1 for t in suite.tasks if t.id not in done)
    return todo


def evaluate(suite: Suite, settings: RunSettings | None = None, *, toolset: Toolset | None = None,
             judge: JudgeOptions | Judge | None = None, out: str | os.PathLike[str] | None = None,
             chart: bool = True, stop: threading.Event | None = None, on_outcome: OutcomeHook | None = None,
             win_rates: bool = True) -> EvalResult:
    """Run ``suite`` with every strategy of ``settings`` and score it (see the module docstring).
    ``toolset``: the tools (default: the suite's collections, with ``base_url``/``credentials``
    as the toolset says). Returns the scored result; with ``out`` every output is written there."""
    settings = settings or RunSettings()
    settings.check()
    toolset = toolset or suite.toolset()
    folder = Path(out).expanduser() if out is not None else None
    the_judge = judge if isinstance(judge, Judge) or judge is None else \
        make_judge(judge, record=settings.record, replay=settings.replay)
    stop = stop or threading.Event()
    if pending(suite, settings.strategies, folder):
        # What would fail every task is said before anything is written (no --out folder is made
        # for an evaluation that cannot run): the model's configuration, then the judge's.
        if settings.client is None and not settings.replay:
            configured_settings(settings.model)
        check_judge(the_judge)
    if folder is not None:
        _claim(folder, suite)
    runs = run_strategies(suite, toolset, settings, out=folder, stop=stop, on_outcome=on_outcome)
    # after Ctrl-C the judge gives the verdicts it has kept and is asked nothing new (``stop``)
    cache = VerdictCache(folder / "judge.jsonl" if folder is not None and the_judge is not None else None,
                         rejudge=isinstance(judge, JudgeOptions) and judge.rejudge)
    try:
        choices = {name: choice.to_dict() for name, choice in settings.choices().items()}
        result = score_runs(suite, settings.strategies, runs.lines, judge=the_judge, cache=cache,
                            concurrency=settings.concurrency, stop=stop, settings=choices)
        if not win_rates:
            result.win_rates = []
    finally:
        cache.close()
    result.settings = {"preset": settings.preset or "default", "strategies": choices,
                       "calls_counted": "every call requested in the task (atc.loop.strategies.requests)",
                       "candidates": suite.candidates}
    result.interrupted = runs.interrupted or stop.is_set()
    result.notes = runs.notes + result.notes
    result.wall_s = runs.wall_s
    if folder is not None:
        result.out = str(folder)
        write_outputs(result, folder, with_chart=chart)
    return result
