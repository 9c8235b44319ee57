"""Tools as the chat API's functions, and what a function-calling strategy (``react``, ``dfsdt``)
does with the model's calls: parse them, make them through the episode's gateway, and turn the
answer into the observation the model reads next.

The function schemas are the tools' own parameter schemas (keyed by the Python names the gateway
validates), with the purpose and, when the spec has one, the response shape in the description:
the same protocol facts ``chain`` shows in its prompt. An observation is the response as JSON
when it is short; a longer one is condensed as reflection condenses responses
(``sandbox.attribution.condense``: the shape inferred from the real data and a bounded excerpt), so that a
10,000-item list costs a turn no more prompt than a short one. An error is the gateway's own
message (already redacted): ``get_book: HTTP 404: book not found``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from atc.llm.chat import Message, ToolCallRequest, tool_calls_of
from protocols.model import Tool
from protocols.render import purpose, response_shape
from sandbox.attribution.condense import condense

if TYPE_CHECKING:
    from atc.loop.strategies.base import Episode
    from sandbox.api import ToolCall
    from sandbox.gateway.core import CallOutcome

__all__ = ["function_schemas", "finish_name", "parse_arguments", "observation", "tool_calls", "assistant_turn",
           "Action", "act", "note_extra", "MAX_OBSERVATION", "finish_value"]

#: Characters of a response shown as it is; a longer one is condensed to its shape and an excerpt.
MAX_OBSERVATION = 2000
_MAX_DESCRIPTION = 1000


def function_schemas(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """The tools in the OpenAI ``tools`` form."""
    out = []
    for tool in tools:
        text = tool.description.strip() or purpose(tool)
        if tool.response_schema:
            text += f"\nReturns: {response_shape(tool.response_schema)}"
        parameters = copy.deepcopy(tool.parameters) if isinstance(tool.parameters, dict) else {}
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})
        out.append({"type": "function", "function": {"name": tool.name, "description": text[:_MAX_DESCRIPTION],
                                                     "parameters": parameters}})
    return out


def finish_name(names: Sequence[str], preferred: str = "finish") -> str:
    """The name of the finishing function: ``finish``, unless a tool already has it."""
    taken = set(names)
    for name in (preferred, f"{preferred}_task", f"atc_{preferred}"):
        if name not in taken:
            return name
    return f"atc_{preferred}_{len(taken)}"


def tool_calls(raw: Any) -> tuple[ToolCallRequest, ...]:
    """A completion's tool calls as ``ToolCallRequest`` objects, whatever form they arrived in (a
    replayed completion may carry them as plain dicts)."""
    items = tuple(raw or ())
    if all(isinstance(c, ToolCallRequest) for c in items):
        return items
    out = []
    for i, c in enumerate(items):
        if isinstance(c, ToolCallRequest):
            out.append(c)
        elif isinstance(c, dict) and "function" not in c and "name" in c:
            out.append(ToolCallRequest(str(c.get("id") or f"call_{i}"), str(c["name"]), str(c.get("arguments") or "{}")))
        else:
            out.extend(tool_calls_of([c]))
    return tuple(out)


def assistant_turn(text: str, calls: Sequence[ToolCallRequest]) -> list[Message]:
    """The model's reply as the conversation keeps it: its text and calls, then an answer to every
    call after the first (each call id must be answered; one function is made per turn)."""
    message: Message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [c.to_dict() for c in calls]
    return [message, *({"role": "tool", "tool_call_id": extra.id, "content": "Not run: call one function per turn."}
                       for extra in calls[1:])]


def parse_arguments(text: str) -> dict[str, Any] | str:
    """The arguments of a function call as a dict, or what is wrong with them (for the model)."""
    if not text or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"the arguments are not valid JSON ({exc}); send one JSON object, e.g. {{\"book_id\": 3}}"
    if not isinstance(value, dict):
        return f"the arguments must be a JSON object, not {type(value).__name__}"
    return value


def observation(outcome: CallOutcome, *, max_chars: int = MAX_OBSERVATION, mode: str = "condense") -> str:
    """What the model reads after a call: the data, or the error. Data longer than ``max_chars``
    is condensed to its shape and an excerpt (``condense``), or cut there (``truncate``: what
    ToolBench does to a response longer than its 1,024 characters)."""
    if not outcome.ok:
        message = (outcome.error or {}).get("message") or "the call failed"
        return f"Error: {message}"
    try:
        text = json.dumps(outcome.data, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = str(outcome.data)
    if len(text) <= max_chars:
        return text
    if mode == "truncate":
        return text[:max_chars] + "..."
    schema, excerpt = condense(outcome.data, max_chars=max(200, max_chars - 400))
    shape = response_shape(schema) if schema else "unknown"
    return (f"(a long response, {len(text)} characters: its shape and an excerpt)\n"
            f"shape: {shape}\nexcerpt: {excerpt}")


@dataclass
class Action:
    """One function call of a turn and what came of it. ``failure`` is the strategy-side kind
    (``unknown_tool``, ``malformed_call``); a failed call's kind comes from the call log."""

    name: str
    arguments: str
    args: dict[str, Any] | None
    observation: str
    ok: bool
    failure: str | None = None
    call: ToolCall | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.name, "args": self.args if self.args is not None else self.arguments,
                "observation": self.observation[:1000], "ok": self.ok, "failure": self.failure}


def act(episode: Episode, request: ToolCallRequest, *, max_chars: int = MAX_OBSERVATION,
        mode: str = "condense") -> Action:
    """Make the call the model asked for, through the episode's gateway. A name that is no tool,
    or arguments that are no JSON object, are answered to the model without a call (and recorded
    as requested: ``Episode.note_request``)."""
    if request.name not in episode.toolset.tools:
        shown = ", ".join(t.name for t in episode.shown)
        episode.fail("unknown_tool")
        episode.note_request(request.name, "unknown_tool", request.arguments[:300])
        return Action(request.name, request.arguments, None,
                      f"Error: there is no tool named {request.name!r}. The tools are: {shown}", False, "unknown_tool")
    args = parse_arguments(request.arguments)
    if isinstance(args, str):
        episode.fail("malformed_call")
        episode.note_request(request.name, "malformed", request.arguments[:300])
        return Action(request.name, request.arguments, None, f"Error: {request.name}: {args}", False, "malformed_call")
    outcome, record = episode.call_tool(request.name, args)
    seen = observation(outcome, max_chars=max_chars, mode=mode)
    if record.outcome == "replayed":
        seen = ("(not sent again: an identical write was already made in this task; this is the answer it got) "
                + seen)
    return Action(request.name, request.arguments, args, seen, outcome.ok, call=record)


def note_extra(episode: Episode, extra: Sequence[ToolCallRequest], finish: str) -> None:
    """Record the calls of a reply after its first (one function is made per turn): requested,
    never run."""
    for request in extra:
        if request.name != finish:
            fate = "not_run" if request.name in episode.toolset.tools else "unknown_tool"
            episode.note_request(request.name, fate, request.arguments[:300])


def finish_value(episode: Episode, arguments: str) -> tuple[Any, str | None]:
    """The typed value a finish call gives (its ``value`` argument) checked against the answer
    asked for (``Episode.check_value``): ``(typed value, None)`` or ``(None, the problem)``."""
    args = parse_arguments(arguments)
    if not isinstance(args, dict) or "value" not in args:
        return None, "give the answer in `value`, as JSON data of the schema"
    return episode.check_value(args["value"])
