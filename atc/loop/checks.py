"""Static checks of a program before it spends a sandbox run.

Three kinds of mistakes are visible in the AST alone and are reported to the model exactly as
the run would have reported them, only sooner and cheaper:

- the program does not parse (``SyntaxError`` with its line);
- it calls a function that is neither a tool, a builtin, nor defined in the program
  (``NameError``, with "did you mean" over the tool names);
- a tool call passes positional arguments, an argument the tool does not have, or misses a
  required one (``ToolError`` with ``tool`` set; the tool's parameters are listed).

The error dict has the shape of ``ErrorInfo.to_dict()`` plus ``"static": True``. A call with
``**kwargs`` is not checked for missing arguments (the dict may hold them), and a name the program
binds itself (a helper that shadows a tool) is not a tool call at all.

Every tool also takes ``extra_query={...}`` (query parameters the spec does not list) and
``with_headers=True`` (return a ``Response``); a literal of the wrong kind for either is reported.
Tools whose collection runs with validation ``warn`` or ``off`` (``lenient``) are not checked for
unknown or missing arguments: the gateway sends such calls, so the check must not refuse them.
"""

from __future__ import annotations

import ast
import builtins
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from atc.loop.extract import bound_names
from protocols.model import RESERVED_ARGUMENTS, Tool
from sandbox.lint import MAX_PROGRAM_CHARS, too_long
from sandbox.pyparse import parse

if TYPE_CHECKING:
    from sandbox.api import Toolset

__all__ = ["Issue", "find_issues", "check_program", "check_for_run"]

_BUILTINS = frozenset(dir(builtins)) | {"ToolError", "last_response", "final_answer"}
_MAX_REPORTED = 5


@dataclass(frozen=True)
class Issue:
    """One mistake found statically. ``type`` is what the run would have raised."""

    type: str
    message: str
    line: int | None
    col: int | None = None
    tool: str | None = None


def _suggest(name: str, options: list[str]) -> str:
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def _signature(tool: Tool) -> str:
    required = set(tool.required)
    parts = [f"{p}{'' if p in required else '=...'}" for p in tool.properties]
    return f"{tool.name}({', '.join(parts)})"


def _reserved_issue(keyword: ast.keyword, tool: Tool) -> Issue | None:
    """A literal of the wrong kind for ``extra_query`` (a dict) or ``with_headers`` (a bool)."""
    value = keyword.value
    if keyword.arg == "extra_query" and isinstance(value, ast.List | ast.Tuple | ast.Set | ast.Constant):
        return Issue("ToolError", f"{tool.name}: extra_query must be a dict of query parameter names to values, "
                                  "e.g. extra_query={'filter': 'x'}", value.lineno, value.col_offset, tool.name)
    if keyword.arg == "with_headers" and isinstance(value, ast.Constant) and not isinstance(value.value, bool):
        return Issue("TypeError", f"{tool.name}(): with_headers must be True or False", value.lineno,
                     value.col_offset)
    return None


def _check_tool_call(call: ast.Call, tool: Tool, lenient: bool = False) -> list[Issue]:
    issues: list[Issue] = []
    line, col = call.lineno, call.col_offset
    params = list(tool.properties)
    if call.args:
        issues.append(Issue("ToolError", f"{tool.name}: tools take keyword arguments only; "
                                         f"call it as {_signature(tool)}", line, col, tool.name))
    has_spread = any(k.arg is None for k in call.keywords)
    for keyword in call.keywords:
        if keyword.arg in RESERVED_ARGUMENTS and keyword.arg not in tool.properties:
            found = _reserved_issue(keyword, tool)
            if found is not None:
                issues.append(found)
    if lenient:
        return issues
    aliases = tool.wire_aliases()  # the API's own names (userId for user_id) are accepted too
    given = {aliases.get(k.arg, k.arg) if k.arg not in tool.properties else k.arg
             for k in call.keywords if k.arg is not None and (k.arg not in RESERVED_ARGUMENTS or
                                                              k.arg in tool.properties)}
    missing = [p for p in tool.required if p not in given] if not has_spread and not call.args else []
    for name in sorted(given - set(params)):
        close = difflib.get_close_matches(name, params, n=1, cutoff=0.6)
        # ``id`` for ``book_id`` is too far apart for difflib, but a required one is missing:
        # that is the likely meaning. A suggested name is not reported as missing again.
        meant = close[0] if close else (missing[0] if missing else None)
        if meant in missing:
            missing.remove(meant)
        hint = f" Did you mean {meant!r}?" if meant else ""
        issues.append(Issue("ToolError", f"{tool.name}: unknown argument {name!r}.{hint} "
                                         f"Parameters: {_signature(tool)}", line, col, tool.name))
    if missing:
        issues.append(Issue("ToolError", f"{tool.name}: missing required argument(s) "
                                         f"{', '.join(repr(m) for m in missing)}. Parameters: {_signature(tool)}",
                            line, col, tool.name))
    return issues


def find_issues(program: str, tools: Mapping[str, Tool], *, lenient: frozenset[str] = frozenset()) -> list[Issue]:
    """Every static mistake in ``program`` against ``tools`` (name -> Tool), in source order;
    ``lenient`` names the tools whose arguments are not checked (validation warn/off). A program
    longer than the sandbox takes is that one mistake, found without parsing it (parsing costs
    the host hundreds of bytes per character)."""
    if len(program) > MAX_PROGRAM_CHARS:
        return [Issue("SandboxError", f"program refused by the sandbox lint: {too_long(program)}", None)]
    try:
        tree = parse(program, filename="<program>")
    except SyntaxError as exc:
        msg = exc.msg or "invalid syntax"
        return [Issue("SyntaxError", msg, exc.lineno, (exc.offset - 1) if exc.offset else None)]
    except ValueError as exc:  # e.g. null bytes in the source
        return [Issue("SyntaxError", str(exc), None)]
    own = bound_names(tree)
    tool_names = sorted(tools)
    issues: list[Issue] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        name = node.func.id
        if name in own:
            continue
        if name in tools:
            issues.extend(_check_tool_call(node, tools[name], name in lenient))
        elif name not in _BUILTINS:
            issues.append(Issue("NameError", f"name {name!r} is not defined: it is not one of the tools."
                                             f"{_suggest(name, tool_names)}", node.lineno, node.col_offset))
    issues.sort(key=lambda i: (i.line or 0, i.col or 0))
    return issues


def check_program(program: str, tools: Mapping[str, Tool], *,
                  lenient: frozenset[str] = frozenset()) -> dict[str, Any] | None:
    """The first static mistake as an error dict (shape of ``ErrorInfo.to_dict()`` plus
    ``"static": True``; the message lists up to five mistakes), or None when none is found."""
    issues = find_issues(program, tools, lenient=lenient)
    if not issues:
        return None
    first = issues[0]
    lines = program.splitlines()
    code = lines[first.line - 1] if first.line and 0 < first.line <= len(lines) else None
    message = first.message
    rest = issues[1:_MAX_REPORTED]
    if rest:
        message += "\nAlso: " + "\n      ".join(f"line {i.line}: {i.message}" for i in rest)
    return {
        "type": first.type,
        "message": message,
        "line": first.line,
        "tool": first.tool,
        "traceback": "",
        "col": first.col,
        "code": code.strip() if code else None,
        "attribution": {"reason": "found statically before running", "call_index": None,
                        "response_shape": None, "excerpt": None} if first.tool else None,
        "static": True,
    }


def check_for_run(program: str, toolset: Toolset) -> dict[str, Any] | None:
    """``check_program`` against a run's tools as its gateway treats them: the tools of a
    collection that runs with validation ``warn`` or ``off`` are ``lenient`` (the gateway sends
    their calls, so the check must not refuse them)."""
    lenient = frozenset(name for name in toolset.tools if toolset.validation_for(name) != "strict")
    return check_program(program, toolset.tools, lenient=lenient)
