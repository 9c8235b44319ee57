"""The architecture is what the folder tree says: layers import downward only.

    protocols  <-  sandbox  <-  atc  <-  probes

Every ``import`` of every module counts, also the lazy ones inside functions: a lazy upward import
is still an upward dependency. Two places sit above all layers and may import any of them: the
command line (``atc/cli/``), which is the application shell, and the lazy facade
``atc/__init__.py`` (which maps names to modules by string). The in-sandbox files (runner, jail,
seccomp) and the fork servers (zygote, container server) must import nothing of the project at all:
they run alone under a bare interpreter.

The import graph of the four packages has no circle, counting every import alike: top level,
inside functions and under ``if TYPE_CHECKING:`` (a circle closed lazily is still a circle: neither
module can be read, tested or moved without the other). ``from pkg import name`` counts as an
import of ``pkg.name`` when that is a module.

Imports of the project's own modules sit at module top level. A function-level one is allowed
only in the shell (``atc/cli/``, ``atc/__init__.py``) or when a comment on its line, or the
comment lines right above it (or above the run of imports it belongs to), says why with the word
"lazy" -- e.g. ``# lazy: sandbox.gateway.http.transport brings httpx, which a run with no call never
needs``. The reason is then a cost a test or a benchmark can see, never an import circle.

The README's architecture table must name exactly the packages that exist.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("protocols", "sandbox", "atc", "probes")
SHELL = ("atc/cli/", "atc/__init__.py")
#: Files that run alone under a bare interpreter (``python3 -I -S``): in the sandbox, or as its
#: fork servers (the local backend's zygote, the Docker container's server).
#: Every file of sandbox/inside/ (its __init__ only names their paths for the host).
STANDALONE = tuple(sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "sandbox" / "inside").glob("*.py")
                          if p.name != "__init__.py"))


def _modules() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py") if "__pycache__" not in p.parts)


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The file's syntax tree, parsed once for every test of this module."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _module_name(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def _import_nodes(path: Path, root: Path = ROOT) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement of the file (lazy ones included) with the absolute name of the module
    it names (``from . import x``: the package)."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found: list[tuple[ast.Import | ast.ImportFrom, str]] = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found.extend((node, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node, module))
    return found


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, lazy ones included."""
    return [(node.lineno, module) for node, module in _import_nodes(path)]


def _layer(module: str) -> int | None:
    top = module.split(".")[0]
    return LAYERS.index(top) if top in LAYERS else None


def test_the_layers_cover_the_code() -> None:
    assert len(_modules()) > 40  # the walk finds the packages (a broken walk would pass everything)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_imports_from_a_layer_above_it(path: Path) -> None:
    rel = path.relative_to(ROOT).as_posix()
    if rel.startswith(SHELL):
        return
    own = LAYERS.index(rel.split("/")[0])
    upward = [f"line {line}: {module}" for line, module in _imports(path)
              if (layer := _layer(module)) is not None and layer > own]
    assert not upward, f"{rel} ({LAYERS[own]}) imports from a layer above it: {upward}"


def test_the_in_sandbox_room_holds_the_files_that_run_alone() -> None:
    assert {Path(s).name for s in STANDALONE} >= {"runner.py", "jail.py", "seccomp.py", "zygote.py",
                                                  "container_server.py"}


@pytest.mark.parametrize("rel", STANDALONE)
def test_in_sandbox_files_import_nothing_of_the_project(rel: str) -> None:
    project = [f"line {line}: {m}" for line, m in _imports(ROOT / rel) if _layer(m) is not None]
    assert not project, f"{rel} runs alone in the sandbox but imports {project}"


def test_the_layer_rule_catches_an_upward_import(tmp_path: Path) -> None:
    """The check itself can fail: a protocols module importing sandbox is flagged."""
    bad = ROOT / "protocols" / "_layer_probe_tmp.py"
    bad.write_text("def f():\n    from sandbox.api import Limits\n    return Limits\n")
    try:
        found = [m for _, m in _imports(bad) if (_layer(m) or 0) > 0]
    finally:
        bad.unlink()
    assert found == ["sandbox.api"]


def _readme_rooms() -> set[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## How it is built", 1)[1].split("\n## ", 1)[0]
    first_cells = re.findall(r"^\|([^|]+)\|", section, re.M)  # a row may name several rooms
    return {m for cell in first_cells for m in re.findall(r"`([\w/]+)/`", cell)}


def _packages() -> set[str]:
    return {p.parent.relative_to(ROOT).as_posix() for layer in LAYERS for p in (ROOT / layer).rglob("__init__.py")
            if "__pycache__" not in p.parts}


def test_docs_architecture_names_every_room() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w/]+)/`", text))
    missing = sorted(_packages() - named)
    assert not missing, f"docs/architecture.md does not name these rooms: {missing}"


def test_readme_architecture_table_matches_the_folder_tree() -> None:
    assert _readme_rooms() == _packages(), "README.md's 'How it is built' table must list every package folder"


# -- no import circles -------------------------------------------------------------------------


def import_graph(paths: Iterable[Path], root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the project modules it imports, every import counted (top level, in functions,
    under ``TYPE_CHECKING``); ``from pkg import name`` is an edge to ``pkg.name`` when that is a
    module of ``paths``, else to ``pkg``."""
    files = {_module_name(p, root): p for p in paths}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        for node, target in _import_nodes(path, root):
            names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else [""]
            for name in names:
                sub = f"{target}.{name}" if name else target
                found = sub if sub in files else target
                if found in files and found != module:
                    graph[module].add(found)
    return graph


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle per strongly connected part of ``graph`` that has one, as a path that ends where it
    starts (``["a", "b", "a"]``): the shortest cycle through the part's first module by name.
    Tarjan's algorithm, iterative (a deep import chain must not hit the recursion limit)."""
    edges = {v: sorted(set(ws)) for v, ws in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    parts: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            successors = [w for w in edges[v] if w in edges]
            if i < len(successors):
                work.append((v, i + 1))
                w = successors[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                part: list[str] = []
                while not part or part[-1] != v:
                    part.append(stack.pop())
                    on_stack.discard(part[-1])
                parts.append(part)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    cycles = []
    for part in parts:
        members = set(part)
        first = min(part)
        if len(part) == 1 and first not in edges[first]:
            continue
        # breadth-first from the first module back to itself, inside the part
        before: dict[str, str] = {}
        queue = [first]
        while queue and first not in before:
            v = queue.pop(0)
            for w in edges[v]:
                if w in members and w not in before:
                    before[w] = v
                    queue.append(w)
        path = [first]
        while len(path) == 1 or path[-1] != first:
            path.append(before[path[-1]])
        cycles.append(path[::-1])
    return sorted(cycles)


def test_the_import_graph_has_no_cycle() -> None:
    cycles = find_cycles(import_graph(_modules()))
    assert not cycles, "import circles (each closes through the imports shown):\n" + "\n".join(
        " -> ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_planted_cycle(tmp_path: Path) -> None:
    """The check itself can fail: a circle closed under TYPE_CHECKING, through ``from pkg import
    module``, is found and shown as a path; a module that only imports into it is not part of it."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.c import C\n")
    (pkg / "c.py").write_text("def f():\n    from . import a\n")
    (pkg / "d.py").write_text("import pkg.a\n")
    graph = import_graph(sorted(pkg.glob("*.py")), tmp_path)
    assert graph["pkg.d"] == {"pkg.a"}
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]
    assert find_cycles({"x": {"y"}, "y": {"x", "z"}, "z": {"z"}, "w": {"x"}}) == [["x", "y", "x"], ["z", "z"]]
    assert find_cycles({"x": {"y"}, "y": set()}) == []


# -- function-level imports of the project say why ----------------------------------------------


def _function_imports(path: Path) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """The imports of project modules that sit inside a function of the file."""
    inner: set[int] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inner.update(id(n) for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom))
    return sorted(((node, module) for node, module in _import_nodes(path)
                   if id(node) in inner and _layer(module) is not None), key=lambda found: found[0].lineno)


def _says_lazy(lines: list[str], node: ast.stmt) -> bool:
    """A comment on the import's line, or in the comment lines right above it or above the run of
    import lines it belongs to (blank lines between groups of imports included), has the word "lazy"."""
    if "#" in lines[node.lineno - 1] and "lazy" in lines[node.lineno - 1].split("#", 1)[1].lower():
        return True
    above = node.lineno - 2
    while above >= 0 and (not lines[above].strip() or lines[above].strip().startswith(("from ", "import "))):
        above -= 1
    while above >= 0 and lines[above].strip().startswith("#"):
        if "lazy" in lines[above].lower():
            return True
        above -= 1
    return False


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_function_level_imports_of_the_project_say_why(path: Path) -> None:
    rel = path.relative_to(ROOT).as_posix()
    if rel.startswith(SHELL):
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    unexplained = [f"line {node.lineno}: {module}" for node, module in _function_imports(path)
                   if not _says_lazy(lines, node)]
    assert not unexplained, (f"{rel} imports project modules inside functions with no '# lazy: <cost>' comment "
                             f"(move them to the top of the module): {unexplained}")


def test_the_lazy_rule_catches_an_unexplained_import(tmp_path: Path) -> None:
    """The check itself can fail: of three function-level imports, the one without a comment."""
    bad = ROOT / "protocols" / "_lazy_probe_tmp.py"
    bad.write_text("def f():\n    # lazy: the store brings nothing heavy; this is a test\n"
                   "    from protocols.store import Store\n    from protocols.model import Tool\n"
                   "    import json\n    return Store, Tool, json\n\n\n"
                   "def g():\n    from protocols.errors import ToolError\n    return ToolError\n")
    try:
        lines = bad.read_text().splitlines()
        found = [(node.lineno, module) for node, module in _function_imports(bad) if not _says_lazy(lines, node)]
    finally:
        bad.unlink()
        _tree.cache_clear()
    assert found == [(10, "protocols.errors")]



#: File names that two rooms share because they hold the same concept, each for its own room.
SAME_CONCEPT = {
    "api.py": "a room's Python API, or the sandbox's seam",
    "approval.py": "asking a person before a write: at the terminal, or through an MCP host",
    "backend.py": "a sandbox backend: local, Docker",
    "base.py": "a room's seam: what its plug-ins take and return",
    "batch.py": "batches: the library and its command",
    "errors.py": "the one exception tree, re-exported by atc from its floor",
    "functions.py": "Python functions as tools: imported, given by the user, offered to a chat API",
    "many.py": "many tasks at once: solves, probes",
    "report.py": "what a room reports: an evaluation, a probe",
    "server.py": "a room's server: mock, search, serve",
    "settings.py": "a room's settings",
    "state.py": "what a room remembers: a probe, the mock, a BFCL task",
    "transport.py": "one transport of the gateway: HTTP, MCP, functions",
    "values.py": "values made from schemas: the mock's, a probe's",
    "writes.py": "writes: the rule, its command-line options",
}


def test_two_modules_share_a_name_only_for_one_concept() -> None:
    """One name, one meaning (docs/architecture.md): a file name used in two rooms is listed above
    with the concept both hold; any other repeat is a name to change."""
    rooms: dict[str, list[str]] = {}
    for path in _modules():
        rel = path.relative_to(ROOT).as_posix()
        if path.name != "__init__.py" and not rel.startswith("atc/examples/"):
            rooms.setdefault(path.name, []).append(rel)
    repeated = {name: where for name, where in rooms.items() if len(where) > 1 and name not in SAME_CONCEPT}
    assert not repeated, f"modules sharing a name with another meaning: {repeated}"
    stale = [name for name in SAME_CONCEPT if len(rooms.get(name, [])) < 2]
    assert not stale, f"SAME_CONCEPT lists names no longer shared: {stale}"


def test_session_means_the_interactive_interpreter_only() -> None:
    """No module, class or function of the project is called a session unless it is the sandbox
    session (``sandbox/session/``, ``atc/sessions.py``) or the MCP protocol's own (``atc serve``'s
    ``Mcp-Session-Id``, the SDK's ``ClientSession``)."""
    allowed_files = ("sandbox/session/", "atc/sessions.py", "atc/serve/", "sandbox/api.py", "sandbox/inside/runner.py",
                     "sandbox/local/backend.py", "sandbox/docker/backend.py", "sandbox/gateway/mcp/",
                     "protocols/errors.py", "atc/cli/sandbox.py", "atc/__init__.py", "atc/loop/strategies/codeact.py",
                     "atc/loop/strategies/base.py")
    found = []
    for path in _modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(allowed_files):
            continue
        if "session" in path.name:
            found.append(rel)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{rel}: {node.name}" for node in ast.walk(tree)
                  if isinstance(node, ast.ClassDef | ast.FunctionDef) and "session" in node.name.lower()]
    assert not found, f"'session' used for something else than the sandbox session: {found}"
