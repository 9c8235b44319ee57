"""The fork server inside a Docker sandbox container: one run at a time, each in namespaces of its own.

STDLIB ONLY: it is mounted read-only into the container (``/atc/server.py``) next to the runner
and the jail (``/atc/jail.py``, whose steps it shares with the local backend) and started as the
container's command, as uid 65534 with no capability at all::

    python3 -I -S /atc/server.py --connect /atc/sock/runner.sock --runner /atc/runner.py
                                 --jail /atc/jail.py --tmpfs-mb T --cpu S --fsize B
                                 [--seccomp HEX --seccomp-name NAME]

It connects to the host (``SOCK_SEQPACKET``, one JSON message per packet) and serves the Docker
backend (``sandbox/docker_cells.py``):

- ``{"op": "hello", "pid": 1, "isolated": bool, "why": str}`` first: ``isolated`` says whether
  runs get namespaces of their own here (below; ``why`` says why not). A container whose runs
  are not isolated is never reused.
- ``{"op": "spawn", "id": N}`` with the runner's socket attached (SCM_RIGHTS): start a runner
  (its limits are the container's, from the command line; ``cpu`` and ``fsize`` in the message
  are ignored). It sends ``ready`` and waits for ``start`` like any runner.
  Answer: ``{"op": "spawned", "id": N, "pid": R}`` -- ``R`` is the server's handle of the run
  (not a process id: the server never learns the run's pids, below).
- ``"reset": true`` in a ``spawn`` sent after a run that ended normally: before it starts the
  next runner, the server checks that the last run is gone -- its keeper reported the end of
  the run's PID 1 (so of every process of the run), the container's writable places and its
  network's socket tables are empty -- and answers ``"clean": bool``. The backend removes
  a container that is not clean.
- ``{"op": "exit", "pid": R, "status": S}`` when run ``R`` has ended (``Popen.returncode`` style:
  the runner's exit code, 128 + N for a signal).

**A run in its own namespaces.** Where the kernel lets an unprivileged process make a user
namespace (``isolated``), each run is three processes:

1. a *keeper*, forked by the template (below): it makes a user namespace (uid and gid 65534 map
   to themselves), and in it new mount, network, PID, IPC and UTS namespaces, forks 2, waits for
   it and writes its exit status to a pipe the server reads;
2. the run's *init*, PID 1 of the new PID namespace (when it exits the kernel kills every
   process of the run): a new root -- the container's read-only image, bound alone (none of the
   container's mounts come along: not its ``/proc``, ``/tmp``, ``/atc`` or ``/etc/hosts``), a
   fresh ``/tmp`` tmpfs, a ``/dev`` of its own (the container's device nodes and a fresh
   ``/dev/shm``), a ``/proc`` showing the run's processes only (``subset=pid``) -- entered with
   ``pivot_root``, the old root detached; then every capability dropped and the ``atc-v2``
   filter installed (``--seccomp``, compiled on the host), and it forks 3 and only reaps;
3. the *runner* (PID 2): stdio on ``/dev/null``; it waits for the server to hand it the run's
   socket, sends ``ready`` and waits for ``start``; then its rlimits (CPU time, file size, open
   files, no core), ``HOME``, cwd ``/tmp``, and the program.

The next run's three processes are made while a run runs (a *spare*: in namespaces of its own,
out of the running program's reach), so that a ``spawn`` only hands the spare its socket.

So nothing a run can reach is left for the next one: not its files (its tmpfs goes with its
mount namespace), processes (its PID namespace), sockets, ``TIME_WAIT`` entries, port and SNMP
counters (its network namespace, whose loopback is down), PID counter (``/proc`` and ``getpid``
count from 1 in each run), or the server's own ``/proc/1``.

**Nothing of a run flows back into the next one's memory.** Every runner is a fork of one
*template* process, forked from the server before the first run and never told anything about a
run: it receives a fixed message with the runner's socket and a status pipe, forks (through
libc, so that the new process's pid never becomes a Python object in the template's memory),
ignores its children's ends (the kernel reaps them) and goes back to waiting. What the server
learns of runs (their handles, exit statuses) stays in the server, which never forks a runner.

**Without user namespaces** (a kernel or host policy that refuses them, or Docker's own profile
on an architecture the policy has no profile for) runs are the same three processes without the
namespaces, as uid 65534 like the server, in the container's ``/tmp``; ``isolated`` is false and
the backend uses such a container for one run only.

The server makes its stdio ``/dev/null`` at once: nothing in the container holds the pipes to the
host's container daemon (a program cannot make the daemon read a flood), and it is not dumpable
(a run of the same uid cannot open its ``/proc/1/mem`` or file descriptors).
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RUN_UID = 65534
#: Where uid 65534 can write in the container; checked empty after every run.
WRITABLE = ("/tmp", "/dev/shm", "/dev/mqueue")
#: The container network's socket tables; a run has its own network, so they stay empty.
NET_TABLES = ("tcp", "tcp6", "udp", "udp6", "raw", "raw6")
_MAX_MESSAGE = 1 << 16
_RUNNER_MODULES = ("builtins", "io", "json", "re", "struct", "threading", "time", "traceback")
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
RUN_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
#: Where the run's root is built: the image's empty ``/mnt``.
NEW_ROOT = "/mnt"
_STATUS = struct.Struct("=i")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source and source.encode(), target.encode(), fstype and fstype.encode(),
                       ctypes.c_ulong(flags), data and data.encode()), f"mount {target}")


def _send(ctl: socket.socket, msg: dict[str, Any]) -> None:
    try:
        ctl.send(json.dumps(msg).encode())
    except OSError:
        pass


# -- the processes of one run ---------------------------------------------------------------------

def enter_run_namespaces() -> None:
    """In the keeper: a user namespace in which uid and gid 65534 are themselves (an unprivileged
    process may map its own ids; no setgroups), and new mount, network, PID, IPC and UTS
    namespaces owned by it (the UTS namespace keeps the container's hostname, "sandbox")."""
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(RUN_NAMESPACES), "unshare")
    # The server is not dumpable, and neither would this process be: its /proc/self files would
    # then belong to root, and it could not write its own maps. Out of every run's reach anyway.
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")


def build_run_root(jail: Any, tmpfs_mb: int, isolation: list[str]) -> None:
    """In the run's init: the run's root, entered with ``pivot_root``; ends in ``/tmp``.

    Like the local jail's (``jail.build_root``): a small tmpfs holding a read-only bind of the
    image's ``/usr`` (with its ``bin``, ``lib``... links), ``/dev/{null,zero,random,urandom}`` and a
    fresh ``/dev/shm``, a fresh ``/tmp`` and a ``/proc`` of the run's processes; then read-only.
    None of the container's mounts comes along (its ``/proc``, ``/tmp``, ``/atc``, ``/etc/hosts``):
    the old root is detached, so they are not even listed in ``/proc/self/mountinfo``."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = NEW_ROOT
    _mount("sandbox", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,nr_inodes=64,mode=755")
    jail._populate_root(root, [])
    os.mkdir(root + "/dev/shm", 0o1777)
    _mount("sandbox-shm", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
           f"size={tmpfs_mb}m,nr_inodes=4096,mode=1777")
    os.mkdir(root + "/tmp", 0o1777)
    _mount("sandbox-tmp", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
           f"size={tmpfs_mb}m,nr_inodes=32768,mode=1777")
    jail.mount_proc(root + "/proc", isolation)
    _mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir(root)
    # new_root and put_old the same directory: the old root ends up on top of the new one, and
    # goes with the detach.
    _check(_libc.syscall(ctypes.c_long(_PIVOT_ROOT), b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/tmp")
    isolation.extend(["mountns", "tmpfs:/tmp:fresh"])


#: pivot_root's number (glibc has no wrapper): x86_64 155, aarch64 41.
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine, -1)


def run_init(jail: Any, opts: dict[str, Any], runner: dict[str, Any], isolated: bool) -> int:
    """The run's init (PID 1 of the run's namespaces when ``isolated``): root, capabilities,
    filter; then the runner as its child, and reap until it exits."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    isolation: list[str] = ["userns"] if isolated else []
    if isolated:
        build_run_root(jail, int(opts["tmpfs-mb"]), isolation)
    else:
        os.chdir("/tmp")
    jail.drop_privileges({}, isolation)  # capabilities: none in the user namespace either
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # the program may not write this process's memory
    jail.install_seccomp(opts, isolation)
    jail.quiet_stdio()
    program = os.fork()
    if program == 0:
        status = 1
        try:
            _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
            status = _run_runner(runner, opts)
        finally:
            os._exit(status)
    os.close(3)
    return int(jail.namespace_init(program))


def _before_program(cpu: int, fsize: int) -> None:
    """In the runner, once ``start`` came: the run's rlimits, ``HOME``, cwd /tmp."""
    if cpu > 0:
        # soft < hard: the limit arrives as SIGXCPU (reported as a timeout), not SIGKILL.
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.environ.clear()
    os.environ["HOME"] = "/nonexistent"
    os.chdir("/tmp")


def _run_runner(runner: dict[str, Any], opts: dict[str, Any]) -> int:
    """The runner: made ahead of its run, it first waits for the server to hand it the run's
    socket (on fd 3, a link to the server), which then takes fd 3."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    link = socket.socket(fileno=3)
    _data, fds, _flags, _addr = socket.recv_fds(link, 16, 1)
    if len(fds) != 1:
        return 0  # the server is gone, or dropped this runner
    os.dup2(fds[0], 3)  # closes the link
    os.close(fds[0])
    link.detach()
    cpu, fsize = int(opts.get("cpu") or 0), int(opts.get("fsize") or 1 << 30)
    return int(runner["main"](["--fd", "3"], before_program=lambda: _before_program(cpu, fsize)))


def keeper(jail: Any, opts: dict[str, Any], runner: dict[str, Any], isolated: bool) -> int:
    """The run's first process (fd 3: the runner's link to the server, fd 4: the status pipe): namespaces,
    then the run's init as its child; writes the init's exit status to fd 4."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    os.setsid()
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if isolated:
        enter_run_namespaces()
    init = os.fork()
    if init == 0:
        status = 1
        try:
            os.close(4)
            status = run_init(jail, opts, runner, isolated)
        finally:
            os._exit(status)
    os.close(3)
    while True:
        try:
            _pid, status = os.waitpid(init, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    os.write(4, _STATUS.pack(code if code >= 0 else 128 - code))
    return 0


# -- the template: forks runners, knows nothing of runs ---------------------------------------------

class _Pid(ctypes.c_int):
    """fork()'s result kept in C memory: a subclass is not turned into a Python int."""


def _fork_blind(pylibc: Any) -> str:
    """fork() through libc with the GIL held, the child's pid never becoming a Python object:
    "child", "parent" or "failed". Python's own fork hooks do not run (the template has one
    thread and holds no lock), so the new process does not record its pid either."""
    ctypes.set_errno(0)
    result = pylibc.fork()
    if not result:
        return "child"
    failed = ctypes.get_errno() != 0
    ctypes.memset(ctypes.addressof(result), 0, ctypes.sizeof(result))
    return "failed" if failed else "parent"


def template(link: socket.socket, jail: Any, opts: dict[str, Any], runner: dict[str, Any], isolated: bool) -> int:
    """Wait for ``b"spawn"`` with the runner's link to the server and the status pipe's write
    end, fork a keeper with them, answer b"1" (or b"0"), close them; until the server goes."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps keepers: no status lands here
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    jail.rename_process()
    pylibc = ctypes.PyDLL(None, use_errno=True)
    pylibc.fork.restype = _Pid
    while True:
        data, fds, _flags, _addr = socket.recv_fds(link, 64, 2)
        if not data:
            return 0
        ok = data == b"spawn" and len(fds) == 2
        if ok:
            how = _fork_blind(pylibc)
            if how == "child":
                status = 1
                try:
                    link.close()
                    os.dup2(fds[0], 3)
                    os.dup2(fds[1], 4)
                    os.closerange(5, os.sysconf("SC_OPEN_MAX"))
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    status = keeper(jail, opts, runner, isolated)
                finally:
                    os._exit(status)
            ok = how == "parent"
        for fd in fds:
            os.close(fd)
        link.send(b"1" if ok else b"0")


# -- the server ---------------------------------------------------------------------------------------

def _load(path: str, name: str) -> dict[str, Any]:
    """Run a mounted module's body under its in-container name (``/atc/...``)."""
    with open(path) as f:
        code = compile(f.read(), path, "exec")
    namespace: dict[str, Any] = {"__name__": name, "__file__": path, "__builtins__": __builtins__}
    exec(code, namespace)
    return namespace


class _Module:
    """A mounted module's namespace, read as attributes (``jail.mount_proc``...)."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.__dict__.update(namespace)

    def __getattr__(self, name: str) -> Any:  # for the type checker: the attributes come from the module
        raise AttributeError(name)


def probe(jail: Any, opts: dict[str, Any]) -> str:
    """Can runs have namespaces here? Builds one run's namespaces and root for nothing, in a child;
    "" when it worked, else why not."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(read_end)
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            enter_run_namespaces()
            inner = os.fork()
            if inner == 0:
                try:
                    build_run_root(jail, 1, [])
                    os._exit(0)
                except BaseException as exc:
                    os.write(write_end, str(exc).encode()[:500])
                    os._exit(1)
            status = 0 if os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1]) == 0 else 1
        except BaseException as exc:
            os.write(write_end, str(exc).encode()[:500])
        finally:
            os._exit(status)
    os.close(write_end)
    why = os.read(read_end, 1000).decode(errors="replace")
    os.close(read_end)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return "" if status == 0 else (why or f"the probe exited with {status}")


def _leftovers() -> list[str]:
    """What the container holds that a run could have left: files in its writable places,
    sockets in its network's tables."""
    found = []
    for top in WRITABLE:
        try:
            found += [f"{top}/{name}" for name in os.listdir(top)]
        except OSError:
            continue
    for table in NET_TABLES:
        try:
            with open(f"/proc/net/{table}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        if rows:
            found.append(f"/proc/net/{table}: {len(rows)} sockets")
    return found


def serve(opts: dict[str, Any]) -> int:
    runner = _load(opts["runner"], "atc_runner")
    jail = _Module(_load(opts["jail"], "atc_jail"))
    for name in _RUNNER_MODULES:
        __import__(name)
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    deadline = time.monotonic() + 10
    while True:
        try:
            ctl.connect(opts["connect"])
            break
        except OSError:
            if time.monotonic() > deadline:
                return 1
            time.sleep(0.01)
    jail.quiet_stdio()  # nothing in the container keeps the pipes to the container daemon
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    jail.rename_process()
    why = probe(jail, opts) if _PIVOT_ROOT > 0 else "no pivot_root number for this architecture"
    isolated = not why
    me = os.getpid()
    gc.collect()
    gc.freeze()  # a forked runner's collections then do not copy the server's pages
    link, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    template_pid = os.fork()
    if template_pid == 0:
        status = 1
        try:
            ctl.close()
            link.close()
            status = template(theirs, jail, opts, runner, isolated)
        finally:
            os._exit(status)
    theirs.close()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    runs: dict[int, int] = {}  # the status pipe of each live run, by handle
    handles = iter(range(1, 1 << 62))
    # The next run's processes, made ahead (isolated only: a run cannot reach them): the link its
    # runner waits on for the run's socket, and its status pipe.
    spare: list[tuple[socket.socket, int]] = []

    def make_spare() -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        status_r, status_w = os.pipe()
        socket.send_fds(link, [b"spawn"], [theirs.fileno(), status_w])
        theirs.close()
        os.close(status_w)
        if link.recv(8) == b"1":
            spare.append((ours, status_r))
        else:
            ours.close()
            os.close(status_r)

    def take_spare() -> tuple[socket.socket, int] | None:
        """The spare runner, made now if there is none or it died while waiting."""
        while spare:
            ours, status_r = spare.pop()
            if not select.select([status_r], [], [], 0)[0]:
                return ours, status_r
            ours.close()
            os.close(status_r)
        make_spare()
        return spare.pop() if spare else None

    def reap() -> None:
        """The server is PID 1: orphans of runs without namespaces come here."""
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == template_pid:
                raise SystemExit(1)  # the template died: no runner can be started any more

    def finish(handle: int) -> None:
        """The run's keeper wrote its status (or died). It writes it once it has reaped the run's
        PID 1, whose exit the kernel completes only when every process of the run's PID namespace
        is gone; the keeper's own exit (the release of the run's mounts and network) need not be
        waited for."""
        fd = runs.pop(handle)
        try:
            data = os.read(fd, _STATUS.size)
        except OSError:
            data = b""
        os.close(fd)
        status = _STATUS.unpack(data)[0] if len(data) == _STATUS.size else -signal.SIGKILL
        _send(ctl, {"op": "exit", "pid": handle, "status": status})

    def clean() -> bool:
        """Is the last run gone, leaving nothing behind? Waits up to 3 s for its end. (Runs are
        isolated here: a container whose runs are not is never reset.)"""
        deadline = time.monotonic() + 3
        while True:
            for handle, fd in list(runs.items()):
                if select.select([fd], [], [], 0)[0]:
                    finish(handle)
            reap()
            if not runs and not _leftovers():
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)

    _send(ctl, {"op": "hello", "pid": me, "isolated": isolated, "why": why})
    while True:
        ready = select.select([ctl.fileno(), wake_r, *runs.values()], [], [])[0]
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
            reap()
        for handle, fd in list(runs.items()):
            if fd in ready:
                finish(handle)
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
            if msg.get("reset"):
                reply["clean"] = clean()
            made = take_spare()
            try:
                if made is None:
                    raise OSError("the container's template could not fork")
                socket.send_fds(made[0], [b"go"], [fds[0]])
            except OSError as exc:
                reply["error"] = str(exc)
                if made is not None:
                    os.close(made[1])
            else:
                handle = next(handles)
                runs[handle] = made[1]
                reply["pid"] = handle
            finally:
                if made is not None:
                    made[0].close()
            _send(ctl, reply)
            if isolated and "pid" in reply:
                make_spare()  # the next run's processes get ready while this one runs
        for fd in fds:
            os.close(fd)


def main(argv: list[str]) -> int:
    opts = {argv[i][2:]: argv[i + 1] for i in range(0, len(argv) - 1, 2)}
    return serve(opts)


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
