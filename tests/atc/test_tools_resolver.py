"""One reader of a ``tools`` argument (``atc.toolsets``): the command line, the Python API and
probing pick the same collections for the same word, in plain cases and when a bare word names
both a file here and a stored collection (the stored one wins; ``./word`` is the file). Real spec
files in a working folder, a real store in ``ATC_HOME``, ``atc run`` as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import atc
from atc.errors import NotFound
from atc.toolsets import collections_of
from probes.single import resolve_toolset
from protocols.loaders import load_spec
from protocols.store import Store
from sandbox.api import Credentials, Toolset

ATC = Path(sys.executable).with_name("atc")
MARKERS = ("from_file", "from_store", "from_other", "from_spec")
PROGRAM = f"print([n for n in {MARKERS!r} if n in globals()])\n"


def _spec(operation: str) -> str:
    """A one-tool spec whose only tool is named ``operation`` (never called: no server listens)."""
    return json.dumps({"openapi": "3.0.0", "info": {"title": operation, "version": "1"},
                       "servers": [{"url": "http://127.0.0.1:9"}],
                       "paths": {f"/{operation}": {"get": {"operationId": operation,
                                                           "responses": {"200": {"description": "ok"}}}}}})


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder holding a file ``shop`` and ``spec.json``; a store holding ``shop`` and
    ``other`` (each collection's one tool says where it came from)."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "shop").write_text(_spec("from_file"))
    (folder / "spec.json").write_text(_spec("from_spec"))
    (folder / "p.py").write_text(PROGRAM)
    sources = tmp_path / "sources"
    sources.mkdir()
    store = Store(Path(os.environ["ATC_HOME"]))
    for name, operation in (("shop", "from_store"), ("other", "from_other")):
        path = sources / f"{name}.json"
        path.write_text(_spec(operation))
        store.add(load_spec(path, name=name))
    monkeypatch.chdir(folder)
    return folder


CASES = [
    (["shop"], ["from_store"]),  # the ambiguous word: the stored collection
    (["./shop"], ["from_file"]),  # written as a path: the file
    (["other"], ["from_other"]),  # stored only
    (["spec.json"], ["from_spec"]),  # a file only
    (["./shop", "other"], ["from_file", "from_other"]),
]


def _cli(words: list[str]) -> subprocess.CompletedProcess[str]:
    flags = [arg for word in words for arg in ("--tools", word)]
    return subprocess.run([str(ATC), "run", "p.py", *flags, "--sandbox", "local"], capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)


@pytest.mark.parametrize(("words", "expected"), CASES)
def test_cli_and_python_api_pick_the_same_collections(work: Path, words: list[str], expected: list[str]) -> None:
    proc = _cli(words)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == repr(expected)
    tools = words[0] if len(words) == 1 else words
    assert atc.run(PROGRAM, tools=tools, sandbox="local").answer.strip() == repr(expected)
    by_reader = [t.name for c in collections_of(tools) for t in c.tools]
    by_solver = [t.name for t in atc.Solver(tools).toolset.tools.values()]
    by_probe = [t.name for t in resolve_toolset(tools).tools.values()]
    assert by_reader == by_solver == by_probe == expected


def test_the_ambiguous_word_is_said_alike(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    note = "'shop' is both a stored collection and a file here; using the stored collection (give ./shop for the file)"
    assert note in _cli(["shop"]).stderr
    collections_of("shop")
    assert note in capsys.readouterr().err
    collections_of(Path("shop"))  # a Path object is a path: no note, the file
    assert capsys.readouterr().err == ""


def test_a_word_that_names_nothing_is_not_found_alike(work: Path) -> None:
    proc = _cli(["nowhere"])
    assert proc.returncode == 2 and "nowhere" in proc.stderr
    with pytest.raises(NotFound):
        collections_of("nowhere")


def test_credentials_are_parsed_once_into_a_value() -> None:
    given = Credentials.parse(["api_key=env:SHOP_KEY", "shop.bearer=env:SHOP_TOKEN"])
    assert given == {"api_key": "SHOP_KEY", "shop.bearer": "SHOP_TOKEN"}
    assert Credentials.of({"api_key": "env:SHOP_KEY", "shop.bearer": "SHOP_TOKEN"}) == given
    assert Credentials.of(given) is given
    toolset = Toolset([], credentials={"api_key": "env:SHOP_KEY"})
    assert isinstance(toolset.credentials, Credentials) and toolset.credentials == {"api_key": "SHOP_KEY"}
    assert given.merged({"api_key": "env:OTHER"})["api_key"] == "OTHER"
    with pytest.raises(atc.errors.UsageError):
        Credentials.parse(["api_key=SHOP_KEY"])
