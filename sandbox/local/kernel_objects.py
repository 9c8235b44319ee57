"""Kernel objects that a run's uid can leave on the host, and their removal after the run.

SysV IPC objects (shared memory segments, message queues, semaphore sets) and kernel keys live in
the kernel, not in a process: when a run ends they stay, hold memory outside every limit, and the
next run under the same uid finds them (a 0666 segment or a key in the uid's user keyring is a
channel between runs). The jail makes them impossible first -- an IPC namespace that dies with
the run, and the system-call filter denies SysV IPC, POSIX message queues and keyrings -- so this
module is the last line, for a jail without namespaces or without a filter: after every run the
local backend removes what the run's DEDICATED uid owns (``teardown``), a newly claimed block of
uids is swept for what a killed owner left (``sweep``), and a uid whose objects cannot be removed
is never handed out again by this process.

What the host sees is read from ``/proc/sysvipc/{shm,msg,sem}`` and ``/proc/key-users``. IPC
objects are removed directly (``IPC_RMID``; root may remove any). Keys can only be found and
invalidated by their owner, so a short helper, this file run as a script by root, becomes the uid
and invalidates every key it owns::

    python3 -I -S kernel_objects.py --invalidate-keys UID --keyctl NR

The script part is STDLIB ONLY (it runs under a bare interpreter).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Leftovers", "ipc_objects", "key_users", "teardown", "sweep"]

IPC_KINDS = ("shm", "msg", "sem")
IPC_RMID = 0
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_LINK, KEYCTL_INVALIDATE, KEYCTL_GET_PERSISTENT = 1, 8, 21, 22
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -3, -4, -5
_PROC = "/proc"


@dataclass
class Leftovers:
    """What a uid still owns in the kernel after a teardown (empty: nothing)."""

    uid: int
    ipc: list[str] = field(default_factory=list)  # "shm:ID", "msg:ID", "sem:ID"
    keys: int = 0

    def __bool__(self) -> bool:
        return bool(self.ipc or self.keys)

    def to_dict(self) -> dict[str, Any]:
        return {"uid": self.uid, "ipc": self.ipc, "keys": self.keys}


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def ipc_objects(uids: Iterable[int] | None = None, proc: str = _PROC) -> list[tuple[str, int, int]]:
    """``(kind, id, uid)`` of every SysV IPC object in this IPC namespace that one of ``uids``
    owns or created (all objects when None), from ``/proc/sysvipc``."""
    wanted = None if uids is None else set(uids)
    found = []
    for kind in IPC_KINDS:
        lines = _read(f"{proc}/sysvipc/{kind}").splitlines()
        if not lines:
            continue
        header = lines[0].split()
        try:
            at_id, at_uid, at_cuid = 1, header.index("uid"), header.index("cuid")
        except ValueError:
            continue
        for line in lines[1:]:
            cols = line.split()
            try:
                ident, uid, cuid = int(cols[at_id]), int(cols[at_uid]), int(cols[at_cuid])
            except (IndexError, ValueError):
                continue
            if wanted is None or uid in wanted or cuid in wanted:
                found.append((kind, ident, uid if wanted is None or uid in wanted else cuid))
    return found


def key_users(proc: str = _PROC) -> dict[int, int]:
    """uid -> number of keys it owns, from ``/proc/key-users`` (uids with no key are absent)."""
    users = {}
    for line in _read(f"{proc}/key-users").splitlines():
        head, _, rest = line.partition(":")
        fields = rest.split()
        if head.strip().isdigit() and len(fields) >= 2:
            users[int(head)] = int(fields[1].split("/")[0])
    return users


def _remove_ipc(kind: str, ident: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    if kind == "shm":
        result = libc.shmctl(ident, IPC_RMID, None)
    elif kind == "msg":
        result = libc.msgctl(ident, IPC_RMID, None)
    else:
        result = libc.semctl(ident, 0, IPC_RMID)
    return bool(result == 0)


def _keyctl_number() -> int | None:
    # lazy: this file also runs alone as a script (``python -I -S kernel_objects.py
    # --invalidate-keys``, below), where nothing of the project can be imported at its top
    from sandbox.inside.seccomp import UnsupportedArch, arch_of, table

    try:
        return table(arch_of().name)["keyctl"]
    except UnsupportedArch:
        return None


def _invalidate_keys(uid: int, python: str) -> None:
    nr = _keyctl_number()
    if nr is None or os.geteuid() != 0:
        return
    try:
        subprocess.run([python, "-I", "-S", os.path.abspath(__file__), "--invalidate-keys", str(uid),
                        "--keyctl", str(nr)], env={}, cwd="/", stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        pass


def teardown(uid: int, python: str | None = None, *, ipc: bool = True, wait: float = 1.0,
             proc: str = _PROC) -> Leftovers:
    """Remove every SysV IPC object (``ipc=False``: the run had an IPC namespace of its own, so
    there are none in ours) and every key that ``uid`` owns; return what is left. Call it only
    for a uid that belongs to the run alone (a dedicated run uid, its processes all gone), and
    as root (otherwise only the IPC objects this process may remove go). Keys are destroyed by
    the kernel's garbage collector shortly after they are invalidated: wait up to ``wait`` s."""
    left = Leftovers(uid)
    objects = ipc_objects([uid], proc) if ipc else []
    for kind, ident, _ in objects:
        if not _remove_ipc(kind, ident):
            left.ipc.append(f"{kind}:{ident}")
    if objects:  # one removed while something still had it attached is only marked: gone is gone
        left.ipc = [f"{k}:{i}" for k, i, _ in ipc_objects([uid], proc) if f"{k}:{i}" in left.ipc]
    if key_users(proc).get(uid):
        _invalidate_keys(uid, python or sys.executable)
        deadline = time.monotonic() + wait
        while key_users(proc).get(uid) and time.monotonic() < deadline:
            time.sleep(0.01)
        left.keys = key_users(proc).get(uid, 0)
    return left


def sweep(uids: Iterable[int], python: str | None = None) -> list[Leftovers]:
    """``teardown`` of each of ``uids`` that owns anything now (one read of /proc when none does):
    for a block of uids just claimed, which a killed owner may have left dirty."""
    block = set(uids)
    dirty = {uid for _, _, uid in ipc_objects(block)} | (set(key_users()) & block)
    return [left for left in (teardown(uid, python) for uid in sorted(dirty)) if left]


# -- the helper: run as root, becomes the uid and invalidates its keys ----------------------------

def _helper(argv: list[str]) -> int:
    opts = dict(zip(argv[::2], argv[1::2], strict=True))
    uid, nr = int(opts["--invalidate-keys"]), int(opts["--keyctl"])
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # owner permissions now, and no capability left
    libc = ctypes.CDLL(None, use_errno=True)

    def keyctl(*args: int) -> int:
        return int(libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args)))

    # A session keyring of our own holding the uid's user, user-session and persistent keyrings:
    # what the run linked there is then "possessed", so keys it left with possessor-only
    # permissions are visible and removable too. Our session keyring goes last (it dies with this
    # process): invalidating it first would end that possession.
    session = keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0)
    for ring in (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING):
        keyctl(KEYCTL_LINK, ring, KEY_SPEC_SESSION_KEYRING)
    keyctl(KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_SESSION_KEYRING)
    # /proc/keys lists the keys this process may view: invalidate all the uid owns, keyrings last.
    owned = [(cols[7] == "keyring", int(cols[0], 16)) for cols in (line.split() for line in
             _read(f"{_PROC}/keys").splitlines()) if len(cols) > 7 and cols[5] == str(uid)]
    for _, key in sorted(owned):
        if key != session:
            keyctl(KEYCTL_INVALIDATE, key)
    return 0


if __name__ == "__main__":
    os._exit(_helper(sys.argv[1:]))
