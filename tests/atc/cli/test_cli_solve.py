"""``atc solve`` as a user runs it: a subprocess, the scripted model server and the library API
on 127.0.0.1, the local sandbox. Exit codes and readable errors, never a traceback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.apis.library import LibraryAPI
from tests.support.fakes.openai_server import ScriptedOpenAI

ATC = Path(sys.executable).with_name("atc")


@pytest.fixture()
def server() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as s:
        yield s


@pytest.fixture()
def spec(api: LibraryAPI, tmp_path: Path) -> Path:
    return api.write_spec(tmp_path / "library.json")


def atc(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **(env or {})}
    return subprocess.run([str(ATC), *args], capture_output=True, text=True, env=full, timeout=120)


def model_env(server: ScriptedOpenAI) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.base_url, "ATC_MODEL": "scripted-model"}


def assert_no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout


def test_success_json(server: ScriptedOpenAI, spec: Path) -> None:
    server.push("```python\nr = search_authors(name='Lem')\nprint(r['results'][0]['born'])\n```")
    proc = atc("solve", "When was Lem born?", "--tools", str(spec), "--sandbox", "local", "--json",
               env=model_env(server))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ok"] is True and doc["answer"].strip() == "1921" and doc["sandbox"] == "local"
    assert doc["calls"][0]["tool"] == "search_authors" and doc["calls"][0]["args"] == {"name": "Lem"}
    assert len(doc["attempts"]) == 1 and doc["usage"]["llm_calls"] == len(server.requests) == 1
    assert "search_authors" in doc["tools"] and doc["program"].startswith("r = search_authors")


def test_human_output_progress_on_stderr_answer_on_stdout(server: ScriptedOpenAI, spec: Path) -> None:
    server.push("```python\nprint(get_book(book_id=99)['title'])\n```", "```python\nprint(get_book(book_id=20)['title'])\n```")
    proc = atc("solve", "Title of book 20?", "--tools", str(spec), "--sandbox", "local", env=model_env(server))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Solaris\n"
    assert "attempt 1: ToolError at line 1" in proc.stderr and "blamed tool: get_book" in proc.stderr
    assert "attempt 2: ok" in proc.stderr
    assert_no_traceback(proc)


def test_model_that_never_writes_code_exits_1(server: ScriptedOpenAI, spec: Path) -> None:
    server.push(*["I cannot write code, but the answer is probably 1921."] * 3)
    proc = atc("solve", "When was Lem born?", "--tools", str(spec), "--sandbox", "local", "--max-reflections", "2",
               env=model_env(server))
    assert proc.returncode == 1
    assert "not solved after 3 attempts: NoProgram" in proc.stderr
    assert len(server.requests) == 3 and proc.stdout == ""
    assert_no_traceback(proc)


def test_model_that_never_writes_code_json(server: ScriptedOpenAI, spec: Path) -> None:
    server.push(*["No."] * 2)
    proc = atc("solve", "When was Lem born?", "--tools", str(spec), "--max-reflections", "1", "--json",
               env=model_env(server))
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["ok"] is False and doc["error"]["type"] == "NoProgram" and doc["usage"]["llm_calls"] == 2


def test_server_down_exits_1_readably(spec: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = atc("solve", "When was Lem born?", "--tools", str(spec),
               env={"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "ATC_MODEL": "m"})
    assert proc.returncode == 1
    assert f"cannot reach the model server at http://127.0.0.1:{port}/v1" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2
    assert_no_traceback(proc)


def test_no_model_configured_exits_2(spec: Path) -> None:
    proc = atc("solve", "When was Lem born?", "--tools", str(spec))
    assert proc.returncode == 2
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ATC_MODEL"):
        assert name in proc.stderr
    assert_no_traceback(proc)
    proc = atc("solve", "When was Lem born?", "--tools", str(spec), "--json")
    assert proc.returncode == 2 and json.loads(proc.stdout)["error"]["type"] == "ConfigError"


def test_bad_input_exits_2(spec: Path, tmp_path: Path, server: ScriptedOpenAI) -> None:
    assert atc("solve", "q", "--tools", str(spec), "--max-reflections", "-1", env=model_env(server)).returncode == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = atc("solve", "q", "--tools", str(bad), env=model_env(server))
    assert proc.returncode == 2
    assert_no_traceback(proc)
    assert server.requests == []


def test_static_mistake_is_reported_as_found_before_running(server: ScriptedOpenAI, spec: Path, api: LibraryAPI) -> None:
    server.push("```python\nprint(get_book(id=20)['title'])\n```", "```python\nprint(get_book(book_id=20)['title'])\n```")
    proc = atc("solve", "Title of book 20?", "--tools", str(spec), "--sandbox", "local", env=model_env(server))
    assert proc.returncode == 0 and proc.stdout == "Solaris\n"
    assert "attempt 1: ToolError at line 1 (found before running): get_book: unknown argument 'id'" in proc.stderr
    assert "blamed tool: get_book" in proc.stderr
    assert [r.path for r in api.requests] == ["/books/20"]  # only the fixed program reached the API
