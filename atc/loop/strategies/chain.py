"""``chain``: one program that chains the tools, repaired by attributable reflection (ATC paper,
sections 3.2-3.3), and ``chain-plain``, the paper's ablation: the same loop, told only the raw
error.

One attempt is one model reply. It fails when the reply holds no program (``NoProgram``), the
program fails a static check (``SyntaxError``, ``NameError`` or ``ToolError`` found before running:
no sandbox run is spent, the attempt's ``result`` is None), the run raises, or the run succeeds but
prints nothing (``EmptyAnswer``), or, when a typed answer was asked for (``answer=``), hands
``final_answer`` no value or one that does not match the schema (``AnswerError``, see
``atc.loop.answers``: then printing nothing is fine). After a failure ``chain`` tells the model the error and, when a
tool is to blame, that tool's full protocol and what it really returned (``atc.loop.reflection``; the
model itself is asked to name the tool when the run could not), and a retriever that can reflect
reopens its search. ``chain-plain`` tells it the traceback and nothing else. Every attempt is kept
in ``Outcome.attempts`` in order, including the ones that never reached the sandbox.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from atc import prompts, tracing
from atc.errors import ModelError, UsageError
from atc.llm.chat import Message
from atc.loop.answers import error_of
from atc.loop.checks import check_for_run
from atc.loop.extract import extract_program
from atc.loop.reflection import ask_model_for_tool, feedback, needs_model_attribution
from atc.loop.strategies.base import Episode, Outcome, Step, error_dict, model_stop, run_failure
from atc.loop.strategies.registry import register
from atc.loop.strategies.requests import note_program
from atc.loop.strategies.settings import ChainSettings
from atc.retrieval.select import reopen, reopened_text
from protocols.model import Tool
from protocols.render import render_compact
from sandbox.api import ExecutionResult

__all__ = ["Attempt", "Chain", "ChainPlain", "attempt_failure"]

@dataclass
class Attempt:
    """One model reply and what became of it. ``program`` is "" when the reply held none;
    ``result`` is None when nothing ran (no program, or a static check caught it);
    ``blamed_tool`` is the tool the failure was attributed to (by the run or by the model)."""

    program: str
    ok: bool
    error: dict[str, Any] | None
    result: ExecutionResult | None = None
    blamed_tool: str | None = None
    reply: str = ""
    #: the typed answer of an attempt that succeeded with one (``answer=``)
    value: Any = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "program": self.program,
            "ok": self.ok,
            "error": self.error,
            "blamed_tool": self.blamed_tool,
            "sandbox": self.result.sandbox if self.result else None,
            "duration_ms": round(self.result.duration_ms, 3) if self.result else None,
            "calls": len(self.result.calls) if self.result else 0,
        }
        if not self.program:
            d["reply"] = self.reply[:2000]  # what the model said instead of a program
        return d

    def summary(self) -> str:
        """One line for progress output: ok and its calls, or what failed, where, who is blamed."""
        if self.ok:
            calls = len(self.result.calls) if self.result else 0
            return f"ok ({calls} tool call{'' if calls == 1 else 's'})"
        err = self.error or {}
        where = f" at line {err['line']}" if err.get("line") else ""
        ran = "" if self.result is not None or not self.program else " (found before running)"
        blamed = f"; blamed tool: {self.blamed_tool}" if self.blamed_tool else ""
        message = " ".join(str(err.get("message") or "").split())[:160]
        return f"{err.get('type', 'Error')}{where}{ran}: {message}{blamed}"


def attempt_failure(attempt: Attempt) -> str | None:
    """The failure kind of a failed attempt, unless a tool call explains it (a run that raised a
    tool's error: that call is counted from the call log)."""
    if attempt.ok:
        return None
    error = attempt.error or {}
    kind = error.get("type")
    if kind == "NoProgram":
        return "no_program"
    if kind == "EmptyAnswer":
        return "empty_answer"
    if kind == "AnswerError":
        return "bad_answer"
    if error.get("static"):
        return {"ToolError": "bad_arguments", "NameError": "unknown_tool"}.get(str(kind), "program_error")
    return run_failure(kind)


class Chain:
    """One program per attempt; after a failure, attributable reflection; at most
    ``max_reflections`` repairs (``max_steps``, when given, is the number of attempts), or as
    ``settings`` say (``ChainSettings``: the paper's alpha = 3 is ``max_attempts=3``)."""

    name = "chain"
    step_unit = "attempt"
    #: programs run in the sandbox: it is made ready while the model writes the first one
    uses_sandbox = True

    def __init__(self, *, max_reflections: int = 3, max_steps: int | None = None,
                 settings: ChainSettings | None = None, **_: Any) -> None:
        if settings is None:
            attempts = max_steps if max_steps is not None else max_reflections + 1
            if attempts < 1:
                raise UsageError("--max-reflections must be 0 or more (--max-steps at least 1)")
            settings = ChainSettings(max_attempts=attempts, profile="atc" if attempts == 4 else "given")
        settings.check()
        self.settings = settings
        self.max_attempts = settings.max_attempts

    def run(self, episode: Episode) -> Outcome:
        conversation = self.opening(episode)
        attempts: list[Attempt] = []
        for number in range(1, self.max_attempts + 1):
            try:
                attempt = self.attempt(episode, conversation, number)
            except ModelError as exc:
                return self.outcome(episode, attempts, stop=model_stop(episode, exc, len(attempts), "attempt"))
            attempts.append(attempt)
            if attempt.ok or number == self.max_attempts:
                self.report(episode, attempt, number)
                break
            try:
                conversation += self.reflect(episode, attempt, number)
            except ModelError as exc:  # the attribution question found the model gone, or the budget spent
                self.report(episode, attempt, number)
                return self.outcome(episode, attempts, stop=model_stop(episode, exc, len(attempts), "attempt"))
            self.report(episode, attempt, number)
        return self.outcome(episode, attempts)

    # -- the steps ------------------------------------------------------------------------------

    def opening(self, episode: Episode) -> list[Message]:
        """The system prompt, the tools' compact protocols and the task (eq. 1 of the paper)."""
        task = prompts.render("generate", tools=render_compact(episode.shown).strip(), task=episode.query.strip())
        return [{"role": "system", "content": prompts.render("system")},
                {"role": "user", "content": task + episode.answer_prompt() + episode.rules_note()}]

    def attempt(self, episode: Episode, conversation: list[Message], number: int) -> Attempt:
        """Ask for a program and try it (an ``atc.attempt`` span)."""
        with tracing.span("atc.attempt", {"atc.attempt": number}) as current:
            reply = episode.ask(conversation)
            attempt = self.try_program(episode, reply.text)
            tracing.set_attributes(current, {"atc.status": "ok" if attempt.ok else "failed",
                                             "atc.error.type": (attempt.error or {}).get("type"),
                                             "atc.attributed_tool": attempt.blamed_tool})
        kind = attempt_failure(attempt)
        if kind is not None:
            episode.fail(kind)
        return attempt

    def try_program(self, episode: Episode, reply: str) -> Attempt:
        """Extract the program, check it statically, run it, and judge what it printed."""
        toolset = episode.toolset
        program = extract_program(reply, toolset.names())
        if program is None:
            return Attempt("", False, error_dict("NoProgram", "the reply contained no Python program"), reply=reply)
        static = check_for_run(program, toolset)
        if static is not None:
            note_program(episode, program)  # its calls were requested, and never sent
            return Attempt(program, False, static, blamed_tool=static.get("tool"), reply=reply)
        result = episode.run_program(program)
        if not result.ok:
            error = result.error.to_dict() if result.error else error_dict("SandboxError", "the run failed")
            return Attempt(program, False, error, result, blamed_tool=error.get("tool"), reply=reply)
        if episode.answer is not None:  # a typed answer: the value counts, printing is for notes
            value, wrong = error_of(episode.answer, result)
            if wrong is not None:
                return Attempt(program, False, wrong, result, reply=reply)
            return Attempt(program, True, None, result, reply=reply, value=value)
        if not result.answer.strip():
            return Attempt(program, False, error_dict("EmptyAnswer", "the program printed nothing"), result,
                           reply=reply)
        return Attempt(program, True, None, result, reply=reply)

    def reflect(self, episode: Episode, attempt: Attempt, number: int) -> list[Message]:
        """What the model is told after a failed attempt: its program, then the error with the
        blamed tool's protocol and real response (eq. 2 of the paper)."""
        blamed, reason = self.blame(episode, attempt)
        attempt.blamed_tool = blamed.name if blamed else None
        text = feedback(number, attempt.program, attempt.error or {}, blamed=blamed, reason=reason,
                        result=attempt.result)
        return [_assistant_turn(attempt), {"role": "user", "content": text + episode.writes_note() +
                                           self.reopen(episode, attempt)}]

    def blame(self, episode: Episode, attempt: Attempt) -> tuple[Tool | None, str | None]:
        """The tool to show in full with the feedback (see ``atc.loop.reflection`` for the order)."""
        toolset = episode.toolset
        error = attempt.error or {}
        named = error.get("tool")
        if isinstance(named, str) and named in toolset.tools:
            return toolset.tools[named], (error.get("attribution") or {}).get("reason")
        if not needs_model_attribution(attempt.program, error, toolset.names()):
            return None, None
        in_program = [t for t in toolset.tools.values() if re.search(rf"\b{re.escape(t.name)}\s*\(", attempt.program)]
        picked, _ = ask_model_for_tool(episode.model, episode.query, attempt.program, error, in_program or episode.shown)
        if picked is None or picked not in toolset.tools:
            return None, None
        return toolset.tools[picked], "named by the model (the run did not attribute the error to a tool)"

    def reopen(self, episode: Episode, attempt: Attempt) -> str:
        """A retriever that can reflect (AnyTool) widens its search after a failure: the note
        for the model ("" when nothing changed); the episode then shows the new tools."""
        finder = episode.retriever
        if finder is None or not callable(getattr(finder, "reflect", None)):
            return ""
        calls = attempt.result.calls if attempt.result else []
        reopened = reopen(finder, attempt.error, attempt.blamed_tool, calls, list(episode.toolset.tools.values()),
                          episode.top_k)
        if not reopened:
            return ""
        episode.model.charge(reopened[1].usage)
        note = "\n\n" + reopened_text(episode.shown, reopened[0])
        episode.shown = reopened[0]
        return note

    def report(self, episode: Episode, attempt: Attempt, number: int) -> None:
        episode.report(Step("attempt", number, attempt.ok, attempt.summary(), attempt))

    def outcome(self, episode: Episode, attempts: list[Attempt], *, stop: dict[str, Any] | None = None) -> Outcome:
        """The last attempt's answer, program and calls; a model stop's error wins over its error."""
        tools = [t.name for t in episode.shown]
        if not attempts:
            return Outcome(ok=False, error=stop, tools=tools)
        final = attempts[-1]
        answer = final.result.answer if final.result else ""
        if final.ok and final.result is not None and final.result.answered and not answer.strip():
            answer = json.dumps(final.result.value, ensure_ascii=False)  # the value said in words
        return Outcome(ok=final.ok and stop is None, answer=answer,
                       error=stop or final.error, calls=list(final.result.calls) if final.result else [],
                       steps=len(attempts), program=final.program, attempts=attempts, tools=tools,
                       value=final.value if final.ok and stop is None else None)


class ChainPlain(Chain):
    """The ablation of the paper: the same loop, but after a failure the model sees only the raw
    error (the traceback of a run, the message of a static check): no tool blamed, no protocol,
    no real response, no question to the model, no reopened search."""

    name = "chain-plain"

    def reflect(self, episode: Episode, attempt: Attempt, number: int) -> list[Message]:
        attempt.blamed_tool = None
        error = attempt.error or {}
        raw = str(error.get("traceback") or "").strip()
        if not raw:
            raw = f"{error.get('type') or 'Error'}: {error.get('message') or ''}".strip()
        text = prompts.render("reflect_plain", attempt=str(number), error=raw[-3000:]) + episode.writes_note()
        return [_assistant_turn(attempt), {"role": "user", "content": text}]


def _assistant_turn(attempt: Attempt) -> Message:
    """What the model "said", as kept in the conversation: the program it wrote (so that reasoning
    and prose do not pile up across reflections), or its reply when it wrote none."""
    if attempt.program:
        return {"role": "assistant", "content": f"```python\n{attempt.program.rstrip()}\n```"}
    return {"role": "assistant", "content": attempt.reply[-4000:] or "(empty reply)"}


register("chain", Chain)
register("chain-plain", ChainPlain)
