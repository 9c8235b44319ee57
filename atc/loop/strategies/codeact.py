"""``codeact``: the model writes one code snippet per turn and reads its output (the CodeAct
baseline of the Chain-of-Tools paper).

The snippets run in one sandbox session (``atc.session``): one isolated interpreter whose
globals survive from one snippet to the next, so a later snippet uses the variables an earlier
one set. The tools are its functions, called exactly as in a ``chain`` program, so their calls go
through the session's gateway (validation, credentials, the call budget of the whole session,
redaction, the call log). The model is shown the tools' compact protocols, as ``chain`` is.

A turn is one reply: a fenced ``python`` block is run and the model reads what it printed, or its
error with the traceback; a reply without code that says ``Final answer: ...`` ends the episode
with that answer; when a typed answer was asked for (``answer=``), the snippet that hands a value
matching the schema to ``final_answer(value)`` ends it instead (a value that does not match is
answered with the problem). A reply with neither is answered with a reminder (``no_program``). It ends at
``max_steps`` turns (10, as CodeAct's own evaluation loop: ``CodeActSettings``; ``step_limit``), when the model budget is spent, or when a snippet ended the
session (it ran out of time or memory, or spent the session's call budget: ``SessionEnded``; the
session is not reopened, so that no budget is reset behind the model's back).

``Solution.program`` is the snippets that ran without an error, in order (the state the answer
was read from); ``Solution.calls`` every call of the episode; the trace one record per turn.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from atc import prompts, tracing
from atc.errors import ModelError, SandboxError, UsageError
from atc.llm.chat import Message
from atc.loop.answers import error_of
from atc.loop.extract import extract_program
from atc.loop.reflection import describe_error
from atc.loop.strategies.base import Episode, Outcome, Step, error_dict, model_stop, run_failure
from atc.loop.strategies.registry import register
from atc.loop.strategies.settings import CodeActSettings
from protocols.render import render_compact
from sandbox.api import ErrorInfo, ExecutionResult

if TYPE_CHECKING:
    from atc.sessions import Session

__all__ = ["CodeAct", "DEFAULT_TURNS", "snippet_failure"]

DEFAULT_TURNS = CodeActSettings().max_turns
#: Characters of a snippet's output shown to the model (its head and tail when longer).
MAX_OUTPUT = 2000
_FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.MULTILINE)
_FINAL = re.compile(r"final answer\s*[:：]\s*(?P<answer>.+)", re.IGNORECASE | re.DOTALL)
_UNDEFINED = re.compile(r"name '(?P<name>[A-Za-z_]\w*)' is not defined")


def snippet_failure(result: ExecutionResult) -> str | None:
    """The failure kind of a snippet that raised, unless a tool call explains it (counted from
    the call log)."""
    if result.ok or result.error is None:
        return None
    return run_failure(result.error.type)


class CodeAct:
    """A snippet per turn in a live interpreter; ``Final answer: ...`` to finish."""

    name = "codeact"
    step_unit = "turn"
    #: the session brings its own sandbox: nothing to get ready beforehand
    uses_sandbox = False

    def __init__(self, *, max_steps: int | None = None, max_output: int = MAX_OUTPUT,
                 settings: CodeActSettings | None = None, **_: Any) -> None:
        if settings is None:
            turns = max_steps if max_steps is not None else DEFAULT_TURNS
            if turns < 1:
                raise UsageError("--max-steps must be at least 1")
            settings = CodeActSettings(max_turns=turns, max_output=max_output)
        settings.check()
        self.settings = settings
        self.max_turns = settings.max_turns
        self.max_output = settings.max_output

    def run(self, episode: Episode) -> Outcome:
        messages: list[Message] = [
            {"role": "system", "content": prompts.render("codeact", tools=render_compact(episode.shown).strip())
             + episode.answer_prompt() + episode.rules_note()},
            {"role": "user", "content": f"Task: {episode.query.strip()}"}]
        turns: list[dict[str, Any]] = []
        with episode.session() as session:
            for number in range(1, self.max_turns + 1):
                with tracing.span("atc.step", {"atc.strategy": self.name, "atc.step": number}) as current:
                    try:
                        reply = episode.ask(messages)
                    except ModelError as exc:
                        return self._outcome(episode, turns, model_stop(episode, exc, len(turns), "turn"))
                    turn = self.turn(episode, session, reply.text, messages)
                    tracing.set_attributes(current, {"atc.status": "ok" if turn["ok"] else "failed"})
                turns.append({"turn": number, **turn})
                episode.report(Step("turn", number, turn["ok"], _summary(turn)))
                if "answer" in turn:
                    return self._outcome(episode, turns, None, turn["answer"], turn.pop("typed", None))
                if not session.alive:  # a snippet ended it: time, memory, calls
                    why = session.ended or "ended"
                    return self._outcome(episode, turns, error_dict(
                        "SessionEnded", f"the sandbox session ended after {number} turn(s): {why}"))
        episode.fail("step_limit")
        return self._outcome(episode, turns, error_dict(
            "StepLimit", f"the model gave no final answer within {self.max_turns} turns"))

    def turn(self, episode: Episode, session: Session, reply: str, messages: list[Message]) -> dict[str, Any]:
        """One reply: its snippet run (the output or error appended to ``messages``), or its answer."""
        code = extract_program(reply, episode.toolset.names()) if _FENCED.search(reply) else None
        if code is None:
            final = _FINAL.search(reply)
            if final and final.group("answer").strip() and episode.answer is None:
                return {"answer": final.group("answer").strip(), "ok": True}
            episode.fail("no_program")
            messages.append({"role": "assistant", "content": reply[-4000:] or "(empty reply)"})
            messages.append({"role": "user", "content": prompts.render("codeact_nudge")})
            return {"reply": reply[:1000], "ok": False, "failure": "no_program"}
        messages.append({"role": "assistant", "content": f"```python\n{code.rstrip()}\n```"})
        try:
            result = episode.run_snippet(session, code)
        except SandboxError as exc:  # the session is over (SessionEnded) or its sandbox broke
            return {"code": code, "ok": False, "error": {"type": type(exc).__name__, "message": exc.message[:500]}}
        kind = snippet_failure(result)
        if kind is not None:
            episode.fail(kind)
        missing = _UNDEFINED.search(result.error.message) if result.error and result.error.type == "NameError" else None
        if missing and re.search(rf"\b{re.escape(missing.group('name'))}\s*\(", code):
            episode.note_request(missing.group("name"), "unknown_tool")  # a made-up tool, called
        if episode.answer is not None and result.ok and result.answered:  # final_answer(value): the end
            typed, wrong = error_of(episode.answer, result)
            if wrong is None:
                text = result.answer.strip() or json.dumps(result.value, ensure_ascii=False)
                return {"code": code, "ok": True, "output": _cut(result.answer, 1000), "calls": len(result.calls),
                        "answer": text, "typed": typed}
            episode.fail("bad_answer")
            result.ok, result.error = False, ErrorInfo(wrong["type"], wrong["message"], line=wrong["line"])
        messages.append({"role": "user", "content": self.observation(result, code)})
        record: dict[str, Any] = {"code": code, "ok": result.ok, "output": _cut(result.answer, 1000),
                                  "calls": len(result.calls)}
        if result.error is not None:
            record["error"] = {"type": result.error.type, "message": result.error.message[:500],
                               "line": result.error.line, "tool": result.error.tool}
        return record

    def observation(self, result: ExecutionResult, code: str) -> str:
        """What the model reads after its snippet: the output, then the error if it raised."""
        output = _cut(result.answer, self.max_output)
        replayed = sum(1 for c in result.calls if c.outcome == "replayed")
        if replayed:
            output = (f"({replayed} write(s) of this snippet were not sent again: identical ones were made earlier "
                      f"in this task, and they returned the answers recorded then)\n{output}")
        if result.ok:
            return f"Output:\n{output}" if output.strip() else \
                "The snippet ran and printed nothing. Print the values you need to see."
        error = result.error.to_dict() if result.error else error_dict("SandboxError", "the snippet failed")
        before = f"Output before the error:\n{output}\n\n" if output.strip() else ""
        return f"{before}{describe_error(error, code)}"

    def _outcome(self, episode: Episode, turns: list[dict[str, Any]], error: dict[str, Any] | None,
                 answer: str | None = None, value: Any = None) -> Outcome:
        program = "\n\n".join(t["code"].rstrip() for t in turns if t.get("code") and t.get("ok"))
        return Outcome(ok=answer is not None, answer=answer or "", error=error, calls=list(episode.calls),
                       steps=len(turns), program=program, trace={"turns": turns, "finished": answer is not None},
                       value=value if answer is not None else None)


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its head and tail, the cut marked."""
    if len(text) <= limit:
        return text
    half = max(0, limit // 2 - 20)
    return f"{text[:half]}\n... ({len(text) - 2 * half} characters cut) ...\n{text[-half:]}"


def _summary(turn: dict[str, Any]) -> str:
    if "answer" in turn:
        return f"final answer: {' '.join(str(turn['answer']).split())[:120]}"
    if turn.get("failure") == "no_program":
        return "no code and no final answer"
    calls = turn.get("calls", 0)
    if turn.get("ok"):
        return f"snippet ran ({calls} tool call{'' if calls == 1 else 's'})"
    error = turn.get("error") or {}
    return f"snippet failed: {error.get('type', 'Error')}: {' '.join(str(error.get('message', '')).split())[:120]}"


register("codeact", CodeAct)
