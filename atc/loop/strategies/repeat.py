"""``NAME@k``: a whole strategy run again, up to ``k`` times, until a run ends with an answer.

The Chain-of-Tools paper's ReAct@3 and ToolLLM@3 rows are "up to three runs of the vanilla method
until the task is successfully completed". The paper does not say how a run is known to be
successful, and no judge is asked while a task runs; two rules that need none (``UNTIL``):

- ``answer`` (the default): ToolBench's own rule for its CoT@n (``single_chain``'s pass_at): a
  run succeeds when it ends with a final answer (``finish`` with an answer, ``give_answer``, a
  program that printed one), so a run that gave up, hit its bound or never answered runs again;
- ``exec``: as ``answer``, and the answer must not read as an error message (``reads_as_error``:
  the screen the Chain-of-Tools paper's released code puts on a program's output).

Every run is made on the same episode: the same meter (each run's model turns, requests and
tokens add up), the same gateway and call log (``api_calls`` and the failures count every run's
calls), the same budget (``--max-model-calls`` bounds the k runs together, as cost). Each run
starts from the task afresh -- a new conversation, a new tree -- as a rerun of the method does.
The answer is the successful run's (else the last run's), and ``calls`` are that run's calls.
"""

from __future__ import annotations

import re
from typing import Any

from atc.errors import ModelError, UsageError
from atc.loop.strategies.base import Episode, Outcome, Strategy, model_stop

__all__ = ["Repeat", "UNTIL", "reads_as_error"]

#: The rules that end the reruns, as ``summary.json`` names them (the first is the default).
UNTIL = ("answer", "exec")

# Words and phrases by which a printed answer reads as an error message rather than an answer,
# after the released Chain-of-Tools code's own screen of a program's output.
_ERROR_WORDS = frozenset({"error", "errors", "exception", "traceback", "failed", "fail", "invalid"})
_ERROR_PHRASES = ("not found", "no results", "not available", "does not exist", "doesn't exist", "could not be found",
                  "out of range", "is not defined", '"success": false', "no keywords found")


def reads_as_error(text: str) -> bool:
    """Does an answer read as an error (a word such as "error" or "invalid", a phrase such as
    "not found")?"""
    low = text.lower()
    if any(phrase in low for phrase in _ERROR_PHRASES):
        return True
    return any(word in _ERROR_WORDS for word in re.findall(r"[a-z']+", low))


class Repeat:
    """``inner`` run up to ``runs`` times until a run succeeds by ``until`` (module docstring)."""

    def __init__(self, inner: Strategy, runs: int, until: str = UNTIL[0]) -> None:
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise UsageError(f"@k needs k of at least 1, not {runs!r}")
        if until not in UNTIL:
            raise UsageError(f"until {until!r}: use one of {', '.join(UNTIL)}")
        self.inner = inner
        self.runs = runs
        self.until = until
        self.name = f"{inner.name}@{runs}"
        self.step_unit = str(getattr(inner, "step_unit", "step"))
        self.uses_sandbox = bool(getattr(inner, "uses_sandbox", False))

    def run(self, episode: Episode) -> Outcome:
        done: list[tuple[int, int, Outcome]] = []
        steps = 0
        for _ in range(self.runs):
            start = len(episode.calls)
            try:
                outcome = self.inner.run(episode)
            except ModelError as exc:
                if not done:  # the server failed before anything was done: as the strategy itself would
                    raise
                outcome = Outcome(ok=False, error=model_stop(episode, exc, steps, self.step_unit))
            done.append((start, len(episode.calls), outcome))
            steps += outcome.steps
            error_type = (outcome.error or {}).get("type")
            if self.succeeded(outcome) or error_type in ("ModelBudget", "ModelError"):
                break  # solved, or nothing more can be spent on the model
        return self._outcome(episode, done, steps)

    def succeeded(self, outcome: Outcome) -> bool:
        if not outcome.ok or not outcome.answer.strip():
            return False
        return self.until == "answer" or not reads_as_error(outcome.answer)

    def _outcome(self, episode: Episode, done: list[tuple[int, int, Outcome]], steps: int) -> Outcome:
        start, end, final = done[-1]
        own = {id(c) for c in episode.calls[start:end]}
        runs: list[dict[str, Any]] = []
        attempts: list[Any] = []
        for number, (first, last, outcome) in enumerate(done, start=1):
            runs.append({"run": number, "ok": outcome.ok, "steps": outcome.steps, "calls": last - first,
                         "answer": outcome.answer[:500], "error": (outcome.error or {}).get("type"),
                         "trace": outcome.trace})
            attempts.extend(outcome.attempts)
        trace = {"k": self.runs, "until": self.until, "runs": runs,
                 "answer_run": len(done) if self.succeeded(final) else None}
        return Outcome(ok=final.ok, answer=final.answer, error=final.error,
                       calls=[c for c in final.calls if id(c) in own], steps=steps, trace=trace,
                       program=final.program, attempts=attempts, tools=final.tools)
