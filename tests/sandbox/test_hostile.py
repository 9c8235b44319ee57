"""Hostile programs, run on every backend, judged by what the HOST observes.

Every program must end with a JSON-able result and a clear ``error.type`` (or succeed harmlessly),
the test process must survive, no secret (a file in ATC_HOME and in the host's /tmp, a host
environment variable, a ``--credential`` value) may appear anywhere in the result, a canary TCP
listener on 127.0.0.1 must see no connection, no host file may be written, the library API must
see no request that no tool call made, and (local backend) no sandbox process may be left behind.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from string import Template
from typing import Any

import pytest

from protocols import load_spec
from sandbox.api import Backend, ExecutionResult, Limits, Toolset
from sandbox.local.backend import LocalBackend, uid_block
from tests.support.apis.library import SECRET, LibraryAPI
from tests.support.hostile_host import FORGE
from tests.support.session_mode import InSession

FILE_SECRET = "file-secret-5d1e0b"
TMP_SECRET = "tmp-secret-a93f"
ENV_SECRET = "host-env-secret-91c2"
ANY_FAILURE = None  # marker: any error type is acceptable, but the run must not be ok


@dataclass(frozen=True)
class Hostile:
    """A hostile program. ``$secret_file``, ``$tmp_file``, ``$host_file``, ``$canary``, ``$api``,
    ``$host_pid`` are substituted. ``types`` are the acceptable ``error.type`` values (``"ok"``
    when a successful run is fine too); ``max_requests`` bounds what the API may see."""

    name: str
    program: str
    types: tuple[str, ...]
    max_requests: int = 0
    answer_excludes: tuple[str, ...] = ()
    answer_includes: str | None = None


PROGRAMS = [
    # -- host files and environment
    Hostile("read_secret_in_atc_home", "print(open('$secret_file').read())",
            ("FileNotFoundError", "PermissionError")),
    Hostile("read_secret_in_host_tmp", "print(open('$tmp_file').read())", ("FileNotFoundError", "PermissionError")),
    Hostile("walk_host_dirs_for_secrets", """
import os
found = []
for top in ('/tmp', '/root', '/home', '/work', '$atc_home'):
    for root, dirs, files in os.walk(top):
        for f in files:
            try:
                found.append(open(os.path.join(root, f), errors='replace').read(200))
            except Exception:
                pass
print(len(found), found[:50])
""", ("ok",)),
    Hostile("environ", "import os\nprint(dict(os.environ))", ("ok",)),
    Hostile("proc_environ_of_all", """
import os
out = []
for pid in os.listdir('/proc'):
    if pid.isdigit():
        for what in ('environ', 'cmdline'):
            try:
                out.append(open('/proc/%s/%s' % (pid, what), 'rb').read().decode('utf-8', 'replace'))
            except Exception as e:
                out.append(type(e).__name__)
print(out)
""", ("ok",)),
    Hostile("signal_host_process", "import os, signal\nos.kill($host_pid, signal.SIGTERM)\nprint('sent')",
            ("ProcessLookupError", "PermissionError")),
    Hostile("kill_parent", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('alive')",
            ("ok", "SandboxError", "ProcessLookupError", "PermissionError")),
    Hostile("kill_everything", "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('alive')",
            ("ok", "SandboxError", "ProcessLookupError", "PermissionError")),
    Hostile("write_host_file", "open('$host_file', 'w').write('pwned')\nprint('wrote')",
            ("FileNotFoundError", "PermissionError", "OSError")),
    Hostile("shell_writes_host_file", """
import subprocess
r = subprocess.run(['/bin/sh', '-c', 'echo pwned > $host_file; cat $secret_file; env'], capture_output=True, text=True)
print(r.returncode, r.stdout, r.stderr)
""", ("ok", "FileNotFoundError", "PermissionError", "OSError")),
    Hostile("ctypes_libc", """
import ctypes
libc = ctypes.CDLL(None)
libc.system(b'echo pwned > $host_file')
print(libc.kill($host_pid, 15))
""", ("ok", "OSError", "MemoryLimit")),
    # -- network
    Hostile("socket_to_canary", "import socket\nsocket.create_connection(('127.0.0.1', $canary), timeout=2)",
            ("ConnectionRefusedError", "OSError", "TimeoutError", "PermissionError")),
    Hostile("http_to_canary", "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:$canary/', timeout=2)",
            ("URLError", "OSError", "ConnectionRefusedError", "TimeoutError")),
    Hostile("http_to_the_api_directly",
            "import urllib.request\nprint(urllib.request.urlopen('$api/stats', timeout=2).read())",
            ("URLError", "OSError", "ConnectionRefusedError", "TimeoutError")),
    # -- restricted-python escapes
    Hostile("subclasses", "print(().__class__.__bases__[0].__subclasses__())", ("SandboxError",)),
    Hostile("generator_frame", "def g():\n    yield 1\nx = g()\nprint(x.gi_frame.f_back.f_globals)",
            ("SandboxError",)),
    Hostile("traceback_frame", "try:\n    1/0\nexcept Exception as e:\n    print(e.__traceback__.tb_frame.f_globals)",
            ("SandboxError",)),
    Hostile("format_traversal", "print('{0.__class__.__mro__}'.format(1))", ("SandboxError",)),
    Hostile("getattr_dunder", "print(getattr(get_stats, '__globals__'))", ("SandboxError",)),
    # -- resources
    Hostile("fork_bomb", "import os\nwhile True:\n    os.fork()",
            ("Timeout", "BlockingIOError", "SandboxError", "OSError", "MemoryLimit")),
    Hostile("thread_bomb", "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(60,)).start()",
            ("RuntimeError", "MemoryLimit", "Timeout", "SandboxError")),
    Hostile("huge_allocation", "x = bytearray(10**11)\nprint(len(x))", ("MemoryLimit",)),
    Hostile("growing_memory", "l = []\nwhile True:\n    l.append(' ' * 10**6)", ("MemoryLimit", "SandboxError")),
    Hostile("disk_fill", "with open('fill.bin', 'wb') as f:\n    while True:\n        f.write(b'0' * 10**6)",
            ("OSError", "PermissionError")),
    Hostile("disk_fill_tmp", "with open('/tmp/fill.bin', 'wb') as f:\n    while True:\n        f.write(b'0' * 10**6)",
            ("OSError", "PermissionError")),
    Hostile("infinite_loop", "while True:\n    pass", ("Timeout",)),
    Hostile("long_sleep", "import time\ntime.sleep(1000)", ("Timeout",)),
    Hostile("stdout_flood", "while True:\n    print('x' * 1000)", ("OutputLimit",)),
    Hostile("stderr_flood_caught", "import sys\nwhile True:\n    try:\n        sys.stderr.write('y' * 1000)\n"
            "    except BaseException:\n        pass", ("OutputLimit", "Timeout")),
    Hostile("raw_fd_writes", "import os\nfor i in range(20000):\n    os.write(1, b'z' * 500)\nprint('done')",
            ("ok",), answer_excludes=("zzz",), answer_includes="done"),
    Hostile("deep_recursion", "def f(n):\n    return f(n + 1)\nf(0)", ("RecursionError",)),
    Hostile("c_stack_overflow", "import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1)\nf(0)",
            ("RecursionError", "SandboxError", "MemoryLimit", "SystemError", "Timeout")),
    Hostile("hard_exit", "import os\nprint('bye')\nos._exit(0)", ("SandboxError",)),
    Hostile("detached_sleeper", "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(1000)\n"
            "print('parent done')", ("ok",)),
    # -- tool arguments and the channel
    Hostile("path_traversal_argument", "print(get_author(author_id='../stats'))", ("ToolError",)),
    Hostile("crlf_in_query", "print(search_authors(name='x\\r\\nX-Evil: 1'))", ("ToolError",)),
    Hostile("call_budget", "for i in range(100):\n    get_stats()", ("CallBudget",), max_requests=5),
    Hostile("call_budget_swallowed", "for i in range(20):\n    try:\n        get_stats()\n"
            "    except BaseException:\n        pass\nprint('survived')", ("CallBudget",), max_requests=5),
    Hostile("forged_call_frames", FORGE + """
frame(chan, {"op": "call", "id": 1, "tool": "get_author", "args": {"author_id": "../stats"}})
print(read(chan))
frame(chan, {"op": "call", "id": 2, "tool": "delete_everything", "args": {}})
print(read(chan))
frame(chan, {"op": "call", "id": 3, "tool": "get_book", "args": {"book_id": 10, "x": "y"}})
print(read(chan))
""", ("ok", "ToolError")),
    Hostile("forged_garbage_frame", FORGE + "chan.sendall(b'\\xff\\xff\\xff\\xffgarbage')\nimport time\ntime.sleep(30)",
            ("SandboxError",)),
    # -- red team: frames the host must refuse without crashing or printing invalid JSON
    Hostile("forged_recursion_bomb_frame", FORGE + """
body = b'{"op":"call","id":1,"tool":"get_stats","args":{"a":' + b"[" * 100000 + b"]" * 100000 + b"}}"
chan.sendall(struct.pack(">I", len(body)) + body)
print(read(chan))
""", ("SandboxError",)),
    Hostile("forged_deep_args", FORGE + """
body = b'{"op":"call","id":1,"tool":"get_stats","args":{"a":' + b"[" * 900 + b"]" * 900 + b"}}"
chan.sendall(struct.pack(">I", len(body)) + body)
print(read(chan))
""", ("SandboxError",)),
    Hostile("forged_nan_args", FORGE + """
body = b'{"op":"call","id":1,"tool":"search_authors","args":{"name":NaN,"x":-Infinity}}'
chan.sendall(struct.pack(">I", len(body)) + body)
print(read(chan))
""", ("SandboxError",)),
    Hostile("forged_lone_surrogates", FORGE + """
body = b'{"op":"call","id":1,"tool":"\\\\ud800","args":{"\\\\udcff":"\\\\udfff"}}'
chan.sendall(struct.pack(">I", len(body)) + body)
print(read(chan))
""", ("SandboxError",)),
    Hostile("forged_surrogate_done", FORGE + """
body = b'{"op":"done","ok":true,"stdout":"\\\\ud800","stderr":"","truncated":false,"error":null}'
chan.sendall(struct.pack(">I", len(body)) + body)
import time
time.sleep(30)
""", ("SandboxError",)),
    Hostile("forged_call_position", FORGE + """
frame(chan, {"op": "call", "id": 1, "tool": "get_stats", "args": {}, "line": 10**300, "col": -5})
print(read(chan))
frame(chan, {"op": "call", "id": 2, "tool": "get_stats", "args": {}, "line": -1, "col": 10**9})
print(read(chan))
""", ("ok",), max_requests=2),
    Hostile("inode_exhaustion", """
import os
n = 0
try:
    for i in range(100000):
        os.mkdir('/tmp/d%d' % i)
        n += 1
except OSError:
    pass
print('created %d' % n)
""", ("ok", "MemoryLimit", "Timeout"), answer_excludes=("created 100000",)),
    Hostile("forged_done_of_wrong_types", FORGE + """
frame(chan, {"op": "done", "ok": False, "stdout": 5, "stderr": ["a"],
             "error": {"type": 7, "message": {"a": 1}, "frames": 5, "tool": 5, "traceback": 9}})
import time
time.sleep(30)
""", ("7",)),
    Hostile("slow_drip_frame", FORGE + """
import time
chan.sendall(struct.pack(">I", 1000))
for i in range(1000):
    chan.sendall(b" ")
    time.sleep(0.5)
""", ("Timeout",)),
    Hostile("call_argument_flood", FORGE + """
big = "A" * (15 << 20)
for i in range(5):
    frame(chan, {"op": "call", "id": i, "tool": "get_stats", "args": {"x": big}})
    read(chan)
print("sent all")
""", ("SandboxError",)),
    Hostile("calls_after_the_budget", FORGE + """
for i in range(5000):
    frame(chan, {"op": "call", "id": i, "tool": "get_stats", "args": {"n": i}})
    read(chan)
print("sent all")
""", ("CallBudget",)),
    # -- red team: frames that cost the sandbox nothing and the host much (issue 20; their cost
    #    to the host is measured in tests/sandbox/test_host_memory.py)
    Hostile("forged_five_million_empty_lists", FORGE + """
body = b'{"op":"call","id":1,"tool":"get_stats","args":{"a":[' + b"[]," * 5_000_000 + b'[]]}}'
chan.sendall(struct.pack(">I", len(body)) + body)
print(read(chan))
""", ("SandboxError",)),
    Hostile("forged_ready_frames", FORGE + """
for i in range(100000):
    frame(chan, {"op": "ready", "pid": 1, "python": "3.11"})
""", ("SandboxError",)),
    Hostile("forged_output_past_the_cap", FORGE + """
for i in range(100):
    frame(chan, {"op": "output", "stdout": "o" * 100_000, "stderr": ""})
import time
time.sleep(30)
""", ("SandboxError",), answer_excludes=("o" * 200_001,)),
    Hostile("forged_frame_flood", FORGE + """
for i in range(1_000_000):
    frame(chan, {"op": "output", "stdout": "", "stderr": ""})
""", ("SandboxError",)),
    Hostile("huge_program", "x = 1\n" * 400_000 + "print(x)\n", ("SandboxError",)),
    Hostile("parser_recursion_bomb", "x = 1\nprint(x" + ".real" * 100_000 + ")\n", ("SandboxError",)),
    Hostile("parser_memory_bomb", "print(" + "-" * 100_000 + "1)\n", ("SandboxError",)),
    Hostile("memory_across_processes", """
import os, select, time
r, w = os.pipe()
for i in range(4):
    if os.fork() == 0:
        block = b'x' * (120 << 20)
        time.sleep(1.5)
        os.write(w, b'1')  # still alive, and holding the block, after 1.5 s
        os._exit(0)
held, end = 0, time.monotonic() + 2.5
while time.monotonic() < end:
    if select.select([r], [], [], 0.1)[0]:
        held += len(os.read(r, 16))
print('held %d' % held)
""", ("ok", "MemoryLimit", "SandboxError"), answer_excludes=("held 3", "held 4")),
]


#: Programs that leave something behind in their sandbox (files, processes): in session mode a
#: new session afterwards must see none of it.
PLANTS = {"disk_fill", "disk_fill_tmp", "inode_exhaustion", "detached_sleeper", "fork_bomb",
          "memory_across_processes", "shell_writes_host_file", "kill_parent"}


#: Programs that need their 4 s even in session mode (they wait 2.5 s, send 75 MB of frames, or fill
#: 256 MB a megabyte at a time).
SLOW_SNIPPETS = {"memory_across_processes", "call_argument_flood", "growing_memory"}


class Canary:
    """A TCP listener on 127.0.0.1 that records every connection it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections: list[Any] = []
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, addr = self.sock.accept()
            except OSError:
                continue
            self.connections.append(addr)
            conn.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join(2)
        self.sock.close()


@pytest.fixture(scope="module")
def local_backend() -> Iterator[LocalBackend]:
    with LocalBackend(pool_size=2) as backend:
        yield backend


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker), "local-session",
                        pytest.param("docker-session", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """A backend, or (``-session``) the same backend running each program as a snippet of a
    sandbox session that already ran a benign one (``tests/support/session_mode.py``)."""
    if request.param.endswith("-session"):
        inner = {"local-session": "local_backend", "docker-session": "docker"}[request.param]
        yield InSession(request.getfixturevalue(inner))
        return
    if request.param == "local":
        yield request.getfixturevalue("local_backend")
        return
    try:
        from sandbox.docker.backend import docker_available
    except ImportError:
        pytest.skip("sandbox.docker.backend is not importable")
    if not docker_available():
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    yield request.getfixturevalue("docker_backend_instance")


@pytest.fixture()
def docker(request: pytest.FixtureRequest) -> Backend:
    """The Docker backend of ``backend``'s "docker" parameter (skips the same way)."""
    try:
        from sandbox.docker.backend import docker_available
    except ImportError:
        pytest.skip("sandbox.docker.backend is not importable")
    if not docker_available():
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    chosen: Backend = request.getfixturevalue("docker_backend_instance")
    return chosen


@pytest.fixture(scope="module")
def docker_backend_instance() -> Iterator[Backend]:
    from sandbox.docker.backend import DockerBackend

    with DockerBackend() as backend:
        yield backend


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process on the host."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    out[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return out


def _sandbox_processes() -> list[int]:
    """Host pids of processes running as a sandbox uid of THIS test process (the local backend
    gives each run its own uid from a block it claims), leaving out the warm runners that live
    backends keep ready on purpose (a process-wide backend keeps a pool per set of limits)."""
    from sandbox.local.backend import _LIVE

    warm_jails = {w.proc.pid for b in list(_LIVE) for ws in list(b._warm.values()) for w in list(ws)}
    parents = _parents()

    def warm(pid: int) -> bool:
        for _ in range(8):  # a warm runner is the jail itself (forked into its namespaces by the
            if pid in warm_jails:  # fork server, it is PID 1 and runs as the run's uid), or its child
                return True
            pid = parents.get(pid, 0)
        return False

    block = uid_block()
    pids = []
    for pid in parents:
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        if uid in block and not warm(pid):
            pids.append(pid)
    return pids


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_hostile_program(case: Hostile, backend: Backend, api: LibraryAPI, tmp_path: Path,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path(os.environ["ATC_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    secret_file = home / "secret.txt"
    secret_file.write_text(FILE_SECRET)
    tmp_file = tmp_path / "host-secret.txt"
    tmp_file.write_text(TMP_SECRET)
    os.chmod(tmp_file, 0o644)
    for parent in (tmp_path, *tmp_path.parents):
        if str(parent) in ("/", "/tmp"):
            break
        os.chmod(parent, 0o755)
    host_file = tmp_path / "pwned.txt"
    monkeypatch.setenv("HOSTILE_HOST_SECRET", ENV_SECRET)
    monkeypatch.setenv("LIB_KEY", SECRET)
    canary = Canary()
    program = Template(case.program).safe_substitute(
        secret_file=secret_file, tmp_file=tmp_file, host_file=host_file, canary=canary.port, api=api.url,
        host_pid=os.getpid(), atc_home=home)
    tools = Toolset([load_spec(api.write_spec(tmp_path / "library.json"))], credentials={"api_key": "env:LIB_KEY"})
    limits = Limits(timeout=4, memory_mb=256, max_calls=5, max_output_bytes=200_000, max_processes=32,
                    max_file_bytes=8_000_000)
    if isinstance(backend, InSession) and case.name not in SLOW_SNIPPETS:
        limits = replace(limits, timeout=2)  # the same checks, sooner: session mode doubles the suite
    try:
        started = time.monotonic()
        result = backend.run(program, tools, limits)
        elapsed = time.monotonic() - started
    finally:
        canary.close()

    assert isinstance(result, ExecutionResult)
    # What atc prints with --json: strict JSON (no NaN), encodable as UTF-8 (no lone surrogates).
    json.dumps(result.to_dict(), ensure_ascii=False, allow_nan=False).encode("utf-8")
    line_count = len(program.splitlines())
    assert all(c.line is None or 0 < c.line <= line_count for c in result.calls)
    assert len(result.calls) <= limits.max_calls + 1, "the host kept serving calls past the budget"
    doc = json.dumps(result.to_dict())
    outcome = "ok" if result.ok else (result.error.type if result.error else "no-error")
    assert outcome in case.types, f"{case.name}: {outcome}: {result.error and result.error.message}\n{doc[:1500]}"
    if not result.ok:
        assert result.error is not None and result.error.type and result.error.message
    assert elapsed < limits.timeout + 10
    for secret in (FILE_SECRET, TMP_SECRET, ENV_SECRET, SECRET):
        assert secret not in doc, f"{case.name} leaked {secret!r}"
    for text in case.answer_excludes:
        assert text not in result.answer
    if case.answer_includes:
        assert case.answer_includes in result.answer
    assert canary.connections == [], f"{case.name} reached the host's loopback"
    assert not host_file.exists(), f"{case.name} wrote a host file"
    sent = [c for c in result.calls if c.status is not None]
    assert len(api.requests) == len(sent) <= case.max_requests
    for request in api.requests:
        assert ".." not in request.path and "X-Evil" not in request.headers
    if isinstance(backend, InSession):
        backend.check_after()
        if case.name in PLANTS:  # a new session sees nothing of the one the program ran in
            seen = backend.look_afresh(tools, limits)
            assert all(isinstance(v, str) or v == [] for v in seen["places"].values()) and not seen["kept"], seen
            assert not seen["own_pid_namespace"] or seen["pids"] == [1], seen
    if isinstance(getattr(backend, "inner", backend), LocalBackend):
        # Runs are reaped in the background: give the reaper a moment, then nothing may be left
        # but runners the pools keep warm (one more may be starting for this backend).
        deadline = time.monotonic() + 5
        while len(_sandbox_processes()) > 2 * 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_sandbox_processes()) <= 2 * 2, f"sandbox processes were left behind: {_sandbox_processes()}"


SPIN_CHILDREN = """
import os, time
for i in range(4):
    if os.fork() == 0:
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            pass
        os._exit(0)
for i in range(4):
    os.wait()
t = os.times()
print('%.2f' % (t.children_user + t.children_system))
"""


@pytest.mark.timeout(60)
def test_local_sandbox_processes_share_one_cpu(local_backend: LocalBackend, api: LibraryAPI, tmp_path: Path) -> None:
    """Forked processes of one run together get one CPU (a cpu cgroup), not every core."""
    from sandbox.local.cgroups import cgroup_parent

    if cgroup_parent("cpu") is None or cgroup_parent("memory") is None:
        pytest.skip("no writable cgroups here (not root?)")
    tools = Toolset([load_spec(api.write_spec(tmp_path / "library.json"))])
    result = local_backend.run(SPIN_CHILDREN, tools, Limits(timeout=10))
    assert result.ok, result.error
    assert "cpu-cgroup:1" in result.isolation and "memory-cgroup" in result.isolation
    assert float(result.answer) < 1.9, f"4 children spinning 1.5 s used {result.answer} s of CPU"


#: Holds most of the memory limit itself, then starts two fresh interpreters that take the rest
#: and more: each process alone is under its address-space limit, together they are over the
#: cgroup's, and the kernel's OOM killer takes the largest, this one.
OOM_TOGETHER = """
import subprocess, sys, time
block = bytearray(170 << 20)
for j in range(0, len(block), 4096):
    block[j] = 1
hog = "b = bytearray(70 << 20)\\nfor j in range(0, len(b), 4096): b[j] = 1\\nimport time; time.sleep(5)"
children = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(2)]
time.sleep(5)
print('survived')
"""


@pytest.mark.timeout(90)
def test_a_kept_cgroup_still_tells_the_next_oom_and_an_oom_one_is_not_kept(local_backend: LocalBackend) -> None:
    """Empty cgroups are handed to the next sandbox instead of removed (sandbox/local/cgroups.py): an
    OOM kill in a reused cgroup must still be reported, a quiet run after it must not be blamed
    for it, and a cgroup with an OOM kill is removed, not kept."""
    from sandbox.local import cgroups

    if cgroups.cgroup_parent("memory") is None:
        pytest.skip("no writable cgroups here (not root?)")
    limits = Limits(timeout=20, memory_mb=256)
    tools = Toolset(collections=[])
    for _ in range(2):
        quiet = local_backend.run("print('fine')", tools, limits)
        assert quiet.ok and quiet.answer == "fine\n", quiet.to_dict()
        hog = local_backend.run(OOM_TOGETHER, tools, limits)
        assert not hog.ok and hog.error is not None and hog.error.type == "MemoryLimit", hog.to_dict()
    local_backend.close()
    kept = [path for spare in cgroups._spares.values() for path in spare]
    assert kept, "no cgroup was kept for reuse"
    assert all(cgroups._oom_kills(path) == cgroups._ooms[path] for path in kept)  # none holds an unseen kill
