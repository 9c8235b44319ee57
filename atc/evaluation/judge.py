"""The judge: a model that labels answers (ToolEval's pass rate) and compares two (its win rate),
after ToolEval's published evaluator (ToolLLM's ``tooleval``) and StableToolBench's pass rate.

**Pass rate.** A run that ended without a final answer (the solve failed, the answer is empty, the
model gave up) is ``unsolved`` without asking -- except a give-up on a task marked unsolvable,
which ToolEval passes. Otherwise each vote is ToolEval's two phases:

1. the judge sees the task and the final answer only (and a reference answer when the suite has
   one) and labels it ``solved``, ``unsolved`` or ``unsure``; an apology, a refusal or an honest
   "I could not find it" is ``unsolved`` for a solvable task;
2. only on ``unsure``, it sees the calls behind the answer -- each with its arguments, HTTP status
   and a bounded response or error -- and labels again, so that a confident answer built on failed
   calls is caught.

The answer and everything the tools returned are fenced as data (``atc.evaluation.labels``). A
label is read only from the judge's own structured reply (a forced function call where the
server offers function calling, else one JSON object, or exactly one label); an unreadable reply
is asked again (``retries``), and a vote still without a label leaves the task unjudged, to be
judged on the next run, never guessed. ``votes`` (default 3) verdicts are asked per task (sampled
at ``JUDGE_TEMPERATURE``, ToolEval's); each scores 1, 0.5 or 0 and the task's pass score is their
mean (StableToolBench), its label their majority.

**Win rate.** For two strategies' answers to a task, ToolEval's order decides without asking: a
solved answer beats the other, then an unsure one beats an unsolved one; when both have the same
label the judge is shown both answers and their calls and picks one (no tie: ToolEval's
comparison has none). Which is shown first alternates from task to task, against position bias;
with an even number of votes split evenly, and for identical answers and calls, it is a tie.

The prompts are package data (``atc/prompts/judge_*.md``).
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
from atc.errors import ModelError
from atc.evaluation.labels import (
    DATA_NOTE,
    LABEL_FUNCTION,
    PICK_FUNCTION,
    fence,
    parse_label,
    parse_label_arguments,
    parse_preference,
    parse_preference_arguments,
)
from atc.evaluation.metrics import VOTE_SCORE, TaskScore, majority
from atc.evaluation.suite import EvalTask

if TYPE_CHECKING:
    from atc.llm.chat import Completion, ModelClient

__all__ = ["Verdict", "Preference", "Judge", "JUDGE_TEMPERATURE", "DEFAULT_VOTES", "PROTOCOL", "answer_text",
           "trajectory_text"]

#: Sampling temperature of the judge when it votes more than once (ToolEval's evaluator config;
#: one vote: the client's own, 0).
JUDGE_TEMPERATURE = 0.2
#: Votes per task by default.
DEFAULT_VOTES = 3
#: The protocol, as ``summary.json`` names it.
PROTOCOL = {"pass_rate": "ToolEval two phases (answer; on unsure, the calls), a run without a final answer "
                         "unsolved without asking; each vote scored solved 1, unsure 0.5, unsolved 0 and averaged "
                         "(StableToolBench)",
            "win_rate": "ToolEval: solved > unsure > unsolved without asking; the same label: the judge picks one "
                        "(no tie), seeing answers and calls; (wins + ties / 2) / compared"}

_TEXT_REPLY = ('Reply with one JSON object and nothing else: {"label": "solved" | "unsolved" | "unsure", '
               '"reason": "one or two sentences"}')
_CALL_REPLY = "Give your label and reason by calling `give_label`."
_TEXT_PICK = 'Reply with one JSON object and nothing else: {"better": "A" | "B", "reason": "one or two sentences"}'
_CALL_PICK = "Give your choice and reason by calling `pick_better`."
#: ModelError messages of a server that does not take ``tools``/``tool_choice`` (it answered 4xx).
_NO_FUNCTIONS = re.compile(r"HTTP (400|415|422|501)")


@dataclass(frozen=True)
class Verdict:
    """A task's pass-rate verdict: its majority ``label`` (None: unjudged), why, each vote's label,
    the phases each vote went through, and the pass ``score`` (the votes' mean; None unjudged)."""

    label: str | None
    reason: str
    votes: tuple[str, ...] = ()
    phases: tuple[tuple[str, ...], ...] = ()
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "reason": self.reason, "votes": list(self.votes),
                "phases": [list(p) for p in self.phases], "score": self.score}


@dataclass(frozen=True)
class Preference:
    """Which of two answers the judge prefers: ``a``, ``b`` or ``tie`` (None: no verdict)."""

    winner: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"winner": self.winner, "reason": self.reason}


def answer_text(score: TaskScore, limit: int = 6000) -> str:
    text = score.answer.strip()
    return fence(text[:limit] + (" ...(cut)" if len(text) > limit else "") if text else "(no answer)", "answer")


def trajectory_text(score: TaskScore, limit: int = 40) -> str:
    """The answer's calls, one per line, fenced: tool, arguments, status, response or error."""
    calls = score.trajectory[:limit]
    if not calls:
        return fence("(no call)", "calls")
    lines = []
    for number, c in enumerate(calls, start=1):
        args = json.dumps(c.get("args"), ensure_ascii=False, default=str)[:300]
        status = c.get("status")
        head = f"{number}. {c.get('tool')}({args}) -> HTTP {status if status is not None else 'none (not sent)'}"
        if c.get("ok"):
            body = c.get("response")
            shown = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
            lines.append(f"{head}: {shown[:600]}" if "response" in c else head)
        else:
            lines.append(f"{head}, failed: {str(c.get('error') or '')[:300]}")
    more = f"\n... and {len(score.trajectory) - limit} more call(s)" if len(score.trajectory) > limit else ""
    return fence("\n".join(lines) + more, "calls")


@dataclass
class Judge:
    """A judge model and how many votes it casts per verdict: a ``ModelClient``, or a ``make``
    that builds one on the first question (an evaluation whose verdicts are all kept needs no
    judge server at all); ``name`` is the model's name when the client is not made yet.
    ``structured``: ``auto`` (a forced function call, falling back to JSON text for a server that
    refuses functions), ``function`` or ``json``; ``retries``: re-asks of an unreadable reply.
    ``usage`` counts what it cost (model turns, requests, tokens), over all threads."""

    client: ModelClient | None = None
    votes: int = DEFAULT_VOTES
    make: Callable[[], ModelClient] | None = field(default=None, repr=False)
    name: str | None = None
    structured: str = "auto"
    retries: int = 2
    usage: dict[str, int] = field(default_factory=lambda: {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                           "model_turns": 0})

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        if self.client is None and self.make is None:
            raise ValueError("a Judge needs a client or a make")
        if self.structured not in ("auto", "function", "json"):
            raise ValueError(f"structured must be auto, function or json, not {self.structured!r}")
        self._functions = self.structured != "json"

    @property
    def model(self) -> str:
        return str(getattr(self.client, "model", None) or self.name or "judge")

    @property
    def mode(self) -> str:
        """How labels are asked for now: ``function`` or ``json``."""
        return "function" if self._functions else "json"

    def _client(self) -> ModelClient:
        with self._lock:
            if self.client is None:
                assert self.make is not None
                self.client = self.make()
            return self.client

    def _count(self, completion: Completion) -> None:
        with self._lock:
            self.usage["llm_calls"] += completion.requests
            self.usage["prompt_tokens"] += completion.prompt_tokens
            self.usage["completion_tokens"] += completion.completion_tokens
            self.usage["model_turns"] += 1

    def _complete(self, text: str, function: dict[str, Any]) -> Completion:
        """One question, with the function forced while the server takes functions."""
        client: Any = self._client()
        messages = [{"role": "user", "content": text}]
        if self._functions:
            forced = {"type": "function", "function": {"name": function["function"]["name"]}}
            try:
                completion: Completion = client.complete(messages, tools=[function], tool_choice=forced)
            except TypeError:  # a client that knows no functions: JSON text from now on
                if self.structured == "function":
                    raise
                self._functions = False
            except ModelError as exc:
                if self.structured == "function" or not _NO_FUNCTIONS.search(exc.message):
                    raise
                completion = client.complete(messages)  # the same question without functions
                self._count(completion)
                self._functions = False  # it answered: this server takes no functions
                return completion
            else:
                self._count(completion)
                return completion
        completion = client.complete(messages)
        self._count(completion)
        return completion

    def _ask(self, render: Callable[[str], str], function: dict[str, Any],
             read_text: Callable[[str], tuple[str, str] | None],
             read_call: Callable[[str], tuple[str, str] | None]) -> tuple[str, str] | None:
        """Ask until a structured reply is read (``retries`` more times at most); None if never."""
        for _ in range(1 + max(0, self.retries)):
            reply = _CALL_REPLY if self._functions else _TEXT_REPLY
            if function is PICK_FUNCTION:
                reply = _CALL_PICK if self._functions else _TEXT_PICK
            completion = self._complete(render(reply), function)
            name = function["function"]["name"]
            for call in completion.tool_calls or ():
                got = getattr(call, "name", None) if not isinstance(call, dict) else call.get("name")
                if got == name:
                    args = getattr(call, "arguments", None) if not isinstance(call, dict) else call.get("arguments")
                    parsed = read_call(str(args or ""))
                    if parsed is not None:
                        return parsed
            parsed = read_text(completion.text or "")
            if parsed is not None:
                return parsed
        return None

    # -- the pass rate ----------------------------------------------------------------------------

    def _prompt(self, task: EvalTask, score: TaskScore, phase: int) -> Callable[[str], str]:
        reference = (f"\n## A reference answer (from the benchmark; it may be worded differently)\n\n{task.answer}\n"
                     if task.answer else "")
        if phase == 1:
            rules = prompts.render("judge_rules_solvable" if task.solvable else "judge_rules_unsolvable")
            return lambda reply: prompts.render("judge_answer", data_note=DATA_NOTE, task=task.query,
                                                reference=reference, answer=answer_text(score), rules=rules.strip(),
                                                reply=reply)
        solvable = ("The task can be solved with the tools." if task.solvable
                    else "The task can NOT be solved with the tools.")
        return lambda reply: prompts.render("judge_trajectory", data_note=DATA_NOTE, task=task.query, solvable=solvable,
                                            reference=reference, answer=answer_text(score),
                                            calls=trajectory_text(score), reply=reply)

    def vote(self, task: EvalTask, score: TaskScore) -> tuple[tuple[str, ...], str] | None:
        """One vote: the phases' labels (the last is the vote's) and the reason; None: no label."""
        first = self._ask(self._prompt(task, score, 1), LABEL_FUNCTION, parse_label, parse_label_arguments)
        if first is None:
            return None
        if first[0] != "unsure":
            return (first[0],), first[1]
        second = self._ask(self._prompt(task, score, 2), LABEL_FUNCTION, parse_label, parse_label_arguments)
        if second is None:
            return None
        return ("unsure", second[0]), second[1]

    def pass_label(self, task: EvalTask, score: TaskScore, tools: Sequence[str] = ()) -> Verdict:
        """ToolEval's pass-rate verdict of one answer, ``votes`` times (module docstring)."""
        votes = max(1, self.votes)
        gave_up = str(score.error or "").startswith("GaveUp")
        if not task.solvable and gave_up:  # ToolEval: giving up on a task no tool can solve passes
            return Verdict("solved", "gave up on an unsolvable task: solved without asking", ("solved",) * votes,
                           (("none",),) * votes, 1.0)
        if not score.final or "give_up_and_restart" in score.answer:
            return Verdict("unsolved", "no final answer: unsolved without asking", ("unsolved",) * votes,
                           (("none",),) * votes, 0.0)
        labels: list[str] = []
        phases: list[tuple[str, ...]] = []
        reasons: list[str] = []
        for _ in range(votes):
            got = self.vote(task, score)
            if got is None:
                return Verdict(None, f"the judge gave no readable label after {1 + self.retries} asks "
                                     f"(votes so far: {', '.join(labels) or 'none'})", tuple(labels), tuple(phases))
            phases.append(got[0])
            labels.append(got[0][-1])
            reasons.append(got[1])
        label = majority(labels)
        reason = next((r for lab, r in zip(labels, reasons, strict=True) if lab == label and r), reasons[0])
        return Verdict(label, reason, tuple(labels), tuple(phases), sum(VOTE_SCORE[x] for x in labels) / len(labels))

    # -- the win rate -----------------------------------------------------------------------------

    def compare(self, task: EvalTask, first: TaskScore, second: TaskScore, *, swap: bool = False) -> Preference:
        """Which of ``first`` and ``second`` is better (``a`` = first); ``swap`` shows second as A."""
        if first.answer.strip() == second.answer.strip() and first.trajectory == second.trajectory:
            return Preference("tie", "identical answers and calls")
        shown_a, shown_b = (second, first) if swap else (first, second)

        def render(reply: str) -> str:
            return prompts.render(
                "judge_compare", data_note=DATA_NOTE, task=task.query,
                a_count=str(len(shown_a.trajectory)), a_calls=trajectory_text(shown_a), a_answer=answer_text(shown_a, 4000),
                b_count=str(len(shown_b.trajectory)), b_calls=trajectory_text(shown_b), b_answer=answer_text(shown_b, 4000),
                reply=reply)

        picks: list[tuple[str, str]] = []
        for _ in range(max(1, self.votes)):
            parsed = self._ask(render, PICK_FUNCTION, parse_preference, parse_preference_arguments)
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
