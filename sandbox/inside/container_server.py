"""The fork server inside a Docker sandbox container: one run at a time, each in namespaces of its own.

STDLIB ONLY: it is mounted read-only into the container (``/atc/server.py``) next to the runner
and the jail (``/atc/jail.py``, whose steps it shares with the local backend) and started as the
container's command, as uid 65534 with no capability at all::

    python3 -I -S /atc/server.py --connect /atc/sock/runner.sock --runner /atc/runner.py
                                 --jail /atc/jail.py --tmpfs-mb T --cpu S --fsize B
                                 [--seccomp HEX --seccomp-name NAME]

It connects to the host (``SOCK_SEQPACKET``, one JSON message per packet) and serves the Docker
backend (``sandbox/docker/cells.py``):

- ``{"op": "hello", "pid": 1, "isolated": bool, "why": str}`` first: ``isolated`` says whether
  runs get namespaces of their own here (below; ``why`` says why not). A container whose runs
  are not isolated is never reused.
- ``{"op": "runner", "pid": R}`` right after ``hello``, and after each run of an ``isolated``
  container ``{"op": "runner", "pid": R, "clean": bool}``, unasked: the next runner, with the
  host's end of its socket attached (SCM_RIGHTS, a ``SOCK_STREAM`` Unix socket pair the server
  made; the runner holds the other end). The runner has sent, or will send, ``ready`` on it and
  waits for ``start`` like any runner. ``R`` is the server's handle of the run (not a process id:
  the server never learns the run's pids, below). ``clean`` says whether the last run is gone --
  its PID 1 reported that it killed and reaped every other process of the run -- and left
  nothing: the container's writable places are empty and its network has no socket in use or
  in ``TIME_WAIT``. After a run that was not clean no runner comes; the backend removes the
  container (as it does after a run that did not end normally: it takes the next runner only
  after a run that did). ``"error"`` instead of ``pid``: no runner could be made. After a run the
  message carries the run's ``exit`` report as ``"ended"`` (one message, one read for the host).
- ``{"op": "renew", "id": N, "cpu": S}`` from the host (isolated containers only): the next runner
  handed over gets S s of CPU time instead of the container's (a session's runner: the host then
  closes the runner it holds, and takes the next as after a run). Answer ``{"op": "renewed", "id":
  N, "ok": bool}`` once that runner is made.
- ``{"op": "exit", "pid": R, "status": S}`` when run ``R`` has ended (``Popen.returncode`` style:
  the runner's exit code, 128 + N for a signal).

**A run in its own namespaces.** Where the kernel lets an unprivileged process make a user
namespace (``isolated``), each run is two processes:

1. the run's *init*, cloned by the template (below) straight into a new user namespace (uid and
   gid 65534 map to themselves) and, owned by it, new mount, network, PID, IPC and UTS
   namespaces: it is PID 1 of the new PID namespace. It builds a new root -- the container's
   read-only image, bound alone (none of the container's mounts come along: not its ``/proc``,
   ``/tmp``, ``/atc`` or ``/etc/hosts``), a fresh ``/tmp`` tmpfs, a ``/dev`` of its own (the
   container's device nodes and a fresh ``/dev/shm``), a ``/proc`` showing the run's processes
   only (``subset=pid``) -- entered with ``pivot_root``, the old root detached; then drops every
   capability, installs the ``atc-v2`` filter (``--seccomp``, compiled on the host) and forks 2.
   When 2 exits it kills every other process of the run, reaps them all, checks that its
   ``/proc`` shows itself alone and only then writes the run's status to a pipe the server reads;
2. the *runner* (PID 2): stdio on ``/dev/null``; it sends ``ready`` on its socket and waits for
   ``start``; then its rlimits (CPU time, file size, open files, no core), ``HOME``, cwd
   ``/tmp``, and the program.

The next run's processes are made while a run runs (a *spare*: in namespaces of its own, out of
the running program's reach), so that the end of a run only hands over a socket whose
``ready`` is already there, before the host asks for the next run. The end of a run costs its
init a wake-up and the server a read; the release of the run's mounts and network (the init's
own exit) is the kernel's business, off every path.

So nothing a run can reach is left for the next one: not its files (its tmpfs goes with its
mount namespace), processes (its PID namespace), sockets, ``TIME_WAIT`` entries, port and SNMP
counters (its network namespace, whose loopback is down), PID counter (``/proc`` and ``getpid``
count from 1 in each run), or the server's own ``/proc/1``.

**Nothing of a run flows back into the next one's memory.** Every run's init is a clone of one
*template* process, forked from the server before the first run and never told anything about a
run: it receives a fixed message with the runner's socket and a status pipe, clones (through
libc's ``syscall``, so that the new process's pid never becomes a Python object in the
template's memory), ignores its children's ends (the kernel reaps them) and goes back to
waiting. What the server learns of runs (their handles, exit statuses) stays in the server,
which never forks a runner.

**Without user namespaces** (a kernel or host policy that refuses them, or Docker's own profile
on an architecture the policy has no profile for) runs are the same two processes without the
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
#: The container network's socket counters (``/proc/net/sockstat`` and ``sockstat6``: sockets in
#: use and in TIME_WAIT, per network namespace); a run has its own network, so they stay at 0.
#: Read instead of the socket tables (``/proc/net/tcp``...), which walk the kernel's whole
#: connection hash -- shared by every network namespace of the host -- on each read: 10-20 ms of
#: CPU per check on a loaded machine, where these cost 0.1 ms.
NET_COUNTERS = ("sockstat", "sockstat6")
#: The counters of ``NET_COUNTERS`` that belong to the namespace (the others are the host's).
NET_OWN = ("inuse", "tw")
_MAX_MESSAGE = 1 << 16
_RUNNER_MODULES = ("builtins", "io", "json", "re", "struct", "threading", "time", "traceback")
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
RUN_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
#: Where the template's root is built: the image's empty ``/mnt``.
NEW_ROOT = "/mnt"
#: Where the skeleton of every run's root is, in the template's root.
RUN_ROOT = "/run"
#: What a run's init writes to the server at its end: the runner's status, and 1 when it saw every
#: other process of the run gone.
_STATUS = struct.Struct("=ii")

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

def map_ids(uid: int, gid: int) -> None:
    """Just after entering a new user namespace: uid ``uid`` and gid ``gid`` (the container's
    65534) map to themselves (an unprivileged process may map its own ids; no setgroups)."""
    # Not dumpable (the server and the template are not), its /proc/self files would belong to
    # root and it could not write its own maps. Out of every run's reach anyway.
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    for name, data in (("setgroups", b"deny"), ("uid_map", b"%d %d 1" % (uid, uid)), ("gid_map", b"%d %d 1" % (gid, gid))):
        fd = os.open("/proc/self/" + name, os.O_WRONLY)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def prepare_template(jail: Any, uid: int, gid: int) -> None:
    """In the template, once: a user namespace of its own (``uid``/``gid`` map to themselves), in
    which it may mount, and a mount namespace in which its root is a small read-only tmpfs holding
    the container's ``/proc`` (bound: the kernel lets a run mount a ``/proc`` of its own only
    where one is fully visible) and the *skeleton* of every run's root at ``RUN_ROOT``: a small
    read-only tmpfs with a read-only bind of the image's ``/usr`` (and its ``bin``, ``lib``...
    links), the container's device nodes, and empty ``/tmp``, ``/dev/shm`` and ``/proc`` on
    which each run mounts its own. A run's mount namespace is a copy of this one -- a dozen
    mounts, not the container's two dozen -- so that a run mounts only what is its own
    (``enter_run_root``). Like the local fork server's skeleton (``jail.build_skeleton``)."""
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare")
    map_ids(uid, gid)
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    top = NEW_ROOT
    _mount("sandbox-top", top, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=16k,nr_inodes=16,mode=755")
    os.mkdir(top + "/proc", 0o755)
    _mount("/proc", top + "/proc", None, MS_BIND | MS_REC)
    root = top + RUN_ROOT
    os.mkdir(root, 0o755)
    _mount("sandbox", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,nr_inodes=64,mode=755")
    binds = jail._populate_root(root, [])
    for place in ("/dev/shm", "/tmp", "/proc"):
        os.mkdir(root + place, 0o755)
    _overlay_system_dirs(jail, root, binds)
    _mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _mount(None, top, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _pivot_into(top)
    os.chdir("/")


def _overlay_system_dirs(jail: Any, root: str, binds: list[tuple[str, str]]) -> None:
    """Each bind of an image directory in the skeleton replaced by a read-only overlay of that
    directory of the template's own (its second, empty layer the skeleton's ``/proc``, which each
    run mounts over later and the overlay does not see). A bind would show the container's root
    mount in every run's ``/proc/self/mountinfo``, whose options are the Docker host's storage
    paths and layer ids; the overlay's are the paths given here. Where the kernel refuses the
    overlay, the bind stays."""
    for host, inside in binds:
        target = root + inside
        _check(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")
        try:
            _mount("atc-system", target, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV,
                   f"lowerdir={host}:{root}/proc")
        except OSError:
            jail.bind_readonly(host, target)


def _pivot_into(root: str) -> None:
    """Make ``root`` (a mount point) this mount namespace's root and detach the old one, with
    everything mounted in it (new_root and put_old the same directory: the old root ends up on
    top of the new one, and goes with the detach)."""
    os.chdir(root)
    _check(_libc.syscall(ctypes.c_long(_PIVOT_ROOT), b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount old root")


def enter_run_root(jail: Any, tmpfs_mb: int, isolation: list[str]) -> None:
    """In the run's init, in its copy of the template's mount namespace: the run's root, entered
    with ``pivot_root``; ends in ``/tmp``.

    The skeleton (``prepare_template``) bound again as a mount of the run's own (the kernel locks
    the mounts of a copy made for a less privileged user namespace, and will not pivot into a
    locked one; the binds inside it stay locked and read-only), with a fresh ``/tmp`` and
    ``/dev/shm`` and a ``/proc`` of the run's processes on it. None of the container's mounts
    comes along (its ``/proc``, ``/tmp``, ``/atc``, ``/etc/hosts``): the old root is detached, so
    they are not even listed in ``/proc/self/mountinfo``."""
    root = RUN_ROOT
    _mount(root, root, None, MS_BIND | MS_REC)
    _mount("sandbox-shm", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
           f"size={tmpfs_mb}m,nr_inodes=4096,mode=1777")
    _mount("sandbox-tmp", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
           f"size={tmpfs_mb}m,nr_inodes=32768,mode=1777")
    jail.mount_proc(root + "/proc", isolation)
    _pivot_into(root)
    os.chdir("/tmp")
    isolation.extend(["mountns", "tmpfs:/tmp:fresh"])


#: pivot_root's and clone's numbers (glibc has no wrapper for the first; the second is called raw
#: so that the C library's fork handling stays out of it): x86_64 155 and 56, aarch64 41 and 220.
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine, -1)
_CLONE = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine, -1)


def end_run() -> bool:
    """In the run's init (PID 1 of the run) once the runner has exited: kill every other process of
    the run and reap them all, then check that the run's ``/proc`` shows this process alone.

    ``kill(-1)`` reaches every process of the run's PID namespace and nothing outside it, and
    orphans come to PID 1, so the reaping ends with the last of them; the kernel would kill them
    anyway once PID 1 exits, but only after this process's descriptors are closed -- the status
    written here is the server's proof that the run is over. False if something stayed."""
    for _ in range(20):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass  # nothing left to signal
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
            except InterruptedError:
                continue
        try:
            if not [name for name in os.listdir("/proc") if name.isdigit() and name != "1"]:
                return True
        except OSError:
            return False
    return False


def init(jail: Any, opts: dict[str, Any], runner: dict[str, Any], isolated: bool, ids: tuple[int, int],
         cpu: int | None = None) -> int:
    """The run's first process (PID 1 of the run's namespaces when ``isolated``; fd 3: the runner's
    socket, fd 4: the status pipe): root, capabilities, filter; then the runner as its child, and
    reap until it exits; then the end of the run and its status on fd 4."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    # A session and process group of its own: the run's kill(0) and killpg reach no process of
    # the container (a process group is not bounded by PID namespaces).
    os.setsid()
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    isolation: list[str] = []
    if isolated:
        map_ids(*ids)
        isolation.append("userns")
        enter_run_root(jail, int(opts["tmpfs-mb"]), isolation)
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
            os.close(4)
            _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
            status = _run_runner(runner, opts, cpu)
        finally:
            os._exit(status)
    os.close(3)
    status = int(jail.namespace_init(program))
    # Without namespaces there is no run of its own to end (kill(-1) would reach the server): the
    # container then serves this run only.
    gone = end_run() if isolated else True
    os.write(4, _STATUS.pack(status, int(gone)))
    return 0


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


def _run_runner(runner: dict[str, Any], opts: dict[str, Any], cpu: int | None) -> int:
    """The runner, on its socket (fd 3): made ahead of its run, it says ``ready`` at once and waits
    for ``start``. ``cpu``: its CPU time when not the container's (a session's)."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    cpu, fsize = int(opts.get("cpu") or 0) if cpu is None else cpu, int(opts.get("fsize") or 1 << 30)
    return int(runner["main"](["--fd", "3"], before_program=lambda: _before_program(cpu, fsize)))


# -- the template: clones runs, knows nothing of them ---------------------------------------------

class _Pid(ctypes.c_long):
    """clone()'s result kept in C memory: a subclass is not turned into a Python int."""


def _clone_blind(pylibc: Any, flags: int) -> str:
    """clone() with ``flags`` (no new stack: like fork) through libc's ``syscall`` with the GIL
    held, the child's pid never becoming a Python object: "child", "parent" or "failed". Neither
    Python's nor the C library's fork hooks run (the template has one thread and holds no lock),
    so the new process does not record its pid either."""
    ctypes.set_errno(0)
    zero = ctypes.c_long(0)
    result = pylibc.syscall(ctypes.c_long(_CLONE), ctypes.c_ulong(flags), zero, zero, zero, zero)
    if not result:
        return "child"
    failed = ctypes.get_errno() != 0
    ctypes.memset(ctypes.addressof(result), 0, ctypes.sizeof(result))
    return "failed" if failed else "parent"


def template(link: socket.socket, jail: Any, opts: dict[str, Any], runner: dict[str, Any], isolated: bool) -> int:
    """Wait for ``b"spawn"`` (or ``b"spawn N"``: a runner with N s of CPU time) with the runner's
    socket and the status pipe's write end, clone a run's init with them (into new namespaces when
    ``isolated``), answer b"1" (or b"0"), close them; until the server goes."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps inits: no status lands here
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    jail.rename_process()
    ids = (os.geteuid(), os.getegid())
    if isolated:
        prepare_template(jail, *ids)
    pylibc = ctypes.PyDLL(None, use_errno=True)
    pylibc.syscall.restype = _Pid
    flags = (RUN_NAMESPACES if isolated else 0) | signal.SIGCHLD
    # Every clone copies the page tables of what this process holds, and each run's two processes
    # release them again: hold as little as possible (measured: each megabyte costs a run about
    # 0.3 ms of CPU).
    gc.collect()
    gc.freeze()
    _libc.malloc_trim(0)
    while True:
        data, fds, _flags, _addr = socket.recv_fds(link, 64, 2)
        if not data:
            return 0
        word, _, number = data.partition(b" ")
        ok = word == b"spawn" and len(fds) == 2 and (not number or number.isdigit())
        if ok:
            how = _clone_blind(pylibc, flags)
            if how == "child":
                status = 1
                try:
                    link.close()
                    os.dup2(fds[0], 3)
                    os.dup2(fds[1], 4)
                    os.closerange(5, os.sysconf("SC_OPEN_MAX"))
                    status = init(jail, opts, runner, isolated, ids, int(number) if number else None)
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


def probe(jail: Any) -> str:
    """Can runs have namespaces here? A child prepares as the template would and clones one run's
    init, which enters its root for nothing; "" when it worked, else why not."""
    if _CLONE < 0 or _PIVOT_ROOT < 0:
        return f"no clone or pivot_root number for {os.uname().machine}"
    read_end, write_end = os.pipe()
    ids = (os.geteuid(), os.getegid())
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(read_end)
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            prepare_template(jail, *ids)
            zero = ctypes.c_long(0)
            run = _libc.syscall(ctypes.c_long(_CLONE), ctypes.c_ulong(RUN_NAMESPACES | signal.SIGCHLD), zero, zero,
                                zero, zero)
            if run == 0:
                try:
                    map_ids(*ids)
                    enter_run_root(jail, 1, [])
                    os._exit(0)
                except BaseException as exc:
                    os.write(write_end, str(exc).encode()[:500])
                    os._exit(1)
            if run < 0:
                raise OSError(ctypes.get_errno(), f"clone: {os.strerror(ctypes.get_errno())}")
            status = 0 if os.waitstatus_to_exitcode(os.waitpid(run, 0)[1]) == 0 else 1
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
    sockets in its network (in use or in TIME_WAIT)."""
    found = []
    for top in WRITABLE:
        try:
            found += [f"{top}/{name}" for name in os.listdir(top)]
        except OSError:
            continue
    for table in NET_COUNTERS:
        try:
            with open(f"/proc/net/{table}") as f:
                found += sockets_in_use(f"/proc/net/{table}", f.read())
        except OSError:
            continue
    return found


def sockets_in_use(where: str, text: str) -> list[str]:
    """The counters of a ``sockstat`` table (``text``) that say a socket of the namespace is in
    use or in ``TIME_WAIT`` ("TCP: inuse 0 orphan 0 tw 0 alloc 35 mem 0": ``inuse`` and ``tw``;
    the others count the whole host's)."""
    found = []
    for row in text.splitlines():
        proto, _, counts = row.partition(":")
        fields = counts.split()
        for name, value in zip(fields[::2], fields[1::2], strict=False):
            if name in NET_OWN and value != "0":
                found.append(f"{where}: {proto} {name} {value}")
    return found


class _Spares:
    """The next runs' processes, made ahead by the template (isolated only: a run cannot reach
    them). Each is the host's end of its runner's socket and its status pipe; ``pending`` ones
    were asked for and not yet acknowledged (the template answers in order)."""

    def __init__(self, link: socket.socket) -> None:
        self.link = link
        self.ready: list[tuple[socket.socket, int]] = []
        self.pending: list[tuple[socket.socket, int]] = []

    def ask(self, cpu: int | None = None) -> bool:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        status_r, status_w = os.pipe()
        try:
            socket.send_fds(self.link, [b"spawn" if cpu is None else b"spawn %d" % cpu], [theirs.fileno(), status_w])
        except OSError:
            ours.close()
            os.close(status_r)
            return False
        finally:
            theirs.close()
            os.close(status_w)
        self.pending.append((ours, status_r))
        return True

    def acknowledged(self) -> None:
        """Read the template's answer for the oldest pending spare."""
        answer = self.link.recv(8)
        if not answer:
            raise SystemExit(1)  # the template died: no run can be started any more
        made = self.pending.pop(0)
        if answer == b"1":
            self.ready.append(made)
        else:
            _close(made)

    def renew(self, cpu: int) -> bool:
        """Replace every spare by one whose runner has ``cpu`` s of CPU time (for a session)."""
        while self.pending:
            self.acknowledged()
        while self.ready:
            _close(self.ready.pop())
        if not self.ask(cpu):
            return False
        self.acknowledged()
        return bool(self.ready)

    def take(self) -> tuple[socket.socket, int] | None:
        """A spare whose init is alive (it writes its pipe only at its end), made now if there is
        none; None if the template could not clone."""
        for _ in range(3):
            while self.ready:
                made = self.ready.pop(0)
                if not select.select([made[1]], [], [], 0)[0]:
                    return made
                _close(made)
            if not self.pending and not self.ask():
                return None
            self.acknowledged()
        return None


def _close(made: tuple[socket.socket, int]) -> None:
    made[0].close()
    os.close(made[1])


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
    why = probe(jail)
    isolated = not why
    me = os.getpid()
    gc.collect()
    gc.freeze()  # a forked runner's collections then do not copy the server's pages
    _libc.malloc_trim(0)  # freed heap given back: every clone copies the page tables of what is left
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
    runs: dict[int, int] = {}  # the status pipe of the live run (at most one), by handle
    handles = iter(range(1, 1 << 62))
    spares = _Spares(link)
    #: A run whose end was not proven (its init died without saying that the run is gone): the
    #: container is then never reported clean again.
    doubt: list[int] = []

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
        """The run's init wrote its status (or died): it writes it once it has killed and reaped
        every other process of the run; its own exit (the release of the run's mounts and
        network) need not be waited for. Then, if runs are isolated, the next runner."""
        fd = runs.pop(handle)
        try:
            data = os.read(fd, _STATUS.size)
        except OSError:
            data = b""
        os.close(fd)
        status, gone = _STATUS.unpack(data) if len(data) == _STATUS.size else (-signal.SIGKILL, 0)
        if not gone:
            doubt.append(handle)
        ended = {"op": "exit", "pid": handle, "status": status}
        if isolated and not runs:
            reap()
            hand_over(not doubt and not _leftovers(), ended)
        else:
            _send(ctl, ended)

    def hand_over(clean: bool | None, ended: dict[str, Any] | None = None) -> None:
        """Give the host the next runner, unasked, its socket attached; ``clean`` after a run (and
        no runner once a run was not), with the run's ``exit`` report."""
        msg: dict[str, Any] = {"op": "runner"}
        if clean is not None:
            msg["clean"] = clean
        if ended is not None:
            msg["ended"] = ended
        made = spares.take() if clean is not False else None
        if made is None:
            if clean is not False:
                msg["error"] = "the container's template could not start a run"
            _send(ctl, msg)
            return
        handle = next(handles)
        runs[handle] = made[1]
        msg["pid"] = handle
        try:
            socket.send_fds(ctl, [json.dumps(msg).encode()], [made[0].fileno()])
        except OSError:
            pass
        made[0].close()
        if isolated:
            spares.ask()  # the next run's processes get ready while this one runs

    _send(ctl, {"op": "hello", "pid": me, "isolated": isolated, "why": why})
    hand_over(None)
    while True:
        ready = select.select([ctl.fileno(), link.fileno(), wake_r, *runs.values()], [], [])[0]
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
            reap()
        if link.fileno() in ready:
            spares.acknowledged()
        for handle, fd in list(runs.items()):
            if fd in ready:
                finish(handle)
        if ctl.fileno() in ready:
            data, fds, _flags, _addr = socket.recv_fds(ctl, _MAX_MESSAGE, 2)
            for fd in fds:  # the host sends none
                os.close(fd)
            if not data:
                return 0  # the backend is gone: the container stops with everything in it
            try:
                msg = json.loads(data)
            except ValueError:
                msg = None
            cpu = msg.get("cpu") if isinstance(msg, dict) and msg.get("op") == "renew" else None
            if isinstance(cpu, int) and not isinstance(cpu, bool) and 0 <= cpu < 1 << 31 and isolated:
                _send(ctl, {"op": "renewed", "id": msg.get("id"), "ok": spares.renew(cpu)})


def main(argv: list[str]) -> int:
    opts = {argv[i][2:]: argv[i + 1] for i in range(0, len(argv) - 1, 2)}
    return serve(opts)


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
