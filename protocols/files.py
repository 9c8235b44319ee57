"""Writing files so that a reader never sees half of one: every store, cache and index of atc
writes through ``atomic_write``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write"]


def atomic_write(path: Path, data: bytes | str, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never a part:
    a temporary file in the same directory (same file system, so the rename is atomic), fsynced
    (a crash right after cannot leave an empty file under the new name), then ``os.replace``d.
    ``mode``: the file's permissions (default: the process umask's, as ``mkstemp`` gives 0600)."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
