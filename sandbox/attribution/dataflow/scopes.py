"""The static half of the data-flow analysis: parents, scopes and name bindings of a program.

``ProgramIndex`` parses a program once and answers the questions the tracer asks: which AST
node a traceback frame is executing (from Python's line and column positions), which scope a
node's names are looked up in (with Python's rules: defaults and a comprehension's first
iterable belong to the enclosing scope, class bodies are invisible to nested functions,
``global``/``nonlocal`` redirect), where each name gets its values (``Binding``), whether a call
is a call of a tool, and which calls run a function of the program.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from sandbox.pyparse import parse

__all__ = ["Source", "Binding", "ProgramIndex", "FramePoint", "MAX_HOPS", "MAX_STEPS", "LOOPS",
           "start_of", "end_of", "refers_to"]

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef) + _COMPS
LOOPS = (ast.For, ast.AsyncFor, ast.While)
#: Methods that put their arguments into the receiver: the receiver's data then comes from them.
_MUTATORS = frozenset({"append", "extend", "insert", "update", "add", "setdefault", "appendleft"})
_NEWLINE = re.compile(r"\r\n|\r|\n")
#: Hops beyond which a path is not followed (a safety net for pathological programs).
MAX_HOPS = 25
#: Trace steps per analysis; the programs are short, this only bounds adversarial ones.
MAX_STEPS = 20_000


def start_of(node: ast.AST) -> tuple[int, int]:
    """(line, column) where a node starts; (0, 0) for nodes without positions."""
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def end_of(node: ast.AST) -> tuple[int, int]:
    """(line, column) where a node ends; (0, 0) for nodes without positions."""
    return (getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0)


@dataclass(frozen=True)
class FramePoint:
    """One program frame of the traceback: its function name and the span being executed."""

    name: str
    lineno: int | None
    end_lineno: int | None
    col: int | None
    end_col: int | None


@dataclass
class Binding:
    """A place where a name gets a value. ``value`` is the expression the value derives from;
    ``strong`` bindings replace the old value (and so kill earlier ones), weak ones (``+=``,
    ``xs.append(v)``, ``d[k] = v``) add to it."""

    name: str
    kind: str
    node: ast.AST
    stmt: ast.AST
    value: ast.AST | None
    strong: bool
    scope: ast.AST


@dataclass(frozen=True)
class Source:
    """A tool call the failing data may come from."""

    tool: str
    call: ast.Call
    hops: int
    path: tuple[str, ...] = field(default=())

    @property
    def line(self) -> int:
        return self.call.lineno

    @property
    def col(self) -> int:
        return self.call.col_offset


class ProgramIndex:
    """Parents, scopes and name bindings of one program, computed once."""

    def __init__(self, source: str, tool_names: Iterable[str]) -> None:
        self.source = source
        self.tree = parse(source, filename="<program>")
        self.tool_names = frozenset(tool_names)
        self.parent: dict[int, ast.AST] = {}
        #: every node with its depth, in one walk (the later passes reuse it instead of walking again)
        self.nodes: list[tuple[int, ast.AST]] = []
        stack: list[tuple[int, ast.AST]] = [(0, self.tree)]
        while stack:
            depth, node = stack.pop()
            self.nodes.append((depth, node))
            for child in ast.iter_child_nodes(node):
                self.parent[id(child)] = node
                stack.append((depth + 1, child))
        self._scope: dict[int, ast.AST] = {}
        self._lines: list[bytes] | None = None
        self._calls_of: dict[int, list[tuple[ast.Call, str]]] = {}
        self._returns_of: dict[int, list[ast.expr]] = {}
        self.declared: dict[tuple[int, str], str] = {}
        self.bindings: dict[tuple[int, str], list[Binding]] = {}
        self._collect()

    # -- structure --------------------------------------------------------------------------

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        cur = self.parent.get(id(node))
        while cur is not None:
            yield cur
            cur = self.parent.get(id(cur))

    def scope_of(self, node: ast.AST) -> ast.AST:
        """The scope a node's names are looked up in. Default values, decorators and the first
        iterable of a comprehension are evaluated in the enclosing scope, as in Python."""
        key = id(node)
        if key in self._scope:
            return self._scope[key]
        child, escape = node, False
        result: ast.AST = self.tree
        for p in self.ancestors(node):
            if isinstance(p, ast.arguments) and (child in p.defaults or child in p.kw_defaults):
                escape = True
            elif isinstance(p, ast.comprehension) and child is p.iter:
                comp = self.parent.get(id(p))
                if isinstance(comp, _COMPS) and comp.generators and comp.generators[0] is p:
                    escape = True
            elif isinstance(p, _SCOPES) and not isinstance(p, ast.Module):
                inner = (
                    (isinstance(p, (*_FUNCS, ast.ClassDef)) and child in p.body)
                    or (isinstance(p, _FUNCS + (ast.Lambda,)) and child is p.args)
                    or (isinstance(p, ast.Lambda) and child is p.body)
                    or isinstance(p, _COMPS)
                )
                if inner and not escape:
                    result = p
                    break
                if inner:
                    escape = False
            child = p
        self._scope[key] = result
        return result

    def enclosing_scope(self, scope: ast.AST) -> ast.AST | None:
        return None if isinstance(scope, ast.Module) else self.scope_of(scope)

    def statement_of(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.stmt):
            return node
        for p in self.ancestors(node):
            if isinstance(p, ast.stmt):
                return p
        return self.tree

    def segment(self, node: ast.AST, limit: int = 60) -> str:
        """The source text of ``node`` on one line, shortened to ``limit`` characters."""
        text = self._source_of(node)
        if not text:
            try:
                text = ast.unparse(node)
            except Exception:  # synthesized or odd nodes: a label is enough for a reason text
                text = type(node).__name__
        text = " ".join(text.split())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def _source_of(self, node: ast.AST) -> str | None:
        """Like ``ast.get_source_segment`` (UTF-8 byte columns), with the lines split once."""
        first: int | None = getattr(node, "lineno", None)
        last: int | None = getattr(node, "end_lineno", None)
        col: int | None = getattr(node, "col_offset", None)
        end_col: int | None = getattr(node, "end_col_offset", None)
        if first is None or last is None or col is None or end_col is None:
            return None
        if self._lines is None:
            self._lines = [line.encode("utf-8") for line in _NEWLINE.split(self.source)]
        if not 0 < first <= last <= len(self._lines):
            return None
        if first == last:
            return self._lines[first - 1][col:end_col].decode("utf-8", "replace")
        parts = [self._lines[first - 1][col:], *self._lines[first:last - 1], self._lines[last - 1][:end_col]]
        return b"\n".join(parts).decode("utf-8", "replace")

    def node_at(self, point: FramePoint) -> ast.AST | None:
        """The AST node a frame is executing: the deepest node with exactly that span, else the
        smallest node enclosing it, else the innermost statement starting on that line."""
        if point.lineno is None:
            return None
        scope_name = point.name
        exact: list[tuple[int, ast.AST]] = []
        enclosing: list[tuple[tuple[int, int], ast.AST]] = []
        line_stmts: list[ast.AST] = []
        for depth, node in self.nodes:
            if not hasattr(node, "lineno"):
                continue
            if isinstance(node, ast.stmt) and node.lineno == point.lineno:
                line_stmts.append(node)
            if point.col is None or point.end_col is None:
                continue
            start, end = start_of(node), end_of(node)
            want_start = (point.lineno, point.col)
            want_end = (point.end_lineno or point.lineno, point.end_col)
            if start == want_start and end == want_end:
                exact.append((depth, node))
            elif start <= want_start and end >= want_end:
                span = (end[0] - start[0], end[1] - start[1] if end[0] == start[0] else 10**6)
                enclosing.append((span, node))

        def in_frame(n: ast.AST) -> bool:
            s = self.scope_of(n)
            name = getattr(s, "name", None) or {
                ast.Module: "<module>", ast.Lambda: "<lambda>", ast.ListComp: "<listcomp>",
                ast.SetComp: "<setcomp>", ast.DictComp: "<dictcomp>", ast.GeneratorExp: "<genexpr>",
            }.get(type(s), "")
            return name == scope_name

        for pool in ([n for _, n in sorted(exact, key=lambda e: -e[0])],
                     [n for _, n in sorted(enclosing, key=lambda e: e[0])]):
            preferred = [n for n in pool if in_frame(n)] or pool
            if preferred:
                return preferred[0]
        return line_stmts[-1] if line_stmts else None

    # -- bindings ---------------------------------------------------------------------------

    def _collect(self) -> None:
        for _, node in self.nodes:
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                scope = self.scope_of(node)
                for name in node.names:
                    self.declared[(id(scope), name)] = "global" if isinstance(node, ast.Global) else "nonlocal"
        for _, node in self.nodes:
            self._bindings_of(node)
        for binds in self.bindings.values():
            binds.sort(key=lambda b: start_of(b.node))

    def _add(self, name: str, kind: str, node: ast.AST, stmt: ast.AST, value: ast.AST | None,
             strong: bool, scope: ast.AST | None = None) -> None:
        scope = scope if scope is not None else self.scope_of(node)
        decl = self.declared.get((id(scope), name))
        if decl == "global":
            scope = self.tree
        elif decl == "nonlocal":
            outer = self.enclosing_scope(scope)
            while outer is not None and not isinstance(outer, (*_FUNCS, ast.Module)):
                outer = self.enclosing_scope(outer)
            scope = outer or self.tree
        self.bindings.setdefault((id(scope), name), []).append(
            Binding(name, kind, node, stmt, value, strong, scope))

    def _target(self, target: ast.AST, value: ast.AST, stmt: ast.AST, kind: str, strong: bool,
                scope: ast.AST | None = None) -> None:
        if isinstance(target, ast.Name):
            self._add(target.id, kind, target, stmt, value, strong, scope)
        elif isinstance(target, (ast.Tuple, ast.List)):
            pairwise = (isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
                        and not any(isinstance(e, ast.Starred) for e in [*value.elts, *target.elts]))
            for i, elt in enumerate(target.elts):
                sub = value.elts[i] if pairwise and isinstance(value, (ast.Tuple, ast.List)) else value
                self._target(elt, sub, stmt, kind, strong, scope)
        elif isinstance(target, ast.Starred):
            self._target(target.value, value, stmt, kind, strong, scope)
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            root = _root_name(target)
            if root is not None:
                self._add(root.id, "mutation", root, stmt, value, False, scope)

    def _bindings_of(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                self._target(t, node.value, node, "assign", True)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self._target(node.target, node.value, node, "assign", True)
        elif isinstance(node, ast.AugAssign):
            self._target(node.target, node.value, node, "augassign", False)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self._target(node.target, node.iter, node, "for", True)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    self._target(item.optional_vars, item.context_expr, node, "with", True)
        elif isinstance(node, ast.NamedExpr):
            scope = self.scope_of(node)
            while isinstance(scope, _COMPS):
                scope = self.scope_of(scope)
            self._target(node.target, node.value, self.statement_of(node), "walrus", True, scope)
        elif isinstance(node, _COMPS):
            for gen in node.generators:
                self._target(gen.target, gen.iter, node, "comprehension", True, node)
        elif isinstance(node, (*_FUNCS, ast.Lambda)):
            if not isinstance(node, ast.Lambda):
                self._add(node.name, "def", node, node, None, True, self.scope_of(node))
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                if arg is not None:
                    kind = "lambda-param" if isinstance(node, ast.Lambda) else "param"
                    self._add(arg.arg, kind, arg, node, None, True, node)
        elif isinstance(node, ast.ClassDef):
            self._add(node.name, "def", node, node, None, True, self.scope_of(node))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                self._add(alias.asname or alias.name.split(".")[0], "import", node, node, None, True)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self._add(node.name, "except", node, node, self.parent.get(id(node)), True)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Attribute) and call.func.attr in _MUTATORS:
                root = _root_name(call.func.value)
                if root is not None:
                    args = ast.Tuple(elts=[*call.args, *(k.value for k in call.keywords)], ctx=ast.Load())
                    ast.copy_location(args, call)
                    self._add(root.id, "mutation", root, node, args, False)

    def resolve(self, name: str, scope: ast.AST) -> tuple[ast.AST, list[Binding]]:
        """The scope that defines ``name`` as seen from ``scope``, and its bindings there
        (Python's rules: local if bound anywhere in the scope, class bodies invisible to nested
        functions, then globals; no bindings means a builtin or an undefined name)."""
        if self.declared.get((id(scope), name)) == "global":
            return self.tree, self.bindings.get((id(self.tree), name), [])
        cur: ast.AST | None = scope
        first = True
        while cur is not None:
            if first or not isinstance(cur, ast.ClassDef):
                binds = self.bindings.get((id(cur), name))
                if binds:
                    return cur, binds
            first = False
            cur = self.enclosing_scope(cur)
        return self.tree, []

    def is_tool_call(self, node: ast.AST) -> str | None:
        """The tool name when ``node`` calls a tool (a tool global the program did not rebind)."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.tool_names:
            _, binds = self.resolve(node.func.id, self.scope_of(node))
            if not binds:
                return node.func.id
        return None

    def functions_named(self, name: str, scope: ast.AST) -> list[ast.AST]:
        """The program's own functions (defs and lambdas assigned to a name) ``name`` may call."""
        _, binds = self.resolve(name, scope)
        out: list[ast.AST] = []
        for b in binds:
            if b.kind == "def" and isinstance(b.node, _FUNCS):
                out.append(b.node)
            elif b.kind == "assign" and isinstance(b.value, ast.Lambda):
                out.append(b.value)
        return out

    def returns_of(self, func: ast.AST) -> list[ast.expr]:
        if id(func) not in self._returns_of:
            self._returns_of[id(func)] = [func.body] if isinstance(func, ast.Lambda) else [
                n.value for n in ast.walk(func)
                if isinstance(n, ast.Return) and n.value is not None and self.scope_of(n) is func]
        return self._returns_of[id(func)]

    def calls_of(self, func: ast.AST) -> list[tuple[ast.Call, str]]:
        """Calls that run ``func``: ``(call, "direct")`` by name, ``(call, "method")`` as
        ``obj.name(...)`` for a function defined in a class body, or ``(call, "passed")`` when the
        function is handed to another callable (``map(f, xs)``, ``sorted(xs, key=f)``)."""
        if id(func) not in self._calls_of:
            self._calls_of[id(func)] = self._find_calls(func)
        return self._calls_of[id(func)]

    def _find_calls(self, func: ast.AST) -> list[tuple[ast.Call, str]]:
        name = getattr(func, "name", None)
        if name is None and isinstance(func, ast.Lambda):
            parent = self.parent.get(id(func))
            if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
                name = parent.targets[0].id
        method = isinstance(func, _FUNCS) and isinstance(self.parent.get(id(func)), ast.ClassDef)
        out: list[tuple[ast.Call, str]] = []
        for _, node in self.nodes:
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name) and name is not None and node.func.id == name:
                out.append((node, "direct"))
            elif method and isinstance(node.func, ast.Attribute) and node.func.attr == name:
                out.append((node, "method"))
            elif any(refers_to(a, func, name) for a in [*node.args, *(k.value for k in node.keywords)]):
                out.append((node, "passed"))
        return out


def refers_to(expr: ast.AST, func: ast.AST, name: str | None) -> bool:
    """Whether ``expr`` is the function ``func`` itself or its name."""
    return expr is func or (name is not None and isinstance(expr, ast.Name) and expr.id == name)


def _root_name(node: ast.AST) -> ast.Name | None:
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node if isinstance(node, ast.Name) else None


