"""The tool store in ``ATC_HOME``: imported collections, found again by name.

Layout (designed so that ``atc tools show TOOL`` reads one small record, whatever the store size)::

    ATC_HOME/collections/index.json         collection infos + tool name -> [collection, file, offset, length]
    ATC_HOME/collections/<name>.<id>.jsonl  line 1: the collection without tools; then one tool per line
    ATC_HOME/collections/.lock              flock'ed around every change

Every file is written to a temporary file in the same directory, fsynced, then ``os.replace``d,
so a reader sees the old state or the new one, never half of either. Data files carry a fresh id
per import, and the index is the only thing that points at them, so two processes importing at
once (each holding the lock in turn) cannot mix their writes. Re-importing a name replaces it.
"""

from __future__ import annotations

import builtins
import fcntl
import json
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocols.errors import ConfigError, NotFound, UsageError
from protocols.files import atomic_write
from protocols.model import Collection, Tool

__all__ = ["Store", "CollectionInfo"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_INDEX_VERSION = 1
#: The suffix of the pre-tokenised BM25 texts an import wrote beside its data before issue 32.
#: Nothing reads them: an old store loads as it is, and they go with their collection.
_LEGACY_SEARCH = ".search.json"


@dataclass
class CollectionInfo:
    """One line of ``atc tools list``."""

    name: str
    tools: int
    source: str
    source_format: str
    imported_at: str
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "tools": self.tools, "source": self.source, "source_format": self.source_format,
                "imported_at": self.imported_at, "description": self.description}


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")


#: index.json path -> (file version, parsed index), shared by every Store of the process; never
#: changed in place (writers parse their own copy, see Store._index)
_PARSED: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}


class Store:
    """Imported collections under ``home`` (the CLI passes ``atc.config.atc_home()``)."""

    def __init__(self, home: Path | str) -> None:
        self.home = Path(home).expanduser()
        self.dir = self.home / "collections"
        self._index_cache: tuple[tuple[int, int, int], dict[str, Any]] | None = None

    # -- index ---------------------------------------------------------------------------------

    def _index(self, *, fresh: bool = False) -> dict[str, Any]:
        """The parsed ``index.json``. Readers share one parse per file version across every
        ``Store`` of the process (at 17k tools a parse takes about 20 ms, and a program that
        searches often makes a ``Store`` per call); ``fresh`` (the writers, under the lock) gets
        a private parse that it may change."""
        path = self.dir / "index.json"
        try:
            st = path.stat()
        except FileNotFoundError:
            return {"version": _INDEX_VERSION, "collections": {}, "tools": {}}
        # The file is only ever replaced by a rename: a new version is a new inode.
        version = (st.st_ino, st.st_mtime_ns, st.st_size)
        if not fresh:
            if self._index_cache and self._index_cache[0] == version:
                return self._index_cache[1]
            shared = _PARSED.get(str(path))
            if shared is not None and shared[0] == version:
                self._index_cache = shared
                return shared[1]
        try:
            index: dict[str, Any] = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"the tool store index {path} is unreadable: {exc}",
                              hint="remove it and import the collections again") from exc
        if not fresh:
            self._index_cache = _PARSED[str(path)] = (version, index)
        return index

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """Hold the store lock; yields the current index (re-read under the lock)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / ".lock", "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                self._index_cache = None
                yield self._index(fresh=True)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _write_index(self, index: dict[str, Any]) -> None:
        atomic_write(self.dir / "index.json", _dumps(index))
        self._index_cache = None

    # -- changes -------------------------------------------------------------------------------

    def add(self, collection: Collection) -> None:
        """Store a collection; an existing one with the same name is replaced. Python functions
        (``protocols.functions``) live in their process and are never stored."""
        name = collection.name
        if collection.kind == "python":
            raise UsageError(f"collection {name!r} holds Python functions of this process: they are not stored",
                             hint="give the functions to each run instead (tools=[f], --tools py:MODULE:NAME)")
        if not _NAME.match(name or ""):
            raise UsageError(f"invalid collection name {name!r}",
                             hint="use letters, digits, '_', '-' or '.', starting with a letter or digit")
        file_id = secrets.token_hex(4)
        data_name = f"{name}.{file_id}.jsonl"
        meta = collection.to_dict()
        meta.pop("tools")
        chunks = [_dumps(meta) + b"\n"]
        offset = len(chunks[0])
        entries: list[tuple[str, int, int]] = []
        for tool in collection.tools:
            line = _dumps(tool.to_dict())
            entries.append((tool.name, offset, len(line)))
            chunks.append(line + b"\n")
            offset += len(line) + 1
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.dir / data_name, b"".join(chunks))
        info = CollectionInfo(name=name, tools=len(collection.tools), source=collection.source,
                              source_format=collection.source_format,
                              imported_at=datetime.now(UTC).isoformat(timespec="seconds"),
                              description=collection.description[:300])
        with self._locked() as index:
            old = index["collections"].get(name)
            self._drop_tools(index, name)
            index["collections"][name] = {**info.to_dict(), "file": data_name}
            tools = index["tools"]
            for tool_name, off, length in entries:
                tools.setdefault(tool_name, []).append([name, data_name, off, length])
            self._write_index(index)
            self._sweep(index)
        if old:
            self._unlink_files(old["file"])

    def remove(self, name: str) -> None:
        """Remove a collection (NotFound when there is none of that name)."""
        with self._locked() as index:
            old = index["collections"].pop(name, None)
            if old is None:
                raise NotFound(f"no collection named {name!r} in the store", hint="see 'atc tools list'")
            self._drop_tools(index, name)
            self._write_index(index)
        self._unlink_files(old["file"])

    def _sweep(self, index: dict[str, Any], min_age: float = 600.0) -> None:
        """Delete data and temporary files no index entry points at, left by a process that died
        between writing them and updating the index. Only files older than ``min_age`` seconds: a
        younger one may belong to an import that is writing right now (before it takes the lock)."""
        live = {e["file"] for e in index["collections"].values()}
        now = time.time()
        for path in self.dir.iterdir():
            if path.name in live or path.name in ("index.json", ".lock"):
                continue
            if not (path.name.endswith((".jsonl", _LEGACY_SEARCH, ".tmp"))):
                continue
            try:
                if now - path.stat().st_mtime > min_age:
                    path.unlink()
            except FileNotFoundError:
                pass

    @staticmethod
    def _drop_tools(index: dict[str, Any], name: str) -> None:
        tools = index["tools"]
        for tool_name in [t for t, refs in tools.items() if any(r[0] == name for r in refs)]:
            kept = [r for r in tools[tool_name] if r[0] != name]
            if kept:
                tools[tool_name] = kept
            else:
                del tools[tool_name]

    def _unlink_files(self, data_name: str) -> None:
        for path in (self.dir / data_name, self.dir / (data_name[: -len(".jsonl")] + _LEGACY_SEARCH)):
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    # -- reading -------------------------------------------------------------------------------

    def list(self) -> list[CollectionInfo]:
        """Every collection, by name."""
        out = []
        for name, d in sorted(self._index()["collections"].items()):
            out.append(CollectionInfo(name=name, tools=d["tools"], source=d["source"],
                                      source_format=d["source_format"], imported_at=d["imported_at"],
                                      description=d.get("description", "")))
        return out

    def names(self) -> builtins.list[str]:
        return sorted(self._index()["collections"])

    def has(self, name: str) -> bool:
        return name in self._index()["collections"]

    def get(self, name: str) -> Collection:
        """The whole collection (NotFound when missing)."""
        for _ in range(2):  # a concurrent re-import may delete the file between index and read
            entry = self._index()["collections"].get(name)
            if entry is None:
                raise NotFound(f"no collection named {name!r} in the store",
                               hint="see 'atc tools list', or import it with 'atc tools import SPEC'")
            try:
                with open(self.dir / entry["file"], "rb") as f:
                    meta = json.loads(f.readline())
                    meta["tools"] = [json.loads(line) for line in f if line.strip()]
                return Collection.from_dict(meta)
            except FileNotFoundError:
                self._index_cache = None
        raise NotFound(f"collection {name!r} changed while it was being read; try again")

    def _read_tool(self, ref: builtins.list[Any]) -> Tool:
        _, data_name, offset, length = ref
        with open(self.dir / data_name, "rb") as f:
            f.seek(offset)
            return Tool.from_dict(json.loads(f.read(length)))

    def find_tools(self, name: str) -> builtins.list[Tool]:
        """Every stored tool with this name (one per collection that has it). ``coll.tool`` or
        ``coll/tool`` selects one collection's tool."""
        index = self._index()
        refs = index["tools"].get(name)
        if refs is None:
            for sep in (".", "/", ":"):
                if sep in name:
                    coll, _, tool = name.rpartition(sep)
                    refs = [r for r in index["tools"].get(tool, []) if r[0] == coll]
                    if refs:
                        break
        out = []
        for ref in refs or []:
            try:
                out.append(self._read_tool(ref))
            except FileNotFoundError:
                self._index_cache = None
        return out

    def get_tool(self, name: str) -> Tool:
        """One tool by name; when several collections have it, the most recently imported wins
        (qualify it as ``collection.tool`` to choose)."""
        found = self.find_tools(name)
        if not found:
            raise NotFound(f"no tool named {name!r} in the store", hint="see 'atc tools search \"...\"'")
        return found[-1]
