"""The system-call filter of the sandbox, policy ``atc-v2``: one allow-list, compiled to a classic
BPF program for the local jail and to a seccomp profile for Docker.

A generated program is Python that computes and calls tools through the runner's channel. It needs
files, memory, threads, subprocesses, pipes, Unix sockets, timers and signals -- not the kernel's
administrative or introspective interfaces, which are where kernel exploits and cross-run
channels live. So the policy is an ALLOW-LIST: what CPython, its standard library, threads,
subprocesses and ``/bin/sh`` use (collected by tracing real programs), and nothing else.

What a program gets for a system call that is not allowed:

- ``EPERM`` ("Operation not permitted", a ``PermissionError``) for the calls the sandbox denies on
  purpose (``DENIED``: keyrings, bpf, perf, userfaultfd, io_uring, file watches (inotify,
  fanotify), namespaces, mounts, other processes' memory, SysV IPC and POSIX message queues,
  kernel administration) and for a
  forbidden argument (``ARGUMENT_RULES``: socket families other than Unix/IPv4/IPv6/netlink-route,
  clone/unshare with a namespace flag, personality changes, terminal injection ioctls);
- ``ENOSYS`` ("Function not implemented") for everything else, as an older kernel would answer:
  the C library and Python probe for newer calls this way and fall back (``clone3`` -> ``clone``).

Nothing is killed: a program gets a clean Python error it can report. Foreign ABIs (i386 through
``int 0x80``, x32) get ENOSYS from the local filter; Docker's runtime (libseccomp) kills a process
that uses one (no Python program does).

The module is STDLIB ONLY, imports nothing of the project and is pure; each backend compiles the
BPF program once per process and hands the bytes to ``sandbox/inside/jail.py`` (the local jail) or to
the container's fork server (``sandbox/inside/container_server.py``), which install them
(``prctl(PR_SET_SECCOMP)``) as the last step of a run's set-up. In Docker the container's own
profile (``docker_profile``) is the outer wall around that. ``docs/security.md`` lists the policy
in words.

The system-call numbers at the end are facts of the Linux ABI, taken from the kernel's UAPI
headers: ``asm/unistd_64.h`` for x86_64 and ``asm-generic/unistd.h`` (with arm64's
``__ARCH_WANT_*`` choices: renameat, new stat, get/setrlimit, clone3, memfd_secret) for aarch64,
plus the numbers every architecture shares since Linux 6.5 (451-467), which older headers lack.
``tests/sandbox/test_seccomp.py`` checks them against the headers of the machine when it has them.
"""

from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass
from typing import Any

__all__ = ["NAME", "ALLOWED", "DENIED", "PROBED", "SETUP_ALLOWED", "ARGUMENT_RULES", "Cond", "ArgRule", "Arch", "UnsupportedArch",
           "arch_of", "compile_filter", "docker_profile", "decision", "table", "X32_SYSCALL_BIT"]

#: The policy's name in isolation reports ("seccomp:atc-v2"). Bump it when the policy changes.
NAME = "atc-v2"

_GROUPS_ALLOWED: dict[str, tuple[str, ...]] = {
    "files": (
        "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
        "open", "openat", "openat2", "creat", "close", "close_range", "lseek", "stat", "fstat", "lstat",
        "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2", "getdents", "getdents64",
        "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "rename", "renameat", "renameat2", "link",
        "linkat", "unlink", "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat", "chmod", "fchmod",
        "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "umask", "truncate", "ftruncate",
        "fallocate", "fadvise64", "readahead", "utime", "utimes", "utimensat", "futimesat", "fsync", "fdatasync",
        "sync", "syncfs", "sync_file_range", "flock", "fcntl", "dup", "dup2", "dup3", "pipe", "pipe2", "mknod",
        "mknodat", "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr", "setxattr",
        "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "sendfile", "copy_file_range",
        "splice", "tee", "memfd_create",
    ),
    "memory": (
        "mmap", "munmap", "mprotect", "mremap", "brk", "madvise", "mincore", "msync", "mlock", "mlock2", "munlock",
        "mlockall", "munlockall", "pkey_alloc", "pkey_free", "pkey_mprotect", "membarrier", "get_mempolicy",
        "set_mempolicy", "mbind", "map_shadow_stack", "mseal",
    ),
    "processes": (
        "fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid", "kill", "tkill", "tgkill",
        "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal", "getpid", "getppid", "gettid",
        "getpgid", "setpgid", "getpgrp", "getsid", "setsid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
        "getresgid", "getgroups", "setgroups", "setuid", "setgid", "setreuid", "setregid", "setresuid",
        "setresgid", "setfsuid", "setfsgid", "capget", "capset", "prctl", "arch_prctl", "set_tid_address",
        "set_robust_list", "get_robust_list", "rseq", "sched_yield", "sched_getaffinity", "sched_setaffinity",
        "sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler", "sched_get_priority_max",
        "sched_get_priority_min", "sched_rr_get_interval", "sched_getattr", "sched_setattr", "getpriority",
        "setpriority", "ioprio_get", "ioprio_set", "getrlimit", "setrlimit", "prlimit64", "getrusage", "times",
        "futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue", "restart_syscall",
    ),
    "signals and time": (
        "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait", "rt_sigsuspend",
        "sigaltstack", "pause", "alarm", "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres",
        "gettimeofday", "time", "getitimer", "setitimer", "timer_create", "timer_settime", "timer_gettime",
        "timer_getoverrun", "timer_delete", "timerfd_create", "timerfd_settime", "timerfd_gettime", "signalfd",
        "signalfd4", "eventfd", "eventfd2", "select", "pselect6", "poll", "ppoll", "epoll_create", "epoll_create1",
        "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
    ),
    "sockets": (
        "bind", "connect", "listen", "accept", "accept4", "getsockname", "getpeername", "sendto", "recvfrom",
        "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "setsockopt", "getsockopt",
    ),
    "system information": ("uname", "sysinfo", "getrandom", "getcpu"),
}
#: Allowed whatever the arguments.
ALLOWED: frozenset[str] = frozenset(name for names in _GROUPS_ALLOWED.values() for name in names)

#: Denied on purpose with EPERM: reason -> system calls.
DENIED: dict[str, tuple[str, ...]] = {
    "kernel keyrings (keys outlive the run and are shared by every process of a uid)":
        ("add_key", "request_key", "keyctl"),
    "kernel attack surface a program never needs":
        ("bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register"),
    "watching files (inotify, fanotify): the system directories are shared with the host and other runs, so a "
    "watch would see what they open":
        ("inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch", "fanotify_init", "fanotify_mark"),
    "namespaces and mounts (the jail's view of the system is fixed)":
        ("setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "open_tree_attr",
         "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr"),
    "other processes' memory and descriptors":
        ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
         "process_mrelease", "migrate_pages", "move_pages"),
    "SysV IPC and POSIX message queues (kernel objects that outlive a run)":
        ("shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget", "msgsnd",
         "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr"),
    "administration of the machine":
        ("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon",
         "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "syslog", "sethostname",
         "setdomainname", "quotactl", "quotactl_fd", "lookup_dcookie", "nfsservctl", "vhangup", "iopl", "ioperm",
         "modify_ldt", "uselib", "open_by_handle_at", "name_to_handle_at"),
}

#: What the Docker profile allows besides the policy, for the container's fork server alone: it
#: gives each run its own user, mount, network, PID, IPC and UTS namespaces and root
#: (``sandbox/inside/container_server.py``: ``clone`` with namespace flags makes a run's PID 1 in one
#: step; ``unshare`` with them could make the same namespaces, with a process more). Every
#: process of a run then installs the policy's BPF filter itself (``compile_filter``) before any
#: program code runs, and stacked filters take the strictest answer, so a program still gets
#: exactly the policy.
SETUP_ALLOWED: tuple[str, ...] = ("clone", "unshare", "mount", "umount2", "pivot_root")

#: Answered with ENOSYS although the kernel has them: the C library probes for them and falls back
#: (clone3 takes its flags in memory, where a filter cannot check them; glibc then uses clone).
PROBED: frozenset[str] = frozenset({"clone3"})

_NS_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
_FULL = 0xFFFFFFFF
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, NETLINK_ROUTE = 1, 2, 10, 16, 0


@dataclass(frozen=True)
class Cond:
    """``(low 32 bits of argument arg) & mask == value``. Every argument checked here is an ``int``
    (or, for clone/unshare, has all the bits that matter in its low half), and the kernel itself
    looks at the low 32 bits only, so upper bits can neither hide nor fake a match."""

    arg: int
    value: int
    mask: int = _FULL


@dataclass(frozen=True)
class ArgRule:
    """A system call allowed depending on its arguments: EPERM when any ``deny`` condition holds;
    otherwise allowed when ``allow`` is None or when every condition of one of its alternatives
    holds; otherwise EPERM."""

    syscall: str
    why: str
    allow: tuple[tuple[Cond, ...], ...] | None = None
    deny: tuple[Cond, ...] = ()


ARGUMENT_RULES: tuple[ArgRule, ...] = (
    ArgRule("socket", "address families: Unix, IPv4, IPv6 (the network namespace has no route out) and "
            "netlink-route (getaddrinfo, if_nameindex); no vsock, packet, other netlink, alg, bluetooth...",
            allow=((Cond(0, AF_UNIX),), (Cond(0, AF_INET),), (Cond(0, AF_INET6),),
                   (Cond(0, AF_NETLINK), Cond(2, NETLINK_ROUTE)))),
    ArgRule("socketpair", "Unix socket pairs only", allow=((Cond(0, AF_UNIX),),)),
    ArgRule("clone", "threads and processes, no new namespaces", allow=((Cond(0, 0, _NS_FLAGS),),)),
    ArgRule("unshare", "no new namespaces", allow=((Cond(0, 0, _NS_FLAGS | 0x80),),)),
    ArgRule("personality", "query or the default personality only (no READ_IMPLIES_EXEC, no ADDR_NO_RANDOMIZE)",
            allow=tuple((Cond(0, v),) for v in (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF))),
    ArgRule("ioctl", "no TIOCSTI/TIOCLINUX/TIOCSETD (typing into a terminal, line disciplines)",
            deny=(Cond(1, 0x5412), Cond(1, 0x541C), Cond(1, 0x5423))),
)


class UnsupportedArch(ValueError):
    """No filter for this machine (the jail then reports ``seccomp:unavailable``)."""


@dataclass(frozen=True)
class Arch:
    name: str
    audit: int  # AUDIT_ARCH_*: the arch field of seccomp_data
    docker: str  # libseccomp's name
    x32: bool  # x86_64: refuse the x32 ABI's numbers


_ARCHES = {
    "x86_64": Arch("x86_64", 0xC000003E, "SCMP_ARCH_X86_64", True),
    "aarch64": Arch("aarch64", 0xC00000B7, "SCMP_ARCH_AARCH64", False),
}
_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


def arch_of(machine: str | None = None) -> Arch:
    """The filter's architecture for ``machine`` (``uname -m``; default this machine's)."""
    machine = (machine or platform.machine()).lower()
    arch = _ARCHES.get(_ALIASES.get(machine, machine))
    if arch is None:
        raise UnsupportedArch(f"no system-call filter for the {machine or 'unknown'} architecture")
    return arch


# -- what each system call gets ------------------------------------------------------------------

RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
_RULES = {rule.syscall: rule for rule in ARGUMENT_RULES}


def decision(name: str) -> str | int | ArgRule:
    """"allow", an errno to return, or the ArgRule deciding by arguments."""
    if name in _RULES:
        return _RULES[name]
    if name in ALLOWED:
        return "allow"
    if any(name in names for names in DENIED.values()):
        return errno.EPERM
    return errno.ENOSYS


# -- the classic BPF program ----------------------------------------------------------------------

_LD_W_ABS, _ALU_AND_K, _RET_K = 0x20, 0x54, 0x06
_JA, _JEQ, _JGE = 0x05, 0x15, 0x35
_OFF_NR, _OFF_ARCH, _OFF_ARGS = 0, 4, 16
_MAX_INSNS = 4096


class _Asm:
    """Instructions with symbolic, forward-only jump targets."""

    def __init__(self) -> None:
        self.items: list[str | tuple[int, int | str, int | str, int | str]] = []

    def label(self, name: str) -> None:
        self.items.append(name)

    def op(self, code: int, k: int | str = 0, jt: int | str = 0, jf: int | str = 0) -> None:
        self.items.append((code, jt, jf, k))

    @staticmethod
    def _offset(where: dict[str, int], target: int | str, pc: int, limit: int) -> int:
        off = where[target] - pc - 1 if isinstance(target, str) else target
        if not 0 <= off <= limit:
            raise ValueError(f"jump out of range at instruction {pc}: {off}")
        return off

    def assemble(self) -> bytes:
        where: dict[str, int] = {}
        count = 0
        for item in self.items:
            if isinstance(item, str):
                where[item] = count
            else:
                count += 1
        if count > _MAX_INSNS:
            raise ValueError(f"the filter has {count} instructions, the kernel takes {_MAX_INSNS}")
        out: list[bytes] = []
        for item in self.items:
            if isinstance(item, str):
                continue
            code, jt, jf, k = item
            pc = len(out)
            if code == _JA:
                k = self._offset(where, k, pc, _MAX_INSNS)
            elif code & 0x07 == 0x05:  # conditional jumps: 8-bit offsets
                jt, jf = self._offset(where, jt, pc, 255), self._offset(where, jf, pc, 255)
            assert isinstance(k, int) and isinstance(jt, int) and isinstance(jf, int)
            out.append(struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF))
        return b"".join(out)


def _segments(numbers: dict[str, int]) -> list[tuple[int, str | int | ArgRule]]:
    """(first number, decision) runs covering 0..: neighbouring numbers with the same plain decision
    are merged, so the search tree stays small."""
    by_nr: dict[int, str | int | ArgRule] = {}
    for name, nr in numbers.items():
        by_nr[nr] = decision(name)
    top = max(by_nr) + 1
    segments: list[tuple[int, str | int | ArgRule]] = []
    for nr in range(top + 1):
        d = by_nr.get(nr, errno.ENOSYS)
        if segments and not isinstance(d, ArgRule) and segments[-1][1] == d:
            continue
        segments.append((nr, d))
    return segments


def _leaf(asm: _Asm, d: str | int | ArgRule) -> None:
    if isinstance(d, ArgRule):
        asm.op(_JA, k=f"rule:{d.syscall}")
    elif d == "allow":
        asm.op(_RET_K, RET_ALLOW)
    else:
        assert isinstance(d, int)
        asm.op(_RET_K, RET_ERRNO | d)


def _tree(asm: _Asm, segments: list[tuple[int, str | int | ArgRule]], counter: list[int]) -> None:
    """A binary search on the system-call number (in the accumulator) over ``segments``."""
    if len(segments) == 1:
        _leaf(asm, segments[0][1])
        return
    mid = len(segments) // 2
    counter[0] += 1
    right = f"right:{counter[0]}"
    asm.op(_JGE, segments[mid][0], jt=0, jf=1)
    asm.op(_JA, k=right)
    _tree(asm, segments[:mid], counter)
    asm.label(right)
    _tree(asm, segments[mid:], counter)


def _check(asm: _Asm, cond: Cond, *, on_match: int | str, on_miss: int | str) -> None:
    asm.op(_LD_W_ABS, _OFF_ARGS + 8 * cond.arg)  # the low half (little-endian machines only)
    if cond.mask != _FULL:
        asm.op(_ALU_AND_K, cond.mask)
    asm.op(_JEQ, cond.value, jt=on_match, jf=on_miss)


def _rule(asm: _Asm, rule: ArgRule) -> None:
    deny = f"deny:{rule.syscall}"
    asm.label(f"rule:{rule.syscall}")
    for cond in rule.deny:
        _check(asm, cond, on_match=deny, on_miss=0)
    if rule.allow is None:
        asm.op(_RET_K, RET_ALLOW)
    else:
        for i, alternative in enumerate(rule.allow):
            miss = f"alt:{rule.syscall}:{i}"
            for cond in alternative:
                _check(asm, cond, on_match=0, on_miss=miss)
            asm.op(_RET_K, RET_ALLOW)
            asm.label(miss)
    asm.label(deny)
    asm.op(_RET_K, RET_ERRNO | errno.EPERM)


def compile_filter(machine: str | None = None) -> bytes:
    """The policy as a classic BPF program for ``machine``: ``struct sock_filter`` entries, ready
    for ``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &sock_fprog)``. Raises ``UnsupportedArch``."""
    arch = arch_of(machine)
    numbers = table(arch.name)
    asm = _Asm()
    asm.op(_LD_W_ABS, _OFF_ARCH)
    asm.op(_JEQ, arch.audit, jt=1, jf=0)
    asm.op(_RET_K, RET_ERRNO | errno.ENOSYS)  # a foreign ABI (int 0x80 on x86_64): numbers mean other calls
    asm.op(_LD_W_ABS, _OFF_NR)
    if arch.x32:
        asm.op(_JGE, X32_SYSCALL_BIT, jt=0, jf=1)
        asm.op(_RET_K, RET_ERRNO | errno.ENOSYS)
    _tree(asm, _segments(numbers), [0])
    for rule in ARGUMENT_RULES:
        if rule.syscall in numbers:
            _rule(asm, rule)
    return asm.assemble()


# -- the Docker profile ---------------------------------------------------------------------------

def _docker_arg(cond: Cond) -> dict[str, Any]:
    # MASKED_EQ with a 32-bit mask: like the kernel, look at the low half only.
    return {"index": cond.arg, "value": cond.mask, "valueTwo": cond.value, "op": "SCMP_CMP_MASKED_EQ"}


def docker_profile(machine: str | None = None) -> dict[str, Any]:
    """The Docker seccomp profile of a sandbox container (``security_opt=["seccomp=" + json.dumps(profile)]``):
    the policy, plus ``SETUP_ALLOWED`` (``clone`` and ``unshare`` with any flags, ``mount``,
    ``umount2``, ``pivot_root``) for the container's fork server, which makes each run's namespaces and root.

    It is the container's outer wall and replaces Docker's default profile, which on Docker 20.10
    still allows io_uring, every socket family (vsock, netlink) and SysV IPC. A run's processes
    are under the policy itself as well: each run installs ``compile_filter``'s program before
    any program code runs, and the stricter of two stacked filters decides (so the set-up calls
    get EPERM there). libseccomp's own choices in this profile: ioctl is allowed whole (a
    container has no terminal to inject into) and a call refused for its arguments gets the
    default ENOSYS."""
    arch = arch_of(machine)
    numbers = table(arch.name)
    setup = {n for n in SETUP_ALLOWED if n in numbers}
    plain = sorted(n for n in ALLOWED | setup if n in numbers and (n not in _RULES or n in setup))
    denied = sorted(n for names in DENIED.values() for n in names if n in numbers and n not in setup)
    syscalls: list[dict[str, Any]] = [
        {"names": plain, "action": "SCMP_ACT_ALLOW"},
        {"names": denied, "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM},
        {"names": sorted(PROBED), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS},
    ]
    for rule in ARGUMENT_RULES:
        if rule.syscall not in numbers or rule.syscall in setup:
            continue
        if rule.allow is None:
            syscalls.append({"names": [rule.syscall], "action": "SCMP_ACT_ALLOW"})
            continue
        for alternative in rule.allow:
            syscalls.append({"names": [rule.syscall], "action": "SCMP_ACT_ALLOW",
                             "args": [_docker_arg(c) for c in alternative]})
    return {"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": errno.ENOSYS, "architectures": [arch.docker],
            "syscalls": syscalls}


# -- system-call numbers ----------------------------------------------------------------------------

#: x86_64 system calls with this bit set are the x32 ABI's (same arch field, other semantics).
X32_SYSCALL_BIT = 0x40000000

_X86_64 = """
read:0 write:1 open:2 close:3 stat:4 fstat:5 lstat:6 poll:7 lseek:8 mmap:9 mprotect:10 munmap:11
brk:12 rt_sigaction:13 rt_sigprocmask:14 rt_sigreturn:15 ioctl:16 pread64:17 pwrite64:18 readv:19
writev:20 access:21 pipe:22 select:23 sched_yield:24 mremap:25 msync:26 mincore:27 madvise:28
shmget:29 shmat:30 shmctl:31 dup:32 dup2:33 pause:34 nanosleep:35 getitimer:36 alarm:37 setitimer:38
getpid:39 sendfile:40 socket:41 connect:42 accept:43 sendto:44 recvfrom:45 sendmsg:46 recvmsg:47
shutdown:48 bind:49 listen:50 getsockname:51 getpeername:52 socketpair:53 setsockopt:54
getsockopt:55 clone:56 fork:57 vfork:58 execve:59 exit:60 wait4:61 kill:62 uname:63 semget:64
semop:65 semctl:66 shmdt:67 msgget:68 msgsnd:69 msgrcv:70 msgctl:71 fcntl:72 flock:73 fsync:74
fdatasync:75 truncate:76 ftruncate:77 getdents:78 getcwd:79 chdir:80 fchdir:81 rename:82 mkdir:83
rmdir:84 creat:85 link:86 unlink:87 symlink:88 readlink:89 chmod:90 fchmod:91 chown:92 fchown:93
lchown:94 umask:95 gettimeofday:96 getrlimit:97 getrusage:98 sysinfo:99 times:100 ptrace:101
getuid:102 syslog:103 getgid:104 setuid:105 setgid:106 geteuid:107 getegid:108 setpgid:109
getppid:110 getpgrp:111 setsid:112 setreuid:113 setregid:114 getgroups:115 setgroups:116
setresuid:117 getresuid:118 setresgid:119 getresgid:120 getpgid:121 setfsuid:122 setfsgid:123
getsid:124 capget:125 capset:126 rt_sigpending:127 rt_sigtimedwait:128 rt_sigqueueinfo:129
rt_sigsuspend:130 sigaltstack:131 utime:132 mknod:133 uselib:134 personality:135 ustat:136
statfs:137 fstatfs:138 sysfs:139 getpriority:140 setpriority:141 sched_setparam:142
sched_getparam:143 sched_setscheduler:144 sched_getscheduler:145 sched_get_priority_max:146
sched_get_priority_min:147 sched_rr_get_interval:148 mlock:149 munlock:150 mlockall:151
munlockall:152 vhangup:153 modify_ldt:154 pivot_root:155 _sysctl:156 prctl:157 arch_prctl:158
adjtimex:159 setrlimit:160 chroot:161 sync:162 acct:163 settimeofday:164 mount:165 umount2:166
swapon:167 swapoff:168 reboot:169 sethostname:170 setdomainname:171 iopl:172 ioperm:173
create_module:174 init_module:175 delete_module:176 get_kernel_syms:177 query_module:178
quotactl:179 nfsservctl:180 getpmsg:181 putpmsg:182 afs_syscall:183 tuxcall:184 security:185
gettid:186 readahead:187 setxattr:188 lsetxattr:189 fsetxattr:190 getxattr:191 lgetxattr:192
fgetxattr:193 listxattr:194 llistxattr:195 flistxattr:196 removexattr:197 lremovexattr:198
fremovexattr:199 tkill:200 time:201 futex:202 sched_setaffinity:203 sched_getaffinity:204
set_thread_area:205 io_setup:206 io_destroy:207 io_getevents:208 io_submit:209 io_cancel:210
get_thread_area:211 lookup_dcookie:212 epoll_create:213 epoll_ctl_old:214 epoll_wait_old:215
remap_file_pages:216 getdents64:217 set_tid_address:218 restart_syscall:219 semtimedop:220
fadvise64:221 timer_create:222 timer_settime:223 timer_gettime:224 timer_getoverrun:225
timer_delete:226 clock_settime:227 clock_gettime:228 clock_getres:229 clock_nanosleep:230
exit_group:231 epoll_wait:232 epoll_ctl:233 tgkill:234 utimes:235 vserver:236 mbind:237
set_mempolicy:238 get_mempolicy:239 mq_open:240 mq_unlink:241 mq_timedsend:242 mq_timedreceive:243
mq_notify:244 mq_getsetattr:245 kexec_load:246 waitid:247 add_key:248 request_key:249 keyctl:250
ioprio_set:251 ioprio_get:252 inotify_init:253 inotify_add_watch:254 inotify_rm_watch:255
migrate_pages:256 openat:257 mkdirat:258 mknodat:259 fchownat:260 futimesat:261 newfstatat:262
unlinkat:263 renameat:264 linkat:265 symlinkat:266 readlinkat:267 fchmodat:268 faccessat:269
pselect6:270 ppoll:271 unshare:272 set_robust_list:273 get_robust_list:274 splice:275 tee:276
sync_file_range:277 vmsplice:278 move_pages:279 utimensat:280 epoll_pwait:281 signalfd:282
timerfd_create:283 eventfd:284 fallocate:285 timerfd_settime:286 timerfd_gettime:287 accept4:288
signalfd4:289 eventfd2:290 epoll_create1:291 dup3:292 pipe2:293 inotify_init1:294 preadv:295
pwritev:296 rt_tgsigqueueinfo:297 perf_event_open:298 recvmmsg:299 fanotify_init:300
fanotify_mark:301 prlimit64:302 name_to_handle_at:303 open_by_handle_at:304 clock_adjtime:305
syncfs:306 sendmmsg:307 setns:308 getcpu:309 process_vm_readv:310 process_vm_writev:311 kcmp:312
finit_module:313 sched_setattr:314 sched_getattr:315 renameat2:316 seccomp:317 getrandom:318
memfd_create:319 kexec_file_load:320 bpf:321 execveat:322 userfaultfd:323 membarrier:324 mlock2:325
copy_file_range:326 preadv2:327 pwritev2:328 pkey_mprotect:329 pkey_alloc:330 pkey_free:331
statx:332 io_pgetevents:333 rseq:334 pidfd_send_signal:424 io_uring_setup:425 io_uring_enter:426
io_uring_register:427 open_tree:428 move_mount:429 fsopen:430 fsconfig:431 fsmount:432 fspick:433
pidfd_open:434 clone3:435 close_range:436 openat2:437 pidfd_getfd:438 faccessat2:439
process_madvise:440 epoll_pwait2:441 mount_setattr:442 quotactl_fd:443 landlock_create_ruleset:444
landlock_add_rule:445 landlock_restrict_self:446 memfd_secret:447 process_mrelease:448
futex_waitv:449 set_mempolicy_home_node:450 cachestat:451 fchmodat2:452 map_shadow_stack:453
futex_wake:454 futex_wait:455 futex_requeue:456 statmount:457 listmount:458 lsm_get_self_attr:459
lsm_set_self_attr:460 lsm_list_modules:461 mseal:462 setxattrat:463 getxattrat:464 listxattrat:465
removexattrat:466 open_tree_attr:467
"""

_AARCH64 = """
io_setup:0 io_destroy:1 io_submit:2 io_cancel:3 io_getevents:4 setxattr:5 lsetxattr:6 fsetxattr:7
getxattr:8 lgetxattr:9 fgetxattr:10 listxattr:11 llistxattr:12 flistxattr:13 removexattr:14
lremovexattr:15 fremovexattr:16 getcwd:17 lookup_dcookie:18 eventfd2:19 epoll_create1:20
epoll_ctl:21 epoll_pwait:22 dup:23 dup3:24 fcntl:25 inotify_init1:26 inotify_add_watch:27
inotify_rm_watch:28 ioctl:29 ioprio_set:30 ioprio_get:31 flock:32 mknodat:33 mkdirat:34 unlinkat:35
symlinkat:36 linkat:37 renameat:38 umount2:39 mount:40 pivot_root:41 nfsservctl:42 statfs:43
fstatfs:44 truncate:45 ftruncate:46 fallocate:47 faccessat:48 chdir:49 fchdir:50 chroot:51 fchmod:52
fchmodat:53 fchownat:54 fchown:55 openat:56 close:57 vhangup:58 pipe2:59 quotactl:60 getdents64:61
lseek:62 read:63 write:64 readv:65 writev:66 pread64:67 pwrite64:68 preadv:69 pwritev:70 sendfile:71
pselect6:72 ppoll:73 signalfd4:74 vmsplice:75 splice:76 tee:77 readlinkat:78 newfstatat:79 fstat:80
sync:81 fsync:82 fdatasync:83 sync_file_range:84 timerfd_create:85 timerfd_settime:86
timerfd_gettime:87 utimensat:88 acct:89 capget:90 capset:91 personality:92 exit:93 exit_group:94
waitid:95 set_tid_address:96 unshare:97 futex:98 set_robust_list:99 get_robust_list:100
nanosleep:101 getitimer:102 setitimer:103 kexec_load:104 init_module:105 delete_module:106
timer_create:107 timer_gettime:108 timer_getoverrun:109 timer_settime:110 timer_delete:111
clock_settime:112 clock_gettime:113 clock_getres:114 clock_nanosleep:115 syslog:116 ptrace:117
sched_setparam:118 sched_setscheduler:119 sched_getscheduler:120 sched_getparam:121
sched_setaffinity:122 sched_getaffinity:123 sched_yield:124 sched_get_priority_max:125
sched_get_priority_min:126 sched_rr_get_interval:127 restart_syscall:128 kill:129 tkill:130
tgkill:131 sigaltstack:132 rt_sigsuspend:133 rt_sigaction:134 rt_sigprocmask:135 rt_sigpending:136
rt_sigtimedwait:137 rt_sigqueueinfo:138 rt_sigreturn:139 setpriority:140 getpriority:141 reboot:142
setregid:143 setgid:144 setreuid:145 setuid:146 setresuid:147 getresuid:148 setresgid:149
getresgid:150 setfsuid:151 setfsgid:152 times:153 setpgid:154 getpgid:155 getsid:156 setsid:157
getgroups:158 setgroups:159 uname:160 sethostname:161 setdomainname:162 getrlimit:163 setrlimit:164
getrusage:165 umask:166 prctl:167 getcpu:168 gettimeofday:169 settimeofday:170 adjtimex:171
getpid:172 getppid:173 getuid:174 geteuid:175 getgid:176 getegid:177 gettid:178 sysinfo:179
mq_open:180 mq_unlink:181 mq_timedsend:182 mq_timedreceive:183 mq_notify:184 mq_getsetattr:185
msgget:186 msgctl:187 msgrcv:188 msgsnd:189 semget:190 semctl:191 semtimedop:192 semop:193
shmget:194 shmctl:195 shmat:196 shmdt:197 socket:198 socketpair:199 bind:200 listen:201 accept:202
connect:203 getsockname:204 getpeername:205 sendto:206 recvfrom:207 setsockopt:208 getsockopt:209
shutdown:210 sendmsg:211 recvmsg:212 readahead:213 brk:214 munmap:215 mremap:216 add_key:217
request_key:218 keyctl:219 clone:220 execve:221 mmap:222 fadvise64:223 swapon:224 swapoff:225
mprotect:226 msync:227 mlock:228 munlock:229 mlockall:230 munlockall:231 mincore:232 madvise:233
remap_file_pages:234 mbind:235 get_mempolicy:236 set_mempolicy:237 migrate_pages:238 move_pages:239
rt_tgsigqueueinfo:240 perf_event_open:241 accept4:242 recvmmsg:243 wait4:260 prlimit64:261
fanotify_init:262 fanotify_mark:263 name_to_handle_at:264 open_by_handle_at:265 clock_adjtime:266
syncfs:267 setns:268 sendmmsg:269 process_vm_readv:270 process_vm_writev:271 kcmp:272
finit_module:273 sched_setattr:274 sched_getattr:275 renameat2:276 seccomp:277 getrandom:278
memfd_create:279 bpf:280 execveat:281 userfaultfd:282 membarrier:283 mlock2:284 copy_file_range:285
preadv2:286 pwritev2:287 pkey_mprotect:288 pkey_alloc:289 pkey_free:290 statx:291 io_pgetevents:292
rseq:293 kexec_file_load:294 pidfd_send_signal:424 io_uring_setup:425 io_uring_enter:426
io_uring_register:427 open_tree:428 move_mount:429 fsopen:430 fsconfig:431 fsmount:432 fspick:433
pidfd_open:434 clone3:435 close_range:436 openat2:437 pidfd_getfd:438 faccessat2:439
process_madvise:440 epoll_pwait2:441 mount_setattr:442 quotactl_fd:443 landlock_create_ruleset:444
landlock_add_rule:445 landlock_restrict_self:446 memfd_secret:447 process_mrelease:448
futex_waitv:449 set_mempolicy_home_node:450 cachestat:451 fchmodat2:452 map_shadow_stack:453
futex_wake:454 futex_wait:455 futex_requeue:456 statmount:457 listmount:458 lsm_get_self_attr:459
lsm_set_self_attr:460 lsm_list_modules:461 mseal:462 setxattrat:463 getxattrat:464 listxattrat:465
removexattrat:466 open_tree_attr:467
"""

_TABLES: dict[str, dict[str, int]] = {}


def table(arch: str) -> dict[str, int]:
    """Name -> number for ``arch`` ("x86_64" or "aarch64"); KeyError for any other."""
    if arch not in _TABLES:
        text = {"x86_64": _X86_64, "aarch64": _AARCH64}[arch]
        _TABLES[arch] = {name: int(nr) for name, nr in (word.split(":") for word in text.split())}
    return _TABLES[arch]
