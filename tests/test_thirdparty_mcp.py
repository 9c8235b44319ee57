"""Real third-party MCP servers, installed from the package registries by
scripts/install-test-servers.sh: ``mcp-server-time`` and ``mcp-server-git`` (PyPI, in
.cache/mcp-servers) and the reference ``@modelcontextprotocol/server-everything`` (npm, in
.cache/npm). Programs chain their tools through the gateway, one server or three at once.

None of them reaches the network: the time server is offline, the git server works on a repository
this test creates in tmp, and no tool of the everything server that fetches anything is called.
They skip, saying why, only when not installed, and under ``CI=true`` a missing server fails.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import atc
from sandbox.gateway.mcp.connections import close_servers

pytestmark = pytest.mark.slow  # the servers take 1-3 s to start

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".cache" / "mcp-servers" / "bin"
EVERYTHING = ROOT / ".cache" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"


def _need(path: Path, what: str) -> None:
    if path.exists():
        return
    message = f"{what} is not installed (scripts/install-test-servers.sh installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"under CI the MCP test servers must be installed: {message}")
    pytest.skip(message)


@pytest.fixture(autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    close_servers()


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A git repository with two commits and one unstaged change."""
    path = tmp_path / "repo"
    path.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.test",
           "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.test", "GIT_CONFIG_GLOBAL": "/dev/null"}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (path / "notes.txt").write_text("first line\n")
    git("add", "notes.txt")
    git("commit", "-q", "-m", "start the notes")
    (path / "notes.txt").write_text("first line\nsecond line\n")
    git("commit", "-q", "-am", "add a second line")
    (path / "notes.txt").write_text("first line\nsecond line\nthird, unstaged\n")
    return path


def _time() -> str:
    _need(BIN / "mcp-server-time", "mcp-server-time")
    return "mcp:" + shlex.join([str(BIN / "mcp-server-time"), "--local-timezone", "UTC"])


def _git(repo: Path) -> str:
    _need(BIN / "mcp-server-git", "mcp-server-git")
    return "mcp:" + shlex.join([str(BIN / "mcp-server-git"), "--repository", str(repo)])


def _everything() -> str:
    _need(EVERYTHING, "@modelcontextprotocol/server-everything")
    return "mcp:" + shlex.join([str(EVERYTHING), "stdio"])


def test_time_server_chain() -> None:
    program = """
now = get_current_time(timezone="UTC")
hhmm = now["datetime"][11:16]
there = convert_time(source_timezone=now["timezone"], time="09:30", target_timezone="Asia/Tokyo")
print(len(hhmm), there["target"]["datetime"][11:16], there["time_difference"])
"""
    r = atc.run(program, _time(), sandbox="local")
    assert r.ok, r.error
    assert r.answer == "5 18:30 +9.0h\n"
    assert [c.tool for c in r.calls] == ["get_current_time", "convert_time"]


def test_time_server_errors_are_tool_errors() -> None:
    r = atc.run('get_current_time(timezone="Mars/Olympus_Mons")', _time(), sandbox="local")
    assert r.error is not None and r.error.type == "ToolError" and r.error.tool == "get_current_time"
    assert "Mars/Olympus_Mons" in r.error.message


def test_git_server_chain_on_a_local_repository(repo: Path) -> None:
    program = f"""
import re
repo = {str(repo)!r}
status = git_status(repo_path=repo)
log = git_log(repo_path=repo, max_count=5)
first, second = re.findall(r"Commit: ([0-9a-f]{{40}})", log)
shown = git_show(repo_path=repo, revision=second)
print("modified:   notes.txt" in status, first != second, "start the notes" in shown, "+first line" in shown)
"""
    r = atc.run(program, _git(repo), sandbox="local")
    assert r.ok, r.error
    assert r.answer == "True True True True\n"
    assert [c.tool for c in r.calls] == ["git_status", "git_log", "git_show"]


def test_everything_server_structured_text_and_images_chain() -> None:
    program = """
weather = get_structured_content(location="Chicago")
total = get_sum(a=weather["temperature"], b=weather["humidity"])
said = echo(message=total)
caption, image = get_tiny_image()[:2]
print(sorted(weather), said.startswith("Echo: The sum of"), image["type"], image["mimeType"])
"""
    r = atc.run(program, _everything(), sandbox="local")
    assert r.ok, r.error
    assert r.answer == "['conditions', 'humidity', 'temperature'] True image image/png\n"


def test_everything_server_env_is_host_side_and_redacted(tmp_path: Path) -> None:
    _need(EVERYTHING, "@modelcontextprotocol/server-everything")
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"everything": {
        "command": str(EVERYTHING), "args": ["stdio"], "env": {"EVERYTHING_TOKEN": "tok-9f8e7d6c5b"}}}}))
    r = atc.run('env = get_env()\nprint(env.get("EVERYTHING_TOKEN"))\n', str(config), sandbox="local")
    assert r.ok, r.error
    assert r.answer == "[REDACTED]\n" and r.calls[0].redacted >= 1


def test_three_servers_in_one_program(repo: Path) -> None:
    program = """
import re
log = git_log(repo_path=REPO, max_count=1)
when = re.search(r"Date: (\\S+) (\\d\\d:\\d\\d)", log).group(2)
there = convert_time(source_timezone="UTC", time=when, target_timezone="Asia/Tokyo")
print(echo(message=there["time_difference"]))
""".replace("REPO", repr(str(repo)))
    r = atc.run(program, [_git(repo), _time(), _everything()], sandbox="local")
    assert r.ok, (r.error, r.stderr)
    assert r.answer == "Echo: +9.0h\n"
    assert [c.tool for c in r.calls] == ["git_log", "convert_time", "echo"]
