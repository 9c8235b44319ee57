"""The metrics of an evaluation: pure functions over recorded runs, so that a run can be scored
again (or re-judged) without a model.

Per task, from its result line (the ``{"id", ...solve --json}`` line of ``atc batch``):

- **The calls counted** are every tool call the model requested in the task (the line's
  ``requested``, ``atc.loop.strategies.requests``): all attempts, all branches, a rerun's every run,
  calls the gateway refused, calls to made-up tools, calls of a program the static check stopped.
  The Chain-of-Tools paper's Table 1 fits this count (its @3 rows gain Path% and lose Prec%; the
  DFSDT baseline's Prec% far below its Path%). A line written before ``requested`` existed is
  counted from its answer's calls.
- **Path** (Correct Path Rate, the paper's Path%): the share of the task's distinct gold steps
  that some counted call matched (``atc.evaluation.gold``); repeats and order do not change it.
- **Precision** (Correct Tool Precision, Prec%): the share of the distinct tools among the
  counted calls that match a gold step, as atc's interface defines ``precision``; a made-up or
  refused tool is one more wrong tool. No call at all scores 0 (1 only when the gold is empty
  too). Call by call (a repeated wrong call counting each time) is the variant ``precision_calls``.
- **Correct path** (RestGPT's correct-path rate): whether the gold path, as written, is an
  ordered subsequence of the counted calls, yes or no; **extra calls** (RestGPT's Delta Solution
  Len): counted calls minus the gold path's length (ToolFlow's ``[name, calls]`` counts included),
  averaged over the solved tasks.
- **Exec success** (the rate the Chain-of-Tools paper's released code counts): the run ended with
  an answer that does not read as an error (a program that ran without raising and printed
  something other than an error message).
- **Success** is the judge's (``atc.evaluation.judge``): each vote a label, ``solved`` 1,
  ``unsure`` 0.5, ``unsolved`` 0 (StableToolBench's pass rate), the task's score their mean.
- Cost: model turns (``model_calls``) and HTTP requests apart, prompt and completion tokens, API
  calls, requested calls, steps, wall time, failures by kind.

``VARIANTS`` keeps the earlier definitions under their names (the answer's calls only; distinct
tools; the majority label), so that a number of before can still be put next to one of now.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from atc.evaluation.gold import in_order, match
from atc.evaluation.suite import EvalTask
from atc.loop.strategies.repeat import reads_as_error

__all__ = ["TaskScore", "StrategySummary", "score_line", "summarize", "unmeasured", "DEFINITIONS", "VARIANTS",
           "LABELS", "VOTE_SCORE", "reads_as_error", "majority"]

#: The judge's labels, ToolEval's pass-rate protocol (StableToolBench's names).
LABELS = ("solved", "unsolved", "unsure")
#: What one vote of each label scores (StableToolBench's pass rate).
VOTE_SCORE = {"solved": 1.0, "unsure": 0.5, "unsolved": 0.0}

#: What the numbers mean, written next to them in the JSON summary and in docs/evaluation.md.
DEFINITIONS = {
    "success": "pass rate: each judge vote scores solved 1, unsure 0.5, unsolved 0 (StableToolBench); the mean over "
               "votes and tasks; null without a judge, and null ('n/a, k unjudged') while any task is unjudged. "
               "A run without a final answer is unsolved without asking (ToolEval)",
    "success_std": "the spread of the pass rate: the standard deviation of the per-vote pass rates",
    "path": "mean over tasks of the share of the task's distinct gold steps that some requested call matched (tool "
            "name, or METHOD and path template); every call the model requested counts: all attempts and branches, "
            "refused calls, made-up tools",
    "precision": "mean over tasks of the share of the distinct tools among the requested calls that match a gold "
                 "step; a made-up or refused tool counts as a wrong one (no call at all: 0)",
    "correct_path": "share of tasks whose gold path, as written, is an ordered subsequence of the requested calls "
                    "(RestGPT's correct-path rate)",
    "extra_calls": "mean over the tasks judged solved of requested calls minus the gold path's length (RestGPT's "
                   "Delta Solution Len); null without a judge",
    "exec_success": "share of tasks that ended with an answer that does not read as an error: the rate the "
                    "Chain-of-Tools paper's released code counts (a program that ran and printed an answer); no judge",
    "model_calls": "model turns: completions the strategy asked for, all tasks (per_task: the mean)",
    "http_requests": "HTTP requests the model server saw, retries included",
    "api_calls": "tool calls that reached the gateway, every attempt and branch included, all tasks",
    "requested_calls": "tool calls the model requested, sent or not, all tasks",
    "steps": "attempts (chain), turns (react, codeact) or nodes (dfsdt); a rerun (NAME@k) sums its runs'",
    "wall_s": "sum of the tasks' own durations, model time included (independent of --concurrency)",
    "failed": "tasks whose solve did not end with an answer (ok false)",
    "errors": "tasks not scored because the model server failed or nothing could be attempted; they run again "
              "on the next run",
}

#: Earlier or alternative definitions, kept by name in every summary's ``variants``.
VARIANTS = {
    "path_answer": "Path% over the answer's calls only (the last program's, the final path's): atc before issue 31",
    "precision_answer": "share of the distinct tools of the answer's calls that match a gold step: atc before issue 31",
    "precision_calls": "share of the requested calls, call by call (a repeat counts again), that match a gold step",
    "correct_path_answer": "correct path over the answer's calls only",
    "extra_calls_correct_path": "extra calls over the tasks whose path is correct (no judge needed)",
    "success_majority": "(solved + unsure/2) / judged tasks, each task's majority label (atc before issue 31)",
    "success_over_judged": "the pass rate over the judged tasks only (the unjudged left out of the denominator)",
}

def majority(votes: Sequence[str]) -> str | None:
    """The most frequent label of the votes; a tie between labels is ``unsure``."""
    if not votes:
        return None
    counts: dict[str, int] = {}
    for v in votes:
        counts[v] = counts.get(v, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    return ranked[0][0] if len(ranked) == 1 or ranked[0][1] > ranked[1][1] else "unsure"


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


def _gold_length(task: EvalTask) -> int:
    """The gold path's length in calls: ToolFlow's ``[name, calls]`` counts when the reader kept
    them, else the steps as written."""
    counts = task.meta.get("calls") if isinstance(task.meta, dict) else None
    if isinstance(counts, dict) and counts:
        return sum(_int(v) or 1 for v in counts.values())
    return len(task.solution)


def _trajectory(line: Mapping[str, Any], answer_calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What a judge is shown of the answer's calls: tool, arguments, status, and a bounded response
    or error (from ``requested``; a line without it has no responses)."""
    marked = [r for r in line.get("requested") or [] if isinstance(r, dict) and r.get("answer")]
    source = marked or answer_calls
    keep = ("tool", "args", "status", "ok", "response", "error")
    return [{k: c.get(k) for k in keep if k in c} for c in source]


@dataclass
class TaskScore:
    """One task of one strategy, scored. ``to_dict()`` is a line of ``results.jsonl``;
    ``trajectory`` (the answer's calls with what they returned) is what a judge is shown."""

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
    answer_calls: list[str] = field(default_factory=list)
    correct_path: bool = False
    extra_calls: int = 0
    exec_ok: bool = False
    http_requests: int = 0
    variants: dict[str, float] = field(default_factory=dict)
    votes: list[str] = field(default_factory=list)
    pass_score: float | None = None
    trajectory: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def final(self) -> bool:
        """Did the run end with a final answer (ToolEval asks the judge only then)?"""
        return self.ok and bool(self.answer.strip())

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "strategy": self.strategy, "ok": self.ok, "answer": self.answer, "calls": self.calls,
                "path": round(self.path, 4), "precision": round(self.precision, 4), "success": self.success,
                "pass_score": None if self.pass_score is None else round(self.pass_score, 4), "votes": self.votes,
                "judge_reason": self.judge_reason, "gold": self.gold, "missed": self.missed, "extra": self.extra,
                "answer_calls": self.answer_calls, "correct_path": self.correct_path, "extra_calls": self.extra_calls,
                "exec_success": self.exec_ok, "variants": {k: round(v, 4) for k, v in self.variants.items()},
                "model_calls": self.model_calls, "http_requests": self.http_requests,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "api_calls": self.api_calls, "requested_calls": len(self.calls), "steps": self.steps,
                "wall_s": round(self.wall_s, 3), "failures": self.failures, "error": self.error}


def _checked(line: Mapping[str, Any]) -> dict[str, Any]:
    """The label of a suite scored by its own checker (BFCL: ``"verdict"`` in the line), as one
    vote: no judge is asked about it, and it counts in the pass rate like a judged task."""
    label = line.get("verdict")
    if label not in LABELS:
        return {}
    return {"success": label, "votes": [label], "pass_score": VOTE_SCORE[label]}


def score_line(line: Mapping[str, Any], task: EvalTask, strategy: str) -> TaskScore:
    """Score one result line against its task's gold (no judge: ``success`` stays None)."""
    answer_calls = [c for c in line.get("calls") or [] if isinstance(c, dict)]
    requested = [c for c in line.get("requested") or [] if isinstance(c, dict)] or answer_calls
    gold = task.gold
    every, mine = match(gold, requested), match(gold, answer_calls)
    usage: Mapping[str, Any] = line["usage"] if isinstance(line.get("usage"), dict) else {}
    error = line.get("error") if isinstance(line.get("error"), dict) else None
    attempts = line.get("attempts")
    steps = _int(line.get("steps")) or (len(attempts) if isinstance(attempts, list) else 0)
    answer = str(line.get("answer") or "")
    ok = bool(line.get("ok"))
    requests = _int(usage.get("llm_calls"))
    return TaskScore(
        id=task.id, strategy=str(line.get("strategy") or strategy), ok=ok, answer=answer,
        calls=[str(c.get("tool")) for c in requested], path=every.path, precision=every.precision,
        gold=list(task.solution), missed=list(every.missed), extra=list(every.extra),
        model_calls=_int(usage.get("model_turns")) if "model_turns" in usage else requests,
        prompt_tokens=_int(usage.get("prompt_tokens")), completion_tokens=_int(usage.get("completion_tokens")),
        api_calls=_api_calls(line), steps=steps, wall_s=float(line.get("duration_ms") or 0.0) / 1000,
        failures=_failures(line), error=f"{error.get('type')}: {error.get('message')}" if error and not ok else None,
        answer_calls=[str(c.get("tool")) for c in answer_calls], correct_path=in_order(gold, requested),
        extra_calls=len(requested) - _gold_length(task), exec_ok=ok and bool(answer.strip()) and not reads_as_error(answer),
        http_requests=requests,
        variants={"path_answer": mine.path, "precision_answer": mine.precision, "precision_calls": every.call_precision,
                  "correct_path_answer": float(in_order(gold, answer_calls))},
        trajectory=_trajectory(line, answer_calls), **_checked(line))


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
    success_std: float | None = None
    unjudged: int = 0
    correct_path: float | None = None
    extra_calls: float | None = None
    exec_success: float | None = None
    http_requests: int = 0
    requested_calls: int = 0
    variants: dict[str, float | None] = field(default_factory=dict)
    settings: dict[str, Any] | None = None

    def per_task(self) -> dict[str, float]:
        n = max(1, self.tasks)
        return {"model_calls": round(self.model_calls / n, 3), "http_requests": round(self.http_requests / n, 3),
                "prompt_tokens": round(self.prompt_tokens / n, 1), "completion_tokens": round(self.completion_tokens / n, 1),
                "api_calls": round(self.api_calls / n, 3), "requested_calls": round(self.requested_calls / n, 3),
                "steps": round(self.steps / n, 3), "wall_s": round(self.wall_s / n, 3)}

    def to_dict(self) -> dict[str, Any]:
        def frac(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {"tasks": self.tasks, "success": frac(self.success), "success_std": frac(self.success_std),
                "unjudged": self.unjudged, "path": frac(self.path), "precision": frac(self.precision),
                "correct_path": frac(self.correct_path), "extra_calls": frac(self.extra_calls),
                "exec_success": frac(self.exec_success), "model_calls": self.model_calls,
                "http_requests": self.http_requests, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "api_calls": self.api_calls,
                "requested_calls": self.requested_calls, "steps": self.steps,
                "wall_s": round(self.wall_s, 3), "failed": self.failed, "not_run": self.not_run, "errors": self.errors,
                "labels": self.labels, "failures": self.failures, "per_task": self.per_task(),
                "variants": {k: frac(v) for k, v in self.variants.items()}, "settings": self.settings}


def _pass_rate(scores: Sequence[TaskScore]) -> tuple[float | None, float | None]:
    """StableToolBench's pass rate over ``scores`` (all judged) and its spread over votes."""
    judged = [s for s in scores if s.votes]
    if not judged:
        return None, None
    rounds = max(len(s.votes) for s in judged)
    per_vote = []
    for v in range(rounds):
        values = [VOTE_SCORE[s.votes[v]] if v < len(s.votes) else (s.pass_score or 0.0) for s in judged]
        per_vote.append(sum(values) / len(values))
    rate = sum(s.pass_score or 0.0 for s in judged) / len(judged)
    return rate, statistics.pstdev(per_vote) if len(per_vote) > 1 else 0.0


def summarize(strategy: str, scores: Sequence[TaskScore], *, not_run: int = 0, errors: int = 0,
              settings: dict[str, Any] | None = None) -> StrategySummary:
    """The strategy's numbers over its scored tasks (see the module docstring)."""
    labels = {label: sum(1 for s in scores if s.success == label) for label in LABELS}
    judged = [s for s in scores if s.votes]
    unjudged = len(scores) - len(judged)
    labels["unjudged"] = unjudged
    rate, spread = _pass_rate(scores)
    majority_judged = sum(labels[x] for x in LABELS)
    failures: dict[str, int] = {}
    for s in scores:
        for kind, count in s.failures.items():
            failures[kind] = failures.get(kind, 0) + count
    solved = [s.extra_calls for s in scores if s.success == "solved"]
    on_path = [s.extra_calls for s in scores if s.correct_path]
    variants: dict[str, float | None] = {
        name: _mean([s.variants[name] for s in scores if name in s.variants])
        for name in ("path_answer", "precision_answer", "precision_calls", "correct_path_answer")}
    variants["extra_calls_correct_path"] = _mean([float(x) for x in on_path])
    variants["success_majority"] = ((labels["solved"] + labels["unsure"] / 2) / majority_judged
                                    if majority_judged else None)
    variants["success_over_judged"] = rate
    return StrategySummary(
        strategy=strategy, tasks=len(scores), success=rate if judged and not unjudged else None,
        path=_mean([s.path for s in scores]), precision=_mean([s.precision for s in scores]),
        model_calls=sum(s.model_calls for s in scores), prompt_tokens=sum(s.prompt_tokens for s in scores),
        completion_tokens=sum(s.completion_tokens for s in scores), api_calls=sum(s.api_calls for s in scores),
        steps=sum(s.steps for s in scores), wall_s=sum(s.wall_s for s in scores),
        failed=sum(1 for s in scores if not s.ok), labels=labels, failures=dict(sorted(failures.items())),
        not_run=not_run, errors=errors, success_std=spread if judged and not unjudged else None, unjudged=unjudged,
        correct_path=_mean([float(s.correct_path) for s in scores]),
        extra_calls=_mean([float(x) for x in solved]), exec_success=_mean([float(s.exec_ok) for s in scores]),
        http_requests=sum(s.http_requests for s in scores), requested_calls=sum(len(s.calls) for s in scores),
        variants=variants, settings=settings)
