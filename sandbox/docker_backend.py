"""The Docker backend: each program runs in a fresh, locked-down container.

A container is started from the sandbox image (``atc sandbox build``) with no network, a read-only
root, a small noexec ``/tmp``, uid 65534, no capabilities, ``no-new-privileges``, cgroup limits
on memory (no swap), pids and CPU, private IPC, UTS and cgroup namespaces, an empty ``/sys``, a
``/proc`` with what it tells of the host masked, and the sandbox's own seccomp profile (``sandbox/seccomp.py``: Docker 20.10's default one still allows
io_uring, every socket family and SysV IPC). Nothing of the host is visible inside except two
read-only bind mounts: the runner (``sandbox/runner.py`` of the installed package, so the image never goes stale)
and a per-container directory holding one Unix socket. The host listens on that socket, the
runner connects, and from then on the run is the same session as for the local backend
(``sandbox.session.serve``): tool calls are made by the host-side gateway, so the container needs
no network at all.

Start-up cost is hidden by a small pool of warm containers per set of container limits: each is
started ahead of time with its runner connected and blocked on ``start``; a run takes one, uses it
once and removes it, and a background thread starts the next. Containers are never reused.

Containers are always removed: after every run (also on timeout), on ``close()``, at interpreter
exit, and, for owners that died without cleaning up (``kill -9``), by the next backend that starts
on this host, in the background (containers carry ``atc.owner=<pid>`` and ``atc.host=<hostname>``
labels). A runner whose socket closes exits, so a killed atc leaves only stopped containers
behind. We do not use Docker's ``auto_remove``: it would delete the container before we can read
``State.OOMKilled``, which is how a memory kill is told apart from a program that kills itself.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import select
import shutil
import socket
import struct
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocols.errors import SandboxError
from sandbox import wire
from sandbox.api import ErrorInfo, ExecutionResult, Limits, Toolset
from sandbox.docker_engine import (
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
from sandbox.gateway import Gateway
from sandbox.jail import PROC_MASKED
from sandbox.lint import LintIssue, lint
from sandbox.seccomp import NAME as FILTER_NAME
from sandbox.seccomp import UnsupportedArch, docker_profile
from sandbox.session import SessionOutcome, build_result, serve, wait_ready

if TYPE_CHECKING:
    import docker

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

# --- the backend ----------------------------------------------------------------------------------

RUNNER_PATH = "/atc/runner.py"
SOCKET_DIR = "/atc/sock"
SOCKET_NAME = "runner.sock"
SANDBOX_USER = "65534:65534"
MIN_MEMORY_MB = 16
#: Docker's own masked paths plus what else /proc tells of the host (the local jail's list).
MASKED_PATHS = sorted({"/sys/firmware", *(f"/proc/{name}" for name in PROC_MASKED)})


@dataclass(frozen=True)
class _Key:
    """The limits a container is started with; a warm container fits only runs with the same."""

    memory_mb: int
    pids: int
    cpu_seconds: int | None
    file_bytes: int


@dataclass
class _Warm:
    """A started container whose runner is connected and blocked on ``start``."""

    cid: str
    sockdir: str
    conn: socket.socket
    key: _Key
    ready: dict[str, Any] = field(default_factory=dict)


@functools.lru_cache(maxsize=1)
def seccomp_option() -> str | None:
    """``seccomp=<profile JSON>`` for ``security_opt`` (None where the policy has no profile for
    this machine: Docker's default profile then applies)."""
    try:
        return "seccomp=" + json.dumps(docker_profile(), separators=(",", ":"))
    except UnsupportedArch:
        return None


def _key_of(limits: Limits) -> _Key:
    return _Key(memory_mb=max(MIN_MEMORY_MB, int(limits.memory_mb)), pids=max(8, int(limits.max_processes)),
                cpu_seconds=limits.cpu_seconds, file_bytes=int(limits.max_file_bytes))


class DockerBackend:
    """Runs each program in its own container (see the module docstring for the isolation).

    ``pool_size`` warm containers are kept per set of container limits that has been used
    (0 disables the pool: every run starts its container, "cold"). ``image`` must exist: build it
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
    ) -> None:
        self.image = image
        self.pool_size = max(0, pool_size)
        self.cpus = cpus
        self.tmpfs_mb = tmpfs_mb
        self.start_timeout = start_timeout
        self.client = client or connect(timeout=60)
        self._runner = Path(__file__).with_name("runner.py").resolve()
        if not self._runner.is_file():
            raise SandboxError(f"the sandbox runner is missing: {self._runner}", hint="reinstall atc")
        try:
            self.client.images.get(image)
        except Exception as exc:
            raise translate_docker_error(exc, image=image) from exc
        #: Labels every container of this backend carries; ``instance`` tells backends of one process apart.
        self.instance = uuid.uuid4().hex[:12]
        self._labels = {ROLE_LABEL: "1", OWNER_LABEL: str(os.getpid()), HOST_LABEL: socket.gethostname(),
                        INSTANCE_LABEL: self.instance}
        self._lock = threading.Condition()
        self._pools: dict[_Key, list[_Warm]] = {}
        self._starting: dict[_Key, int] = {}
        self._closed = False
        self._refillers: list[threading.Thread] = []
        self._reservers: list[threading.Thread] = []
        self._reaper = ThreadPoolExecutor(max_workers=2, thread_name_prefix="atc-docker-rm")
        self._live: dict[str, str] = {}  # container id -> its socket directory
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
        warm = self._take(key)
        deadline = time.monotonic() + limits.timeout
        try:
            gateway = Gateway(tools, limits, deadline=deadline)
            outcome = serve(warm.conn, program, tools, limits, gateway, deadline=deadline)
            if outcome.done is None and outcome.failure in (None, "SandboxError"):
                self._explain_death(warm, outcome)
        finally:
            warm.conn.close()
            self._discard(warm)
        return build_result(program, outcome, sandbox=self.name, isolation=self.isolation(limits),
                            started=started, tools=tools)

    def isolation(self, limits: Limits) -> list[str]:
        """What is in force for a run with ``limits`` (reported in ``ExecutionResult.isolation``)."""
        key = _key_of(limits)
        seccomp = f"seccomp:{FILTER_NAME}" if seccomp_option() else "seccomp:docker-default"
        return ["docker", "network:none", "readonly-rootfs", "cap-drop:ALL", "no-new-privileges",
                "user:65534", f"pids:{key.pids}", f"memory:{key.memory_mb}MB", f"cpus:{self.cpus:g}",
                f"tmpfs:/tmp:{self.tmpfs_mb}MB", "ipcns", "utsns", "cgroupns", "proc:masked", "sys:empty", seccomp,
                "clean-env",
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
            if self._closed:
                return
            self._closed = True
            pooled = [w for pool in self._pools.values() for w in pool]
            self._pools.clear()
            self._lock.notify_all()
        for thread in self._refillers + self._reservers:
            thread.join(timeout=self.start_timeout + 5)
        for warm in pooled:
            warm.conn.close()
            self._discard(warm)
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

        Returns how many warm containers are ready. Useful before a batch of runs and in
        benchmarks; runs do not need it (the pool fills itself after the first run).
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
            warm: _Warm | None = self._start(key)
        except SandboxError:
            warm = None
        with self._lock:
            self._starting[key] -= 1
            if warm is not None and not self._closed:
                self._pools.setdefault(key, []).append(warm)
                warm = None
            self._lock.notify_all()
        if warm is not None:  # closed meanwhile
            warm.conn.close()
            self._discard(warm)

    def _take(self, key: _Key) -> _Warm:
        """A warm container for ``key`` whose runner is still waiting, else the one being started
        for it in the background (waiting costs less than starting another), else a fresh one."""
        while True:
            with self._lock:
                deadline = time.monotonic() + self.start_timeout
                while (not self._closed and not self._pools.get(key) and self._starting.get(key)
                       and time.monotonic() < deadline):
                    self._lock.wait(timeout=max(0.01, deadline - time.monotonic()))
                if self._closed:
                    raise SandboxError("this Docker backend is closed")
                pool = self._pools.setdefault(key, [])
                warm = pool.pop(0) if pool else None
                if self.pool_size:
                    self._ensure_refiller()
                    self._lock.notify_all()
            if warm is None:
                return self._start(key)
            # A waiting runner sends nothing: anything readable means it died (EOF) while pooled.
            if not select.select([warm.conn], [], [], 0)[0]:
                return warm
            warm.conn.close()
            self._discard(warm)

    def _ensure_refiller(self) -> None:
        """Start the refill threads once: two, so that a burst of runs waits for at most one start."""
        while len(self._refillers) < min(2, self.pool_size):
            thread = threading.Thread(target=self._refill_loop, name="atc-docker-pool", daemon=True)
            self._refillers.append(thread)
            thread.start()

    def _refill_loop(self) -> None:
        """Keep ``pool_size`` warm containers for every key in use (each thread starts one at a time)."""
        failures = 0
        while True:
            with self._lock:
                while not self._closed and not self._wanted():
                    self._lock.wait()
                if self._closed:
                    return
                key = self._wanted()[0]
                self._starting[key] = self._starting.get(key, 0) + 1
            try:
                warm: _Warm | None = self._start(key)
                failures = 0
            except SandboxError:
                warm = None
                failures += 1
            with self._lock:
                self._starting[key] -= 1
                if warm is not None and not self._closed:
                    self._pools.setdefault(key, []).append(warm)
                    warm = None
                self._lock.notify_all()
            if warm is not None:  # closed meanwhile
                warm.conn.close()
                self._discard(warm)
            if failures:
                with self._lock:  # back off instead of spinning on a broken engine
                    self._lock.wait(timeout=min(30.0, 0.5 * 2**failures))

    def _wanted(self) -> list[_Key]:
        return [k for k, pool in self._pools.items() if len(pool) + self._starting.get(k, 0) < self.pool_size]

    # -- one container -----------------------------------------------------------------------------

    def _start(self, key: _Key) -> _Warm:
        """Start a container for ``key`` and wait until its runner is connected and ready."""
        sockdir = tempfile.mkdtemp(prefix=f"{SOCKET_DIR_PREFIX}{os.getpid()}-")
        # The container's uid may traverse the directory and connect, but not list or write it.
        os.chmod(sockdir, 0o711)
        path = os.path.join(sockdir, SOCKET_NAME)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
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
            try:
                self._check_peer(conn, cid)
                ready = wait_ready(conn, self.start_timeout)
            except (OSError, wire.FrameError) as exc:
                conn.close()
                raise SandboxError(f"the sandbox runner did not start: {exc}") from exc
            conn.settimeout(None)
            return _Warm(cid=cid, sockdir=sockdir, conn=conn, key=key, ready=ready)
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
        from docker.types import LogConfig, Ulimit

        ulimits = [Ulimit(name="nofile", soft=256, hard=256),
                   Ulimit(name="fsize", soft=key.file_bytes, hard=key.file_bytes)]
        if key.cpu_seconds:
            ulimits.append(Ulimit(name="cpu", soft=key.cpu_seconds, hard=key.cpu_seconds))
        api = self.client.api
        try:
            host_config = api.create_host_config(
                binds={str(self._runner): {"bind": RUNNER_PATH, "mode": "ro"},
                       sockdir: {"bind": SOCKET_DIR, "mode": "ro"}},
                network_mode="none",
                read_only=True,
                # nr_inodes: empty files cost kernel memory that ``size`` does not count. An empty
                # read-only /sys instead of the host's (devices, firmware, kernel settings).
                tmpfs={"/tmp": f"rw,size={self.tmpfs_mb}m,nr_inodes=32768,mode=1777,noexec,nosuid,nodev",
                       "/sys": "ro,size=4k,nr_inodes=16,nosuid,nodev,noexec"},
                cap_drop=["ALL"],
                security_opt=["no-new-privileges", *filter(None, [seccomp_option()])],
                cgroupns="private",
                pids_limit=key.pids,
                mem_limit=f"{key.memory_mb}m",
                memswap_limit=f"{key.memory_mb}m",
                nano_cpus=int(self.cpus * 1e9),
                ulimits=ulimits,
                ipc_mode="private",
                log_config=LogConfig(type="none"),
            )
            host_config["MaskedPaths"] = MASKED_PATHS  # API 1.40+; docker-py has no keyword for it
            created = api.create_container(
                self.image,
                command=["python3", "-I", "-S", RUNNER_PATH, "--connect", f"{SOCKET_DIR}/{SOCKET_NAME}"],
                user=SANDBOX_USER,
                working_dir="/tmp",
                hostname="sandbox",
                network_disabled=True,
                labels=self._labels,
                host_config=host_config,
            )
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

    def _explain_death(self, warm: _Warm, outcome: SessionOutcome) -> None:
        """The runner vanished without a result: was it the memory limit (State.OOMKilled)?"""
        try:
            self.client.api.wait(warm.cid, timeout=3)
            state = self.client.api.inspect_container(warm.cid).get("State") or {}
        except Exception:
            return
        if state.get("OOMKilled"):
            outcome.failure = "MemoryLimit"
            outcome.detail = f"the program used more than {warm.key.memory_mb} MB of memory (killed)"
        elif outcome.failure is None or outcome.detail.startswith("the runner stopped"):
            outcome.failure = "SandboxError"
            outcome.detail = f"the sandbox process exited with status {state.get('ExitCode')} without a result"

    def _reap_stale(self) -> None:
        try:
            reap_stale_containers(self.client)
        except SandboxError:  # the engine refused a cleanup: the runs themselves will say if it is gone
            pass

    def _discard(self, warm: _Warm) -> None:
        """Kill and remove a used container in the background (the result need not wait)."""
        try:
            self._reaper.submit(self._remove, warm.cid, warm.sockdir)
        except RuntimeError:  # executor shut down: do it here
            self._remove(warm.cid, warm.sockdir)

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
