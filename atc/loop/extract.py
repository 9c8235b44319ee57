"""Getting the program out of a model's reply.

Models wrap code in many ways: a fenced ```python block (the rules ask for that), an unlabeled
fence, ``~~~``, several blocks with prose between them, a fence the model never closed because
its output was cut, a reply that is only code, or code after a sentence of prose. Reasoning
models may also put a ``<think>...</think>`` section first; it is dropped.

Several Python blocks: the choice is the LAST block that is a program on its own (it parses and
every name it uses is a builtin, a tool, or bound in it), because models that show a first draft
and then "the corrected version" put the version they mean last. When the last block is not
self-contained but all blocks joined are (the model wrote the program in parts: helpers first, main
part later), the joined text is the program. Failing both, the last block that parses; failing
that, the last block, so the syntax error is reported to the model like any other.

``None`` means the reply holds no program (reported to the model as ``NoProgram``).
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
from collections.abc import Iterable

from sandbox.pyparse import parse

__all__ = ["extract_program", "free_names", "bound_names"]

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+.-]*)[^\n]*\n", re.MULTILINE)
_PY_LANGS = frozenset({"", "python", "py", "python3", "py3", "python 3"})
_BUILTINS = frozenset(dir(builtins)) | {"ToolError", "__name__", "__file__"}
_MAX_PARSES = 120
# A line that can start a program, used to find code after prose in a reply without fences.
_CODE_START = re.compile(r"^(?:[A-Za-z_][\w.]*\s*(?:=|\(|\[|\+=|:)|(?:def|class|for|while|if|try|with|import|from|print|return|async)\b|#|@)")


def _blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of each fenced block, in order; an unclosed last fence runs to the end."""
    out: list[tuple[str, str]] = []
    pos = 0
    while True:
        m = _FENCE.search(text, pos)
        if not m:
            return out
        fence = m.group("fence")
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        end = close.search(text, m.end())
        body = text[m.end(): end.start() if end else len(text)]
        out.append((m.group("lang").lower(), textwrap.dedent(body)))
        if not end:
            return out
        pos = end.end()


def _parses(code: str) -> ast.Module | None:
    try:
        return parse(code)
    except (SyntaxError, ValueError):
        return None


def bound_names(tree: ast.AST) -> set[str]:
    """Every name the code binds anywhere: assignments, loop and ``with`` targets, functions,
    classes, their parameters, imports, ``except ... as``, comprehension variables, match captures."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
    return names


def free_names(tree: ast.AST, known: Iterable[str] = ()) -> set[str]:
    """Names the code reads but neither binds nor gets from builtins or ``known`` (tool names)."""
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded - bound_names(tree) - _BUILTINS - set(known)


def _is_program(tree: ast.Module) -> bool:
    """Code that does something: at least one call or statement beyond a bare name or constant
    (a one-word prose reply such as ``Sorry`` parses as Python too)."""
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            return True
        if any(isinstance(n, ast.Call) for n in ast.walk(stmt)):
            return True
    return False


def _choose(bodies: list[str], tools: set[str]) -> str:
    parsed = [(b, _parses(b)) for b in bodies]
    last, last_tree = parsed[-1]
    if last_tree is not None and not free_names(last_tree, tools):
        return last
    joined = "\n\n".join(b.rstrip() for b in bodies)
    joined_tree = _parses(joined)
    if joined_tree is not None and not free_names(joined_tree, tools):
        return joined
    for body, tree in reversed(parsed):
        if tree is not None:
            return body
    return last


def _unfenced(text: str) -> str | None:
    """Code in a reply without fences: the whole reply, or the longest stretch from a line that
    looks like code to the end (or to the last line that keeps it parsing)."""
    tree = _parses(text)
    if tree is not None and _is_program(tree):
        return text
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _CODE_START.match(line)][:40]
    budget = _MAX_PARSES  # a long prose reply must not cost seconds of parsing
    for i in starts:
        for j in range(len(lines), i, -1):
            candidate = "\n".join(lines[i:j])
            tree = _parses(candidate)
            if tree is not None and _is_program(tree):
                return candidate
            budget -= 1
            if budget <= 0:
                return None
            if len(lines) - j > 40:
                break
    return None


def extract_program(reply: str, tools: Iterable[str] = ()) -> str | None:
    """The program in ``reply`` (see the module docstring for the rules), or None."""
    text = _THINK.sub("", reply or "").strip()
    if not text:
        return None
    blocks = _blocks(text)
    python = [body for lang, body in blocks if lang in _PY_LANGS and body.strip()]
    if not python:
        # A fence labelled with another language may still hold Python (``text``, ``python-repl``);
        # take such blocks only when they parse as a program.
        python = [body for _, body in blocks if (t := _parses(body)) is not None and _is_program(t)]
    program: str | None
    if python:
        program = _choose([b.strip("\n") for b in python], set(tools))
    elif blocks:
        return None
    else:
        program = _unfenced(text)
    if program is None:
        return None
    program = program.strip("\n")
    return program + "\n" if program.strip() else None
