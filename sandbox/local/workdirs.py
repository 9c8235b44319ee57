"""What a local run without a mount namespace leaves on the host, and its removal.

A jail with namespaces works on a tmpfs of its own, which dies with the run. A jail without them
(``LocalBackend(namespaces=False)``, or a machine where unsharing fails and the jail falls back)
works in a directory of the host's temp dir, ``atc-run-<owner pid>-<random>``, owned by the run's
uid; its program sees the host's ``/tmp`` too, and a process it detaches from the run's process
group (``setsid``) outlives the run. So after such a run (``after_run``) the backend

1. kills the processes of the run's own uid (as root the run has a uid of its own, so every
   process of that uid belongs to this run),
2. removes what that uid made at the top of the shared temp directories (``/tmp``, ``/var/tmp``,
   ``/dev/shm``),
3. removes the work directory.

Work directories of an owner that died before it could do this (``kill -9``) are removed by the
next local backend that starts on the machine (``sweep``): the owner's pid in the name says
whether it is still alive, as for the Docker backend's containers and the cgroups.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import tempfile
import time
from collections.abc import Iterable

from sandbox.owners import pid_alive

__all__ = ["PREFIX", "make_workdir", "owner_of", "is_workdir", "remove_workdir", "after_run", "sweep",
           "run_uid", "temp_roots"]

PREFIX = "atc-run-"
#: World-writable directories a program without a mount namespace can leave files in.
SHARED_TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


def temp_roots() -> list[str]:
    """Where work directories are made: this process's temp dir, and ``/tmp``, which is where the
    jail (started with an empty environment) makes one when it falls back by itself."""
    return list(dict.fromkeys([tempfile.gettempdir(), "/tmp"]))


def make_workdir(uid: int | None = None) -> str:
    """A fresh work directory named after this process, owned by ``uid`` when we are root."""
    path = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
    if uid is not None and os.geteuid() == 0:
        os.chown(path, uid, uid)
    return path


def owner_of(name: str) -> int | None:
    """The owner pid in a work directory's name (``atc-run-<pid>-<random>``), or None."""
    if not name.startswith(PREFIX):
        return None
    pid, dash, rest = name[len(PREFIX):].partition("-")
    return int(pid) if dash and rest and pid.isdigit() else None


def is_workdir(path: str) -> bool:
    """Whether ``path`` is named like a work directory, directly inside one of the temp roots
    (the only paths ``remove_workdir`` touches)."""
    parent, name = os.path.split(os.path.normpath(path))
    roots = {os.path.realpath(r) for r in temp_roots()}
    return owner_of(name) is not None and os.path.realpath(parent) in roots


def remove_workdir(path: str) -> bool:
    """Remove a work directory and everything in it; True when it is gone.

    The directory belongs to the run's uid, so the program may have replaced it with a symbolic
    link (only the link is removed; ``rmtree`` never follows one) or taken the permissions off its
    subdirectories (given back, for an owner that is not root)."""
    if not is_workdir(path):
        return False
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            os.unlink(path)
            return True
    except FileNotFoundError:
        return True
    except OSError:
        return False

    for _ in range(3):  # a file may appear while we delete (a process still running): go again
        shutil.rmtree(path, onerror=_unlock)
        if not os.path.lexists(path):
            return True
    return False


def _unlock(function: object, failed: str, exc: object) -> None:
    """``rmtree``'s error handler: give directories their permissions back and try the entry once
    more. Only an owner that is not root needs this (root ignores permissions); the program ran as
    that same owner, so a path it swapped for a link can only lead to that owner's own files."""
    if os.geteuid() == 0:
        return
    for directory in (os.path.dirname(failed), failed):
        try:
            if os.path.isdir(directory) and not os.path.islink(directory):
                os.chmod(directory, 0o700)
        except OSError:
            pass
    try:
        if os.path.isdir(failed) and not os.path.islink(failed):
            shutil.rmtree(failed, ignore_errors=True)
        else:
            os.unlink(failed)
    except OSError:
        pass


def run_uid(isolation: Iterable[str]) -> int | None:
    """The run's own uid from its isolation report (``uid:N``, only when root gave it one)."""
    for word in isolation:
        if word.startswith("uid:") and word[4:].isdigit():
            return int(word[4:])
    return None


def _pids_of(uid: int) -> list[int]:
    """The processes running as ``uid``, zombies left out (dead, only waiting to be reaped)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid != uid:
                    continue
                with open(f"/proc/{entry}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in ("Z", "X"):
                pids.append(int(entry))
    return pids


def kill_uid(uid: int, *, rounds: int = 50) -> bool:
    """SIGKILL every process running as ``uid``, again until none is left (a process may fork
    while we look); True when none is. Only for a uid that no one but one sandbox run uses."""
    if uid < 1000:  # never a system account, whatever the caller says
        return False
    for _ in range(rounds):
        pids = _pids_of(uid)
        if not pids:
            return True
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.002)
    return not _pids_of(uid)


def remove_owned(uid: int, dirs: Iterable[str] = SHARED_TEMP_DIRS) -> int:
    """Remove what ``uid`` owns at the top of ``dirs``; returns how many entries went."""
    if uid < 1000:
        return 0
    removed = 0
    for top in dirs:
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if not entry.is_dir(follow_symlinks=False):
                    os.unlink(entry.path)
                else:
                    try:
                        os.rmdir(entry.path)  # the common case of a flood: empty directories
                    except OSError:
                        shutil.rmtree(entry.path, ignore_errors=True)
                removed += 1
            except OSError:
                continue
    return removed


def after_run(workdir: str, isolation: list[str]) -> None:
    """Clean up after a run that had no mount namespace (see the module docstring). A run with
    one left nothing on the host: nothing is done then."""
    if "mountns" not in isolation:
        uid = run_uid(isolation)
        if uid is not None and os.geteuid() == 0:
            kill_uid(uid)
            remove_owned(uid)
    if workdir:
        remove_workdir(workdir)


def sweep() -> int:
    """Remove the work directories of owners that are gone; returns how many were removed."""
    removed = 0
    me = os.getpid()
    for root in temp_roots():
        try:
            names = [e.name for e in os.scandir(root) if e.name.startswith(PREFIX)]
        except OSError:
            continue
        for name in names:
            owner = owner_of(name)
            if owner is not None and owner != me and not pid_alive(owner):
                removed += remove_workdir(os.path.join(root, name))
    return removed
