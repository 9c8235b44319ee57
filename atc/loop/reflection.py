"""Attributable reflection: which tool a failure belongs to, and what the model is told next.

After a failed attempt the model gets (as the ATC paper's eq. 2) the failed program, its error
(type, message, line, the offending line of code, the program part of the traceback), the calls
it made, and, when a tool is blamed, that tool's FULL protocol (``protocols.render_full``) plus
the response the tool really returned in this run (its condensed shape and an excerpt). The last
part is what fixes a ``KeyError`` on an API whose spec has no response schema: the model sees the
real keys.

Who is blamed, in order:

1. the run's own attribution (``error.tool``, filled by ``sandbox.attribution.fault`` from the
   traceback positions and the program's data flow) or the static check's tool;
2. only when that names no tool but the failing line touches tool data (it reads a variable
   that was assigned, directly or through other variables, from a tool call, or the traceback
   names a tool), the model itself is asked to name the tool (the paper's attribution step);
3. otherwise nobody: the fault is the program's own logic and no protocol is shown.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from atc import prompts
from atc.llm.chat import Completion, Message, ModelClient
from protocols.model import Tool
from protocols.render import render_full, response_shape
from sandbox.api import ExecutionResult
from sandbox.attribution.condense import condense
from sandbox.pyparse import parse

__all__ = [
    "Response",
    "touches_tool_data",
    "tool_data_names",
    "needs_model_attribution",
    "ask_model_for_tool",
    "parse_tool_name",
    "tool_response",
    "describe_error",
    "feedback",
]

# Error types that are not about tool data: nothing to attribute.
_NOT_ATTRIBUTABLE = frozenset({"NoProgram", "EmptyAnswer", "SyntaxError", "IndentationError", "TabError",
                               "Timeout", "MemoryLimit", "OutputLimit", "SandboxError", "AnswerError"})
_MAX_CALLS_SHOWN = 12
# What to do about the failures that are limits rather than exceptions.
_HINTS = {
    "Timeout": "The program ran out of time: avoid unbounded loops and make fewer, more targeted calls.",
    "CallBudget": "The program made more tool calls than allowed: narrow the search and call fewer times.",
    "OutputLimit": "The program printed too much: print only the final answer.",
    "MemoryLimit": "The program used too much memory: keep only the data the answer needs.",
    "AnswerError": "Hand the result to final_answer(value) as JSON data of exactly the schema's shape: the "
                   "keys it names, the types it says (convert strings to numbers where it wants numbers).",
}
_MAX_TRACEBACK = 1500


@dataclass(frozen=True)
class Response:
    """What a tool returned in a run, condensed: ``shape`` is a compact rendering of its
    structure (from a JSON Schema), ``excerpt`` a short JSON excerpt."""

    tool: str
    shape: str | None
    excerpt: str | None


# -- does the failure touch tool data? --------------------------------------------------------


def _calls_tool(node: ast.AST, tools: set[str]) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in tools
               for n in ast.walk(node))


def _reads(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _targets(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _flows(tree: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """(value, target) pairs of every binding whose target gets data from its value."""
    pairs: list[tuple[ast.AST, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            pairs.extend((node.value, t) for t in node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            pairs.append((node.value, node.target))
        elif isinstance(node, ast.NamedExpr):
            pairs.append((node.value, node.target))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            pairs.append((node.iter, node.target))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            pairs.append((node.context_expr, node.optional_vars))
    return pairs


def tool_data_names(program: str, tools: Iterable[str]) -> set[str]:
    """Variables holding data that came from a tool call, directly or through other variables
    (a fixed point over assignments, loop targets and comprehensions; attribute and subscript
    stores count for their base name). Empty when the program does not parse."""
    try:
        tree = parse(program)
    except (SyntaxError, ValueError):
        return set()
    tool_set = set(tools)
    flows = _flows(tree)
    tainted: set[str] = set()
    changed = True
    while changed:
        changed = False
        for value, target in flows:
            if _calls_tool(value, tool_set) or _reads(value, tainted):
                new = _targets(target) - tainted
                if new:
                    tainted |= new
                    changed = True
    return tainted


def touches_tool_data(program: str, error: Mapping[str, Any], tools: Iterable[str]) -> bool:
    """Whether the failing line reads tool data or calls a tool, or the traceback names a tool."""
    tool_set = set(tools)
    traceback = str(error.get("traceback") or "")
    if any(re.search(rf"\b{re.escape(t)}\b", traceback) for t in tool_set):
        return True
    line = error.get("line")
    lines = program.splitlines()
    if not isinstance(line, int) or not 0 < line <= len(lines):
        return False
    code = lines[line - 1]
    words = set(re.findall(r"[A-Za-z_]\w*", code))
    return bool(words & (tool_set | tool_data_names(program, tool_set)))


def needs_model_attribution(program: str, error: Mapping[str, Any] | None, tools: Iterable[str]) -> bool:
    """Ask the model only when the run named no tool but the failure touches tool data."""
    if not error or error.get("tool") or error.get("type") in _NOT_ATTRIBUTABLE:
        return False
    return touches_tool_data(program, error, tools)


# -- asking the model -------------------------------------------------------------------------


def parse_tool_name(reply: str, tools: Sequence[str]) -> str | None:
    """The tool a reply names: the whole reply when it is exactly a tool name (backticks, quotes
    and punctuation aside), else the first tool name that occurs in it as a word; None for
    ``none`` or no tool."""
    text = reply.strip().strip("`'\". \n")
    if text in tools:
        return text
    best: tuple[int, str] | None = None
    for name in tools:
        m = re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", reply)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), name)
    return best[1] if best else None


def _numbered(program: str) -> str:
    return "\n".join(f"{i:>3}| {line}" for i, line in enumerate(program.splitlines(), 1))


def ask_model_for_tool(
    client: ModelClient, task: str, program: str, error: Mapping[str, Any], tools: Sequence[Tool]
) -> tuple[str | None, Completion]:
    """The attribution step: the model names the tool at fault (or none). Returns the tool and
    the completion (for usage)."""
    names = [t.name for t in tools]
    listing = "\n".join(f"- {t.name}: {t.summary}" if t.summary else f"- {t.name}" for t in tools)
    text = prompts.render("attribute", task=task, tools=listing, program=_numbered(program),
                          error=describe_error(error, program))
    messages: list[Message] = [{"role": "user", "content": text}]
    completion = client.complete(messages)
    return parse_tool_name(completion.text, names), completion


# -- what the tool returned ------------------------------------------------------------------


def _shape_text(schema: Any) -> str | None:
    if not schema:
        return None
    return str(response_shape(schema))


def tool_response(result: ExecutionResult | None, tool: str) -> Response | None:
    """What ``tool`` returned in this run: from the run's attribution when it is about this tool,
    else from the tool's last recorded call (condensed with ``sandbox.attribution.condense``)."""
    if result is None:
        return None
    err = result.error
    attribution = err.attribution if err is not None else None
    if err is not None and err.tool == tool and attribution and (attribution.get("response_shape") or attribution.get("excerpt")):
        return Response(tool, _shape_text(attribution.get("response_shape")), attribution.get("excerpt"))
    for call in reversed(result.calls):
        if call.tool != tool or call.response is None:
            continue
        schema, excerpt = condense(call.response)
        return Response(tool, _shape_text(schema), excerpt)
    return None


# -- the feedback message ---------------------------------------------------------------------


def _program_traceback(traceback: str) -> str:
    text = traceback.strip()
    return text if len(text) <= _MAX_TRACEBACK else "...\n" + text[-_MAX_TRACEBACK:]


def describe_error(error: Mapping[str, Any], program: str) -> str:
    """The error as the model should read it: type and message, line and code, traceback."""
    kind = str(error.get("type") or "Error")
    if kind == "NoProgram":
        return ("Your reply contained no Python program. Reply with the complete program in one "
                "```python block.")
    if kind == "EmptyAnswer":
        return ("The program ran without an error but printed nothing. The answer is what it prints: "
                "end with print(...) of the final answer.")
    parts = [f"Error: {kind}: {error.get('message') or ''}".rstrip()]
    if kind in _HINTS:
        parts.append(_HINTS[kind])
    if error.get("static"):
        parts[0] += "\n(found by checking the program before running it; nothing was run)"
    line = error.get("line")
    lines = program.splitlines()
    code = error.get("code")
    if isinstance(line, int) and 0 < line <= len(lines):
        code = lines[line - 1].strip()
    if isinstance(line, int):
        parts.append(f"Line {line}: {code}" if code else f"Line {line}")
    traceback = str(error.get("traceback") or "")
    if traceback.strip() and not error.get("static"):
        text = _program_traceback(traceback)
        parts.append(text if text.startswith("Traceback") else "Traceback:\n" + text)
    return "\n".join(parts)


def _calls_summary(result: ExecutionResult | None) -> str:
    if result is None or not result.calls:
        return ""
    shown = result.calls[-_MAX_CALLS_SHOWN:]
    lines = [f"Tool calls this run made ({len(result.calls)}{', last ' + str(len(shown)) if len(shown) < len(result.calls) else ''}):"]
    for c in shown:
        args = ", ".join(f"{k}={v!r}" for k, v in c.args.items())
        status = c.status if c.status is not None else "not sent"
        tail = f" -> {c.error}" if c.error and not c.ok else ""
        kind = {"MCP": "MCP", "PYTHON": "Python"}.get(c.method)
        outcome = f"{kind} {'ok' if c.ok else 'failed'}" if kind else f"HTTP {status}"
        lines.append(f"- line {c.line}: {c.tool}({args}) -> {outcome}{tail}"[:300])
    return "\n".join(lines) + "\n"


def feedback(
    attempt: int,
    program: str | None,
    error: Mapping[str, Any],
    *,
    blamed: Tool | None,
    reason: str | None = None,
    result: ExecutionResult | None = None,
) -> str:
    """The user message after failed attempt number ``attempt`` (1-based)."""
    sections = [_calls_summary(result)]
    if blamed is not None:
        why = f" ({reason})" if reason else ""
        sections.append(f"The error is attributed to the tool `{blamed.name}`{why}. Its full protocol:\n\n"
                        f"{render_full(blamed).strip()}")
        response = tool_response(result, blamed.name)
        if response is not None:
            seen = [f"What `{blamed.name}` really returned in this run (use these keys):"]
            if response.shape:
                seen.append(f"shape: {response.shape}")
            if response.excerpt:
                seen.append(f"excerpt: {response.excerpt}")
            sections.append("\n".join(seen))
    elif program and error.get("type") not in _NOT_ATTRIBUTABLE:
        sections.append("No tool is at fault: the error is in the program's own logic.")
    blame = "\n\n".join(s.strip() for s in sections if s.strip())
    return prompts.render("reflect", attempt=str(attempt), error=describe_error(error, program or ""), blame=blame)
