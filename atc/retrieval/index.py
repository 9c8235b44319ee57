"""The persistent retrieval index of the store: built at import, opened lazily by memory map.

Layout under ``ATC_HOME/retrieval/``::

    CURRENT            the name of the live generation (replaced atomically: the switch)
    gen-<id>/meta.json  collections indexed (name -> store data file), document count, embedder
    gen-<id>/docs.jsonl one document per line (doc.Doc + its producer lists); docs.off: offsets
    gen-<id>/postings.i32, weights.f32, lexical.json   the BM25F index (lexical.py)
    gen-<id>/grams.i32, grams.f32, grams.json   the character n-grams (chargrams.py), when an embedder ran
    gen-<id>/vectors.f32  the documents' vectors (mean of their views' unit vectors) (float32, row-major), when an embedder ran
    gen-<id>/static.f32, exact.u8   with the local model: one row per shown document (one per group
                        of copies): its static vector (static.py), and in vectors.f32 the full
                        model's vector, present where exact.u8 says so (filled as searches need
                        them, or in the background: exact.py, fill.py)
    gen-<id>/dups.i32   copies of one tool in several collections (duplicates.py), when there are any
    .lock              flock'ed while a generation is built

A new generation is written in full into a fresh directory and only then named by ``CURRENT``,
so a crash mid-build leaves the previous generation live. An update reuses the documents of
collections whose store data file did not change (no protocol is parsed again), and vectors come
from the vector cache by text hash, so unchanged tools are never embedded again. A reader notices
a store changed behind its back (another process, or ``Store.add`` called directly) by comparing
``meta.json``'s collections with the store's, and rebuilds then.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import sys
import time
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atc.errors import AtcError
from atc.retrieval.chargrams import CharGramIndex
from atc.retrieval.doc import Doc, docs_of, producer_lists
from atc.retrieval.duplicates import groups
from atc.retrieval.embedders import VectorCache, doc_vectors, make_embedder
from atc.retrieval.exact import STATIC, ExactRows, Stages
from atc.retrieval.lexical import LexicalIndex
from atc.retrieval.stagebuild import write_stages
from protocols.files import atomic_write
from protocols.model import Tool
from protocols.store import Store

if TYPE_CHECKING:
    import numpy as np

    from atc.retrieval.base import Embedder
    from atc.retrieval.embedders import Progress

__all__ = ["StoreIndex", "update_index", "open_index", "index_dir"]

#: 2: a document's vector is the mean of its views' vectors (doc.Doc.dense_views)
#: 3: the character n-gram index of the hybrid (chargrams.py) is written with the vectors
#: 4: documents carry their protocol key and documentation score; copies are grouped (dups.i32)
#: 5: an embedder with a static first stage (the local model) writes static.f32, and the full
#:    model's vectors of the shown documents as they come (vectors.f32, exact.u8: exact.py)
_VERSION = 5


def index_dir(home: Path) -> Path:
    return Path(home) / "retrieval"


def _stamp(store: Store) -> list[int]:
    """When and how big the store's index was: equal stamps spare parsing it (large at 16k tools)."""
    try:
        st = (store.dir / "index.json").stat()
    except FileNotFoundError:
        return [0, 0]
    return [st.st_mtime_ns, st.st_size]


def _store_collections(store: Store) -> dict[str, str]:
    return {name: entry["file"] for name, entry in store._index()["collections"].items()}


def _imported(store: Store) -> dict[str, str]:
    """When each collection was imported (which copy of a duplicated tool is newest)."""
    return {name: str(entry.get("imported_at") or "") for name, entry in store._index()["collections"].items()}


class StoreIndex:
    """One generation of the index, opened read-only. A ``Corpus`` (see corpus.py)."""

    def __init__(self, folder: Path, store: Store) -> None:
        self.folder = folder
        self.store = store
        self.meta: dict[str, Any] = json.loads((folder / "meta.json").read_bytes())
        self._lexical: LexicalIndex | None = None
        self._chargrams: CharGramIndex | None = None
        self._offsets: array[int] | None = None
        self._docs: dict[int, Doc] = {}
        self._producers: dict[int, list[list[int]]] = {}
        self._vectors: np.ndarray | None = None
        self._groups: tuple[array[int], array[int]] | None = None
        self._stages: Stages | None = None

    @property
    def n(self) -> int:
        return int(self.meta["n"])

    @property
    def collections(self) -> dict[str, str]:
        return dict(self.meta["collections"])

    @property
    def embedder(self) -> str | None:
        value = self.meta.get("embedder")
        return str(value) if value else None

    @property
    def lexical(self) -> LexicalIndex:
        if self._lexical is None:
            self._lexical = LexicalIndex.open(self.folder)
        return self._lexical

    @property
    def chargrams(self) -> CharGramIndex:
        """The stored n-gram index; built here from the documents when the generation has none
        (it is written only with vectors: without them the hybrid runs BM25 and never asks)."""
        if self._chargrams is None:
            if CharGramIndex.exists(self.folder):
                self._chargrams = CharGramIndex.open(self.folder)
            else:
                self._chargrams = CharGramIndex.build(self.all_docs())
        return self._chargrams

    def _line(self, i: int) -> dict[str, Any]:
        if self._offsets is None:
            self._offsets = array("q", (self.folder / "docs.off").read_bytes())
        start, end = self._offsets[i], self._offsets[i + 1]
        with open(self.folder / "docs.jsonl", "rb") as f:
            f.seek(start)
            record: dict[str, Any] = json.loads(f.read(end - start))
        return record

    def doc(self, i: int) -> Doc:
        found = self._docs.get(i)
        if found is None:
            record = self._line(i)
            found = Doc.from_dict(record)
            self._docs[i] = found
            self._producers[i] = record.get("x") or []
        return found

    def all_docs(self) -> list[Doc]:
        """Every document, in order (one read of the file)."""
        with open(self.folder / "docs.jsonl", "rb") as f:
            return [Doc.from_dict(json.loads(line)) for line in f if line.strip()]

    def producers(self, i: int) -> list[list[int]]:
        if i not in self._producers:
            self.doc(i)
        return self._producers[i]

    def duplicates(self) -> tuple[array[int], array[int]] | None:
        """The groups of copies (duplicates.py), or None when no tool has a copy."""
        if not self.meta.get("duplicates"):
            return None
        if self._groups is None:
            both = array("i", (self.folder / "dups.i32").read_bytes())
            if sys.byteorder != "little":
                both.byteswap()
            self._groups = (both[:self.n], both[self.n:])
        return self._groups

    def tool(self, i: int) -> Tool | None:
        d = self.doc(i)
        for t in self.store.find_tools(f"{d.collection}.{d.name}"):
            if t.collection == d.collection:
                return t
        return None

    @property
    def home(self) -> Path:
        return Path(self.store.home)

    def stages(self, embedder: Embedder) -> Stages | None:
        """The two stages of the local model (exact.py), when this generation has them for ``embedder``."""
        static = getattr(embedder, "static", None)
        if static is None or self.embedder != embedder.name or self.meta.get("static") != static.name:
            return None
        if self._stages is None:
            # numpy: 60-120 ms to import, and a BM25-only search never needs it
            import numpy as np

            rows, dim = int(self.meta["rows"]), int(self.meta["dim"])
            matrix = np.memmap(self.folder / STATIC, dtype="<f4", mode="r", shape=(rows, dim)) if rows \
                else np.zeros((0, dim), dtype=np.float32)
            exact = ExactRows(rows, dim, lambda r: self.doc(found.doc(r)).views, folder=self.folder, home=self.home)
            found = Stages.of(matrix, exact, self.duplicates())
            self._stages = found
        return self._stages

    def vectors(self, embedder: Embedder, *, compute: bool = True) -> np.ndarray | None:
        """The stored vectors when they are this embedder's; else None (the index is rebuilt with
        vectors by ``update_index``, not at query time). A generation of two stages has the full
        vectors of some tools only: None (``stages`` reads it)."""
        if self.embedder != embedder.name or self.meta.get("static"):
            return None
        if self._vectors is None:
            # numpy: 60-120 ms to import, and a BM25-only search never needs it
            import numpy as np

            path = self.folder / "vectors.f32"
            dim = int(self.meta["dim"])
            if self.n == 0 or dim == 0:
                self._vectors = np.zeros((self.n, max(dim, 1)), dtype=np.float32)
            else:
                self._vectors = np.memmap(path, dtype="<f4", mode="r", shape=(self.n, dim))
        return self._vectors


#: The index last opened per store in this process, with the stamp of the files that name it: a
#: program that searches many times reuses the open postings, n-grams and vectors instead of
#: parsing the store's and the index's JSON again (at 17k tools, about 30 ms a query).
_OPENED: dict[str, tuple[tuple[Any, ...], StoreIndex]] = {}


def _files_stamp(home: Path, store: Store) -> tuple[Any, ...]:
    """What changes whenever the store or the live index does (both are replaced by renames)."""
    out: list[Any] = []
    for path in (store.dir / "index.json", index_dir(home) / "CURRENT"):
        try:
            st = path.stat()
            out.append((st.st_ino, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


def open_index(home: Path, *, store: Store | None = None, embedder: Embedder | None = None,
               refresh: bool = True) -> StoreIndex:
    """The live index, brought up to date with the store first when it is behind (``refresh``).
    The same object comes back while neither the store nor the index changed."""
    home = Path(home)
    store = store or Store(home)
    key = str(home.absolute())
    stamp = _files_stamp(home, store)
    known = _OPENED.get(key)
    if known is not None and known[0] == stamp and None not in stamp:
        return known[1]
    index = _open_index(home, store, embedder, refresh)
    if refresh:
        after = _files_stamp(home, store)
        try:
            live = (index_dir(home) / "CURRENT").read_text().strip()
        except OSError:
            live = ""
        # The stamp after opening, when only the index moved, and to this very generation (the
        # rebuild just done); else the one before, so that any change made meanwhile shows as a
        # different stamp next time and opens the index again.
        _OPENED[key] = (after if after[0] == stamp[0] and live == index.folder.name else stamp, index)
    return index


def _open_index(home: Path, store: Store, embedder: Embedder | None, refresh: bool) -> StoreIndex:
    found = _live(home, store)
    current = found is not None and found.meta.get("version") == _VERSION
    if found is not None and current and (found.meta.get("store_stamp") == _stamp(store)
                                          or found.collections == _store_collections(store)):
        return found
    if not refresh and found is not None:
        return found
    keep = found.embedder if found is not None else None
    if embedder is None and keep:
        embedder = _embedder_named(keep)
    try:
        return update_index(home, store=store, embedder=embedder)
    except AtcError:
        if embedder is None:
            raise
        # The embedder failed (a server down): a search still works, on BM25; the vectors come
        # back, from the cache, with the next import.
        return update_index(home, store=store, embedder=None)


def _embedder_named(name: str) -> Embedder | None:
    """The embedder that built the live index, when it can be made again here (else vectors go)."""
    try:
        candidate = make_embedder()
    except Exception:
        return None
    return candidate if candidate is not None and candidate.name == name else None


def _live(home: Path, store: Store) -> StoreIndex | None:
    root = index_dir(home)
    try:
        name = (root / "CURRENT").read_text().strip()
        return StoreIndex(root / name, store)
    except (OSError, ValueError, KeyError):
        return None


def update_index(home: Path, *, store: Store | None = None, embedder: Embedder | None = None,
                 progress: Progress | None = None, deferred: bool = False) -> StoreIndex:
    """Build a new generation for the store's current collections and make it live. ``deferred``
    (``tools import --no-embed``): written without vectors on purpose; searches say how to get them."""
    home = Path(home)
    store = store or Store(home)
    root = index_dir(home)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            return _build(home, root, store, embedder, progress, deferred)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _build(home: Path, root: Path, store: Store, embedder: Embedder | None,
           progress: Progress | None = None, deferred: bool = False) -> StoreIndex:
    previous = _live(home, store)
    stamp = _stamp(store)  # taken before reading: a change made meanwhile shows as a newer stamp
    wanted = _store_collections(store)
    reused: dict[str, list[Doc]] = {}
    every: list[Doc] = []
    # Documents are reused only from a generation of this version: an older one lacks fields.
    if previous is not None and previous.meta.get("version") == _VERSION:
        old = previous.collections
        start = 0
        # Documents of unchanged collections come from the previous generation, in its order.
        every = previous.all_docs() if any(wanted.get(c) == f for c, f in old.items()) else []
        for cname in old:
            count = int(previous.meta["counts"][cname])
            if wanted.get(cname) == old[cname]:
                reused[cname] = every[start:start + count]
            start += count
    docs: list[Doc] = []
    counts: dict[str, int] = {}
    for cname in sorted(wanted):
        part = reused.get(cname)
        if part is None:
            try:
                part = docs_of(store.get(cname).tools)
            except Exception:  # removed meanwhile: the next reader's staleness check catches up
                continue
        counts[cname] = len(part)
        docs.extend(part)
    folder = root / f"gen-{secrets.token_hex(6)}"
    folder.mkdir()
    try:
        _write_generation(folder, home, docs, {c: wanted[c] for c in counts}, counts, embedder, stamp, progress,
                          imported=_imported(store), deferred=deferred,
                          previous=previous if previous is not None and previous.meta.get("version") == _VERSION
                          else None, previous_docs=lambda: every or (previous.all_docs() if previous else []))
        atomic_write(root / "CURRENT", folder.name + "\n")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    _sweep(root, keep=folder.name)
    return StoreIndex(folder, store)


def _write_generation(folder: Path, home: Path, docs: Sequence[Doc], collections: dict[str, str],
                      counts: dict[str, int], embedder: Embedder | None, stamp: list[int],
                      progress: Progress | None = None, imported: dict[str, str] | None = None,
                      deferred: bool = False, previous: StoreIndex | None = None,
                      previous_docs: Callable[[], list[Doc]] | None = None) -> None:
    producers = producer_lists(docs)
    canon, ring, hidden = groups(docs, imported)
    if hidden:
        both = array("i", canon + ring)
        if sys.byteorder != "little":
            both.byteswap()
        (folder / "dups.i32").write_bytes(both.tobytes())
    offsets = array("q", [0])
    with open(folder / "docs.jsonl", "wb") as f:
        for d, x in zip(docs, producers, strict=True):
            line = json.dumps({**d.to_dict(), "x": x}, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
            f.write(line)
            offsets.append(offsets[-1] + len(line))
    (folder / "docs.off").write_bytes(offsets.tobytes())
    LexicalIndex.build(docs).save(folder)
    dim = 0
    name = None
    stages: dict[str, Any] = {}
    if embedder is not None and docs:
        if getattr(embedder, "static", None) is not None:
            before = previous.stages(embedder) if previous is not None else None
            stages = write_stages(folder, home, docs, canon if hidden else None, embedder, before,
                                  previous_docs or (lambda: previous.all_docs() if previous is not None else []),
                                  progress)
            dim = int(stages["dim"])
        else:
            vectors = doc_vectors(embedder, docs, VectorCache(home, embedder.name), progress=progress)
            dim = int(vectors.shape[1])
            (folder / "vectors.f32").write_bytes(vectors.astype("<f4").tobytes())
        name = embedder.name
        # Only the hybrid reads the n-grams, and only with vectors: a BM25-only import skips them.
        CharGramIndex.build(docs).save(folder)
    meta = {"version": _VERSION, "n": len(docs), "collections": collections, "counts": counts,
            "embedder": name, "dim": dim, "built_at": time.time(), "store_stamp": stamp, "duplicates": hidden,
            "deferred": bool(deferred and name is None), **stages}
    (folder / "meta.json").write_text(json.dumps(meta))
    for path in folder.iterdir():  # the data reaches the disk before CURRENT names it
        with open(path, "rb") as f:
            os.fsync(f.fileno())


def _sweep(root: Path, keep: str, min_age: float = 60.0) -> None:
    """Delete superseded and abandoned half-built generations older than ``min_age`` seconds."""
    now = time.time()
    for path in root.iterdir():
        if not path.name.startswith("gen-") or path.name == keep:
            continue
        try:
            # A superseded generation lives on for a minute: a reader that opened it just before
            # the switch still reads its documents.
            if now - path.stat().st_mtime > min_age:
                shutil.rmtree(path, ignore_errors=True)
        except FileNotFoundError:
            pass
