"""The vector cache: every vector an embedder computed, by a hash of its text, in one append-only file.

``ATC_HOME/embeddings/<embedder>.vec``: a 16-byte header (``ATCVEC``, version, the vector length)
and then records of ``dim`` little-endian float32 numbers followed by the text's 16-byte hash.
Adding vectors appends records under an exclusive ``flock`` of the file: a write costs what it
adds, whatever the cache holds (the ``.npy`` file this replaces was rewritten whole on each
write: 80 MB at 17,000 tools, and an import wrote it every 20 seconds). Readers take no lock and
map the file; the index of hashes is built once per process and extended as the file grows.

Why a reader never takes half a record: a record is written in one ``write`` call, vector first
and hash last, and the kernel copies the bytes in order, so a record whose hash a reader sees is
complete; a record at the end whose hash is still zeros is being written and is read again next
time. A writer that died in the middle of a record leaves an incomplete tail, which the next
writer pads with zeros to a whole record (a dead one, skipped by readers: its hash is zeros, and
records follow it) before it appends; nothing is ever truncated, so a reader's map stays valid.
A vector length other than the file's (another model under the same name) starts a new file,
written aside and renamed over the old one.
"""

from __future__ import annotations

import fcntl
import os
import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocols.files import atomic_write

if TYPE_CHECKING:
    import numpy as np

__all__ = ["VectorCache", "HASH_BYTES"]

HASH_BYTES = 16
_MAGIC = b"ATCVEC\x01\x00"
_HEADER = 16
_ZERO = bytes(HASH_BYTES)


def _header(dim: int) -> bytes:
    return _MAGIC + struct.pack("<II", dim, 0)


class VectorCache:
    """Vectors of one embedder by text hash (see the module doc)."""

    def __init__(self, home: Path, embedder_name: str) -> None:
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", embedder_name)[:100]
        self.path = Path(home) / "embeddings" / f"{slug}.vec"
        self._legacy = self.path.with_suffix(".npy")
        #: (inode, dim, records seen, hash -> record, the map of the file)
        self._state: tuple[int, int, int, dict[bytes, int], Any] | None = None

    # -- reading -------------------------------------------------------------------------------

    def _records(self) -> tuple[dict[bytes, int], Any, int]:
        """The index of hashes, the file's records as a structured array (or None) and its dim."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        if self._legacy.exists() and not self.path.exists():
            self._migrate()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return {}, None, 0
        state = self._state
        if state is not None and state[0] != st.st_ino:
            state = None  # replaced (another vector length): read it anew
        try:
            if state is None:
                with open(self.path, "rb") as f:
                    head = f.read(_HEADER)
                if len(head) < _HEADER or head[:8] != _MAGIC:
                    return {}, None, 0  # not ours: only a cache, vectors get computed again
                dim = struct.unpack("<I", head[8:12])[0]
                state = (st.st_ino, dim, 0, {}, None)
            ino, dim, seen, keys, records = state
            size = 4 * dim + HASH_BYTES
            count = max(0, (st.st_size - _HEADER) // size)
            if records is None or len(records) != count:
                if count == 0:
                    return keys, None, dim
                dtype = np.dtype([("v", "<f4", (dim,)), ("h", "V16")])
                records = np.memmap(self.path, dtype=dtype, mode="r", offset=_HEADER, shape=(count,))
            if seen < count:
                seen = self._scan(records, keys, seen, count)
        except (OSError, ValueError):
            return {}, None, 0
        self._state = (ino, dim, seen, keys, records)
        return keys, records, dim

    @staticmethod
    def _scan(records: Any, keys: dict[bytes, int], seen: int, count: int) -> int:
        """Add records ``seen``..``count`` to ``keys``; returns where the next scan starts (a
        record still being written, its hash zeros, at the end)."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        blob = np.ascontiguousarray(records["h"][seen:count]).tobytes()
        live = np.flatnonzero(np.frombuffer(blob, dtype="<u8").reshape(-1, 2).any(axis=1)).tolist()
        for n in live:
            keys.setdefault(blob[n * HASH_BYTES:(n + 1) * HASH_BYTES], seen + n)
        # Zeros after the last complete record may be a record in the making: looked at again.
        return seen + live[-1] + 1 if live else seen

    def get(self, hashes: Sequence[bytes]) -> list[np.ndarray | None]:
        keys, records, _ = self._records()
        if records is None:
            return [None] * len(hashes)
        vectors = records["v"]
        return [vectors[keys[h]] if h in keys else None for h in hashes]

    def __len__(self) -> int:
        return len(self._records()[0])

    # -- writing -------------------------------------------------------------------------------

    def put(self, hashes: Sequence[bytes], vectors: np.ndarray) -> None:
        """Add the vectors of ``hashes`` that the cache does not hold yet."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        if not len(hashes):
            return
        vectors = np.asarray(vectors, dtype="<f4")
        dim = int(vectors.shape[1])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys, _, have = self._records()
        if have and have != dim:
            self._replace(hashes, vectors)
            return
        with open(self.path, "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                size = os.fstat(f.fileno()).st_size
                if size == 0:
                    f.write(_header(dim))
                    size = _HEADER
                else:
                    f.seek(0)
                    head = f.read(_HEADER)
                    if head[:8] != _MAGIC or struct.unpack("<I", head[8:12])[0] != dim:
                        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
                        self._replace(hashes, vectors)
                        return
                record = 4 * dim + HASH_BYTES
                ragged = (size - _HEADER) % record
                if ragged:  # a writer died mid-record: make it a whole, dead one
                    f.write(bytes(record - ragged))
                keys, _, _ = self._records()  # what other writers added meanwhile
                fresh: dict[bytes, int] = {}
                for i, h in enumerate(hashes):
                    if h not in keys and h not in fresh and h != _ZERO:
                        fresh[h] = i
                if fresh:
                    rows = np.zeros(len(fresh), dtype=np.dtype([("v", "<f4", (dim,)), ("h", "V16")]))
                    rows["v"] = vectors[list(fresh.values())]
                    rows["h"] = np.frombuffer(b"".join(fresh), dtype="V16")
                    f.write(rows.tobytes())  # one write: vector first, hash last (module doc)
                    f.flush()
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def _replace(self, hashes: Sequence[bytes], vectors: np.ndarray) -> None:
        """A new file of this vector length in place of the old one (readers keep the old map)."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        dim = int(vectors.shape[1])
        unique = dict(zip(hashes, range(len(hashes)), strict=True))
        rows = np.zeros(len(unique), dtype=np.dtype([("v", "<f4", (dim,)), ("h", "V16")]))
        rows["v"] = vectors[list(unique.values())]
        rows["h"] = np.frombuffer(b"".join(unique), dtype="V16")
        atomic_write(self.path, _header(dim) + rows.tobytes())
        self._state = None

    def _migrate(self) -> None:
        """The vectors of the ``.npy`` file of atc before issue #25, moved into the new file once."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        try:
            old = np.load(self._legacy, mmap_mode="r")
            # numpy's fixed-width bytes drop trailing NULs on the way out: padded back.
            hashes = [bytes(h).ljust(HASH_BYTES, b"\0") for h in old["h"]]
            vectors = np.asarray(old["v"], dtype="<f4")
        except (OSError, ValueError, KeyError, IndexError):
            return
        with open(self._legacy, "rb") as f:  # two processes that migrate at once: one does it
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                if not self.path.exists() and len(hashes):
                    self._replace(hashes, vectors)
                self._legacy.unlink(missing_ok=True)
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)
