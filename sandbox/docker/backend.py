"""The Docker backend: each program runs in a fresh process in a locked-down container.

A container is started from the sandbox image (``atc sandbox build``) with no network, a read-only
root, a small noexec ``/tmp``, every process as uid 65534 with no capabilities, ``no-new-privileges``, cgroup limits
on memory (no swap), pids and CPU, private IPC, UTS and cgroup namespaces, an empty ``/sys``, and the
sandbox's own seccomp profile (``sandbox/inside/seccomp.py``: Docker 20.10's default one still allows
io_uring, every socket family and SysV IPC). Nothing of the host is visible inside except
read-only bind mounts: the runner, the jail's steps and the fork server (``sandbox/inside/runner.py``,
``sandbox/inside/jail.py``, ``sandbox/inside/container_server.py`` of the installed package, so the image never
goes stale) and a per-container directory holding one Unix socket; a run sees none of them. The host listens on that socket, the fork server
connects, and each runner gets a socket pair of its own through it; from then on a run is the
same session as for the local backend
(``sandbox.program_run.serve``): tool calls are made by the host-side gateway, so the container needs
no network at all.

Start-up cost is hidden by a pool of ready containers per set of container limits, sized to the
observed demand (``sandbox/pool.py``). Each container runs a fork server
(``sandbox/inside/container_server.py``, mounted read-only like the runner); each run gets user, mount,
network, PID, IPC and UTS namespaces and a root of its own inside the container, and the
``atc-v2`` filter. A container runs one program at a time, and makes the next run's processes
while it runs. After a run that ended normally the container goes back to the pool at once: its
server checks on its own that the run is gone and left nothing and hands over the next runner,
which whoever takes the container next reads (``sandbox/docker/cells.py``; usually it is there
already). After anything else (timeout, a runner that died, a check that did not come back
clean) the container is removed. ``pool_size=0`` never reuses a container, and neither does an
engine whose kernel refuses user namespaces.

Containers are always removed: after an abnormal run (also on timeout), when the pool shrinks, on
``close()``, at interpreter exit, and, for owners that died without cleaning up (``kill -9``), by the next backend that starts
on this host, in the background (containers carry ``atc.owner=<pid>`` and ``atc.host=<hostname>``
labels). A fork server whose socket closes exits, and its container stops with it, so a killed
atc leaves only stopped containers behind. A memory kill is told apart from a program that kills
itself by the container's ``oom_kill`` counter (``State.OOMKilled`` where the host does not show
it); we do not use Docker's ``auto_remove``, which would delete the container before that.

``open_session`` lends a container to a sandbox session (``sandbox/session/interpreter.py``): its runner is
made again with the session's CPU time, serves snippet after snippet, and when the session ends
the container goes (``sandbox/session/runners.py``); it never serves another run.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import struct
import tempfile
import threading
import time
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from protocols.errors import SandboxError
from sandbox.api import ErrorInfo, ExecutionResult, Limits, SessionLimits, Toolset
from sandbox.docker.cells import MAX_RUNS_PER_CELL, Cell, CellError
from sandbox.docker.engine import (
    DEFAULT_IMAGE,
    HOST_LABEL,
    INSTANCE_LABEL,
    OWNER_LABEL,
    ROLE_LABEL,
    SOCKET_DIR_PREFIX,
    connect,
    docker_available,
    reap_stale_containers,
    translate_docker_error,
)
from sandbox.docker.spec import SOCKET_NAME, container_spec, seccomp_option
from sandbox.docker.spec import ContainerKey as _Key
from sandbox.docker.spec import key_of as _key_of
from sandbox.gateway.core import Gateway
from sandbox.inside import path_of
from sandbox.inside.seccomp import NAME as FILTER_NAME
from sandbox.lint import LintIssue, lint
from sandbox.pool import Demand, PoolBounds
from sandbox.program_run import RunOutcome, build_result, serve
from sandbox.session.runners import open_docker

if TYPE_CHECKING:
    import docker

    from sandbox.session.interpreter import Interpreter

__all__ = [
    "DEFAULT_IMAGE",
    "OWNER_LABEL",
    "HOST_LABEL",
    "INSTANCE_LABEL",
    "DockerBackend",
    "docker_available",
    "connect",
    "translate_docker_error",
    "reap_stale_containers",
]

#: How long after a run its container's server may take to report the run gone and hand over the
#: next runner; then the container is removed.
RESET_WAIT = 5.0
#: A run that waits longer than this for a container's reset, none starting, grows the pool.
LATE_SECONDS = 0.001


def _pick(pool: list[Cell]) -> Cell | None:
    """The cell to take from ``pool`` (removed from it): one whose runner waits, else one whose
    next runner has come, else the one back from its run the longest."""
    for wanted in (lambda c: not c.resetting, lambda c: c.due()):
        for i, cell in enumerate(pool):
            if wanted(cell):
                return pool.pop(i)
    return pool.pop(0) if pool else None


# --- the backend ----------------------------------------------------------------------------------

class DockerBackend:
    """Runs each program in its own container (see the module docstring for the isolation).

    At least ``pool_size`` ready containers are kept per set of container limits that has been
    used, more while runs come faster than containers are recycled, up to ``pool_max`` (default:
    ``ATC_POOL_MAX``, else what the machine allows); 0 disables the pool: every run starts its
    container, "cold", and the container is removed after the run. ``reuse=False`` removes every
    container after its run even with a pool (the policy before containers were reset and reused). ``image`` must exist: build it
    with ``atc sandbox build``. Raises ``SandboxError`` when the engine or the image is missing.
    """

    name = "docker"

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        *,
        pool_size: int = 2,
        cpus: float = 1.0,
        tmpfs_mb: int = 64,
        start_timeout: float = 30.0,
        client: docker.DockerClient | None = None,
        pool_max: int | None = None,
        reuse: bool = True,
    ) -> None:
        self.image = image
        self.pool_size = max(0, pool_size)
        self.reuse = reuse
        self.cpus = cpus
        self.tmpfs_mb = tmpfs_mb
        self.start_timeout = start_timeout
        self.client = client or connect(timeout=60)
        self._runner = path_of("runner.py")
        self._server = path_of("container_server.py")
        self._jail = path_of("jail.py")
        #: Whether runs get namespaces of their own in this engine's containers (None: no container yet).
        self.isolated: bool | None = None
        for part in (self._runner, self._server, self._jail):
            if not part.is_file():
                raise SandboxError(f"the sandbox runner is missing: {part}", hint="reinstall atc")
        try:
            self.client.images.get(image)
        except Exception as exc:
            raise translate_docker_error(exc, image=image) from exc
        #: Labels every container of this backend carries; ``instance`` tells backends of one process apart.
        self.instance = uuid.uuid4().hex[:12]
        self._labels = {ROLE_LABEL: "1", OWNER_LABEL: str(os.getpid()), HOST_LABEL: socket.gethostname(),
                        INSTANCE_LABEL: self.instance}
        self._lock = threading.Condition()
        self._pools: dict[_Key, list[Cell]] = {}
        self.bounds = PoolBounds.from_env(self.pool_size, per_runner_mb=64, maximum=pool_max)
        self._demand: dict[_Key, Demand] = {}
        self._starting: dict[_Key, int] = {}
        #: Cells running a program: they come back when the run ends normally (recycled).
        self._in_use: dict[_Key, int] = {}
        self._closed = False
        self._refillers: list[threading.Thread] = []
        self._reservers: list[threading.Thread] = []
        self._reaper = ThreadPoolExecutor(max_workers=2, thread_name_prefix="atc-docker-rm")
        self._live: dict[str, str] = {}  # container id -> its socket directory
        self._sessions: weakref.WeakSet[Interpreter] = weakref.WeakSet()  # open sandbox sessions
        # Leftovers of dead owners go in the background: the first container need not wait (close waits).
        self._reaper.submit(self._reap_stale)
        atexit.register(self.close)

    # -- the Backend interface ---------------------------------------------------------------------

    def run(self, program: str, tools: Toolset, limits: Limits | None = None) -> ExecutionResult:
        """Run ``program`` in a fresh container; every outcome of the program is a result."""
        limits = limits or Limits()
        started = time.perf_counter()
        issue = lint(program)
        if issue is not None:
            return self._refused(program, issue, started, limits)
        key = _key_of(limits)
        cell = self._take(key)
        deadline = time.monotonic() + limits.timeout
        outcome = RunOutcome()
        try:
            assert cell.runner is not None
            gateway = Gateway(tools, limits, deadline=deadline)
            outcome = serve(cell.runner, program, tools, limits, gateway, deadline=deadline)
            if outcome.done is None and outcome.failure in (None, "SandboxError"):
                self._explain_death(cell, outcome)
        finally:
            # A container whose runs share its namespaces (no user namespaces here) serves one run.
            recycle = (outcome.done is not None and outcome.failure is None and self.pool_size > 0
                       and self.reuse and cell.isolated and cell.runs + 1 < MAX_RUNS_PER_CELL)
            with self._lock:
                self._in_use[key] -= 1
                # Back in the pool at once: its server checks the run's end and hands over the next
                # runner on its own; whoever takes the cell reads it (``_take``).
                kept = recycle and not self._closed and not self._surplus(key, returning=1)
                if kept:
                    cell.resetting, cell.ended = True, time.monotonic()
                    self._pools.setdefault(key, []).append(cell)
                self._lock.notify_all()  # a cell that does not come back is replaced
            if not kept:
                cell.close()
                self._discard(cell)
        return build_result(program, outcome, sandbox=self.name, isolation=self.isolation(limits, cell.isolated),
                            started=started, tools=tools)

    def open_session(self, tools: Toolset, limits: Limits | None = None,
                     session: SessionLimits | None = None) -> Interpreter:
        """A sandbox session in one container of the pool (``sandbox/session/interpreter.py``): its runner
        is made again with the session's CPU time, and the container is removed when the session
        ends, never recycled for another run; ``close`` ends every session still open."""
        interpreter = open_docker(self, tools, limits or Limits(), session or SessionLimits())
        with self._lock:
            self._sessions.add(interpreter)
        return interpreter

    def end_session_cell(self, cell: Cell) -> None:
        """A session's container is done: its fork server is told to go now (it exits when its
        connection closes, and as the container's PID 1 it takes every process of the session
        with it), and the container is removed in the background, as after an abnormal run."""
        cell.close()
        with self._lock:
            self._in_use[cell.key] -= 1
            self._lock.notify_all()  # a cell that does not come back is replaced
        self._discard(cell)

    def isolation(self, limits: Limits, isolated: bool | None = None) -> list[str]:
        """What is in force for a run with ``limits`` (reported in ``ExecutionResult.isolation``);
        ``isolated``: whether the run had namespaces of its own (default: what the last container
        started said)."""
        key = _key_of(limits)
        isolated = self.isolated if isolated is None else isolated
        seccomp = f"seccomp:{FILTER_NAME}" if seccomp_option() else "seccomp:docker-default"
        own = (["userns", "netns", "pidns", "mountns", "ipcns", "utsns", "proc:pids-only", "fresh-tmpfs"] if isolated
               else ["ipcns", "utsns", "proc:full"])
        reused = self.pool_size and self.reuse and isolated
        return ["docker", "network:none", "readonly-rootfs", "cap-drop:ALL", "no-new-privileges",
                "user:65534", f"pids:{key.pids}", f"memory:{key.memory_mb}MB", f"cpus:{self.cpus:g}",
                f"tmpfs:/tmp:{self.tmpfs_mb}MB", *own, "cgroupns", "sys:empty", seccomp,
                "clean-env", "fresh-process", "reset-checked" if reused else "fresh-container",
                "restrictedpython-lint"]

    def _refused(self, program: str, issue: LintIssue, started: float, limits: Limits) -> ExecutionResult:
        """The result for a program the lint refuses (the same as the local backend's): no container."""
        lines = program.splitlines()
        code = lines[issue.line - 1].strip() if issue.line and 0 < issue.line <= len(lines) else None
        attribution: dict[str, Any] = {"tool": None, "reason": "the program itself reached for Python internals",
                       "call_index": None, "response_shape": None, "excerpt": None, "candidates": []}
        error = ErrorInfo(type="SandboxError", message=f"program refused by the sandbox lint: {issue.message}",
                          line=issue.line, code=code, attribution=attribution)
        return ExecutionResult(ok=False, answer="", sandbox=self.name, error=error,
                               duration_ms=(time.perf_counter() - started) * 1000, isolation=self.isolation(limits))

    def close(self) -> None:
        """Stop the pool and remove every container this backend started (idempotent)."""
        with self._lock:
            sessions = list(self._sessions)
        for session in sessions:
            session.close("the sandbox backend was closed")
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pooled = [w for pool in self._pools.values() for w in pool]
            self._pools.clear()
            self._lock.notify_all()
        for thread in self._refillers + self._reservers:
            thread.join(timeout=self.start_timeout + 5)
        for cell in pooled:
            cell.close()
            self._discard(cell)
        self._reaper.shutdown(wait=True)
        with self._lock:
            leftover = list(self._live.items())
        for cid, sockdir in leftover:
            self._remove(cid, sockdir)
        atexit.unregister(self.close)

    def __enter__(self) -> DockerBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def prewarm(self, limits: Limits, *, timeout: float = 30.0) -> int:
        """Fill the pool for ``limits`` and wait (up to ``timeout`` s) until it is full.

        Returns how many ready containers there are (at least ``pool_size`` unless it timed out).
        Useful before a batch of runs and in benchmarks; runs do not need it (the pool fills
        itself after the first run).
        """
        key = _key_of(limits)
        deadline = time.monotonic() + timeout
        with self._lock:
            if self._closed:
                raise SandboxError("this Docker backend is closed")
            self._pools.setdefault(key, [])
            if self.pool_size:
                self._ensure_refiller()
                self._lock.notify_all()
            while len(self._pools[key]) < self.pool_size and time.monotonic() < deadline and not self._closed:
                self._lock.wait(timeout=max(0.01, deadline - time.monotonic()))
            return len(self._pools.get(key, []))

    # -- the pool ----------------------------------------------------------------------------------

    def reserve(self, limits: Limits | None = None) -> None:
        """Start one container for ``limits`` now, in the background, for the next run, whatever the
        pool size: a caller that will run one program (``atc run``, ``pool_size=0``) gets it started
        while it reads its program and its tools."""
        key = _key_of(limits or Limits())
        with self._lock:
            if self._closed:
                return
            self._pools.setdefault(key, [])
            self._starting[key] = self._starting.get(key, 0) + 1
            thread = threading.Thread(target=self._start_into_pool, args=(key,), name="atc-docker-reserve",
                                      daemon=True)
            self._reservers.append(thread)
        thread.start()

    def _start_into_pool(self, key: _Key) -> None:
        try:
            cell: Cell | None = self._start(key)
        except SandboxError:
            cell = None
        self._pool_or_discard(key, cell)

    def _pool_or_discard(self, key: _Key, cell: Cell | None) -> None:
        """A cell that was being started or recycled (counted in ``_starting``) is ready, or failed."""
        with self._lock:
            self._starting[key] -= 1
            if cell is not None and not self._closed:
                self._pools.setdefault(key, []).append(cell)
                cell = None
            self._lock.notify_all()
        if cell is not None:  # closed meanwhile
            cell.close()
            self._discard(cell)

    def _demand_of(self, key: _Key) -> Demand:
        demand = self._demand.get(key)
        if demand is None:
            demand = self._demand[key] = Demand(self.bounds, follow_rate=False)
        return demand

    def pool_stats(self, limits: Limits | None = None) -> dict[str, int]:
        """The pool for ``limits`` now: ``ready``, ``starting`` (starting, or back from a run and not
        yet handed its next runner), ``wanted``, ``peak`` (the largest size asked for so far),
        ``max`` and ``containers`` (all containers of this backend that exist)."""
        key = _key_of(limits or Limits())
        with self._lock:
            demand = self._demand_of(key)
            pool = self._pools.get(key, [])
            resetting = sum(1 for cell in pool if cell.resetting)
            return {"ready": len(pool) - resetting, "starting": self._starting.get(key, 0) + resetting,
                    "wanted": demand.wanted() if self.pool_size else 0, "peak": demand.peak,
                    "max": self.bounds.maximum, "containers": len(self._live)}

    def _take(self, key: _Key) -> Cell:
        """A ready container for ``key`` whose runner is still waiting, else one back from a run
        (its next runner is on its way: milliseconds), else one being started (waiting costs less
        than starting another), else a fresh one."""
        first = True
        asked = time.monotonic()
        while True:
            with self._lock:
                # A miss, for sizing: no container ready or on its way.
                missed = not self._pools.get(key) and not self._starting.get(key)
                deadline = time.monotonic() + self.start_timeout
                while (not self._closed and not self._pools.get(key) and self._starting.get(key)
                       and time.monotonic() < deadline):
                    self._lock.wait(timeout=max(0.01, deadline - time.monotonic()))
                if self._closed:
                    raise SandboxError("this Docker backend is closed")
                cell = _pick(self._pools.setdefault(key, []))
                # Late: the pool had no container ready, none starting, and the one taken is still
                # being reset (its next runner has not come).
                late = cell is not None and cell.resetting and not self._starting.get(key) and not cell.due()
                # Counted before the refill threads look: a cell in use comes back after its run.
                self._in_use[key] = self._in_use.get(key, 0) + 1
                if self.pool_size:
                    if first:
                        demand = self._demand_of(key)
                        demand.taken(missed=missed, now=asked, waited=time.monotonic() - asked)
                        demand.busy(self._in_use[key])
                        first = False
                    self._ensure_refiller()
                    self._lock.notify_all()
            if cell is None:
                try:
                    return self._start(key)
                except BaseException:
                    with self._lock:
                        self._in_use[key] -= 1
                        self._lock.notify_all()
                    raise
            if cell.resetting:
                try:
                    # The run before ended normally: its end is the server's to check, for a few
                    # seconds at most; the runner it hands over may still be starting.
                    taking = time.monotonic()
                    cell.take_runner(max(0.5, cell.ended + RESET_WAIT - taking), self.start_timeout,
                                     after_run=True)
                    cell.resetting = False
                    if late and time.monotonic() - taking > LATE_SECONDS and self.pool_size:
                        with self._lock:
                            self._demand_of(key).late()
                            self._lock.notify_all()
                    return cell
                except CellError:
                    pass
                except BaseException:  # interrupted while waiting: the cell is not handed out
                    cell.close()
                    self._discard(cell)
                    with self._lock:
                        self._in_use[key] -= 1
                        self._lock.notify_all()
                    raise
            elif cell.waiting():
                return cell
            # Not clean, or its runner died while pooled: replaced.
            cell.close()
            self._discard(cell)
            with self._lock:
                self._in_use[key] -= 1

    def _surplus(self, key: _Key, *, returning: int = 0) -> bool:
        """Would ``returning`` more cells make the pool for ``key`` larger than the demand wants?"""
        held = len(self._pools.get(key, [])) + self._starting.get(key, 0) + self._in_use.get(key, 0)
        return held + returning > self._demand_of(key).wanted()

    def _ensure_refiller(self) -> None:
        """Start the refill threads once: two, so that a burst of runs waits for at most one start."""
        while len(self._refillers) < min(2, max(1, self.pool_size)):
            thread = threading.Thread(target=self._refill_loop, name="atc-docker-pool", daemon=True)
            self._refillers.append(thread)
            thread.start()

    def _refill_loop(self) -> None:
        """Keep as many ready containers as the demand wants for every key in use, and stop the
        surplus of an idle pool (each thread starts one container at a time)."""
        failures = 0
        while True:
            surplus: list[Cell] = []
            with self._lock:
                while not self._closed and not self._wanted():
                    self._lock.wait(timeout=max(0.5, self.bounds.idle_seconds / 4))
                    for k, pool in self._pools.items():
                        while len(pool) > self._demand_of(k).wanted():
                            surplus.append(pool.pop())
                    if surplus:
                        break
                if self._closed:
                    return
                wanted = self._wanted()
                key = wanted[0] if wanted else None
                if key is not None:
                    self._starting[key] = self._starting.get(key, 0) + 1
            for extra in surplus:
                extra.close()
                self._discard(extra)
            if key is None:
                continue
            try:
                cell: Cell | None = self._start(key)
                failures = 0
            except SandboxError:
                cell = None
                failures += 1
            self._pool_or_discard(key, cell)
            if failures:
                with self._lock:  # back off instead of spinning on a broken engine
                    self._lock.wait(timeout=min(30.0, 0.5 * 2**failures))

    def _wanted(self) -> list[_Key]:
        return [k for k, pool in self._pools.items()
                if len(pool) + self._starting.get(k, 0) + self._in_use.get(k, 0) < self._demand_of(k).wanted()]

    # -- one container -----------------------------------------------------------------------------

    def _start(self, key: _Key) -> Cell:
        """Start a container for ``key``, wait for its fork server to connect and its first runner
        to be ready."""
        sockdir = tempfile.mkdtemp(prefix=f"{SOCKET_DIR_PREFIX}{os.getpid()}-")
        # The container's uid may traverse the directory and connect, but not list or write it.
        os.chmod(sockdir, 0o711)
        path = os.path.join(sockdir, SOCKET_NAME)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cid = ""
        try:
            listener.bind(path)
            os.chmod(path, 0o666)
            listener.listen(1)
            cid = self._create(key, sockdir)
            listener.settimeout(self.start_timeout)
            try:
                conn, _ = listener.accept()
            except OSError as exc:
                raise SandboxError(f"the sandbox container did not connect within {self.start_timeout:g} s",
                                   hint=f"check `docker logs {cid[:12]}`; the engine may be overloaded") from exc
            cell = Cell(cid=cid, sockdir=sockdir, ctl=conn, key=key)
            try:
                self._check_peer(conn, cid)
                cell.hello(self.start_timeout)
                self.isolated = cell.isolated
                cell.take_runner(self.start_timeout)
            except (OSError, CellError) as exc:
                cell.close()
                raise SandboxError(f"the sandbox runner did not start: {exc}") from exc
            return cell
        except BaseException:
            if cid:
                self._remove(cid, "")
            shutil.rmtree(sockdir, ignore_errors=True)
            raise
        finally:
            listener.close()
            with contextlib.suppress(OSError):
                os.unlink(path)

    def _check_peer(self, conn: socket.socket, cid: str) -> None:
        """Make sure the process that connected is the container's runner (its init process).

        The socket directory is not listable, but another local user who guessed its name could
        connect first and pose as the runner, receiving programs and making their tool calls.
        """
        if not hasattr(socket, "SO_PEERCRED"):  # pragma: no cover - not Linux
            return
        pid, _uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                              struct.calcsize("3i")))
        try:
            expected = int((self.client.api.inspect_container(cid).get("State") or {}).get("Pid") or 0)
        except Exception as exc:
            raise translate_docker_error(exc, image=self.image) from exc
        if pid != expected:
            raise OSError(f"process {pid} connected to the sandbox socket, not the container's runner {expected}")

    def _create(self, key: _Key, sockdir: str) -> str:
        api = self.client.api
        try:
            created = api.create_container(**container_spec(
                api, key, image=self.image, sockdir=sockdir, runner=self._runner, server=self._server,
                jail=self._jail, cpus=self.cpus, tmpfs_mb=self.tmpfs_mb, labels=self._labels))
            cid = str(created["Id"])
            with self._lock:
                self._live[cid] = sockdir
            try:
                api.start(cid)
            except BaseException:
                self._remove(cid, "")
                raise
            return cid
        except Exception as exc:
            raise translate_docker_error(exc, image=self.image) from exc

    def _explain_death(self, cell: Cell, outcome: RunOutcome) -> None:
        """The runner vanished without a result: was it the memory limit (the container's
        ``oom_kill`` counter, else State.OOMKilled), its CPU time, or the program itself?"""
        status = cell.exit_status(timeout=1.0)
        killed = cell.memory_killed()
        if killed is None:
            try:
                if status is None:  # the server went too: let the container finish exiting
                    self.client.api.wait(cell.cid, timeout=3)
                state = self.client.api.inspect_container(cell.cid).get("State") or {}
            except Exception:
                state = {}
            killed = bool(state.get("OOMKilled"))
            if status is None and "ExitCode" in state:
                status = state.get("ExitCode")
        if killed:
            outcome.failure = "MemoryLimit"
            outcome.detail = f"the program used more than {cell.key.memory_mb} MB of memory (killed)"
        elif status in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            outcome.failure, outcome.detail = "Timeout", "the program used up its CPU time limit"
        elif outcome.failure is None or outcome.detail.startswith("the runner stopped"):
            outcome.failure = "SandboxError"
            how = f"was killed by signal {-status}" if isinstance(status, int) and status < 0 else \
                f"exited with status {status}"
            outcome.detail = f"the sandbox process {how} without a result"

    def _reap_stale(self) -> None:
        try:
            reap_stale_containers(self.client)
        except SandboxError:  # the engine refused a cleanup: the runs themselves will say if it is gone
            pass

    def _discard(self, cell: Cell) -> None:
        """Kill and remove a container in the background (the result need not wait)."""
        try:
            self._reaper.submit(self._remove, cell.cid, cell.sockdir)
        except RuntimeError:  # executor shut down: do it here
            self._remove(cell.cid, cell.sockdir)

    def _remove(self, cid: str, sockdir: str) -> None:
        try:
            self.client.api.remove_container(cid, force=True)
        except Exception as exc:
            if type(exc).__name__ != "NotFound" and "already in progress" not in str(exc):
                time.sleep(0.2)
                with contextlib.suppress(Exception):
                    self.client.api.remove_container(cid, force=True)
        with self._lock:
            self._live.pop(cid, None)
        if sockdir:
            shutil.rmtree(sockdir, ignore_errors=True)
