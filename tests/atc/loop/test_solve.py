"""The solve loop with attributable reflection.

End-to-end scenarios drive the REAL ``openai`` client against a scripted OpenAI-compatible
server on 127.0.0.1, and run the programs in the REAL local sandbox against the library API on
127.0.0.1; they assert on what the model was sent in its second request. Unit tests of the loop's
bookkeeping use the in-process fake backend (tests/support/fakes/backend.py).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from atc.errors import ConfigError, ModelError, ToolError, UsageError
from atc.llm.client import OpenAIModel
from atc.loop.solving import Solution, asolve, solve
from atc.workflows.many import solve_many
from protocols.loaders import load_data
from protocols.model import Collection
from protocols.render import render_full
from sandbox.api import Limits
from tests.support.apis.library import AUTHORS, LibraryAPI
from tests.support.fakes.backend import FakeBackend
from tests.support.fakes.openai_server import Reply, ScriptedOpenAI
from tests.support.strategies import client as client
from tests.support.strategies import fence
from tests.support.strategies import library as library
from tests.support.strategies import server as server

LIMITS = Limits(timeout=20)


# -- end to end: real openai client, real local sandbox, real library API ----------------------


def _docker_or_skip() -> str:
    try:
        from sandbox.docker.backend import docker_available
    except ImportError:
        pytest.skip("sandbox.docker.backend is not importable")
    if not docker_available():
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    return "docker"


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_tool_misuse_then_fix(
    server: ScriptedOpenAI, client: OpenAIModel, library: Collection, api: LibraryAPI, backend: str
) -> None:
    if backend == "docker":
        _docker_or_skip()
    bad = """
r = search_authors(name="Lem")
author = r["results"][0]
books = list_author_books(author_id=author["name"])["books"]
print(", ".join(b["title"] for b in books))
"""
    good = bad.replace('author["name"]', 'author["id"]')
    server.push(fence(bad), fence(good))
    sol = solve("Which books did Stanislaw Lem write?", library, client=client, sandbox=backend, limits=LIMITS)

    assert sol.ok and sol.answer.strip() == "Solaris, The Cyberiad"
    assert [a.ok for a in sol.attempts] == [False, True]
    first = sol.attempts[0]
    assert first.error is not None and first.error["type"] == "ToolError"
    assert first.error["tool"] == first.blamed_tool == "list_author_books" and first.error["line"] == 3
    second = server.request_text(1)
    assert "ToolError" in second and "author_id" in second and "Line 3:" in second
    assert render_full(library.tool("list_author_books")).strip() in second  # type: ignore[arg-type]
    assert "attributed to the tool `list_author_books`" in second
    assert sol.usage.llm_calls == len(server.requests) == 2
    assert sol.usage.prompt_tokens > 0 and sol.usage.completion_tokens > 0
    assert [c.tool for c in sol.calls] == ["search_authors", "list_author_books"]
    assert sol.sandbox == backend and sol.attempts[0].result.sandbox == backend  # type: ignore[union-attr]
    # the misuse never reached the API: only the good program's author id did
    assert [r.path for r in api.requests if "/books" in r.path] == ["/authors/2/books"]


def test_plain_python_bug_then_fix(server: ScriptedOpenAI, client: OpenAIModel, library: Collection) -> None:
    bad = """
r = search_authors(name="Le Guin")
aid = r["results"][0]["id"]
books = list_author_books(author_id=aid)["books"]
titles = [b["title"] for b in books]
print("; ".join(sorted(titel)))
"""
    server.push(fence(bad), fence(bad.replace("(titel)", "(titles)")))
    sol = solve("List Le Guin's books alphabetically.", library, client=client, sandbox="local", limits=LIMITS)

    assert sol.ok and sol.answer.strip() == "A Wizard of Earthsea; The Left Hand of Darkness"
    err = sol.attempts[0].error
    assert err is not None and (err["type"], err["line"], err["tool"]) == ("NameError", 5, None)
    assert sol.attempts[0].blamed_tool is None
    second = server.request_text(1)
    assert "NameError" in second and "titel" in second and 'Line 5: print("; ".join(sorted(titel)))' in second
    assert "own logic" in second and "full protocol" not in second
    assert sol.usage.llm_calls == len(server.requests) == 2  # no attribution question was needed


def test_key_error_without_response_schemas_shows_real_keys(
    server: ScriptedOpenAI, client: OpenAIModel, api: LibraryAPI
) -> None:
    bare = load_data(api.spec(responses=False), name="library")
    assert all(t.response_schema is None for t in bare.tools if t.name == "search_authors")
    bad = """
found = search_authors(name="Butler")
first = found["authors"][0]
print(first["name"], first["born"])
"""
    server.push(fence(bad), fence(bad.replace('found["authors"]', 'found["results"]')))
    sol = solve("When was Octavia Butler born?", bare, client=client, sandbox="local", limits=LIMITS)

    assert sol.ok and sol.answer.strip() == "Octavia E. Butler 1947"
    err = sol.attempts[0].error
    assert err is not None and (err["type"], err["tool"], err["line"]) == ("KeyError", "search_authors", 2)
    first, second = server.request_text(0), server.request_text(1)
    assert "results" not in first and "count" not in first  # the spec never told the model
    assert "really returned" in second
    assert "results" in second and "count" in second and "Octavia" in second
    assert sol.usage.llm_calls == len(server.requests) == 2


def test_model_that_never_writes_code_stops(server: ScriptedOpenAI, client: OpenAIModel, library: Collection) -> None:
    server.push(*["I would call the search tool and then list the books."] * 5)
    sol = solve("Which books did Lem write?", library, client=client, sandbox="local", max_reflections=2)
    assert not sol.ok and sol.answer == "" and sol.sandbox is None and sol.calls == []
    assert [a.error["type"] for a in sol.attempts if a.error] == ["NoProgram"] * 3
    assert sol.usage.llm_calls == len(server.requests) == 3
    assert "contained no Python program" in server.request_text(2)
    doc = json.loads(json.dumps(sol.to_dict()))
    assert doc["error"]["type"] == "NoProgram" and len(doc["attempts"]) == 3
    assert doc["attempts"][0]["reply"].startswith("I would call the search tool")


def test_rate_limited_then_success(server: ScriptedOpenAI, client: OpenAIModel, library: Collection) -> None:
    server.push(Reply(429, "slow down"), fence("print(get_stats()['books'])"))
    sol = solve("How many books are there?", library, client=client, sandbox="local", limits=LIMITS)
    assert sol.ok and sol.answer.strip() == "5"
    assert len(sol.attempts) == 1
    assert sol.usage.llm_calls == len(server.requests) == 2


def test_server_down_is_model_error(library: Collection, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = OpenAIModel("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff=0)
    with pytest.raises(ModelError, match="cannot reach the model server"):
        solve("How many books?", library, client=down, sandbox="local")


def test_model_failing_mid_solve_keeps_the_attempts(
    server: ScriptedOpenAI, library: Collection
) -> None:
    client = OpenAIModel("scripted-model", base_url=server.base_url, backoff=0.01, max_retries=0)
    server.push(fence("print(get_author(author_id=999)['name'])"), Reply(500, "model crashed"))
    sol = solve("Who is author 999?", library, client=client, sandbox="local", limits=LIMITS)
    assert not sol.ok and len(sol.attempts) == 1
    assert sol.attempts[0].error is not None and sol.attempts[0].error["tool"] == "get_author"
    assert sol.error is not None and sol.error["type"] == "ModelError"
    assert "after 1 attempt(s)" in sol.error["message"] and "HTTP 500" in sol.error["message"]
    assert sol.program.startswith("print(get_author") and sol.to_dict()["attempts"][0]["ok"] is False


def test_no_model_configured(library: Collection) -> None:
    with pytest.raises(ConfigError) as info:
        solve("How many books?", library, sandbox="local")
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ATC_MODEL"):
        assert name in str(info.value)


def test_credentials_reach_the_api_never_the_model(
    server: ScriptedOpenAI, client: OpenAIModel, library: Collection, api: LibraryAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.apis.library import SECRET

    monkeypatch.setenv("LIB_KEY", SECRET)
    program = "order = create_order(book_id=20, quantity=2)\nprint(order['total'])"
    server.push(fence(program.replace("print(order['total'])", "print(order['sum'])")), fence(program))
    sol = solve("Order two copies of Solaris; what is the total?", library, client=client, sandbox="local",
                credentials={"api_key": "env:LIB_KEY"}, limits=LIMITS)
    assert sol.ok and sol.answer.strip() == "22.5"
    # The repaired program's identical order is answered from the write ledger, not sent again.
    assert [r.headers.get("X-API-Key") for r in api.requests] == [SECRET]
    assert [c.outcome for c in sol.calls] == ["replayed"]
    assert all(SECRET not in json.dumps(body) for body in server.requests)
    assert "order_id" in server.request_text(1)  # the real response keys came back to the model


def test_solution_json_has_the_contract_fields(server: ScriptedOpenAI, client: OpenAIModel, library: Collection) -> None:
    server.push(fence("s = get_stats()\nprint(s['authors'])"))
    doc = solve("How many authors?", library, client=client, sandbox="local", limits=LIMITS).to_dict()
    for key in ("ok", "answer", "sandbox", "duration_ms", "error", "calls", "program", "attempts", "usage", "tools"):
        assert key in doc
    assert doc["ok"] is True and doc["answer"].strip() == str(len(AUTHORS)) and doc["sandbox"] == "local"
    assert doc["calls"][0]["tool"] == "get_stats" and doc["calls"][0]["path"] == "/stats"
    assert doc["attempts"] == [{**doc["attempts"][0], "program": doc["program"], "ok": True, "error": None}]
    assert {"llm_calls", "prompt_tokens", "completion_tokens"} <= set(doc["usage"])  # + model_turns (issue 31)
    assert doc["usage"]["model_turns"] == 1 == doc["usage"]["llm_calls"]
    assert sorted(doc["tools"]) == sorted(t.name for t in library.tools)
    json.dumps(doc)


# -- the loop's bookkeeping, with the in-process fake backend ----------------------------------

AUTHORS_REPLY = {"results": [{"id": 2, "name": "Stanislaw Lem"}], "count": 1}


def fake() -> FakeBackend:
    def reviews(book_id: int, limit: int = 10) -> list[dict[str, object]]:
        if book_id != 20:
            raise ToolError("list_book_reviews: HTTP 404: book not found", tool="list_book_reviews", status=404)
        return [{"user": "dee", "rating": 4}][:limit]

    return FakeBackend({"search_authors": lambda name: AUTHORS_REPLY, "get_stats": lambda: {"books": 5},
                        "list_book_reviews": reviews})


def test_attempts_include_unrun_programs_in_order(server: ScriptedOpenAI, client: OpenAIModel, library: Collection) -> None:
    backend = fake()
    server.push("Let me think about it.", fence("print(get_statz())"), fence("x = get_stats()"),
                fence("print(get_stats()['books'])"))
    sol = solve("How many books?", library, client=client, sandbox=backend)
    assert sol.ok and sol.answer == "5\n" and sol.sandbox == "fake"
    kinds = [(a.error or {}).get("type") for a in sol.attempts]
    assert kinds == ["NoProgram", "NameError", "EmptyAnswer", None]
    assert [a.result is None for a in sol.attempts] == [True, True, False, False]
    assert backend.programs == ["x = get_stats()\n", "print(get_stats()['books'])\n"]  # the static miss never ran
    assert "Did you mean 'get_stats'" in server.request_text(2)
    assert "printed nothing" in server.request_text(3)
    assert [a["sandbox"] for a in sol.to_dict()["attempts"]] == [None, None, "fake", "fake"]


def test_model_is_asked_when_the_run_names_no_tool(server: ScriptedOpenAI, client: OpenAIModel, library: Collection) -> None:
    bad = "found = search_authors(name='Lem')\nwho = found['authors']\nprint(who)"
    server.push(fence(bad), "The tool at fault is `search_authors`.", fence(bad.replace("'authors'", "'results'")))
    sol = solve("Find Lem", library, client=client, sandbox=fake())
    assert sol.ok and sol.attempts[0].blamed_tool == "search_authors"
    assert "Answer with the name of that one tool" in server.request_text(1)
    third = server.request_text(2)
    assert render_full(library.tool("search_authors")).strip() in third  # type: ignore[arg-type]
    assert '"results"' in third and "named by the model" in third
    assert sol.usage.llm_calls == 3


def test_logic_error_is_not_attributed(server: ScriptedOpenAI, client: OpenAIModel, library: Collection) -> None:
    server.push(fence("n = 0\nprint(get_stats())\nprint(10 / n)"), fence("print(get_stats()['books'])"))
    sol = solve("How many books?", library, client=client, sandbox=fake())
    assert sol.ok and sol.usage.llm_calls == 2
    assert sol.attempts[0].error["type"] == "ZeroDivisionError"  # type: ignore[index]
    assert sol.attempts[0].blamed_tool is None


def test_reflections_are_bounded(server: ScriptedOpenAI, client: OpenAIModel, library: Collection) -> None:
    server.push(*[fence("print(list_book_reviews(book_id=1))")] * 3)
    sol = solve("Reviews?", library, client=client, sandbox=fake(), max_reflections=1)
    assert not sol.ok and len(sol.attempts) == 2 and len(server.requests) == 2
    assert sol.error is not None and sol.error["type"] == "ToolError" and sol.error["tool"] == "list_book_reviews"
    assert "HTTP 404" in server.request_text(1)


def test_top_k_picks_relevant_tools(server: ScriptedOpenAI, client: OpenAIModel, library: Collection) -> None:
    server.push(fence("print(list_book_reviews(book_id=20))"))
    sol = solve("Show the reader reviews of a book", library, client=client, sandbox=fake(), top_k=2)
    assert len(sol.tools) == 2 and "list_book_reviews" in sol.tools
    shown = server.request_text(0)
    assert "list_book_reviews(" in shown and "create_order(" not in shown


def test_tools_as_spec_path(server: ScriptedOpenAI, client: OpenAIModel, api: LibraryAPI, tmp_path: Path) -> None:
    spec = api.write_spec(tmp_path / "library.json")
    server.push(fence("print(get_stats()['books'])"))
    assert solve("How many books?", str(spec), client=client, sandbox=fake()).answer == "5\n"


def test_bad_input(client: OpenAIModel, library: Collection) -> None:
    with pytest.raises(UsageError):
        solve("  ", library, client=client)
    with pytest.raises(UsageError):
        solve("q", library, client=client, max_reflections=-1)
    with pytest.raises(UsageError):
        solve("q", [42], client=client)  # type: ignore[list-item]


def test_asolve(server: ScriptedOpenAI, client: OpenAIModel, library: Collection) -> None:
    server.push(fence("print(get_stats()['books'])"))
    sol = asyncio.run(asolve("How many books?", library, client=client, sandbox=fake()))
    assert isinstance(sol, Solution) and sol.ok


def test_one_failing_task_does_not_sink_the_batch(client: OpenAIModel, server: ScriptedOpenAI, library: Collection) -> None:
    def route(body: dict[str, object]) -> str | Reply:
        text = json.dumps(body["messages"])
        return Reply(400, "refused") if "task-bad" in text else fence("print(get_stats()['books'])")

    server.router = route
    sols = solve_many(["task-1", "task-bad", "task-3"], library, client=client, sandbox=fake(), concurrency=2)
    assert [s.ok for s in sols] == [True, False, True]
    assert sols[1].error is not None and sols[1].error["type"] == "ModelError" and sols[1].query == "task-bad"


# -- reflection helpers and prompts -----------------------------------------------------------


def test_parse_tool_name() -> None:
    from atc.loop.reflection import parse_tool_name

    names = ["get_book", "list_author_books", "search_authors"]
    assert parse_tool_name("`get_book`", names) == "get_book"
    assert parse_tool_name("It is list_author_books, not get_book.", names) == "list_author_books"
    assert parse_tool_name("get_books", names) is None
    assert parse_tool_name("none", names) is None


def test_tool_data_flows_through_assignments_loops_and_comprehensions() -> None:
    from atc.loop.reflection import needs_model_attribution, tool_data_names, touches_tool_data

    program = ("r = search_authors(name='x')\nrows = r['results']\nfor row in rows:\n    ident = row['id']\n"
               "names = [a['name'] for a in rows]\nzero = 0\nprint(names[5], 1 / zero)\n")
    tools = ["search_authors"]
    assert tool_data_names(program, tools) == {"r", "rows", "row", "ident", "names", "a"}
    assert touches_tool_data(program, {"line": 7}, tools)
    assert not touches_tool_data(program, {"line": 6}, tools)
    assert touches_tool_data(program, {"line": 6, "traceback": "in search_authors"}, tools)
    assert not needs_model_attribution(program, {"line": 7, "type": "IndexError", "tool": "search_authors"}, tools)
    assert not needs_model_attribution(program, {"line": 7, "type": "Timeout"}, tools)
    assert needs_model_attribution(program, {"line": 7, "type": "IndexError", "tool": None}, tools)


def test_tool_response_falls_back_to_the_last_call() -> None:
    from atc.loop.reflection import tool_response
    from sandbox.api import ErrorInfo, ExecutionResult, ToolCall

    calls = [ToolCall("search_authors", {}, "GET", "/authors", 200, True, 1, 1.0, response={"hits": [{"uid": 1}]}),
             ToolCall("search_authors", {}, "GET", "/authors", 200, True, 2, 1.0,
                      response={"results": [{"id": 7, "name": "N"}], "count": 1})]
    result = ExecutionResult(False, "", "local", 1.0, ErrorInfo("KeyError", "'x'", 3), calls)
    got = tool_response(result, "search_authors")
    assert got is not None and got.shape is not None and "results" in got.shape and "count" in got.shape
    assert got.excerpt is not None and '"id": 7' in got.excerpt
    assert tool_response(result, "get_book") is None


def test_prompt_templates_render_only_with_their_values() -> None:
    from atc import prompts

    assert prompts.placeholders("generate") == {"tools", "task"}
    assert prompts.placeholders("reflect") == {"attempt", "error", "blame"}
    assert prompts.placeholders("attribute") == {"task", "tools", "program", "error"}
    assert "{" not in prompts.render("generate", tools="t()", task="do {x}").replace("{x}", "")
    with pytest.raises(ValueError, match="missing"):
        prompts.render("generate", tools="t()")
    with pytest.raises(ValueError, match="unknown"):
        prompts.render("system", extra="x")


def test_atc_solve_is_the_function_after_the_module_is_imported(
    server: ScriptedOpenAI, client: OpenAIModel, library: Collection
) -> None:
    import atc
    import atc.loop.solving  # noqa: F401  (the module is named so that it never shadows atc.solve)

    server.push(fence("print(get_stats()['books'])"))
    sol = atc.solve("How many books?", library, client=client, sandbox=fake())
    assert isinstance(sol, Solution) and sol.answer == "5\n"
    assert atc.asolve is asolve and atc.solve_many is solve_many and atc.Solution is Solution


def test_solve_and_sessions_read_the_tools_argument_the_same_way(tmp_path: Path, api: LibraryAPI) -> None:
    """``atc.toolsets.toolset_for``: a spec URL is fetched (it is no stored collection's name), a
    path is read, several form one toolset, and a word that is neither is looked up in the store."""
    from atc.toolsets import toolset_for
    from protocols.errors import NotFound
    from tests.support.apis.leaky import LeakyAPI

    path = api.write_spec(tmp_path / "library.json")
    with LeakyAPI(prefix="alpha") as leaky:
        toolset = toolset_for([f"{leaky.url}/spec.json", path])
    assert [c.name for c in toolset.collections] == ["alpha", "library"]
    assert "alpha_whoami" in toolset.tools and "get_stats" in toolset.tools
    with pytest.raises(NotFound):
        toolset_for("no-such-collection")
    with pytest.raises(UsageError, match="no tools given"):
        toolset_for([])
