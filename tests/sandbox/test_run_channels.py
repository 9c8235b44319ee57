"""Per-run state that warm machinery could carry from one run to the next, closed; what a run can
see of the host and of concurrent runs, bounded. Hostile programs on every backend, judged by
what the next run (or the host) observes.

A run on warm machinery -- the local fork server, a reused Docker container -- *plants* a value
in every counter it can move (the inode counter of its /tmp, the PID counter, client ports left
in ``TIME_WAIT``, the network's SNMP and socket counters, ints in the memory a runner is forked
from); the next run on the same machinery *reads* them. The reading must be the same whatever
was planted: two sequences with different values must read alike. Then: locks and file watches
do not reach host files or a concurrent run, no process of a run shows a host path or the fork
server's arguments, and a program flooding its stdio costs the container daemon nothing.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from pathlib import Path
from string import Template

import pytest

from sandbox.api import Backend, ExecutionResult, Limits, Toolset
from tests.sandbox.test_warm_isolation import backend as backend  # one runner deep: every run reuses it

LIMITS = Limits(timeout=30)
TOOLS = Toolset(collections=[])
ROOT = Path(__file__).resolve().parents[2]

PLANT = Template(r"""
import json, os, socket, time
value = $value
done = []
# The inode counter of /tmp and of the working directory.
for d in ("/tmp", os.getcwd()):
    try:
        for i in range(value):
            p = os.path.join(d, f"plant-{i}")
            open(p, "w").close()
            os.unlink(p)
        done.append("ino:" + d)
    except OSError:
        pass
# The PID counter.
for i in range(value):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
done.append("pid")
# Client ports left in TIME_WAIT (the client closes first), and the SNMP counters.
try:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    for port in (40000 + value, 41000 + value, 42000 + value):
        client = socket.socket()
        client.bind(("127.0.0.1", port))
        client.connect(server.getsockname())
        server.accept()[0].close()
        client.close()
    done.append("time_wait")
except OSError as exc:
    done.append(f"no loopback: {exc.strerror}")
try:
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(value):
        udp.sendto(b"x", ("127.0.0.1", 9))
    done.append("udp")
except OSError:
    pass
print(json.dumps(done))
""")

READ = r"""
import gc, json, os, socket
seen = {}
for d in ("/tmp", os.getcwd()):
    p = os.path.join(d, "read-probe")
    open(p, "w").close()
    seen["ino:" + d] = os.stat(p).st_ino
    os.unlink(p)
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
seen["child_pid"] = pid
seen["pid"] = os.getpid()
seen["proc"] = sorted(int(e) for e in os.listdir("/proc") if e.isdigit())
with open("/proc/self/status") as f:
    seen["nspid"] = [line.split()[1:] for line in f if line.startswith("NSpid")]
with open("/proc/1/stat") as f:
    seen["pid1_name"] = f.read().split()[1]
for table in ("tcp", "tcp6", "udp", "udp6", "unix", "snmp", "netstat", "sockstat"):
    try:
        with open("/proc/net/" + table) as f:
            lines = f.read().splitlines()
    except OSError as exc:
        lines = [exc.strerror]
    if table in ("tcp", "tcp6", "udp", "udp6", "unix"):
        lines = [" ".join(line.split()[1:4]) for line in lines[1:]]  # addresses and state
    seen["net:" + table] = lines
# Ints (above the interpreter's cached small ones) in the memory the runner was forked from.
ints = set()
for obj in gc.get_objects():
    try:
        items = list(obj.items()) if isinstance(obj, dict) else list(obj) if isinstance(obj, (list, set, tuple)) else []
    except Exception:
        continue
    for item in items:
        for v in (item if isinstance(item, tuple) else (item,)):
            if type(v) is int and 256 < v < 1 << 22:
                ints.add(v)
seen["ints"] = sorted(ints)
print(json.dumps(seen))
"""


def _json(result: ExecutionResult) -> object:
    assert result.ok, result.to_dict()
    return json.loads(result.answer.strip().splitlines()[-1])


def _containers(backend: Backend) -> set[str]:
    return set(getattr(backend, "_live", {}))


@pytest.mark.timeout(180)
def test_nothing_a_run_plants_in_counters_reaches_the_next_run(backend: Backend) -> None:
    """Two plant-then-read sequences with different values on the same warm machinery must read
    alike: TIME_WAIT ports, the /tmp inode counter, the PID counter, the network's counters and
    socket tables, and the ints of the forked runner's memory carry nothing."""
    readings = []
    containers: set[str] = set()
    for value in (300, 977):
        planted = _json(backend.run(PLANT.substitute(value=value), TOOLS, LIMITS))
        assert "pid" in planted and any(str(p).startswith("ino:") for p in planted), planted
        containers |= _containers(backend)
        readings.append(_json(backend.run(READ, TOOLS, LIMITS)))
        containers |= _containers(backend)
    first, second = readings
    assert isinstance(first, dict) and isinstance(second, dict)
    differ = {key: (first[key], second.get(key)) for key in first if first[key] != second.get(key)}
    assert differ == {}, differ
    assert not [line for line in first["net:tcp"] if line.endswith(" 06")], first["net:tcp"]  # no TIME_WAIT
    assert first["child_pid"] < 100 and first["pid"] < 100, first  # the PID counter starts afresh
    if backend.name == "docker":  # the same container served all four runs
        assert len(containers) == 1, containers


def test_a_lock_on_a_system_file_reaches_neither_the_host_nor_a_concurrent_run(backend: Backend) -> None:
    """A run takes exclusive locks (flock and fcntl) on a library and on /dev/null and holds them;
    meanwhile the host, and a concurrent run, take the same locks without waiting."""
    library = "/usr/lib/python3.11/os.py" if os.path.exists("/usr/lib/python3.11/os.py") else os.__file__
    hold = Template(r"""
import fcntl, os, time
held = []
for path in ("$library", "/dev/null", "/"):
    try:
        fd = os.open(path, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(path)
    except OSError as exc:
        held.append(f"{path}: {exc.strerror}")
time.sleep(4)
print(held)
""").substitute(library=library)
    take = Template(r"""
import fcntl, os
got = []
for path in ("$library",):
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        got.append("free")
    except BlockingIOError:
        got.append("LOCKED")
print(got)
""").substitute(library=library)
    results: list[ExecutionResult] = []
    holder = threading.Thread(target=lambda: results.append(backend.run(hold, TOOLS, LIMITS)))
    holder.start()
    time.sleep(2.0)  # the holder has its locks by now (its runner was warm)
    host: list[str] = []
    for path in (library, "/dev/null"):
        with open(path, "rb") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                host.append("free")
            except BlockingIOError:
                host.append("LOCKED")
    concurrent = backend.run(take, TOOLS, LIMITS)
    holder.join()
    assert results and results[0].ok, results[0].to_dict() if results else "no result"
    assert library in results[0].answer, results[0].answer  # it did hold the library's lock
    assert host == ["free", "free"], host
    assert concurrent.ok and concurrent.answer.strip() == "['free']", concurrent.to_dict()


WATCH = r"""
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
out = []
fd = libc.inotify_init1(0)
out.append("inotify " + ("OPEN" if fd >= 0 else errno.errorcode[ctypes.get_errno()]))
fd = libc.fanotify_init(0, 0)
out.append("fanotify " + ("OPEN" if fd >= 0 else errno.errorcode[ctypes.get_errno()]))
print(" ".join(out))
"""


def test_file_watches_are_denied(backend: Backend) -> None:
    """inotify would see files the host and other runs open through the shared system dirs."""
    result = backend.run(WATCH, TOOLS, LIMITS)
    assert result.ok, result.to_dict()
    assert "OPEN" not in result.answer and "inotify EPERM" in result.answer, result.answer


NAMES = r"""
import gc, json, os, sys
views = {}
for pid in ("1", "self"):
    for name in ("cmdline", "environ", "comm", "status", "stat", "maps", "mountinfo", "cgroup", "sched"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                views[f"/proc/{pid}/{name}"] = f.read().decode(errors="replace")
        except OSError as exc:
            views[f"/proc/{pid}/{name}"] = "error: " + exc.strerror
    for name in ("exe", "cwd", "root"):
        try:
            views[f"/proc/{pid}/{name}"] = os.readlink(f"/proc/{pid}/{name}")
        except OSError as exc:
            views[f"/proc/{pid}/{name}"] = "error: " + exc.strerror
views["sys.argv"] = repr(sys.argv)
views["sys.orig_argv"] = repr(getattr(sys, "orig_argv", None))
views["sys.modules"] = repr(sorted(str(vars(m).get("__file__")) for m in list(sys.modules.values())))
strings = []
for obj in gc.get_objects():
    try:
        items = list(obj.items()) if isinstance(obj, dict) else list(obj) if isinstance(obj, (list, set, tuple)) else []
    except Exception:
        continue
    for item in items:
        for v in (item if isinstance(item, tuple) else (item,)):
            if isinstance(v, str) and "/" in v and len(v) < 300:
                strings.append(v)
views["gc"] = repr(strings)
print(json.dumps(views))
"""


def test_no_process_of_a_run_shows_a_host_path_or_the_servers_arguments(backend: Backend) -> None:
    """/proc/1 and /proc/self (cmdline, environ, comm, maps, mountinfo...), sys.argv and the
    strings of the runner's memory name neither the install path nor the fork server or jail."""
    views = _json(backend.run(NAMES, TOOLS, LIMITS))
    assert isinstance(views, dict)
    for pid in ("1", "self"):
        assert views[f"/proc/{pid}/cmdline"] == "sandbox\x00", views[f"/proc/{pid}/cmdline"]
        assert views[f"/proc/{pid}/comm"] == "sandbox\n", views[f"/proc/{pid}/comm"]
        assert views[f"/proc/{pid}/environ"] in ("", "error: Permission denied"), views[f"/proc/{pid}/environ"]
    install = str(ROOT)
    for where, text in views.items():
        for needle in (install, "zygote", "--control", "--connect", "--runner", "--uid", "--seccomp"):
            assert needle not in text, (where, needle, text[:2000])
    # The mounts name no storage path of the host: no overlay's upper or work directory, and (in
    # Docker) not the engine's root (its overlay2 layers, issue 29).
    needles = ["upperdir=", "workdir="]
    if backend.name == "docker":
        from sandbox.docker.engine import connect

        client = connect(timeout=10)
        try:
            needles.append(str(client.info()["DockerRootDir"]))
        finally:
            client.close()
    for pid in ("1", "self"):
        for needle in needles:
            assert needle not in views[f"/proc/{pid}/mountinfo"], (pid, needle, views[f"/proc/{pid}/mountinfo"])


def _container_host_pids(cid: str) -> list[int]:
    for pattern in ("/sys/fs/cgroup/pids/docker/{cid}/cgroup.procs", "/sys/fs/cgroup/pids/system.slice/docker-{cid}.scope/cgroup.procs",
                    "/sys/fs/cgroup/system.slice/docker-{cid}.scope/cgroup.procs", "/sys/fs/cgroup/docker/{cid}/cgroup.procs"):
        try:
            return [int(line) for line in Path(pattern.format(cid=cid)).read_text().split()]
        except OSError:
            continue
    pytest.skip("the container's cgroup is not visible on this host")


def _cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


@pytest.mark.docker
def test_a_stdio_flood_costs_the_container_daemon_nothing() -> None:
    """A program writes 100 MB straight to fds 1 and 2: nothing in the container holds a pipe to
    the daemon (every fd 1 and 2 is /dev/null), and the container's shim spends no CPU on it."""
    from sandbox.docker.backend import DockerBackend, docker_available

    if not docker_available():
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    flood = ("import os\nchunk = b'x' * 65536\nfor _ in range(1600):\n    os.write(1, chunk)\n    os.write(2, chunk)\n"
             "print({fd: os.readlink(f'/proc/self/fd/{fd}') for fd in (0, 1, 2)})")
    with DockerBackend(pool_size=1, pool_max=1) as backend:
        backend.prewarm(LIMITS)
        cid = next(iter(_containers(backend)))
        pids = _container_host_pids(cid)
        held = {(pid, fd): os.readlink(f"/proc/{pid}/fd/{fd}") for pid in pids for fd in (1, 2)
                if os.path.exists(f"/proc/{pid}/fd/{fd}")}
        assert held and set(held.values()) == {"/dev/null"}, held
        shim = [int(e) for e in os.listdir("/proc") if e.isdigit() and cid in _cmdline(int(e))]
        before = sum(_cpu_ms(p) for p in shim)
        result = backend.run(flood, TOOLS, LIMITS)
        spent = sum(_cpu_ms(p) for p in shim) - before
    assert result.ok and "/dev/null" in result.answer and "pipe" not in result.answer, result.to_dict()
    assert shim and spent < 50, (shim, spent)  # 100 MB through the shim costs it 150-300 ms


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""
