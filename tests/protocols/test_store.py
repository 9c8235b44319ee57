"""The store in ATC_HOME: add, list, get, get_tool, remove, search; atomic and safe across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from atc.config import atc_home
from atc.errors import NotFound, UsageError
from protocols import Collection, Store, Tool, load_data
from tests.support.apis.library import library_spec


def _library(name: str = "library") -> Collection:
    return load_data(library_spec("http://127.0.0.1:9"), name=name)


def test_add_list_get_roundtrip() -> None:
    store = Store(atc_home())
    assert store.list() == []
    lib = _library()
    store.add(lib)
    [info] = store.list()
    assert (info.name, info.tools, info.source_format) == ("library", 7, "openapi-3.0")
    assert info.imported_at.endswith("+00:00")
    again = store.get("library")
    assert again.to_dict() == lib.to_dict()
    tool = store.get_tool("get_book")
    assert tool.to_dict() == lib.tool("get_book").to_dict()  # type: ignore[union-attr]
    # A fresh Store object (another process) reads the same state.
    assert Store(atc_home()).get_tool("create_order").method == "POST"


def test_missing_names_are_not_found() -> None:
    store = Store(atc_home())
    with pytest.raises(NotFound):
        store.get("nope")
    with pytest.raises(NotFound):
        store.get_tool("nope")
    with pytest.raises(NotFound):
        store.remove("nope")


def test_reimport_replaces_and_remove_cleans_up() -> None:
    store = Store(atc_home())
    store.add(_library())
    smaller = _library()
    smaller.tools = smaller.tools[:2]
    store.add(smaller)
    assert [i.tools for i in store.list()] == [2]
    with pytest.raises(NotFound):
        store.get_tool("get_stats")  # the old version's tools are gone from the index
    files = sorted(p.name for p in store.dir.iterdir() if not p.name.startswith("."))
    assert len([f for f in files if f.endswith(".jsonl")]) == 1  # the old data file was deleted
    store.remove("library")
    assert store.list() == []
    assert sorted(p.name for p in store.dir.iterdir() if not p.name.startswith(".")) == ["index.json"]


def test_same_tool_name_in_two_collections() -> None:
    store = Store(atc_home())
    store.add(_library("lib_a"))
    second = _library("lib_b")
    second.tools[3].description = "the second one"
    store.add(second)
    assert len(store.find_tools("get_book")) == 2
    assert store.get_tool("get_book").collection == "lib_b"  # the latest import wins
    assert store.get_tool("lib_a.get_book").collection == "lib_a"
    store.remove("lib_b")
    assert store.get_tool("get_book").collection == "lib_a"


def test_bad_collection_names_are_refused() -> None:
    for bad in ("", "../escape", "a/b", ".hidden"):
        with pytest.raises(UsageError):
            Store(atc_home()).add(Collection(name=bad, tools=[Tool(name="t", collection=bad)]))


def test_an_old_store_with_search_files_still_loads(tmp_path: Path) -> None:
    """Imports before issue 32 wrote ``<name>.<id>.search.json`` beside the data: ignored, and
    removed with their collection; an import writes none."""
    store = Store(tmp_path / "home")
    store.add(_library())
    assert not [p.name for p in store.dir.iterdir() if p.name.endswith(".search.json")]
    entry = json.loads((store.dir / "index.json").read_text())["collections"]["library"]
    legacy = store.dir / (entry["file"][: -len(".jsonl")] + ".search.json")
    legacy.write_text('[["get_book", "get book", "/books/{book_id}", true]]')
    reopened = Store(tmp_path / "home")
    assert len(reopened.get("library").tools) == 7 and reopened.get_tool("get_book").name == "get_book"
    reopened.remove("library")
    assert not legacy.exists()


_WRITER = """
import sys
from protocols import Store, load_data
from tests.support.apis.library import library_spec
home, prefix = sys.argv[1], sys.argv[2]
store = Store(home)
for i in range(15):
    store.add(load_data(library_spec("http://127.0.0.1:9"), name=f"{prefix}{i}"))
"""


def test_two_processes_importing_at_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(home), p], env=env) for p in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    store = Store(home)
    names = [i.name for i in store.list()]
    assert sorted(names) == sorted([f"a{i}" for i in range(15)] + [f"b{i}" for i in range(15)])
    index = json.loads((store.dir / "index.json").read_text())
    assert len(index["tools"]["get_book"]) == 30  # no index update was lost
    for name in names:
        assert len(store.get(name).tools) == 7
    leftovers = [p.name for p in store.dir.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_files_left_by_a_dead_import_are_swept() -> None:
    store = Store(atc_home())
    store.add(_library("first"))
    store.dir.joinpath("ghost.dead.jsonl").write_text("{}\n")
    store.dir.joinpath("ghost.dead.search.json").write_text("[]")
    store.dir.joinpath(".index.json.x.tmp").write_text("")
    fresh = store.dir / "young.beef.jsonl"
    fresh.write_text("{}\n")
    old = 1_000_000_000
    for name in ("ghost.dead.jsonl", "ghost.dead.search.json", ".index.json.x.tmp"):
        os.utime(store.dir / name, (old, old))
    store.add(_library("second"))
    names = {p.name for p in store.dir.iterdir()}
    assert not {"ghost.dead.jsonl", "ghost.dead.search.json", ".index.json.x.tmp"} & names
    assert "young.beef.jsonl" in names  # may belong to an import in progress
    assert len(store.get("first").tools) == 7 and len(store.get("second").tools) == 7


def test_stored_source_is_an_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from protocols import load_spec

    (tmp_path / "lib.json").write_text(json.dumps(library_spec("http://127.0.0.1:9")))
    monkeypatch.chdir(tmp_path)
    collection = load_spec("lib.json")
    assert collection.source == str(tmp_path.resolve() / "lib.json")


def test_readers_share_one_parse_and_a_failed_write_changes_none(monkeypatch: pytest.MonkeyPatch) -> None:
    import protocols.store as store_module

    home = atc_home()
    Store(home).add(_library())
    first, second = Store(home), Store(home)
    assert first._index() is second._index()  # one parse per file version for the whole process
    calls = {"n": 0}
    real = store_module.atomic_write

    def failing(path: Path, data: bytes) -> None:
        if path.name == "index.json":
            calls["n"] += 1
            raise OSError("disk full")
        real(path, data)

    monkeypatch.setattr(store_module, "atomic_write", failing)
    with pytest.raises(OSError):
        Store(home).add(_library("other"))
    assert calls["n"] == 1
    # The writer changed its own copy, never the one readers share.
    assert Store(home).names() == ["library"] and first.names() == ["library"]
    monkeypatch.setattr(store_module, "atomic_write", real)
    Store(home).add(_library("other"))
    assert first.names() == ["library", "other"]  # a new version is seen by every reader
