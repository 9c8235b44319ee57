"""``codeact`` end to end: both real model clients against the scripted OpenAI-compatible server,
snippets run in a real sandbox session (``atc.session``) whose globals survive from one snippet to
the next, tools served by the library API on 127.0.0.1 through the session's gateway."""

from __future__ import annotations

import textwrap

import pytest

from atc.loop.solving import solve
from protocols.model import Collection
from sandbox.api import Limits
from tests.support.apis.library import LibraryAPI
from tests.support.fakes.openai_server import ScriptedOpenAI
from tests.support.strategies import library as library
from tests.support.strategies import model as model
from tests.support.strategies import server as server

LIMITS = Limits(timeout=20)


def fence(code: str) -> str:
    return f"Next step.\n\n```python\n{textwrap.dedent(code).strip()}\n```"


def said(server: ScriptedOpenAI, index: int) -> str:
    """What the model was told last before request ``index``: the output of its previous snippet."""
    return str(server.requests[index]["messages"][-1]["content"])


def _docker_or_skip() -> None:
    from sandbox.docker.backend import docker_available

    if not docker_available():
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")


@pytest.mark.parametrize("sandbox", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_codeact_keeps_variables_across_snippets_and_recovers(sandbox: str, server: ScriptedOpenAI, model: str,
                                                              library: Collection, api: LibraryAPI) -> None:
    if sandbox == "docker":
        _docker_or_skip()
    server.push(
        "I should look the author up first.",                                   # no code, no answer
        fence("""
            r = search_authors(name="Lem")
            author = r["results"][0]
            print(author["id"], author["name"])
        """),
        fence('books = list_author_books(author_id=author["name"])["books"]'),  # an argument the gateway refuses
        fence("""
            books = list_author_books(author_id=author["id"])["books"]
            cheapest = min(books, key=lambda b: b["price"])
            print(cheapest["title"], cheapest["price"])
        """),                                                                   # `author` is from two snippets ago
        fence("print(find_books(author=author['id']))"),                        # a tool that does not exist
        "Final answer: The Cyberiad (8.75)",
    )
    sol = solve("Which is the cheapest book by Stanislaw Lem?", library, strategy="codeact", sandbox=sandbox,
                limits=LIMITS)

    assert sol.ok and sol.answer == "The Cyberiad (8.75)" and sol.strategy == "codeact"
    assert sol.steps == 6 and sol.usage.llm_calls == len(server.requests) == 6 and sol.sandbox == sandbox
    assert sol.failures == {"no_program": 1, "bad_arguments": 1, "program_error": 1}
    assert [(c.tool, c.ok) for c in sol.calls] == [("search_authors", True), ("list_author_books", False),
                                                   ("list_author_books", True)]
    assert sol.api_calls == 3 and [r.path for r in api.requests] == ["/authors?name=Lem", "/authors/2/books"]
    assert "```python" in said(server, 1) or "Final answer" in said(server, 1)  # the reminder
    assert "2 Stanislaw Lem" in said(server, 2)
    assert "ToolError" in said(server, 3) and "author_id" in said(server, 3)
    assert "The Cyberiad 8.75" in said(server, 4)  # the variable of snippet 2 was still there in snippet 4
    assert "NameError" in said(server, 5) and "find_books" in said(server, 5)
    assert 'author = r["results"][0]' in sol.program and "find_books" not in sol.program
    turns = sol.trace["turns"]
    assert [t["ok"] for t in turns] == [False, True, False, True, False, True]
    assert turns[2]["error"]["type"] == "ToolError" and turns[2]["error"]["tool"] == "list_author_books"


def test_codeact_that_never_answers_stops_at_its_turns(server: ScriptedOpenAI, model: str,
                                                       library: Collection) -> None:
    server.router = lambda body: fence("print(get_stats()['books'])")
    sol = solve("How many books?", library, strategy="codeact", sandbox="local", limits=LIMITS, max_steps=3)
    assert not sol.ok and sol.answer == "" and sol.steps == 3 == len(server.requests)
    assert sol.error is not None and sol.error["type"] == "StepLimit" and "final answer" in sol.error["message"]
    assert sol.failures == {"step_limit": 1} and sol.api_calls == 3


def test_a_snippet_that_ends_the_session_ends_the_episode(server: ScriptedOpenAI, model: str,
                                                          library: Collection) -> None:
    server.push(fence("x = get_stats()"), fence("while True:\n    pass"), fence("print(x)"))
    sol = solve("How many books?", library, strategy="codeact", sandbox="local", limits=Limits(timeout=1))
    assert not sol.ok and sol.steps == 2 and len(server.requests) == 2  # no turn after the session ended
    assert sol.error is not None and sol.error["type"] == "SessionEnded"
    assert sol.failures == {"sandbox_limit": 1} and sol.trace["turns"][1]["error"]["type"] == "Timeout"
