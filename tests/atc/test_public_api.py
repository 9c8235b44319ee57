"""The public face: every name of ``atc.__all__`` resolves and is seen by a type checker,
``atc.Solver`` works end to end (the scripted OpenAI-compatible server through the real ``openai``
client, the library API on 127.0.0.1, the local sandbox), ``atc.solve`` is the one-call form of
it, and the docs say that only ``atc.<name>`` is public."""

from __future__ import annotations

import ast
import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

import atc
from atc.llm.client import OpenAIModel
from atc.loop import solving
from atc.loop.solving import Solution
from atc.loop.strategies.registry import Choice
from protocols.model import Collection
from sandbox.api import Limits
from tests.support.fakes.openai_server import ScriptedOpenAI
from tests.support.strategies import client as client
from tests.support.strategies import fence
from tests.support.strategies import library as library
from tests.support.strategies import server as server

ROOT = Path(__file__).resolve().parents[2]
PYTHON_DOC = ROOT / "docs" / "python.md"


# -- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in atc.__all__ if n != "__version__"])
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(atc, name) is not None
    assert name in dir(atc)


def test_the_type_checker_sees_every_public_name() -> None:
    """The ``TYPE_CHECKING`` block of ``atc/__init__.py`` imports each lazy name from the module
    it is loaded from at run time, re-exported (``as NAME``) so that ``mypy --strict`` of a user's
    code takes it as public."""
    tree = ast.parse((ROOT / "atc" / "__init__.py").read_text())
    seen: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module
                for alias in stmt.names:
                    assert alias.asname == alias.name, f"{alias.name} is not re-exported"
                    seen[alias.name] = stmt.module
    assert seen == atc._LAZY


def test_the_package_is_typed() -> None:
    assert (ROOT / "atc" / "py.typed").exists()
    assert '"py.typed"' in (ROOT / "pyproject.toml").read_text()


def test_public_callables_say_args_returns_raises() -> None:
    for name in ("solve", "Solver", "run", "solve_many", "probe"):
        doc = inspect.getdoc(getattr(atc, name)) or ""
        for section in ("Args:", "Raises:"):
            assert section in doc, f"atc.{name}: no {section}"
    assert "Returns:" in (inspect.getdoc(atc.Solver.solve) or "")


def test_docs_say_only_atc_names_are_public() -> None:
    text = PYTHON_DOC.read_text()
    assert "atc.Solver" in text and ".solve_many(" in text
    assert re.search(r"implementation modules.{0,300}?are private", text, re.S), "docs/python.md: the private modules"


# -- Solver ----------------------------------------------------------------------------------------


def test_solver_end_to_end(server: ScriptedOpenAI, client: OpenAIModel, library: Collection) -> None:
    solver = atc.Solver([library], client=client, sandbox="local", limits=Limits(timeout=30), strategy="chain")
    assert isinstance(solver.strategy, Choice) and solver.strategy.base == "chain"  # resolved once, here
    assert "library" in repr(solver)
    server.push(fence("print(get_stats()['books'])"))
    first = solver.solve("How many books are there?")
    assert isinstance(first, Solution) and first.ok and first.answer.strip() == "5"
    assert first.sandbox == "local" and first.strategy == "chain"
    assert "How many books are there?" in server.request_text(0)

    def route(body: dict[str, Any]) -> str:
        asked = json.dumps(body["messages"])
        return fence("print(get_stats()['books'] + 1)" if "plus one" in asked else "print(get_stats()['books'])")

    server.router = route
    many = solver.solve_many(["How many books?", "How many books plus one?"], concurrency=2)
    assert [s.answer.strip() for s in many] == ["5", "6"] and all(s.ok for s in many)


def test_solve_is_the_one_call_form_of_solver(server: ScriptedOpenAI, client: OpenAIModel,
                                              library: Collection) -> None:
    engine = set(inspect.signature(solving.solve).parameters) - {"query", "tools"}
    assert set(atc.SolveOptions.__annotations__) == engine  # every keyword of the engine, written once
    with pytest.raises(atc.UsageError, match="unknown keyword"):
        atc.Solver(library, modle="x")  # type: ignore[call-arg]
    server.push(fence("print(get_stats()['books'])"))
    solution = atc.solve("How many books?", library, client=client, sandbox="local")
    assert solution.ok and solution.answer.strip() == "5"


def test_solver_says_bad_settings_before_the_model_is_asked(server: ScriptedOpenAI, client: OpenAIModel,
                                                            library: Collection) -> None:
    with pytest.raises(atc.errors.UsageError):
        atc.Solver(library, client=client, strategy="no-such-strategy")
    with pytest.raises(atc.errors.UsageError):
        atc.Solver(library, client=client, max_reflections=-1)
    with pytest.raises(atc.errors.NotFound):
        atc.Solver("no-such-collection", client=client)
    assert server.requests == []
