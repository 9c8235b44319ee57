"""Per-sandbox cgroups for the local backend: one memory cgroup (and, with cgroup v1, one cpu
cgroup) per jailed runner, so that ALL processes of a run together stay under ``--memory`` and one
CPU. RLIMIT_AS caps each process only; without a cgroup a program that forks could hold
``max_processes`` times the memory limit and every core of the machine.

The backend makes the directories (``make_cgroup``), the jail moves itself into them before it
starts the program (``sandbox/inside/jail.py``, which also writes the limits), and the backend removes
them once the jail has exited (``remove_cgroup``, which also says whether the kernel OOM-killed
in it). They are nested in this process's own cgroups so that the limits of whoever runs atc
still apply, and are named ``atc-sandbox-<owner pid>-<n>`` so that the cgroups of an owner that
died without cleaning up are removed by the next one. Without root or a writable controller
there are none, and only the rlimits hold.

An empty cgroup whose run ended without an OOM kill is kept for the next sandbox of the same
memory limit (``release_cgroup``; at most ``_SPARE_MAX`` per controller) instead of removed:
making and removing the two cgroups of every run costs about half a millisecond of CPU, a good
part of a burst's per-run budget. Nothing of a run lives on in it: its processes are gone (the
cgroup is checked empty), a program cannot read cgroup files (no ``/sys`` in the jail), and the
jail writes the limits again. The spares go at exit.
"""

from __future__ import annotations

import atexit
import itertools
import os
import threading
import time

from sandbox.owners import pid_alive

__all__ = ["cgroup_parent", "make_cgroup", "release_cgroup", "remove_cgroup"]

#: controller -> (v1 hierarchy, file that shows a directory is a cgroup of that controller)
_CONTROLLERS = {"memory": ("/sys/fs/cgroup/memory", "memory.limit_in_bytes"),
                "cpu": ("/sys/fs/cgroup/cpu", "cpu.cfs_quota_us")}
_parents: dict[str, str | None] = {}
_counter = itertools.count(1)
_SPARE_MAX = 32
_spares: dict[tuple[str, str], list[str]] = {}  # (controller, tag) -> empty cgroups to hand out again
_ooms: dict[str, int] = {}  # a kept cgroup -> its OOM-kill count when it was last released
_spare_lock = threading.Lock()


def cgroup_parent(controller: str) -> str | None:
    """The directory in which this process makes sandbox cgroups of ``controller`` ("memory" or
    "cpu"), or None. cgroup v2 is used for memory only (one v2 cgroup holds all controllers)."""
    if controller not in _parents:
        parent = None
        if os.geteuid() == 0:
            hierarchy, marker = _CONTROLLERS[controller]
            for controllers, path in _own_cgroups():
                if controller in controllers.split(","):
                    candidate = hierarchy + path.rstrip("/")
                    usable = os.path.exists(os.path.join(candidate, marker))
                elif controllers == "" and controller == "memory":
                    candidate = "/sys/fs/cgroup" + path.rstrip("/")
                    usable = "memory" in _read(os.path.join(candidate, "cgroup.subtree_control"))
                else:
                    continue
                if usable and os.access(candidate, os.W_OK):
                    parent = candidate
                    break
        _parents[controller] = parent
        if parent is not None:
            _remove_stale(parent)
    return _parents[controller]


def make_cgroup(controller: str, tag: str = "") -> str:
    """An empty cgroup of ``controller`` for one sandbox ("" when none can be made): a spare one
    released with the same ``tag`` (the backend's memory limit), else a new one."""
    parent = cgroup_parent(controller)
    if parent is None:
        return ""
    with _spare_lock:
        spare = _spares.get((controller, tag))
        if spare:
            return spare.pop()
    path = f"{parent}/atc-sandbox-{os.getpid()}-{next(_counter)}"
    try:
        os.mkdir(path)
    except OSError:
        return ""
    if any(os.path.exists(os.path.join(path, f)) for f in ("memory.limit_in_bytes", "memory.max",
                                                               "cpu.cfs_quota_us")):
        return path
    remove_cgroup(path)
    return ""


def _oom_kills(path: str) -> int:
    events = _read(os.path.join(path, "memory.oom_control")) + _read(os.path.join(path, "memory.events"))
    for line in events.splitlines():
        fields = line.split()
        if fields[:1] == ["oom_kill"] and len(fields) == 2 and fields[1].isdigit():
            return int(fields[1])
    return 0


def release_cgroup(path: str, controller: str, tag: str = "") -> bool:
    """A sandbox is done with ``path`` (its jail has exited): keep it for the next sandbox with
    ``tag`` when it is empty and nothing was OOM-killed in it, else remove it. True when the
    kernel OOM-killed a process in it during this run."""
    kills = _oom_kills(path)
    oom = kills > _ooms.get(path, 0)
    if not oom and not _read(os.path.join(path, "cgroup.procs")).strip() and os.path.isdir(path):
        with _spare_lock:
            spare = _spares.setdefault((controller, tag), [])
            if len(spare) < _SPARE_MAX:
                _ooms[path] = kills
                spare.append(path)
                return False
    remove_cgroup(path)
    return oom


def remove_cgroup(path: str) -> bool:
    """Remove a sandbox's (now empty) cgroup; True when the kernel OOM-killed a process in it."""
    oom = _oom_kills(path) > _ooms.pop(path, 0)
    for _ in range(50):  # the last processes of the namespace may still be exiting
        try:
            os.rmdir(path)
            break
        except FileNotFoundError:
            break
        except OSError:
            time.sleep(0.01)
    return oom


def _own_cgroups() -> list[tuple[str, str]]:
    """(controllers, path) of each line of /proc/self/cgroup."""
    try:
        with open("/proc/self/cgroup") as f:
            entries = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return []
    return [(e[1], e[2]) for e in entries if len(e) == 3]


def _remove_stale(parent: str) -> None:
    """Remove the sandbox cgroups of owners that died before they could clean up (their processes
    died with their namespaces; an empty cgroup is only a directory)."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        fields = name.split("-")
        if len(fields) == 4 and name.startswith("atc-sandbox-") and fields[2].isdigit():
            owner = int(fields[2])
            if owner != os.getpid() and not pid_alive(owner):
                remove_cgroup(os.path.join(parent, name))


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


@atexit.register
def _remove_spares() -> None:
    with _spare_lock:
        kept = [path for spare in _spares.values() for path in spare]
        _spares.clear()
    for path in kept:
        remove_cgroup(path)
