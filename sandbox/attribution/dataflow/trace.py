"""The dynamic half of the data-flow analysis: from a failing expression back to tool calls.

Starting at the AST node the innermost program frame was executing, ``Tracer`` picks the
operands whose values made it fail and follows their data backwards (see the package
docstring for what it follows), using the outer frames to know which call site is running a
function and at which point an outer scope is. It gathers; ranking is attribution's job.
"""

from __future__ import annotations

import ast

from sandbox.attribution.dataflow.scopes import (
    LOOPS,
    MAX_HOPS,
    MAX_STEPS,
    Binding,
    FramePoint,
    ProgramIndex,
    Source,
    end_of,
    refers_to,
    start_of,
)

__all__ = ["Tracer"]


class Tracer:
    """Follows the data of a failing expression back to tool calls, guided by the run's frames.

    ``frames`` are the program frames of the traceback, outermost first. The innermost one
    names the failing sub-expression; each outer one names the call that led inward, which
    tells which call site's arguments a parameter really holds, and at which point of an
    outer scope (e.g. the module) a global was read.
    """

    def __init__(self, index: ProgramIndex, frames: list[FramePoint]) -> None:
        self.ix = index
        self.nodes: list[ast.AST | None] = [index.node_at(f) for f in frames]
        #: scope -> the node its frame is executing (innermost frame of that scope wins)
        self.frame_node: dict[int, ast.AST] = {}
        #: function or lambda scope -> the nodes of the next-outer frames (the calls into it),
        #: innermost first; several when the function recurses
        self.callers: dict[int, list[ast.AST]] = {}
        for i, node in enumerate(self.nodes):
            if node is None:
                continue
            scope = index.scope_of(node)
            self.frame_node[id(scope)] = node
            outer = self.nodes[i - 1] if i > 0 else None
            known = self.callers.setdefault(id(scope), [])
            if outer is not None and all(outer is not k for k in known):
                known.insert(0, outer)
        self.failing: ast.AST | None = self.nodes[-1] if self.nodes else None
        self.steps = 0
        #: the trace stopped at MAX_HOPS or MAX_STEPS somewhere: an empty result is not conclusive
        self.truncated = False
        self._best: dict[tuple[int, int], int] = {}
        self._found: dict[int, Source] = {}

    # -- entry point ------------------------------------------------------------------------

    def sources(self, error_type: str) -> list[Source]:
        """Every tool call the failing operands' data may come from (fewest hops per call),
        in discovery order. Empty: the failure does not involve tool data."""
        if self.failing is None:
            return []
        for expr, penalty in self.operands(self.failing, error_type):
            self.trace(expr, penalty, (), {})
        return list(self._found.values())

    def operands(self, node: ast.AST, error_type: str) -> list[tuple[ast.AST, int]]:
        """The expressions whose values made ``node`` fail, each with a hop penalty (a
        subscript's key is a weaker suspect than the container it indexes)."""
        ix = self.ix
        if error_type in ("NameError", "UnboundLocalError"):
            return []
        if isinstance(node, ast.Subscript):
            return [(node.value, 0), (node.slice, 1)]
        if isinstance(node, ast.Attribute):
            return [(node.value, 0)]
        if isinstance(node, ast.Call):
            if ix.is_tool_call(node):
                return [(node, 0)]
            args: list[tuple[ast.AST, int]] = [(a, 0) for a in [*node.args, *(k.value for k in node.keywords)] if not isinstance(a, ast.Lambda)]
            if isinstance(node.func, ast.Name):
                if error_type == "TypeError" and ix.functions_named(node.func.id, ix.scope_of(node)):
                    return []  # the program called its own function wrongly
                return args
            if isinstance(node.func, ast.Attribute):
                return [(node.func.value, 0), *args]
            return [(node.func, 0), *args]
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and error_type == "ZeroDivisionError":
            # only the divisor can be at fault; the dividend may well be tool data
            return [(node.right if isinstance(node, ast.BinOp) else node.value, 0)]
        if isinstance(node, (ast.For, ast.AsyncFor)):
            return [(node.iter, 0)]
        if isinstance(node, (ast.With, ast.AsyncWith)):
            return [(item.context_expr, 0) for item in node.items]
        if isinstance(node, (ast.Tuple, ast.List)) and isinstance(node.ctx, ast.Store):
            parent = ix.parent.get(id(node))
            value = getattr(parent, "value", None) or getattr(parent, "iter", None)
            return [(value, 0)] if isinstance(value, ast.AST) else []
        if isinstance(node, ast.AugAssign):
            return [(node.target, 0), (node.value, 0)]
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Expr, ast.Return)):
            return [(node.value, 0)] if node.value is not None else []
        if isinstance(node, (ast.Assert, ast.If, ast.While)):
            return [(node.test, 0)]
        if isinstance(node, ast.Raise):
            return self._raise_operands(node)
        if isinstance(node, ast.expr):
            return [(node, 0)]
        return []

    def _raise_operands(self, node: ast.Raise) -> list[tuple[ast.AST, int]]:
        """A deliberate ``raise SomeError(...)`` is the program's own decision; only a re-raise
        of a caught error (``raise``, ``raise e``, ``raise X from e``) carries a tool's fault on."""
        out: list[tuple[ast.AST, int]] = []
        if node.cause is not None:
            out.append((node.cause, 0))
        if isinstance(node.exc, ast.Name):
            out.append((node.exc, 0))
        if node.exc is None:
            handler = next((p for p in self.ix.ancestors(node) if isinstance(p, ast.ExceptHandler)), None)
            try_node = self.ix.parent.get(id(handler)) if handler is not None else None
            if handler is not None and try_node is not None:
                self._try_calls(try_node, 0, (f"the error caught at line {handler.lineno} is re-raised",))
        return out

    # -- tracing ----------------------------------------------------------------------------

    def _add(self, source: Source) -> None:
        old = self._found.get(id(source.call))
        if old is None or source.hops < old.hops:
            self._found[id(source.call)] = source

    def trace(self, expr: ast.AST, hops: int, path: tuple[str, ...], sites: dict[int, ast.Call]) -> None:
        """Record the tool calls ``expr``'s value derives from. ``sites`` maps a function the
        trace entered through its return value to the call that entered it."""
        self.steps += 1
        if self.steps > MAX_STEPS or hops > MAX_HOPS:
            self.truncated = True
            return
        ix = self.ix
        tool = ix.is_tool_call(expr)
        if tool is not None:
            self._add(Source(tool, expr, hops, path))  # type: ignore[arg-type]
            return
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Name):
                funcs = ix.functions_named(func.id, ix.scope_of(expr))
                if funcs:
                    for f in funcs:
                        for ret in ix.returns_of(f):
                            step = f"{func.id}(...) at line {expr.lineno} returns `{ix.segment(ret)}` (line {ret.lineno})"
                            self.trace(ret, hops + 1, (*path, step), {**sites, id(f): expr})
                    return
            else:
                self.trace(func.value if isinstance(func, ast.Attribute) else func, hops, path, sites)
            for arg in [*expr.args, *(k.value for k in expr.keywords)]:
                if not isinstance(arg, ast.Lambda):
                    self.trace(arg, hops, path, sites)
        elif isinstance(expr, ast.Name):
            self._name(expr, hops, path, sites)
        elif isinstance(expr, (ast.Subscript, ast.Attribute)):
            self.trace(expr.value, hops, path, sites)
        elif isinstance(expr, (ast.Lambda, ast.Constant)):
            return
        elif isinstance(expr, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            self.trace(expr.elt, hops, path, sites)
        elif isinstance(expr, ast.DictComp):
            self.trace(expr.key, hops, path, sites)
            self.trace(expr.value, hops, path, sites)
        else:
            for child in ast.iter_child_nodes(expr):
                if isinstance(child, ast.expr) and not (isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store)):
                    self.trace(child, hops, path, sites)

    def _name(self, node: ast.Name, hops: int, path: tuple[str, ...], sites: dict[int, ast.Call]) -> None:
        scope = self.ix.scope_of(node)
        def_scope, binds = self.ix.resolve(node.id, scope)
        if not binds:
            return
        if def_scope is scope:
            reaching = self.reaching(binds, node)
        elif id(def_scope) in self.frame_node:
            # a global (or closure variable) read inside a function: what reaches the point where
            # the outer frame is right now
            reaching = self.reaching(binds, self.frame_node[id(def_scope)])
        else:
            reaching = binds
        for b in reaching:
            self._binding(b, hops + 1, path, sites)

    def _try_calls(self, try_node: ast.AST, hops: int, path: tuple[str, ...]) -> None:
        for stmt in getattr(try_node, "body", []):
            for n in ast.walk(stmt):
                tool = self.ix.is_tool_call(n)
                if tool is not None:
                    self._add(Source(tool, n, hops, path))  # type: ignore[arg-type]

    def _binding(self, b: Binding, hops: int, path: tuple[str, ...], sites: dict[int, ast.Call]) -> None:
        ix = self.ix
        site = sites.get(id(b.scope))
        key = (id(b), id(site))
        if hops > MAX_HOPS:
            self.truncated = True
            return
        if self._best.get(key, MAX_HOPS + 1) <= hops:
            return
        self._best[key] = hops
        line = getattr(b.node, "lineno", 0)
        if b.kind in ("param", "lambda-param"):
            self._parameter(b, hops, path, sites)
        elif b.kind == "except" and b.value is not None:
            self._try_calls(b.value, hops, (*path, f"`{b.name}` is the error caught at line {line}"))
        elif b.value is not None:
            verb = {"for": "iterates over", "comprehension": "iterates over", "with": "is opened from",
                    "mutation": "is filled with", "augassign": "is extended with"}.get(b.kind, "=")
            step = f"`{b.name}` {verb} `{ix.segment(b.value)}` (line {line})"
            self.trace(b.value, hops, (*path, step), sites)

    def _parameter(self, b: Binding, hops: int, path: tuple[str, ...], sites: dict[int, ast.Call]) -> None:
        """A parameter holds the argument of the call that runs the function: the one the trace
        came through, else the ones the next-outer frames are executing (a recursive function
        has several: its own call and the first call from outside), else every call site."""
        ix, func = self.ix, b.scope
        site = sites.get(id(func))
        running = [site] if site is not None else self.callers.get(id(func), [])
        calls = ix.calls_of(func)
        chosen = [(c, how) for r in running for c, how in calls if c is r]
        calls = chosen or calls
        for call, how in calls:
            where = f"`{ix.segment(call, 40)}` (line {call.lineno})"
            if how == "direct":
                args = _argument_for(func, call, b.name)
            elif how == "method" and isinstance(call.func, ast.Attribute):
                args = _argument_for(func, call, b.name, receiver=call.func.value)
            else:
                name = getattr(func, "name", None)
                args = [a for a in [*call.args, *(k.value for k in call.keywords)] if not refers_to(a, func, name)]
            for arg in args:
                text = f"`{ix.segment(arg, 40)}`"
                if how == "passed":
                    step = f"`{b.name}` is an item of {text} handed to {where}"
                elif self.within(arg, call):
                    step = f"`{b.name}` is the argument {text} of {where}"
                else:
                    step = f"`{b.name}` has its default value {text}, as {where} passes none"
                self.trace(arg, hops, (*path, step), sites)

    # -- reaching definitions ---------------------------------------------------------------

    def within(self, node: ast.AST, container: ast.AST) -> bool:
        return node is container or any(p is container for p in self.ix.ancestors(node))

    def reaching(self, binds: list[Binding], use: ast.AST) -> list[Binding]:
        """The bindings whose value ``use`` may see: the last binding that surely ran before it
        in straight-line order, plus later conditional ones, plus those carried around a loop
        that contains the use. Falls back to all bindings when none precedes the use."""
        ix = self.ix
        chain = [use, *ix.ancestors(use)]
        chain_ids = {id(n) for n in chain}
        block_index: dict[tuple[int, str], int] = {}
        for n in chain:
            parent = ix.parent.get(id(n))
            if parent is None:
                continue
            for fname, value in ast.iter_fields(parent):
                if isinstance(value, list):
                    for i, item in enumerate(value):
                        if item is n:
                            block_index[(id(parent), fname)] = i
        loops = [n for n in chain if isinstance(n, LOOPS)]
        start = start_of(use)
        preceding: list[Binding] = []
        carried: list[tuple[Binding, ast.AST]] = []
        for b in binds:
            in_chain = id(b.stmt) in chain_ids
            if b.kind == "walrus":
                if end_of(b.node) <= start:
                    preceding.append(b)
                    continue
            elif in_chain:
                if b.kind == "for" and self.within(use, b.stmt.iter):  # type: ignore[attr-defined]
                    continue
                if b.kind == "with" and any(self.within(use, it.context_expr) for it in b.stmt.items):  # type: ignore[attr-defined]
                    continue
                if b.kind not in ("assign", "augassign", "mutation"):
                    preceding.append(b)
                continue
            elif end_of(b.stmt) <= start:
                preceding.append(b)
                continue
            loop = next((lp for lp in loops if self.within(b.stmt, lp)), None)
            if loop is not None:
                carried.append((b, loop))

        def dominates(b: Binding) -> bool:
            if not b.strong:
                return False
            if id(b.stmt) in chain_ids:
                return True
            parent = ix.parent.get(id(b.stmt))
            for fname, value in ast.iter_fields(parent) if parent is not None else ():
                if isinstance(value, list):
                    for i, item in enumerate(value):
                        if item is b.stmt:
                            return block_index.get((id(parent), fname), -1) > i
            return False

        dominant = [b for b in preceding if dominates(b)]
        if not dominant:
            result = preceding + [b for b, _ in carried]
            return result or list(binds)
        last = max(dominant, key=lambda b: start_of(b.node))
        result = [last] + [b for b in preceding if b is not last and start_of(b.node) > start_of(last.node)]
        result += [b for b, loop in carried if not self.within(last.stmt, loop)]
        return result


def _argument_for(func: ast.AST, call: ast.Call, param: str, *, receiver: ast.expr | None = None) -> list[ast.expr]:
    """The argument expression(s) of ``call`` that parameter ``param`` of ``func`` receives
    (a default value when the call omits it). ``receiver``: a method call's object, which the
    first parameter (``self``) receives."""
    a: ast.arguments = func.args  # type: ignore[attr-defined]
    positional = [*a.posonlyargs, *a.args]
    names = [p.arg for p in positional]
    for kw in call.keywords:
        if kw.arg == param:
            return [kw.value]
    starred = [x.value for x in call.args if isinstance(x, ast.Starred)]
    if param in names:
        i = names.index(param)
        plain = [x for x in call.args if not isinstance(x, ast.Starred)]
        if receiver is not None:
            plain.insert(0, receiver)
        if starred:
            return [*plain, *starred]
        if i < len(plain):
            return [plain[i]]
        j = i - (len(positional) - len(a.defaults))
        unnamed = [kw.value for kw in call.keywords if kw.arg is None]
        return [a.defaults[j]] if j >= 0 else unnamed
    if a.vararg is not None and param == a.vararg.arg:
        return [*call.args[max(0, len(positional) - (receiver is not None)):], *starred]
    if a.kwarg is not None and param == a.kwarg.arg:
        known = set(names) | {p.arg for p in a.kwonlyargs}
        return [kw.value for kw in call.keywords if kw.arg not in known]
    for p, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        if p.arg == param:
            unnamed = [kw.value for kw in call.keywords if kw.arg is None]
            return unnamed or ([default] if default is not None else [])
    return []
