"""One jailed runner of the local backend and how it is ended: the jail process, our end of its
channel, the program's host pid, and everything that must go when the run is over (its processes,
its work directory without namespaces, its cgroups, what its uid owns in the kernel, the uid).

The jail is either a ``subprocess.Popen`` (a jail started from scratch) or a ``ForkedJail`` (forked
by the fork server, ``sandbox/local/forkserver.py``); the difference is only who may signal its process
group and who reaps it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field

from sandbox.api import Limits
from sandbox.local import workdirs
from sandbox.local.cgroups import release_cgroup
from sandbox.local.forkserver import ForkedJail
from sandbox.local.kernel_objects import teardown
from sandbox.local.uids import RETIRED, release_uid
from sandbox.program_run import RunOutcome

__all__ = ["Worker", "run_isolation", "explain_exit"]


@dataclass
class Worker:
    """One jailed runner: the jail process, our end of its channel, the program's host pid."""

    proc: subprocess.Popen[bytes] | ForkedJail
    sock: socket.socket
    pid: int
    isolation: list[str]
    workdir: str
    closed: bool = field(default=False)
    cgroups: tuple[tuple[str, str, str], ...] = ()  # (path, controller, tag) of each
    oom_killed: bool = False
    uid: int | None = None  # the uid drawn for this runner (released once torn down)
    dedicated_uid: bool = False  # the program really runs as ``uid`` (root, no user namespace)
    python: str = ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, *, finished: bool, grace: float = 0.0) -> int | None:
        """End the runner and everything it started. A runner that sent ``done`` is exiting
        anyway: it is killed and left to ``reap`` (the caller may do that in the background).
        Otherwise it is killed -- after ``grace`` seconds to exit by itself, so that how it died
        (e.g. SIGXCPU) is still visible -- and reaped now, and its exit status is returned."""
        if self.closed:
            return self.proc.returncode
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
        deadline = time.monotonic() + grace
        while grace and not self._exited() and time.monotonic() < deadline:
            time.sleep(0.002)
        self.kill()
        if finished:
            return None
        return self.reap()

    def reap(self) -> int | None:
        """Wait until the jail has exited -- it exits only after reaping the program, and the
        program is PID 1 of its namespace, so then every process of the run is gone -- kill what
        is left of the process group while the dead jail still holds the group id, then reap the
        jail and remove the work directory. Returns the jail's exit status."""
        deadline = time.monotonic() + 5
        escalated = False
        while not self._exited():
            if time.monotonic() > deadline:
                if escalated:
                    break
                self._killpg()
                escalated, deadline = True, time.monotonic() + 5
            if isinstance(self.proc, ForkedJail):  # its exit is an event: no polling
                try:
                    self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            else:
                time.sleep(0.002)
        self._killpg()
        try:
            status: int | None = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            status = None
        if self.proc.stdout:
            self.proc.stdout.close()
        # Without a mount namespace the run worked on the host: its leftovers go (sandbox/local/workdirs.py).
        workdirs.after_run(self.workdir, self.isolation)
        for path, kind, tag in self.cgroups:
            self.oom_killed = release_cgroup(path, kind, tag) or self.oom_killed
        self.cgroups = ()
        self.teardown()
        return status

    def teardown(self) -> None:
        """Remove what the run's own uid still owns in the kernel (SysV IPC objects, keys: only
        possible without an IPC namespace or without the filter) -- its processes are all gone by
        now -- and release the uid, or retire it if anything stays."""
        uid, self.uid = self.uid, None
        if uid is None:
            return
        # With an IPC namespace the run's IPC objects died with it (no other process could join it).
        ipc = "ipcns" not in self.isolation
        if self.dedicated_uid and os.geteuid() == 0 and teardown(uid, self.python or None, ipc=ipc):
            RETIRED.add(uid)
        release_uid(uid)

    def _exited(self) -> bool:
        """Has the jail exited? (WNOWAIT: a zombie jail keeps its pid and group id reserved, so
        signalling them cannot hit a recycled process.)"""
        if self.proc.returncode is not None:
            return True
        if isinstance(self.proc, ForkedJail):  # the fork server reaps it and reports the exit
            return False
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def _killpg(self) -> None:
        if isinstance(self.proc, ForkedJail):
            self.proc.killpg()  # by its parent, the fork server, which knows it is not reaped yet
        elif self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass

    def kill(self) -> None:
        """Kill the program. With namespaces that is PID 1 of its namespace (the kernel takes
        everything it started along), and the jail then reaps it and exits; without, the jail
        is the program and the whole process group goes."""
        if self.pid != self.proc.pid and not self._exited():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
        else:
            self._killpg()


def run_isolation(worker: Worker) -> list[str]:
    """What confined a run (or session) on ``worker``, as results report it."""
    return ["pgroup", *worker.isolation, "restrictedpython-lint", "empty-env"]


def explain_exit(worker: Worker, outcome: RunOutcome, status: int | None, limits: Limits) -> None:
    """A runner that stopped without a result: was it its CPU time or the memory limit?"""
    if outcome.done is None and outcome.failure == "SandboxError" and status is not None:
        # The jail reports a killed program as 128+signal; without namespaces the jail is the
        # program and Popen reports -signal.
        if status in (128 + signal.SIGXCPU, -signal.SIGXCPU):
            outcome.failure, outcome.detail = "Timeout", "the program used up its CPU time limit"
        elif worker.oom_killed:
            outcome.failure = "MemoryLimit"
            outcome.detail = f"the program used more than {limits.memory_mb} MB of memory (killed)"
        elif status in (128 + signal.SIGKILL, -signal.SIGKILL):
            outcome.detail = f"{outcome.detail}; the sandbox was killed"
