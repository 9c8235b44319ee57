"""The vector cache (atc/retrieval/vectorstore.py): append-only, safe for readers that do not
lock, against writers in other processes, torn tails and the .npy file of before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from atc.retrieval.embedders import text_hash
from atc.retrieval.vectorstore import VectorCache

ROOT = Path(__file__).resolve().parents[3]


def _vectors(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def test_a_write_appends_what_it_adds_and_never_rewrites(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "m")
    first = [text_hash(f"t{i}") for i in range(5)]
    cache.put(first, _vectors(5))
    size, inode = cache.path.stat().st_size, cache.path.stat().st_ino
    head = cache.path.read_bytes()
    more = [text_hash(f"u{i}") for i in range(3)]
    cache.put(first[:2] + more, _vectors(5, seed=1))  # two already there: only three are added
    assert cache.path.stat().st_ino == inode
    assert cache.path.stat().st_size == size + 3 * (8 * 4 + 16)
    assert cache.path.read_bytes()[:size] == head  # what was there is untouched
    got = VectorCache(tmp_path, "m").get(first + more + [text_hash("absent")])
    assert all(v is not None for v in got[:8]) and got[8] is None
    assert np.array_equal(np.vstack(got[:5]), _vectors(5))  # the first vectors won
    assert np.array_equal(np.vstack(got[5:8]), _vectors(5, seed=1)[2:])


def test_a_reader_sees_what_others_append_after_it_opened(tmp_path: Path) -> None:
    reader = VectorCache(tmp_path, "m")
    writer = VectorCache(tmp_path, "m")
    writer.put([text_hash("a")], _vectors(1))
    assert reader.get([text_hash("a")])[0] is not None
    writer.put([text_hash("b")], _vectors(1, seed=2))
    assert np.array_equal(reader.get([text_hash("b")])[0], _vectors(1, seed=2)[0])
    assert len(reader) == 2


def test_writers_in_other_processes_lose_nothing(tmp_path: Path) -> None:
    code = ("import sys, numpy as np; from pathlib import Path; from atc.retrieval.vectorstore import VectorCache; "
            "from atc.retrieval.embedders import text_hash; w = int(sys.argv[1]); c = VectorCache(Path(sys.argv[2]), 'm')\n"
            "for step in range(20):\n"
            "    texts = [f'{w}-{step}-{i}' for i in range(10)] + [f'shared-{step}-{i}' for i in range(5)]\n"
            "    c.put([text_hash(t) for t in texts], np.full((15, 8), w, dtype=np.float32))\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(w), str(tmp_path)], cwd=ROOT) for w in range(4)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    cache = VectorCache(tmp_path, "m")
    mine = [text_hash(f"{w}-{s}-{i}") for w in range(4) for s in range(20) for i in range(10)]
    shared = [text_hash(f"shared-{s}-{i}") for s in range(20) for i in range(5)]
    assert all(v is not None for v in cache.get(mine + shared))
    assert len(cache) == len(mine) + len(shared)  # each shared text once
    size = cache.path.stat().st_size
    assert (size - 16) % (8 * 4 + 16) == 0 and (size - 16) // (8 * 4 + 16) == len(cache)


def test_a_torn_tail_is_skipped_then_padded_and_a_record_being_written_waits(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "m")
    cache.put([text_hash("a"), text_hash("b")], _vectors(2))
    record = 8 * 4 + 16
    with open(cache.path, "ab") as f:  # a writer died after half a record
        f.write(b"\x01" * (record // 2))
    fresh = VectorCache(tmp_path, "m")
    assert len(fresh) == 2 and fresh.get([text_hash("a")])[0] is not None
    fresh.put([text_hash("c")], _vectors(1, seed=3))  # pads the torn record, then appends
    assert (cache.path.stat().st_size - 16) % record == 0
    again = VectorCache(tmp_path, "m")
    assert len(again) == 3 and np.array_equal(again.get([text_hash("c")])[0], _vectors(1, seed=3)[0])
    # A record whose hash is not written yet (its writer is at work) is not read, and is read
    # once it is complete.
    h = text_hash("d")
    with open(cache.path, "ab") as f:
        f.write(_vectors(1, seed=4).tobytes() + bytes(16))
    watcher = VectorCache(tmp_path, "m")
    assert watcher.get([h])[0] is None
    with open(cache.path, "r+b") as f:
        f.seek(-16, os.SEEK_END)
        f.write(h)
    assert np.array_equal(watcher.get([h])[0], _vectors(1, seed=4)[0])


def test_the_npy_cache_of_before_is_moved_in_once(tmp_path: Path) -> None:
    (tmp_path / "embeddings").mkdir()
    hashes = [text_hash(f"t{i}") for i in range(1000)]  # some end in a NUL byte, which .npy drops
    old = np.zeros(1000, dtype=np.dtype([("h", "S16"), ("v", np.float32, (8,))]))
    old["h"] = hashes
    old["v"] = _vectors(1000)
    np.save(tmp_path / "embeddings" / "m.npy", old)
    assert any(h.endswith(b"\0") for h in hashes)
    cache = VectorCache(tmp_path, "m")
    got = cache.get(hashes)
    assert all(v is not None for v in got) and np.array_equal(np.vstack(got), _vectors(1000))  # type: ignore[arg-type]
    assert not (tmp_path / "embeddings" / "m.npy").exists() and cache.path.exists()


def test_another_vector_length_starts_a_new_file(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "m")
    cache.put([text_hash("a")], _vectors(1))
    cache.put([text_hash("b")], _vectors(1, dim=4))
    fresh = VectorCache(tmp_path, "m")
    assert fresh.get([text_hash("a")])[0] is None
    got = fresh.get([text_hash("b")])[0]
    assert got is not None and got.shape == (4,)


def test_a_file_that_is_not_a_cache_is_ignored_and_replaced(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "m")
    cache.path.parent.mkdir(parents=True)
    cache.path.write_bytes(b"garbage" * 10)
    assert cache.get([text_hash("a")]) == [None]
    cache.put([text_hash("a")], _vectors(1))
    assert VectorCache(tmp_path, "m").get([text_hash("a")])[0] is not None
