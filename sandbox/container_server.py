"""The fork server inside a Docker sandbox container: one run at a time, each in a fresh process.

STDLIB ONLY: it is mounted read-only into the container (``/atc/server.py``) next to the runner
and started as the container's command::

    python3 -I -S /atc/server.py --connect /atc/sock/runner.sock --runner /atc/runner.py

It connects to the host (``SOCK_SEQPACKET``, one JSON message per packet), says ``hello``, and
serves the Docker backend (``sandbox/docker_cells.py``):

- ``{"op": "spawn", "id": N, "cpu": S, "fsize": B}`` with the runner's socket attached
  (SCM_RIGHTS): fork a runner. It sends ``ready`` and waits for ``start`` like any runner; only
  when ``start`` comes does it become uid 65534 (from the server's root with nothing but
  CAP_SETUID/CAP_SETGID: the kernel clears every capability with the uid change), take its
  rlimits and run the program in ``/tmp``. Answer: ``{"op": "spawned", "id": N, "pid": P}``.
- ``"reset": true`` in a ``spawn`` sent after a run that ended normally: the server forks the
  next runner and answers whether the container's state is what it was before the run. The
  reset starts as soon as the last runner exits (its run is over then), else with this request. A
  cleaner process becomes uid 65534 and kills every process of that uid (``kill(-1)``, until /proc shows none), removes everything in the
  places uid 65534 can write (``/tmp``, ``/dev/shm``, ``/dev/mqueue``: the root filesystem is
  read-only and every other mount belongs to root) and then checks that they are empty and that
  no process of the uid is left. The answer carries ``"clean": bool``; the backend removes a
  container that is not clean instead of running anything more in it.
- It reaps every process (it is PID 1) and reports its runners' ends:
  ``{"op": "exit", "pid": P, "status": S}`` (``Popen.returncode`` style).

The backend runs at most one program per container at a time, sends a runner its program only
after the previous run's reset came back clean, and removes the container after anything abnormal
(timeout, a runner that died, a failed reset). The server itself never runs a program.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import select
import signal
import socket
import stat
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RUN_UID = 65534
#: Where uid 65534 can write in the container; all of it is wiped and checked after every run.
WRITABLE = ("/tmp", "/dev/shm", "/dev/mqueue")
_MAX_MESSAGE = 1 << 16
_RUNNER_MODULES = ("builtins", "io", "json", "re", "struct", "threading", "time", "traceback")


def _send(ctl: socket.socket, msg: dict[str, Any]) -> None:
    try:
        ctl.send(json.dumps(msg).encode())
    except OSError:
        pass


def _become_run_user(cpu: int, fsize: int) -> None:
    """In the runner, once ``start`` came: uid 65534 (every capability goes with the change from
    root; no-new-privileges holds from the container), the run's rlimits, cwd /tmp."""
    os.setgroups([])
    os.setresgid(RUN_UID, RUN_UID, RUN_UID)
    os.setresuid(RUN_UID, RUN_UID, RUN_UID)
    if cpu > 0:
        # soft < hard: the limit arrives as SIGXCPU (reported as a timeout), not SIGKILL.
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.environ["HOME"] = "/nonexistent"
    os.chdir("/tmp")


def _runner(runner: dict[str, Any], sock_fd: int, cpu: int, fsize: int) -> int:
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    if sock_fd != 3:
        os.dup2(sock_fd, 3)
    os.closerange(4, os.sysconf("SC_OPEN_MAX"))
    return int(runner["main"](["--fd", "3"], before_program=lambda: _become_run_user(cpu, fsize)))


def _run_processes() -> list[int]:
    """Live (not zombie) processes of the run uid."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != RUN_UID:
                continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                    found.append(int(entry))
        except (OSError, IndexError):
            continue
    return found


def _remove(path: str) -> None:
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        os.chmod(path, 0o700)  # the run may have left it unreadable to itself
        for name in os.listdir(path):
            _remove(os.path.join(path, name))
        os.rmdir(path)
    else:
        os.unlink(path)


def _clean() -> str:
    """In the cleaner (uid 65534): kill every process of the uid, empty its writable places.
    Returns what is left ("" when clean)."""
    me = os.getpid()
    deadline = time.monotonic() + 3
    while True:
        # Every process this uid may signal, but not the caller -- at once: no fork escapes it, so
        # it goes first, whatever a scan of /proc (which a process hopping pids could slip) shows.
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        left = [p for p in _run_processes() if p != me]
        if not left:
            break
        if time.monotonic() > deadline:
            return f"processes of the run still alive: {left}"
        time.sleep(0.001)
    problems = []
    for top in WRITABLE:
        if not os.path.isdir(top):
            continue
        for name in os.listdir(top):
            try:
                _remove(os.path.join(top, name))
            except OSError as exc:
                problems.append(f"{top}/{name}: {exc.strerror}")
        remaining = os.listdir(top)
        if remaining:
            problems.append(f"{top} not empty: {remaining[:5]}")
    return "; ".join(problems)


def serve(path: str, runner_path: str) -> int:
    with open(runner_path) as f:
        code = compile(f.read(), "/atc/runner.py", "exec")
    for name in _RUNNER_MODULES:
        __import__(name)
    # The runner's module body, once: each forked runner only calls its main (the server itself
    # never does), and what a run changes in its copy dies with it.
    runner: dict[str, Any] = {"__name__": "atc_runner", "__file__": "/atc/runner.py", "__builtins__": __builtins__}
    exec(code, runner)
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    deadline = time.monotonic() + 10
    while True:
        try:
            ctl.connect(path)
            break
        except OSError:
            if time.monotonic() > deadline:
                return 1
            time.sleep(0.01)
    gc.collect()
    gc.freeze()  # a forked runner's collections then do not copy the server's pages
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    runners: set[int] = set()
    statuses: dict[int, int] = {}
    me = os.getpid()
    # "latest": the runner forked last; when it exits its run is over, and the cleaner starts at
    # once ("due", then "cleaner": its pid) instead of waiting for the host to ask for a reset.
    state: dict[str, Any] = {"latest": 0, "due": False, "cleaner": None}

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = os.waitstatus_to_exitcode(status)
            statuses[pid] = code
            if pid in runners:
                runners.discard(pid)
                _send(ctl, {"op": "exit", "pid": pid, "status": code})
                if pid == state["latest"]:
                    state["due"] = True

    def drain() -> None:
        """Empty the signal wake-up pipe (else every select() returns at once: a busy loop)."""
        try:
            while os.read(wake_r, 512):
                pass
        except BlockingIOError:
            pass

    def start_cleaner() -> int:
        """Fork the cleaner: it becomes uid 65534, kills and wipes what that uid left."""
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                signal.set_wakeup_fd(-1)
                os.setgroups([])
                os.setresgid(RUN_UID, RUN_UID, RUN_UID)
                os.setresuid(RUN_UID, RUN_UID, RUN_UID)
                status = 0 if not _clean() else 3
            finally:
                os._exit(status)
        return pid

    def finish_cleaner(pid: int) -> bool:
        """Wait for the cleaner, then check: is no process of uid 65534 left?"""
        while pid not in statuses:  # the cleaner is quick; nothing else is served meanwhile
            select.select([wake_r], [], [], 0.05)
            drain()
            reap()
        reap()  # what the cleaner killed and left to PID 1
        return statuses.pop(pid) == 0 and not _run_processes()

    _send(ctl, {"op": "hello", "pid": me})
    while True:
        ready = select.select([ctl.fileno(), wake_r], [], [])[0]
        if wake_r in ready:
            drain()
            reap()
        if state["due"]:
            state["due"] = False
            state["cleaner"] = start_cleaner()
        if ctl.fileno() not in ready:
            continue
        data, fds, _flags, _addr = socket.recv_fds(ctl, _MAX_MESSAGE, 2)
        if not data:
            return 0  # the backend is gone: the container stops with everything in it
        try:
            msg = json.loads(data)
        except ValueError:
            msg = {}
        op = msg.get("op") if isinstance(msg, dict) else None
        if op == "spawn" and len(fds) == 1:
            reply: dict[str, Any] = {"op": "spawned", "id": msg.get("id")}
            cleaner, state["cleaner"] = state["cleaner"], None
            try:
                pid = os.fork()
            except OSError as exc:
                reply["error"] = str(exc)
            else:
                if pid == 0:
                    status = 1
                    try:
                        status = _runner(runner, fds[0], int(msg.get("cpu") or 0), int(msg.get("fsize") or 1 << 30))
                    finally:
                        os._exit(status)
                runners.add(pid)
                state["latest"] = pid
                reply["pid"] = pid
            if msg.get("reset"):
                # The cleaner started when the last runner exited, else it starts now -- after the
                # next runner was forked (as root, waiting for a program that is only sent once
                # this reset came back clean: nothing of uid 65534 can touch it meanwhile).
                reply["clean"] = finish_cleaner(cleaner or start_cleaner())
            _send(ctl, reply)
        for fd in fds:
            os.close(fd)


def main(argv: list[str]) -> int:
    opts = {argv[i][2:]: argv[i + 1] for i in range(0, len(argv) - 1, 2)}
    return serve(opts["connect"], opts["runner"])


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
