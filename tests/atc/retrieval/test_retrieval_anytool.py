"""AnyTool: hierarchical agents calling functions through the real model clients, against the
scripted OpenAI-compatible server on 127.0.0.1 (which plays the model: a router answers each
request by the agent it comes from and how far that agent's conversation went).

The end-to-end test solves a task with ``retriever="anytool"`` in the real local sandbox against
real HTTP APIs on 127.0.0.1: the pool first holds a tool whose endpoint is gone (410), the
program fails on it, reflection drops it and the reactivated tool agent adds the right ones.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from atc.llm.chat import ModelClient
from atc.llm.client import OpenAIModel
from atc.llm.openai_http import HttpChatModel
from atc.loop.solving import solve
from atc.retrieval import factory, registered
from atc.retrieval.anytool import AnyTool, AnyToolSettings
from atc.retrieval.select import is_broken
from protocols.loaders import load_data
from protocols.model import Tool
from sandbox.api import Limits
from tests.support.apis.library import LibraryAPI
from tests.support.fakes.openai_server import Reply, ScriptedOpenAI, call

Router = Callable[[dict[str, Any]], Reply | str]


def T(name: str, category: str, group: str, description: str) -> Tool:  # noqa: N802
    return Tool(name=name, collection="c", category=category, group=group, description=description)


CORPUS = [
    T("search_movie", "Movies", "tmdb", "Search movies by title."),
    T("movie_credits", "Movies", "tmdb", "Cast and crew of a movie."),
    T("omdb_lookup", "Movies", "omdb", "Look a film up in OMDb."),
    T("current_weather", "Weather", "openweather", "Current weather of a city."),
    T("forecast", "Weather", "openweather", "Five day forecast of a city."),
    T("stock_quote", "Finance", "quotes", "Latest quote of a stock symbol."),
]


def kind(body: dict[str, Any]) -> str:
    """Which agent (or other caller) sent this request."""
    first = str(body["messages"][0].get("content") or "")
    if "meta-agent" in first:
        return "meta"
    if "category agent" in first:
        return "category:" + re.search(r'category is\s+"([^"]+)"', first).group(1)  # type: ignore[union-attr]
    if "tool agent" in first:
        tools = re.search(r"look after the tools\s+(.+?) of the", first, re.S).group(1)  # type: ignore[union-attr]
        return "tool:" + tools.replace(", ", "+")
    if "Can the query be fully answered" in first:
        return "judge"
    return "other"


def turn(body: dict[str, Any]) -> int:
    """1 for the agent's first reply, 2 for its second..."""
    return 1 + sum(1 for m in body["messages"] if m["role"] == "assistant")


def calls(*items: dict[str, Any], delay: float = 0.0) -> Reply:
    return Reply(tool_calls=items, delay=delay)


FINISH = calls(call("finish_search"))


def scripted(table: dict[tuple[str, int], Reply | str], default: Reply | str = FINISH) -> Router:
    def route(body: dict[str, Any]) -> Reply | str:
        return table.get((kind(body), turn(body)), default)
    return route


@pytest.fixture()
def server() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as s:
        yield s


@pytest.fixture()
def client(server: ScriptedOpenAI) -> ModelClient:
    return HttpChatModel("scripted", base_url=server.base_url, backoff=0.01)


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def test_registered_lazily() -> None:
    assert {"anytool", "reinvoke"} <= set(registered())
    with pytest.raises(Exception, match="needs a model"):
        factory("anytool")(tools=CORPUS, client=None)


def test_hierarchy_fills_the_pool_concurrently_and_counts_usage(server: ScriptedOpenAI, client: ModelClient) -> None:
    server.router = scripted({
        ("meta", 1): calls(call("create_agent_category_level", {"category": "Movies"}),
                           call("create_agent_category_level", {"category": "Weather"})),
        # both category agents hold their first answer back: the server must see them overlap
        ("category:Movies", 1): calls(call("create_agent_tool_level", {"tools": ["tmdb"]}), delay=0.4),
        ("category:Weather", 1): calls(call("create_agent_tool_level", {"tools": ["openweather"]}), delay=0.4),
        ("tool:tmdb", 1): calls(call("get_APIs_in_tool", {"tool": "tmdb"})),
        ("tool:tmdb", 2): calls(call("add_API_into_API_pool", {"apis": ["search_movie", "movie_credits"]})),
        ("tool:openweather", 1): calls(call("add_API_into_API_pool", {"apis": ["forecast"]})),
    })
    retriever = AnyTool(CORPUS, client)
    result = retriever.search("Who starred in Alien, and will it rain in Oslo tomorrow?")
    assert result.retriever == "anytool"
    assert sorted(h.name for h in result.hits) == ["forecast", "movie_credits", "search_movie"]
    assert server.max_in_flight >= 2
    # the meta-agent was offered its own functions only
    assert set(server.offered(0)) == {"get_tools_in_category", "get_tool_descriptions",
                                      "create_agent_category_level", "finish_search"}
    assert {a.label: a.status for a in retriever.agents} == {
        "meta": "finished", "category:Movies": "finished", "category:Weather": "finished",
        "tool:Movies/tmdb": "finished", "tool:Weather/openweather": "finished"}
    # the usage is what the server saw and reported
    assert result.usage["llm_calls"] == len(server.requests)
    prompts = [_tokens("\n".join(str(m.get("content") or "") for m in r["messages"])) for r in server.requests]
    assert result.usage["prompt_tokens"] == sum(prompts)
    assert result.usage["completion_tokens"] >= len(server.requests)
    # the tool agent's second request carried the answer of get_APIs_in_tool
    tmdb = [r for r in server.requests if kind(r) == "tool:tmdb" and turn(r) == 2][0]
    assert "movie_credits: Cast and crew of a movie." in tmdb["messages"][-1]["content"]


def test_pool_is_capped_at_64(server: ScriptedOpenAI, client: ModelClient) -> None:
    big = [T(f"api_{i}", "Big", "huge", f"Operation number {i}.") for i in range(100)]
    server.router = scripted({
        ("meta", 1): calls(call("create_agent_category_level", {"category": "Big"})),
        # a tool of 100 APIs is handed out in parts of 40
        ("category:Big", 1): calls(call("create_agent_tool_level", {"tools": ["huge", "huge (2)", "huge (3)"]})),
        ("tool:huge+huge (2)+huge (3)", 1): calls(call("add_API_into_API_pool",
                                                       {"apis": [f"api_{i}" for i in range(100)]})),
    })
    result = AnyTool(big, client).search("everything")
    assert len(result.hits) == 64 and [h.name for h in result.hits][:2] == ["api_0", "api_1"]
    second = [r for r in server.requests if kind(r) == "tool:huge+huge (2)+huge (3)" and turn(r) == 2][0]
    assert "api_64 not added: the pool is full (64 APIs)" in second["messages"][-1]["content"]


def test_solvable_pool_stops_every_agent(server: ScriptedOpenAI, client: ModelClient) -> None:
    server.router = scripted({
        ("meta", 1): calls(call("create_agent_category_level", {"category": "Weather"})),
        ("category:Weather", 1): calls(call("create_agent_tool_level", {"tools": ["openweather"]})),
        ("tool:openweather", 1): calls(call("add_API_into_API_pool", {"apis": ["current_weather"]})),
        ("tool:openweather", 2): calls(call("check_if_request_solvable")),
        ("judge", 1): "yes: current_weather answers it",
    }, default=calls(call("get_tools_in_category", {"category": "Weather"}), delay=0.3))
    retriever = AnyTool(CORPUS, client)
    result = retriever.search("weather in Oslo")
    assert [h.name for h in result.hits] == ["current_weather"]
    statuses = {a.label: a.status for a in retriever.agents}
    assert statuses["tool:Weather/openweather"] == "stopped"
    assert statuses["meta"] == "stopped" and statuses["category:Weather"] == "stopped"
    judge = [r for r in server.requests if kind(r) == "judge"][0]
    assert "tools" not in judge and "- current_weather: Current weather of a city." in judge["messages"][0]["content"]


def test_misbehaving_model_is_told_and_bounded(server: ScriptedOpenAI, client: ModelClient) -> None:
    server.router = scripted({
        ("meta", 1): calls(call("create_agent_category_level", {"category": "Finance"})),
        ("category:Finance", 1): calls(call("create_agent_tool_level", {"tools": ["quotes"]})),
        ("tool:quotes", 1): calls(call("delete_everything", {})),
        ("tool:quotes", 2): calls(call("add_API_into_API_pool", '{"apis": ["stock_quote"')),
        ("tool:quotes", 3): "I think stock_quote is the one.",
        ("tool:quotes", 4): calls(call("add_API_into_API_pool", {"apis": ["made_up_api"]})),
    }, default=calls(call("get_tools_in_category", {"category": "Finance"})))  # never finishes
    settings = AnyToolSettings(max_turns=6)
    retriever = AnyTool(CORPUS, client, settings)
    result = retriever.search("latest stock quote for ACME")
    texts = {(kind(r), turn(r)): r["messages"][-1]["content"] for r in server.requests}
    assert "error: there is no function 'delete_everything'" in texts[("tool:quotes", 2)]
    assert "are not valid JSON" in texts[("tool:quotes", 3)]
    assert "Act by calling one of your functions" in texts[("tool:quotes", 4)]
    assert "not among your APIs (never invent names): made_up_api" in texts[("tool:quotes", 5)]
    notes = "\n".join(result.notes)
    for expected in ("unknown function 'delete_everything'", "arguments are not JSON",
                     "replied without calling a function", "stopped after 6 turns"):
        assert expected in notes
    # nothing reached the pool: BM25 answers instead, and says so
    assert result.retriever == "bm25" and "stock_quote" in [h.name for h in result.hits]
    assert any("BM25" in n for n in result.notes)
    assert max(turn(r) for r in server.requests if kind(r) == "tool:quotes") == 6
    assert result.usage["llm_calls"] == len(server.requests)


def test_call_budget_and_agent_limit_end_a_runaway(server: ScriptedOpenAI, client: ModelClient) -> None:
    cats = [T(f"api_{i}", f"Cat{i}", f"g{i}", "Something.") for i in range(10)]
    server.router = lambda body: calls(*[call("create_agent_category_level", {"category": f"Cat{i}"})
                                         for i in range(10)]) if kind(body) == "meta" else \
        calls(call("get_tools_in_category", {"category": "Cat1"}))
    retriever = AnyTool(cats, client, AnyToolSettings(max_calls=12, max_agents=4, max_turns=50))
    result = retriever.search("anything")
    assert len(server.requests) == 12 == result.usage["llm_calls"]
    assert len(retriever.agents) == 4
    notes = "\n".join(result.notes)
    assert "agent limit (4) reached" in notes and "budget of 12 model calls is spent" in notes


def test_model_server_failure_ends_the_agents_cleanly(client: ModelClient, server: ScriptedOpenAI) -> None:
    server.router = lambda body: Reply(400, "bad request")
    result = AnyTool(CORPUS, client).search("weather in Oslo", k=2)
    assert result.retriever == "bm25" and [h.name for h in result.hits][0] == "current_weather"
    assert any("the model failed" in n for n in result.notes)


def test_reflection_reactivates_unfinished_agents_and_drops_the_broken_tool(
        server: ScriptedOpenAI, client: ModelClient) -> None:
    server.router = scripted({
        ("meta", 1): calls(call("create_agent_category_level", {"category": "Movies"})),
        ("category:Movies", 1): calls(call("create_agent_tool_level", {"tools": ["tmdb", "omdb"]})),
        ("tool:tmdb+omdb", 1): calls(call("add_API_into_API_pool", {"apis": ["omdb_lookup"]})),
        ("tool:tmdb+omdb", 2): calls(call("check_if_request_solvable")),
        ("judge", 1): "yes",
        ("tool:tmdb+omdb", 3): calls(call("add_API_into_API_pool", {"apis": ["omdb_lookup", "search_movie"]})),
        ("tool:tmdb+omdb", 4): calls(call("check_if_request_solvable")),
    }, default=calls(call("get_tools_in_category", {"category": "Movies"}), delay=0.2))
    retriever = AnyTool(CORPUS, client)
    first = retriever.search("films called Alien")
    assert first.retriever == "anytool" and [h.name for h in first.hits] == ["omdb_lookup"]
    before = len(server.requests)
    again = retriever.reflect("ToolError: HTTP 410 Gone (attributed to omdb_lookup)", "omdb_lookup", broken=True)
    assert again is not None and [h.name for h in again.hits] == ["search_movie"]
    assert again.usage["llm_calls"] == len(server.requests) - before
    reopened = [r for r in server.requests[before:] if kind(r) == "tool:tmdb+omdb"][0]
    text = reopened["messages"][-1]["content"]
    assert "failed to solve the query: ToolError: HTTP 410 Gone" in text
    answer = [r for r in server.requests if kind(r) == "tool:tmdb+omdb" and turn(r) == 4][0]["messages"][-1]
    assert "omdb_lookup was removed after it failed the solve" in answer["content"]
    assert any("dropped omdb_lookup" in n for n in again.notes)
    # the finished meta-agent was not asked again; the pool was judged enough after the tool level
    assert not [r for r in server.requests[before:] if kind(r) == "meta"]


def test_is_broken_tells_a_gone_endpoint_from_a_misuse() -> None:
    class C:
        def __init__(self, status: int | None, response: Any = None, failure: str | None = None) -> None:
            self.tool, self.status, self.response, self.failure, self.error = "t", status, response, failure, None

    assert is_broken("t", None, [C(410)]) and is_broken("t", None, [C(503)]) and is_broken("t", None, [C(None, failure="connect")])
    assert is_broken("t", None, [C(404, {"error": "no such endpoint"})])
    assert not is_broken("t", None, [C(404, {"error": "author not found"})])
    assert not is_broken("t", None, [C(400)]) and not is_broken(None, None, [C(500)])


# -- end to end: solve reopens retrieval after a failed attempt --------------------------------


class GoneAPI:
    """An API on 127.0.0.1 whose only endpoint has been retired: every request gets a 410."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                data = json.dumps({"error": "this endpoint is gone; use the library API"}).encode()
                self.send_response(410)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spec(self) -> dict[str, Any]:
        return self.spec_for(f"http://127.0.0.1:{self.server.server_address[1]}")

    @staticmethod
    def spec_for(url: str) -> dict[str, Any]:
        return {"openapi": "3.0.3", "info": {"title": "Archive", "version": "1"}, "servers": [{"url": url}],
                "paths": {"/author-books": {"get": {
                    "operationId": "legacy_author_books", "summary": "Books of an author, by name (legacy).",
                    "parameters": [{"name": "name", "in": "query", "required": True, "schema": {"type": "string"}}],
                    "responses": {"200": {"description": "the books"}}}}}}


BROKEN = 'print(", ".join(b["title"] for b in legacy_author_books(name="Lem")["books"]))'
GOOD = """
author = search_authors(name="Lem")["results"][0]
print(", ".join(b["title"] for b in list_author_books(author_id=author["id"])["books"]))
"""


@pytest.mark.parametrize("kind_of_client", ["http", "openai"])
def test_solve_reopens_retrieval_after_a_broken_tool(server: ScriptedOpenAI, api: LibraryAPI,
                                                     kind_of_client: str) -> None:
    gone = GoneAPI()
    try:
        library = load_data(api.spec(), name="library")
        archive = load_data(gone.spec(), name="archive")
        programs = iter([f"```python\n{BROKEN}\n```", f"```python\n{GOOD.strip()}\n```"])
        agent = scripted({
            ("meta", 1): calls(call("create_agent_category_level", {"category": "uncategorized"})),
            ("category:uncategorized", 1): calls(call("create_agent_tool_level", {"tools": ["Archive", "Library"]})),
            ("tool:Archive+Library", 1): calls(call("add_API_into_API_pool", {"apis": ["legacy_author_books"]})),
            ("tool:Archive+Library", 2): calls(call("check_if_request_solvable")),
            ("judge", 1): "yes",
            ("tool:Archive+Library", 3): calls(call("add_API_into_API_pool",
                                                    {"apis": ["search_authors", "list_author_books"]})),
            ("tool:Archive+Library", 4): calls(call("check_if_request_solvable")),
        }, default=calls(call("get_tools_in_category", {"category": "uncategorized"}), delay=0.2))
        server.router = lambda body: agent(body) if kind(body) != "other" else next(programs)
        client: ModelClient = (HttpChatModel if kind_of_client == "http" else OpenAIModel)(
            "scripted", base_url=server.base_url, backoff=0.01)
        sol = solve("Which books did Stanislaw Lem write?", [library, archive], client=client, retriever="anytool",
                    sandbox="local", limits=Limits(timeout=20))
    finally:
        gone.server.shutdown()
        gone.server.server_close()
    assert sol.ok and sol.answer.strip() == "Solaris, The Cyberiad"
    assert [a.ok for a in sol.attempts] == [False, True]
    assert sol.attempts[0].blamed_tool == "legacy_author_books"
    assert sol.tools == ["search_authors", "list_author_books"] and sol.retriever == "anytool"
    solves = [r for r in server.requests if kind(r) == "other"]
    first = "\n".join(str(m.get("content") or "") for m in solves[0]["messages"])
    assert "legacy_author_books" in first and "list_author_books" not in first
    second = solves[1]["messages"][-1]["content"]
    assert "The tool search was reopened" in second and "These tools were removed: legacy_author_books" in second
    assert "list_author_books(" in second and "search_authors(" in second
    # every request the model server saw is in the solve's usage, the agents' included
    assert sol.usage.llm_calls == len(server.requests)
    assert sol.usage.llm_calls > len(solves)


def test_cli_solve_json_counts_the_retrievals_calls(server: ScriptedOpenAI, api: LibraryAPI, tmp_path: Path) -> None:
    agent = scripted({
        ("meta", 1): calls(call("create_agent_category_level", {"category": "uncategorized"})),
        ("category:uncategorized", 1): calls(call("create_agent_tool_level", {"tools": ["Library"]})),
        ("tool:Library", 1): calls(call("add_API_into_API_pool", {"apis": ["search_authors"]})),
        ("tool:Library", 2): calls(call("check_if_request_solvable")),
        ("judge", 1): "yes",
    }, default=calls(call("get_tools_in_category", {"category": "uncategorized"}), delay=0.2))
    program = "```python\nprint(search_authors(name='Lem')['results'][0]['born'])\n```"
    server.router = lambda body: agent(body) if kind(body) != "other" else program
    spec = api.write_spec(tmp_path / "library.json")
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "ATC_MODEL": "scripted"}
    proc = subprocess.run([str(Path(sys.executable).with_name("atc")), "solve", "When was Lem born?", "--tools",
                           str(spec), "--sandbox", "local", "--retriever", "anytool", "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ok"] and doc["answer"].strip() == "1921" and doc["tools"] == ["search_authors"]
    assert doc["retriever"] == "anytool"
    assert doc["usage"]["llm_calls"] == len(server.requests) >= 5
    bad = subprocess.run([str(Path(sys.executable).with_name("atc")), "solve", "x", "--tools", str(spec),
                          "--retriever", "nope"], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_reopen_skips_writing_failures_and_plain_retrievers() -> None:
    from atc.retrieval.select import reopen

    class Reflecting:
        name = "r"
        asked: list[str] = []

        def search(self, query: str, k: int = 5) -> Any:
            raise AssertionError

        def reflect(self, reason: str, blamed: str | None, *, broken: bool, k: int) -> Any:
            from atc.retrieval import Hit, SearchResult

            self.asked.append(reason)
            return SearchResult([Hit("c", "forecast", 1.0)], "r", {"llm_calls": 2, "prompt_tokens": 3,
                                                                   "completion_tokens": 4})

    r = Reflecting()
    assert reopen(r, {"type": "SyntaxError", "message": "x"}, None, [], CORPUS, 5) is None
    assert reopen(r, {"type": "NoProgram", "message": "x"}, None, [], CORPUS, 5) is None and not r.asked
    tools, result = reopen(r, {"type": "NameError", "message": "name 'weather' is not defined"}, None, [],
                           CORPUS, 5)  # type: ignore[misc]
    assert [t.name for t in tools] == ["forecast"] and r.asked == ["NameError: name 'weather' is not defined"]

    class Plain:
        name = "p"

        def search(self, query: str, k: int = 5) -> Any:
            raise AssertionError

    assert reopen(Plain(), {"type": "ToolError", "message": "x"}, "t", [], CORPUS, 5) is None


def test_a_runaway_agent_still_leaves_its_pool(server: ScriptedOpenAI, client: ModelClient) -> None:
    server.router = scripted({
        ("meta", 1): calls(call("create_agent_category_level", {"category": "Finance"})),
        ("category:Finance", 1): calls(call("create_agent_tool_level", {"tools": ["quotes"]})),
        ("tool:quotes", 1): calls(call("add_API_into_API_pool", {"apis": ["stock_quote"]})),
        ("tool:quotes", 2): calls(call("get_API_detail", "[1, 2]")),
    }, default=calls(call("get_APIs_in_tool", {"tool": "quotes"})))  # the tool agent never finishes
    retriever = AnyTool(CORPUS, client, AnyToolSettings(max_turns=4))
    result = retriever.search("latest stock quote for ACME")
    assert result.retriever == "anytool" and [h.name for h in result.hits] == ["stock_quote"]
    third = [r for r in server.requests if kind(r) == "tool:quotes" and turn(r) == 3][0]
    assert "must be a JSON object" in third["messages"][-1]["content"]
    assert {a.label: a.status for a in retriever.agents}["tool:Finance/quotes"] == "turns"
    assert any("stopped after 4 turns" in n for n in result.notes)


def test_a_huge_tool_is_split_for_its_agents() -> None:
    from atc.retrieval.anytool_functions import Catalog

    big = [Tool(name=f"repo_{i}", collection="gh", group="GitHub", path=f"/v3/repos/{{id}}/x{i}") for i in range(50)]
    big += [Tool(name=f"user_{i}", collection="gh", group="GitHub", path=f"/v3/users/u{i}") for i in range(30)]
    groups = Catalog(big).tree["uncategorized"]
    assert {k: len(v) for k, v in groups.items()} == {"GitHub /repos": 40, "GitHub /repos (2)": 10,
                                                      "GitHub /users": 30}


def test_the_round_has_a_wall_clock(server: ScriptedOpenAI, client: ModelClient) -> None:
    server.router = lambda body: calls(call("get_tools_in_category", {"category": "Movies"}), delay=0.3)
    result = AnyTool(CORPUS, client, AnyToolSettings(max_seconds=0.5, max_turns=50)).search("films")
    assert 1 <= len(server.requests) <= 3 and result.usage["llm_calls"] == len(server.requests)
    assert any("0.5 s are spent" in n for n in result.notes), result.notes


def test_an_unknown_retriever_is_refused_before_anything_starts(server: ScriptedOpenAI, client: ModelClient) -> None:
    from atc.errors import UsageError

    with pytest.raises(UsageError, match="unknown retriever 'nope'"):
        solve("anything", [load_data(GoneAPI.spec_for("http://127.0.0.1:9"), name="x")], client=client,
              retriever="nope", sandbox="local")
    assert server.requests == []
