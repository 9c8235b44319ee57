"""The metric definitions of ``atc eval``, checked on hand-made cases: Path% and Prec% with
repeated calls, order, extra tools and ``METHOD /path`` gold; the summary's arithmetic; the
judge's replies read (or refused); suites read (or refused, every bad line named)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from atc.errors import UsageError
from atc.evaluation.gold import match, parse_step, route_key
from atc.evaluation.labels import parse_label, parse_preference
from atc.evaluation.metrics import reads_as_error, score_line, summarize
from atc.evaluation.suite import EvalTask, parse_suite_lines


def call(tool: str, method: str = "GET", path: str = "/x", status: int | None = 200) -> dict[str, Any]:
    return {"tool": tool, "method": method, "path": path, "status": status, "ok": status == 200, "args": {}}


SEARCH = call("search_person", "GET", "/search/person")
CREDITS = call("person_credits", "GET", "/person/{person_id}/movie_credits")
DETAIL = call("get_person", "GET", "/person/{person_id}")
POPULAR = call("movie_popular", "GET", "/movie/popular")


# -- Path% and Prec% ----------------------------------------------------------------------------


def test_every_gold_tool_called_once_in_order() -> None:
    m = match(["search_person", "person_credits"], [SEARCH, CREDITS])
    assert (m.path, m.precision) == (1.0, 1.0)


def test_order_does_not_count() -> None:
    m = match(["search_person", "person_credits"], [CREDITS, SEARCH])
    assert (m.path, m.precision) == (1.0, 1.0)


def test_repeated_calls_count_once_for_both_metrics() -> None:
    m = match(["search_person", "person_credits"], [SEARCH, SEARCH, SEARCH, CREDITS, SEARCH])
    assert (m.path, m.precision) == (1.0, 1.0)
    # a repeated extra tool is still one extra tool
    m = match(["search_person"], [SEARCH, POPULAR, POPULAR, POPULAR])
    assert (m.path, m.precision) == (1.0, 0.5)


def test_extra_tools_lower_precision_not_path() -> None:
    m = match(["search_person", "person_credits"], [SEARCH, POPULAR, CREDITS, DETAIL])
    assert m.path == 1.0
    assert m.precision == pytest.approx(2 / 4)
    assert m.extra == ("movie_popular", "get_person")


def test_a_missed_gold_tool_lowers_path_not_precision() -> None:
    m = match(["search_person", "person_credits", "get_person"], [SEARCH, CREDITS])
    assert m.path == pytest.approx(2 / 3)
    assert m.precision == 1.0
    assert m.missed == ("get_person",)


def test_repeated_gold_steps_count_once() -> None:
    m = match(["GET /search/movie", "GET /search/movie "], [call("search_movie", "GET", "/search/movie")])
    assert (m.path, m.precision, m.found) == (1.0, 1.0, ("GET /search/movie",))


def test_route_gold_matches_method_and_path_template() -> None:
    gold = ["GET /search/person", "GET /person/{person_id}/movie_credits"]
    assert match(gold, [SEARCH, CREDITS]).path == 1.0
    # the parameter's name does not matter (RestBench's TMDB gold has /person/{movie_id}/movie_credits)
    assert match(["GET /person/{movie_id}/movie_credits"], [CREDITS]).path == 1.0
    # the method does
    assert match(["POST /search/person"], [SEARCH]).path == 0.0
    # and so does every literal segment
    assert match(["GET /person/{id}/tv_credits"], [CREDITS]).path == 0.0
    # stray spaces and a trailing slash do not
    assert match([" GET /search/person/ "], [SEARCH]).path == 1.0


def test_url_gold_matches_below_the_servers_base_path() -> None:
    # ToolFlow writes gold as METHOD and full URL: TMDB's server path (/3) comes before the operation's
    assert match(["GET https://api.themoviedb.org/3/search/person"], [SEARCH]).path == 1.0
    assert match(["GET https://api.themoviedb.org/3/person/{person_id}/movie_credits"], [CREDITS]).path == 1.0
    assert match(["GET https://api.example.org/search/person"], [SEARCH]).path == 1.0
    # whole segments only, and the method still counts
    assert match(["GET https://x.org/3/research/person"], [SEARCH]).path == 0.0
    assert match(["POST https://x.org/3/search/person"], [SEARCH]).path == 0.0
    assert parse_step("GET https://x.org/3/a/{id}").key == "GET /3/a/{}"


def test_tool_name_gold_and_route_gold_together() -> None:
    m = match(["search_person", "GET /person/{person_id}"], [SEARCH, DETAIL, POPULAR])
    assert m.path == 1.0
    assert m.precision == pytest.approx(2 / 3)


def test_failed_and_refused_calls_still_count_as_chosen() -> None:
    refused = call("person_credits", "GET", "/person/{person_id}/movie_credits", status=None)
    missing = call("search_person", "GET", "/search/person", status=404)
    m = match(["search_person", "person_credits"], [missing, refused])
    assert (m.path, m.precision) == (1.0, 1.0)


def test_no_call_at_all() -> None:
    m = match(["search_person"], [])
    assert (m.path, m.precision) == (0.0, 0.0)
    # nothing needed and nothing done is perfect; something done when nothing was needed is not
    assert (match([], []).path, match([], []).precision) == (1.0, 1.0)
    assert (match([], [SEARCH]).path, match([], [SEARCH]).precision) == (1.0, 0.0)


def test_route_keys() -> None:
    assert route_key("get", "/a/{b}/c/") == "GET /a/{}/c"
    assert route_key("GET", "/") == "GET /"
    assert route_key("GET", "/a?x=1") == "GET /a"
    assert parse_step("GET /a/{b}").kind == "route"
    assert parse_step("get_a").kind == "tool"
    with pytest.raises(ValueError):
        parse_step("  ")


TOOLS = st.sampled_from([SEARCH, CREDITS, DETAIL, POPULAR])
GOLD = st.lists(st.sampled_from(["search_person", "person_credits", "GET /person/{id}", "GET /movie/popular"]),
                min_size=1, max_size=4)


@given(GOLD, st.lists(TOOLS, max_size=8), st.randoms())
def test_order_and_repetition_never_change_the_numbers(gold: list[str], calls: list[dict[str, Any]], rnd: Any) -> None:
    m = match(gold, calls)
    assert 0.0 <= m.path <= 1.0 and 0.0 <= m.precision <= 1.0
    shuffled = calls + calls[: len(calls) // 2]
    rnd.shuffle(shuffled)
    again = match(list(reversed(gold)) + gold[:1], shuffled)
    assert (again.path, again.precision) == (m.path, m.precision)


# -- a result line scored, and the summary ------------------------------------------------------


def line(calls: list[dict[str, Any]], *, ok: bool = True, answer: str = "42", **extra: Any) -> dict[str, Any]:
    return {"id": "t", "ok": ok, "answer": answer, "calls": calls, "duration_ms": 1500.0,
            "usage": {"llm_calls": 2, "prompt_tokens": 300, "completion_tokens": 40},
            "attempts": [{"program": "x", "ok": False, "error": {"type": "KeyError"}, "calls": 1},
                         {"program": "y", "ok": ok, "error": None, "calls": len(calls)}], **extra}


TASK = EvalTask("t", "q", ("search_person", "GET /person/{person_id}/movie_credits"))


def test_a_result_line_is_scored_from_its_own_fields() -> None:
    s = score_line(line([SEARCH, POPULAR, CREDITS]), TASK, "chain")
    assert s.calls == ["search_person", "movie_popular", "person_credits"]
    assert (s.path, s.precision) == (1.0, pytest.approx(2 / 3))
    assert (s.model_calls, s.prompt_tokens, s.completion_tokens) == (2, 300, 40)
    assert s.api_calls == 1 + 3  # every attempt's calls, not only the last one's
    assert s.steps == 2 and s.wall_s == 1.5
    assert s.failures == {"KeyError": 1}
    d = s.to_dict()
    for key in ("id", "strategy", "ok", "answer", "calls", "path", "precision"):
        assert key in d


def test_a_strategy_line_counts_its_own_api_calls_steps_and_failures() -> None:
    s = score_line(line([SEARCH], api_calls=9, steps=5, failures={"bad_arguments": 2, "wrong_tool": 1},
                        strategy="react"), TASK, "react")
    assert (s.api_calls, s.steps, s.failures, s.strategy) == (9, 5, {"bad_arguments": 2, "wrong_tool": 1}, "react")


def test_summary_means_and_the_pass_rate() -> None:
    scores = [score_line(line(c, ok=ok), TASK, "chain") for c, ok in
              [([SEARCH, CREDITS], True), ([SEARCH], True), ([], False), ([SEARCH, POPULAR], True)]]
    for s, label in zip(scores, ["solved", "unsure", "unsolved", "solved"], strict=True):
        s.success, s.votes, s.pass_score = label, [label], {"solved": 1.0, "unsure": 0.5, "unsolved": 0.0}[label]
    summary = summarize("chain", scores)
    assert summary.path == pytest.approx((1 + 0.5 + 0 + 0.5) / 4)
    assert summary.precision == pytest.approx((1 + 1 + 0 + 0.5) / 4)
    assert summary.success == pytest.approx((2 + 0.5) / 4) == summary.variants["success_majority"]
    assert summary.labels == {"solved": 2, "unsolved": 1, "unsure": 1, "unjudged": 0}
    assert (summary.model_calls, summary.failed, summary.tasks) == (8, 1, 4)
    assert summary.to_dict()["per_task"]["model_calls"] == 2.0


def test_without_a_judge_success_is_null_never_guessed() -> None:
    summary = summarize("chain", [score_line(line([SEARCH, CREDITS]), TASK, "chain")])
    assert summary.success is None and summary.to_dict()["success"] is None
    assert summary.labels["unjudged"] == 1


# -- the judge's replies ------------------------------------------------------------------------


def test_judge_labels_are_read_or_refused() -> None:
    assert parse_label('{"label": "solved", "reason": "it names the director"}') == ("solved", "it names the director")
    assert parse_label('```json\n{"label": "Unsure", "reason": "vague"}\n```') == ("unsure", "vague")
    assert parse_label('Sure.\n```json\n{"label": "Unsure", "reason": "vague"}\n```') is None  # prose around it
    assert parse_label("I think this is unsolved.") is None
    assert parse_label("no idea") is None
    assert parse_label('{"label": "great"}') is None
    assert parse_preference('{"preference": "B", "reason": "richer"}') == ("b", "richer")
    assert parse_preference('{"preference": "both"}') is None


# -- every requested call, and the other measures ----------------------------------------------


def requested(*calls: dict[str, Any], answer: int = 0) -> list[dict[str, Any]]:
    """Requested-call records; the last ``answer`` of them are the answer's."""
    out = [{**c, "fate": "sent" if c.get("status") else c.get("fate", "refused"), "answer": False} for c in calls]
    for r in out[len(out) - answer:] if answer else []:
        r["answer"] = True
    return out


MADE_UP = {"tool": "find_director", "method": None, "path": None, "status": None, "ok": False, "fate": "unknown_tool"}


def test_every_requested_call_counts_call_by_call_and_the_answers_calls_stay_a_variant() -> None:
    """A first attempt that called a made-up tool and a wrong one (refused), then the gold chain:
    Path% and Prec% count them all; the variants keep the last program's numbers."""
    refused = call("movie_popular", "GET", "/movie/popular", status=None)
    tried = requested(SEARCH, MADE_UP, refused, SEARCH, CREDITS, answer=2)
    s = score_line(line([SEARCH, CREDITS], requested=tried), TASK, "chain")
    assert s.calls == ["search_person", "find_director", "movie_popular", "search_person", "person_credits"]
    assert s.answer_calls == ["search_person", "person_credits"]
    assert s.path == 1.0 and s.precision == pytest.approx(2 / 4)  # 2 of the 4 distinct tools are gold
    assert s.variants["precision_calls"] == pytest.approx(3 / 5)  # 3 of the 5 calls are
    assert (s.variants["path_answer"], s.variants["precision_answer"]) == (1.0, 1.0)
    assert s.extra == ["find_director", "movie_popular"] and s.to_dict()["requested_calls"] == 5
    # a task whose only request was made up has chosen no gold tool
    only = score_line(line([], ok=False, answer="", requested=requested(MADE_UP)), TASK, "react")
    assert (only.path, only.precision, only.calls) == (0.0, 0.0, ["find_director"])


def test_restgpt_correct_path_and_extra_calls() -> None:
    gold = EvalTask("g", "q", ("GET /search/person", "GET /person/{person_id}/movie_credits"))
    in_order = score_line(line([SEARCH, POPULAR, CREDITS], requested=requested(SEARCH, POPULAR, CREDITS)), gold, "c")
    reversed_ = score_line(line([CREDITS, SEARCH], requested=requested(CREDITS, SEARCH)), gold, "c")
    assert (in_order.correct_path, in_order.extra_calls) == (True, 1)
    assert (reversed_.correct_path, reversed_.path) == (False, 1.0)  # order matters here, not for Path%
    in_order.success, reversed_.success = "solved", "unsolved"
    summary = summarize("c", [in_order, reversed_])
    assert summary.correct_path == 0.5 and summary.extra_calls == 1.0  # over the solved task only
    assert summary.variants["extra_calls_correct_path"] == 1.0
    # ToolFlow's gold counts calls: [GET_alerts, 3] is three calls of the path's length
    counted = EvalTask("f", "q", ("search_person",), meta={"calls": {"search_person": 3}})
    assert score_line(line([SEARCH] * 4, requested=requested(*[SEARCH] * 4)), counted, "c").extra_calls == 1


def test_exec_success_is_an_answer_that_does_not_read_as_an_error() -> None:
    assert score_line(line([SEARCH], answer="Sofia Coppola directed it"), TASK, "c").exec_ok
    assert not score_line(line([SEARCH], answer="Error: 404 not found"), TASK, "c").exec_ok
    assert not score_line(line([SEARCH], ok=False, answer="Sofia"), TASK, "c").exec_ok
    assert reads_as_error("The request was invalid") and reads_as_error("No results found.")
    assert not reads_as_error("The Terminal (2004), 128 minutes")


def test_model_turns_and_http_requests_are_counted_apart() -> None:
    s = score_line(line([SEARCH], usage={"llm_calls": 5, "model_turns": 2, "prompt_tokens": 9,
                                         "completion_tokens": 1}), TASK, "c")
    assert (s.model_calls, s.http_requests) == (2, 5)
    old = score_line(line([SEARCH]), TASK, "c")  # a line of before counted requests only
    assert (old.model_calls, old.http_requests) == (2, 2)


# -- suites -------------------------------------------------------------------------------------


def test_every_bad_suite_line_is_named_and_nothing_runs() -> None:
    good = {"id": 1, "query": "q", "solution": ["a", "GET /b"]}
    lines = [json.dumps(good), "not json", json.dumps({"id": True, "query": "q", "solution": ["a"]}),
             json.dumps({"id": 3, "query": "", "solution": ["a"]}), json.dumps({"id": 1, "query": "q", "solution": []}),
             json.dumps({"id": 4, "query": "q", "solution": ["a"], "tools": [1]}), "",
             json.dumps({"id": 5, "query": "q", "solution": ["a"], "solvable": "yes"})]
    with pytest.raises(UsageError) as err:
        parse_suite_lines(lines, "s.jsonl")
    text = err.value.message
    for number in (2, 3, 4, 5, 6, 8):
        assert f"line {number}:" in text
    assert "duplicate id '1'" in text and "line 1:" not in text
    tasks = parse_suite_lines([json.dumps(good), json.dumps({"id": "x", "query": " q2 ", "solution": ["a"],
                                                             "answer": 7, "solvable": False}),
                               json.dumps({"query": "no id", "solution": [["get_a", 3], "GET /b"]})])
    assert [t.id for t in tasks] == ["1", "x", "3"]  # a task without an id gets its line number
    assert tasks[1].query == "q2" and tasks[1].answer == "7" and not tasks[1].solvable
    assert tasks[2].solution == ("get_a", "GET /b")  # ToolFlow's [name, calls] pairs
    with pytest.raises(UsageError, match="no tasks"):
        parse_suite_lines(["", " "])
