"""What the tests read of the host's processes, from /proc: the live processes of some uids, and
the live descendants of a process (a zombie counts as gone: it has ended, and only its entry
waits to be reaped)."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

__all__ = ["processes_of", "descendants"]


def _state_and_parent(pid: str) -> tuple[str, int] | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1])


def processes_of(uids: Collection[int]) -> list[int]:
    """The pids of the live processes whose owner is one of ``uids``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid not in uids:
                    continue
            except OSError:
                continue
            seen = _state_and_parent(entry)
            if seen is not None and seen[0] != "Z":
                found.append(int(entry))
    return found


def descendants(root: int) -> set[int]:
    """The pids of every live descendant of ``root``."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            seen = _state_and_parent(entry)
            if seen is not None and seen[0] != "Z":
                parent[int(entry)] = seen[1]
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - found
        found |= frontier
    return found
