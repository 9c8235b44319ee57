"""The runners the two real backends lend to sandbox sessions (``sandbox/session/interpreter.py``).

Each is a ``RunnerHandle``: the channel of one runner, what confines it, and its ``end``, which
removes everything of it before it returns.

- Local: a jailed runner taken like a run's (``LocalBackend._take``), spawned with the session's
  CPU time; its end is a run's teardown, done at once: PID 1 of its namespace killed (the kernel
  takes every process it started), the jail reaped, its work directory, cgroups and what its uid
  owns in the kernel removed, the uid released.
- Docker: a container taken from the pool like a run's, whose waiting runner is replaced by one
  made with the session's CPU time (``Cell.renew``); its end closes the connection to the
  container's fork server, which then exits -- and as PID 1 of the container it takes every
  process of the session with it -- and removes the container in the background (``close()`` of
  the backend and its exit hook wait for that). A session's container is never reset and recycled: whatever the
  session did there goes with it.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Protocol

from protocols.errors import SandboxError
from sandbox.api import Limits, SessionLimits, Toolset
from sandbox.docker.cells import Cell, CellError
from sandbox.docker.spec import ContainerKey, key_of
from sandbox.local.worker import Worker, explain_exit, run_isolation
from sandbox.program_run import RunOutcome
from sandbox.session.interpreter import Interpreter

if TYPE_CHECKING:
    import httpx

__all__ = ["LocalRunner", "DockerRunner", "open_local", "open_docker", "LocalPool", "DockerPool"]


# The backends call down into this module; what it needs of them is said by these two Protocols
# rather than by importing the backends back (``LocalBackend`` and ``DockerBackend`` satisfy them).

class LocalPool(Protocol):
    """What a session needs of the local backend (``sandbox.local.backend.LocalBackend``)."""

    @property
    def name(self) -> str: ...

    @property
    def client(self) -> httpx.Client | None: ...

    def _take(self, limits: Limits) -> Worker: ...


class DockerPool(Protocol):
    """What a session needs of the Docker backend (``sandbox.docker.backend.DockerBackend``)."""

    @property
    def name(self) -> str: ...

    @property
    def start_timeout(self) -> float: ...

    def isolation(self, limits: Limits, isolated: bool | None = None) -> list[str]: ...

    def end_session_cell(self, cell: Cell) -> None: ...

    def _take(self, key: ContainerKey) -> Cell: ...

    def _explain_death(self, cell: Cell, outcome: RunOutcome) -> None: ...


class LocalRunner:
    """A jailed runner of the local backend, lent to one session."""

    def __init__(self, worker: Worker, limits: Limits) -> None:
        self.worker = worker
        self.limits = limits
        self.isolation = run_isolation(worker)

    @property
    def sock(self) -> socket.socket:
        return self.worker.sock

    def end(self, outcome: RunOutcome | None) -> None:
        # A runner that vanished gets a moment to finish dying, so that how it died is seen.
        lost = outcome is not None and outcome.done is None and outcome.failure == "SandboxError"
        status = self.worker.stop(finished=False, grace=0.5 if lost else 0.0)
        if outcome is not None:
            explain_exit(self.worker, outcome, status, self.limits)


class DockerRunner:
    """The runner of a container of the Docker backend, lent to one session with its container."""

    def __init__(self, backend: DockerPool, cell: Cell, limits: Limits) -> None:
        self.backend = backend
        self.cell = cell
        self.isolation = ["fresh-container" if i == "reset-checked" else i for i in backend.isolation(limits)]
        self._sock = cell.runner

    @property
    def sock(self) -> socket.socket:
        assert self._sock is not None
        return self._sock

    def end(self, outcome: RunOutcome | None) -> None:
        try:
            if outcome is not None and outcome.done is None and outcome.failure in (None, "SandboxError"):
                self.backend._explain_death(self.cell, outcome)
        finally:
            self.backend.end_session_cell(self.cell)


def open_local(backend: LocalPool, tools: Toolset, limits: Limits, session: SessionLimits) -> Interpreter:
    spawn = session.spawn_limits(limits)
    worker = backend._take(spawn)
    runner = LocalRunner(worker, spawn)
    return Interpreter(runner, tools, limits, session, sandbox=backend.name, client=backend.client).open()


def open_docker(backend: DockerPool, tools: Toolset, limits: Limits, session: SessionLimits) -> Interpreter:
    key = key_of(limits)
    cell = backend._take(key)
    spawn = session.spawn_limits(limits)
    if not cell.isolated:
        if spawn.cpu_seconds != key.cpu_seconds:
            # A container of one run (no user namespaces here) has no second runner to give: one
            # started with the session's CPU time instead.
            backend.end_session_cell(cell)
            cell = backend._take(key_of(spawn))
    elif spawn.cpu_seconds != key.cpu_seconds:
        try:
            # The pool's runner has a run's CPU limit: the server makes one with the session's
            # (the waiting one is dropped, and its end checked as a run's before the new one comes).
            cell.renew(spawn.cpu_seconds or 0, backend.start_timeout)
        except BaseException as exc:
            backend.end_session_cell(cell)
            if isinstance(exc, CellError):
                raise SandboxError(f"the sandbox runner did not start: {exc}") from exc
            raise
    runner = DockerRunner(backend, cell, spawn)
    return Interpreter(runner, tools, limits, session, sandbox=backend.name).open()
