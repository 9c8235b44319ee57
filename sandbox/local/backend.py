"""The local backend: each program in a fresh, jailed subprocess of this machine.

A run takes one WARM runner from a small pool (spawned in the background and blocked on
``start``; used once, never reused), serves it with the shared session loop
(``sandbox.program_run.serve``), then makes sure the runner and everything it started are gone:
the runner lives in its own PID namespace, whose PID 1 the backend kills (the kernel then kills
everything else in it), and the jail's process group goes too.

What confines the program is ``sandbox/inside/jail.py`` (namespaces, a fresh read-only root, an
unprivileged uid, rlimits, the system-call filter of ``sandbox/inside/seccomp.py``) started with an
isolated interpreter (``-I -S``) and an EMPTY environment; ``sandbox/lint.py`` refuses the
classic restricted-Python escapes first, as an extra guard. The result's ``isolation`` lists what
was really in force. After the run, whatever the run's uid still owns in the kernel (SysV IPC
objects, keys: ``sandbox/local/kernel_objects.py``) is removed before the uid is handed out again.

``open_session`` lends one such runner to a sandbox session (``sandbox/session/interpreter.py``): spawned
with the session's CPU time, serving snippet after snippet, torn down the same way when it ends.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocols.errors import SandboxError
from sandbox.api import ErrorInfo, ExecutionResult, Limits, SessionLimits, Toolset
from sandbox.gateway.core import Gateway
from sandbox.inside import path_of
from sandbox.inside.seccomp import NAME as FILTER_NAME
from sandbox.inside.seccomp import UnsupportedArch, compile_filter
from sandbox.lint import lint
from sandbox.local import workdirs
from sandbox.local.cgroups import make_cgroup, release_cgroup
from sandbox.local.forkserver import ForkedJail, ForkServer
from sandbox.local.uids import claim_uid_block, next_uid, release_uid, uid_block
from sandbox.local.worker import Worker as _Worker
from sandbox.local.worker import explain_exit, run_isolation
from sandbox.pool import Demand, PoolBounds
from sandbox.program_run import RunOutcome, build_result, serve, wait_ready
from sandbox.session.runners import open_local

if TYPE_CHECKING:
    import httpx

    from sandbox.session.interpreter import Interpreter

__all__ = ["LocalBackend", "runner_path", "jail_path", "sandbox_python", "uid_block", "claim_uid_block",
           "filter_argv"]

_HERE = Path(__file__).resolve().parent
_SPAWN_TIMEOUT = 15.0
_LIVE: weakref.WeakSet[LocalBackend] = weakref.WeakSet()
_python_cache: list[str] = []


_filter_argv: list[list[str]] = []


def filter_argv() -> list[str]:
    """The jail's arguments for the system-call filter: the policy compiled for this machine once
    per process, or why there is none (then the jail reports ``seccomp:unavailable``)."""
    if not _filter_argv:
        try:
            _filter_argv.append(["--seccomp", compile_filter().hex(), "--seccomp-name", FILTER_NAME])
        except UnsupportedArch as exc:
            _filter_argv.append(["--seccomp-unavailable", str(exc)])
    return _filter_argv[0]


def runner_path() -> Path:
    """The runner file (stdlib-only; also what the Docker backend mounts into containers)."""
    return path_of("runner.py")


def jail_path() -> Path:
    return path_of("jail.py")


def sandbox_python() -> str:
    """The interpreter programs run on: the system's ``/usr/bin/python3`` when it is 3.11+ (the
    same Debian Python the container image has, and it lives under ``/usr`` which the jail binds
    in), else this interpreter. Its version is read from the name the link resolves to
    (``python3.11``) when it has one, else by asking it (an interpreter start)."""
    if not _python_cache:
        choice = sys.executable
        system = "/usr/bin/python3"
        named = re.fullmatch(r"python(\d+)\.(\d+)", os.path.basename(os.path.realpath(system)))
        if named and os.access(system, os.X_OK):
            if (int(named.group(1)), int(named.group(2))) >= (3, 11):
                choice = system
        elif os.path.exists(system):
            try:
                out = subprocess.run([system, "-I", "-S", "-c", "import sys; print(sys.version_info >= (3, 11))"],
                                     capture_output=True, text=True, timeout=10, env={})
                if out.stdout.strip() == "True":
                    choice = system
            except (OSError, subprocess.SubprocessError):
                pass
        _python_cache.append(choice)
    return _python_cache[0]


def _pool_key(limits: Limits) -> tuple[int, int, int, int]:
    """The limits fixed when a runner is spawned (the rest travel in ``start``)."""
    cpu = limits.cpu_seconds or int(limits.timeout) + 2
    return (limits.memory_mb, limits.max_processes, limits.max_file_bytes, cpu)


class LocalBackend:
    """``sandbox.api.Backend`` running programs in jailed local subprocesses.

    At least ``pool_size`` warm runners are kept per set of spawn-time limits (0: always cold),
    more while runs come faster than runners start, up to ``pool_max`` (default: ``ATC_POOL_MAX``,
    else what the machine allows; ``sandbox/pool.py``); an idle pool shrinks back.
    ``fork_server``: fork each jail from one pre-imported interpreter (``sandbox/inside/zygote.py``)
    instead of starting an interpreter per runner; by default whenever there is a pool.
    ``namespaces``: None tries them and falls back to rlimits only; False never tries.
    ``seccomp``: the system-call filter (``sandbox/inside/seccomp.py``); None installs it where the
    machine allows and says so in ``isolation`` either way ("seccomp:atc-v2" or
    "seccomp:unavailable (why)"), True refuses to run without it, False runs without ("seccomp:off").
    """

    name = "local"

    def __init__(self, *, pool_size: int = 2, namespaces: bool | None = None, python: str | None = None,
                 client: httpx.Client | None = None, seccomp: bool | None = None, pool_max: int | None = None,
                 fork_server: bool | None = None) -> None:
        self.pool_size = max(0, pool_size)
        # A warm runner is three small processes sharing the fork server's pages; a uid block
        # holds 100 uids (sandbox/local/uids.py), and reaped runners still hold theirs for a moment.
        bounds = PoolBounds.from_env(self.pool_size, per_runner_mb=24, maximum=pool_max)
        self.bounds = PoolBounds(bounds.minimum, min(bounds.maximum, 64), bounds.idle_seconds)
        self.fork_server = self.pool_size > 0 if fork_server is None else fork_server
        self._server: ForkServer | None = None
        self._server_lock = threading.Lock()
        self._demand: dict[tuple[int, int, int, int], Demand] = {}
        self._janitor: threading.Thread | None = None
        self.namespaces = namespaces
        self.seccomp = seccomp
        self.namespace_failure: str | None = None
        self.python = python or sandbox_python()
        self.client = client  # None: the gateway's shared client, made when a call needs it
        self._lock = threading.Condition()
        self._warm: dict[tuple[int, int, int, int], list[_Worker]] = {}
        self._refilling: dict[tuple[int, int, int, int], int] = {}  # filler threads per key
        #: Runners being spawned in the background, per key: a run waits for one rather than start its own.
        self._starting: dict[tuple[int, int, int, int], int] = {}
        self._closed = False
        self._reapers: set[threading.Thread] = set()
        self._sessions: weakref.WeakSet[Interpreter] = weakref.WeakSet()  # open sandbox sessions
        _LIVE.add(self)
        workdirs.sweep()  # work directories that killed atc processes left behind

    # -- spawning -----------------------------------------------------------------------------

    def _next_uid(self) -> int:
        return next_uid()

    def _spawn(self, limits: Limits) -> _Worker:
        """A new warm runner. When namespaces were only *tried* (``namespaces=None``) and building
        the jail fails on this machine, fall back to rlimits only, once and for all, and say so
        in ``namespace_failure``."""
        try:
            return self._spawn_once(limits)
        except SandboxError as exc:
            if self.namespaces is not None or "could not be set up" not in exc.message:
                raise
            self.namespaces = False
            self.namespace_failure = exc.message
            return self._spawn_once(limits)

    def _spawn_once(self, limits: Limits) -> _Worker:
        uid = self._next_uid()
        # A host work directory only serves a jail without namespaces (with them, /work is on the
        # sandbox's own tmpfs). A jail that falls back by itself makes one and reports it.
        workdir = workdirs.make_workdir(uid) if self.namespaces is False else ""
        host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        memory_mb, nproc, fsize, cpu = _pool_key(limits)
        argv = ["--runner", str(runner_path()), "--uid", str(uid), "--memory-mb", str(memory_mb),
                "--cpu", str(cpu), "--nproc", str(nproc), "--fsize", str(fsize),
                "--tmpfs-mb", str(max(16, min(256, fsize * 4 // (1 << 20))))]
        if workdir:
            argv += ["--workdir", workdir]
        tag = str(memory_mb)
        memory_cgroup, cpu_cgroup = make_cgroup("memory", tag), make_cgroup("cpu", tag)
        cgroups = tuple((c, kind, tag) for c, kind in ((memory_cgroup, "memory"), (cpu_cgroup, "cpu")) if c)
        if memory_cgroup:
            argv += ["--cgroup", memory_cgroup]
        if cpu_cgroup:
            argv += ["--cpu-cgroup", cpu_cgroup]
        if self.namespaces is False:
            argv.append("--no-namespaces")
        if self.seccomp is not False:
            argv += filter_argv()
        try:
            proc = self._launch(argv, child_end)
        except (OSError, SandboxError) as exc:
            host_end.close()
            workdirs.remove_workdir(workdir)
            for path, kind, tag in cgroups:
                release_cgroup(path, kind, tag)
            release_uid(uid)
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"cannot start the local sandbox ({self.python}): {exc}") from exc
        finally:
            child_end.close()
        worker = _Worker(proc=proc, sock=host_end, pid=proc.pid, isolation=[], workdir=workdir,
                         cgroups=cgroups, uid=uid, python=self.python)
        try:
            info = self._read_report(proc)
            made = info.get("workdir")
            if not worker.workdir and isinstance(made, str) and workdirs.is_workdir(made):
                worker.workdir = made  # the jail fell back without namespaces and made one
            if "error" in info:
                raise SandboxError(f"the local sandbox could not be set up: {info['error']}")
            worker.pid = int(info.get("pid") or proc.pid)
            worker.isolation = [str(x) for x in info.get("isolation") or []]
            worker.dedicated_uid = f"uid:{uid}" in worker.isolation
            if self.seccomp is False:
                worker.isolation.append("seccomp:off")
            elif self.seccomp and f"seccomp:{FILTER_NAME}" not in worker.isolation:
                unavailable = [i for i in worker.isolation if i.startswith("seccomp:")]
                raise SandboxError("the system-call filter could not be installed: "
                                   + (unavailable[0][len("seccomp:"):] if unavailable else "no report"),
                                   hint="run with seccomp=None to accept a sandbox without it")
            wait_ready(host_end, _SPAWN_TIMEOUT)
        except BaseException as exc:
            worker.stop(finished=False)
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"the local sandbox did not start: {exc}") from exc
        return worker

    def _launch(self, argv: list[str], child_end: socket.socket) -> subprocess.Popen[bytes] | ForkedJail:
        """Start the jail ``jail.py argv`` speaking on ``child_end``: forked by the fork server
        when there is one (a new server when the last one died), else a new interpreter."""
        if self.fork_server:
            with self._server_lock:
                if self._server is None or not self._server.alive():
                    if self._server is not None:
                        self._server.close()
                    self._server = ForkServer(self.python, jail_path(), runner_path())
                server = self._server
            return server.spawn(argv, child_end)
        return subprocess.Popen([self.python, "-I", "-S", str(jail_path()), "--fd", str(child_end.fileno()), *argv],
                                env={}, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, pass_fds=(child_end.fileno(),), start_new_session=True)

    @staticmethod
    def _read_report(proc: subprocess.Popen[bytes] | ForkedJail) -> dict[str, Any]:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + _SPAWN_TIMEOUT
        while b"\n" not in buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise SandboxError("the local sandbox did not report within "
                                   f"{_SPAWN_TIMEOUT:g} s")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise SandboxError("the local sandbox exited during setup")
            buf += chunk
        info = json.loads(buf.split(b"\n", 1)[0])
        return info if isinstance(info, dict) else {"error": "bad report"}

    # -- the pool -----------------------------------------------------------------------------

    def _take(self, limits: Limits) -> _Worker:
        """A warm runner for ``limits``: one from the pool, else the one being spawned for it in the
        background (waiting for it costs less than spawning another), else a new one. Every take
        is counted in the key's ``Demand``, which sizes the pool (``sandbox/pool.py``)."""
        key = _pool_key(limits)
        worker = None
        missed = False
        asked = time.monotonic()
        deadline = asked + _SPAWN_TIMEOUT
        with self._lock:
            while True:
                if self._closed:
                    raise SandboxError("the local backend is closed")
                warm = self._warm.setdefault(key, [])
                while warm and worker is None:
                    candidate = warm.pop(0)
                    if candidate.alive():
                        worker = candidate
                    else:
                        candidate.stop(finished=False)
                if worker is None and not self._starting.get(key):
                    missed = True  # for sizing: none ready and none on its way
                remaining = deadline - time.monotonic()
                if worker is not None or not self._starting.get(key) or remaining <= 0:
                    break
                self._lock.wait(remaining)
            self._evict_locked(keep=key)
            if self.pool_size:
                self._demand_of(key).taken(missed=missed, now=asked, waited=time.monotonic() - asked)
        if self.pool_size:
            self._refill(key, limits)
        return worker or self._spawn(limits)

    def _demand_of(self, key: tuple[int, int, int, int]) -> Demand:
        demand = self._demand.get(key)
        if demand is None:
            demand = self._demand[key] = Demand(self.bounds)
        return demand

    def pool_stats(self, limits: Limits | None = None) -> dict[str, int]:
        """The pool for ``limits`` now: ``ready``, ``starting``, ``wanted`` (the size it keeps to),
        ``peak`` (the largest size asked for so far) and ``max``."""
        key = _pool_key(limits or Limits())
        with self._lock:
            demand = self._demand_of(key)
            return {"ready": len(self._warm.get(key, [])), "starting": self._starting.get(key, 0),
                    "wanted": demand.wanted() if self.pool_size else 0, "peak": demand.peak,
                    "max": self.bounds.maximum}

    def _spawn_in_background(self, key: tuple[int, int, int, int], limits: Limits) -> bool:
        """Spawn one runner for ``key`` into the pool (in the calling thread, counted in
        ``_starting`` meanwhile); False when it failed or the backend closed."""
        began = time.monotonic()
        try:
            worker: _Worker | None = self._spawn(limits)
        except SandboxError:
            worker = None
        with self._lock:
            keep = worker is not None and not self._closed and key in self._warm
            if worker is not None and keep:
                self._warm[key].append(worker)
                self._starting[key] -= 1
                self._demand_of(key).started(time.monotonic() - began)
                self._lock.notify_all()
                return True
        if worker is not None:
            worker.stop(finished=False)
        with self._lock:
            self._starting[key] -= 1
            self._lock.notify_all()
        return False

    def reserve(self, limits: Limits | None = None) -> None:
        """Start one runner for ``limits`` now, in the background, for the next run, whatever the
        pool size: a caller that will run one program (``atc run``, ``pool_size=0``) gets it started
        while it reads its program and its tools."""
        limits = limits or Limits()
        key = _pool_key(limits)
        with self._lock:
            if self._closed:
                return
            self._warm.setdefault(key, [])
            self._starting[key] = self._starting.get(key, 0) + 1
        threading.Thread(target=self._spawn_in_background, args=(key, limits), name="atc-local-reserve",
                         daemon=True).start()

    def _evict_locked(self, keep: tuple[int, int, int, int]) -> None:
        """Keep warm runners for the three most recently used limit sets only."""
        while len(self._warm) > 3:
            oldest = next(k for k in self._warm if k != keep)
            self._demand.pop(oldest, None)
            for w in self._warm.pop(oldest):
                threading.Thread(target=w.stop, kwargs={"finished": False}, daemon=True).start()
        self._warm[keep] = self._warm.pop(keep)

    def _fillers(self) -> int:
        """Runners spawned at once per key: the fork server forks while earlier jails set
        themselves up, and part of a jail's set-up is waiting (joining its cgroups), so two per
        core, up to four, keep the cores busy (measured on 2 cores: 4 in flight beat 2 and 8);
        a new interpreter per runner gains nothing from more than one."""
        return max(1, min(4, 2 * (os.cpu_count() or 1))) if self.fork_server else 1

    def _refill(self, key: tuple[int, int, int, int], limits: Limits) -> None:
        """Spawn runners until the pool for ``key`` holds what its demand wants, with up to
        ``_fillers()`` spawns in flight; also make sure an idle pool gets trimmed."""
        with self._lock:
            if self._closed:
                return
            start = max(0, min(self._fillers() - self._refilling.get(key, 0),
                               self._demand_of(key).wanted() - len(self._warm.get(key, []))
                               - self._starting.get(key, 0)))
            self._refilling[key] = self._refilling.get(key, 0) + start
            if self._janitor is None and start:
                self._janitor = threading.Thread(target=self._trim_loop, name="atc-local-pool-trim", daemon=True)
                self._janitor.start()

        def fill() -> None:
            try:
                while True:
                    with self._lock:
                        if self._closed or key not in self._warm:
                            return
                        if len(self._warm[key]) + self._starting.get(key, 0) >= self._demand_of(key).wanted():
                            return
                        self._starting[key] = self._starting.get(key, 0) + 1
                    if not self._spawn_in_background(key, limits):
                        return
            finally:
                with self._lock:
                    self._refilling[key] -= 1

        for _ in range(start):
            threading.Thread(target=fill, name="atc-local-pool", daemon=True).start()

    def _trim_loop(self) -> None:
        """Stop the warm runners an idle pool no longer wants (back to ``pool_size``)."""
        while True:
            surplus: list[_Worker] = []
            with self._lock:
                self._lock.wait(max(0.5, self.bounds.idle_seconds / 4))
                if self._closed:
                    return
                for key, warm in self._warm.items():
                    wanted = self._demand_of(key).wanted() if self.pool_size else len(warm)
                    while len(warm) > wanted:
                        surplus.append(warm.pop())
            for worker in surplus:
                worker.stop(finished=False)

    def warm_up(self, limits: Limits | None = None) -> None:
        """Start filling the pool for ``limits`` now (e.g. while a model is still writing)."""
        limits = limits or Limits()
        with self._lock:
            self._warm.setdefault(_pool_key(limits), [])
        if self.pool_size:
            self._refill(_pool_key(limits), limits)

    def prewarm(self, limits: Limits | None = None, *, timeout: float = 30.0) -> int:
        """Fill the pool for ``limits`` and wait until it holds at least ``pool_size`` runners (or
        ``timeout``); return how many runners are warm."""
        limits = limits or Limits()
        key = _pool_key(limits)
        self.warm_up(limits)
        deadline = time.monotonic() + timeout
        count = 0
        while time.monotonic() < deadline:
            with self._lock:
                count = len(self._warm.get(key, []))
            if count >= self.pool_size:
                return count
            time.sleep(0.005)
        return count

    # -- running ------------------------------------------------------------------------------

    def run(self, program: str, tools: Toolset, limits: Limits | None = None) -> ExecutionResult:
        """Run ``program`` against ``tools``; every outcome of the program is a result."""
        limits = limits or Limits()
        started = time.perf_counter()
        issue = lint(program)
        if issue is not None:
            lines = program.splitlines()
            code = lines[issue.line - 1].strip() if issue.line and 0 < issue.line <= len(lines) else None
            error = ErrorInfo(type="SandboxError", message=f"program refused by the sandbox lint: {issue.message}",
                              line=issue.line, code=code,
                              attribution={"tool": None, "reason": "the program itself reached for Python internals",
                                           "call_index": None, "response_shape": None, "excerpt": None,
                                           "candidates": []})
            return ExecutionResult(ok=False, answer="", sandbox=self.name,
                                   duration_ms=(time.perf_counter() - started) * 1000, error=error,
                                   isolation=["restrictedpython-lint"])
        worker = self._take(limits)
        deadline = time.monotonic() + limits.timeout
        gateway = Gateway(tools, limits, client=self.client, deadline=deadline)
        outcome = RunOutcome()
        try:
            outcome = serve(worker.sock, program, tools, limits, gateway, deadline=deadline)
        finally:
            finished = outcome.done is not None
            # The channel closed without a result: the runner died; let it finish dying.
            lost = not finished and outcome.failure == "SandboxError"
            status = worker.stop(finished=finished, grace=0.5 if lost else 0.0)
            if finished:
                self._reap_later(worker)
        explain_exit(worker, outcome, status, limits)
        return build_result(program, outcome, sandbox=self.name, isolation=run_isolation(worker), started=started,
                            tools=tools)

    def open_session(self, tools: Toolset, limits: Limits | None = None,
                     session: SessionLimits | None = None) -> Interpreter:
        """A sandbox session on one jailed runner (``sandbox/session/interpreter.py``): the runner is
        spawned with the session's CPU time (``SessionLimits.spawn_limits``) and, when it ends,
        torn down like a run's, at once; ``close`` ends every session still open."""
        interpreter = open_local(self, tools, limits or Limits(), session or SessionLimits())
        self._sessions.add(interpreter)
        return interpreter

    def _reap_later(self, worker: _Worker) -> None:
        """Reap a finished runner off the caller's path (its exit and the namespace teardown cost
        10-30 ms); ``close`` waits for these."""

        def reap() -> None:
            worker.reap()
            with self._lock:
                self._reapers.discard(thread)

        thread = threading.Thread(target=reap, name="atc-local-reaper", daemon=True)
        with self._lock:
            self._reapers.add(thread)
        thread.start()

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop refilling and end every warm runner and open session (no process is left behind):
        runners still being spawned are waited for (they end themselves once they see the backend
        closed)."""
        for session in list(self._sessions):
            session.close("the sandbox backend was closed")
        with self._lock:
            self._closed = True
            workers = [w for ws in self._warm.values() for w in ws]
            self._warm.clear()
            self._lock.notify_all()
        for w in workers:
            w.stop(finished=False)
        deadline = time.monotonic() + _SPAWN_TIMEOUT
        with self._lock:
            while any(self._starting.values()) and time.monotonic() < deadline:
                self._lock.wait(max(0.0, deadline - time.monotonic()))
        with self._lock:
            reapers = list(self._reapers)
        for t in reapers:
            t.join(timeout=15)
        if self._janitor is not None:
            self._janitor.join(timeout=5)
        with self._server_lock:
            server, self._server = self._server, None
        if server is not None:
            server.close()

    def __enter__(self) -> LocalBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@atexit.register
def _close_all() -> None:
    for backend in list(_LIVE):
        backend.close()
