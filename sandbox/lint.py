"""A guard in front of the sandbox: refuse programs that reach for Python's internals.

This is a lint, not the boundary (the boundary is the process jail or the container). It catches
the classic escapes from restricted Python early and with a clear message and line:
attribute access to dunder names (``().__class__.__subclasses__()``), frame and code
inspection attributes (``gi_frame``, ``tb_frame``, ``f_back``, ``f_globals``...),
``getattr(x, "__...")`` with a literal name, and ``str.format`` field traversal
(``"{0.__class__}".format(x)``). RestrictedPython's compiler does the attribute checks; the
program is then run as NORMAL Python, so its semantics stay plain.

Only the RestrictedPython complaints about attributes and dunder names are kept: the ones about
``_private`` or dunder variable names (``def __str__``) and ``exec`` are about RestrictedPython's
own runtime and would reject ordinary programs.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from sandbox.pyparse import parse

__all__ = ["LintIssue", "lint", "too_long", "INSPECTION_NAMES", "SAFE_DUNDER_ATTRIBUTES", "MAX_PROGRAM_CHARS"]

#: Longest program the sandbox takes (a generated program is a few kilobytes). The lint runs on
#: the host before the run's clock starts, and parsing costs the host up to ~900 bytes of memory
#: and ~10 microseconds of CPU per character (measured: benchmarks/RESULTS.md, issue #20): at this
#: size, at most ~60 MB and well under a second, whatever the program's shape.
MAX_PROGRAM_CHARS = 64_000


def too_long(program: str) -> str:
    """Why a program over ``MAX_PROGRAM_CHARS`` is refused (without looking inside it)."""
    return (f"the program is {len(program)} characters long; the sandbox runs programs of at most "
            f"{MAX_PROGRAM_CHARS} characters (put data in tool calls or files, not in the program's text)")

#: Attributes that lead from an object to frames, code or globals.
INSPECTION_NAMES = frozenset({
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code",
    "tb_frame", "tb_next", "tb_lasti", "f_back", "f_globals", "f_locals", "f_builtins", "f_code",
    "f_trace", "co_code", "co_consts", "func_globals", "mro",
})
_GETATTR_LIKE = frozenset({"getattr", "setattr", "delattr", "hasattr"})
_FORMAT_TRAVERSAL = re.compile(r"\{[^{}]*?[.\[](__|" + "|".join(sorted(INSPECTION_NAMES)) + r")")
_RP_LINE = re.compile(r"^Line (\d+): (.*)$")
#: Names whose only use is reaching behind the program's globals. Other dunder names are fine:
#: ``def __str__(self)``, ``if __name__ == "__main__"``.
_DENIED_DUNDER_NAMES = frozenset({"__builtins__", "__loader__", "__spec__"})
#: Dunder attributes that ordinary programs use (``type(e).__name__``, ``super().__init__``) and
#: that lead nowhere: they are names and strings, or a method of the program's own class.
SAFE_DUNDER_ATTRIBUTES = frozenset({"__name__", "__qualname__", "__doc__", "__module__", "__init__",
                                    "__dict__", "__len__", "__iter__", "__next__", "__enter__", "__exit__"})


@dataclass(frozen=True)
class LintIssue:
    """Why a program was refused, and where (1-based line, None when unknown)."""

    message: str
    line: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"message": self.message, "line": self.line}


def _restricted_python(tree: ast.Module) -> LintIssue | None:
    """RestrictedPython's complaints about ``tree`` (its node transformer only: what it would
    compile is never used, and the tree is parsed once). The transformer rewrites ``tree``."""
    try:
        from RestrictedPython.transformer import RestrictingNodeTransformer  # lazy: ~15 ms, at the first lint
    except ImportError:  # pragma: no cover - a declared dependency; the AST checks still run
        return None
    errors: list[str] = []
    try:
        RestrictingNodeTransformer(errors, [], {}).visit(tree)
    except Exception:  # RestrictedPython itself choking (a recursion on a deep tree) is not the program's fault
        return None
    for text in errors:
        m = _RP_LINE.match(text)
        line, detail = (int(m.group(1)), m.group(2)) if m else (None, text)
        name = detail.split('"')[1] if '"' in detail else ""
        if "restricted name" in detail or ("invalid attribute name" in detail and name.startswith("__")
                                          and name not in SAFE_DUNDER_ATTRIBUTES):
            return LintIssue(detail, line)
        if "invalid variable name" in detail and name in _DENIED_DUNDER_NAMES:
            return LintIssue(detail, line)
    return None


def _forbidden(attr: str) -> bool:
    return attr in INSPECTION_NAMES or (attr.startswith("__") and attr not in SAFE_DUNDER_ATTRIBUTES)


def _ast_checks(tree: ast.AST) -> LintIssue | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _forbidden(node.attr):
            return LintIssue(f'"{node.attr}" is an attribute programs may not access', node.lineno)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _GETATTR_LIKE
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)):
            attr = node.args[1].value
            if _forbidden(attr):
                return LintIssue(f'{node.func.id}(..., "{attr}") reaches for an attribute programs may not access',
                                 node.lineno)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _FORMAT_TRAVERSAL.search(node.value):
            return LintIssue("format strings may not traverse to private or frame attributes",
                             getattr(node, "lineno", None))
    return None


def lint(program: str) -> LintIssue | None:
    """The first reason to refuse ``program``, or None. Syntax errors are NOT reported here (the
    runner reports them like Python does)."""
    if len(program) > MAX_PROGRAM_CHARS:
        return LintIssue(too_long(program), None)
    try:
        tree = parse(program, filename="<program>")
    except (SyntaxError, ValueError):
        return None
    except (RecursionError, MemoryError):
        # CPython's parser gives up on deep nesting this way ("x" + ".y" * 10**5, "-" * 10**5 + "1"):
        # refuse here rather than let it escape as a crash of the host.
        return LintIssue("the program nests expressions too deeply for Python to compile", None)
    return _ast_checks(tree) or _restricted_python(tree)
