"""Warm machinery keeps runs apart, sizes itself to demand, and leaves nothing behind.

A program that litters (files in every writable place, environment variables, a non-daemon
thread, a detached child process, a process that keeps changing its pid) runs on a backend's warm
machinery -- the local fork server, a reused Docker container -- and the NEXT run on that same
machinery must see none of it. Real jails, real containers; Docker tests skip without an engine
(and fail under ATC_REQUIRE_DOCKER=1).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.api import Backend, Limits, Toolset
from sandbox.local.backend import LocalBackend, uid_block
from sandbox.pool import Demand, PoolBounds, machine_max
from tests.support.procs import processes_of

LIMITS = Limits(timeout=20)
TOOLS = Toolset(collections=[])

#: Litters everywhere it can and reports what it managed to leave behind.
LITTER = r"""
import json, os, subprocess, sys, threading, time
made = []
for d in ("/tmp", os.getcwd(), "/dev/shm", "/dev/mqueue", os.environ.get("HOME") or "/", "/var/tmp", "/work"):
    try:
        with open(os.path.join(d, "atc-leak-file"), "w") as f:
            f.write("secret-of-the-previous-run")
        os.chmod(os.path.join(d, "atc-leak-file"), 0o666)
        made.append(d)
    except OSError:
        pass
try:
    os.makedirs("/tmp/atc-leak-dir/inner")
    open("/tmp/atc-leak-dir/inner/x", "w").write("x")
    os.chmod("/tmp/atc-leak-dir", 0)  # even unreadable to its owner
    made.append("/tmp/atc-leak-dir")
except OSError:
    pass
os.environ["ATC_LEAK"] = "1"
os.putenv("ATC_LEAK_PUT", "1")
threading.Thread(target=time.sleep, args=(3600,), name="atc-leak-thread", daemon=False).start()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", "atc-leak-daemon"],
                         start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
# A process that keeps changing its pid (forks, and the parent exits), so a scan of /proc can miss it.
hopper = "import os, time\nwhile True:\n    time.sleep(0.001)\n    if os.fork():\n        os._exit(0)\n"
subprocess.Popen([sys.executable, "-c", hopper, "atc-leak-daemon"], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.05)
alive = child.poll() is None
print(json.dumps({"made": made, "daemon": alive, "server": open("/proc/1/stat").read().split()[21]}))
"""

#: What the next run looks for.
LOOK = r"""
import json, os, threading
found = []
for d in ("/tmp", os.getcwd(), "/dev/shm", "/dev/mqueue", os.environ.get("HOME") or "/", "/var/tmp", "/work"):
    try:
        found += [os.path.join(d, n) for n in os.listdir(d) if n.startswith("atc-leak")]
    except OSError:
        pass
procs = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            if b"atc-leak-daemon" in open(f"/proc/{pid}/cmdline", "rb").read():
                procs.append(int(pid))
        except OSError:
            pass
print(json.dumps({"files": found, "env": [k for k in os.environ if k.startswith("ATC_LEAK")],
                  "procs": procs, "threads": [t.name for t in threading.enumerate() if "leak" in t.name],
                  "server": open("/proc/1/stat").read().split()[21]}))
"""


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """A backend whose warm machinery is one runner deep, so the second run reuses it."""
    if request.param == "local":
        with LocalBackend(pool_size=1, pool_max=1) as local:
            yield local
        return
    from sandbox.docker.backend import DockerBackend, docker_available

    if not docker_available():
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    with DockerBackend(pool_size=1, pool_max=1) as docker:
        yield docker


def _json(result: object) -> dict[str, object]:
    assert getattr(result, "ok", False), result.to_dict()  # type: ignore[attr-defined]
    out = json.loads(result.answer.strip().splitlines()[-1])  # type: ignore[attr-defined]
    assert isinstance(out, dict)
    return out


def test_the_next_run_sees_nothing_the_previous_one_left(backend: Backend) -> None:
    for _ in range(2):  # twice: the machinery that served a littering run serves the next one
        left = _json(backend.run(LITTER, TOOLS, LIMITS))
        assert "/tmp" in left["made"] and "/tmp/atc-leak-dir" in left["made"] and left["daemon"] is True, left
        seen = _json(backend.run(LOOK, TOOLS, LIMITS))
        assert seen["files"] == [] and seen["env"] == [] and seen["procs"] == [] and seen["threads"] == [], seen
        if backend.name == "docker":  # the same container served both runs
            assert len(getattr(backend, "_live", {})) == 1, getattr(backend, "_live", {})


NAMESPACES = ("mnt", "net", "pid", "ipc", "uts", "cgroup")


def test_every_forked_jail_has_namespaces_of_its_own_and_the_server_keeps_its_own() -> None:
    """As root the fork server makes each jail's namespaces itself around its fork and goes back
    to its own: no two live runs may share one, none may be the server's or the host's, and the
    server must end where it started (a server left in a jail's namespaces would fork the next
    jail inside it). Runs overlap in fours: a namespace's number is reused once it is freed."""
    from concurrent.futures import ThreadPoolExecutor

    read = (f"import json, os, time\nnames = {{n: os.readlink('/proc/self/ns/' + n) for n in {NAMESPACES!r}}}\n"
            "time.sleep(0.4)\nprint(json.dumps(names))")
    host = {n: os.readlink(f"/proc/self/ns/{n}") for n in NAMESPACES}
    with LocalBackend(pool_size=4, pool_max=4) as backend, ThreadPoolExecutor(4) as pool:
        assert _json(backend.run(read, TOOLS, LIMITS))
        server = backend._server
        assert server is not None and server.alive()
        before = {n: os.readlink(f"/proc/{server.proc.pid}/ns/{n}") for n in NAMESPACES}
        for _ in range(3):
            runs = list(pool.map(lambda _: _json(backend.run(read, TOOLS, LIMITS)), range(4)))
            for name in NAMESPACES:
                seen = [run[name] for run in runs]
                assert len(set(seen)) == len(seen), (name, seen)
                assert host[name] not in seen and before[name] not in seen
        after = {n: os.readlink(f"/proc/{server.proc.pid}/ns/{n}") for n in NAMESPACES}
    assert after == before
    if os.geteuid() == 0:  # the server's private mount namespace holds the jails' root skeleton
        assert before["mnt"] != host["mnt"]


RUN_NAMESPACES = ("user", "mnt", "net", "pid", "ipc", "uts")


@pytest.mark.docker
def test_every_run_in_a_reused_container_has_namespaces_and_mounts_of_its_own() -> None:
    """Runs one after another in one container: each in user, mount, network, PID, IPC and UTS
    namespaces that are neither the last run's nor the container's server's or template's, and
    whose mount table holds the run's own root and nothing of the container."""
    from sandbox.docker.backend import DockerBackend, docker_available

    if not docker_available():
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    read = (f"import json, os\nseen = {{n: os.readlink('/proc/self/ns/' + n) for n in {RUN_NAMESPACES!r}}}\n"
            "seen['mounts'] = sorted(line.split()[4] for line in open('/proc/self/mountinfo'))\n"
            "print(json.dumps(seen))")
    with DockerBackend(pool_size=1, pool_max=1) as backend:
        runs = [_json(backend.run(read, TOOLS, LIMITS)) for _ in range(4)]
        [cid] = backend._live  # one container served every run
        server = int(backend.client.api.inspect_container(cid)["State"]["Pid"])
        try:  # the server and its template (its first child)
            template = int(Path(f"/proc/{server}/task/{server}/children").read_text().split()[0])
            theirs = {os.readlink(f"/proc/{pid}/ns/{n}") for pid in (server, template) for n in RUN_NAMESPACES}
        except (OSError, IndexError):  # not allowed to look into another uid's processes here
            theirs = set()
    for before, after in zip(runs, runs[1:], strict=False):  # made while the one before was alive
        assert all(before[n] != after[n] for n in RUN_NAMESPACES), (before, after)
    for run in runs:
        assert not theirs & {run[n] for n in RUN_NAMESPACES}, (run, theirs)
        assert run["mounts"] == sorted(["/", "/usr", "/dev/null", "/dev/zero", "/dev/random", "/dev/urandom",
                                        "/dev/shm", "/tmp", "/proc"]), run["mounts"]


def test_a_fork_server_that_cannot_make_the_namespaces_lets_each_jail_make_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the server cannot take the namespaces and the root skeleton on itself (not root, or
    refused), every jail makes its own as a jail started from scratch does: the same isolation."""
    import sandbox.local.backend as local
    from sandbox.local.backend import jail_path

    wrapper = tmp_path / "jail_without_skeleton.py"
    wrapper.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(jail_path().parent)!r})\n"
        "from jail import *  # noqa\n"
        "import jail as _real\n"
        "def build_skeleton(*args):\n    raise OSError(1, 'no skeleton here (test)')\n"
        "if __name__ == '__main__':\n    os._exit(_real.main(sys.argv[1:]))\n")
    os.chmod(tmp_path, 0o755)
    monkeypatch.setattr(local, "jail_path", lambda: wrapper)
    read = "import os\nprint(sorted(os.listdir('/')), os.getpid())"
    with LocalBackend(pool_size=1, pool_max=1) as backend:
        results = [backend.run(read, TOOLS, LIMITS) for _ in range(3)]
        assert backend._server is not None and backend._server.alive()
        deadline = time.monotonic() + 10
        while not any(backend._warm.values()) and time.monotonic() < deadline:
            time.sleep(0.02)
        warm = [w for ws in backend._warm.values() for w in ws]
        # Made by the jail itself: the server forked the jail, the jail forked the namespace's PID 1.
        assert warm and all(w.pid != w.proc.pid for w in warm)
    for r in results:
        assert r.ok, r.to_dict()
        assert r.answer.split("]")[1].strip() == "2"  # PID 2 of its own PID namespace
        for wanted in ("netns", "pidns", "mountns", "seccomp:atc-v2", "rlimits"):
            assert wanted in r.isolation, (wanted, r.isolation)
        assert "'work'" in r.answer and "'home'" not in r.answer


def _host_sandbox_processes(uids: set[int] | None = None) -> list[int]:
    """Host processes running under ``uids`` (default: every sandbox uid of this test process;
    other backends of the same process, still alive from earlier tests, share that block)."""
    return processes_of(uid_block() if uids is None else uids)


def test_local_close_leaves_no_process_behind() -> None:
    backend = LocalBackend(pool_size=2, pool_max=4)
    mine: set[int] = set()  # the uids this backend hands out: its runners, and nothing else
    draw = backend._next_uid

    def recording() -> int:
        uid = draw()
        mine.add(uid)
        return uid

    backend._next_uid = recording  # type: ignore[method-assign]
    assert backend.run(LITTER, TOOLS, LIMITS).ok
    assert backend.prewarm(LIMITS) >= 2
    server = backend._server
    assert server is not None and server.alive() and mine
    backend.close()
    deadline = time.monotonic() + 5
    while _host_sandbox_processes(mine) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _host_sandbox_processes(mine) == []
    assert server.proc.poll() is not None


@pytest.mark.docker
def test_docker_close_leaves_no_container_behind() -> None:
    from sandbox.docker.backend import DockerBackend, connect, docker_available
    from sandbox.docker.engine import INSTANCE_LABEL

    if not docker_available():
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    with DockerBackend(pool_size=2, pool_max=3) as backend:
        assert backend.run(LITTER, TOOLS, LIMITS).ok
        backend.prewarm(LIMITS)
    client = connect(timeout=10)
    try:
        left = client.api.containers(all=True, filters={"label": f"{INSTANCE_LABEL}={backend.instance}"})
    finally:
        client.close()
    assert left == []


def _burst(backend: LocalBackend, runs: int) -> int:
    """Back-to-back runs; returns the largest number of runners held (ready + starting)."""
    held = 0
    for _ in range(runs):
        result = backend.run("print(1)", TOOLS, LIMITS)
        assert result.ok and result.answer == "1\n", result.to_dict()
        stats = backend.pool_stats(LIMITS)
        held = max(held, stats["ready"] + stats["starting"])
    return held


def test_local_pool_grows_in_a_burst_within_its_bound_and_shrinks_when_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATC_POOL_IDLE_SECONDS", "1")
    with LocalBackend(pool_size=1, pool_max=3) as backend:
        assert backend.bounds == PoolBounds(1, 3, 1.0)
        backend.prewarm(LIMITS)
        held = _burst(backend, 25)
        stats = backend.pool_stats(LIMITS)
        assert 1 < stats["peak"] <= 3, stats  # it grew, never beyond the bound
        assert held <= 3
        time.sleep(2.5)  # idle: back to the minimum
        stats = backend.pool_stats(LIMITS)
        assert stats["wanted"] == 1 and stats["ready"] + stats["starting"] <= 1, stats


@pytest.mark.docker
def test_docker_pool_follows_concurrency_within_its_bound_and_shrinks_when_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from sandbox.docker.backend import DockerBackend, docker_available

    if not docker_available():
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    monkeypatch.setenv("ATC_POOL_IDLE_SECONDS", "2")
    with DockerBackend(pool_size=1, pool_max=3) as backend:
        backend.prewarm(LIMITS)
        most = 0
        for _ in range(20):  # one after another: one container running, one being reset (and one
            # more if a run had to wait for a reset: a loaded machine), never beyond the bound
            assert backend.run("print(1)", TOOLS, LIMITS).ok
            most = max(most, backend.pool_stats(LIMITS)["containers"])
        assert 2 <= backend.pool_stats(LIMITS)["peak"] <= 3 and most <= 3, (backend.pool_stats(LIMITS), most)

        failures: list[object] = []

        def runs() -> None:
            for _ in range(4):
                result = backend.run("print(1)", TOOLS, LIMITS)
                if not result.ok:
                    failures.append(result.to_dict())

        threads = [threading.Thread(target=runs) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        stats = backend.pool_stats(LIMITS)
        assert stats["peak"] == 3, stats  # it grew with the runs at once, never beyond the bound
        deadline = time.monotonic() + 10
        while backend.pool_stats(LIMITS)["containers"] > 3 and time.monotonic() < deadline:
            time.sleep(0.1)  # a container started for a 4th run at once goes after it
        assert backend.pool_stats(LIMITS)["containers"] <= 3
        deadline = time.monotonic() + 15
        while backend.pool_stats(LIMITS)["containers"] > 1 and time.monotonic() < deadline:
            time.sleep(0.2)  # idle: back to pool_size
        stats = backend.pool_stats(LIMITS)
        assert stats["wanted"] == 1 and stats["containers"] == 1, stats


# --- the sizing policy on its own ------------------------------------------------------------------


def test_demand_doubles_on_misses_up_to_the_bound_and_falls_back_when_idle() -> None:
    demand = Demand(PoolBounds(2, 6, idle_seconds=5))
    assert demand.wanted(now=100.0) == 2
    for i in range(5):
        demand.taken(missed=True, now=100.0 + i * 0.01)
    assert demand.wanted(now=100.1) == 6 and demand.peak == 6
    assert demand.wanted(now=200.0) == 2  # idle for longer than idle_seconds


def test_demand_follows_runs_at_once_when_not_following_the_rate() -> None:
    demand = Demand(PoolBounds(1, 4), follow_rate=False)
    for i in range(50):
        demand.taken(missed=False, now=10.0 + i * 0.001)
        demand.busy(1, now=10.0 + i * 0.001)
    assert demand.wanted(now=10.1) == 2  # one running, one being reset
    demand.busy(7, now=10.1)
    assert demand.wanted(now=10.1) == 4


def test_demand_grows_by_one_per_late_run_up_to_the_bound_and_falls_back_when_idle() -> None:
    demand = Demand(PoolBounds(1, 4, idle_seconds=5), follow_rate=False)
    demand.taken(missed=False, now=10.0)
    demand.busy(1, now=10.0)
    assert demand.wanted(now=10.0) == 2  # one running, one being reset
    demand.late(now=10.01)  # a run waited for a reset: the resets take longer than a run
    assert demand.wanted(now=10.01) == 3
    for _ in range(5):
        demand.late(now=10.02)
    assert demand.wanted(now=10.02) == 4 and demand.peak == 4  # never beyond the bound
    assert demand.wanted(now=20.0) == 1  # idle: back to the minimum


def test_demand_keeps_enough_to_cover_one_start_at_the_observed_rate() -> None:
    demand = Demand(PoolBounds(1, 10))
    demand.started(0.05)
    for i in range(20):
        demand.taken(missed=False, now=10.0 + i * 0.01)  # a run every 10 ms
    assert 4 <= demand.wanted(now=10.2) <= 10


def test_bounds_come_from_the_environment_or_the_machine() -> None:
    assert PoolBounds.from_env(2, per_runner_mb=24, env={"ATC_POOL_MAX": "5"}).maximum == 5
    assert PoolBounds.from_env(4, per_runner_mb=24, env={"ATC_POOL_MAX": "1"}).maximum == 4  # never below the minimum
    assert PoolBounds.from_env(0, per_runner_mb=24, env={"ATC_POOL_MAX": "9"}) == PoolBounds(0, 0)
    assert PoolBounds.from_env(2, per_runner_mb=24, env={}).maximum == max(2, machine_max(24))
    with pytest.raises(ValueError, match="ATC_POOL_MAX"):
        PoolBounds.from_env(2, per_runner_mb=24, env={"ATC_POOL_MAX": "lots"})
    assert machine_max(24, cpus=2) <= 8 and machine_max(10**9, cpus=64) == 1
