"""``react``: one tool call per model turn (the ReAct baseline of the Chain-of-Tools paper), by
function calling as ToolLLM runs it, or in plain text (``react-text``: Thought / Action / Action
Input / Observation, for model servers without function calling; ``atc.loop.strategies.textformat``).

Each turn the model is offered the tools shown plus ``finish``; it thinks (the reply's text) and
calls one function; the call goes through the episode's gateway and the model reads the
observation (``atc.loop.strategies.functions``) in the next turn. It ends when the model calls
``finish`` with a non-empty answer; when ``finish`` gives up (``give_up_and_restart``, offered
with ``ReactSettings.give_up`` as ToolBench's single chain offers it: the run ends without an
answer); at the turn bound, or the tree-level bound of ToolBench's profile (a turn is 2 levels, 3
when the reply has a thought: ``step_limit``); or when the model budget is spent. A wrong move is
answered, never fatal: a tool that does not exist, arguments that are not JSON, arguments the
gateway refuses, an API error, a reply with no call at all (``no_action``), several calls at once
(only the first is made; the others are recorded as requested and not run).

``Solution.calls`` is every call of the episode; the trace is one record per turn.
"""

from __future__ import annotations

import json
from typing import Any

from atc import prompts, tracing
from atc.errors import ModelError
from atc.llm.chat import Completion, Message, ToolCallRequest
from atc.loop.strategies.base import Episode, Outcome, Step, error_dict, model_stop
from atc.loop.strategies.functions import (
    MAX_OBSERVATION,
    Action,
    act,
    assistant_turn,
    finish_name,
    finish_value,
    function_schemas,
    note_extra,
    parse_arguments,
    tool_calls,
)
from atc.loop.strategies.registry import register
from atc.loop.strategies.settings import ReactSettings
from atc.loop.strategies.textformat import parse_reply, request_of, tool_lines

__all__ = ["React", "ReactText", "DEFAULT_TURNS", "finish_function", "finish_arguments", "turn_levels"]

DEFAULT_TURNS = 12

_GIVE_UP_RULE = (" When you cannot go on (the calls lead nowhere, the data is not there), give up instead: "
                 "`{finish}` with return_type \"give_up_and_restart\".")


def turn_levels(thought: str, called: bool) -> int:
    """The tree levels ToolBench's search adds for one turn: a Thought node when the reply has
    text, an Action and an Action Input node when it calls a function (a reply with neither
    still takes a level, so that a path always ends)."""
    levels = (1 if thought.strip() else 0) + (2 if called else 0)
    return max(1, levels)


class React:
    """Think, call one function, observe; ``finish`` with the answer."""

    name = "react"
    step_unit = "turn"
    uses_sandbox = False
    default_format = "functions"

    def __init__(self, *, max_steps: int | None = None, max_observation: int = MAX_OBSERVATION,
                 settings: ReactSettings | None = None, **_: Any) -> None:
        if settings is None:
            settings = ReactSettings(format=self.default_format,
                                     max_turns=max_steps if max_steps is not None else DEFAULT_TURNS,
                                     max_observation=max_observation)
        settings.check()
        self.settings = settings
        self.max_turns = settings.max_turns
        self.max_observation = settings.max_observation

    # -- the loop ---------------------------------------------------------------------------------

    def run(self, episode: Episode) -> Outcome:
        finish = finish_name(episode.toolset.names())
        typed = episode.answer.schema if episode.answer is not None else None
        functions = [*function_schemas(episode.shown), finish_function(finish, give_up=self.settings.give_up,
                                                                       value=typed)]
        self.value: Any = None
        give_up = _GIVE_UP_RULE.format(finish=finish) if self.settings.give_up else ""
        if self.settings.format == "text":
            example = ('{"return_type": "give_answer", "final_answer": "..."}' if self.settings.give_up
                       else '{"answer": "..."}')
            system = prompts.render("react_text", finish=finish, finish_input=example, give_up=give_up,
                                    tools=tool_lines(functions)) + episode.rules_note()
        else:
            system = prompts.render("react", finish=finish, give_up=give_up) + episode.rules_note()
        system += episode.answer_prompt(finish)
        messages: list[Message] = [{"role": "system", "content": system},
                                   {"role": "user", "content": f"Task: {episode.query.strip()}"}]
        turns: list[dict[str, Any]] = []
        levels = 0
        number = 0
        while self.max_turns is None or number < self.max_turns:
            number += 1
            with tracing.span("atc.step", {"atc.strategy": self.name, "atc.step": number}) as current:
                try:
                    if self.settings.format == "text":
                        reply = episode.ask(messages)
                        turn, answer = self.text_turn(episode, reply, finish, messages, number)
                    else:
                        reply = episode.ask(messages, tools=functions, tool_choice="auto")
                        turn, answer = self.turn(episode, reply, finish, messages)
                except ModelError as exc:
                    return self._outcome(episode, turns, model_stop(episode, exc, len(turns), "turn"))
                tracing.set_attributes(current, {"atc.status": "ok" if turn["ok"] else "failed",
                                                 "atc.tool": turn.get("action")})
            levels += turn_levels(str(turn.get("thought") or ""), turn.get("action") is not None)
            turns.append({"turn": number, **turn, "levels": levels})
            episode.report(Step("turn", number, turn["ok"], _summary(turn)))
            if answer is not None:
                return self._outcome(episode, turns, None, answer)
            if turn.get("failure") == "gave_up":
                return self._outcome(episode, turns, error_dict(
                    "GaveUp", f"the model gave up ({finish} with give_up_and_restart) after {number} turn(s)"))
            if self.settings.max_levels is not None and levels >= self.settings.max_levels:
                break
        episode.fail("step_limit")
        bound = (f"{self.max_turns} turns" if self.max_turns is not None and number >= self.max_turns
                 else f"{self.settings.max_levels} tree levels (ToolBench's depth; {number} turns)")
        return self._outcome(episode, turns, error_dict(
            "StepLimit", f"the model did not call {finish} with an answer within {bound}"))

    def turn(self, episode: Episode, reply: Completion, finish: str,
             messages: list[Message]) -> tuple[dict[str, Any], str | None]:
        """One function-calling reply: its call made and answered (appended to ``messages``);
        the answer when it was ``finish``."""
        calls = tool_calls(reply.tool_calls)
        thought = reply.text.strip()
        messages += assistant_turn(reply.text, calls)
        if not calls:
            episode.fail("no_action")
            messages.append({"role": "user", "content": prompts.render("react_nudge", finish=finish)})
            return {"thought": thought[:1000], "action": None, "ok": False, "failure": "no_action"}, None
        note_extra(episode, calls[1:], finish)
        return self.perform(episode, calls[0], thought, finish, messages, lambda text: {
            "role": "tool", "tool_call_id": calls[0].id, "content": text})

    def text_turn(self, episode: Episode, reply: Completion, finish: str, messages: list[Message],
                  number: int) -> tuple[dict[str, Any], str | None]:
        """One reply of the text protocol: its action made, the observation the next message."""
        read = parse_reply(reply.text)
        messages.append({"role": "assistant", "content": read.kept or "(empty reply)"})
        if read.action is None and read.final:
            read_args = json.dumps({"return_type": "give_answer", "final_answer": read.final, "answer": read.final})
            request = ToolCallRequest(f"text_{number}", finish, read_args)
        elif read.action is None:
            episode.fail("no_action")
            messages.append({"role": "user", "content": prompts.render("react_text_nudge", finish=finish)})
            return {"thought": read.thought[:1000], "action": None, "ok": False, "failure": "no_action"}, None
        else:
            request = request_of(read, number)
        return self.perform(episode, request, read.thought, finish, messages, lambda text: {
            "role": "user", "content": f"Observation: {text}"})

    def perform(self, episode: Episode, request: ToolCallRequest, thought: str, finish: str,
                messages: list[Message], answer_with: Any) -> tuple[dict[str, Any], str | None]:
        """Make one requested call (or ``finish``), and append what the model reads next."""
        if request.name == finish:
            kind, answer = finish_arguments(request.arguments)
            if kind == "give_up_and_restart" and self.settings.give_up:
                episode.fail("gave_up")
                return {"thought": thought[:1000], "action": finish, "ok": False, "failure": "gave_up"}, None
            if kind == "give_answer" and episode.answer is not None:  # a typed answer: its value, checked
                typed, problem = finish_value(episode, request.arguments)
                if problem is not None:
                    episode.fail("bad_answer")
                    messages.append(answer_with(f"Error: {finish}: {problem}"))
                    return {"thought": thought[:1000], "action": finish, "ok": False, "failure": "bad_answer",
                            "observation": problem[:1000]}, None
                self.value = typed
                given = parse_arguments(request.arguments)
                said = answer or json.dumps(given.get("value") if isinstance(given, dict) else None, ensure_ascii=False)
                return {"thought": thought[:1000], "action": finish, "answer": said, "ok": True}, said
            if kind == "give_answer" and answer:
                return {"thought": thought[:1000], "action": finish, "answer": answer, "ok": True}, answer
            episode.fail("empty_answer")
            messages.append(answer_with(f"Error: {finish} needs the final answer"
                                        f"{' in final_answer, with return_type give_answer' if self.settings.give_up else ' in `answer`'}."))
            return {"thought": thought[:1000], "action": finish, "ok": False, "failure": "empty_answer"}, None
        action: Action = act(episode, request, max_chars=self.max_observation, mode=self.settings.observation)
        messages.append(answer_with(action.observation))
        return {"thought": thought[:1000], **action.to_dict()}, None

    def _outcome(self, episode: Episode, turns: list[dict[str, Any]], error: dict[str, Any] | None,
                 answer: str | None = None) -> Outcome:
        return Outcome(ok=answer is not None, answer=answer or "", error=error, calls=list(episode.calls),
                       steps=len(turns), trace={"turns": turns, "finished": answer is not None,
                                                "format": self.settings.format},
                       value=getattr(self, "value", None) if answer is not None else None)


class ReactText(React):
    """``react-text``: ``react`` in the plain-text protocol (module docstring)."""

    name = "react-text"
    default_format = "text"


def finish_function(name: str, *, give_up: bool = False, value: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``finish`` function: an ``answer``; with ``give_up``, ToolBench's ``return_type``
    (``give_answer`` with ``final_answer``, or ``give_up_and_restart``); with ``value`` (a typed
    answer's JSON Schema, ``answer=``), a ``value`` argument of that schema, required to answer."""
    if give_up:
        props: dict[str, Any] = {
            "return_type": {"type": "string", "enum": ["give_answer", "give_up_and_restart"]},
            "final_answer": {"type": "string", "description": "the final answer (with give_answer)"}}
        if value is not None:
            props["value"] = {**value, "description": "the typed answer (with give_answer)"}
        return {"type": "function", "function": {
            "name": name,
            "description": "End the task. With return_type give_answer, give the final answer (the only part the "
                           "user sees: make it complete). With give_up_and_restart, give up when you cannot go on.",
            "parameters": {"type": "object", "properties": props, "required": ["return_type"]}}}
    answer = {"type": "string", "description": "the final answer: short, specific and complete"}
    if value is not None:
        return {"type": "function", "function": {
            "name": name, "description": "Give the final answer to the task as a typed value and stop.",
            "parameters": {"type": "object", "properties": {"value": value, "answer": answer}, "required": ["value"]}}}
    return {"type": "function", "function": {
        "name": name, "description": "Give the final answer to the task and stop. Call it once you know the answer.",
        "parameters": {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}}}


def finish_arguments(arguments: str) -> tuple[str, str]:
    """``(return_type, answer)`` of a finish call; lenient: a bare string, ``answer`` or
    ``final_answer``, a missing return_type meaning ``give_answer``."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return "give_answer", arguments.strip()
    if isinstance(value, str):
        return "give_answer", value.strip()
    if not isinstance(value, dict):
        return "give_answer", ""
    kind = str(value.get("return_type") or "give_answer").strip()
    for key in ("final_answer", "answer", "result"):
        if isinstance(value.get(key), str | int | float) and str(value[key]).strip():
            return kind, str(value[key]).strip()
    return kind, ""


def _summary(turn: dict[str, Any]) -> str:
    action = turn.get("action")
    if action is None:
        return "no function call"
    if "answer" in turn:
        return f"{action}: {' '.join(str(turn['answer']).split())[:120]}"
    if turn.get("failure") == "gave_up":
        return f"{action}: gave up"
    args = turn.get("args")
    shown = json.dumps(args, ensure_ascii=False)[:80] if isinstance(args, dict) else str(args)[:80]
    status = "ok" if turn.get("ok") else f"failed: {' '.join(str(turn.get('observation', '')).split())[:120]}"
    return f"{action}({shown}) -> {status}"


register("react", React)
register("react-text", ReactText)
