"""One BFCL task, run as ``atc eval`` runs a task: each user turn is one run of the strategy.

``BfclJob`` is the batch job (``atc.workflows.jobs.Job``) of a BFCL suite. For a task it makes
the task's tools (``state.TaskTools``: the API class instances with the task's state, as
function tools), then for every user turn solves the turn with the strategy under evaluation
(``atc.loop.solving.solve``: ``chain`` writes one program, ``react`` calls one function per model
turn...) on those same instances, and records which calls reached them. The query of a turn is
the user's message, after the earlier turns' messages and the answers given to them
(``turn_query``): the tools keep their state, the model is told what came before. Each turn has a
write ledger of its own (``--writes`` applies to every turn): the repairs of a turn never repeat a
write, and a call that a later turn asks for again is made again. A turn of
``miss_func`` that brings held-out functions back says what BFCL says then.

When every turn ran, BFCL's checker scores the calls (``checker.check``); the result line is the
turns' solutions in one (``Solution``: answer of the last turn, every turn's calls, usage and
steps summed; ``trace`` holds each turn and the checker's account) with ``"verdict"``:
``solved`` or ``unsolved``, which ``atc eval`` reports as the task's success. A model server that
fails mid-task leaves the task unscored (it runs again on the next run of the evaluation).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atc import tracing
from atc.evaluation.bfcl.checker import call_string, check
from atc.evaluation.bfcl.data import BfclTask
from atc.evaluation.bfcl.state import TaskTools
from atc.loop.solving import Solution, Usage, solve
from atc.retrieval.base import Hit, SearchResult
from atc.workflows.jobs import Job, Outcome
from atc.workflows.tasks import Task

__all__ = ["BfclJob", "BfclOutcome", "ShownTools", "turn_query", "FOLLOW_UP"]

#: What BFCL tells a model at a ``miss_func`` turn that brings functions back (its own words).
FOLLOW_UP = "I have updated some more functions you can choose from. What about now?"
#: Characters of an earlier turn's answer repeated in a later turn's query.
_ANSWER_CHARS = 600


def _user_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages if m.get("role", "user") == "user").strip()


def turn_query(task: BfclTask, turn: int, answers: list[str]) -> str:
    """The query of user turn ``turn`` (0-based): the earlier turns, then this one."""
    current = _user_text(task.turns[turn]) or _follow_up()
    if turn == 0:
        return current
    lines = ["Earlier in this conversation (the tools keep their state from one turn to the next):", ""]
    for i in range(turn):
        said = " ".join((answers[i] if i < len(answers) else "").split())
        if len(said) > _ANSWER_CHARS:
            said = said[:_ANSWER_CHARS] + "..."
        lines += [f"Turn {i + 1}. The user: {_user_text(task.turns[i]) or _follow_up()}",
                  f"Your answer: {said or '(none)'}", ""]
    lines.append(f"Now, turn {turn + 1}. The user: {current}")
    return "\n".join(lines)


def _follow_up() -> str:
    try:
        # bfcl-eval: optional (atc[bfcl]); only BFCL suites need it
        from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
    except ImportError:
        return FOLLOW_UP
    return str(DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC)


@dataclass
class ShownTools:
    """The "retriever" of a BFCL turn: the tools BFCL shows at that turn, whatever the query."""

    shown: list[tuple[str, str]]
    name: str = "bfcl"

    def search(self, query: str, k: int = 5) -> Any:
        return SearchResult([Hit(c, n, 1.0) for c, n in self.shown], self.name)


@dataclass
class BfclOutcome(Outcome):
    """A BFCL task's outcome: the combined solution, BFCL's verdict (``solved``/``unsolved``;
    None when it was not scored) and the checker's account."""

    verdict: str | None = None
    check: dict[str, Any] = field(default_factory=dict)

    def line(self) -> dict[str, Any]:
        d = super().line()
        if self.verdict is not None:
            d["verdict"] = self.verdict
            d["bfcl"] = self.check
        return d


@dataclass
class BfclJob(Job):
    """The batch job of a BFCL suite: ``tasks`` by id, their data ``folder`` (None: the package)."""

    tasks: dict[str, BfclTask] = field(default_factory=dict)
    folder: Path | None = None

    def run(self, task: Task) -> Outcome:
        started = time.perf_counter()
        entry = self.tasks[task.key]
        with tracing.span("atc.task", {"atc.task.id": entry.id, "atc.task.kind": "bfcl"}) as span:
            try:
                outcome = self._episode(task, entry)
            except Exception as exc:  # the task could not be attempted (configuration, our bug)
                failed = Solution.failed(entry.id, exc, duration_ms=(time.perf_counter() - started) * 1000,
                                         strategy=self._strategy_name())
                return BfclOutcome(task, failed)
            tracing.set_attributes(span, {"atc.status": "ok" if outcome.ok else "failed"})
        return outcome

    def _strategy_name(self) -> str | None:
        chosen = self.solve_options.get("strategy")
        return chosen if isinstance(chosen, str | None) else getattr(chosen, "name", None)

    def _episode(self, task: Task, entry: BfclTask) -> BfclOutcome:
        started = time.perf_counter()
        tools = TaskTools(entry, self.folder)
        _, recording = self._prepare()
        client = self.model_client()
        solutions: list[Solution] = []
        turns: list[list[str]] = []
        answers: list[str] = []
        options = {k: v for k, v in self.solve_options.items() if k not in ("top_k", "retriever")}
        toolset = tools.toolset(recording.wrap_toolset if recording is not None else None)
        for number in range(len(entry.turns)):
            shown = tools.shown(number)  # BFCL shows every function but the held-out ones
            # a write ledger per turn: a call repeated in a later turn is the user's new request
            # (cd('..') again) and is made again; within a turn, repairs do not repeat a write
            writes = self.task_writes(Task(f"{task.id}#turn{number + 1}", query=""))
            solution = solve(turn_query(entry, number, answers), toolset, client=client,
                             max_reflections=self.max_reflections, limits=self.limits, sandbox=self.sandbox,
                             top_k=max(1, len(shown)), retriever=ShownTools(shown), writes=writes, **options)
            turns.append([call_string(name, args) for name, args in tools.recorder.take()])
            answers.append(solution.answer)
            solutions.append(solution)
            if (solution.error or {}).get("type") == "ModelError":
                break
        combined = _combined(entry, solutions, turns, self._strategy_name(), started)
        if len(turns) < len(entry.turns):  # the model server stopped it: not scored, run again later
            return BfclOutcome(task, combined)
        verdict = check(entry, turns)
        combined.ok = bool(verdict["valid"])
        if not combined.ok:
            combined.error = {"type": "BfclMismatch", "message": f"{verdict['error_type']}: {verdict['error_message']}",
                              "line": None, "tool": None}
        else:
            combined.error = None
        combined.trace["bfcl"] = verdict
        return BfclOutcome(task, combined, verdict="solved" if combined.ok else "unsolved", check=verdict)


def _combined(entry: BfclTask, solutions: list[Any], turns: list[list[str]], strategy: str | None,
              started: float) -> Any:
    """The turns' solutions as one (see the module docstring)."""
    usage = Usage()
    failures: dict[str, int] = {}
    for s in solutions:
        usage.llm_calls += s.usage.llm_calls
        usage.prompt_tokens += s.usage.prompt_tokens
        usage.completion_tokens += s.usage.completion_tokens
        for kind, count in s.failures.items():
            failures[kind] = failures.get(kind, 0) + count
    last = solutions[-1] if solutions else None
    stopped = next((s.error for s in solutions if (s.error or {}).get("type") == "ModelError"), None)
    trace = {"turns": [{"query": s.query, "ok": s.ok, "answer": s.answer[:2000], "calls": calls, "steps": s.steps,
                        "error": s.error} for s, calls in zip(solutions, turns, strict=False)]}
    return Solution(
        ok=False, answer=last.answer if last else "",
        program="\n\n".join(f"# turn {i + 1}\n{s.program.rstrip()}" for i, s in enumerate(solutions) if s.program),
        attempts=[a for s in solutions for a in s.attempts], calls=[c for s in solutions for c in s.calls],
        usage=usage, tools=sorted({t for s in solutions for t in s.tools}),
        sandbox=next((s.sandbox for s in reversed(solutions) if s.sandbox), None),
        duration_ms=(time.perf_counter() - started) * 1000, error=stopped, query=_task_text(entry),
        model=last.model if last else None, strategy=strategy or (last.strategy if last else "chain"),
        steps=sum(s.steps for s in solutions), step_unit=last.step_unit if last else "step",
        api_calls=sum(s.api_calls for s in solutions), trace=trace, failures=dict(sorted(failures.items())))


def _task_text(entry: BfclTask) -> str:
    return " / ".join(_user_text(t) or _follow_up() for t in entry.turns)
