"""``react`` and ``dfsdt`` end to end: both real model clients (atc's HTTP client and the
``openai`` package, picked by ``ATC_MODEL_CLIENT``) against the scripted OpenAI-compatible server,
which plays the function-calling protocol, wrong moves included; the tools are the library API on
127.0.0.1, called through the episode's gateway (no sandbox)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atc.llm.chat import ToolCallRequest
from atc.loop.solving import Solution, solve
from atc.loop.strategies.base import Episode
from atc.loop.strategies.functions import act as make_call
from atc.loop.strategies.meter import Meter
from protocols.model import Collection
from sandbox.api import Limits, Toolset
from tests.support.apis.library import SECRET, LibraryAPI
from tests.support.fakes.openai_server import Reply, ScriptedOpenAI, call
from tests.support.strategies import library as library
from tests.support.strategies import model as model
from tests.support.strategies import server as server


def act(name: str, args: dict[str, object] | str, text: str = "") -> Reply:
    return Reply(text=text, tool_calls=(call(name, args),))


def tool_message(server: ScriptedOpenAI, index: int) -> str:
    """The last tool answer the model was sent in request ``index``."""
    last = [m for m in server.requests[index]["messages"] if m["role"] == "tool"][-1]
    return str(last["content"])


# -- react ----------------------------------------------------------------------------------------


def test_react_recovers_from_wrong_moves(server: ScriptedOpenAI, model: str, library: Collection,
                                         api: LibraryAPI) -> None:
    server.push(
        act("find_author", {"name": "Lem"}, "I will look the author up."),      # a tool that does not exist
        act("search_authors", {"nme": "Lem"}),                                  # an argument it does not take
        act("search_authors", {"name": "Lem"}),
        act("list_author_books", '{"author_id": 2'),                            # arguments that are not JSON
        act("list_author_books", {"author_id": 2}),
        "The cheapest is The Cyberiad.",                                        # no function call at all
        act("finish", {"answer": "The Cyberiad (8.75)"}),
    )
    sol = solve("Which is the cheapest book by Stanislaw Lem?", library, strategy="react", limits=Limits(timeout=20))

    assert sol.ok and sol.answer == "The Cyberiad (8.75)" and sol.strategy == "react"
    assert sol.steps == 7 and sol.usage.llm_calls == len(server.requests) == 7
    assert sol.failures == {"unknown_tool": 1, "bad_arguments": 1, "malformed_call": 1, "no_action": 1}
    # every call went through the gateway: the refused one is logged, and never reached the API
    assert [(c.tool, c.ok, c.failure) for c in sol.calls] == [
        ("search_authors", False, "arguments"), ("search_authors", True, None), ("list_author_books", True, None)]
    assert sol.api_calls == 3 and sol.sandbox is None and sol.program == "" and sol.attempts == []
    assert [r.path for r in api.requests] == ["/authors?name=Lem", "/authors/2/books"]
    # what the model read after each wrong move
    assert "no tool named 'find_author'" in tool_message(server, 1) and "search_authors" in tool_message(server, 1)
    assert "unknown argument 'nme'" in tool_message(server, 2)
    assert "Stanislaw Lem" in tool_message(server, 3)
    assert "not valid JSON" in tool_message(server, 4)
    assert "The Cyberiad" in tool_message(server, 5)
    assert "finish" in server.requests[6]["messages"][-1]["content"]  # the nudge after a reply without a call
    assert server.offered(0) == [t.name for t in library.tools] + ["finish"]
    assert server.requests[0]["tool_choice"] == "auto"
    turns = sol.trace["turns"]
    assert [t.get("failure") for t in turns] == ["unknown_tool", None, None, "malformed_call", None, "no_action", None]
    assert turns[0]["thought"] == "I will look the author up." and turns[-1]["answer"] == "The Cyberiad (8.75)"
    doc = json.loads(json.dumps(sol.to_dict()))
    assert Solution.from_dict(doc).to_dict() == {**doc, "duration_ms": doc["duration_ms"]}


def test_react_that_never_finishes_stops_at_its_turns(server: ScriptedOpenAI, model: str,
                                                      library: Collection) -> None:
    server.router = lambda body: act("get_stats", {})
    sol = solve("How many books?", library, strategy="react", max_steps=3)
    assert not sol.ok and sol.answer == "" and sol.steps == 3 == len(server.requests)
    assert sol.error is not None and sol.error["type"] == "StepLimit" and "finish" in sol.error["message"]
    assert sol.failures == {"step_limit": 1} and sol.api_calls == 3 and len(sol.calls) == 3


def test_react_credentials_reach_the_api_never_the_model(server: ScriptedOpenAI, model: str, library: Collection,
                                                         api: LibraryAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIB_KEY", SECRET)
    server.push(act("create_order", {"book_id": 20, "quantity": 2}), act("finish", {"answer": "22.5"}))
    sol = solve("Order two copies of Solaris; what is the total?", library, strategy="react",
                credentials={"api_key": "env:LIB_KEY"})
    assert sol.ok and sol.answer == "22.5"
    assert [r.headers.get("X-API-Key") for r in api.requests] == [SECRET]
    assert all(SECRET not in json.dumps(body) for body in server.requests)
    assert '"total": 22.5' in tool_message(server, 1)


def test_react_long_responses_are_condensed(server: ScriptedOpenAI, model: str, library: Collection,
                                            api: LibraryAPI) -> None:
    from atc.loop.strategies.react import React

    server.push(act("list_book_reviews", {"book_id": 10}), act("finish", {"answer": "ana"}))
    sol = solve("Who reviewed A Wizard of Earthsea first?", library, strategy=React(max_observation=60))
    seen = tool_message(server, 1)
    assert sol.ok and "shape:" in seen and "excerpt:" in seen and '"user"' in seen and len(seen) < 700


# -- dfsdt ----------------------------------------------------------------------------------------


def test_dfsdt_backs_out_of_a_dead_end(server: ScriptedOpenAI, model: str, library: Collection,
                                       api: LibraryAPI) -> None:
    server.push(
        act("list_book_reviews", {"book_id": 21}),                              # node 1: the wrong book, no reviews
        act("finish", {"return_type": "give_up_and_restart"}),                  # node 2: a dead end
        act("search_authors", {"name": "Lem"}),                                 # node 3: from the root again
        act("list_author_books", {"author_id": 2}),                             # node 4
        act("list_book_reviews", {"book_id": 20}),                              # node 5
        act("finish", {"return_type": "give_answer", "final_answer": "dee gave Solaris 4 stars"}),  # node 6
    )
    sol = solve("Who reviewed Solaris, and how many stars?", library, strategy="dfsdt")

    assert sol.ok and sol.answer == "dee gave Solaris 4 stars" and sol.strategy == "dfsdt"
    assert sol.steps == 6 and sol.usage.llm_calls == 6
    tree = sol.trace
    nodes = {n["id"]: n for n in tree["nodes"]}
    assert nodes[0]["children"] == [1, 3] and nodes[1]["children"] == [2]
    assert [nodes[i]["status"] for i in range(1, 7)] == ["ok", "gave_up", "ok", "ok", "ok", "answer"]
    assert tree["path"] == [0, 3, 4, 5, 6] and tree["answer_node"] == 6
    # the answer's calls are the final path's; every branch's calls are counted
    assert [(c.tool, c.args) for c in sol.calls] == [("search_authors", {"name": "Lem"}),
                                                    ("list_author_books", {"author_id": 2}),
                                                    ("list_book_reviews", {"book_id": 20})]
    assert sol.api_calls == 4 and [r.path for r in api.requests][0].startswith("/books/21/reviews")
    assert sol.failures == {"gave_up": 1}
    # the restart is from the root's state: the dead end is not in the conversation, only named
    # in the request to do something different
    restart = server.requests[2]["messages"]
    assert [m["role"] for m in restart] == ["system", "user", "user"]
    assert "list_book_reviews" in restart[-1]["content"] and "different" in restart[-1]["content"]
    assert server.offered(0)[-1] == "finish"
    fn = server.requests[0]["tools"][-1]["function"]
    assert fn["parameters"]["properties"]["return_type"]["enum"] == ["give_answer", "give_up_and_restart"]


def test_dfsdt_node_budget_bounds_a_model_that_never_finishes(server: ScriptedOpenAI, model: str,
                                                              library: Collection) -> None:
    server.router = lambda body: act("get_stats", {})
    sol = solve("How many books?", library, strategy="dfsdt", max_steps=4)
    assert not sol.ok and sol.steps == 4 == len(server.requests) and sol.api_calls == 4
    assert sol.error is not None and sol.error["type"] == "StepLimit" and "node budget (4)" in sol.error["message"]
    assert sol.failures == {"step_limit": 1} and sol.trace["answer_node"] is None


def test_dfsdt_exhausted_tree_says_so(server: ScriptedOpenAI, model: str, library: Collection) -> None:
    from atc.loop.strategies.dfsdt import Dfsdt
    from atc.loop.strategies.settings import DfsdtSettings, profile_of

    # atc's own profile (a give-up at the root restarts), width 2, depth 2 turns: every path gives up
    server.router = lambda body: act("finish", {"return_type": "give_up_and_restart"})
    sol = solve("Anything?", library, strategy=Dfsdt(settings=profile_of(DfsdtSettings, "atc"), width=2, max_depth=2))
    assert not sol.ok and sol.error is not None and sol.error["type"] == "SearchExhausted"
    assert sol.failures == {"gave_up": sol.steps} and sol.steps == 2  # each give-up goes back past the root


def test_dfsdt_published_a_give_up_at_the_root_ends_the_search(server: ScriptedOpenAI, model: str,
                                                                library: Collection) -> None:
    """ToolBench's DFS returns from the root when the first state is given up: one node, no answer."""
    server.router = lambda body: act("finish", {"return_type": "give_up_and_restart"})
    sol = solve("Anything?", library, strategy="dfsdt")
    assert not sol.ok and sol.error is not None and sol.error["type"] == "GaveUp"
    assert sol.steps == 1 == len(server.requests) and sol.failures == {"gave_up": 1}
    assert sol.trace["root_give_up"] == "end" and sol.settings is not None and sol.settings["max_nodes"] == 200


# -- any function call the model sends is answered, never raised -----------------------------------

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                     max_leaves=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["get_book", "search_authors", "get_stats", "nope", ""]),
       arguments=st.one_of(st.text(max_size=40), _JSON.map(json.dumps)))
def test_any_function_call_becomes_an_observation(name: str, arguments: str, library: Collection) -> None:
    episode = Episode("q", Toolset([library]), library.tools, Meter(_NoModel()), Limits(max_calls=5))
    action = make_call(episode, ToolCallRequest("c1", name, arguments))
    assert isinstance(action.observation, str) and action.observation
    assert action.ok == (action.call is not None and action.call.ok)
    kinds = episode.failures_by_kind()
    assert sum(kinds.values()) == (0 if action.ok else 1)


class _NoModel:
    model = "none"

    def complete(self, messages: object, **kw: object) -> object:
        raise AssertionError("no model call is expected")
