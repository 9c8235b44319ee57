"""Scoring recorded runs: metrics per task, the judge's labels, win rates, the summary.

Everything here reads result lines (``atc.evaluation.execution.Runs``) and never runs a task, so an
evaluation is scored again from its ``runs/`` files alone. The judge's verdicts are kept in
``DIR/judge.jsonl`` (one line per verdict, appended as each arrives, the same resumable file as
a batch's), keyed by the judge model, the strategy, the task and a hash of what was judged: a
re-run asks only about answers that are new or changed, and ``rejudge`` asks again about all.
A verdict's key holds everything the judge was shown (the answer, the calls behind it, the
task's reference and solvability, the number of votes), so a verdict is never reused for a
question it did not answer.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atc.errors import AtcError
from atc.evaluation.judge import JUDGE_TEMPERATURE, PROTOCOL, Judge, Preference, Verdict
from atc.evaluation.metrics import (
    DEFINITIONS,
    LABELS,
    VARIANTS,
    StrategySummary,
    TaskScore,
    score_line,
    summarize,
    unmeasured,
)
from atc.evaluation.suite import EvalTask, Suite
from atc.workflows.executors import run_each
from atc.workflows.outfile import ResultLog

__all__ = ["VerdictCache", "EvalResult", "score_runs", "win_rate"]


class VerdictCache:
    """The judge's verdicts in ``DIR/judge.jsonl`` (or in memory without a directory)."""

    def __init__(self, path: Path | None, *, rejudge: bool = False) -> None:
        self.log = ResultLog(path) if path is not None else None
        self.rejudge = rejudge
        self._memory: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: str, digest: str) -> dict[str, Any] | None:
        if self.rejudge:
            return None
        with self._lock:
            found = self._memory.get(key) or (self.log.done.get(key) if self.log is not None else None)
        return found if found is not None and found.get("digest") == digest else None

    def put(self, key: str, digest: str, data: dict[str, Any]) -> None:
        line = {"id": key, "digest": digest, **data}
        with self._lock:
            self._memory[key] = line
        if self.log is not None:
            self.log.write(line)

    def close(self) -> None:
        if self.log is not None:
            self.log.close()


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:24]


@dataclass
class EvalResult:
    """A scored evaluation. ``to_dict()`` is ``atc eval --json`` and ``summary.json``."""

    suite: Suite
    strategies: list[str]
    scores: dict[str, list[TaskScore]]
    summaries: dict[str, StrategySummary]
    win_rates: list[dict[str, Any]] = field(default_factory=list)
    judge: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False
    out: str | None = None
    wall_s: dict[str, float] = field(default_factory=dict)
    #: what ran and how it was scored, named (``summary.json``'s ``settings``)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def unjudged(self) -> int:
        if self.judge is None:
            return 0
        return sum(s.labels.get("unjudged", 0) for s in self.summaries.values())

    @property
    def complete(self) -> bool:
        """Every task of every strategy ran and was scored, and judged when there is a judge."""
        return not self.interrupted and self.unjudged == 0 and \
            all(s.not_run == 0 and s.errors == 0 for s in self.summaries.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.complete,
            "suite": self.suite.name,
            "tasks": len(self.suite.tasks),
            "strategies": {name: self.summaries[name].to_dict() for name in self.strategies if name in self.summaries},
            "definitions": DEFINITIONS,
            "variants": VARIANTS,
            "settings": self.settings,
            "judge": self.judge,
            "win_rates": self.win_rates,
            "batch_wall_s": {k: round(v, 3) for k, v in self.wall_s.items()},
            "notes": self.suite.notes + self.notes,
            "interrupted": self.interrupted,
            "out": self.out,
        }


#: Bumped when what a verdict means changes, so that kept verdicts of another protocol are asked again.
_PROTOCOL_VERSION = "tooleval-2phase-votes-1"


def _judge_all(judge: Judge, cache: VerdictCache, suite: Suite, scores: dict[str, list[TaskScore]],
               lines: dict[str, dict[str, dict[str, Any]]], concurrency: int, stop: threading.Event | None) -> list[str]:
    """Label every score (from the cache when it holds the same question); returns errors."""
    tasks = {t.id: t for t in suite.tasks}
    todo: list[tuple[TaskScore, str, str]] = []
    for strategy, items in scores.items():
        for score in items:
            if lines[strategy].get(score.id, {}).get("verdict") in LABELS:  # the suite's own checker labelled it
                continue
            task = tasks[score.id]
            key = f"pass|{judge.model}|{strategy}|{score.id}"
            digest = _digest(_PROTOCOL_VERSION, task.query, task.answer, task.solvable, score.answer, score.final,
                             str(score.error or "").startswith("GaveUp"), score.trajectory, judge.votes)
            cached = cache.get(key, digest)
            if cached is not None and cached.get("votes"):
                _apply(score, Verdict(cached.get("label"), str(cached.get("reason") or ""),
                                      tuple(cached.get("votes") or ()), score=cached.get("score")))
            else:
                todo.append((score, key, digest))
    errors: list[str] = []

    def ask(item: tuple[TaskScore, str, str]) -> Verdict:
        score = item[0]
        return judge.pass_label(tasks[score.id], score)

    def done(index: int, verdict: Verdict) -> None:
        score, key, digest = todo[index]
        _apply(score, verdict)
        if verdict.label is not None:
            cache.put(key, digest, {"kind": "pass", "judge": judge.model, "strategy": score.strategy,
                                    "task": score.id, **verdict.to_dict()})
        else:
            errors.append(f"{score.strategy} {score.id}: {verdict.reason}")

    def failed(index: int, exc: BaseException) -> None:
        score = todo[index][0]
        message = exc.message if isinstance(exc, AtcError) else f"{type(exc).__name__}: {exc}"
        score.judge_reason = f"judge failed: {message}"
        errors.append(f"{score.strategy} {score.id}: {message}")

    run_each(ask, todo, on_result=done, on_error=failed, concurrency=concurrency, stop=stop)
    return errors


def _apply(score: TaskScore, verdict: Verdict) -> None:
    """A verdict onto its score: the label, the reason, and the votes (only a complete verdict's)."""
    score.judge_reason = verdict.reason
    if verdict.label is None:
        score.success, score.votes, score.pass_score = None, [], None
        return
    score.success, score.votes = verdict.label, list(verdict.votes)
    score.pass_score = verdict.score if verdict.score is not None else None


#: ToolEval's order of labels for the win rate: a better label wins without asking.
_RANK = {"solved": 2, "unsure": 1, "unsolved": 0}


def win_rate(judge: Judge | None, cache: VerdictCache, suite: Suite, base: str, other: str,
             scores: dict[str, list[TaskScore]], concurrency: int, stop: threading.Event | None) -> dict[str, Any]:
    """ToolEval's win rate of ``other`` over ``base`` (see ``atc.evaluation.judge``)."""
    tasks = {t.id: t for t in suite.tasks}
    order = {t.id: i for i, t in enumerate(suite.tasks)}
    mine = {s.id: s for s in scores.get(other, [])}
    theirs = {s.id: s for s in scores.get(base, [])}
    outcome = {"win": 0, "tie": 0, "lose": 0}
    asks: list[tuple[TaskScore, TaskScore, str, str]] = []
    skipped = 0
    for task_id in sorted(set(mine) & set(theirs), key=lambda i: order.get(i, 0)):
        a, b = theirs[task_id], mine[task_id]
        if a.success is None or b.success is None:
            skipped += 1
            continue
        if _RANK[a.success] != _RANK[b.success]:  # solved > unsure > unsolved, without asking
            outcome["win" if _RANK[b.success] > _RANK[a.success] else "lose"] += 1
            continue
        if judge is None:
            skipped += 1
            continue
        key = f"pref|{judge.model}|{base}|{other}|{task_id}"
        digest = _digest(_PROTOCOL_VERSION, tasks[task_id].query, a.answer, a.trajectory, b.answer, b.trajectory,
                         judge.votes)
        cached = cache.get(key, digest)
        if cached is not None:
            winner = cached.get("winner")
            outcome["tie" if winner == "tie" else "win" if winner == "b" else "lose"] += 1
        else:
            asks.append((a, b, key, digest))

    def ask(item: tuple[TaskScore, TaskScore, str, str]) -> Preference:
        a, b, _, _ = item
        return judge.compare(tasks[a.id], a, b, swap=order.get(a.id, 0) % 2 == 1)  # type: ignore[union-attr]

    def done(index: int, pref: Preference) -> None:
        nonlocal skipped
        a, b, key, digest = asks[index]
        if pref.winner is None:
            skipped += 1
            return
        outcome["tie" if pref.winner == "tie" else "win" if pref.winner == "b" else "lose"] += 1
        assert judge is not None
        cache.put(key, digest, {"kind": "pref", "judge": judge.model, "base": base, "strategy": other, "task": a.id,
                                **pref.to_dict()})

    def failed(index: int, exc: BaseException) -> None:
        nonlocal skipped
        skipped += 1

    if asks:
        run_each(ask, asks, on_result=done, on_error=failed, concurrency=concurrency, stop=stop)
    compared = sum(outcome.values())
    rate = (outcome["win"] + outcome["tie"] / 2) / compared if compared else None
    return {"strategy": other, "baseline": base, **outcome, "compared": compared, "not_compared": skipped,
            "win_rate": None if rate is None else round(rate, 4)}


def _ran_with(strategy: str, chosen: dict[str, Any] | None, lines: dict[str, dict[str, Any]],
              notes: list[str]) -> dict[str, Any] | None:
    """The settings a strategy's tasks really ran with (each result line names them), over what
    this command chose: a directory scored again names what ran, and says when that differs."""
    seen: dict[str, dict[str, Any]] = {}
    for line in lines.values():
        given = line.get("settings")
        if isinstance(given, dict):
            own = {k: v for k, v in given.items() if k != "runs"}
            seen.setdefault(json.dumps(own, sort_keys=True), own)
    if not seen or chosen is None:
        return chosen
    if len(seen) > 1:
        notes.append(f"{strategy}: its tasks ran with {len(seen)} different settings (runs of several commands "
                     "in one directory); the summary names this command's")
        return {**chosen, "ran_with": list(seen.values())}
    only = next(iter(seen.values()))
    if chosen.get("settings") not in (None, only):
        differs = ", ".join(f"{k} {v} (this command: {chosen['settings'].get(k)})" for k, v in only.items()
                            if chosen["settings"].get(k) != v)
        notes.append(f"{strategy}: its tasks ran with other settings than this command's: {differs}; the summary "
                     "names what ran")
    return {**chosen, "settings": only}


def score_runs(suite: Suite, strategies: list[str], lines: dict[str, dict[str, dict[str, Any]]], *,
               judge: Judge | None = None, cache: VerdictCache | None = None, concurrency: int = 4,
               stop: threading.Event | None = None, settings: dict[str, dict[str, Any]] | None = None) -> EvalResult:
    """Score every strategy's result lines against the suite (and judge them when there is a
    judge); strategies without lines score nothing. ``settings`` names each strategy's settings
    (``Choice.to_dict()``) in its summary."""
    cache = cache or VerdictCache(None)
    tasks: dict[str, EvalTask] = {t.id: t for t in suite.tasks}
    scores: dict[str, list[TaskScore]] = {}
    errors: dict[str, list[str]] = {}
    for strategy in strategies:
        found = lines.get(strategy, {})
        errors[strategy] = [t.id for t in suite.tasks if t.id in found and unmeasured(found[t.id])]
        scores[strategy] = [score_line(found[t.id], t, strategy) for t in suite.tasks
                            if t.id in found and t.id not in errors[strategy]]
    notes: list[str] = []
    older = sum(1 for strategy in strategies for line in lines.get(strategy, {}).values()
                if line.get("ok") is not None and "requested" not in line and line.get("calls"))
    if older:
        notes.append(f"{older} task line(s) hold no record of every requested call (written by an older atc): their "
                     "Path% and Prec% count the answer's calls")
    for strategy, ids in errors.items():
        if ids:
            first = lines[strategy][ids[0]].get("error") or {}
            notes.append(f"{strategy}: {len(ids)} task(s) not scored, the model server failed or nothing could be "
                         f"attempted (they run again on the next run); first: {first.get('type')}: "
                         f"{' '.join(str(first.get('message') or '').split())[:200]}")
    if judge is not None:
        unjudged = _judge_all(judge, cache, suite, scores, lines, concurrency, stop)
        if unjudged:
            notes.append(f"{len(unjudged)} answer(s) not judged (run again to judge them): " + "; ".join(unjudged[:3]))
    missing = {s: sum(1 for t in tasks if t not in lines.get(s, {})) for s in strategies}
    ran = {s: _ran_with(s, (settings or {}).get(s), lines.get(s, {}), notes) for s in strategies}
    summaries = {s: summarize(s, scores[s], not_run=missing[s], errors=len(errors[s]), settings=ran[s])
                 for s in strategies}
    win_rates: list[dict[str, Any]] = []
    if judge is not None and len(strategies) > 1:
        win_rates = [win_rate(judge, cache, suite, strategies[0], other, scores, concurrency, stop)
                     for other in strategies[1:]]
    judged = None
    if judge is not None:
        judged = {"model": judge.model, "votes": judge.votes, "usage": dict(judge.usage), "structured": judge.mode,
                  "temperature": JUDGE_TEMPERATURE if judge.votes > 1 else 0.0, "retries": judge.retries,
                  "protocol": PROTOCOL}
    return EvalResult(suite, list(strategies), scores, summaries, win_rates, judged, notes)
