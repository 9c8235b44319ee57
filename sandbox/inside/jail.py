"""The process jail of the local backend: namespaces, a fresh root, a drop of privileges, rlimits.

STDLIB ONLY (it runs under a bare ``python3 -I -S`` with no environment). The local backend
starts::

    python3 -I -S jail.py --fd N --runner RUNNER.py --uid U --memory-mb M --cpu S --nproc P
                          --fsize B --tmpfs-mb T [--cgroup DIR] [--cpu-cgroup DIR]
                          [--no-namespaces] [--seccomp HEX --seccomp-name NAME]
                          [--seccomp-unavailable REASON]

and reads ONE JSON line from the jail's stdout: ``{"pid": int, "isolation": [...]}`` -- ``pid`` is
the host pid of the process that runs the program (the backend kills it directly, besides the
process group) and ``isolation`` lists what is in force; ``"workdir"`` is added when the jail fell
back to running without namespaces and made a work directory itself (the backend removes it).
Then the runner speaks on fd N.

Where the OS allows it (root, or unprivileged user namespaces), the jail

1. unshares mount, network, PID, IPC and UTS namespaces and forks: the child is PID 1 of a new
   PID namespace (when it dies the kernel kills everything the program started) in a network
   namespace with no interface up (no network, not even the host's loopback services), an IPC
   namespace (SysV IPC objects and POSIX message queues die with it) and a UTS namespace (the
   hostname is "sandbox"); it joins the run's cgroups, then enters a cgroup namespace, forks the
   program as PID 2 and only reaps;
2. builds a new root on a size-capped tmpfs holding only read-only binds of ``/usr``, ``/lib*``,
   ``/bin``, ``/sbin`` (and the interpreter's prefix when it lives elsewhere), a fresh ``/proc``
   that shows the sandbox's processes and nothing of the host (``subset=pid``: no kernel command
   line, keys, modules, mounts, sysctls...; where the kernel lacks that option, those entries
   are masked), ``/dev/{null,zero,random,urandom}``, a writable ``/tmp`` and ``/work`` -- no
   ``/sys``, ``/etc``, ``/home``, ``/root``, ``/tmp`` of the host or ``ATC_HOME`` -- and chroots
   into it;
3. as root, drops to the unprivileged ``--uid`` (a distinct uid per sandbox so that
   RLIMIT_NPROC counts this sandbox's processes only); it empties the capability bounding set
   (and, in a user namespace, every capability), sets no-new-privileges and a parent-death
   signal, installs the system-call filter ``--seccomp`` (``sandbox/inside/seccomp.py``; PID 1 already
   runs under it, so nothing in the sandbox is unfiltered), then rlimits (address space, CPU,
   processes, file size, open files, no core dumps);
4. executes the runner's code in this same interpreter (one interpreter start per sandbox).

``pid`` in the report is the namespace's PID 1: killing it ends the whole run.

Without namespaces it only applies the uid drop (when root), the rlimits and the filter, in
``--workdir``.

Each step is a function of its own, so that a fork server can run the per-run ones (namespaces,
root, cgroups, uid, filter, limits) in each forked child. A fork server running as root goes
further (``forked_pid1``): it makes the namespaces around its own fork, so its child is PID 1
at once, and it builds the read-only part of the root once (``build_skeleton``); a jail then
mounts only its own tmpfs and ``/proc``. The tree a program sees is the same either way.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import signal
import sys

TYPE_CHECKING = False  # typing is not imported at run time: every start of a sandbox pays for imports
if TYPE_CHECKING:
    from typing import IO, Any, NoReturn

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 1, 24, 22, 38
PR_SET_DUMPABLE, PR_SET_NAME, PR_SET_MM, PR_SET_MM_MAP = 4, 15, 35, 14
#: What every process of a sandbox is called (``/proc/PID/cmdline``, ``comm``): no host path, no
#: argument of the fork server or the jail (``rename_process``).
PROCESS_NAME = "sandbox"
SECCOMP_MODE_FILTER = 2
LINUX_CAPABILITY_VERSION_3 = 0x20080522
HOSTNAME = b"sandbox"
#: What a full ``/proc`` tells of the host (kernel command line, keys of every uid, modules, file
#: locks, devices, interrupts, sysctls...): masked with /dev/null (files) or an empty read-only
#: tmpfs (directories) where ``subset=pid`` is missing, and in Docker containers.
PROC_MASKED = ("cmdline", "keys", "key-users", "kallsyms", "modules", "config.gz", "kcore", "kmsg", "sysrq-trigger",
               "timer_list", "timer_stats", "sched_debug", "latency_stats", "partitions", "diskstats", "swaps", "iomem",
               "ioports", "interrupts", "devices", "misc", "vmallocinfo", "slabinfo", "zoneinfo", "buddyinfo",
               "pagetypeinfo", "locks", "pressure", "kpagecgroup", "kpagecount", "kpageflags", "mtrr", "sys", "sysvipc",
               "fs", "bus", "irq", "driver", "tty", "acpi", "scsi", "asound")
SYSTEM_DIRS = ("usr", "lib", "lib64", "lib32", "libx32", "bin", "sbin")
DEVICES = ("null", "zero", "random", "urandom")
NEW_ROOT = "/mnt" if os.path.isdir("/mnt") else "/tmp"
TMPFS_INODES = 32768

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source and source.encode(), target.encode(), fstype and fstype.encode(),
                       ctypes.c_ulong(flags), data and data.encode()), f"mount {target}")


def bind_readonly(source: str, target: str) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        open(target, "a").close()
    mount(source, target, None, MS_BIND | MS_REC)
    mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)


def parse(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {"no-namespaces": False}
    i = 0
    while i < len(argv):
        key = argv[i][2:]
        if key == "no-namespaces":
            opts[key] = True
            i += 1
        else:
            opts[key] = argv[i + 1]
            i += 2
    return opts


def _unshare(flags: int) -> bool:
    """unshare(2) with the IPC and UTS namespaces too when the kernel has them (True), else without."""
    if _libc.unshare(flags | CLONE_NEWIPC | CLONE_NEWUTS) == 0:
        return True
    if ctypes.get_errno() != errno.EINVAL:
        _check(-1, "unshare")
    _check(_libc.unshare(flags), "unshare")
    return False


def unshare_namespaces(isolation: list[str]) -> None:
    """Enter new mount/net/pid namespaces, and IPC/UTS ones where the kernel has them (a user
    namespace first when not root); name the host "sandbox" in the UTS namespace."""
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID
    if os.geteuid() != 0:
        uid, gid = os.geteuid(), os.getegid()
        extra = _unshare(flags | CLONE_NEWUSER)
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"0 {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"0 {gid} 1")
        isolation.append("userns")
    else:
        extra = _unshare(flags)
    isolation.extend(["netns", "pidns"])
    if extra:
        _check(_libc.sethostname(HOSTNAME, len(HOSTNAME)), "sethostname")
        isolation.extend(["ipcns", "utsns"])


def enter_cgroup_namespace(isolation: list[str]) -> None:
    """A cgroup namespace rooted at the run's cgroups (join them first): /proc/self/cgroup then
    shows "/" instead of the host's cgroup paths. Skipped where the kernel has none."""
    if _libc.unshare(CLONE_NEWCGROUP) == 0:
        isolation.append("cgroupns")


def in_userns(isolation: list[str]) -> bool:
    """Root only inside our own user namespace: other uids are not mapped there."""
    return "userns" in isolation


#: The system directories bound into the root, as (host path, path in the root); a jail lays a
#: read-only overlay of its own over each (``overlay_system_dirs``).
SYSTEM_BINDS: list[tuple[str, str]] = []


def _populate_root(root: str, python_prefixes: list[str]) -> list[tuple[str, str]]:
    """Read-only binds of the system directories (and the interpreter's prefix when it lives
    elsewhere) and the device nodes in the directory ``root``; returns the binds made."""
    binds = []
    for name in SYSTEM_DIRS:
        host = "/" + name
        if os.path.islink(host):
            os.symlink(os.readlink(host), root + host)
        elif os.path.isdir(host):
            bind_readonly(host, root + host)
            binds.append((host, host))
    for prefix in python_prefixes:
        if not any(prefix == "/" + d or prefix.startswith("/" + d + "/") for d in SYSTEM_DIRS):
            bind_readonly(prefix, root + prefix)
            binds.append((prefix, prefix))
    make_devices(root + "/dev")
    return binds


def make_devices(target: str) -> None:
    """``/dev/{null,zero,random,urandom}`` in ``target``. As root they are nodes of our own, on a
    small read-only tmpfs, so that a lock taken on one (``flock``) stays in the sandbox; without
    the right to make nodes they are binds of the host's, whose inodes the host shares."""
    os.makedirs(target, exist_ok=True)
    try:
        mount("atc-dev", target, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=4k,nr_inodes=16,mode=755")
        for dev in DEVICES:
            st = os.stat("/dev/" + dev)
            os.mknod(target + "/" + dev, 0o20666, st.st_rdev)  # S_IFCHR | rw for everyone
            os.chmod(target + "/" + dev, 0o666)
        mount(None, target, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
        return
    except OSError:
        _libc.umount2(target.encode(), 2)  # MNT_DETACH: back to the bare directory, if mounted
    for dev in DEVICES:
        if os.path.exists("/dev/" + dev):
            open(target + "/" + dev, "a").close()
            mount("/dev/" + dev, target + "/" + dev, None, MS_BIND)


def overlay_system_dirs(root: str, binds: list[tuple[str, str]], empty: str) -> bool:
    """Over each system directory of ``root``, a read-only overlay of the host directory (with the
    empty directory ``empty`` as its second layer, which an overlay without an upper layer needs).
    Its files are the host's, but their inodes are the overlay's, one overlay per jail: a lock on
    a library (``flock``, ``fcntl``) reaches neither the host nor another run. Where the kernel
    refuses an overlay (no overlayfs, or a user namespace before Linux 5.11) the plain read-only
    bind stays; returns whether every directory got one."""
    done = True
    for host, inside in binds:
        try:
            mount("atc-system", root + inside, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV,
                  f"lowerdir={host}:{empty}")
        except OSError:
            done = False
    return done


def _writable_dirs(parent: str, opts: dict[str, Any], isolation: list[str]) -> None:
    """``/tmp`` (sticky, for everyone) and ``/work`` (the run's uid only) in ``parent``."""
    uid = int(opts["uid"])
    for d, mode in (("/tmp", 0o1777), ("/work", 0o700)):
        os.makedirs(parent + d)
        os.chmod(parent + d, mode)
        if not in_userns(isolation):
            os.chown(parent + d, uid, uid)


def build_root(opts: dict[str, Any], isolation: list[str], python_prefixes: list[str]) -> None:
    """The new root filesystem (see the module docstring); ends chrooted in it, cwd /work."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = NEW_ROOT
    # nr_inodes: empty files and directories cost kernel memory that ``size`` does not count.
    mount("atc-sandbox", root, "tmpfs", MS_NOSUID | MS_NODEV,
          "size={}m,nr_inodes={},mode=755".format(opts["tmpfs-mb"], TMPFS_INODES))
    binds = _populate_root(root, python_prefixes)
    # /proc, still an empty directory of the root's tmpfs, is the overlays' empty layer; /proc is
    # then mounted over it, which the overlays do not see.
    os.mkdir(root + "/proc", 0o555)
    if overlay_system_dirs(root, binds, root + "/proc"):
        isolation.append("system-overlay")
    mount_proc(root + "/proc", isolation)
    _writable_dirs(root, opts, isolation)
    os.chroot(root)
    os.chdir("/work")
    isolation.append("mountns")


def build_skeleton(base: str, python_prefixes: list[str]) -> str:
    """For a fork server running as root, in its own private mount namespace: the read-only part
    of every jail's root, built once (a tmpfs on ``base``, remounted read-only, holding the root
    directory with the system binds and device nodes, and an empty ``stage``). Each jail's mount
    namespace is a copy of it, so a jail only mounts what is its own (``enter_skeleton``): about
    twenty mount calls fewer per run. Returns the root directory."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("atc-skeleton", base, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=755")
    root = base + "/root"
    os.mkdir(root, 0o755)
    os.mkdir(base + "/stage", 0o700)
    os.mkdir(base + "/empty", 0o555)
    SYSTEM_BINDS[:] = _populate_root(root, python_prefixes)
    for d in ("proc", "tmp", "work"):
        os.mkdir(root + "/" + d, 0o755)
    mount(None, base, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    return root


def enter_skeleton(opts: dict[str, Any], isolation: list[str], root: str) -> None:
    """In a jail's copy of the skeleton's mount namespace: its own size-capped tmpfs (outside the
    new root, so nothing can reach its top) whose ``tmp`` and ``work`` are bound on the root's
    ``/tmp`` and ``/work``, a fresh ``/proc``; then chroot, cwd /work -- the same tree as
    ``build_root`` builds, with ``/`` read-only."""
    stage = os.path.dirname(root) + "/stage"
    mount("atc-sandbox", stage, "tmpfs", MS_NOSUID | MS_NODEV,
          "size={}m,nr_inodes={},mode=700".format(opts["tmpfs-mb"], TMPFS_INODES))
    _writable_dirs(stage, opts, isolation)
    for d in ("/tmp", "/work"):
        mount(stage + d, root + d, None, MS_BIND)
    if overlay_system_dirs(root, SYSTEM_BINDS, os.path.dirname(root) + "/empty"):
        isolation.append("system-overlay")
    if os.geteuid() == 0 and not in_userns(isolation):
        make_devices(root + "/dev")  # the jail's own nodes, over the skeleton's
    mount_proc(root + "/proc", isolation)
    os.chroot(root)
    os.chdir("/work")
    isolation.append("mountns")


def mount_proc(target: str, isolation: list[str]) -> None:
    """A /proc of the sandbox's PID namespace that shows its processes only (``subset=pid``, Linux
    5.8+); on older kernels a full one with what it would tell of the host masked."""
    os.makedirs(target, exist_ok=True)
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    try:
        mount("proc", target, "proc", flags, "subset=pid")
        isolation.append("proc:pids-only")
        return
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    mount("proc", target, "proc", flags)
    for name in PROC_MASKED:
        path = os.path.join(target, name)
        if os.path.isdir(path) and not os.path.islink(path):
            mount("atc-masked", path, "tmpfs", flags | MS_RDONLY, "size=0")
        elif os.path.exists(path) and not os.path.islink(path):
            mount("/dev/null", path, None, MS_BIND)
    isolation.append("proc:masked")


def join_memory_cgroup(opts: dict[str, Any], isolation: list[str]) -> None:
    """Move this process, and so everything the program will start, into the memory cgroup
    ``--cgroup`` (made by the backend) capped at ``--memory-mb``: RLIMIT_AS caps each process,
    and without a cgroup a program that forks could hold ``nproc`` times the limit. Skipped
    when not given or not writable (then only the rlimits hold)."""
    path = opts.get("cgroup")
    if not path:
        return
    limit = str(int(opts["memory-mb"]) * 1024 * 1024)
    try:
        v2 = os.path.exists(os.path.join(path, "memory.max"))
        settings = ([("memory.max", limit), ("memory.swap.max", "0")] if v2 else
                    [("memory.limit_in_bytes", limit), ("memory.memsw.limit_in_bytes", limit)])
        for name, value in settings:
            if os.path.exists(os.path.join(path, name)):
                with open(os.path.join(path, name), "w") as f:
                    f.write(value)
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write("0")
    except OSError:
        return
    isolation.append("memory-cgroup")


def join_cpu_cgroup(opts: dict[str, Any], isolation: list[str]) -> None:
    """Move this process into the cgroup v1 ``--cpu-cgroup`` capped at one CPU (as the Docker
    backend's containers are): a program that forks must not take every core of the machine."""
    path = opts.get("cpu-cgroup")
    if not path:
        return
    try:
        for name, value in (("cpu.cfs_period_us", "100000"), ("cpu.cfs_quota_us", "100000"), ("cgroup.procs", "0")):
            with open(os.path.join(path, name), "w") as f:
                f.write(value)
    except OSError:
        return
    isolation.append("cpu-cgroup:1")


def drop_privileges(opts: dict[str, Any], isolation: list[str]) -> None:
    """As root: the run's own uid. Then no capabilities at all -- the bounding set emptied first
    (while it may still be changed) so that no exec can bring any back, which matters in a user
    namespace where the program is uid 0 -- and no-new-privileges (also what the filter needs)."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # EINVAL past the last capability; EPERM when not privileged (then we hold none)
    if os.geteuid() == 0 and not in_userns(isolation):
        uid = int(opts["uid"])
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        isolation.append(f"uid:{uid}")
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    _check(_libc.capset(header, (ctypes.c_uint32 * 6)()), "capset")
    isolation.append("caps:none")
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    isolation.append("no-new-privileges")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_seccomp(opts: dict[str, Any], isolation: list[str]) -> None:
    """Install the system-call filter ``--seccomp`` (a classic BPF program, hex; built by
    ``sandbox/inside/seccomp.py``) in this process and so in everything it starts. It goes last: the
    set-up itself needs calls it denies (unshare, mount, chroot). Needs no-new-privileges. When it
    cannot be installed the report says why (``seccomp:unavailable (...)``) and the run goes on;
    the backend decides whether that is acceptable."""
    reason = opts.get("seccomp-unavailable")
    code = opts.get("seccomp")
    if code is not None:
        try:
            program = bytes.fromhex(code)
            if sys.maxsize <= 2**32:
                raise ValueError("a 32-bit interpreter: the filter is for the 64-bit system-call ABI")
            if not program or len(program) % 8:
                raise ValueError("the filter program is malformed")
            buf = ctypes.create_string_buffer(program, len(program))
            fprog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
            _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "prctl(PR_SET_SECCOMP)")
            isolation.append("seccomp:" + str(opts.get("seccomp-name") or "filter"))
            return
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    if reason is not None:
        isolation.append(f"seccomp:unavailable ({reason})")


def set_limits(opts: dict[str, Any], isolation: list[str]) -> None:
    mb = int(opts["memory-mb"])
    limits = [
        (resource.RLIMIT_AS, mb * 1024 * 1024),
        (resource.RLIMIT_CPU, int(opts["cpu"])),
        (resource.RLIMIT_NPROC, int(opts["nproc"])),
        (resource.RLIMIT_FSIZE, int(opts["fsize"])),
        (resource.RLIMIT_NOFILE, 256),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in limits:
        # CPU: soft < hard, so the limit arrives as SIGXCPU (reported as a timeout), not SIGKILL.
        resource.setrlimit(which, (value, value + 1 if which == resource.RLIMIT_CPU else value))
    isolation.append("rlimits")


#: The runner compiled once per process, by path: a fork server (``sandbox/inside/zygote.py``) compiles it
#: before it forks, so that a forked jail only executes it.
_RUNNER_CODE: dict[str, Any] = {}


def runner_code(path: str) -> Any:
    code = _RUNNER_CODE.get(path)
    if code is None:
        with open(path) as f:
            code = _RUNNER_CODE[path] = compile(f.read(), "/atc/runner.py", "exec")
    return code


#: The runner's module body run once, by code object: a fork server (``sandbox/inside/zygote.py``) runs
#: it before it forks (``preload_runner``), so that a forked jail only calls ``main``.
_RUNNER_NAMESPACES: dict[Any, dict[str, Any]] = {}


def preload_runner(path: str) -> None:
    """Define the runner's functions and classes now, once, without serving anything: done in
    every forked jail instead, the module body costs about half a millisecond of CPU and a few
    hundred kB of new objects per run. Its name is ``atc_runner``, as in a Docker container."""
    code = runner_code(path)
    namespace = {"__name__": "atc_runner", "__file__": "/atc/runner.py", "__builtins__": __builtins__}
    exec(code, namespace)
    _RUNNER_NAMESPACES[code] = namespace


def run_runner(code: Any, fd: int) -> None:
    """Serve one program on ``fd`` and exit: the runner's ``main``, preloaded, or the runner run
    as a script (its ``__main__`` block does the same)."""
    sys.argv = ["runner.py", "--fd", str(fd)]
    namespace = _RUNNER_NAMESPACES.get(code)
    if namespace is None:
        exec(code, {"__name__": "__main__", "__file__": "/atc/runner.py", "__builtins__": __builtins__})
        return
    status = 1
    try:
        status = int(namespace["main"](["--fd", str(fd)]))
    finally:  # as the runner's __main__ block: nothing the program left may outlive the result
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        os._exit(status)


class _MmMap(ctypes.Structure):
    """``struct prctl_mm_map`` (``prctl(PR_SET_MM, PR_SET_MM_MAP)``)."""

    _fields_ = [(name, ctypes.c_uint64) for name in (
        "start_code", "end_code", "start_data", "end_data", "start_brk", "brk", "start_stack", "arg_start", "arg_end",
        "env_start", "env_end", "auxv")] + [("auxv_size", ctypes.c_uint32), ("exe_fd", ctypes.c_uint32)]


#: The memory ``/proc/PID/cmdline`` of a renamed process points to (kept alive for its lifetime).
_NAME: list[Any] = []


def rename_process(name: str = PROCESS_NAME) -> str:
    """Make this process (and everything it forks from now on) show ``name`` and nothing else:
    ``comm``, and ``/proc/PID/cmdline`` and ``environ`` -- which would otherwise show the
    interpreter's command line, with the install path and the fork server's or jail's arguments.
    The kernel is pointed at a new argument area (``PR_SET_MM_MAP``, allowed to any process for
    itself) and the old one, on the stack, is zeroed; where that is refused the old area is
    overwritten in place (``cmdline`` then ends in NULs). ``sys.argv`` and ``sys.orig_argv`` say
    ``name`` too. Returns how it was done ("mm-map", "overwritten" or "comm-only")."""
    data = name.encode()
    _libc.prctl(PR_SET_NAME, ctypes.c_char_p(data[:15]), 0, 0, 0)
    sys.argv = [name]
    if hasattr(sys, "orig_argv"):
        sys.orig_argv = [name]
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return "comm-only"

    def field(number: int) -> int:  # man 5 proc numbers the fields from 1; ``fields`` starts at 3
        return int(fields[number - 3])

    arg_start, arg_end, env_start, env_end = field(48), field(49), field(50), field(51)
    if not _NAME:
        _NAME.append(ctypes.create_string_buffer(data))  # NUL-terminated
    start = ctypes.addressof(_NAME[0])
    end = start + len(data) + 1
    _libc.sbrk.restype = ctypes.c_void_p
    brk = _libc.sbrk(ctypes.c_long(0)) or field(47)
    mm = _MmMap(start_code=field(26), end_code=field(27), start_data=field(45), end_data=field(46),
                start_brk=field(47), brk=brk, start_stack=field(28), arg_start=start, arg_end=end, env_start=end,
                env_end=end, auxv=0, auxv_size=0, exe_fd=0xFFFFFFFF)
    if _libc.prctl(PR_SET_MM, PR_SET_MM_MAP, ctypes.byref(mm), ctypes.sizeof(mm), 0) == 0:
        if start != arg_start:  # the first rename of this memory: wipe the original strings
            ctypes.memset(arg_start, 0, arg_end - arg_start)
            if env_end > env_start:
                ctypes.memset(env_start, 0, env_end - env_start)
        return "mm-map"
    if arg_end > arg_start:
        ctypes.memset(arg_start, 0, arg_end - arg_start)
        ctypes.memmove(arg_start, data, min(len(data), arg_end - arg_start - 1))
    return "overwritten"


def quiet_stdio() -> None:
    devnull = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def namespace_init(program: int) -> int:
    """PID 1 of the sandbox: reap every orphan until the program (PID 2) exits, then exit with
    its status -- and the kernel kills whatever is left in the namespace. The program is not
    PID 1 itself because PID 1 ignores signals it has no handler for (SIGXCPU, a program's own
    ``os.kill(os.getpid(), ...)``)."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
        if pid == program:
            return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def namespace_child(opts: dict[str, Any], isolation: list[str], fd: int, write_end: int, report: IO[str] | None,
                    runner_source: Any) -> NoReturn:
    """PID 2: limits, report (one JSON line on ``write_end``), then the runner (never returns)."""
    try:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        set_limits(opts, isolation)
        os.write(write_end, json.dumps({"isolation": isolation}).encode() + b"\n")
    except BaseException as exc:
        os.write(write_end, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode() + b"\n")
        os._exit(1)
    os.close(write_end)
    if report is not None:
        report.close()
    quiet_stdio()
    # Host paths (the runner's, the cgroups') the program must not find in its memory.
    opts.clear()
    _RUNNER_CODE.clear()
    run_runner(runner_source, fd)
    os._exit(0)


def pid1_setup(opts: dict[str, Any], isolation: list[str], prefixes: list[str], skeleton: str | None) -> None:
    """What PID 1 of a new jail does before it forks the program: cgroups, the cgroup namespace,
    the root (built, or entered from the fork server's skeleton), privileges, the filter."""
    join_memory_cgroup(opts, isolation)
    join_cpu_cgroup(opts, isolation)
    enter_cgroup_namespace(isolation)
    if skeleton is None:
        build_root(opts, isolation, prefixes)
    else:
        enter_skeleton(opts, isolation, skeleton)
    drop_privileges(opts, isolation)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    install_seccomp(opts, isolation)


def forked_pid1(argv: list[str], isolation: list[str], skeleton: str) -> NoReturn:
    """PID 1 of a jail that a fork server running as root forked straight into new namespaces
    (``sandbox/inside/zygote.py``: it unshares them itself around the fork and goes back to its own).
    ``isolation`` says which it made. This saves the intermediate process ``main`` needs to
    enter a PID namespace, and uses the server's root skeleton (``build_skeleton``). The
    report line carries no ``pid``: the server told the backend this process's pid."""
    opts = parse(argv)
    argv.clear()
    fd = int(opts["fd"])
    runner_source = runner_code(opts["runner"])
    write_end = os.dup(1)
    try:
        if "utsns" in isolation:
            _check(_libc.sethostname(HOSTNAME, len(HOSTNAME)), "sethostname")
        pid1_setup(opts, isolation, [], skeleton)
        program = os.fork()
    except BaseException as exc:
        os.write(write_end, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode() + b"\n")
        os._exit(1)
    if program == 0:
        namespace_child(opts, isolation, fd, write_end, None, runner_source)
    os.close(write_end)
    os.close(fd)
    quiet_stdio()
    os._exit(namespace_init(program))


def main(argv: list[str]) -> int:
    rename_process()
    opts = parse(argv)
    fd = int(opts["fd"])
    runner_source = runner_code(opts["runner"])
    prefixes = sorted({os.path.realpath(sys.base_prefix), os.path.dirname(os.path.realpath(sys.executable))})
    report = os.fdopen(os.dup(1), "w")
    isolation: list[str] = []
    namespaces = False
    if not opts["no-namespaces"]:
        try:
            unshare_namespaces(isolation)
            namespaces = True
        except OSError:
            isolation = []
    if not namespaces:
        made = {}
        if not opts.get("workdir"):
            # The backend expected namespaces and made no directory: make one, named after the
            # backend's process like the ones it makes, and report it (the backend removes it).
            import tempfile  # lazy: a rare path; the jail's start-up stays as small as it can be

            opts["workdir"] = made["workdir"] = tempfile.mkdtemp(prefix=f"atc-run-{os.getppid()}-")
            if os.geteuid() == 0:
                os.chown(opts["workdir"], int(opts["uid"]), int(opts["uid"]))
        os.chdir(opts["workdir"])
        try:
            join_memory_cgroup(opts, isolation)
            join_cpu_cgroup(opts, isolation)
            drop_privileges(opts, isolation)
            set_limits(opts, isolation)
            install_seccomp(opts, isolation)
        except OSError as exc:
            report.write(json.dumps({"pid": os.getpid(), "error": str(exc), **made}) + "\n")
            return 1
        report.write(json.dumps({"pid": os.getpid(), "isolation": isolation, **made}) + "\n")
        report.close()
        quiet_stdio()
        opts.clear()
        _RUNNER_CODE.clear()
        run_runner(runner_source, fd)
        return 0
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        try:
            pid1_setup(opts, isolation, prefixes, None)
        except BaseException as exc:
            os.write(write_end, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
            os._exit(1)
        program = os.fork()
        if program == 0:
            namespace_child(opts, isolation, fd, write_end, report, runner_source)
        os.close(write_end)
        os.close(fd)
        report.close()
        quiet_stdio()
        os._exit(namespace_init(program))
    os.close(write_end)
    os.close(fd)
    chunks = []
    while True:
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    try:
        info = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        info = {"error": "the jail child reported garbage"}
    info["pid"] = child
    report.write(json.dumps(info) + "\n")
    report.close()
    quiet_stdio()
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    # os._exit: the jail has nothing to flush, and interpreter shutdown would only add latency.
    os._exit(main(sys.argv[1:]))
