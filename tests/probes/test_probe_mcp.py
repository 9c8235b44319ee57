"""Probing MCP servers that behave like the reference ones (tests/support/mcp_servers/files.py and
graph.py), run as real processes: text answers, ``isError`` answers, declared ``outputSchema``s,
and unsafe tools under a scope. Every assertion about what was sent is read from the server's own
log, and about what changed from the files it keeps."""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probes import probe
from sandbox.gateway.mcp.connections import close_servers
from tests.support.mcp_servers import ROOT

pytestmark = pytest.mark.slow  # each probe starts its server (1-2 s)

GRAPH = {"entities": [{"name": "Ada", "entityType": "person", "observations": ["writes programs", "likes tea"],
                       "note": None},
                      {"name": "Engine", "entityType": "project", "observations": ["analytical"], "note": None}],
         "relations": [{"from": "Ada", "to": "Engine", "relationType": "works on"}]}


@pytest.fixture(autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    close_servers()


def _config(tmp: Path, name: str, args: list[str], env: dict[str, str]) -> Path:
    config = tmp / f"{name}-servers.json"
    config.write_text(json.dumps({"mcpServers": {name: {
        "command": sys.executable, "args": ["-m", f"tests.support.mcp_servers.{name}", *args], "cwd": str(ROOT), "env": env}}}))
    return config


def _log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "notes.txt").write_text("hello world\n")
    (root / "docs" / "plan.md").write_text("# plan\nship it\n")
    log = tmp_path / "files.log"
    return _config(tmp_path, "files", [str(root)], {"FILES_LOG": str(log)}), root, log


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): (p.read_text() if p.is_file() else "<dir>") for p in sorted(root.rglob("*"))}


def test_text_answers_feed_the_next_call_and_no_path_is_made_up(files: tuple[Path, Path, Path]) -> None:
    config, root, log = files
    report = probe(str(config), no_llm=True, cache=False)
    reads = [t for t in report.tools if t.reason is None or "readOnlyHint" not in t.reason]
    documented = {t.name for t in reads if t.status == "documented"}
    assert {"list_allowed_directories", "list_directory", "read_text_file", "get_file_info", "search_files",
            "directory_tree", "read_multiple_files", "list_directory_with_sizes", "file_checksum"} <= documented
    # the root came from list_allowed_directories' text, the file from list_directory's lines
    assert report.tool("list_directory").mapping["path"] == {"tool": "list_allowed_directories",
                                                             "field": "(text) path"}
    read = report.tool("read_text_file")
    assert read.mapping["path"]["tool"] == "list_directory" and read.examples[0]["response"] == "hello world\n"
    assert "list_directory(" in read.examples[0]["program"]
    # every path the server was sent came from its own answers: nothing made up like "test"
    sent = [a for call in _log(log) for k, a in call["args"].items() if k in ("path", "paths")]
    flat = [p for a in sent for p in (a if isinstance(a, list) else [a])]
    assert flat and all(p == str(root) or p.startswith(str(root) + "/") for p in flat), flat
    assert report.calls == len(_log(log))


def test_mcp_errors_count_as_sent_and_an_error_text_documents_nothing(files: tuple[Path, Path, Path]) -> None:
    config, root, log = files
    (root / "notes.txt").unlink()
    (root / "docs" / "plan.md").unlink()  # nothing but directories: every file tool answers an error
    report = probe(str(config), no_llm=True, cache=False, per_tool=2)
    calls = _log(log)
    assert report.calls == len(calls)  # isError answers are counted: nothing is "refused before sending"
    per_tool = Counter(c["tool"] for c in calls)
    assert max(per_tool.values()) <= 2
    checksum = report.tool("file_checksum")
    assert checksum.status == "failed" and checksum.calls == per_tool["file_checksum"] == 2
    assert "reports an error" in checksum.reason and "ENOENT" in checksum.reason
    read = report.tool("read_text_file")
    assert read.status == "failed" and read.calls == 2 and "EISDIR" in read.reason
    assert any(c["error"] for c in calls if c["tool"] == "read_text_file")
    capped = probe(str(config), no_llm=True, cache=False, max_calls=4)
    assert capped.calls == 4 == len(_log(log)) - len(calls)


def test_writes_to_files_stay_inside_the_pinned_folder(files: tuple[Path, Path, Path]) -> None:
    config, root, log = files
    (root / "scratch").mkdir()
    before = _tree(root)
    report = probe(str(config), no_llm=True, cache=False, allow_unsafe=True, scope={"path": str(root / "scratch")})
    writes = [c for c in _log(log) if c["tool"] in ("write_file", "create_directory", "edit_file", "move_file")]
    assert {c["tool"] for c in writes} == {"write_file", "create_directory", "edit_file", "move_file"}
    for call in writes:
        for key in ("path", "source", "destination"):
            if key in call["args"]:
                assert call["args"][key].startswith(str(root / "scratch") + "/"), call
    after = _tree(root)
    assert {k: v for k, v in after.items() if not k.startswith("scratch/")} == before
    # nothing can delete a file on this server: what was made is said, not hidden
    assert report.left_behind and all("atc-probe-" in x for x in report.left_behind)
    made = {k for k in after if k.startswith("scratch/")}
    assert made and all(Path(k).name.startswith("atc-probe-") for k in made)


@pytest.fixture()
def graph(tmp_path: Path) -> tuple[Path, Path, Path]:
    data, log = tmp_path / "graph.json", tmp_path / "graph.log"
    data.write_text(json.dumps(GRAPH))
    return _config(tmp_path, "graph", [], {"GRAPH_FILE": str(data), "GRAPH_LOG": str(log)}), data, log


def test_declared_output_schemas_are_kept_and_learning_is_merged_in(graph: tuple[Path, Path, Path],
                                                                     tmp_path: Path) -> None:
    config, _, _ = graph
    report = probe(str(config), no_llm=True, cache=False, out=tmp_path / "out")
    schema = report.tool("read_graph").response_schema
    assert report.tool("read_graph").schema_source == "declared+learnt"
    entity = schema["$defs"]["Entity"]
    # descriptions, item schemas and the nullable note are the declared ones (no answer had a note)
    assert entity["properties"]["name"]["description"] == "The entity's unique name"
    assert entity["properties"]["note"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert schema["properties"]["entities"]["items"] == {"$ref": "#/$defs/Entity"}
    assert entity["properties"]["name"]["examples"] == ["Ada"]  # what was learnt: an example
    # and the same in the written tools.json, which carries example programs too
    listing = json.loads((tmp_path / "out" / "tools.json").read_text())
    tool = next(t for t in listing["tools"] if t["name"] == "read_graph")
    assert tool["outputSchema"]["$defs"]["Entity"]["properties"]["note"]["description"] == "A remark, when there is one"
    opened = next(t for t in listing["tools"] if t["name"] == "open_nodes")
    assert "open_nodes(" in opened["x-atc-examples"][0]["program"]
    assert not any(t["name"] == "clear_graph" and "x-atc-examples" in t for t in listing["tools"])


def test_graph_writes_touch_only_the_pinned_entity(graph: tuple[Path, Path, Path]) -> None:
    config, data, log = graph
    report = probe(str(config), no_llm=True, cache=False, allow_unsafe=True, scope={"entity_name": "atc-scratch"})
    calls = _log(log)
    writes = [c for c in calls if c["tool"] not in ("read_graph", "search_nodes", "open_nodes")]
    assert [c["tool"] for c in writes] == ["create_entities", "create_relations", "add_observations",
                                           "delete_observations", "delete_relations", "delete_entities"]
    named = json.dumps([c["args"] for c in writes])
    assert "Ada" not in named and "Engine" not in named and "atc-scratch" in named
    assert json.loads(data.read_text()) == GRAPH  # created, then deleted again: the user's graph as it was
    assert report.tool("clear_graph").calls == 0 and "--allow-bulk clear_graph" in report.tool("clear_graph").reason
    # a pinned entity that exists already is written to, never deleted
    shutil.copy(data, data.with_suffix(".bak"))
    probe(str(config), no_llm=True, cache=False, allow_unsafe=True, scope={"entity_name": "Ada"})
    after = json.loads(data.read_text())
    assert [e["name"] for e in after["entities"]] == ["Ada", "Engine"] and after["relations"] == GRAPH["relations"]
    assert not any(c["tool"] == "delete_entities" for c in _log(log)[len(calls):])
