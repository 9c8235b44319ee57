"""A Docker sandbox container running the fork server (``sandbox/inside/container_server.py``): a "cell".

The Docker backend keeps cells ready. A cell holds one runner started by the server, connected
and blocked on ``start``. A run takes the cell, serves the program on the runner's socket and
then either hands the cell back *resetting* -- the server checks, on its own, that the run is
gone and left nothing (each run has namespaces and a root of its own, which die with it) and
hands over the next runner, made while the run ran; whoever takes the cell next reads it
(``take_runner``) -- or, after anything abnormal, the backend removes the container. A cell
whose server cannot give runs namespaces of their own (``isolated`` false, from its ``hello``)
serves one run only.

This module speaks the server's control protocol (one JSON message per ``SOCK_SEQPACKET``
packet; the runner's socket travels as SCM_RIGHTS) and reads what the kernel knows about a
container's memory kills (the ``oom_kill`` counter of its memory cgroup) so that a run killed
for memory is told apart from one that killed itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from sandbox import wire
from sandbox.program_run import wait_ready

__all__ = ["Cell", "CellError", "oom_kills", "MAX_RUNS_PER_CELL"]

#: A container serves at most this many runs, then is replaced (a bound on anything slow to leak).
MAX_RUNS_PER_CELL = 500
_CGROUP_FILES = ("/sys/fs/cgroup/memory/docker/{cid}/memory.oom_control",
                 "/sys/fs/cgroup/memory/system.slice/docker-{cid}.scope/memory.oom_control",
                 "/sys/fs/cgroup/system.slice/docker-{cid}.scope/memory.events",
                 "/sys/fs/cgroup/docker/{cid}/memory.events")


class CellError(Exception):
    """The server broke the protocol, went away or refused: the cell must be removed."""


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _stream_socket(fds: list[int]) -> socket.socket | None:
    """The runner's socket the server handed over: exactly one descriptor, and a Unix stream
    socket (anything else is closed and refused)."""
    if len(fds) != 1:
        _close_all(fds)
        return None
    try:
        sock = socket.socket(fileno=fds[0])
    except OSError:
        _close_all(fds)
        return None
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        sock.close()
        return None
    return sock


def oom_kills(cid: str, known: list[str] | None = None) -> int | None:
    """How many processes the kernel has killed for memory in container ``cid`` (its memory
    cgroup's ``oom_kill`` counter), or None when this host does not show it. ``known``: where it
    was found before, tried first (and filled in): read at every run, off no other path."""
    for path in [*(known or ()), *(pattern.format(cid=cid) for pattern in _CGROUP_FILES)]:
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                data = os.read(fd, 4096)
            finally:
                os.close(fd)
        except OSError:
            continue
        for line in data.split(b"\n"):
            name, _, value = line.partition(b" ")
            if name == b"oom_kill" and value.strip().isdigit():
                if known is not None and path not in known:
                    known[:] = [path]
                return int(value)
    return None


@dataclass
class Cell:
    """One container with its server connection (``ctl``) and, when ready, a waiting runner."""

    cid: str
    sockdir: str
    ctl: socket.socket
    key: Any
    runs: int = 0
    runner: socket.socket | None = None
    #: The server's handle of the current run (its ``exit`` report names it).
    runner_pid: int = 0
    #: Runs get namespaces of their own in this container (else it serves one run only).
    isolated: bool = False
    #: Why not, when not.
    why: str = ""
    oom_before: int | None = None
    exits: dict[int, int] = field(default_factory=dict)
    #: A run ended normally and the server's next runner has not been taken yet (``take_runner``).
    resetting: bool = False
    #: When that run ended (monotonic).
    ended: float = 0.0
    _oom_file: list[str] = field(default_factory=list)
    _next_id: int = 0

    def _next(self, timeout: float, *, keep_fds: bool = False) -> tuple[dict[str, Any], list[int]]:
        """The server's next message and the descriptors it carried (closed unless ``keep_fds``);
        exit reports are recorded on the way."""
        self.ctl.settimeout(timeout)
        try:
            data, fds, flags, _addr = socket.recv_fds(self.ctl, 1 << 16, 1)
        except OSError as exc:
            raise CellError(f"no answer from the container's fork server: {exc}") from exc
        if not keep_fds or flags & socket.MSG_CTRUNC:
            _close_all(fds)
            fds = []
        try:
            if not data:
                raise CellError("the container's fork server closed its connection")
            try:
                msg = json.loads(data)
            except ValueError as exc:
                raise CellError("the container's fork server sent garbage") from exc
            if not isinstance(msg, dict):
                raise CellError("the container's fork server sent garbage")
        except CellError:
            _close_all(fds)
            raise
        for report in (msg, msg.get("ended")):
            if isinstance(report, dict) and report.get("op") == "exit" and isinstance(report.get("pid"), int):
                self.exits[report["pid"]] = int(report.get("status") or 0)
        return msg, fds

    def hello(self, timeout: float) -> None:
        msg, _fds = self._next(timeout)
        if msg.get("op") != "hello":
            raise CellError("the container's fork server did not say hello")
        self.isolated = msg.get("isolated") is True
        self.why = str(msg.get("why") or "")

    def due(self) -> bool:
        """Has the server's next message come (after a run: the next runner, or that there is
        none)? Then ``take_runner`` does not wait."""
        return bool(select.select([self.ctl], [], [], 0)[0])

    def take_runner(self, timeout: float, ready_timeout: float | None = None, *, after_run: bool = False) -> None:
        """Take the runner the server hands over unasked (after its ``hello``, and after each run)
        and wait for its ``ready`` (usually there already: the server makes each runner while
        the run before it runs). ``after_run``: the server must also have found the last run gone
        and nothing left (``clean``); the cell is kept only then."""
        if self.runner is not None:
            self.runner.close()
            self.runner = None
        deadline = time.monotonic() + timeout
        while True:
            msg, fds = self._next(max(0.001, deadline - time.monotonic()), keep_fds=True)
            if msg.get("op") == "runner":
                break
            _close_all(fds)
        ours = _stream_socket(fds)
        try:
            if after_run and msg.get("clean") is not True:
                raise CellError("the container could not be reset to its first state")
            if not isinstance(msg.get("pid"), int) or ours is None:
                raise CellError(f"the container's fork server could not start a runner: {msg.get('error')}")
            wait_ready(ours, max(0.001, deadline - time.monotonic()) if ready_timeout is None else ready_timeout)
            ours.settimeout(None)
        except (OSError, wire.FrameError) as exc:
            if ours is not None:
                ours.close()
            raise CellError(f"the sandbox runner did not start: {exc}") from exc
        except BaseException:
            if ours is not None:
                ours.close()
            raise
        if after_run:
            self.runs += 1
        self.runner, self.runner_pid = ours, int(msg["pid"])
        self.oom_before = oom_kills(self.cid, self._oom_file)

    def renew(self, cpu_seconds: int, timeout: float) -> None:
        """Replace the waiting runner by one with ``cpu_seconds`` of CPU time instead of the
        container's (a session's runner): the server makes it, the waiting one is dropped -- its
        end checked like a run's -- and the new one taken as after a run."""
        self._next_id += 1
        try:
            self.ctl.settimeout(timeout)
            self.ctl.send(json.dumps({"op": "renew", "id": self._next_id, "cpu": int(cpu_seconds)}).encode())
        except OSError as exc:
            raise CellError(f"the container's fork server is gone: {exc}") from exc
        deadline = time.monotonic() + timeout
        while True:
            msg, _fds = self._next(max(0.001, deadline - time.monotonic()))
            if msg.get("op") == "renewed" and msg.get("id") == self._next_id:
                break
        if msg.get("ok") is not True:
            raise CellError("the container's fork server could not start a runner")
        if self.runner is not None:
            self.runner.close()  # the waiting runner sees the end of its socket and exits
            self.runner = None
        self.take_runner(max(0.001, deadline - time.monotonic()), after_run=True)

    def exit_status(self, timeout: float) -> int | None:
        """How the last runner ended (None: unknown, e.g. the server died with it)."""
        deadline = time.monotonic() + timeout
        while self.runner_pid not in self.exits and time.monotonic() < deadline:
            try:
                self._next(max(0.001, deadline - time.monotonic()))
            except CellError:
                break
        return self.exits.get(self.runner_pid)

    def memory_killed(self) -> bool | None:
        """Did the kernel kill something in the container for memory since the runner started?"""
        now = oom_kills(self.cid, self._oom_file)
        if now is None or self.oom_before is None:
            return None
        return now > self.oom_before

    def close(self) -> None:
        for sock in (self.runner, self.ctl):
            if sock is not None:
                sock.close()
        self.runner = None

    def waiting(self) -> bool:
        """Is the runner still waiting? A waiting runner sends nothing: anything readable (EOF) means
        it died while pooled."""
        if self.runner is None:
            return False
        return not select.select([self.runner], [], [], 0)[0]
