"""The architecture is what the folder tree says: layers import downward only.

    protocols  <-  sandbox  <-  atc  <-  probes

Every ``import`` of every module counts, also the lazy ones inside functions: a lazy upward import
is still an upward dependency. Two places sit above all layers and may import any of them: the
command line (``atc/cli/``), which is the application shell, and the lazy facade
``atc/__init__.py`` (which maps names to modules by string). The in-sandbox files (runner, jail,
seccomp) must import nothing of the project at all: they run alone under a bare interpreter.

The README's architecture table must name exactly the packages that exist.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("protocols", "sandbox", "atc", "probes")
SHELL = ("atc/cli/", "atc/__init__.py")
STANDALONE = ("sandbox/runner.py", "sandbox/jail.py", "sandbox/seccomp.py")


def _modules() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, lazy ones included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
    return found


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


@pytest.mark.parametrize("rel", [s for s in STANDALONE if (ROOT / s).exists()])
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
    return {m.rstrip("/") for m in re.findall(r"^\|\s*`([\w/]+)/`\s*\|", section, re.M)}


def test_readme_architecture_table_matches_the_folder_tree() -> None:
    packages = {p.parent.relative_to(ROOT).as_posix() for layer in LAYERS for p in (ROOT / layer).rglob("__init__.py")
                if "__pycache__" not in p.parts}
    assert _readme_rooms() == packages, "README.md's 'How it is built' table must list every package folder"
