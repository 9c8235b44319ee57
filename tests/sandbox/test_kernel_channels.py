"""Kernel channels of the sandbox, closed: hostile programs on every backend, judged by what the
HOST observes after the run.

A channel is kernel state a program can reach that the host or other runs share: SysV IPC and
POSIX message queues, keyrings, and the interfaces a Python program never needs (vsock, io_uring,
bpf, perf, userfaultfd, new namespaces, mounts, other processes' memory). Each program reports
what it got; then the host checks ``/proc/sysvipc`` (what ``ipcs`` shows) and ``/proc/key-users``
for anything of the run's uid, and, for state that could persist, a second run under the SAME
uid looks for what the first one planted.

The persistent channels also run on the local backend with layers taken away -- without the
system-call filter (the IPC namespace and the teardown must hold), and without filter and
namespaces (the teardown alone) -- so that each layer is shown to hold by itself.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

import pytest

from sandbox.api import Backend, ExecutionResult, Limits, Toolset
from sandbox.inside.seccomp import table
from sandbox.local.backend import LocalBackend
from sandbox.local.uids import next_uid, release_uid
from tests.support.session_mode import InSession

LIMITS = Limits(timeout=20, memory_mb=256)
KEY = 0x41544331  # the SysV key both runs use
MARK = "planted-by-run-one-7f3a"
DOCKER_UID = 65534
#: Layers of the local backend: all of them, no filter, no filter and no namespaces.
VARIANTS: dict[str, dict[str, Any]] = {"local": {}, "local-nofilter": {"seccomp": False},
                                       "local-bare": {"seccomp": False, "namespaces": False}}
NEEDED = ("shmget", "shmat", "shmdt", "shmctl", "msgget", "msgsnd", "msgrcv", "mq_open", "mq_timedsend",
          "mq_timedreceive", "add_key", "keyctl", "io_uring_setup", "bpf", "perf_event_open", "userfaultfd", "unshare",
          "setns", "mount", "umount2", "ptrace", "process_vm_readv", "process_vm_writev", "clone", "personality",
          "kcmp", "getpid")
NR = {arch: {name: table(arch)[name] for name in NEEDED} for arch in ("x86_64", "aarch64")}

PRE = """
import ctypes, errno, os, socket, struct, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = $nr[os.uname().machine]
KEEP = []
def sc(name, *args):
    r = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) for a in args])
    return r if r != -1 else -ctypes.get_errno()
def name_of(r):
    return "ok" if r >= 0 else errno.errorcode.get(-r, str(-r))
def ptr(data):
    b = ctypes.create_string_buffer(data, len(data))
    KEEP.append(b)
    return ctypes.addressof(b)
KEY = $key
MARK = b"$mark"
"""


@dataclass(frozen=True)
class Persistent:
    """State the first run plants and the second (same uid) looks for; ``FOUND`` in its answer
    means the channel is open. ``bare``: also run without filter and namespaces (POSIX queues are
    not: there nothing can list them to remove them)."""

    name: str
    plant: str
    find: str
    bare: bool = True


PERSISTENT = [
    Persistent("sysv_shm_fixed_key_0666", """
r = sc("shmget", KEY, 4096, 0o1666)
print("shmget", name_of(r))
if r >= 0:
    a = sc("shmat", r, 0, 0)
    if a > 0:
        ctypes.memmove(a, MARK, len(MARK))
        sc("shmdt", a)
""", """
r = sc("shmget", KEY, 0, 0)
print("lookup", name_of(r))
if r >= 0:
    a = sc("shmat", r, 0, 0o10000)
    print("FOUND", ctypes.string_at(a, len(MARK)) if a > 0 else name_of(a))
"""),
    Persistent("sysv_shm_ipc_private_left_attached_nowhere", """
size = 64 << 20
r = sc("shmget", 0, size, 0o600)
print("shmget", name_of(r))
if r >= 0:
    a = sc("shmat", r, 0, 0)
    if a > 0:
        ctypes.memset(a, 7, size)
        sc("shmdt", a)
""", """
info = ctypes.create_string_buffer(256)
top = sc("shmctl", 0, 14, ctypes.addressof(info))  # SHM_INFO: the highest segment index in use
print("shm_info", name_of(top))
for index in range(top + 1):
    shmid = sc("shmctl", index, 13, ctypes.addressof(info))  # SHM_STAT: index -> id
    a = sc("shmat", shmid, 0, 0o10000) if shmid >= 0 else -1
    if a > 0 and ctypes.string_at(a, 64) == bytes([7]) * 64:
        print("FOUND segment", shmid)
"""),
    Persistent("sysv_message_queue", """
r = sc("msgget", KEY, 0o1666)
print("msgget", name_of(r))
if r >= 0:
    print("msgsnd", name_of(sc("msgsnd", r, ptr(struct.pack("l", 1) + MARK), len(MARK), 0o4000)))
""", """
r = sc("msgget", KEY, 0)
print("lookup", name_of(r))
if r >= 0:
    b = ctypes.create_string_buffer(8 + 64)
    n = sc("msgrcv", r, ctypes.addressof(b), 64, 0, 0o4000)
    print("FOUND", b.raw[8:8 + n] if n >= 0 else name_of(n))
"""),
    Persistent("posix_message_queue", """
r = sc("mq_open", ptr(b"atc-probe-mq\\0"), 0o100 | 2, 0o666, 0)
print("mq_open", name_of(r))
if r >= 0:
    print("mq_timedsend", name_of(sc("mq_timedsend", r, ptr(MARK), len(MARK), 0, 0)))
""", """
r = sc("mq_open", ptr(b"atc-probe-mq\\0"), 0o4000, 0, 0)
print("lookup", name_of(r))
if r >= 0:
    b = ctypes.create_string_buffer(8192)
    n = sc("mq_timedreceive", r, ctypes.addressof(b), 8192, 0, 0)
    print("FOUND", b.raw[:n] if n >= 0 else name_of(n))
""", bare=False),
    Persistent("keyrings_user_session_persistent", """
for ring, spec in (("user", -4), ("user-session", -5)):
    print("add_key", ring, name_of(sc("add_key", ptr(b"user\\0"), ptr(b"atc-probe-key\\0"), ptr(MARK), len(MARK), spec)))
p = sc("keyctl", 22, -1, -4)  # KEYCTL_GET_PERSISTENT: my persistent keyring, linked into my user keyring
print("persistent", name_of(p))
if p >= 0:
    k = sc("add_key", ptr(b"user\\0"), ptr(b"atc-probe-key\\0"), ptr(MARK), len(MARK), p)
    print("add_key persistent", name_of(k))
    if k >= 0:
        print("setperm", name_of(sc("keyctl", 5, k, 0x3f000000)))  # possessor-only: hidden from the owner
""", """
rings = [-4, -5]
p = sc("keyctl", 22, -1, -2)
print("persistent", name_of(p))
if p >= 0:
    rings.append(p)
for ring in rings:
    k = sc("keyctl", 10, ring, ptr(b"user\\0"), ptr(b"atc-probe-key\\0"), 0)  # KEYCTL_SEARCH
    print("search", ring, name_of(k))
    if k >= 0:
        b = ctypes.create_string_buffer(64)
        n = sc("keyctl", 11, k, ctypes.addressof(b), 64)  # KEYCTL_READ
        print("FOUND", b.raw[:n] if n >= 0 else name_of(n))
"""),
]

#: Interfaces a program never needs: every attempt must get EPERM (or ENOSYS), never succeed.
DENIED = {
    "vsock_socket": """
for label, family, kind, proto in (("vsock", 40, 1, 0), ("vsock_dgram", 40, 2, 0)):
    try:
        s = socket.socket(family, kind, proto)
        print(label, "OPEN")  # and never connect: CID 2 is the hypervisor
        s.close()
    except OSError as e:
        print(label, errno.errorcode[e.errno])
""",
    "netlink_packet_alg_sockets": """
for label, family, kind, proto in (("netlink_uevent", 16, 3, 15), ("netlink_diag", 16, 3, 4), ("packet", 17, 3, 0),
                                   ("alg", 38, 5, 0)):
    try:
        socket.socket(family, kind, proto).close()
        print(label, "OPEN")
    except OSError as e:
        print(label, errno.errorcode[e.errno])
""",
    "io_uring_setup": """
params = ctypes.create_string_buffer(120)
print("io_uring_setup", name_of(sc("io_uring_setup", 4, ctypes.addressof(params))))
""",
    "bpf_map_create": """
attr = struct.pack("=IIII", 2, 4, 4, 1) + bytes(56)  # BPF_MAP_TYPE_ARRAY, 4-byte keys and values, 1 entry
print("bpf", name_of(sc("bpf", 0, ptr(attr), len(attr))))
""",
    "perf_event_open": """
attr = bytearray(128)
struct.pack_into("=IIQ", attr, 0, 1, 128, 0)  # PERF_TYPE_SOFTWARE, size, PERF_COUNT_SW_CPU_CLOCK
struct.pack_into("=Q", attr, 40, 1 | 1 << 5 | 1 << 6)  # disabled, exclude_kernel, exclude_hv
print("perf_event_open", name_of(sc("perf_event_open", ptr(bytes(attr)), 0, -1, -1, 0)))
""",
    "userfaultfd": """
print("userfaultfd", name_of(sc("userfaultfd", 1 | 0o2000000)))  # UFFD_USER_MODE_ONLY | O_CLOEXEC
""",
    "new_namespaces": """
for label, flag in (("user", 0x10000000), ("net", 0x40000000), ("mount", 0x00020000), ("pid", 0x20000000)):
    print("unshare_" + label, name_of(sc("unshare", flag)))
r = sc("clone", 0x10000000 | 17, 0, 0, 0, 0)  # fork into a new user namespace
if r == 0:
    os._exit(0)
print("clone_newuser", name_of(r))
fd = os.open("/proc/self/ns/net", os.O_RDONLY)
print("setns", name_of(sc("setns", fd, 0x40000000)))
""",
    "mount": """
print("mount", name_of(sc("mount", ptr(b"none\\0"), ptr(b"/tmp\\0"), ptr(b"tmpfs\\0"), 0, 0)))
print("umount2", name_of(sc("umount2", ptr(b"/proc\\0"), 2)))
""",
    "ptrace_another_process": """
pid = os.fork()
if pid == 0:
    time.sleep(30)
    os._exit(0)
try:
    print("ptrace_attach", name_of(sc("ptrace", 16, pid, 0, 0)))
    print("ptrace_seize", name_of(sc("ptrace", 0x4206, pid, 0, 0)))
finally:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
""",
    "process_vm_readv": """
secret = ctypes.create_string_buffer(MARK)
pid = os.fork()
if pid == 0:
    time.sleep(30)
    os._exit(0)
try:
    local = ctypes.create_string_buffer(len(MARK))
    liov = ptr(struct.pack("=QQ", ctypes.addressof(local), len(MARK)))
    riov = ptr(struct.pack("=QQ", ctypes.addressof(secret), len(MARK)))
    r = sc("process_vm_readv", pid, liov, 1, riov, 1, 0)
    print("process_vm_readv", name_of(r), local.raw if r > 0 else "")
    print("process_vm_writev", name_of(sc("process_vm_writev", pid, liov, 1, riov, 1, 0)))
finally:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
""",
    "personality_and_kcmp": """
print("personality", name_of(sc("personality", 0x0040000)))  # ADDR_NO_RANDOMIZE
print("kcmp", name_of(sc("kcmp", os.getpid(), os.getpid(), 0, 0, 0)))
""",
}


def program(body: str) -> str:
    return Template(PRE).substitute(nr=json.dumps(NR), key=KEY, mark=MARK) + body


# -- what the host sees ----------------------------------------------------------------------------

def host_sysvipc(uid: int | None) -> list[str]:
    """SysV IPC objects in the host's IPC namespace owned or created by ``uid``, or under KEY
    (what ``ipcs`` would list), read straight from /proc/sysvipc."""
    found = []
    for kind in ("shm", "msg", "sem"):
        lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        header = lines[0].split()
        for line in lines[1:]:
            row = dict(zip(header, line.split(), strict=False))
            if int(row["key"]) == KEY or (uid is not None and str(uid) in (row["uid"], row["cuid"])):
                found.append(f"{kind}: {line.strip()}")
    return found


def host_keys(uid: int) -> str | None:
    """The /proc/key-users line of ``uid`` (None: the uid owns no key)."""
    for line in Path("/proc/key-users").read_text().splitlines():
        if line.split(":")[0].strip() == str(uid):
            return line.strip()
    return None


def shmem_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1])
    raise AssertionError("no Shmem in /proc/meminfo")


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


_RUN_UIDS: set[int] = set()


def run_uid(backend: Backend, result: ExecutionResult) -> int | None:
    """The uid the run's processes had on the host, when it was the run's own."""
    if backend.name == "docker":
        return DOCKER_UID
    uids = [int(i[4:]) for i in result.isolation if i.startswith("uid:")]
    _RUN_UIDS.update(uids)
    return uids[0] if uids else None


@pytest.fixture(autouse=True)
def _leave_the_host_clean() -> Iterator[None]:
    """A test that fails must not leave what its programs planted to the next test or the machine."""
    yield
    if os.geteuid() == 0:
        from sandbox.local.kernel_objects import teardown

        while _RUN_UIDS:
            teardown(_RUN_UIDS.pop())


def processes_of(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    pids.append(int(entry))
            except OSError:
                continue
    return pids


def assert_host_clean(backend: Backend, result: ExecutionResult) -> None:
    """Nothing of the run is left in the host's kernel: no IPC object, no key, no process."""
    uid = run_uid(backend, result)
    assert eventually(lambda: not host_sysvipc(uid)), f"ipcs shows objects of the run: {host_sysvipc(uid)}"
    if uid is not None:
        assert eventually(lambda: host_keys(uid) is None), f"/proc/key-users: {host_keys(uid)}"
        if backend.name == "local":
            assert eventually(lambda: not processes_of(uid)), f"processes of uid {uid} left: {processes_of(uid)}"


# -- backends ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def local_backend() -> Iterator[LocalBackend]:
    with LocalBackend(pool_size=2) as backend:
        yield backend


@pytest.fixture(scope="module")
def docker_backend() -> Iterator[Backend]:
    from sandbox.docker.backend import DockerBackend, docker_available

    if not docker_available():
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    with DockerBackend() as backend:
        yield backend


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> Backend:
    backend: Backend = request.getfixturevalue(f"{request.param}_backend")
    return backend


def answer_lines(result: ExecutionResult) -> list[list[str]]:
    assert result.ok, result.to_dict()
    return [line.split() for line in result.answer.splitlines() if line.strip()]


# -- the tests ---------------------------------------------------------------------------------------

@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(DENIED))
def test_interfaces_a_program_never_needs_are_denied(name: str, backend: Backend) -> None:
    result = backend.run(program(DENIED[name]), Toolset([]), LIMITS)
    lines = answer_lines(result)
    assert lines, result.to_dict()
    for line in lines:
        assert line[1] in ("EPERM", "ENOSYS"), f"{name}: {line} ({result.answer})"
    assert MARK not in result.answer
    assert_host_clean(backend, result)


def _same_uid_runs(variant: str, monkeypatch: pytest.MonkeyPatch) -> tuple[LocalBackend, int, Callable[[], None]]:
    """A cold local backend whose every run gets the same uid (as if the uid came round again),
    and a function that waits until the last run is reaped and torn down."""
    backend = LocalBackend(pool_size=0, **VARIANTS[variant])
    uid = next_uid()
    monkeypatch.setattr(backend, "_next_uid", lambda: uid)

    def settle() -> None:
        for thread in list(backend._reapers):
            thread.join(timeout=15)

    return backend, uid, settle


#: ``session-*``: the plant runs as the second snippet of a sandbox session, and the find in a new
#: session afterwards (``tests/support/session_mode.py``).
PERSISTENT_RUNS = [pytest.param(variant, case, id=f"{variant}-{case.name}",
                                 marks=[pytest.mark.docker] if variant.endswith("docker") else [])
                   for variant in (*VARIANTS, "docker", "session-local", "session-docker") for case in PERSISTENT
                   if variant != "local-bare" or case.bare]


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("variant", "case"), PERSISTENT_RUNS)
def test_what_one_run_plants_the_next_does_not_find(case: Persistent, variant: str, request: pytest.FixtureRequest,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    if variant.startswith("local-") and os.geteuid() != 0:
        pytest.skip("runs without a filter are judged by the run's own uid, which needs root")
    settle: Callable[[], None] = lambda: None  # noqa: E731
    backend: Backend
    uid = None
    base = variant.removeprefix("session-")
    if base == "docker":
        backend = request.getfixturevalue("docker_backend")
    else:
        backend, uid, settle = _same_uid_runs(base, monkeypatch)
    if variant.startswith("session-"):
        backend = InSession(backend)
    try:
        shmem_before = shmem_kb()
        first = backend.run(program(case.plant), Toolset([]), LIMITS)
        answer_lines(first)
        settle()
        assert_host_clean(backend, first)
        # IPC_PRIVATE memory is given back: it does not stay outside every limit.
        assert eventually(lambda: shmem_kb() < shmem_before + 32 * 1024), (shmem_before, shmem_kb())
        second = backend.run(program(case.find), Toolset([]), LIMITS)
        answer_lines(second)
        settle()
        assert run_uid(backend, second) == run_uid(backend, first)
        assert "FOUND" not in second.answer, f"{variant}: the second run found what the first planted:\n" \
                                             f"{first.answer}\n{second.answer}"
        assert_host_clean(backend, second)
    finally:
        if uid is not None:
            getattr(backend, "inner", backend).close()
            release_uid(uid)


def test_a_local_run_names_the_namespaces_and_the_filter_in_force(local_backend: LocalBackend) -> None:
    result = local_backend.run("print(1)", Toolset([]), LIMITS)
    assert result.ok, result.error
    expected = {"netns", "pidns", "mountns", "ipcns", "utsns", "proc:pids-only", "caps:none", "no-new-privileges",
                "seccomp:atc-v2"}
    if os.geteuid() == 0:
        expected |= {"cgroupns"}
    assert expected <= set(result.isolation), result.isolation


@pytest.mark.docker
def test_a_docker_run_names_its_profile_and_namespaces(docker_backend: Backend) -> None:
    result = docker_backend.run("print(1)", Toolset([]), LIMITS)
    assert result.ok, result.error
    assert {"seccomp:atc-v2", "ipcns", "utsns", "cgroupns", "sys:empty"} <= set(result.isolation)
    # Where the engine's kernel allows user namespaces (it does on the machines the tests run
    # on), every run has namespaces and a /proc of its own inside the reused container.
    assert {"userns", "netns", "pidns", "mountns", "proc:pids-only"} <= set(result.isolation), result.isolation


LOOK_AROUND = """
import json, os, socket
out = {"hostname": socket.gethostname(), "sys": sorted(os.listdir("/sys")) if os.path.isdir("/sys") else None}
for name in ("cmdline", "keys", "key-users", "modules", "kallsyms", "locks", "partitions", "sysvipc/shm",
             "sys/kernel/hostname", "self/cgroup", "self/net/dev"):
    try:
        with open("/proc/" + name) as f:
            out[name] = f.read()[:4000]
    except OSError as e:
        out[name] = type(e).__name__
out["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print(json.dumps(out))
"""


def test_proc_and_sys_show_nothing_of_the_host(backend: Backend) -> None:
    result = backend.run(LOOK_AROUND, Toolset([]), LIMITS)
    assert result.ok, result.error
    seen = json.loads(result.answer)
    assert seen["hostname"] == "sandbox"  # not the host's name
    assert seen["sys"] in (None, [])  # no /sys (local) or an empty one (Docker): no devices, firmware, net
    host_cmdline = Path("/proc/cmdline").read_text().strip()
    assert host_cmdline and host_cmdline not in result.answer
    for name in ("cmdline", "keys", "key-users", "modules", "kallsyms", "locks", "partitions"):
        assert seen[name] in ("", "FileNotFoundError", "PermissionError"), (name, seen[name][:200])
    assert seen["sys/kernel/hostname"] in ("FileNotFoundError", "sandbox\n")
    assert all(line.endswith(":/") for line in seen["self/cgroup"].splitlines()), seen["self/cgroup"]
    interfaces = [line.split(":")[0].strip() for line in seen["self/net/dev"].splitlines()[2:]]
    assert interfaces == ["lo"], seen["self/net/dev"]
    assert len(seen["pids"]) < 10, seen["pids"]  # the run's own processes only
