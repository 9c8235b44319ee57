"""The local jail's layers one by one: what it reports when the filter cannot be installed, the
user-namespace path (no root), the masked /proc of kernels without ``subset=pid``, the sweep of a
claimed uid block and the retirement of a uid whose kernel objects stay. The channels themselves,
on both backends, are in ``tests/sandbox/test_kernel_channels.py``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sandbox.api import Toolset
from sandbox.inside.seccomp import table
from sandbox.local.backend import LocalBackend
from sandbox.local.uids import next_uid, release_uid
from tests.sandbox.test_kernel_channels import (
    DENIED,
    LIMITS,
    PERSISTENT,
    host_keys,
    host_sysvipc,
    program,
    run_uid,
)
from tests.sandbox.test_kernel_channels import _leave_the_host_clean as _leave_the_host_clean  # noqa: F401  (autouse)


@pytest.fixture()
def api_free_tools() -> Toolset:
    return Toolset([])


def test_an_uninstallable_filter_is_reported(api_free_tools: Toolset, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the kernel refuses the filter the run goes on and says so; ``seccomp=True`` refuses."""
    import sandbox.local.backend as local
    from protocols.errors import SandboxError

    bogus = "1500c80001000000"  # jeq with a jump past the end: the kernel's verifier refuses it
    monkeypatch.setattr(local, "_filter_argv", [["--seccomp", bogus, "--seccomp-name", "atc-v2"]])
    with LocalBackend(pool_size=0) as backend:
        result = backend.run("print(2)", api_free_tools, LIMITS)
    assert result.ok and result.answer == "2\n"
    assert "seccomp:unavailable (prctl(PR_SET_SECCOMP): Invalid argument)" in result.isolation
    assert not any(i == "seccomp:atc-v2" for i in result.isolation)
    with LocalBackend(pool_size=0, seccomp=True) as strict, pytest.raises(SandboxError, match="could not be installed"):
        strict.run("print(2)", api_free_tools, LIMITS)


def test_a_machine_without_a_filter_is_reported(api_free_tools: Toolset, monkeypatch: pytest.MonkeyPatch) -> None:
    import sandbox.local.backend as local
    from sandbox.inside.seccomp import UnsupportedArch

    def unsupported() -> bytes:
        raise UnsupportedArch("no system-call filter for the sparc64 architecture")

    monkeypatch.setattr(local, "_filter_argv", [])
    monkeypatch.setattr(local, "compile_filter", unsupported)
    with LocalBackend(pool_size=0) as backend:
        result = backend.run("print(3)", api_free_tools, LIMITS)
    assert result.ok
    assert "seccomp:unavailable (no system-call filter for the sparc64 architecture)" in result.isolation
    with LocalBackend(pool_size=0, seccomp=False) as off:
        assert "seccomp:off" in off.run("print(3)", api_free_tools, LIMITS).isolation


UNPRIVILEGED = """
import json, sys
sys.path[:0] = {paths!r}
from sandbox.local.backend import LocalBackend
from sandbox.api import Toolset, Limits
with LocalBackend(pool_size=0) as b:
    r = b.run({program!r}, Toolset([]), Limits(timeout=20))
print(json.dumps(r.to_dict()))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(), reason="needs root and setpriv")
def test_the_user_namespace_path_has_them_too(tmp_path: Path) -> None:
    """Started by an ordinary user, the jail is root of its own user namespace: it must still get
    IPC and UTS namespaces, drop every capability and install the filter."""
    import subprocess

    import httpx

    body = program(DENIED["new_namespaces"] + DENIED["vsock_socket"] + PERSISTENT[0].plant + PERSISTENT[4].plant
                   + "print('hostname', socket.gethostname())\n")
    script = tmp_path / "unprivileged.py"
    script.write_text(UNPRIVILEGED.format(paths=[str(Path(__file__).resolve().parents[2]),
                                                 str(Path(httpx.__file__).resolve().parents[1])], program=body))
    for p in (tmp_path, *tmp_path.parents):
        if str(p) in ("/", "/tmp"):
            break
        os.chmod(p, 0o755)
    os.chmod(script, 0o644)
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-I",
                          str(script)], capture_output=True, text=True, timeout=60, env={}, cwd="/")
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout.splitlines()[-1])
    knob = Path("/proc/sys/kernel/unprivileged_userns_clone")
    if "userns" not in doc["isolation"] and knob.exists() and knob.read_text().strip() == "0":
        pytest.skip("unprivileged user namespaces are disabled here")
    assert {"userns", "ipcns", "utsns", "caps:none", "seccomp:atc-v2"} <= set(doc["isolation"]), doc["isolation"]
    seen = dict(line.rsplit(" ", 1) for line in doc["answer"].splitlines())
    assert seen.pop("hostname") == "sandbox"
    assert len(seen) >= 10 and all(v in ("EPERM", "ENOSYS") for v in seen.values()), seen
    assert not host_sysvipc(None)


PLANT_AS = """
import ctypes, os, sys
uid = int(sys.argv[1])
os.setgroups([]); os.setresgid(uid, uid, uid); os.setresuid(uid, uid, uid)
libc = ctypes.CDLL(None, use_errno=True)
assert libc.shmget(0, 1 << 20, 0o600) >= 0 and libc.msgget(0, 0o600) >= 0 and libc.semget(0, 1, 0o600) >= 0
nr = int(sys.argv[2])
key = libc.syscall(ctypes.c_long(nr), b"user", b"left-by-a-killed-owner", b"x", ctypes.c_long(1), ctypes.c_long(-4))
assert key > 0, ctypes.get_errno()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another uid needs root")
def test_a_sweep_removes_what_a_dead_owner_left() -> None:
    """What a killed atc process's runs left under their uids (no teardown ran) is removed when
    the block is claimed again: ``sweep``, judged by /proc."""
    import subprocess

    from sandbox.inside.seccomp import arch_of
    from sandbox.local.kernel_objects import sweep

    uid = next_uid()
    try:
        subprocess.run([sys_python(), "-I", "-S", "-c", PLANT_AS, str(uid), str(table(arch_of().name)["add_key"])],
                       check=True, timeout=30, env={})
        assert len(host_sysvipc(uid)) == 3 and host_keys(uid) is not None
        assert sweep([uid - 1, uid, uid + 1]) == []
        assert host_sysvipc(uid) == [] and host_keys(uid) is None
    finally:
        release_uid(uid)


def sys_python() -> str:
    from sandbox.local.backend import sandbox_python

    return sandbox_python()


def test_a_uid_whose_objects_cannot_be_removed_is_retired(monkeypatch: pytest.MonkeyPatch) -> None:
    """If a run left something the teardown cannot remove, its uid is never handed out again."""
    import sandbox.local.worker as worker
    from sandbox.local.kernel_objects import Leftovers
    from sandbox.local.uids import RETIRED

    if os.geteuid() != 0:
        pytest.skip("runs have uids of their own only under root")
    monkeypatch.setattr(worker, "teardown", lambda uid, python=None, ipc=True: Leftovers(uid, keys=1))
    with LocalBackend(pool_size=0) as backend:
        first = backend.run("print(1)", Toolset([]), LIMITS)
        for thread in list(backend._reapers):  # finished runs are reaped and torn down in the background
            thread.join(timeout=15)
        uid = run_uid(backend, first)
        assert uid is not None and uid in RETIRED
        seen = {run_uid(backend, backend.run("print(1)", Toolset([]), LIMITS)) for _ in range(3)}
    RETIRED.discard(uid)
    assert uid not in seen


OLD_KERNEL_PROC = r"""
import ctypes, errno, json, os, sys
sys.path.insert(0, sys.argv[1])
import jail
libc = ctypes.CDLL(None, use_errno=True)
assert libc.unshare(jail.CLONE_NEWNS | jail.CLONE_NEWPID) == 0
pid = os.fork()
if pid:
    os._exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
jail.mount(None, "/", None, jail.MS_REC | jail.MS_PRIVATE)
real_mount = jail.mount
def mount(source, target, fstype, flags, data=None):
    if data == "subset=pid":  # a kernel before 5.8
        raise OSError(errno.EINVAL, "unknown option")
    real_mount(source, target, fstype, flags, data)
jail.mount = mount
target = sys.argv[2] + "/proc"
isolation = []
jail.mount_proc(target, isolation)
out = {"isolation": isolation, "pids": sorted(p for p in os.listdir(target) if p.isdigit())}
for name in ("cmdline", "keys", "key-users", "modules", "locks"):
    if os.path.exists(os.path.join(target, name)):  # no "modules" on a kernel without modules
        with open(os.path.join(target, name)) as f:
            out[name] = f.read()
out["sys"] = os.listdir(os.path.join(target, "sys"))
print(json.dumps(out))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a /proc needs root")
def test_proc_masks_what_it_tells_of_the_host_where_subset_is_missing(tmp_path: Path) -> None:
    import subprocess

    from sandbox.local.backend import jail_path, sandbox_python

    out = subprocess.run([sandbox_python(), "-I", "-S", "-c", OLD_KERNEL_PROC, str(jail_path().parent), str(tmp_path)],
                         capture_output=True, text=True, timeout=30, env={})
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout)
    assert seen["isolation"] == ["proc:masked"] and seen["pids"] == ["1"]
    assert Path("/proc/cmdline").read_text() and Path("/proc/locks").exists()
    assert seen["cmdline"] == seen["keys"] == seen["key-users"] == seen["locks"] == seen.get("modules", "") == ""
    assert seen["sys"] == []
