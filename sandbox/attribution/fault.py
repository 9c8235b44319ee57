"""Attribution: for a failed program run, the tool at fault, chosen deterministically and explained.

Reflection works best when it can tell the model *which* tool's data broke the program and
*what that data looked like*. ``attribute`` decides this from what the sandbox observed:

1. A ``ToolError`` belongs to the tool that raised it (the runner reports its name); the reason
   says what happened to the request (``ToolCall.failure``: refused before sending, could not
   connect, no answer in time, HTTP status...). A ``Timeout`` while a call was waiting for its
   API belongs to that call's tool.
2. Otherwise the innermost program frame's positions name the failing sub-expression, and
   ``sandbox.attribution.dataflow`` follows the data of its operands back to the tool calls it may come
   from (the candidates).
3. The candidates are ranked with one documented key (``Candidate.key``), in the spirit of
   jsonschema's ``best_match``: an explicit, comparable choice rather than a heuristic
   scattered through code. No candidate means the program's own logic failed (tool None).

The attributed call's real response of this run is attached condensed to its shape (a JSON
Schema inferred by genson) and a short excerpt (``sandbox.attribution.condense``), so the model sees the
real keys even when the spec documents no response schema.

``attribute`` never raises: an internal failure yields ``tool=None`` with a reason saying so.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox.api import ToolCall
from sandbox.attribution.condense import condense
from sandbox.attribution.dataflow import FramePoint, ProgramIndex, Source, Tracer

__all__ = ["Attribution", "Candidate", "attribute", "rank"]

#: Failures decided by a limit of the sandbox rather than by an expression of the program.
_LIMITS = ("Timeout", "OutputLimit", "MemoryLimit", "SandboxError")

#: What each position of ``Candidate.key`` means, for explaining why one candidate won.
_CRITERIA = (
    "it is called inside the failing expression itself",
    "its data reaches the failure in fewer steps",
    "it ran in this run",
    "it ran more recently before the failure",
    "it comes first in the program text",
)


@dataclass
class Attribution:
    """The tool a failure is attributed to (None: the program's own logic) and why.

    ``call_index`` indexes the run's call log: the call whose response fed the failure (for a
    ToolError, the failed call). ``response_shape``/``excerpt`` condense that response.
    ``candidates`` are all tools considered, best first, with their ranking keys.
    """

    tool: str | None
    reason: str
    call_index: int | None = None
    response_shape: dict[str, Any] | None = None
    excerpt: str | None = None
    candidates: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "reason": self.reason,
            "call_index": self.call_index,
            "response_shape": self.response_shape,
            "excerpt": self.excerpt,
            "candidates": self.candidates,
        }


@dataclass(frozen=True)
class Candidate:
    """A tool call the failing data may come from, with what the call log says about it."""

    source: Source
    executions: tuple[int, ...]  # indexes in the call log of this very call site, in order

    @property
    def ran(self) -> bool:
        return bool(self.executions)

    def key(self) -> tuple[int, int, int, int, int, int]:
        """Smaller is more likely at fault. Criteria in order:

        1. a tool call syntactically inside the failing sub-expression (``tool(...)['k']``):
           its result is what failed, no data flow to trust;
        2. data-flow distance: fewer hops (bindings, parameters, returns) is a more direct
           cause than a value that was merely mixed in further back;
        3. a call site that ran in this run (per the call log) beats one that never ran: data
           that was never fetched cannot have broken anything;
        4. among those, the one executed most recently before the failure (in a loop or
           after a reassignment, the latest value is the one in hand);
        5. textual position (line, column) as the final deterministic tiebreak.
        """
        s = self.source
        return (
            0 if s.hops == 0 else 1,
            s.hops,
            0 if self.ran else 1,
            -self.executions[-1] if self.ran else 0,
            s.line,
            s.col,
        )

    def to_dict(self, index: ProgramIndex | None = None) -> dict[str, Any]:
        return {
            "tool": self.source.tool,
            "line": self.source.line,
            "col": self.source.col,
            "hops": self.source.hops,
            "ran": self.ran,
            "last_call": self.executions[-1] if self.ran else None,
            "path": list(self.source.path),
            "code": index.segment(self.source.call) if index is not None else None,
            "key": list(self.key()),
        }


def _executions(source: Source, calls: Sequence[ToolCall]) -> tuple[int, ...]:
    """Log indexes of ``source``'s call site: same tool, line and column (the runner records
    the column of the call expression, as the AST does); by line alone when no column matches."""
    same_line = [i for i, c in enumerate(calls) if c.tool == source.tool and c.line == source.line]
    exact = [i for i in same_line if calls[i].col == source.col]
    return tuple(exact or [i for i in same_line if calls[i].col is None] or same_line)


def rank(sources: Sequence[Source], calls: Sequence[ToolCall]) -> list[Candidate]:
    """Candidates best first, by ``Candidate.key``."""
    return sorted((Candidate(s, _executions(s, calls)) for s in sources), key=Candidate.key)


def _call_for(tool: str, calls: Sequence[ToolCall], preferred: Sequence[int] = (), *, failed: bool = False) -> int | None:
    """The log index of the call whose response to show: among ``preferred`` (the call site's
    executions) else all calls of ``tool``, the last one that succeeded (``failed``: the last
    one that failed), else the last one."""
    pool = list(preferred) or [i for i, c in enumerate(calls) if c.tool == tool]
    if not pool:
        return None
    wanted = [i for i in pool if calls[i].ok != failed]
    return (wanted or pool)[-1]


def _with_response(att: Attribution, calls: Sequence[ToolCall]) -> Attribution:
    if att.call_index is None:
        return att
    value = calls[att.call_index].response
    if value is None:  # no response: the call was refused before any request (arguments, budget)
        return att
    att.response_shape, att.excerpt = condense(value)
    return att


def _frames(error: dict[str, Any]) -> list[FramePoint]:
    out = []
    for f in error.get("frames") or []:
        if not isinstance(f, dict):
            continue

        def num(key: str, f: dict[str, Any] = f) -> int | None:
            v = f.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) else None

        out.append(FramePoint(str(f.get("name") or ""), num("lineno"), num("end_lineno"), num("col"), num("end_col")))
    return out


def _describe(index: ProgramIndex, node: ast.AST | None, etype: str, frame: FramePoint | None) -> str:
    """``KeyError on `c['cities']` at line 2`` (the failing sub-expression, briefly)."""
    line = getattr(node, "lineno", None) or (frame.lineno if frame else None)
    where = f" at line {line}" if line else ""
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return f"{etype} iterating over `{index.segment(node.iter)}`{where}"
    if isinstance(node, ast.Raise):
        return f"{etype} raised by `{index.segment(node)}`{where}"
    if node is None or isinstance(node, ast.stmt) and not isinstance(node, (ast.Expr, ast.Assign, ast.AugAssign, ast.Return)):
        return f"{etype}{where}"
    return f"{etype} on `{index.segment(node)}`{where}"


def _explain(ranked: list[Candidate], head: str) -> str:
    """The reason text: the failing expression, the data-flow path to the chosen call, and the
    criterion that put it above the best candidate of another tool."""
    best = ranked[0]
    s = best.source
    steps = list(s.path)
    origin = f"{s.tool}(...) at line {s.line}"
    if s.hops == 0 and not steps:
        text = f"{head}: the failing expression calls {origin} and uses its result directly"
    else:
        text = f"{head}: " + "; ".join(steps) + f"; that data comes from {origin}"
    if not best.ran:
        text += " (this call site did not run in this run)"
    rivals = [c for c in ranked[1:] if c.source.tool != s.tool]
    if rivals:
        rival = rivals[0]
        criterion = next(
            (_CRITERIA[i] for i, (a, b) in enumerate(zip(best.key(), rival.key(), strict=True)) if a != b and i < 4),
            _CRITERIA[4],
        )
        text += f". Chosen over {rival.source.tool}(...) at line {rival.source.line} because {criterion}"
    return text


#: What happened to a failed call's request, by ``ToolCall.failure``.
_FAILURE_WORDS = {
    "arguments": "rejected before any request was sent",
    "config": "not sent: the run's configuration is missing something",
    "budget": "not sent: the call budget was spent",
    "connect": "the request was made but could not reach the server",
    "timeout": "the request was sent but no response came in time",
    "request": "the request was sent but failed in transit",
    "response": "a response came but could not be used",
    "redirect": "the API redirected and the redirect was not followed",
    "tool": "the MCP tool answered with an error",
    "protocol": "the MCP server answered with a protocol error",
}


def _tool_error(error: dict[str, Any], calls: Sequence[ToolCall], frames: list[FramePoint]) -> Attribution:
    tool = str(error["tool"])
    index = _call_for(tool, calls, failed=True)
    line = frames[-1].lineno if frames else (calls[index].line if index is not None else None)
    status = error.get("status")
    failure = calls[index].failure if index is not None else None
    if isinstance(status, int) and failure not in ("redirect", "response"):
        what = f"HTTP {status}"
    elif failure in _FAILURE_WORDS:
        what = _FAILURE_WORDS[failure] + (f" (HTTP {status})" if isinstance(status, int) else "")
    else:
        what = "rejected before any request was sent"
    reason = (f"ToolError raised by {tool}" + (f" at line {line}" if line else "")
              + f" ({what}): {str(error.get('message') or '').strip()[:300]}")
    return _with_response(Attribution(tool, reason, index), calls)


def _call_budget(calls: Sequence[ToolCall]) -> Attribution:
    counts = Counter(c.tool for c in calls)
    if not counts:
        return Attribution(None, "CallBudget: the call budget was exhausted before any call was recorded")
    last = {c.tool: i for i, c in enumerate(calls)}
    # most calls first; among equals, the one called last (it was in use when the budget ran out)
    tool = max(counts, key=lambda t: (counts[t], last[t]))
    reason = (f"CallBudget: the program made {len(calls)} tool calls; {tool} was called most "
              f"({counts[tool]} times), so the loop around it is the likely cause")
    return _with_response(Attribution(tool, reason, _call_for(tool, calls)), calls)


def _attribute(program: str, error: dict[str, Any], calls: Sequence[ToolCall], tool_names: set[str] | frozenset[str]) -> Attribution:
    etype = str(error.get("type") or "Error")
    frames = _frames(error)
    if error.get("tool"):
        return _tool_error(error, calls, frames)
    if etype == "CallBudget":
        return _call_budget(calls)
    waiting = error.get("in_flight")
    if etype == "Timeout" and isinstance(waiting, int) and 0 <= waiting < len(calls):
        call = calls[waiting]
        where = f" at line {call.line}" if call.line is not None else ""
        reason = (f"Timeout: the program ran out of time waiting for {call.tool}(...){where}: the request was "
                  f"sent and no response came within {call.duration_ms / 1000:.1f} s")
        return Attribution(call.tool, reason, waiting)
    if etype in _LIMITS:
        return Attribution(None, f"{etype}: a sandbox limit stopped the program; no single tool call is at fault")
    if etype == "SyntaxError":
        return Attribution(None, "SyntaxError: the program does not compile; no tool ran")
    if not frames:
        return Attribution(None, f"{etype}: no program frame to analyse; no tool blamed")
    index = ProgramIndex(program, set(tool_names) | {c.tool for c in calls})
    tracer = Tracer(index, frames)
    ranked = rank(tracer.sources(etype), calls)
    head = _describe(index, tracer.failing, etype, frames[-1])
    if not ranked:
        if etype == "NameError":
            why = "a name the program never defined; no tool is involved"
        elif etype == "UnboundLocalError":
            why = "a local name used before the program assigned it; no tool is involved"
        elif tracer.truncated:
            why = "its data flow is longer than the analysis follows, so no tool is blamed"
        elif isinstance(tracer.failing, ast.Raise):
            why = "the program raises it on purpose and no caught tool error is passed on, so it is the program's own logic"
        else:
            why = "its operands do not derive from any tool result, so the program's own logic is at fault"
        return Attribution(None, f"{head}: {why}")
    best = ranked[0]
    att = Attribution(
        tool=best.source.tool,
        reason=_explain(ranked, head),
        call_index=_call_for(best.source.tool, calls, best.executions),
        candidates=[c.to_dict(index) for c in ranked],
    )
    return _with_response(att, calls)


def attribute(
    program: str,
    error: dict[str, Any],
    calls: Sequence[ToolCall],
    tool_names: set[str] | frozenset[str],
) -> Attribution:
    """Attribute a failed run (the runner's ``done.error`` dict, the call log in execution order,
    the tool names in play) to a tool, or to the program's own logic (``tool=None``).
    Deterministic; never raises."""
    try:
        return _attribute(program, error if isinstance(error, dict) else {}, list(calls), tool_names)
    except Exception as exc:  # attribution must never turn a program failure into a crash
        return Attribution(None, f"attribution failed ({type(exc).__name__}: {exc}); no tool blamed")
