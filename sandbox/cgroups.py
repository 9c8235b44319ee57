"""Per-sandbox cgroups for the local backend: one memory cgroup (and, with cgroup v1, one cpu
cgroup) per jailed runner, so that ALL processes of a run together stay under ``--memory`` and one
CPU. RLIMIT_AS caps each process only; without a cgroup a program that forks could hold
``max_processes`` times the memory limit and every core of the machine.

The backend makes the directories (``make_cgroup``), the jail moves itself into them before it
starts the program (``sandbox/jail.py``, which also writes the limits), and the backend removes
them once the jail has exited (``remove_cgroup``, which also says whether the kernel OOM-killed
in it). They are nested in this process's own cgroups so that the limits of whoever runs atc
still apply, and are named ``atc-sandbox-<owner pid>-<n>`` so that the cgroups of an owner that
died without cleaning up are removed by the next one. Without root or a writable controller
there are none, and only the rlimits hold.
"""

from __future__ import annotations

import itertools
import os
import time

from sandbox.owners import pid_alive

__all__ = ["cgroup_parent", "make_cgroup", "remove_cgroup"]

#: controller -> (v1 hierarchy, file that shows a directory is a cgroup of that controller)
_CONTROLLERS = {"memory": ("/sys/fs/cgroup/memory", "memory.limit_in_bytes"),
                "cpu": ("/sys/fs/cgroup/cpu", "cpu.cfs_quota_us")}
_parents: dict[str, str | None] = {}
_counter = itertools.count(1)


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


def make_cgroup(controller: str) -> str:
    """A fresh cgroup of ``controller`` for one sandbox ("" when none can be made)."""
    parent = cgroup_parent(controller)
    if parent is None:
        return ""
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


def remove_cgroup(path: str) -> bool:
    """Remove a sandbox's (now empty) cgroup; True when the kernel OOM-killed a process in it."""
    events = _read(os.path.join(path, "memory.oom_control")) + _read(os.path.join(path, "memory.events"))
    oom = any(line.split()[:1] == ["oom_kill"] and line.split()[1:2] != ["0"] for line in events.splitlines())
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
