"""The fork server of the local backend: one pre-imported interpreter that forks each jail.

STDLIB ONLY (it runs under a bare ``python3 -I -S`` with an empty environment). The local
backend (``sandbox/local/forkserver.py``) starts it once per backend::

    python3 -I -S zygote.py --control FD --jail JAIL.py --runner RUNNER.py

and then, instead of starting a new interpreter for every runner, asks it over the control
socket (``SOCK_SEQPACKET``, one JSON message per packet) to fork one:

- ``{"op": "spawn", "id": N, "argv": [...]}`` with two file descriptors attached (SCM_RIGHTS):
  the runner's end of its socketpair and the write end of the report pipe. The server forks; the
  child becomes a session leader, puts the report pipe on its stdout, keeps the socket as fd 3,
  closes every other descriptor and calls ``jail.main(argv + ["--fd", "3"])`` -- exactly what
  ``python3 -I -S jail.py ARGV`` does, without the interpreter start and the imports. The server
  answers ``{"op": "spawned", "id": N, "pid": P}`` (or ``"error"``).
- ``{"op": "kill", "pid": P}``: SIGKILL to the process group of jail ``P`` if it has not been
  reaped yet (only the server, its parent, can tell; a reaped pid may already be someone else's).
- The server reaps its children and reports each one: ``{"op": "exit", "pid": P, "status": S}``
  (S as ``Popen.returncode``: the exit code, or minus the signal).

Why a run still cannot see anything of another one: the server itself never runs a program
and holds nothing of one -- it only imports the stdlib modules the jail and the runner need and
compiles the runner. Each jail is a fresh fork of that pristine state and then builds its whole
jail itself (new namespaces, a new root on its own tmpfs, its own uid, rlimits, the system-call
filter: ``sandbox/inside/jail.py``) exactly as a jail started from scratch does; what a program changes
in its copy of the interpreter dies with its process and its PID namespace.

Running as root, the server forks each jail straight into its namespaces: it unshares mount,
network, PID, IPC and UTS namespaces itself, forks (the child is PID 1 of the new PID namespace
and the only process in the new ones), and at once goes back to its own namespaces with
``setns`` on descriptors it opened at start (``Namespaces``); if that ever fails it stops and
kills every jail rather than fork another one from a changed state. Its own mount namespace is
private and holds the read-only skeleton of a jail's root (``jail.build_skeleton``), so each
jail mounts only its own tmpfs and ``/proc``. This saves the intermediate process (and its fork,
page faults and exit) and some twenty mount calls per run. Not root (user namespaces), or where
any of this is refused, each jail makes its own namespaces and root as above.

The server has no threads (forking is safe) and stops when the control socket closes (the
backend closed or died): it kills every jail it still has first. Jails get SIGKILL when the
server dies (``PR_SET_PDEATHSIG``), and a jail's PID 1 when the jail dies, so nothing outlives it.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import select
import signal
import socket
import sys
import types

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PR_SET_PDEATHSIG = 1
#: The runner's path as a jail is told it (its code is compiled already).
NEUTRAL_RUNNER = "/atc/runner.py"
_MAX_MESSAGE = 1 << 16
#: What the runner imports: loaded once here so that a forked runner finds them in sys.modules.
_RUNNER_MODULES = ("builtins", "io", "json", "os", "re", "socket", "struct", "sys", "threading", "time",
                   "traceback")
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x4000000, 0x8000000, 0x20000000, 0x40000000
#: The namespaces a jail gets (``jail.py`` makes the same ones), by their ``/proc/self/ns`` name.
_NAMESPACES = (("mnt", CLONE_NEWNS), ("net", CLONE_NEWNET), ("pid", CLONE_NEWPID), ("ipc", CLONE_NEWIPC),
               ("uts", CLONE_NEWUTS))


class Fatal(Exception):
    """The server could not go back to its own namespaces: it must not fork another jail."""


class Namespaces:
    """Forking jails straight into new namespaces (root only; see the module docstring)."""

    def __init__(self, jail: Any) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        if os.geteuid() != 0:
            raise OSError(1, "not root")
        if self.libc.unshare(CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "unshare")
        prefixes = sorted({os.path.realpath(sys.base_prefix), os.path.dirname(os.path.realpath(sys.executable))})
        self.skeleton: str = jail.build_skeleton(jail.NEW_ROOT, prefixes)
        os.chdir("/")
        self.own = [(os.open(f"/proc/self/ns/{name}", os.O_RDONLY | os.O_CLOEXEC), flag) for name, flag in _NAMESPACES]
        self.flags = 0
        for _name, flag in _NAMESPACES:
            self.flags |= flag
        try:  # setns into the namespaces it is in already: where that is refused, never fork this way
            self.restore()
        except Fatal as exc:
            raise OSError(1, str(exc)) from None

    def fork(self) -> int:
        """``os.fork`` with the child in new namespaces; OSError (nothing changed) when the kernel
        refuses them, Fatal when the server could not get back to its own."""
        if self.libc.unshare(self.flags) != 0:
            raise OSError(ctypes.get_errno(), "unshare")
        pid = -1
        try:
            pid = os.fork()
        finally:
            if pid != 0:
                self.restore()
        return pid

    def restore(self) -> None:
        for fd, flag in self.own:
            if self.libc.setns(fd, flag) != 0:
                raise Fatal(f"setns: {os.strerror(ctypes.get_errno())}")
        os.chdir("/")


def _send(ctl: socket.socket, msg: dict[str, Any]) -> None:
    try:
        ctl.send(json.dumps(msg).encode())
    except OSError:
        pass  # the backend is gone: the loop sees EOF next


def _load_jail(path: str) -> Any:
    """The jail module, its code named ``/atc/jail.py``: nothing a jail inherits names the install
    path (see ``_child``)."""
    module = types.ModuleType("atc_jail")
    module.__file__ = "/atc/jail.py"
    with open(path) as f:
        exec(compile(f.read(), "/atc/jail.py", "exec"), module.__dict__)
    return module


def _child(jail: Any, argv: list[str], sock_fd: int, report_fd: int, server: int,
           namespaces: Namespaces | None) -> int:
    """In the forked child: a clean process shaped like a freshly started jail, then the jail
    (``jail.main``, or ``jail.forked_pid1`` when the server made the namespaces)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if hasattr(jail, "rename_process"):  # /proc/PID/cmdline: "sandbox", not the server's command line
        jail.rename_process()
    # The server died before the line above (in a new PID namespace the parent's pid reads 0; a
    # jail orphaned there ends anyway when the backend's end of its socket closes).
    if os.getppid() != (0 if namespaces else server):
        return 1
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(report_fd, 1)
    os.dup2(devnull, 0)
    os.dup2(devnull, 2)
    if sock_fd != 3:
        os.dup2(sock_fd, 3)
    os.closerange(4, os.sysconf("SC_OPEN_MAX"))  # the server's namespace descriptors too
    if namespaces is not None:
        jail.forked_pid1([*argv, "--fd", "3"], ["netns", "pidns", "ipcns", "utsns"], namespaces.skeleton)
    return int(jail.main([*argv, "--fd", "3"]))


def _trim_heap() -> None:
    """Give the heap's free pages back to the kernel (glibc), so that forks do not copy them."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except AttributeError:
        pass  # another C library


def serve(control_fd: int, jail_path: str, runner_path: str) -> int:
    jail = _load_jail(jail_path)
    jail.runner_code(runner_path)
    for name in _RUNNER_MODULES:
        __import__(name)
    if hasattr(jail, "preload_runner"):
        jail.preload_runner(runner_path)
    # The runner's code is found under a neutral name, which the jails' arguments then carry.
    cache = getattr(jail, "_RUNNER_CODE", None)
    neutral = isinstance(cache, dict) and runner_path in cache
    if isinstance(cache, dict) and neutral:
        cache[NEUTRAL_RUNNER] = cache.pop(runner_path)
    del jail_path, runner_path
    # Everything loaded so far goes to the permanent generation: a forked child's collections
    # then never touch (and copy) the server's pages.
    namespaces: Namespaces | None = None
    try:
        namespaces = Namespaces(jail)
    except (OSError, AttributeError):
        namespaces = None  # each jail makes its own (not root, or an older jail.py)
    gc.collect()
    gc.freeze()
    _trim_heap()
    ctl = socket.socket(fileno=control_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    live: set[int] = set()
    me = os.getpid()

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in live:
                live.discard(pid)
                _send(ctl, {"op": "exit", "pid": pid, "status": os.waitstatus_to_exitcode(status)})

    try:
        while True:
            ready = select.select([ctl.fileno(), wake_r], [], [])[0]
            if wake_r in ready:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
                reap()
            if ctl.fileno() not in ready:
                continue
            data, fds, _flags, _addr = socket.recv_fds(ctl, _MAX_MESSAGE, 4)
            if not data:
                return 0
            try:
                msg = json.loads(data)
            except ValueError:
                msg = {}
            op = msg.get("op") if isinstance(msg, dict) else None
            if op == "spawn" and len(fds) == 2:
                argv = [str(a) for a in msg.get("argv") or []]
                made = namespaces if namespaces is not None and "--no-namespaces" not in argv else None
                try:
                    try:
                        pid = made.fork() if made is not None else os.fork()
                    except OSError:
                        if made is None:
                            raise
                        made, pid = None, os.fork()  # the kernel refused one of them: the jail tries itself
                except OSError as exc:
                    _send(ctl, {"op": "spawned", "id": msg.get("id"), "error": str(exc)})
                else:
                    if pid == 0:
                        code = 1
                        try:
                            # Nothing of other jails (their pids) and no host path (the request's)
                            # is this jail's business: it could look through its memory.
                            live.clear()
                            if neutral:
                                argv = [NEUTRAL_RUNNER if i and argv[i - 1] == "--runner" else a
                                        for i, a in enumerate(argv)]
                            msg.clear()
                            data = b""
                            code = _child(jail, argv, fds[0], fds[1], me, made)
                        finally:
                            os._exit(code)
                    live.add(pid)
                    _send(ctl, {"op": "spawned", "id": msg.get("id"), "pid": pid})
            elif op == "kill" and msg.get("pid") in live:
                for kill in (os.killpg, os.kill):
                    try:
                        kill(int(msg["pid"]), signal.SIGKILL)
                    except OSError:
                        pass
            for fd in fds:
                os.close(fd)
    finally:
        for pid in live:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


def main(argv: list[str]) -> int:
    opts = {argv[i][2:]: argv[i + 1] for i in range(0, len(argv) - 1, 2)}
    control, jail, runner = int(opts["control"]), opts["jail"], opts["runner"]
    opts.clear()
    argv.clear()  # host paths: a forked jail must find them nowhere
    try:
        return serve(control, jail, runner)
    except Fatal:
        return 1  # every jail was killed on the way out; the backend starts a new server


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
