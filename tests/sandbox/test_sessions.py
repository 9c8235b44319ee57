"""Sandbox sessions (``atc.session``) on both backends, judged by what the host observes.

One interpreter keeps its globals from snippet to snippet; each snippet's result is its own (its
output, its calls, its error with line and attributed tool); memory, the call budget and time
bound the whole session; a snippet that times out, runs out of memory or spends the budget ends
it; and when it ends -- closed, reaped, collected, interrupted, or its process exiting -- its
processes, uid and container are gone and a new session sees nothing of it. Real jails, real
containers, the library API on 127.0.0.1; Docker tests skip without an engine (and fail under
ATC_REQUIRE_DOCKER=1).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import atc
from protocols import load_spec
from protocols.errors import SessionEnded, UsageError
from sandbox.api import Backend, Limits, SandboxSession, SessionBackend, SessionLimits, Toolset
from sandbox.local.backend import LocalBackend
from sandbox.session.open import Session, open_session
from tests.support.apis.library import LibraryAPI
from tests.support.fakes.backend import FakeBackend
from tests.support.procs import processes_of

LIMITS = Limits(timeout=10, memory_mb=256, max_calls=20, max_processes=32)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def local_backend() -> Iterator[LocalBackend]:
    with LocalBackend(pool_size=1) as backend:
        yield backend


@pytest.fixture(scope="module")
def docker_backend() -> Iterator[Backend]:
    from sandbox.docker.backend import DockerBackend, docker_available

    if not docker_available():
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    with DockerBackend(pool_size=1) as backend:
        yield backend


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> Backend:
    chosen: Backend = request.getfixturevalue(f"{request.param}_backend")
    return chosen


@pytest.fixture()
def tools(api: LibraryAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Toolset:
    monkeypatch.setenv("LIB_KEY", "lib-secret-7f3a9c")
    return Toolset([load_spec(api.write_spec(tmp_path / "library.json"))], credentials={"api_key": "env:LIB_KEY"})


def _container_exists(cid: str) -> bool:
    from sandbox.docker.engine import connect

    client = connect(timeout=10)
    try:
        return bool(client.api.containers(all=True, filters={"id": cid}))
    finally:
        client.close()


def _traces(s: Session) -> dict[str, object]:
    """Where the session lives on the host: its uid (local) or its container (Docker)."""
    runner = s.interpreter.runner  # type: ignore[attr-defined]
    if s.sandbox == "docker":
        return {"cid": runner.cell.cid}
    uids = [int(i[4:]) for i in runner.isolation if i.startswith("uid:")]
    return {"uid": uids[0] if uids else None, "pid": runner.worker.pid}


def _gone(traces: dict[str, object], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "cid" in traces:
            if not _container_exists(str(traces["cid"])):
                return True
        else:
            uid, pid = traces["uid"], traces["pid"]
            alive = os.path.exists(f"/proc/{pid}") if uid is None else bool(processes_of({int(str(uid))}))
            if not alive:
                return True
        time.sleep(0.05)
    return False


# -- state, and each snippet's own result ----------------------------------------------------------

def test_globals_survive_and_each_snippet_has_its_own_result(backend: Backend, tools: Toolset,
                                                             api: LibraryAPI) -> None:
    with open_session(tools, LIMITS, sandbox=backend) as s:
        first = s.run("authors = search_authors(name='le')\nprint(len(authors))")
        assert first.ok and first.answer.strip() == str(len(first.calls[0].response)), first.to_dict()
        assert [(c.tool, c.line) for c in first.calls] == [("search_authors", 1)]
        second = s.run("def book_of(i):\n    return get_book(book_id=i)\n\ntitle = book_of(10)['title']\n"
                       "print(title, len(authors))")
        assert second.ok and second.answer.startswith("A Wizard of Earthsea"), second.to_dict()
        assert [(c.tool, c.line) for c in second.calls] == [("get_book", 2)]  # inside book_of
        third = s.run("count = 1\nmissing = book_of(999)\ncount = 2")
        assert not third.ok and third.error is not None
        assert (third.error.type, third.error.tool, third.error.line, third.error.code) == \
            ("ToolError", "get_book", 2, "missing = book_of(999)")
        assert [c.status for c in third.calls] == [404]
        # The traceback shows where the function came from: the snippet that defined it.
        assert 'File "<snippet 3>", line 2' in third.error.traceback
        assert 'File "<snippet 2>", line 2, in book_of' in third.error.traceback
        # A snippet that raised left the globals as they were when it raised, like a notebook cell.
        fourth = s.run("print(count, title, 'missing' in globals(), ToolError.__name__)")
        assert fourth.ok and fourth.answer == "1 A Wizard of Earthsea False ToolError\n", fourth.to_dict()
        assert s.alive and s.snippets == 4 and s.calls == 3 and s.exec_seconds > 0
        assert len(api.requests) == 3
        assert s.to_dict()["calls"] == 3 and json.dumps(fourth.to_dict())


def test_a_syntax_error_and_a_lint_refusal_leave_the_session_running(backend: Backend, tools: Toolset) -> None:
    with open_session(tools, LIMITS, sandbox=backend) as s:
        assert s.run("x = 41").ok
        bad = s.run("x = (")
        assert bad.error is not None and bad.error.type == "SyntaxError" and bad.error.line == 1
        refused = s.run("print(().__class__.__bases__)")
        assert refused.error is not None and refused.error.type == "SandboxError" and "lint" in refused.error.message
        printed = s.run("import sys\nprint(x + 1)\nprint('e', file=sys.stderr)")
        assert printed.ok and printed.answer == "42\n" and printed.stderr == "e\n"


def test_output_is_capped_per_snippet_and_the_cap_does_not_end_the_session(backend: Backend, tools: Toolset) -> None:
    limits = Limits(timeout=10, memory_mb=256, max_output_bytes=1000)
    with open_session(tools, limits, sandbox=backend) as s:
        flood = s.run("kept = 'yes'\nwhile True:\n    print('x' * 100)")
        assert flood.error is not None and flood.error.type == "OutputLimit" and len(flood.answer) <= 1000
        again = s.run("print(kept)")
        assert again.ok and again.answer == "yes\n", again.to_dict()


# -- limits of the whole session --------------------------------------------------------------------

def test_the_call_budget_counts_across_snippets_and_ends_the_session(backend: Backend, tools: Toolset,
                                                                     api: LibraryAPI) -> None:
    limits = Limits(timeout=10, memory_mb=256, max_calls=3)
    with open_session(tools, limits, sandbox=backend) as s:
        assert s.run("get_stats()\nget_stats()").ok
        over = s.run("get_stats()\nget_stats()\nprint('unreachable')")
        assert over.error is not None and over.error.type == "CallBudget", over.to_dict()
        assert "session has ended" in over.error.message and over.answer == ""
        assert not s.alive and s.ended is not None and "CallBudget" in s.ended
        assert len(api.requests) == 3
        with pytest.raises(SessionEnded, match="CallBudget"):
            s.run("print(1)")


def test_forged_call_frames_count_against_the_session_budget(backend: Backend, tools: Toolset,
                                                             api: LibraryAPI) -> None:
    from tests.sandbox.test_hostile import FORGE

    forge = "for i in range(2):\n    frame(chan, {'op': 'call', 'id': 90 + i, 'tool': 'get_stats', 'args': {}})\n" \
            "    print(read(chan)['ok'])\n"
    limits = Limits(timeout=10, memory_mb=256, max_calls=3)
    with open_session(tools, limits, sandbox=backend) as s:
        assert s.run(FORGE + forge).answer == "True\nTrue\n"
        second = s.run(forge)  # the channel the first snippet found
        assert not s.alive and second.error is not None and second.error.type == "CallBudget", second.to_dict()
        assert len(api.requests) == 3 and s.calls == 4  # the refused fourth is counted, never sent


def test_memory_is_the_whole_sessions(backend: Backend, tools: Toolset) -> None:
    hold = "block_{n} = bytearray(100 << 20)\nfor j in range(0, len(block_{n}), 4096):\n    block_{n}[j] = 1\n" \
           "print('held')"
    # One block alone fits easily.
    assert backend.run(hold.format(n=1), tools, LIMITS).ok
    with open_session(tools, LIMITS, sandbox=backend) as s:
        assert s.run(hold.format(n=1)).ok
        traces = _traces(s)
        over = s.run(hold.format(n=2) + "\n" + hold.format(n=3))
        assert over.error is not None and over.error.type == "MemoryLimit", over.to_dict()
        assert not s.alive and "MemoryLimit" in (s.ended or "")
        assert _gone(traces)


def test_threads_and_memory_stay_flat_over_500_printing_snippets(backend: Backend, tools: Toolset) -> None:
    """Each snippet prints (so the output pump runs) and keeps 16 KB; the interpreter's threads and
    address space stay where they were after the first snippets (issue 29: a pump per snippet
    lingered, each with its stack and malloc arena, and a session of fast snippets ran out of
    address space with a false MemoryLimit)."""
    snippet = ("kept.append(bytearray(16384))\nprint(len(kept), len(os.listdir('/proc/self/task')), "
               "[l.split()[1] for l in open('/proc/self/status') if l.startswith('VmSize')][0])")
    limits = Limits(timeout=10, memory_mb=128, max_calls=20)
    seen: list[tuple[int, int, int]] = []
    with open_session(tools, limits, sandbox=backend) as s:
        assert s.run("import os\nkept = []").ok
        for _ in range(500):
            r = s.run(snippet)
            assert r.ok, (len(seen), r.to_dict())
            count, threads, vm_kb = map(int, r.answer.split())
            seen.append((count, threads, vm_kb))
    assert [c for c, _, _ in seen] == list(range(1, 501))
    assert max(t for _, t, _ in seen) <= 2, [t for _, t, _ in seen]  # the interpreter and one output pump
    grown_mb = (seen[-1][2] - seen[9][2]) / 1024
    assert grown_mb < 8 + 16, f"the address space grew {grown_mb:.0f} MB over 490 snippets holding 8 MB"


def test_a_snippet_that_times_out_ends_the_session_and_its_processes(backend: Backend, tools: Toolset) -> None:
    limits = Limits(timeout=1, memory_mb=256)
    with open_session(tools, limits, sandbox=backend) as s:
        assert s.run("import subprocess, sys\nchild = subprocess.Popen([sys.executable, '-c', "
                     "'import time; time.sleep(600)'], start_new_session=True)").ok
        traces = _traces(s)
        started = time.monotonic()
        stuck = s.run("import time\nprint('waiting', flush=True)\ntime.sleep(600)")
        assert time.monotonic() - started < 6
        assert stuck.error is not None and stuck.error.type == "Timeout" and "session has ended" in stuck.error.message
        assert stuck.answer == "waiting\n"
        assert _gone(traces), "the session's processes outlived it"
        with pytest.raises(SessionEnded, match="Timeout"):
            s.run("print(child.pid)")


def test_the_execution_time_of_all_snippets_is_bounded(backend: Backend, tools: Toolset) -> None:
    with open_session(tools, LIMITS, sandbox=backend, session_limits=SessionLimits(exec_seconds=1.5)) as s:
        assert s.run("import time\ntime.sleep(0.8)").ok
        late = s.run("time.sleep(5)")
        assert late.error is not None and late.error.type == "Timeout", late.to_dict()
        assert "execution time" in late.error.message and 1.4 < s.exec_seconds < 3
        assert not s.alive


def test_a_forged_done_cannot_run_on_past_the_sessions_cpu_time(backend: Backend, tools: Toolset) -> None:
    """A snippet that sends its own ``done`` and keeps a thread spinning after it looks finished
    to the host, so no snippet deadline bounds that thread: the session's CPU rlimit does."""
    from tests.sandbox.test_hostile import FORGE

    spin = FORGE + """
import threading
def spin():
    while True:
        pass
threading.Thread(target=spin, daemon=True).start()
frame(chan, {"op": "done", "ok": True, "stdout": "forged", "stderr": "", "truncated": False, "error": None})
import time
time.sleep(600)
"""
    limits = Limits(timeout=10, memory_mb=256, cpu_seconds=1)  # in a session: CPU time of the whole session
    with open_session(tools, limits, sandbox=backend) as s:
        traces = _traces(s)
        forged = s.run(spin)
        assert forged.answer == "forged"  # the host was lied to about this snippet's end...
        if backend.name == "docker":  # ...not about its CPU time: the kernel stops the interpreter
            status = s.interpreter.runner.cell.exit_status(timeout=20)  # type: ignore[attr-defined]
            # (the container's server reports a signal as 128 + N, as a shell does)
            assert status is not None and status in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU,
                                                     128 + signal.SIGKILL), status
        else:
            assert _gone(traces, timeout=20), "a thread spun on past the session's CPU time"
        started = time.monotonic()
        after = s.run("print(1)")
        assert time.monotonic() - started < 5  # the interpreter is gone, not busy
        assert after.error is not None and after.error.type == "Timeout" and "CPU time" in after.error.message, \
            after.to_dict()
        assert not s.alive


# -- the end of a session ---------------------------------------------------------------------------

def test_nothing_of_a_closed_session_survives_or_reaches_the_next(backend: Backend, tools: Toolset) -> None:
    from tests.sandbox.test_warm_isolation import LITTER, LOOK

    with open_session(tools, LIMITS, sandbox=backend) as s:
        left = json.loads(s.run(LITTER).answer.strip().splitlines()[-1])
        assert left["daemon"] is True and "/tmp" in left["made"], left
        s.run("secret_of_the_first = 'only-here-5b2'")
        traces = _traces(s)
    assert not s.alive and s.ended == "closed"
    assert _gone(traces), "the closed session left processes or its container behind"
    with open_session(tools, LIMITS, sandbox=backend) as fresh:
        seen = json.loads(fresh.run(LOOK).answer.strip().splitlines()[-1])
        assert seen["files"] == [] and seen["env"] == [] and seen["procs"] == [] and seen["threads"] == [], seen
        assert fresh.run("print('secret_of_the_first' in globals())").answer == "False\n"
    # A one-shot run on the same backend afterwards sees nothing either.
    after = backend.run(LOOK, tools, LIMITS)
    assert json.loads(after.answer.strip().splitlines()[-1])["files"] == []


def test_an_unused_session_is_reaped(backend: Backend, tools: Toolset) -> None:
    s = open_session(tools, LIMITS, sandbox=backend, session_limits=SessionLimits(idle_seconds=0.5))
    assert s.run("x = 1").ok
    traces = _traces(s)
    deadline = time.monotonic() + 10
    while s.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not s.alive and "reaped" in (s.ended or "")
    assert _gone(traces)
    with pytest.raises(SessionEnded, match="reaped"):
        s.run("print(x)")


def test_a_session_ends_at_its_lifetime_even_while_in_use(local_backend: LocalBackend, tools: Toolset) -> None:
    s = open_session(tools, LIMITS, sandbox=local_backend, session_limits=SessionLimits(lifetime_seconds=1.0))
    cut = s.run("import time\ntime.sleep(5)")
    assert cut.error is not None and cut.error.type == "Timeout" and "lifetime" in cut.error.message
    assert not s.alive


def test_a_collected_session_is_closed(local_backend: LocalBackend, tools: Toolset) -> None:
    s = open_session(tools, LIMITS, sandbox=local_backend)
    assert s.run("x = 1").ok
    traces = _traces(s)
    interpreter = s.interpreter
    del s
    gc.collect()
    assert not interpreter.alive and "garbage" in (interpreter.ended or "")
    assert _gone(traces)


def test_ctrl_c_while_a_snippet_runs_ends_the_session(local_backend: LocalBackend, tools: Toolset) -> None:
    s = open_session(tools, LIMITS, sandbox=local_backend)
    traces = _traces(s)
    main = threading.main_thread().ident
    assert main is not None
    done = threading.Event()

    def press_ctrl_c() -> None:
        # What Ctrl-C sends, again every half second as an impatient user would: a SIGINT that
        # lands while the main thread runs a finalizer is swallowed by Python itself.
        time.sleep(0.3)
        while not done.is_set():
            signal.pthread_kill(main, signal.SIGINT)
            done.wait(0.5)

    presser = threading.Thread(target=press_ctrl_c, daemon=True)
    presser.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            s.run("import time\ntime.sleep(30)")
    finally:
        done.set()
    assert time.monotonic() - started < 3
    assert not s.alive and "interrupted" in (s.ended or "")
    assert _gone(traces)


def test_closing_the_backend_ends_its_sessions(tools: Toolset) -> None:
    backend = LocalBackend(pool_size=0)
    s = open_session(tools, LIMITS, sandbox=backend)
    traces = _traces(s)
    backend.close()
    assert not s.alive and "backend" in (s.ended or "")
    assert _gone(traces, timeout=3)


EXITING = """
import json, os, sys
sys.path.insert(0, {root!r})
import atc
s = atc.session(atc.Toolset([]), sandbox={sandbox!r})
assert s.run("x = 1").ok
runner = s.interpreter.runner
print(json.dumps({{"cid": runner.cell.cid}} if {sandbox!r} == "docker" else
                 {{"uid": [int(i[4:]) for i in runner.isolation if i.startswith("uid:")][0],
                   "pid": runner.worker.pid}}), flush=True)
os.environ["KEEP"] = "1"  # and the interpreter exits with the session open
"""


@pytest.mark.parametrize("sandbox", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_session_left_open_ends_when_its_process_exits(sandbox: str, request: pytest.FixtureRequest) -> None:
    if sandbox == "docker":
        request.getfixturevalue("docker_backend")  # skips without an engine
    done = subprocess.run([sys.executable, "-c", EXITING.format(root=str(ROOT), sandbox=sandbox)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    traces = json.loads(done.stdout.strip().splitlines()[-1])
    assert _gone(traces), f"the session outlived its process: {traces}"


# -- the Python API ---------------------------------------------------------------------------------

def test_atc_session_takes_a_stored_name_and_async_callers(local_backend: LocalBackend, api: LibraryAPI,
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from atc.config import atc_home
    from protocols.store import Store

    monkeypatch.setenv("LIB_KEY", "lib-secret-7f3a9c")
    collection = load_spec(api.write_spec(tmp_path / "library.json"), name="library")
    Store(atc_home()).add(collection)
    with atc.session("library", sandbox=local_backend, credentials={"api_key": "env:LIB_KEY"}) as s:
        assert s.run("n = get_stats()").ok and s.run("print(sorted(n))").answer.startswith("[")
    with pytest.raises(atc.errors.NotFound):
        atc.session("no-such-collection", sandbox=local_backend)

    async def main() -> list[str]:
        async with atc.asession(collection, sandbox=local_backend, credentials={"api_key": "env:LIB_KEY"}) as a:
            first = await a.run("stats = get_stats()")
            second = await a.run("print(type(stats).__name__)")
            assert a.session.calls == 1
            return [str(first.ok), second.answer.strip()]

    assert asyncio.run(main()) == ["True", "dict"]


def test_bad_input_is_a_clear_error(local_backend: LocalBackend, tools: Toolset) -> None:
    with pytest.raises(UsageError, match="exec_seconds"):
        SessionLimits(exec_seconds=0)
    with pytest.raises(UsageError, match="cannot keep a session"):
        open_session(tools, sandbox=_NoSessions())
    with open_session(tools, LIMITS, sandbox=local_backend) as s, pytest.raises(UsageError, match="string"):
        s.run(b"print(1)")  # type: ignore[arg-type]


class _NoSessions:
    name = "plain"

    def run(self, program: str, tools: Toolset, limits: Limits) -> atc.ExecutionResult:
        raise AssertionError("not called")

    def close(self) -> None:
        pass

    def __enter__(self) -> _NoSessions:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def test_every_backend_and_the_fake_implement_the_session_seam(local_backend: LocalBackend, tools: Toolset) -> None:
    fake = FakeBackend({"get_stats": lambda: {"books": 5}})
    for backend in (local_backend, fake):
        assert isinstance(backend, SessionBackend)
    with open_session(tools, Limits(max_calls=2), sandbox=fake) as s:
        assert isinstance(s.interpreter, SandboxSession)
        assert s.run("stats = get_stats()").ok
        assert s.run("print(stats['books'])").answer == "5\n"
        assert s.run("get_stats()\nget_stats()").error is not None and s.calls == 2
    with pytest.raises(SessionEnded):
        s.run("print(stats)")
    with open_session(tools, LIMITS, sandbox=local_backend) as real:
        assert isinstance(real.interpreter, SandboxSession)


@pytest.mark.docker
def test_the_docker_backend_implements_the_session_seam(docker_backend: Backend) -> None:
    assert isinstance(docker_backend, SessionBackend)
