"""The strategies as the papers ran them: settings resolved once (presets, profiles, changes, the
bound flags), ``NAME@k`` reruns, the plain-text ReAct, ToolBench's depth in tree levels and its
give-up, every requested call recorded (made-up names, refused calls, programs the static check
stopped), and model turns counted apart from HTTP requests.

The model is the scripted OpenAI-compatible server through atc's HTTP client; the tools are the
library API on 127.0.0.1; programs run in the local sandbox."""

from __future__ import annotations

import pickle
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from atc.errors import UsageError
from atc.loop.solving import solve
from atc.loop.strategies import ChainSettings, DfsdtSettings, ReactSettings, choose, make
from atc.loop.strategies.registry import PRESET_STRATEGIES, split_name
from atc.loop.strategies.textformat import parse_reply
from protocols.model import Collection
from sandbox.api import Limits
from tests.support.apis.library import LibraryAPI
from tests.support.fakes.openai_server import Reply, ScriptedOpenAI, call
from tests.support.strategies import library as library
from tests.support.strategies import server as server

LIMITS = Limits(timeout=20)


@pytest.fixture()
def model(server: ScriptedOpenAI, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedOpenAI]:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("ATC_MODEL", "scripted-model")
    yield server


def act(name: str, args: dict[str, object] | str, text: str = "") -> Reply:
    return Reply(text=text, tool_calls=(call(name, args),))


def fence(code: str) -> str:
    return f"```python\n{textwrap.dedent(code).strip()}\n```"


# -- settings, resolved once ----------------------------------------------------------------------


def test_presets_profiles_changes_and_flags_resolve_in_that_order() -> None:
    assert choose("chain").settings == ChainSettings(max_attempts=4, profile="atc")
    assert choose("chain", preset="paper").settings == ChainSettings(max_attempts=3, profile="paper")
    # an explicit flag wins over the preset: --max-reflections 3 is 4 programs
    assert choose("chain", preset="paper", max_reflections=3).settings.max_attempts == 4  # type: ignore[union-attr]
    dfsdt = choose("dfsdt").settings
    assert isinstance(dfsdt, DfsdtSettings) and (dfsdt.max_depth, dfsdt.depth_unit, dfsdt.max_nodes,
                                                  dfsdt.root_give_up) == (12, "levels", 200, "end")
    mine = choose("dfsdt", changes={"profile": "atc", "max_nodes": "40"}, max_steps=50).settings
    assert isinstance(mine, DfsdtSettings) and (mine.max_depth, mine.depth_unit, mine.max_nodes,
                                                mine.root_give_up) == (10, "turns", 50, "retry")
    react = choose("react-text@3", preset="paper")
    assert (react.base, react.runs, react.name) == ("react-text", 3, "react-text@3")
    assert isinstance(react.settings, ReactSettings) and react.settings.format == "text"
    assert (react.settings.max_levels, react.settings.give_up, react.settings.observation) == (12, True, "truncate")
    assert choose("codeact").settings.max_turns == 10  # type: ignore[union-attr]
    assert PRESET_STRATEGIES["paper"] == ["react", "react@3", "codeact", "dfsdt", "dfsdt@3", "chain"]
    # a Choice is a plain value: it travels to other processes, and names what it ran
    again = pickle.loads(pickle.dumps(react))
    assert again == react and again.to_dict()["until"] == "answer" and again.make().name == "react-text@3"


@pytest.mark.parametrize("call_args, message", [
    ({"name": "dfsdt", "preset": "fast"}, "unknown preset 'fast'"),
    ({"name": "dfsdt", "changes": {"profile": "quick"}}, "no DfsdtSettings profile 'quick'"),
    ({"name": "dfsdt", "changes": {"max_nodez": 3}}, "has no setting max_nodez"),
    ({"name": "dfsdt", "changes": {"max_nodes": "many"}}, "takes a whole number"),
    ({"name": "dfsdt", "changes": {"root_give_up": "sulk"}}, "root_give_up must be one of end, retry"),
    ({"name": "react", "changes": {"format": "xml"}}, "format must be one of functions, text"),
    ({"name": "react@0"}, "after @ comes the number of runs"),
    ({"name": "react@x"}, "after @ comes the number of runs"),
    ({"name": "astrology@3"}, "unknown strategy 'astrology'"),
    ({"name": "chain", "max_reflections": -1}, "--max-reflections must be 0 or more"),
])
def test_bad_settings_are_usage_errors_before_anything_runs(call_args: dict[str, Any], message: str) -> None:
    name = call_args.pop("name")
    with pytest.raises(UsageError, match=message):
        choose(name, **call_args)


def test_names_with_runs() -> None:
    assert split_name("dfsdt@3") == ("dfsdt", 3) and split_name(" react ") == ("react", 1)
    assert make("react@2", max_steps=4).name == "react@2"


# -- NAME@k --------------------------------------------------------------------------------------


def test_react_at_k_reruns_until_a_run_answers_and_counts_every_run(model: ScriptedOpenAI, library: Collection,
                                                                    api: LibraryAPI) -> None:
    model.push(act("search_authors", {"name": "Lem"}),                          # run 1: a call, then it gives up
               act("finish", {"return_type": "give_up_and_restart"}),
               act("get_stats", {}),                                              # run 2: another way, answered
               act("finish", {"return_type": "give_answer", "final_answer": "8 books"}))
    sol = solve("How many books?", library, strategy=choose("react@3", preset="paper"), limits=LIMITS)
    assert sol.ok and sol.answer == "8 books" and sol.strategy == "react@3"
    assert sol.steps == 4 and sol.usage.model_turns == 4 == len(model.requests)
    assert sol.api_calls == 2 and [c.tool for c in sol.calls] == ["get_stats"]  # the answering run's calls
    assert [r["tool"] for r in sol.requested] == ["search_authors", "get_stats"]  # every run's
    assert [r["ok"] for r in sol.trace["runs"]] == [False, True] and sol.trace["answer_run"] == 2
    assert sol.trace["runs"][0]["error"] == "GaveUp" and sol.failures == {"gave_up": 1}
    assert sol.settings is not None and sol.settings["runs"] == 3 and sol.settings["profile"] == "toolbench"
    # each run starts afresh: the second run's first request is the task alone
    assert [m["role"] for m in model.requests[2]["messages"]] == ["system", "user"]


def test_a_run_at_k_stops_at_k(model: ScriptedOpenAI, library: Collection, api: LibraryAPI) -> None:
    model.router = lambda body: act("finish", {"return_type": "give_up_and_restart"})
    sol = solve("How many books?", library, strategy="dfsdt@2", limits=LIMITS)
    assert not sol.ok and sol.error is not None and sol.error["type"] == "GaveUp"
    assert sol.steps == 2 == len(model.requests) and len(sol.trace["runs"]) == 2


def test_until_exec_also_reruns_an_answer_that_reads_as_an_error(model: ScriptedOpenAI, library: Collection,
                                                                  api: LibraryAPI) -> None:
    model.push(act("finish", {"answer": "Error: the stats were not found"}), act("finish", {"answer": "8 books"}))
    sol = solve("How many books?", library, strategy=choose("react@3", until="exec"), limits=LIMITS)
    assert sol.answer == "8 books" and sol.steps == 2 and sol.trace["until"] == "exec"
    model.push(act("finish", {"answer": "Error: the stats were not found"}))
    plain = solve("How many books?", library, strategy="react@3", limits=LIMITS)  # until an answer: the first
    assert plain.ok and plain.steps == 1 and plain.trace["until"] == "answer"
    with pytest.raises(UsageError, match="use one of answer, exec"):
        choose("react@3", until="judge")


# -- the published DFSDT: depth in tree levels ------------------------------------------------------


def test_dfsdt_counts_toolbenchs_tree_levels_a_thought_is_one_more(model: ScriptedOpenAI, library: Collection,
                                                                   api: LibraryAPI) -> None:
    """12 levels: 4 turns of thought + call (3 levels each), then the path is a dead end."""
    model.router = lambda body: act("get_stats", {}, text="Let me look at the counts again.")
    sol = solve("How many books?", library, strategy=choose("dfsdt", changes={"width": 1}), limits=LIMITS)
    nodes = sol.trace["nodes"]
    assert [n["level"] for n in nodes] == [0, 3, 6, 9, 12] and nodes[-1]["status"] == "dead_end"
    assert sol.error is not None and sol.error["type"] == "SearchExhausted" and sol.steps == 4
    # without thoughts a turn is 2 levels: 6 turns a path
    model.router = lambda body: act("get_stats", {})
    quiet = solve("How many books?", library, strategy=choose("dfsdt", changes={"width": 1}), limits=LIMITS)
    assert quiet.steps == 6


def test_toolbench_observations_are_cut_at_1024_characters(model: ScriptedOpenAI, library: Collection,
                                                           api: LibraryAPI) -> None:
    model.push(act("list_book_reviews", {"book_id": 10}), act("finish", {"return_type": "give_up_and_restart"}))
    solve("Reviews?", library, strategy=choose("dfsdt", changes={"max_observation": 60}), limits=LIMITS)
    seen = [m for m in model.requests[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert len(seen) == 63 and seen.endswith("...") and "shape:" not in seen


# -- the plain-text ReAct -------------------------------------------------------------------------


def test_text_react_episode(model: ScriptedOpenAI, library: Collection, api: LibraryAPI) -> None:
    model.push(
        "Thought: find the author.\nAction: find_author\nAction Input: {\"name\": \"Lem\"}",    # a made-up tool
        "Thought: the real one.\nAction: search_authors\nAction Input: ```json\n{\"name\": \"Lem\"}\n```\n"
        "Observation: {\"results\": [{\"id\": 99}]}",                                         # an imagined observation
        "Thought: his books.\nAction: list_author_books\nAction Input: {\"author_id\": 2",    # arguments not JSON
        "I think I know now.",                                                                  # no action
        "Thought: retry.\nAction: list_author_books\nAction Input: {\"author_id\": 2}",
        "Thought: done.\nFinal Answer: Solaris and The Cyberiad")
    sol = solve("Which books did Stanislaw Lem write?", library, strategy="react-text", limits=LIMITS)
    assert sol.ok and sol.answer == "Solaris and The Cyberiad" and sol.strategy == "react-text"
    assert all("tools" not in r for r in model.requests)  # no function calling at all
    assert sol.failures == {"unknown_tool": 1, "malformed_call": 1, "no_action": 1}
    assert [(r["tool"], r["fate"]) for r in sol.requested] == [
        ("find_author", "unknown_tool"), ("search_authors", "sent"), ("list_author_books", "malformed"),
        ("list_author_books", "sent")]
    second = model.requests[2]["messages"]
    # the imagined observation was cut from what the model said; the real one follows
    assert "99" not in second[-2]["content"] and second[-1]["content"].startswith("Observation: ")
    assert "Stanislaw Lem" in second[-1]["content"]
    assert "no tool named 'find_author'" in model.requests[1]["messages"][-1]["content"]
    assert "Action Input" in model.requests[4]["messages"][-1]["content"]  # the nudge after no action
    system = model.requests[0]["messages"][0]["content"]
    assert "Action: the name of ONE tool" in system and "- search_authors:" in system


@pytest.mark.parametrize("reply, action, arguments, final", [
    ("Thought: x\nAction: get_book\nAction Input: {\"book_id\": 3}", "get_book", '{"book_id": 3}', None),
    ("Action: `get_book`\nAction Input: {\"book_id\": 3} and then I will see", "get_book", '{"book_id": 3}', None),
    ("Action: get_stats\n", "get_stats", "{}", None),
    ("Thought: y\nFinal Answer: 42", None, "", "42"),
    ("just words", None, "", None),
])
def test_text_replies_are_read(reply: str, action: str | None, arguments: str, final: str | None) -> None:
    read = parse_reply(reply)
    assert (read.action, read.arguments, read.final) == (action, arguments, final)


# -- every requested call ---------------------------------------------------------------------------


def test_chain_records_the_calls_of_a_program_the_static_check_stopped(model: ScriptedOpenAI, library: Collection,
                                                                       api: LibraryAPI) -> None:
    model.push(fence("d = find_director(title='x')\nprint(get_book(book_id=20)['title'])"),
               fence("print(get_book(book_id=20)['title'])"))
    sol = solve("Title of book 20?", library, sandbox="local", limits=LIMITS)
    assert sol.ok and sol.api_calls == 1
    assert [(r["tool"], r["fate"], r["answer"]) for r in sol.requested] == [
        ("find_director", "unknown_tool", False), ("get_book", "not_run", False), ("get_book", "sent", True)]
    assert sol.requested[-1]["response"]["title"] == "Solaris" and sol.requested[1]["method"] == "GET"


def test_react_records_refused_made_up_and_second_calls(model: ScriptedOpenAI, library: Collection,
                                                        api: LibraryAPI) -> None:
    model.push(act("find_author", {"name": "Lem"}),
               act("search_authors", {"nme": "Lem"}),
               Reply(tool_calls=(call("get_stats", {}), call("get_book", {"book_id": 1}))),
               act("finish", {"answer": "8"}))
    sol = solve("How many books?", library, strategy="react", limits=LIMITS)
    assert [(r["tool"], r["fate"]) for r in sol.requested] == [
        ("find_author", "unknown_tool"), ("search_authors", "refused"), ("get_book", "not_run"), ("get_stats", "sent")]
    assert [r["answer"] for r in sol.requested] == [False, True, False, True]


def test_codeact_records_a_made_up_tool_it_called(model: ScriptedOpenAI, library: Collection, api: LibraryAPI) -> None:
    model.push(fence("print(find_director(title='x'))"), "Final answer: unknown")
    sol = solve("Who?", library, strategy="codeact", sandbox="local", limits=LIMITS)
    assert [(r["tool"], r["fate"]) for r in sol.requested] == [("find_director", "unknown_tool")]


# -- model turns and HTTP requests ---------------------------------------------------------------------


def test_model_turns_are_counted_apart_from_http_requests(model: ScriptedOpenAI, library: Collection,
                                                          api: LibraryAPI) -> None:
    model.push(Reply(429, "slow down", {"retry-after-ms": "5"}), act("get_stats", {}),
               Reply(503, "busy", {"retry-after-ms": "5"}), Reply(429, "again", {"retry-after-ms": "5"}),
               act("finish", {"answer": "8"}))
    sol = solve("How many books?", library, strategy="react", limits=LIMITS)
    assert sol.ok and sol.usage.model_turns == 2 and sol.usage.llm_calls == 5 == len(model.requests)
    assert sol.to_dict()["usage"]["model_turns"] == 2
