"""``dfsdt``: ToolLLM's depth-first search-based decision tree (ToolLLM, appendix A.4), on the
settings of ToolBench's published code unless told otherwise (``DfsdtSettings``).

Each node of the tree is one function-calling turn: the model, in the state its path led to,
calls one function (a tool, through the episode's gateway, or ``finish``) and the child node holds
the observation. The search is a pre-order depth-first traversal, as the paper chooses over
ranked DFS (no model calls to sort children):

- a node is expanded into at most ``width`` children; when a node already has children, the
  model is shown them and asked for a different action (the paper's diversity prompt);
- ``finish(return_type="give_answer", final_answer=...)`` ends the search with the answer;
- ``finish(return_type="give_up_and_restart")`` abandons the state: the search goes back two
  levels, to the node before the action that led there, and tries something else there. Given up
  in the very first state, ToolBench's search ends there without an answer (``root_give_up``
  ``end``); atc's own profile restarts from the task instead (``retry``);
- a path that reaches ``max_depth`` without an answer is a dead end: back one level. ToolBench
  counts depth in tree levels -- a turn is an Action and an Action Input node, plus a Thought node
  when the reply has text -- to 12, so a path is 4 to 6 turns (``depth_unit`` ``levels``); atc's
  own profile counts 10 turns;
- ``max_nodes`` (ToolBench: 200) bounds the nodes, i.e. the model turns of the whole tree, and the
  model budget bounds its calls and tokens. With no give-up and no dead end, DFSDT is ReAct.

Tool calls are real: going back to an earlier node restores the conversation, not the API's
state (as in the paper, actions are irreversible). Every node is recorded in the trace; the
answer's calls (``Solution.calls``) are those along the final path, while ``api_calls`` counts
the calls of every branch.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from atc import prompts, tracing
from atc.errors import ModelError, UsageError
from atc.llm.chat import Message
from atc.loop.strategies.base import Episode, Outcome, Step, error_dict, model_stop
from atc.loop.strategies.functions import (
    act,
    assistant_turn,
    finish_name,
    finish_value,
    function_schemas,
    note_extra,
    tool_calls,
)
from atc.loop.strategies.react import finish_function, turn_levels
from atc.loop.strategies.registry import register
from atc.loop.strategies.settings import DfsdtSettings
from sandbox.api import ToolCall

__all__ = ["Dfsdt", "Node", "DEFAULT_NODES", "DEFAULT_WIDTH", "DEFAULT_DEPTH"]

_PUBLISHED = DfsdtSettings()
DEFAULT_NODES = _PUBLISHED.max_nodes
DEFAULT_WIDTH = _PUBLISHED.width
DEFAULT_DEPTH = _PUBLISHED.max_depth
#: Levels a give-up goes back (ToolBench's prune_back_length): past the state given up on.
_GIVE_UP_BACK = 2


@dataclass
class Node:
    """One turn of the tree. ``status``: ``root``; ``ok`` / ``failed`` (a tool call and how it
    went); ``no_action`` (no function called); ``answer``; ``gave_up``; ``dead_end`` (the depth
    limit was reached here). ``messages`` is the conversation in this node's state."""

    id: int
    parent: int | None
    depth: int
    level: int = 0
    status: str = "root"
    thought: str = ""
    action: str | None = None
    args: Any = None
    observation: str = ""
    answer: str | None = None
    children: list[int] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list, repr=False)
    call: ToolCall | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "parent": self.parent, "depth": self.depth, "level": self.level,
                             "status": self.status,
                             "thought": self.thought[:500], "action": self.action, "args": self.args,
                             "observation": self.observation[:500], "children": list(self.children)}
        if self.answer is not None:
            d["answer"] = self.answer
        return d


class _Found(Exception):
    def __init__(self, node: Node) -> None:
        self.node = node


class _Stop(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        self.error = error


class Dfsdt:
    """Depth-first search over function-calling turns, with give-up-and-restart."""

    name = "dfsdt"
    step_unit = "node"
    uses_sandbox = False

    def __init__(self, *, settings: DfsdtSettings | None = None, max_steps: int | None = None,
                 width: int | None = None, max_depth: int | None = None, max_observation: int | None = None,
                 **_: Any) -> None:
        settings = settings or DfsdtSettings()
        given = {"max_nodes": max_steps, "width": width, "max_depth": max_depth, "max_observation": max_observation}
        changes = {k: v for k, v in given.items() if v is not None}
        if any(not isinstance(v, int) or v < 1 for v in changes.values()):
            raise UsageError("dfsdt needs --max-steps (nodes), width and max_depth of at least 1")
        if changes:
            settings = dataclasses.replace(settings, **changes)  # type: ignore[arg-type]
        settings.check()
        self.settings = settings
        self.max_nodes, self.width, self.max_depth = settings.max_nodes, settings.width, settings.max_depth
        self.max_observation = settings.max_observation

    def run(self, episode: Episode) -> Outcome:
        return _Search(self.settings, episode).run()


class _Search:
    """One search: the tree, and the functions offered at every node."""

    def __init__(self, settings: DfsdtSettings, episode: Episode) -> None:
        self.settings = settings
        self.episode = episode
        self.finish = finish_name(episode.toolset.names())
        self.functions = [*function_schemas(episode.shown), finish_function(
            self.finish, give_up=True, value=episode.answer.schema if episode.answer is not None else None)]
        self.value: Any = None
        root = Node(0, None, 0, messages=[
            {"role": "system", "content": prompts.render("dfsdt", finish=self.finish) + episode.answer_prompt(self.finish)
             + episode.rules_note()},
            {"role": "user", "content": f"Task: {episode.query.strip()}"}])
        self.nodes: list[Node] = [root]

    def run(self) -> Outcome:
        try:
            self.descend(self.nodes[0])
        except _Found as found:
            return self.outcome(found.node, None)
        except _Stop as stop:
            return self.outcome(self.nodes[-1], stop.error)
        return self.outcome(self.nodes[-1], error_dict(
            "SearchExhausted", f"every branch (width {self.settings.width}, depth {self.settings.max_depth} "
                               f"{self.settings.depth_unit}) ended without an answer after {len(self.nodes) - 1} node(s)"))

    def descend(self, node: Node) -> int:
        """Search below ``node``; returns how many levels the search goes back up from it."""
        if node.status == "answer":
            raise _Found(node)
        if node.status == "gave_up":
            return _GIVE_UP_BACK
        deep = node.level if self.settings.depth_unit == "levels" else node.depth
        if deep >= self.settings.max_depth:
            node.status = "dead_end"
            self.episode.fail("dead_end")
            return 1
        for _ in range(self.settings.width):
            back = self.descend(self.expand(node))
            if back > 1 and node.parent is not None:
                return back - 1
            if back > 1 and self.settings.root_give_up == "end":
                # given up in the very first state: ToolBench's search has nowhere earlier to go, and ends
                raise _Stop(error_dict("GaveUp", f"the model gave up in the task's first state "
                                                 f"({self.finish} with give_up_and_restart): the search ends there"))
        return 1

    def expand(self, node: Node) -> Node:
        """One model turn in ``node``'s state: a new child holding what the model did."""
        made = len(self.nodes) - 1
        if made >= self.settings.max_nodes:
            self.episode.fail("step_limit")
            raise _Stop(error_dict("StepLimit", f"the node budget ({self.settings.max_nodes}) was spent "
                                                "without an answer"))
        messages = node.messages + self.retry_note(node)
        child = Node(len(self.nodes), node.id, node.depth + 1)
        with tracing.span("atc.step", {"atc.strategy": "dfsdt", "atc.step": child.id, "atc.depth": child.depth}):
            try:
                reply = self.episode.ask(messages, tools=self.functions, tool_choice="auto")
            except ModelError as exc:
                raise _Stop(model_stop(self.episode, exc, made, "node")) from exc
            self.nodes.append(child)
            node.children.append(child.id)
            self.act(node, child, reply.text, tool_calls(reply.tool_calls))
        self.episode.report(Step("node", child.id, child.status in ("ok", "answer"), _summary(child)))
        return child

    def act(self, node: Node, child: Node, text: str, calls: tuple[Any, ...]) -> None:
        """Do what the reply asks and record it on ``child`` (its state: ``node``'s plus this turn)."""
        child.thought = text.strip()
        child.level = node.level + turn_levels(child.thought, bool(calls))
        child.messages = [*node.messages, *assistant_turn(text, calls)]
        note_extra(self.episode, calls[1:], self.finish)
        if not calls:
            child.status = "no_action"
            self.episode.fail("no_action")
            child.messages.append({"role": "user", "content": prompts.render("react_nudge", finish=self.finish)})
            return
        first = calls[0]
        child.action = first.name
        if first.name == self.finish:
            self.finished(child, first.arguments, first.id)
            return
        # Backtracking restores the conversation, not the API: a write of an abandoned branch that
        # this branch repeats meets it in the write ledger, and is not sent again (Episode.call_tool).
        action = act(self.episode, first, max_chars=self.settings.max_observation, mode=self.settings.observation)
        child.args = action.args if action.args is not None else action.arguments
        child.observation, child.call = action.observation, action.call
        child.status = "ok" if action.ok else "failed"
        child.messages.append({"role": "tool", "tool_call_id": first.id, "content": action.observation})

    def finished(self, child: Node, arguments: str, call_id: str) -> None:
        try:
            args = json.loads(arguments or "{}")
        except ValueError:
            args = None
        args = args if isinstance(args, dict) else {}
        child.args = args
        kind = str(args.get("return_type") or "give_answer")
        answer = str(args.get("final_answer") or "").strip()
        if kind == "give_up_and_restart":
            child.status = "gave_up"
            self.episode.fail("gave_up")
        elif kind == "give_answer" and self.episode.answer is not None:
            value, problem = finish_value(self.episode, arguments)
            if problem is None:
                self.value = value
                child.status = "answer"
                child.answer = answer or json.dumps(args.get("value"), ensure_ascii=False)
            else:
                child.status = "failed"
                self.episode.fail("bad_answer")
                child.observation = f"Error: {self.finish}: {problem}"
                child.messages.append({"role": "tool", "tool_call_id": call_id, "content": child.observation})
        elif kind == "give_answer" and answer:
            child.status, child.answer = "answer", answer
        else:
            child.status = "failed"
            self.episode.fail("empty_answer" if kind == "give_answer" else "malformed_call")
            child.observation = (f"Error: {self.finish} takes return_type give_answer (with final_answer) or "
                                 "give_up_and_restart")
            child.messages.append({"role": "tool", "tool_call_id": call_id, "content": child.observation})

    def retry_note(self, node: Node) -> list[Message]:
        """For a node tried before: its earlier children, and the request to do something else."""
        if not node.children:
            return []
        tried = [{"action": c.action, "args": c.args, "observation": c.observation[:300] or c.status}
                 for c in (self.nodes[i] for i in node.children)]
        return [{"role": "user", "content": prompts.render(
            "dfsdt_retry", tried=json.dumps(tried, ensure_ascii=False, indent=1, default=str))}]

    def path(self, node: Node) -> list[Node]:
        out = [node]
        while out[-1].parent is not None:
            out.append(self.nodes[out[-1].parent])
        return out[::-1]

    def outcome(self, last: Node, error: dict[str, Any] | None) -> Outcome:
        path = self.path(last)
        found = last.status == "answer" and error is None
        trace = {"nodes": [n.to_dict() for n in self.nodes], "path": [n.id for n in path],
                 "answer_node": last.id if found else None, "width": self.settings.width,
                 "max_depth": self.settings.max_depth, "depth_unit": self.settings.depth_unit,
                 "max_nodes": self.settings.max_nodes, "root_give_up": self.settings.root_give_up}
        return Outcome(ok=found, answer=(last.answer or "") if found else "", error=None if found else error,
                       calls=[n.call for n in path if n.call is not None], steps=len(self.nodes) - 1, trace=trace,
                       value=self.value if found else None)


def _summary(node: Node) -> str:
    where = f"depth {node.depth}"
    if node.status == "answer":
        return f"{where}: answer: {' '.join(str(node.answer).split())[:120]}"
    if node.status in ("gave_up", "no_action"):
        return f"{where}: {node.status.replace('_', ' ')}"
    shown = json.dumps(node.args, ensure_ascii=False, default=str)[:80] if node.args is not None else ""
    status = "ok" if node.status == "ok" else f"failed: {' '.join(node.observation.split())[:120]}"
    return f"{where}: {node.action}({shown}) -> {status}"


register("dfsdt", Dfsdt)
