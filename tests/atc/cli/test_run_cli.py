"""``atc run``: exit codes, human output, ``--json`` documents, bad input without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from atc.cli import main
from tests.support.apis.library import SECRET, LibraryAPI

ATC = Path(sys.executable).with_name("atc")


@pytest.fixture()
def spec(api: LibraryAPI, tmp_path: Path) -> Path:
    return api.write_spec(tmp_path / "library.json")


def _program(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.py"
    path.write_text(text)
    return path


def test_good_program_json(spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = _program(tmp_path, "a = search_authors(name='lem')['results'][0]\n"
                              "print(len(list_author_books(author_id=a['id'])['books']))\n")
    code = main(["run", str(prog), "--tools", str(spec), "--sandbox", "local", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["ok"] and doc["answer"] == "2\n" and doc["sandbox"] == "local"
    assert [c["tool"] for c in doc["calls"]] == ["search_authors", "list_author_books"]
    assert doc["calls"][1]["path"] == "/authors/{author_id}/books" and doc["calls"][1]["line"] == 2
    assert doc["error"] is None


def test_failed_program_human_output(spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = _program(tmp_path, "print('partial')\nb = get_book(book_id=10)\nprint(b['author']['name'])\n")
    code = main(["run", str(prog), "--tools", str(spec), "--sandbox", "local"])
    out, err = capsys.readouterr()
    assert code == 1 and out == "partial\n"
    assert "error: KeyError: 'author'" in err and "at line 3: print(b['author']['name'])" in err
    assert "Traceback" not in err


def test_failed_program_json(spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = _program(tmp_path, "w = get_book(id=3)\n")
    code = main(["run", str(prog), "--tools", str(spec), "--sandbox", "local", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and not doc["ok"]
    assert doc["error"]["type"] == "ToolError" and doc["error"]["tool"] == "get_book" and doc["error"]["line"] == 1


def test_credentials_and_limits_flags(spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIB_KEY", SECRET)
    prog = _program(tmp_path, "for i in range(3):\n    print(create_order(book_id=10)['order_id'])\n")
    code = main(["run", str(prog), "--tools", str(spec), "--sandbox", "local", "--credential", "api_key=env:LIB_KEY",
                 "--max-calls", "2", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["answer"] == "1\n2\n" and doc["error"]["type"] == "CallBudget"
    assert SECRET not in json.dumps(doc)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["run", "/nonexistent/p.py", "--tools", "SPEC"], "cannot read program /nonexistent/p.py"),
        (["run", "PROG", "--tools", "SPEC", "--credential", "api_key"], "is not SCHEME=env:VAR"),
        (["run", "PROG", "--tools", "SPEC", "--timeout", "0"], "must be positive"),
        (["run", "PROG", "--tools", "SPEC", "--credential", "api_key=env:UNSET_VAR_X"], "UNSET_VAR_X is not set"),
        (["run", "PROG", "--tools", "BADSPEC"], "bad.json: invalid JSON"),
        (["run", "PROG"], "--tools"),
    ],
)
def test_bad_input_exits_2(argv: list[str], fragment: str, spec: Path, tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    prog = _program(tmp_path, "print(1)\n")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    argv = [{"SPEC": str(spec), "PROG": str(prog), "BADSPEC": str(bad)}.get(a, a) for a in argv]
    code = main([*argv, "--sandbox", "local"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert fragment in err and "Traceback" not in err


def test_unreadable_program_with_json_prints_one_document(spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "/nonexistent/p.py", "--tools", str(spec), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 2 and doc["ok"] is False and doc["error"]["type"] == "UsageError"


def test_installed_command_end_to_end(spec: Path, tmp_path: Path) -> None:
    prog = _program(tmp_path, "print(get_stats())\n")
    out = subprocess.run([str(ATC), "run", str(prog), "--tools", str(spec), "--sandbox", "local"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "{'books': 5, 'authors': 3}\n"
