"""Owners of sandbox leftovers. Containers, cgroups and socket directories carry the pid of the
atc process that made them, so that the next backend can reap what a killed owner left behind."""

from __future__ import annotations

import os

__all__ = ["pid_alive"]


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one we may not signal still counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
