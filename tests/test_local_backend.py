"""The local backend end to end: real jailed subprocesses, the real runner, the library API on
127.0.0.1. What a program sees (tools, ToolError, errors with lines) and what the host keeps
(limits, warm pool, no processes left behind)."""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocols import load_spec
from sandbox.api import Backend, ExecutionResult, Limits, Toolset
from sandbox.local_backend import LocalBackend, runner_path
from tests.apis.library import LibraryAPI

LIMITS = Limits(timeout=10)


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(pool_size=2) as b:
        yield b


@pytest.fixture()
def tools(api: LibraryAPI, tmp_path: Path) -> Toolset:
    return Toolset([load_spec(api.write_spec(tmp_path / "library.json"))])


def test_implements_the_backend_protocol(backend: LocalBackend) -> None:
    assert isinstance(backend, Backend) and backend.name == "local"


def test_runner_is_stdlib_only() -> None:
    import ast

    tree = ast.parse(runner_path().read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    import sys

    assert imported <= set(sys.stdlib_module_names)


def test_dependent_calls_answer_and_call_log(backend: LocalBackend, tools: Toolset, api: LibraryAPI) -> None:
    program = (
        "a = search_authors(name='butler')['results'][0]\n"
        "books = list_author_books(author_id=a['id'])['books']\n"
        "reviews = [list_book_reviews(book_id=b['id'], limit=1) for b in books]\n"
        "print(a['name'], [b['title'] for b in books], reviews[0][0]['rating'])\n"
    )
    r = backend.run(program, tools, LIMITS)
    assert r.ok, r.error
    assert r.answer == "Octavia E. Butler ['Kindred'] 5\n"
    assert [c.tool for c in r.calls] == ["search_authors", "list_author_books", "list_book_reviews"]
    assert [c.line for c in r.calls] == [1, 2, 3]
    assert [c.col for c in r.calls] == [4, 8, 11]
    assert r.calls[1].path == "/authors/{author_id}/books" and r.calls[1].args == {"author_id": 3}
    assert [q.path for q in api.requests] == ["/authors?name=butler", "/authors/3/books", "/books/30/reviews?limit=1"]
    assert r.sandbox == "local" and r.duration_ms > 0
    if os.geteuid() == 0:
        assert {"netns", "pidns", "mountns", "rlimits", "restrictedpython-lint"} <= set(r.isolation)
        assert any(i.startswith("uid:") for i in r.isolation)


def test_http_error_in_a_loop_is_a_tool_error_at_the_call_line(backend: LocalBackend, tools: Toolset) -> None:
    program = "total = 0\nfor book_id in [10, 11, 12]:\n    total += get_book(book_id=book_id)['price']\nprint(total)\n"
    r = backend.run(program, tools, LIMITS)
    assert not r.ok and r.error is not None
    assert (r.error.type, r.error.line, r.error.tool) == ("ToolError", 3, "get_book")
    assert r.error.message == "get_book: HTTP 404: book not found"
    assert r.error.code == "total += get_book(book_id=book_id)['price']"
    assert [c.status for c in r.calls] == [200, 200, 404]


def test_program_can_catch_tool_errors(backend: LocalBackend, tools: Toolset) -> None:
    program = ("try:\n    get_book(book_id=999)\nexcept ToolError as e:\n"
               "    print(e.tool, e.status, isinstance(e, Exception), str(e))\n")
    r = backend.run(program, tools, LIMITS)
    assert r.ok and r.answer == "get_book 404 True get_book: HTTP 404: book not found\n"


def test_keyword_arguments_only(backend: LocalBackend, tools: Toolset) -> None:
    r = backend.run("x = 1\nget_book(10)\n", tools, LIMITS)
    assert r.error is not None and r.error.type == "TypeError" and r.error.line == 2
    assert "get_book() takes keyword arguments only, e.g. get_book(name=value)" in r.error.message
    assert r.calls == []


def test_arguments_must_be_json(backend: LocalBackend, tools: Toolset) -> None:
    r = backend.run("get_book(book_id={1, 2})\n", tools, LIMITS)
    assert r.error is not None and r.error.type == "TypeError" and "must be JSON data" in r.error.message


def test_syntax_error_has_its_line(backend: LocalBackend, tools: Toolset) -> None:
    r = backend.run("x = 1\nprint(x\ny = 2\n", tools, LIMITS)
    assert r.error is not None and r.error.type == "SyntaxError" and r.error.line == 2
    assert r.error.tool is None


def test_traceback_shows_program_frames_only(backend: LocalBackend, tools: Toolset) -> None:
    program = "import json\ndef parse(s):\n    return json.loads(s)\nstats = get_stats()\nparse(str(stats))\n"
    r = backend.run(program, tools, LIMITS)
    assert r.error is not None and r.error.type == "JSONDecodeError"
    assert r.error.line == 3 and r.error.code == "return json.loads(s)"
    assert r.error.traceback.count('File "<program>"') == 2 and "json/decoder.py" not in r.error.traceback
    assert "runner.py" not in r.error.traceback


def test_stderr_is_captured_and_exit_codes(backend: LocalBackend, tools: Toolset) -> None:
    r = backend.run("import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(0)\n", tools, LIMITS)
    assert r.ok and r.answer == "out\n" and r.stderr == "err\n"
    r = backend.run("import sys\nsys.exit(3)\n", tools, LIMITS)
    assert not r.ok and r.error is not None and r.error.type == "SystemExit" and r.error.line == 2


def test_threads_may_call_tools_concurrently(backend: LocalBackend, tools: Toolset) -> None:
    program = (
        "import threading\nout = {}\n"
        "def work(i):\n    out[i] = get_book(book_id=i)['title']\n"
        "ts = [threading.Thread(target=work, args=(i,)) for i in (10, 11, 20, 21, 30)]\n"
        "[t.start() for t in ts]\n[t.join() for t in ts]\nprint(sorted(out))\n"
    )
    r = backend.run(program, tools, LIMITS)
    assert r.ok, r.error
    assert r.answer == "[10, 11, 20, 21, 30]\n" and len(r.calls) == 5
    assert all(c.line == 4 for c in r.calls)


def test_output_limit(backend: LocalBackend, tools: Toolset) -> None:
    r = backend.run("for i in range(10**6):\n    print(i)\n", tools, Limits(timeout=10, max_output_bytes=1000))
    assert r.error is not None and r.error.type == "OutputLimit" and len(r.answer.encode()) <= 1000


def test_timeout_kills_the_program_and_its_children(backend: LocalBackend, tools: Toolset) -> None:
    program = "import os, time\nfor i in range(3):\n    if os.fork() == 0:\n        time.sleep(100)\ntime.sleep(100)\n"
    started = time.monotonic()
    r = backend.run(program, tools, Limits(timeout=1))
    assert time.monotonic() - started < 5
    assert r.error is not None and r.error.type == "Timeout"
    assert "1 s" in r.error.message


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def test_close_leaves_no_process_behind(tools: Toolset) -> None:
    b = LocalBackend(pool_size=2)
    assert b.run("print(1)", tools, LIMITS).ok
    deadline = time.monotonic() + 10
    while sum(len(ws) for ws in b._warm.values()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = [w for ws in b._warm.values() for w in ws]
    assert workers and all(_alive(w.pid) for w in workers)
    b.close()
    assert all(w.proc.poll() is not None and not _alive(w.pid) for w in workers)
    with pytest.raises(Exception, match="closed"):
        b.run("print(1)", tools, LIMITS)


def test_without_namespaces_still_runs_with_rlimits(tools: Toolset) -> None:
    with LocalBackend(pool_size=0, namespaces=False) as b:
        r = b.run("import os\nprint(sorted(os.environ), os.getcwd().startswith('/tmp/atc-run-'))", tools, LIMITS)
    assert r.ok, r.error
    assert "True" in r.answer and "netns" not in r.isolation and "rlimits" in r.isolation


def test_warm_pool_is_faster_than_cold_starts(tools: Toolset) -> None:
    def p50(b: LocalBackend, n: int) -> float:
        times = []
        for _ in range(n):
            started = time.perf_counter()
            assert b.run("print(1)", tools, LIMITS).ok
            times.append(time.perf_counter() - started)
            time.sleep(0.08)  # lets the pool refill, as a model's thinking time would
        return statistics.median(times)

    with LocalBackend(pool_size=0) as cold, LocalBackend(pool_size=2) as warm:
        warm.warm_up(LIMITS)
        time.sleep(0.3)
        assert p50(warm, 8) < p50(cold, 8)


def test_concurrent_runs_keep_their_own_call_logs(backend: LocalBackend, tools: Toolset) -> None:
    results: dict[int, ExecutionResult] = {}

    def one(book_id: int) -> None:
        results[book_id] = backend.run(f"print(get_book(book_id={book_id})['title'])\nget_stats()\n", tools, LIMITS)

    ids = [10, 11, 20, 21, 30, 10, 11, 20]
    threads = [threading.Thread(target=one, args=(i,)) for i in set(ids)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for book_id, r in results.items():
        assert r.ok, r.error
        assert [(c.tool, c.args) for c in r.calls] == [("get_book", {"book_id": book_id}), ("get_stats", {})]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(["x = get_stats()", "print(x)", "1/0", "for i in range(3):", "    print(i)",
                              "get_book(book_id='a')", "import os", "raise SystemExit", "def f(:", "'''",
                              "print(x['books'])", "get_book(book_id=10)['nope']"]), max_size=6).map("\n".join),
))
def test_any_program_text_yields_a_result(backend: LocalBackend, tools: Toolset, program: str) -> None:
    r = backend.run(program, tools, Limits(timeout=5))
    assert isinstance(r, ExecutionResult)
    assert r.ok or (r.error is not None and r.error.type)
    r.to_dict()


def test_programs_cannot_break_the_channel_by_accident(backend: LocalBackend, tools: Toolset) -> None:
    program = ("import json\nclass Odd(Exception):\n    def __str__(self):\n        raise ValueError('no')\n"
               "json.dumps = None\njson.loads = None\nprint(get_stats()['books'])\nraise Odd()\n")
    r = backend.run(program, tools, LIMITS)
    assert r.answer == "5\n" and r.error is not None
    assert r.error.type == "Odd" and r.error.line == 8 and "unprintable" in r.error.message


def test_interpreter_outside_usr_is_bound_into_the_jail(tools: Toolset) -> None:
    import sys

    with LocalBackend(pool_size=0, python=sys.executable) as b:
        r = b.run("import sys\nprint(sys.version_info[:2] >= (3, 11))\nprint(get_stats()['authors'])", tools, LIMITS)
    assert r.ok, r.error
    assert r.answer == "True\n3\n"


@pytest.mark.parametrize("program", [
    "print(type(ValueError()).__name__)",
    "class A:\n    def __init__(self):\n        super().__init__()\n    def __str__(self):\n        return 'a'\nprint(A())",
    "if __name__ == '__main__':\n    print(1)",
    "from collections import namedtuple\nP = namedtuple('P', 'x')\nprint(P(1)._asdict())",
    "_cache = {}\nfor _ in range(2):\n    _cache[_] = 1",
    "print('{0} {name}'.format(1, name='x'), f'{1:>3}')",
])
def test_lint_accepts_ordinary_programs(program: str) -> None:
    from sandbox.lint import lint

    assert lint(program) is None


@pytest.mark.parametrize(("program", "line"), [
    ("x = 1\nprint(().__class__.__base__.__subclasses__())", 2),
    ("import sys\nf = sys._getframe()\nprint(f.f_back)", 3),
    ("print(vars(__builtins__))", 1),
    ("print(getattr(print, '__self__'))", 1),
    ("print('{0.__init__.__globals__}'.format(print))", 1),
    ("def g():\n    yield\nprint(g().gi_frame)", 3),
])
def test_lint_refuses_escapes_with_their_line(program: str, line: int) -> None:
    from sandbox.lint import lint

    issue = lint(program)
    assert issue is not None and issue.line == line
