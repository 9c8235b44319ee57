"""Static checks: mistakes found from the AST alone, before a sandbox run is spent."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atc.loop.checks import check_program, find_issues
from protocols.loaders import load_data
from protocols.model import Tool
from tests.support.apis.library import library_spec


@pytest.fixture(scope="module")
def tools() -> dict[str, Tool]:
    return {t.name: t for t in load_data(library_spec("http://127.0.0.1:1")).tools}


def test_good_program_has_no_issue(tools: dict[str, Tool]) -> None:
    program = (
        "import json\n"
        "def first_id(name):\n"
        "    return search_authors(name=name)['results'][0]['id']\n"
        "aid = first_id('Lem')\n"
        "opts = {'limit': 2}\n"
        "books = list_author_books(author_id=aid)['books']\n"
        "revs = [list_book_reviews(book_id=b['id'], **opts) for b in books]\n"
        "print(json.dumps(sorted(len(r) for r in revs)), get_stats())\n"
    )
    assert check_program(program, tools) is None


def test_syntax_error_with_line(tools: dict[str, Tool]) -> None:
    err = check_program("x = 1\nprint(x\n", tools)
    assert err is not None and err["type"] == "SyntaxError" and err["line"] in (2, 3) and err["static"] is True
    assert err["tool"] is None


def test_unknown_function_suggests_a_tool(tools: dict[str, Tool]) -> None:
    err = check_program("r = search_author(name='Lem')\nprint(r)\n", tools)
    assert err is not None
    assert err["type"] == "NameError" and err["line"] == 1 and "'search_authors'" in err["message"]
    assert err["code"] == "r = search_author(name='Lem')"


def test_unknown_argument_names_tool_and_parameters(tools: dict[str, Tool]) -> None:
    err = check_program("print(1)\nb = get_book(id=10)\n", tools)
    assert err is not None
    assert (err["type"], err["tool"], err["line"]) == ("ToolError", "get_book", 2)
    assert "unknown argument 'id'" in err["message"] and "book_id" in err["message"]


def test_missing_required_argument(tools: dict[str, Tool]) -> None:
    err = check_program("r = list_book_reviews(limit=2)\n", tools)
    assert err is not None and err["tool"] == "list_book_reviews" and "'book_id'" in err["message"]


def test_positional_arguments_to_a_tool(tools: dict[str, Tool]) -> None:
    err = check_program("print(get_author(1))\n", tools)
    assert err is not None and err["tool"] == "get_author" and "keyword arguments only" in err["message"]
    assert "get_author(author_id)" in err["message"]


def test_spread_kwargs_skip_the_missing_check_but_not_unknown_names(tools: dict[str, Tool]) -> None:
    assert check_program("kw = {'book_id': 10}\nprint(get_book(**kw))\n", tools) is None
    err = check_program("kw = {}\nprint(get_book(bookid=1, **kw))\n", tools)
    assert err is not None and "Did you mean 'book_id'" in err["message"]


def test_helper_that_shadows_a_tool_is_not_checked(tools: dict[str, Tool]) -> None:
    assert check_program("def get_book(x):\n    return x\nprint(get_book(3))\n", tools) is None


def test_several_issues_are_listed_in_order(tools: dict[str, Tool]) -> None:
    program = "a = get_book(bookid=1)\nb = fetch_all()\nc = get_author(1)\n"
    issues = find_issues(program, tools)
    assert [i.line for i in issues] == [1, 2, 3]  # bookid is reported once, with book_id suggested
    err = check_program(program, tools)
    assert err is not None and err["line"] == 1 and "line 2" in err["message"] and "line 3" in err["message"]


def test_method_calls_and_builtins_are_fine(tools: dict[str, Tool]) -> None:
    assert check_program("import math\nprint(math.floor(2.5), len([1]), sorted({}), ToolError)\n", tools) is None


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("get_book(id=1, **k)\n :x'\"[]{}#.0abc\t")), max_size=80))
def test_any_text_gives_an_error_dict_or_none(program: str) -> None:
    tools = {t.name: t for t in load_data(library_spec("http://127.0.0.1:1")).tools}
    err = check_program(program, tools)
    assert err is None or (err["type"] in {"SyntaxError", "NameError", "ToolError"} and err["static"] is True)


def test_unknown_argument_points_to_the_missing_required_one(tools: dict[str, Tool]) -> None:
    issues = find_issues("get_book(id=20)\n", tools)
    assert len(issues) == 1 and "unknown argument 'id'. Did you mean 'book_id'?" in issues[0].message
    issues = find_issues("list_book_reviews(limt=2)\n", tools)
    assert [i.message.split(".")[0] for i in issues] == ["list_book_reviews: unknown argument 'limt'",
                                                         "list_book_reviews: missing required argument(s) 'book_id'"]
    assert "Did you mean 'limit'?" in issues[0].message
