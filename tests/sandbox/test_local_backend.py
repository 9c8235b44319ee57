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
from sandbox.local.backend import LocalBackend, runner_path
from tests.support.apis.library import LibraryAPI

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
    # The run's uid owned the program and its three sleeping children: none of them is left.
    run_uid = int(next(i for i in r.isolation if i.startswith("uid:"))[4:]) if os.geteuid() == 0 else None
    if run_uid is not None:
        assert [p for p in os.listdir("/proc") if p.isdigit() and _owner(p) == run_uid] == []


def _owner(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


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
    st.text(st.characters(blacklist_categories=()), max_size=50),
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


UNPRIVILEGED_SCRIPT = """
import json, sys
sys.path[:0] = {paths!r}
from sandbox.local.backend import LocalBackend
from sandbox.api import Toolset, Limits
with LocalBackend(pool_size=0) as b:
    r = b.run("import os\\nprint(sorted(os.listdir('/')))", Toolset([]), Limits(timeout=10))
print(json.dumps(r.to_dict()))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(), reason="needs root and setpriv")
def test_unprivileged_user_gets_a_user_namespace(tmp_path: Path) -> None:
    """Started by an ordinary user, the jail maps itself into a user namespace and still gets
    its network, PID and mount namespaces (where the kernel allows unprivileged user namespaces)."""
    import json
    import subprocess
    import sys

    import httpx

    root = Path(__file__).resolve().parents[2]
    site = Path(httpx.__file__).resolve().parents[1]
    script = tmp_path / "unprivileged.py"
    script.write_text(UNPRIVILEGED_SCRIPT.format(paths=[str(root), str(site)]))
    for p in (tmp_path, *tmp_path.parents):
        if str(p) in ("/", "/tmp"):
            break
        os.chmod(p, 0o755)
    os.chmod(script, 0o644)
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-I", str(script)],
                         capture_output=True, text=True, timeout=60, env={}, cwd="/")
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout.splitlines()[-1])
    assert doc["ok"], doc
    knob = Path("/proc/sys/kernel/unprivileged_userns_clone")
    if "userns" not in doc["isolation"] and knob.exists() and knob.read_text().strip() == "0":
        pytest.skip("unprivileged user namespaces are disabled here (the jail fell back to rlimits)")
    assert {"userns", "netns", "pidns", "mountns"} <= set(doc["isolation"])
    import ast

    visible = set(ast.literal_eval(doc["answer"]))
    assert {"usr", "proc", "tmp", "work"} <= visible
    assert visible <= {"bin", "dev", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr", "work"}


def test_runner_connects_to_a_unix_socket_and_serves_one_session(tools: Toolset, tmp_path: Path) -> None:
    """The Docker path without Docker: the host listens, ``runner.py --connect`` dials in (it may
    start first and retry), and ``serve``/``build_result`` do the rest."""
    import socket
    import subprocess
    import sys

    from sandbox.gateway.core import Gateway
    from sandbox.program_run import build_result, serve, wait_ready

    path = str(tmp_path / "runner.sock")
    proc = subprocess.Popen([sys.executable, "-I", "-S", str(runner_path()), "--connect", path], env={})
    try:
        time.sleep(0.1)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        listener.settimeout(10)
        conn, _ = listener.accept()
        ready = wait_ready(conn, 10)
        assert ready["op"] == "ready" and ready["python"].startswith("3.")
        started = time.perf_counter()
        deadline = time.monotonic() + 10
        program = "s = get_stats()\nprint(s['books'])\nprint(s['shelves'])\n"
        outcome = serve(conn, program, tools, LIMITS, Gateway(tools, LIMITS, deadline=deadline), deadline=deadline)
        result = build_result(program, outcome, sandbox="test", isolation=["none"], started=started, tools=tools)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
    assert outcome.failure is None and outcome.done is not None
    assert result.answer == "5\n" and result.sandbox == "test" and result.isolation == ["none"]
    assert result.error is not None and (result.error.type, result.error.line) == ("KeyError", 3)
    assert result.error.tool == "get_stats" and result.error.code == "print(s['shelves'])"
    assert [c.tool for c in result.calls] == ["get_stats"]


@pytest.mark.parametrize("namespaces", [None, False])
def test_cpu_limit_is_a_timeout(tools: Toolset, namespaces: bool | None) -> None:
    with LocalBackend(pool_size=0, namespaces=namespaces) as b:
        started = time.monotonic()
        r = b.run("while True:\n    pass\n", tools, Limits(timeout=30, cpu_seconds=1))
    assert time.monotonic() - started < 15
    assert r.error is not None and r.error.type == "Timeout" and "CPU time" in r.error.message


def test_a_failing_attribution_does_not_break_the_result(backend: LocalBackend, tools: Toolset,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import sandbox.attribution.fault

    def broken(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(sandbox.attribution.fault, "attribute", broken)
    r = backend.run("get_book(book_id=1)\n", tools, LIMITS)
    assert r.error is not None and r.error.type == "ToolError" and r.error.tool == "get_book"
    assert r.error.attribution is not None and "attribution failed: RuntimeError: boom" in r.error.attribution["reason"]
    assert r.error.attribution["call_index"] == 0


def test_program_text_with_a_lone_surrogate(backend: LocalBackend, tools: Toolset) -> None:
    r = backend.run("print('a')\n# \ud800\n", tools, LIMITS)
    assert r.error is not None and r.error.type == "SandboxError" and "not valid Unicode" in r.error.message


def test_falls_back_to_rlimits_when_the_jail_cannot_be_built(tools: Toolset, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import sandbox.local.backend as local
    from sandbox.local.backend import jail_path

    broken = tmp_path / "broken_jail.py"
    broken.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(jail_path().parent)!r})\n"
        "import jail\n"
        "def refuse(*args):\n    raise OSError(1, 'mounts are not allowed here (test)')\n"
        "jail.build_root = refuse\n"
        "os._exit(jail.main(sys.argv[1:]))\n")
    os.chmod(tmp_path, 0o755)
    monkeypatch.setattr(local, "jail_path", lambda: broken)
    with LocalBackend(pool_size=0) as b:
        r = b.run("print(6 * 7)", tools, LIMITS)
        assert b.namespaces is False and b.namespace_failure is not None
        assert "mounts are not allowed here" in b.namespace_failure
    assert r.ok and r.answer == "42\n"
    assert "rlimits" in r.isolation and "netns" not in r.isolation


def test_uid_blocks_are_claimed_not_guessed(tmp_path: Path) -> None:
    """Two atc processes whose pids agree modulo 1000 must not share uids (RLIMIT_NPROC would
    then count one's processes against the other): a block is held by an flock until its owner
    lets go or dies."""
    from sandbox.local.backend import claim_uid_block

    first, fd1 = claim_uid_block(7, tmp_path)
    second, fd2 = claim_uid_block(7, tmp_path)  # another open file description: another "process"
    assert fd1 is not None and fd2 is not None
    assert first != second and not set(first) & set(second) and len(first) == len(second) == 100
    os.close(fd1)  # the owner exits: its block is free again
    again, fd3 = claim_uid_block(7, tmp_path)
    assert again == first
    for fd in (fd2, fd3):
        assert fd is not None
        os.close(fd)
