"""The judge: a model that labels answers (ToolEval's pass rate) and compares two (its win rate).

Pass rate, after ToolEval (ToolLLM, appendix "Details for ToolEval"; StableToolBench's names):
each task's answer is labelled ``solved``, ``unsolved`` or ``unsure`` by the judge model, shown
the task, whether it is solvable, the tools, the calls made and the answer (and a reference
answer when the suite has one); the judge's reason is kept. A task without an answer is
``unsolved`` without asking (ToolEval does the same for a path that never finished). With
``votes`` > 1 the judge is asked that many times (sampled at temperature 0.7) and the majority
label wins; a tie between labels is ``unsure``. A reply that holds no label is no verdict at all:
the task stays unjudged (and is judged again on the next run), never guessed.

Win rate: for two strategies' answers to a task, a solved one beats an unsolved or unsure one
without asking; otherwise the judge compares them (information, factuality, reasoning,
milestones, exploration, cost) and prefers one or calls a tie. Which answer is shown first
alternates from task to task, against position bias. The rate is ``(wins + ties / 2) / tasks``.

The prompts are package data (``atc/prompts/judge_pass.md``, ``judge_compare.md``).
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from atc import prompts
from atc.evaluation.metrics import LABELS, TaskScore
from atc.evaluation.suite import EvalTask

if TYPE_CHECKING:
    from atc.model import ModelClient

__all__ = ["Verdict", "Preference", "Judge", "parse_label", "parse_preference", "JUDGE_TEMPERATURE"]

#: Sampling temperature of the judge when it votes more than once (one vote: the client's own, 0).
JUDGE_TEMPERATURE = 0.7


@dataclass(frozen=True)
class Verdict:
    """A task's pass-rate label (None: the judge gave none), why, and the votes behind it."""

    label: str | None
    reason: str
    votes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "reason": self.reason, "votes": list(self.votes)}


@dataclass(frozen=True)
class Preference:
    """Which of two answers the judge prefers: ``a``, ``b`` or ``tie`` (None: no verdict)."""

    winner: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"winner": self.winner, "reason": self.reason}


def _json_object(text: str) -> dict[str, Any] | None:
    """The last JSON object in a reply (a model may wrap it in prose or a code fence)."""
    for m in reversed(list(re.finditer(r"\{[^{}]*\}", text, re.S))):
        try:
            obj = json.loads(m.group(0))
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def parse_label(text: str) -> tuple[str, str] | None:
    """``(label, reason)`` of a pass-rate reply, or None when it names no label."""
    obj = _json_object(text)
    if obj is not None:
        label = str(obj.get("label") or "").strip().lower()
        if label in LABELS:
            return label, str(obj.get("reason") or "").strip()
    words = set(re.findall(r"\b(solved|unsolved|unsure)\b", text.lower()))
    if len(words) == 1:  # one label named, and only one: read it; two would be a guess
        return words.pop(), " ".join(text.split())[:500]
    return None


def parse_preference(text: str) -> tuple[str, str] | None:
    """``(A | B | tie, reason)`` of a comparison reply, or None."""
    obj = _json_object(text)
    if obj is not None:
        pick = str(obj.get("preference") or "").strip().lower()
        if pick in ("a", "b", "tie"):
            return pick, str(obj.get("reason") or "").strip()
    return None


def _calls_text(score: TaskScore, limit: int = 40) -> str:
    if not score.calls:
        return "(no call)"
    shown = ", ".join(score.calls[:limit])
    return shown + (f", ... ({len(score.calls) - limit} more)" if len(score.calls) > limit else "")


@dataclass
class Judge:
    """A judge model and how many votes it casts per verdict: a ``ModelClient``, or a ``make``
    that builds one on the first question (an evaluation whose verdicts are all kept needs no
    judge server at all); ``name`` is the model's name when the client is not made yet. ``usage``
    counts what it cost (requests and tokens), over all threads."""

    client: ModelClient | None = None
    votes: int = 1
    make: Callable[[], ModelClient] | None = field(default=None, repr=False)
    name: str | None = None
    usage: dict[str, int] = field(default_factory=lambda: {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0})

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        if self.client is None and self.make is None:
            raise ValueError("a Judge needs a client or a make")

    @property
    def model(self) -> str:
        return str(getattr(self.client, "model", None) or self.name or "judge")

    def _client(self) -> ModelClient:
        with self._lock:
            if self.client is None:
                assert self.make is not None
                self.client = self.make()
            return self.client

    def _ask(self, text: str) -> str:
        completion = self._client().complete([{"role": "user", "content": text}])
        with self._lock:
            self.usage["llm_calls"] += completion.requests
            self.usage["prompt_tokens"] += completion.prompt_tokens
            self.usage["completion_tokens"] += completion.completion_tokens
        return completion.text

    def pass_label(self, task: EvalTask, score: TaskScore, tools: Sequence[str] = ()) -> Verdict:
        """ToolEval's pass-rate label of one answer (see the module docstring)."""
        if not score.answer.strip():
            return Verdict("unsolved", "no answer", ())
        reference = f"\n## A reference answer (it may be worded differently)\n\n{task.answer}\n" if task.answer else ""
        text = prompts.render(
            "judge_pass", task=task.query,
            solvable="The task can be solved with the tools." if task.solvable
            else "The task can NOT be solved with the tools.",
            tools=", ".join(tools) or "(as in the calls)",
            calls=_calls_text(score), answer=score.answer.strip()[:6000], reference=reference)
        votes: list[tuple[str, str]] = []
        unread = ""
        for _ in range(max(1, self.votes)):
            reply = self._ask(text)
            parsed = parse_label(reply)
            if parsed is None:
                unread = reply
                continue
            votes.append(parsed)
        if not votes:
            return Verdict(None, "the judge's reply named no label: " + " ".join(unread.split())[:300], ())
        counts = Counter(label for label, _ in votes).most_common()
        label = counts[0][0] if len(counts) == 1 or counts[0][1] > counts[1][1] else "unsure"
        reason = next((r for lab, r in votes if lab == label), votes[0][1])
        return Verdict(label, reason, tuple(lab for lab, _ in votes))

    def compare(self, task: EvalTask, first: TaskScore, second: TaskScore, *, swap: bool = False) -> Preference:
        """Which of ``first`` and ``second`` is better (``a`` = first); ``swap`` shows second as A."""
        shown_a, shown_b = (second, first) if swap else (first, second)
        text = prompts.render(
            "judge_compare", task=task.query,
            a_count=str(len(shown_a.calls)), a_calls=_calls_text(shown_a), a_answer=shown_a.answer.strip()[:4000] or "(none)",
            b_count=str(len(shown_b.calls)), b_calls=_calls_text(shown_b), b_answer=shown_b.answer.strip()[:4000] or "(none)")
        picks: list[tuple[str, str]] = []
        for _ in range(max(1, self.votes)):
            parsed = parse_preference(self._ask(text))
            if parsed is not None:
                picks.append(parsed)
        if not picks:
            return Preference(None, "the judge's reply named no preference")
        counts = Counter(p for p, _ in picks).most_common()
        pick = counts[0][0] if len(counts) == 1 or counts[0][1] > counts[1][1] else "tie"
        reason = next((r for p, r in picks if p == pick), picks[0][1])
        if swap and pick in ("a", "b"):
            pick = "b" if pick == "a" else "a"
        return Preference(pick, reason)
