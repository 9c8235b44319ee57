"""Attribution on real failures, without the sandbox.

An in-process harness (a fake at a seam we own: the runner) executes each program of
tests/support/attribution_cases.py with tool stubs that make REAL HTTP calls to the library API on
127.0.0.1, records the call log the way the gateway does (line and column of the caller), and
builds the error dict exactly as the runner documents it in sandbox/wire.py (program frames
outermost first, positions from ``tb_lasti`` -> ``co_positions``). ``attribute`` then sees what
it sees in production. Unit tests of the ranking key and of the edge inputs follow.
"""

from __future__ import annotations

import ast
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from types import FrameType
from typing import Any
from urllib.parse import quote

import httpx
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.api import ToolCall
from sandbox.attribution.dataflow import ProgramIndex, Source
from sandbox.attribution.fault import Attribution, Candidate, attribute, rank
from tests.support.apis.library import SECRET, LibraryAPI, library_spec
from tests.support.attribution_cases import CASES, Case


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@dataclass
class _Op:
    name: str
    method: str
    path: str
    where: dict[str, str]  # parameter -> path | query | body
    schema: dict[str, Any]


def _operations(url: str) -> dict[str, _Op]:
    """The library's operations as tool stubs need them, read from its OpenAPI document."""
    ops: dict[str, _Op] = {}
    for path, item in library_spec(url)["paths"].items():
        for method, op in item.items():
            props: dict[str, Any] = {}
            required: list[str] = []
            where: dict[str, str] = {}
            for p in op.get("parameters", []):
                props[p["name"]] = p["schema"]
                where[p["name"]] = p["in"]
                if p.get("required"):
                    required.append(p["name"])
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                for k, v in body["properties"].items():
                    props[k] = v
                    where[k] = "body"
                required += body.get("required", [])
            schema = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
            ops[_snake(op["operationId"])] = _Op(_snake(op["operationId"]), method.upper(), path, where, schema)
    return ops


class ToolError(Exception):
    """The ``ToolError`` global programs see (the harness's copy)."""

    def __init__(self, message: str, tool: str, status: int | None) -> None:
        super().__init__(message)
        self.tool = tool
        self.status = status


def _positions(code: Any, lasti: int) -> tuple[int | None, int | None, int | None, int | None]:
    for i, pos in enumerate(code.co_positions()):
        if i == lasti // 2:
            return pos  # type: ignore[no-any-return]
    return (None, None, None, None)


@dataclass
class Run:
    error: dict[str, Any] | None
    calls: list[ToolCall]
    stdout: list[str] = field(default_factory=list)


class InProcessRunner:
    """Runs a program in this process against the real API; see the module docstring."""

    def __init__(self, api: LibraryAPI, *, api_key: str | None = SECRET) -> None:
        self.ops = _operations(api.url)
        self.url = api.url
        self.api_key = api_key
        self.client = httpx.Client(timeout=10)

    def _stub(self, op: _Op, calls: list[ToolCall]) -> Any:
        validator = jsonschema.Draft202012Validator(op.schema)

        def stub(*args: Any, **kwargs: Any) -> Any:
            caller: FrameType = sys._getframe(1)
            line, _, col, _ = _positions(caller.f_code, caller.f_lasti)
            if args:
                raise TypeError(f"{op.name}() takes keyword arguments only, e.g. {op.name}(name=value)")
            call = ToolCall(op.name, dict(kwargs), op.method, op.path, None, False, line, 0.0, col=col)
            calls.append(call)
            problems = sorted(validator.iter_errors(kwargs), key=lambda e: list(e.path))
            if problems:
                call.error = f"{op.name}: invalid arguments: {problems[0].message}"
                raise ToolError(call.error, op.name, None)
            path = op.path
            query: dict[str, Any] = {}
            body: dict[str, Any] = {}
            for k, v in kwargs.items():
                if op.where[k] == "path":
                    path = path.replace("{" + k + "}", quote(str(v), safe=""))
                elif op.where[k] == "query":
                    query[k] = v
                else:
                    body[k] = v
            headers = {"X-API-Key": self.api_key} if self.api_key and op.method == "POST" else {}
            started = time.perf_counter()
            resp = self.client.request(op.method, self.url + path, params=query,
                                       json=body if op.method == "POST" else None, headers=headers)
            call.duration_ms = (time.perf_counter() - started) * 1000
            call.status = resp.status_code
            call.response = resp.json()
            if resp.status_code >= 400:
                text = call.response.get("error") if isinstance(call.response, dict) else resp.text
                call.error = f"{op.name}: HTTP {resp.status_code}: {text}"
                raise ToolError(call.error, op.name, resp.status_code)
            call.ok = True
            return call.response

        return stub

    def run(self, program: str) -> Run:
        calls: list[ToolCall] = []
        out: list[str] = []
        env: dict[str, Any] = {name: self._stub(op, calls) for name, op in self.ops.items()}
        env.update(ToolError=ToolError, print=lambda *a, **k: out.append(" ".join(map(str, a))))
        env["__name__"] = "__main__"
        try:
            code = compile(program, "<program>", "exec")
        except SyntaxError as exc:
            return Run({"type": "SyntaxError", "message": str(exc), "traceback": "", "frames": [],
                        "tool": None, "status": None}, calls, out)
        try:
            exec(code, env)
        except Exception as exc:
            return Run(self.error_dict(exc), calls, out)
        return Run(None, calls, out)

    @staticmethod
    def error_dict(exc: BaseException) -> dict[str, Any]:
        frames: list[dict[str, Any]] = []
        tb = exc.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename == "<program>":
                lineno, end_lineno, col, end_col = _positions(code, tb.tb_lasti)
                frames.append({"name": code.co_name, "lineno": lineno, "end_lineno": end_lineno,
                               "col": col, "end_col": end_col})
            tb = tb.tb_next
        text = "".join(traceback.format_exception(exc))
        return {"type": type(exc).__name__, "message": str(exc), "traceback": text, "frames": frames,
                "tool": getattr(exc, "tool", None) if isinstance(exc, ToolError) else None,
                "status": getattr(exc, "status", None) if isinstance(exc, ToolError) else None}


@pytest.fixture()
def runner(api: LibraryAPI) -> InProcessRunner:
    return InProcessRunner(api)


TOOL_NAMES = frozenset(_operations("http://127.0.0.1"))


def _attribute_case(runner: InProcessRunner, case: Case) -> tuple[Run, Attribution]:
    run = runner.run(case.program)
    assert run.error is not None, f"{case.name} did not fail"
    return run, attribute(case.program, run.error, run.calls, TOOL_NAMES)


def test_suite_is_large_and_varied() -> None:
    assert len(CASES) >= 15
    assert len({c.name for c in CASES}) == len(CASES)
    assert sum(c.expected_tool is None for c in CASES) >= 4
    assert len({c.expected_type for c in CASES}) >= 8
    assert len({c.expected_tool for c in CASES}) >= 6


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_attributed_to_expected_tool(runner: InProcessRunner, case: Case) -> None:
    run, att = _attribute_case(runner, case)
    assert run.error is not None
    assert run.error["type"] == case.expected_type, run.error["traceback"]
    innermost = run.error["frames"][-1]["lineno"] if run.error["frames"] else None
    assert innermost == case.expected_line
    assert att.tool == case.expected_tool, att.reason
    assert att.reason and "attribution failed" not in att.reason
    if case.expected_tool is None:
        assert att.call_index is None and att.response_shape is None
        return
    if not any(c.tool == case.expected_tool for c in run.calls):
        assert att.call_index is None  # e.g. positional arguments: refused before any call
        return
    assert att.call_index is not None
    chosen = run.calls[att.call_index]
    assert chosen.tool == case.expected_tool
    if chosen.response is None:  # refused before any request: nothing to show but the reason
        assert chosen.status is None and att.excerpt is None and att.response_shape is None
        return
    assert att.excerpt
    if case.expected_type != "ToolError" and case.shape_keys:
        text = repr(att.response_shape)
        for key in case.shape_keys:
            assert f"'{key}'" in text, (key, att.response_shape)


def test_attribution_is_deterministic(runner: InProcessRunner) -> None:
    for case in CASES[:10]:
        run = runner.run(case.program)
        assert run.error is not None
        first = attribute(case.program, run.error, run.calls, TOOL_NAMES).to_dict()
        again = attribute(case.program, run.error, run.calls, TOOL_NAMES).to_dict()
        assert first == again


def test_reason_names_the_chain(runner: InProcessRunner) -> None:
    case = next(c for c in CASES if c.name == "key_error_several_assignments_away")
    _, att = _attribute_case(runner, case)
    assert "KeyError on `info[\"nationality\"]` at line 5" in att.reason
    for step in ("`info` = `person`", "`person` = `people[0]`", "`r` = `search_authors(name=\"Le Guin\")`"):
        assert step in att.reason
    assert att.reason.endswith("search_authors(...) at line 1")


def test_reason_explains_choice_over_rival(runner: InProcessRunner) -> None:
    case = next(c for c in CASES if c.name == "second_tool_fed_by_first")
    _, att = _attribute_case(runner, case)
    # search_authors is not a candidate: its data only went into an argument of the second call
    assert [c["tool"] for c in att.candidates] == ["list_author_books"]
    program = 'a = get_author(author_id=1)\nb = get_stats()\nprint(a["name"] + b)\n'
    run = runner.run(program)
    assert run.error is not None
    att = attribute(program, run.error, run.calls, TOOL_NAMES)
    assert att.tool == "get_stats"  # both one hop away; get_stats ran more recently
    assert "Chosen over get_author(...) at line 1 because it ran more recently" in att.reason


def test_the_response_of_the_failing_iteration_is_attached(runner: InProcessRunner) -> None:
    program = ("for i in (10, 20, 21):\n    r = list_book_reviews(book_id=i)\n"
               "    print(r[0]['text'])\n")
    run = runner.run(program)
    assert run.error is not None and run.error["type"] == "IndexError"
    att = attribute(program, run.error, run.calls, TOOL_NAMES)
    assert att.tool == "list_book_reviews"
    assert att.call_index == 2 and run.calls[2].args == {"book_id": 21}
    assert att.excerpt == "[]"


def test_tool_error_attaches_the_error_body(runner: InProcessRunner) -> None:
    case = next(c for c in CASES if c.name == "not_found_inside_loop")
    run, att = _attribute_case(runner, case)
    assert att.call_index == 2 and run.calls[2].status == 404
    assert att.excerpt == '{"error": "book not found"}'
    assert "HTTP 404" in att.reason and "line 3" in att.reason


def test_parameter_follows_the_running_call_site(runner: InProcessRunner) -> None:
    program = (
        "def title(x):\n    return x['title']\n"
        "a = get_book(book_id=10)\ns = get_stats()\n"
        "print(title(a))\nprint(title(s))\n"
    )
    run = runner.run(program)
    assert run.error is not None and run.error["frames"][0]["lineno"] == 6
    att = attribute(program, run.error, run.calls, TOOL_NAMES)
    assert att.tool == "get_stats"
    assert [c["tool"] for c in att.candidates] == ["get_stats"]


# -- unit tests of the ranking key and the edges --------------------------------------------

def _source(tool: str, program: str, line: int, hops: int) -> Source:
    call = next(n for n in ast.walk(ast.parse(program))
                if isinstance(n, ast.Call) and getattr(n.func, "id", None) == tool and n.lineno == line)
    return Source(tool, call, hops)


def _call(tool: str, line: int, col: int, ok: bool = True) -> ToolCall:
    return ToolCall(tool, {}, "GET", "/", 200 if ok else 404, ok, line, 1.0, col=col)


def test_rank_key_orders_by_each_criterion() -> None:
    program = "a = t1()\nb = t2()\nc = t3()\nd = t4()\n"
    s1, s2, s3, s4 = (_source(f"t{i}", program, i, 1) for i in range(1, 5))
    inside = _source("t4", program, 4, 0)
    # (1)/(2): a call inside the failing expression beats any data-flow path
    assert rank([s1, inside], [])[0].source is inside
    # (2): fewer hops first
    far = Source("t1", s1.call, 3)
    assert rank([far, s2], [])[0].source is s2
    # (3): a call site that ran beats one that did not
    log = [_call("t3", 3, 4)]
    assert rank([s1, s3], log)[0].source is s3
    # (4): the most recently executed first
    log = [_call("t2", 2, 4), _call("t1", 1, 4), _call("t2", 2, 4), _call("t1", 1, 4)]
    ranked = rank([s2, s1], log)
    assert ranked[0].source is s1 and ranked[0].executions == (1, 3)
    # (5): textual position as the final tiebreak
    assert [c.source for c in rank([s4, s3], [])] == [s3, s4]


def test_candidate_matches_log_by_line_and_column() -> None:
    program = "x = (t1(), t1())\n"
    calls = [n for n in ast.walk(ast.parse(program)) if isinstance(n, ast.Call)]
    first, second = sorted(calls, key=lambda n: n.col_offset)
    log = [_call("t1", 1, first.col_offset), _call("t1", 1, second.col_offset)]
    assert Candidate(Source("t1", second, 1), ()).key()[4:] == (1, second.col_offset)
    assert rank([Source("t1", first, 1)], log)[0].executions == (0,)
    assert rank([Source("t1", second, 1)], log)[0].executions == (1,)


@pytest.mark.parametrize(
    "error",
    [
        {},
        {"type": "KeyError"},
        {"type": "KeyError", "frames": "nonsense"},
        {"type": "KeyError", "frames": [{"name": "<module>", "lineno": 99, "col": 0, "end_col": 3}]},
        {"type": "KeyError", "frames": [{"lineno": "x", "col": None}]},
        {"type": "Timeout"},
        {"type": "SyntaxError", "frames": []},
        {"type": "MemoryLimit", "frames": [{"name": "<module>", "lineno": 1, "end_lineno": 1, "col": 0, "end_col": 5}]},
    ],
)
def test_odd_inputs_never_raise(error: dict[str, Any]) -> None:
    att = attribute("x = t1()\nx['a']\n", error, [], frozenset({"t1"}))
    assert att.tool is None and att.reason


def test_unparseable_program_never_raises() -> None:
    err = {"type": "KeyError", "frames": [{"name": "<module>", "lineno": 1, "end_lineno": 1, "col": 0, "end_col": 2}]}
    att = attribute("def (:\n", err, [], frozenset())
    assert att.tool is None and "attribution failed" in att.reason


def test_call_budget_blames_the_most_called_tool() -> None:
    log = [_call("get_stats", 1, 0)] + [_call("get_book", 3, 8) for _ in range(5)] + [_call("get_author", 4, 0)]
    att = attribute("", {"type": "CallBudget", "message": "budget"}, log, frozenset())
    assert att.tool == "get_book" and att.call_index == 5 and "5 times" in att.reason


def test_index_maps_frames_to_nodes() -> None:
    from sandbox.attribution.dataflow import FramePoint

    program = 'r = t()\nprint(r["a"]["b"])\n'
    ix = ProgramIndex(program, {"t"})
    node = ix.node_at(FramePoint("<module>", 2, 2, 6, 16))
    assert isinstance(node, ast.Subscript) and ix.segment(node) == 'r["a"]["b"]'
    # no column: the statement on the line
    node = ix.node_at(FramePoint("<module>", 2, 2, None, None))
    assert isinstance(node, ast.Expr)


# -- the data-flow constructs, one by one ----------------------------------------------------

FLOW = [
    ("with_as", "import contextlib\nwith contextlib.nullcontext(get_book(book_id=10)) as b:\n    print(b['author'])\n",
     "get_book", 3),
    ("closure", "def outer():\n    s = get_stats()\n    def inner():\n        return s['reviews']\n    return inner()\nouter()\n",
     "get_stats", 4),
    ("recursion", "def walk(items, n):\n    if n == 0:\n        return items['end']\n    return walk(items, n - 1)\n"
     "walk(list_book_reviews(book_id=10), 3)\n", "list_book_reviews", 3),
    ("lambda_assigned_then_passed", "key = lambda b: b['rating']\nbooks = list_author_books(author_id=1)['books']\n"
     "print(sorted(books, key=key))\n", "list_author_books", 1),
    ("function_passed_to_map", "def stars(r):\n    return r['stars']\nrs = list_book_reviews(book_id=30)\n"
     "print(list(map(stars, rs)))\n", "list_book_reviews", 2),
    ("generator_expression", "rs = list_book_reviews(book_id=10)\nprint(sum(r['score'] for r in rs))\n",
     "list_book_reviews", 2),
    ("dict_comprehension", "a = search_authors(name='e')\nby = {x['name']: x['age'] for x in a['results']}\n",
     "search_authors", 2),
    ("loop_carried", "prev = None\nfor i in (10, 11):\n    if prev:\n        print(prev['author'])\n"
     "    prev = get_book(book_id=i)\n", "get_book", 4),
    ("branches", "import os\nif os.sep == '/':\n    d = get_stats()\nelse:\n    d = get_author(author_id=1)\n"
     "print(d['name'])\n", "get_stats", 6),
    ("tuple_pairwise", "a, b = get_author(author_id=1), get_stats()\nprint(a['name'], b['name'])\n", "get_stats", 2),
    ("method_chain", "r = get_book(book_id=10)\nprint(r.get('info')['isbn'])\n", "get_book", 2),
    ("f_string", "a = get_author(author_id=1)\nprint(f\"{a['name']} born {a['born'] + '!'}\")\n", "get_author", 2),
    ("helper_returning_helper", "def fetch(i):\n    return get_book(book_id=i)\ndef fetch2(i):\n    return fetch(i)\n"
     "b = fetch2(20)\nprint(b['isbn'])\n", "get_book", 6),
    ("default_parameter", "def show(x=get_stats()):\n    return x['reviews']\nprint(show())\n", "get_stats", 2),
    ("star_args", "def pick(*items):\n    return items[0]['isbn']\nprint(pick(get_book(book_id=10)))\n", "get_book", 2),
    ("dict_filled_by_subscript", "d = {}\nd['a'] = get_author(author_id=1)\nprint(d['a']['books'])\n", "get_author", 3),
    ("string_method_on_int", "s = get_stats()\nprint(s['books'].upper())\n", "get_stats", 2),
    ("local_shadows_tool_name", "def f(get_book):\n    return get_book['x']\nprint(f({'y': 1}))\n", None, 2),
    ("non_ascii_before_the_failure", "print('Café – ', get_stats()['cafés'])\n", "get_stats", 1),
    ("multi_line_expression", "total = (\n    get_book(book_id=10)['price']\n    + get_book(book_id=20)['pages']\n)\n",
     "get_book", 3),
    ("method_on_an_object", "class Shelf:\n    def first(self, key):\n        return self.items[0][key]\n"
     "s = Shelf()\ns.items = list_book_reviews(book_id=10)\nprint(s.first('stars'))\n", "list_book_reviews", 3),
    ("method_argument", "class Fmt:\n    def show(self, book):\n        return book['isbn']\n"
     "print(Fmt().show(get_book(book_id=11)))\n", "get_book", 3),
    ("unbound_local", "def f():\n    print(r['x'])\n    r = get_stats()\nf()\n", None, 2),
    ("local_dict_keyed_by_tool_value", "names = {1: 'a'}\nb = get_book(book_id=20)\nprint(names[b['author_id']])\n",
     "get_book", 3),
]


@pytest.mark.parametrize("name,program,tool,line", FLOW, ids=[f[0] for f in FLOW])
def test_data_flow_construct(runner: InProcessRunner, name: str, program: str, tool: str | None, line: int) -> None:
    run = runner.run(program)
    assert run.error is not None, name
    assert run.error["frames"][-1]["lineno"] == line, run.error["traceback"]
    att = attribute(program, run.error, run.calls, TOOL_NAMES)
    assert att.tool == tool, att.reason
    assert "attribution failed" not in att.reason


program_texts = st.sampled_from([c.program for c in CASES] + [f[1] for f in FLOW])
frames = st.lists(st.fixed_dictionaries({
    "name": st.sampled_from(["<module>", "<lambda>", "<listcomp>", "f", "describe", ""]),
    "lineno": st.none() | st.integers(-2, 12), "end_lineno": st.none() | st.integers(-2, 12),
    "col": st.none() | st.integers(-2, 60), "end_col": st.none() | st.integers(-2, 60),
}), max_size=4)
errors = st.fixed_dictionaries({
    "type": st.sampled_from(["KeyError", "TypeError", "ToolError", "NameError", "ZeroDivisionError", "CallBudget"]),
    "frames": frames, "tool": st.none() | st.sampled_from(sorted(TOOL_NAMES)), "status": st.none() | st.just(404),
})
logs = st.lists(st.builds(lambda t, line, col, ok, resp: ToolCall(t, {}, "GET", "/", 200, ok, line, 1.0, col=col,
                                                                  response=resp),
                          st.sampled_from(sorted(TOOL_NAMES)), st.none() | st.integers(0, 10),
                          st.none() | st.integers(0, 40), st.booleans(),
                          st.none() | st.dictionaries(st.text(max_size=5), st.integers(), max_size=5)),
                max_size=6)


@settings(max_examples=300, deadline=None)
@given(program=program_texts, error=errors, calls=logs)
def test_attribute_never_raises_on_arbitrary_frames(program: str, error: dict[str, Any], calls: list[ToolCall]) -> None:
    att = attribute(program, error, calls, TOOL_NAMES)
    assert "attribution failed" not in att.reason, att.reason
    assert att.tool is None or att.tool in TOOL_NAMES
    assert att.call_index is None or 0 <= att.call_index < len(calls)
    assert att == attribute(program, error, calls, TOOL_NAMES)


def test_same_tool_twice_in_a_multi_line_expression(runner: InProcessRunner) -> None:
    program = next(f[1] for f in FLOW if f[0] == "multi_line_expression")
    run = runner.run(program)
    assert run.error is not None
    att = attribute(program, run.error, run.calls, TOOL_NAMES)
    assert att.call_index == 1 and run.calls[1].args == {"book_id": 20}
    assert [(c["line"], c["hops"]) for c in att.candidates] == [(3, 0)]


def test_a_chain_longer_than_the_analysis_is_inconclusive_not_innocent() -> None:
    lines = ["x0 = get_stats()", *(f"x{i} = x{i - 1}" for i in range(1, 40)), "print(x39['q'])"]
    err = {"type": "KeyError", "frames": [{"name": "<module>", "lineno": 41, "end_lineno": 41, "col": 6, "end_col": 14}]}
    att = attribute("\n".join(lines) + "\n", err, [], TOOL_NAMES)
    assert att.tool is None and "longer than the analysis follows" in att.reason
    short = ["x0 = get_stats()", *(f"x{i} = x{i - 1}" for i in range(1, 20)), "print(x19['q'])"]
    err["frames"][0].update(lineno=21, end_lineno=21)
    assert attribute("\n".join(short) + "\n", err, [], TOOL_NAMES).tool == "get_stats"


def test_a_large_program_is_attributed_quickly() -> None:
    lines = ["r = get_stats()", *(f"v{i} = r['books'] + {i}" for i in range(3000)),
             "x = 1", "for i in range(3):", "    x = x + r['missing']"]
    n = len(lines)
    err = {"type": "KeyError", "frames": [{"name": "<module>", "lineno": n, "end_lineno": n, "col": 12, "end_col": 24}]}
    started = time.perf_counter()
    att = attribute("\n".join(lines) + "\n", err, [], TOOL_NAMES)
    assert att.tool == "get_stats"
    assert time.perf_counter() - started < 3.0
