"""``react``: one tool call per model turn, through function calling (the ReAct baseline of the
Chain-of-Tools paper, in the function-calling form ToolLLM uses).

Each turn the model is offered the tools shown as functions plus ``finish(answer)``; it thinks
(the reply's text) and calls one function; the call goes through the episode's gateway and the
model reads the observation (``atc.strategies.functions``) in the next turn. It ends when the
model calls ``finish`` with a non-empty answer, or at ``max_steps`` turns (``step_limit``), or
when the model budget is spent. A wrong move is answered, never fatal: a tool that does not
exist, arguments that are not JSON, arguments the gateway refuses, an API error, a reply with no
call at all (``no_action``), several calls at once (only the first is made).

``Solution.calls`` is every call of the episode; the trace is one record per turn.
"""

from __future__ import annotations

import json
from typing import Any

from atc import prompts, tracing
from atc.errors import ModelError, UsageError
from atc.model import Completion, Message
from atc.strategies.base import Episode, Outcome, Step, error_dict, model_stop
from atc.strategies.functions import (
    MAX_OBSERVATION,
    Action,
    act,
    assistant_turn,
    finish_name,
    finish_value,
    function_schemas,
    parse_arguments,
    tool_calls,
)
from atc.strategies.registry import register

__all__ = ["React", "DEFAULT_TURNS", "finish_function"]

DEFAULT_TURNS = 12


class React:
    """Think, call one function, observe; ``finish`` with the answer."""

    name = "react"
    step_unit = "turn"
    uses_sandbox = False

    def __init__(self, *, max_steps: int | None = None, max_observation: int = MAX_OBSERVATION, **_: Any) -> None:
        self.max_turns = max_steps if max_steps is not None else DEFAULT_TURNS
        if self.max_turns < 1:
            raise UsageError("--max-steps must be at least 1")
        self.max_observation = max_observation

    def run(self, episode: Episode) -> Outcome:
        finish = finish_name(episode.toolset.names())
        functions = [*function_schemas(episode.shown), finish_function(finish, episode)]
        messages: list[Message] = [
            {"role": "system", "content": prompts.render("react", finish=finish) + episode.answer_prompt(finish)
             + episode.rules_note()},
            {"role": "user", "content": f"Task: {episode.query.strip()}"}]
        turns: list[dict[str, Any]] = []
        self.value: Any = None
        for number in range(1, self.max_turns + 1):
            with tracing.span("atc.step", {"atc.strategy": self.name, "atc.step": number}) as current:
                try:
                    reply = episode.ask(messages, tools=functions, tool_choice="auto")
                except ModelError as exc:
                    return self._outcome(episode, turns, model_stop(episode, exc, len(turns), "turn"))
                turn, answer = self.turn(episode, reply, finish, messages)
                tracing.set_attributes(current, {"atc.status": "ok" if turn["ok"] else "failed",
                                                 "atc.tool": turn.get("action")})
            turns.append({"turn": number, **turn})
            episode.report(Step("turn", number, turn["ok"], _summary(turn)))
            if answer is not None:
                return self._outcome(episode, turns, None, answer)
        episode.fail("step_limit")
        return self._outcome(episode, turns, error_dict(
            "StepLimit", f"the model did not call {finish} with an answer within {self.max_turns} turns"))

    def turn(self, episode: Episode, reply: Completion, finish: str,
             messages: list[Message]) -> tuple[dict[str, Any], str | None]:
        """One model reply: its call made and answered (appended to ``messages``); the answer
        when it was ``finish``."""
        calls = tool_calls(reply.tool_calls)
        thought = reply.text.strip()
        messages += assistant_turn(reply.text, calls)
        if not calls:
            episode.fail("no_action")
            messages.append({"role": "user", "content": prompts.render("react_nudge", finish=finish)})
            return {"thought": thought[:1000], "action": None, "ok": False, "failure": "no_action"}, None
        first = calls[0]
        if first.name == finish and episode.answer is not None:
            return self.typed_finish(episode, first, finish, thought, messages)
        if first.name == finish:
            answer = _answer(first.arguments)
            if answer:
                return {"thought": thought[:1000], "action": finish, "answer": answer, "ok": True}, answer
            episode.fail("empty_answer")
            messages.append({"role": "tool", "tool_call_id": first.id,
                             "content": f"Error: {finish} needs the final answer in `answer`."})
            return {"thought": thought[:1000], "action": finish, "ok": False, "failure": "empty_answer"}, None
        action: Action = act(episode, first, max_chars=self.max_observation)
        messages.append({"role": "tool", "tool_call_id": first.id, "content": action.observation})
        return {"thought": thought[:1000], **action.to_dict()}, None

    def typed_finish(self, episode: Episode, call: Any, finish: str, thought: str,
                     messages: list[Message]) -> tuple[dict[str, Any], str | None]:
        """A finish when a typed answer was asked for: its ``value`` checked against the schema; a
        mismatch is answered with the problem, and the episode goes on."""
        value, problem = finish_value(episode, call.arguments)
        if problem is None:
            self.value = value
            given = parse_arguments(call.arguments)
            raw = given.get("value") if isinstance(given, dict) else None
            answer = _answer(call.arguments) or json.dumps(raw, ensure_ascii=False)
            return {"thought": thought[:1000], "action": finish, "answer": answer, "ok": True}, answer
        episode.fail("bad_answer")
        messages.append({"role": "tool", "tool_call_id": call.id, "content": f"Error: {finish}: {problem}"})
        return {"thought": thought[:1000], "action": finish, "ok": False, "failure": "bad_answer",
                "observation": problem[:1000]}, None

    def _outcome(self, episode: Episode, turns: list[dict[str, Any]], error: dict[str, Any] | None,
                 answer: str | None = None) -> Outcome:
        return Outcome(ok=answer is not None, answer=answer or "", error=error, calls=list(episode.calls),
                       steps=len(turns), trace={"turns": turns, "finished": answer is not None},
                       value=getattr(self, "value", None) if answer is not None else None)


def finish_function(name: str, episode: Episode) -> dict[str, Any]:
    """``finish(answer)``; with a typed answer asked for, ``finish(value, answer?)``, ``value``
    of the answer's schema."""
    answer = {"type": "string", "description": "the final answer: short, specific and complete"}
    if episode.answer is None:
        return {"type": "function", "function": {
            "name": name, "description": "Give the final answer to the task and stop. Call it once you know the answer.",
            "parameters": {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}}}
    return {"type": "function", "function": {
        "name": name, "description": "Give the final answer to the task as a typed value and stop.",
        "parameters": {"type": "object", "properties": {"value": episode.answer.schema, "answer": answer},
                       "required": ["value"]}}}



def _answer(arguments: str) -> str:
    """The answer of a finish call; lenient: a bare string, or the first string value."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return arguments.strip()
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict):
        for key in ("answer", "final_answer", "result"):
            if isinstance(value.get(key), str | int | float) and str(value[key]).strip():
                return str(value[key]).strip()
    return ""


def _summary(turn: dict[str, Any]) -> str:
    action = turn.get("action")
    if action is None:
        return "no function call"
    if "answer" in turn:
        return f"{action}: {' '.join(str(turn['answer']).split())[:120]}"
    args = turn.get("args")
    shown = json.dumps(args, ensure_ascii=False)[:80] if isinstance(args, dict) else str(args)[:80]
    status = "ok" if turn.get("ok") else f"failed: {' '.join(str(turn.get('observation', '')).split())[:120]}"
    return f"{action}({shown}) -> {status}"


register("react", React)
