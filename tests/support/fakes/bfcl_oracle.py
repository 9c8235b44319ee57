"""A scripted model that knows BFCL's ground truth: the oracle of the BFCL tests and benchmark.

``BfclOracle(tasks)`` routes the requests of ``ScriptedOpenAI``: it finds the task and the user
turn in the request (the turn's query, as ``atc.evaluation.bfcl.job.turn_query`` writes it: the
user's messages up to the current one identify them), and answers with that turn's
ground-truth calls in the protocol of the strategy asking:

- ``chain``: one program calling them in order, each guarded (a ``ToolError`` is printed, not
  raised), printing every result;
- ``codeact``: the same code as one snippet, then ``Final answer: done``;
- ``react`` and ``dfsdt``: one function call per reply, then ``finish``.

BFCL's ground truth is written as calls (``sort('final_report.pdf')``); positional arguments are
named after the API method's own parameters, read from BFCL's classes. ``changed`` names tasks
of which one call gets one argument changed (``change``: the first text argument gets ``_x``
appended; without one, a number gets 1 added or a bool is negated): the run that must fail
BFCL's checker.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
from typing import Any

from atc.evaluation.bfcl.data import BfclTask
from tests.support.fakes.openai_server import Reply, call

__all__ = ["BfclOracle", "keyword_calls", "program", "change"]

_TASK = re.compile(r"## Task\n\n(?P<task>.*?)\n\nWrite the program\.", re.DOTALL)
_NOW = re.compile(r"Now, turn (?P<n>\d+)\. The user: (?P<text>.*)$", re.DOTALL)
_EARLIER = re.compile(r"Turn \d+\. The user: (?P<text>.*?)\nYour answer:", re.DOTALL)


def _signatures(task: BfclTask) -> dict[str, inspect.Signature]:
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    out: dict[str, inspect.Signature] = {}
    for name in task.involved_classes:
        klass = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[name]), name)
        for member, fn in vars(klass).items():
            if callable(fn) and not member.startswith("_"):
                out[member] = inspect.signature(fn)
    return out


def keyword_calls(task: BfclTask, turn: int) -> list[tuple[str, dict[str, Any]]]:
    """The ground-truth calls of ``turn`` as (name, keyword arguments)."""
    signatures = _signatures(task)
    out = []
    for text in task.ground_truth[turn]:
        node = ast.parse(text, mode="eval").body
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name), text
        name = node.func.id
        params = [p for p in signatures[name].parameters if p != "self"]
        args = {params[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
        args.update({k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})
        out.append((name, args))
    return out


def change(calls: list[list[tuple[str, dict[str, Any]]]]) -> None:
    """Change one argument, in place: the first text argument of any call (``_x`` appended), else
    the first number (plus 1), else the first bool (negated)."""
    for kinds in ((str,), (int, float), (bool,)):
        for turn in calls:
            for _, args in turn:
                for key, value in args.items():
                    if type(value) not in kinds:
                        continue
                    args[key] = value + "_x" if isinstance(value, str) else (
                        not value if isinstance(value, bool) else value + 1)
                    return


def program(calls: list[tuple[str, dict[str, Any]]]) -> str:
    """A chain program (or codeact snippet) making ``calls`` in order, each guarded and printed."""
    lines = []
    for name, args in calls:
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
        lines += ["try:", f"    print({name}({shown}))", "except ToolError as error:", "    print(error)"]
    return "\n".join(lines or ["print('nothing to do')"])


class BfclOracle:
    """Routes a ``ScriptedOpenAI`` by the BFCL turn in each request (see the module docstring)."""

    def __init__(self, tasks: list[BfclTask], changed: set[str] | frozenset[str] = frozenset()) -> None:
        # keyed by every user message up to the turn: a miss_func turn's message is BFCL's generic
        # follow-up, the same in many tasks
        self.turns: dict[tuple[str, ...], list[tuple[str, dict[str, Any]]]] = {}
        for task in tasks:
            calls = [keyword_calls(task, t) for t in range(len(task.turns))]
            if task.id in changed:
                change(calls)
            texts = [self._text(turn) for turn in task.turns]
            for t in range(len(task.turns)):
                self.turns[tuple(texts[:t + 1])] = calls[t]

    @staticmethod
    def _text(messages: list[dict[str, Any]]) -> str:
        from atc.evaluation.bfcl.job import _follow_up

        return "\n".join(str(m.get("content") or "") for m in messages).strip() or _follow_up()

    def calls_of(self, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        opening = next(str(m.get("content") or "") for m in body["messages"] if m.get("role") == "user")
        found = _TASK.search(opening)
        query = found.group("task") if found else opening.removeprefix("Task: ")
        now = _NOW.search(query)
        if now is None:
            return self.turns[(query.strip(),)]
        earlier = [m.group("text").strip() for m in _EARLIER.finditer(query)]
        return self.turns[(*earlier, now.group("text").strip())]

    def __call__(self, body: dict[str, Any]) -> str | Reply:
        calls = self.calls_of(body)
        messages = body["messages"]
        offered = [t.get("function", {}).get("name") for t in body.get("tools") or []]
        done = sum(1 for m in messages if m.get("role") == "assistant")
        if not offered:  # chain or codeact
            code = program(calls)
            if "snippet" in str(messages[0].get("content", "")) or "Final answer:" in str(messages[0].get("content")):
                return f"```python\n{code}\n```" if done == 0 else "Final answer: done"
            return f"```python\n{code}\n```"
        if done < len(calls):
            name, args = calls[done]
            return Reply(tool_calls=(call(name, args),))
        finish = next(n for n in offered if n and n.startswith(("finish", "atc_finish")))
        if any(t["function"]["name"] == finish and "return_type" in json.dumps(t["function"]["parameters"])
               for t in body["tools"]):
            return Reply(tool_calls=(call(finish, {"return_type": "give_answer", "final_answer": "done"}),))
        return Reply(tool_calls=(call(finish, {"answer": "done"}),))
