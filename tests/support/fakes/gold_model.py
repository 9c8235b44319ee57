"""A scripted model that writes a task's gold chain as a program: the oracle of ``atc eval`` tests.

``GoldModel`` is a router for ``ScriptedOpenAI``: it finds the task in the request (its query is
in the first user message), and answers with a program that calls the task's gold tools in
order, each once, every required argument filled (a path parameter with the first id found in
the previous response, so that ``atc mock`` resolves it; an enum with its first value; numbers
with 1; text with a name), every call guarded so that one refusal does not stop the chain, then
prints the answer. ``router_for`` plays the same oracle in the protocol of each built-in strategy
(function calls for ``react`` and ``dfsdt``, the text protocol for ``react-text``, snippets for
``codeact``). The gold is read here, on its own terms (``gold_tools``), not with
``atc.evaluation``'s matching: the tests compare the two.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from protocols.model import Collection, Tool
from tests.support.fakes.openai_server import Reply, call

__all__ = ["GoldModel", "gold_tools", "program", "template", "agent", "text_agent", "snippets", "router_for",
           "protocol_of", "every_protocol"]


def template(path: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", path.strip()).rstrip("/") or "/"


def gold_tools(steps: Sequence[str], collections: Sequence[Collection]) -> list[Tool]:
    """The distinct tools of gold steps (tool names, or ``METHOD /path``), in order."""
    tools = [t for c in collections for t in c.tools]
    by_name = {t.name: t for t in tools}
    by_route = {(t.method, template(t.path)): t for t in tools}
    out: list[Tool] = []
    for step in steps:
        text = step.strip()
        if text in by_name:
            tool = by_name[text]
        else:
            method, path = text.split(" ", 1)
            tool = by_route[(method, template(path))]
        if tool not in out:
            out.append(tool)
    return out


_PRELUDE = '''def _id(value):
    """the first id in a response (a search's first result), else 1"""
    if isinstance(value, dict):
        if isinstance(value.get("id"), (int, str)) and not isinstance(value.get("id"), bool):
            return value["id"]
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            found = _id(item)
            if found != 1:
                return found
    return 1

last = None
'''


def _value(name: str, schema: dict[str, Any]) -> str:
    """Python source of a valid value of ``schema``."""
    kind = schema.get("type")
    if schema.get("enum"):
        return repr(schema["enum"][0])
    if kind == "array":
        return f"[{_value(name, schema.get('items') or {})}]"
    if kind in ("integer", "number"):
        return "1"
    if kind == "boolean":
        return "True"
    if kind == "object":
        return "{}"
    return repr("reader@example.org" if "mail" in name else "Sofia Coppola")


def _call(tool: Tool) -> str:
    args = []
    for name in tool.required:
        schema = tool.parameters["properties"][name]
        binding = tool.bindings.get(name)
        if binding is not None and binding.location == "path" and not schema.get("enum"):
            args.append(f"{name}=str(_id(last))" if schema.get("type") == "string" else f"{name}=_id(last)")
        else:
            args.append(f"{name}={_value(name, schema)}")
    return f"try:\n    last = {tool.name}({', '.join(args)})\nexcept ToolError:\n    pass\n"


def program(tools: Sequence[Tool], answer: str | None) -> str:
    """A reply holding the program that calls ``tools`` in order and prints ``answer`` (nothing
    when None)."""
    body = _PRELUDE + "".join(_call(t) for t in tools)
    return f"```python\n{body}{'' if answer is None else f'print({answer!r})'}\n```"


class GoldModel:
    """The router (see the module docstring). ``answer(i)`` is what task i prints."""

    def __init__(self, queries: Sequence[str], gold: Sequence[list[Tool]],
                 answer: Callable[[int], str] = lambda i: f"answer to task {i}") -> None:
        self.queries = [q.strip() for q in queries]
        self.gold = list(gold)
        self.answer = answer

    def index_of(self, body: dict[str, Any]) -> int:
        text = next(m["content"] for m in body["messages"] if m["role"] == "user")
        found = [i for i, q in enumerate(self.queries) if q in text]
        if not found:
            raise LookupError("no task of the suite in this request")
        return max(found, key=lambda i: len(self.queries[i]))

    def __call__(self, body: dict[str, Any]) -> str:
        i = self.index_of(body)
        return program(self.gold[i], self.answer(i))


# -- the same oracle for the step-by-step strategies' protocols --------------------------------

_ID = re.compile(r'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')


def _json_value(name: str, schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "array":
        return [_json_value(name, schema.get("items") or {})]
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return True
    if kind == "object":
        return {}
    return "reader@example.org" if "mail" in name else "Sofia Coppola"


def _observations(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content") or "") for m in body["messages"] if m["role"] == "tool"]


def _arguments(tool: Tool, last: str | None) -> dict[str, Any]:
    """A function call's arguments: path ids from the last observation, the rest as ``_value``."""
    found = _ID.search(last or "")
    seen: Any = 1
    if found:
        seen = json.loads(found.group(1))
    args: dict[str, Any] = {}
    for name in tool.required:
        schema = tool.parameters["properties"][name]
        binding = tool.bindings.get(name)
        if binding is not None and binding.location == "path" and not schema.get("enum"):
            args[name] = str(seen) if schema.get("type") == "string" else seen
        else:
            args[name] = _json_value(name, schema)
    return args


def agent(gold: GoldModel, finish: Callable[[str], dict[str, Any]]) -> Callable[[dict[str, Any]], Reply]:
    """``react`` / ``dfsdt``: one gold function call per turn (ids read from the last observation),
    then ``finish`` with ``finish(answer)`` as its arguments."""

    def reply(body: dict[str, Any]) -> Reply:
        i = gold.index_of(body)
        seen = _observations(body)
        if len(seen) < len(gold.gold[i]):
            tool = gold.gold[i][len(seen)]
            return Reply(tool_calls=(call(tool.name, _arguments(tool, seen[-1] if seen else None)),))
        return Reply(tool_calls=(call("finish", finish(gold.answer(i))),))

    return reply


def snippets(gold: GoldModel) -> Callable[[dict[str, Any]], str]:
    """``codeact``: the gold chain as one snippet, then the final answer."""

    def reply(body: dict[str, Any]) -> str:
        i = gold.index_of(body)
        if not any(m["role"] == "assistant" for m in body["messages"]):
            return program(gold.gold[i], gold.answer(i))
        return f"Final answer: {gold.answer(i)}"

    return reply


def text_agent(gold: GoldModel) -> Callable[[dict[str, Any]], str]:
    """``react-text``: one gold call per reply in the Thought / Action / Action Input format (ids
    read from the last observation), then the final answer."""

    def reply(body: dict[str, Any]) -> str:
        i = gold.index_of(body)
        seen = [str(m.get("content") or "") for m in body["messages"]
                if m["role"] == "user" and str(m.get("content") or "").startswith("Observation:")]
        if len(seen) < len(gold.gold[i]):
            tool = gold.gold[i][len(seen)]
            args = json.dumps(_arguments(tool, seen[-1] if seen else None))
            return f"Thought: next, {tool.name}.\nAction: {tool.name}\nAction Input: {args}"
        return f"Thought: done.\nFinal Answer: {gold.answer(i)}"

    return reply


def router_for(strategy: str, gold: GoldModel) -> Callable[[dict[str, Any]], Any]:
    """The oracle of ``gold`` in the protocol of a built-in strategy."""
    if strategy in ("chain", "chain-plain"):
        return gold
    if strategy == "react-text":
        return text_agent(gold)
    if strategy == "react":
        return agent(gold, lambda answer: {"answer": answer})
    if strategy == "dfsdt":
        return agent(gold, lambda answer: {"return_type": "give_answer", "final_answer": answer})
    if strategy == "codeact":
        return snippets(gold)
    raise ValueError(f"no scripted protocol for strategy {strategy!r}")


def protocol_of(body: dict[str, Any]) -> str:
    """Which built-in strategy sent a request (chain and chain-plain speak alike): function calling
    with a ``finish`` that takes a ``return_type`` is dfsdt's, other function calling react's, a
    prompt about snippets codeact's, anything else a program's."""
    functions = {t["function"]["name"]: t["function"] for t in body.get("tools") or []}
    if functions:
        finish = functions.get("finish") or {}
        return "dfsdt" if "return_type" in (finish.get("parameters") or {}).get("properties", {}) else "react"
    system = next((str(m.get("content") or "") for m in body["messages"] if m["role"] == "system"), "")
    if "Action Input:" in system:
        return "react-text"
    return "codeact" if "step by step by writing Python" in system else "chain"


def every_protocol(gold: GoldModel) -> Callable[[dict[str, Any]], Any]:
    """One router for every built-in strategy at once (``atc eval --strategy chain,react,...``)."""
    routers = {name: router_for(name, gold) for name in ("chain", "react", "react-text", "dfsdt", "codeact")}
    return lambda body: routers[protocol_of(body)](body)
