"""The metrics of an evaluation: pure functions over recorded runs, so that a run can be scored
again (or re-judged) without a model.

Per task, from its result line (the ``{"id", ...solve --json}`` line of ``atc batch``):

- **Path** (Correct Path Rate, the paper's Path%): the share of the task's distinct gold steps
  that some call of the solution path matched (``atc.evaluation.gold``). Repeated calls and the
  order of calls do not change it. A call counts whatever its outcome: the metric is about which
  tools the model chose, and a refused or failed call was still chosen.
- **Precision** (Correct Tool Precision, Prec%): the share of the distinct tools called that
  match a gold step. No call at all scores 0 (1 only when the gold is empty too).
- The solution path is the result's ``calls``: the calls that produced the answer (``chain``:
  its last program's; step-by-step strategies: every call of the episode; ``dfsdt``: the final
  path). ``api_calls`` counts every call made, all attempts and branches included.
- **Success** is the judge's label (``solved``, ``unsolved``, ``unsure``; ``atc.evaluation.judge``),
  None when there is no judge.
- Cost: model calls, prompt and completion tokens, API calls, steps (attempts, turns or nodes),
  wall time (the task's own duration, model time included) and failures by kind.

Per strategy (``summarize``): means of path and precision over the tasks scored; success is
StableToolBench's solvable pass rate, ``(solved + unsure / 2) / judged`` (ToolEval's majority
label per task), null when no task was judged; costs are totals, with per-task means beside them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from atc.evaluation.gold import match
from atc.evaluation.suite import EvalTask

__all__ = ["TaskScore", "StrategySummary", "score_line", "summarize", "unmeasured", "DEFINITIONS", "LABELS"]

#: The judge's labels, ToolEval's pass-rate protocol (StableToolBench's names).
LABELS = ("solved", "unsolved", "unsure")

#: What the numbers mean, written next to them in the JSON summary and in docs/evaluation.md.
DEFINITIONS = {
    "success": "judged pass rate: (solved + unsure/2) / judged tasks, ToolEval's protocol; null without a judge",
    "path": "mean over tasks of the share of the task's distinct gold steps that some call of the solution path "
            "matched (tool name, or METHOD and path template); repeats and order do not count",
    "precision": "mean over tasks of the share of the distinct tools called that match a gold step "
                 "(no call at all: 0)",
    "model_calls": "requests to the model server, all tasks (per_task: the mean)",
    "api_calls": "tool calls made, every attempt and branch included, all tasks",
    "steps": "attempts (chain), turns (react, codeact) or nodes (dfsdt)",
    "wall_s": "sum of the tasks' own durations, model time included (independent of --concurrency)",
    "failed": "tasks whose solve did not end with an answer (ok false)",
    "errors": "tasks not scored because the model server failed or nothing could be attempted; they run again "
              "on the next run",
}


def unmeasured(line: Mapping[str, Any]) -> bool:
    """Did the task fail for a reason that is not the strategy's: the model server failed
    (``ModelError``: unreachable, refusing, a replay without the answer), or nothing was attempted
    at all (the configuration, our own bug)? Such a task is not scored, and runs again on the next
    run of the evaluation."""
    if line.get("ok"):
        return False
    error: Mapping[str, Any] = line["error"] if isinstance(line.get("error"), dict) else {}
    if error.get("type") == "ModelError":
        return True
    return not line.get("attempts") and not line.get("steps")


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _failures(line: Mapping[str, Any]) -> dict[str, int]:
    """Failures by kind: the strategy's own count, else the attempts' error types."""
    given = line.get("failures")
    if isinstance(given, dict):
        return {str(k): _int(v) for k, v in given.items() if _int(v)}
    out: dict[str, int] = {}
    for attempt in line.get("attempts") or []:
        kind = ((attempt or {}).get("error") or {}).get("type") if isinstance(attempt, dict) else None
        if kind:
            out[str(kind)] = out.get(str(kind), 0) + 1
    if not out and not line.get("ok") and isinstance(line.get("error"), dict) and line["error"].get("type"):
        out[str(line["error"]["type"])] = 1
    return out


def _api_calls(line: Mapping[str, Any]) -> int:
    if isinstance(line.get("api_calls"), int):
        return int(line["api_calls"])
    attempts = line.get("attempts")
    if isinstance(attempts, list) and attempts:
        return sum(_int(a.get("calls")) for a in attempts if isinstance(a, dict))
    return len(line.get("calls") or [])


@dataclass
class TaskScore:
    """One task of one strategy, scored. ``to_dict()`` is a line of ``results.jsonl``."""

    id: str
    strategy: str
    ok: bool
    answer: str
    calls: list[str]
    path: float
    precision: float
    gold: list[str]
    missed: list[str]
    extra: list[str]
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    api_calls: int = 0
    steps: int = 0
    wall_s: float = 0.0
    failures: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    success: str | None = None
    judge_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "strategy": self.strategy, "ok": self.ok, "answer": self.answer, "calls": self.calls,
                "path": round(self.path, 4), "precision": round(self.precision, 4), "success": self.success,
                "judge_reason": self.judge_reason, "gold": self.gold, "missed": self.missed, "extra": self.extra,
                "model_calls": self.model_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "api_calls": self.api_calls, "steps": self.steps,
                "wall_s": round(self.wall_s, 3), "failures": self.failures, "error": self.error}


def score_line(line: Mapping[str, Any], task: EvalTask, strategy: str) -> TaskScore:
    """Score one result line against its task's gold (no judge: ``success`` stays None)."""
    calls = [c for c in line.get("calls") or [] if isinstance(c, dict)]
    found = match(task.gold, calls)
    usage: Mapping[str, Any] = line["usage"] if isinstance(line.get("usage"), dict) else {}
    error = line.get("error") if isinstance(line.get("error"), dict) else None
    attempts = line.get("attempts")
    steps = _int(line.get("steps")) or (len(attempts) if isinstance(attempts, list) else 0)
    return TaskScore(
        id=task.id, strategy=str(line.get("strategy") or strategy), ok=bool(line.get("ok")),
        answer=str(line.get("answer") or ""), calls=[str(c.get("tool")) for c in calls],
        path=found.path, precision=found.precision, gold=list(task.solution), missed=list(found.missed),
        extra=list(found.extra), model_calls=_int(usage.get("llm_calls")), prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")), api_calls=_api_calls(line), steps=steps,
        wall_s=float(line.get("duration_ms") or 0.0) / 1000, failures=_failures(line),
        error=f"{error.get('type')}: {error.get('message')}" if error and not line.get("ok") else None,
        # a suite scored by its own checker (BFCL) gives the label in the line: no judge asked
        success=line["verdict"] if line.get("verdict") in LABELS else None)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass
class StrategySummary:
    """One strategy over the suite; ``to_dict()`` is its entry in ``summary.json``'s ``strategies``."""

    strategy: str
    tasks: int
    success: float | None
    path: float | None
    precision: float | None
    model_calls: int
    prompt_tokens: int
    completion_tokens: int
    api_calls: int
    steps: int
    wall_s: float
    failed: int
    labels: dict[str, int]
    failures: dict[str, int]
    not_run: int = 0
    errors: int = 0

    def per_task(self) -> dict[str, float]:
        n = max(1, self.tasks)
        return {"model_calls": round(self.model_calls / n, 3), "prompt_tokens": round(self.prompt_tokens / n, 1),
                "completion_tokens": round(self.completion_tokens / n, 1), "api_calls": round(self.api_calls / n, 3),
                "steps": round(self.steps / n, 3), "wall_s": round(self.wall_s / n, 3)}

    def to_dict(self) -> dict[str, Any]:
        def frac(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {"tasks": self.tasks, "success": frac(self.success), "path": frac(self.path),
                "precision": frac(self.precision), "model_calls": self.model_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "api_calls": self.api_calls, "steps": self.steps,
                "wall_s": round(self.wall_s, 3), "failed": self.failed, "not_run": self.not_run, "errors": self.errors,
                "labels": self.labels, "failures": self.failures, "per_task": self.per_task()}


def summarize(strategy: str, scores: Sequence[TaskScore], *, not_run: int = 0, errors: int = 0) -> StrategySummary:
    """The strategy's numbers over its scored tasks (see the module docstring)."""
    labels = {label: sum(1 for s in scores if s.success == label) for label in LABELS}
    judged = sum(labels.values())
    success = (labels["solved"] + labels["unsure"] / 2) / judged if judged else None
    labels["unjudged"] = len(scores) - judged
    failures: dict[str, int] = {}
    for s in scores:
        for kind, count in s.failures.items():
            failures[kind] = failures.get(kind, 0) + count
    return StrategySummary(
        strategy=strategy, tasks=len(scores), success=success, path=_mean([s.path for s in scores]),
        precision=_mean([s.precision for s in scores]), model_calls=sum(s.model_calls for s in scores),
        prompt_tokens=sum(s.prompt_tokens for s in scores), completion_tokens=sum(s.completion_tokens for s in scores),
        api_calls=sum(s.api_calls for s in scores), steps=sum(s.steps for s in scores),
        wall_s=sum(s.wall_s for s in scores), failed=sum(1 for s in scores if not s.ok), labels=labels,
        failures=dict(sorted(failures.items())), not_run=not_run, errors=errors)
