"""The uids of local sandboxes: a block of 100 per atc process, one uid per live runner.

The local jail (as root) runs each program under a uid of its own, so that RLIMIT_NPROC counts
that run's processes only and nothing a run leaves in the kernel under its uid (SysV IPC objects,
keys: ``sandbox/local/kernel_objects.py``) can be found by another run. Blocks are claimed between atc
processes with ``flock`` (``claim_uid_block``); within a process, every backend draws from one
pool (``next_uid``) and gives a uid back only once its runner is reaped and torn down
(``release_uid``). A uid whose kernel objects could not be removed is retired for good.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
from pathlib import Path

from protocols.errors import SandboxError
from sandbox.local.kernel_objects import sweep

__all__ = ["RETIRED", "claim_uid_block", "uid_block", "next_uid", "release_uid"]

_UID_BASE = 200_000
_UID_BLOCKS = 1000
_claimed: dict[int, range] = {}  # pid -> its block: a forked child claims a block of its own
_claim_lock = threading.Lock()
#: Run uids whose kernel objects could not be removed: never handed out again by this process.
RETIRED: set[int] = set()
#: Uids of runners not yet reaped (and torn down): no other runner of this process gets them.
_IN_USE: set[int] = set()
_uid_cursor = [0]


def claim_uid_block(start: int, lock_dir: Path) -> tuple[range, int | None]:
    """Claim the first free block of 100 uids from ``start`` on: a block is taken while some
    process holds an exclusive ``flock`` on ``lock_dir/<n>.lock``. The kernel drops the lock when
    the holder dies, even by SIGKILL, so a dead atc process never keeps a block. Returns the block
    and the lock's fd (None when no lock could be taken: then the block is only likely free)."""
    try:
        lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        lock_dir = Path("/nonexistent")
    for i in range(_UID_BLOCKS):
        n = (start + i) % _UID_BLOCKS
        try:
            fd = os.open(lock_dir / f"{n}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            break
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        first = _UID_BASE + n * 100
        return range(first, first + 100), fd
    first = _UID_BASE + (start % _UID_BLOCKS) * 100
    return range(first, first + 100), None


def _uid_lock_dir() -> Path:
    root = Path("/run") if os.getuid() == 0 and os.access("/run", os.W_OK) else Path(tempfile.gettempdir())
    return root / f"atc-uid-blocks-{os.getuid()}"


def uid_block() -> range:
    """The uids this process gives its sandboxes: each run gets the next one, so RLIMIT_NPROC
    counts that run's processes only. The block is claimed once per process (see
    ``claim_uid_block``; the lock's fd stays open for the process's life), so two atc processes
    never hand out the same uids."""
    pid = os.getpid()
    with _claim_lock:
        if pid not in _claimed:
            _claimed[pid], _ = claim_uid_block(pid, _uid_lock_dir())
            if os.geteuid() == 0:
                # The block's previous owner may have been killed before it could clean up.
                RETIRED.update(left.uid for left in sweep(_claimed[pid]))
        return _claimed[pid]


def next_uid() -> int:
    """A uid of this process's block for a new runner: the next one that no live runner holds and
    that is not retired. Every backend of the process draws from here, so two runs never share a
    uid (nor RLIMIT_NPROC, nor kernel objects) while both exist."""
    block = uid_block()
    with _claim_lock:
        for _ in range(len(block)):
            _uid_cursor[0] += 1
            uid = block[_uid_cursor[0] % len(block)]
            if uid not in RETIRED and uid not in _IN_USE:
                _IN_USE.add(uid)
                return uid
    raise SandboxError(f"all {len(block)} sandbox uids of this process are in use or hold kernel objects that "
                       "could not be removed", hint="run fewer sandboxes at once; see /proc/key-users and ipcs")


def release_uid(uid: int) -> None:
    with _claim_lock:
        _IN_USE.discard(uid)
