"""Every tool call the model requested in a task, in order: what Path% and Prec% count.

A solve's ``calls`` are the calls that produced the answer (the last program's, the final path's).
Evaluation counts more: every call the model asked for in the whole task, all attempts and all
branches, whether the gateway sent it, refused it (arguments, budget, the write policy), or never
got it (a made-up tool name, arguments that are not JSON, a program the static check stopped
before it ran). ``requested_calls`` lists them, one compact record each:

``{"tool", "method", "path", "status", "ok", "fate", "failure", "args", "answer"}`` -- ``fate`` is
``sent`` (a request left the host), ``refused`` (the gateway stopped it), ``unknown_tool``,
``malformed`` or ``not_run``; ``answer`` marks the calls of the answer, which also carry a bounded
``response`` (or ``error``) so that a judge can check an answer against what the tools returned.
Everything is bounded: arguments and responses are cut, never the list.
"""

from __future__ import annotations

import ast
import builtins
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from atc.loop.extract import bound_names
from sandbox.pyparse import parse

if TYPE_CHECKING:
    from atc.loop.strategies.base import Episode
    from sandbox.api import ToolCall, Toolset

__all__ = ["program_calls", "note_program", "requested_calls", "MAX_ARGS", "MAX_RESPONSE"]

#: Characters of a call's arguments, and of an answer call's response, kept in its record.
MAX_ARGS = 300
MAX_RESPONSE = 600

_BUILTINS = frozenset(dir(builtins)) | {"ToolError", "final_answer"}


def program_calls(program: str, names: Sequence[str] | set[str]) -> list[str]:
    """The calls a program's source asks for, in source order: every call of a plain name that
    the program does not bind itself and that is no builtin -- a tool of ``names``, or a made-up
    one. A program that does not parse asks for nothing that can be read."""
    try:
        tree = parse(program, filename="<program>")
    except (SyntaxError, ValueError):
        return []
    own = bound_names(tree)
    found = [(node.lineno, node.col_offset, node.func.id) for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
             and node.func.id not in own and (node.func.id in names or node.func.id not in _BUILTINS)]
    return [name for _, _, name in sorted(found)]


def note_program(episode: Episode, program: str) -> None:
    """Record the calls of a program that never ran (the static check stopped it)."""
    tools = episode.toolset.tools
    for name in program_calls(program, set(tools)):
        episode.note_request(name, "not_run" if name in tools else "unknown_tool")


def _bounded(value: Any, limit: int) -> Any:
    """``value`` when its JSON fits in ``limit`` characters, else the head of that JSON."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = str(value)
    return value if len(text) <= limit else text[:limit] + "..."


def _sent(call: ToolCall, answer: bool) -> dict[str, Any]:
    record: dict[str, Any] = {"tool": call.tool, "method": call.method, "path": call.path, "status": call.status,
                              "ok": call.ok, "fate": "sent" if call.sent else "refused", "failure": call.failure,
                              "args": _bounded(call.args, MAX_ARGS), "answer": answer}
    if answer:
        if call.ok:
            record["response"] = _bounded(call.response, MAX_RESPONSE)
        else:
            record["error"] = str(call.error or "")[:MAX_RESPONSE]
    return record


def _unsent(entry: dict[str, Any], toolset: Toolset) -> dict[str, Any]:
    tool = toolset.tools.get(str(entry["tool"]))
    return {"tool": str(entry["tool"]), "method": tool.method if tool else None, "path": tool.path if tool else None,
            "status": None, "ok": False, "fate": entry["fate"], "failure": entry["fate"],
            "args": _bounded(entry.get("args"), MAX_ARGS), "answer": False}


def requested_calls(episode: Episode, answer_calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """Every call requested in the episode, in the order asked (module docstring)."""
    answer = {id(c) for c in answer_calls}
    unsent = sorted(enumerate(episode.unsent), key=lambda item: (item[1][0], item[0]))
    out: list[dict[str, Any]] = []
    waiting = iter(unsent)
    nxt = next(waiting, None)
    for index, call in enumerate(episode.calls):
        while nxt is not None and nxt[1][0] <= index:
            out.append(_unsent(nxt[1][1], episode.toolset))
            nxt = next(waiting, None)
        out.append(_sent(call, id(call) in answer))
    while nxt is not None:
        out.append(_unsent(nxt[1][1], episode.toolset))
        nxt = next(waiting, None)
    return out
