"""ReAct in plain text, for model servers without function calling (the Chain-of-Tools paper ran
its Mixtral baselines that way): the model writes

    Thought: what to do next
    Action: one tool's name, or finish
    Action Input: a JSON object of the arguments

and reads ``Observation: ...`` in the next message. ``parse_reply`` reads one reply: it keeps what
comes before an ``Observation:`` the model wrote itself (a model that goes on to imagine the
tool's answer is cut there), takes the first ``Action`` and the JSON object after ``Action
Input``, or a ``Final Answer: ...`` with no action. The action becomes a ``ToolCallRequest``, so
that it is made, checked and counted exactly as a function call is (``functions.act``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from atc.llm.chat import ToolCallRequest

__all__ = ["TextReply", "parse_reply", "tool_lines", "request_of"]

_OBSERVATION = re.compile(r"^[ \t]*Observation\s*:", re.IGNORECASE | re.MULTILINE)
_ACTION = re.compile(r"^[ \t]*Action\s*:[ \t]*(?P<name>.*)$", re.IGNORECASE | re.MULTILINE)
_INPUT = re.compile(r"^[ \t]*Action[ \t]*Input\s*:", re.IGNORECASE | re.MULTILINE)
_FINAL = re.compile(r"^[ \t]*Final[ \t]*Answer\s*:(?P<answer>.*)", re.IGNORECASE | re.MULTILINE | re.DOTALL)
_THOUGHT = re.compile(r"^\s*Thought\s*:\s*", re.IGNORECASE)
_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
_FENCE = re.compile(r"^\s*`{3,}[a-zA-Z]*\s*|\s*`{3,}\s*$")


@dataclass(frozen=True)
class TextReply:
    """One reply read: what it says (``kept``: the reply up to a self-written observation), its
    thought, the action's name and arguments text (None: no action), or a final answer."""

    kept: str
    thought: str
    action: str | None
    arguments: str
    final: str | None


def _arguments(text: str) -> str:
    """The JSON object of an ``Action Input`` (a fence around it and text after it dropped); the
    text as it is when it holds no object, so that the model is told what is wrong with it."""
    body = _FENCE.sub("", text.strip())
    start = body.find("{")
    if start < 0:
        return body.strip() or "{}"
    try:
        value, _ = json.JSONDecoder().raw_decode(body[start:])
    except ValueError:
        return body.strip()
    return json.dumps(value, ensure_ascii=False)


def parse_reply(text: str) -> TextReply:
    """Read one reply of the text protocol (module docstring)."""
    cut = _OBSERVATION.search(text)
    kept = text[: cut.start()].rstrip() if cut else text.rstrip()
    action = _ACTION.search(kept)
    if action is None:
        final = _FINAL.search(kept)
        thought = _THOUGHT.sub("", kept[: final.start()] if final else kept).strip()
        return TextReply(kept, thought, None, "", final.group("answer").strip() if final else None)
    thought = _THOUGHT.sub("", kept[: action.start()]).strip()
    named = _NAME.search(action.group("name").strip().strip("`'\""))
    given = _INPUT.search(kept, action.end())
    arguments = _arguments(kept[given.end():]) if given else "{}"
    return TextReply(kept, thought, named.group(0) if named else "", arguments, None)


def request_of(reply: TextReply, number: int) -> ToolCallRequest:
    """The action of a reply as the call request ``functions.act`` makes."""
    return ToolCallRequest(f"text_{number}", reply.action or "", reply.arguments)


def tool_lines(functions: Sequence[dict[str, Any]], *, limit: int = 1500) -> str:
    """The functions as the prompt lists them: name, description, parameters as compact JSON."""
    lines = []
    for item in functions:
        fn = item.get("function") or {}
        params = json.dumps(fn.get("parameters") or {}, ensure_ascii=False, separators=(",", ":"))
        lines.append(f"- {fn.get('name')}: {' '.join(str(fn.get('description') or '').split())}\n"
                     f"  Action Input schema: {params[:limit]}")
    return "\n".join(lines)
