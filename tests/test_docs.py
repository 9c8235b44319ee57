"""The docs are true: every command and flag of the CLI is in the reference, every JSON field of a
result is documented, no link leaves the repository, and every code block runs.

Which files: ``README.md``, ``docs/*.md`` and the bundled examples' ``atc/examples/*/README.md``.

How code blocks are run (the conventions are also in docs/README.md, for whoever writes docs):

- Every fence names its language. ``python`` blocks of a file run in order in ONE interpreter
  (a later block may use what an earlier one defined). ``console`` blocks hold commands after
  ``$ `` (output lines without it are not run); ``bash``/``sh``/``shell`` blocks are scripts,
  one command a line. All shell commands of a file run in order in ONE bash session (``export``,
  ``cd`` and background jobs carry over); each must exit 0, or N when the line ends with
  ``# exit N``. A command ending in ``&`` with ``--port N`` is waited for until the port
  listens. ``json`` blocks must parse. Other languages (``text``, ``yaml``...) are not run.
- A block that cannot run here (an install, a build that takes minutes, a server we do not have)
  carries ``<!-- docs-test: skip (why) -->`` on the line before its fence; the reason is required.
- The environment: the repository root as working directory, an empty ``ATC_HOME`` per file,
  the scripted OpenAI-compatible server of ``tests/support/fakes/openai_server.py`` as the model (it
  answers a task about a bundled example's tools with that example's program, anything else with
  ``print(42)``), no Docker engine (programs run in the local sandbox), and ports 8000 and 8765
  (``atc serve``'s default) replaced by free ports (``atc mock --port 8000`` in the docs must not
  collide with anything here).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from atc import examples
from tests.support.fakes.openai_server import ScriptedOpenAI

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "atc" / "examples").glob("*/README.md"))]
CLI_MD = ROOT / "docs" / "cli.md"
PYTHON_MD = ROOT / "docs" / "python.md"
SHELLS = ("console", "bash", "sh", "shell")
RUN_OPTIONS = "RUN OPTIONS"
_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)\s*$")
_SKIP = re.compile(r"^<!--\s*docs-test:\s*skip\b\s*(?:\((?P<why>[^)]*)\))?\s*-->\s*$")
_EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")


@dataclass(frozen=True)
class Block:
    file: Path
    line: int  # of the opening fence
    lang: str
    text: str
    skip: str | None  # the reason, when the block is marked to be skipped

    @property
    def where(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, with their skip markers."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2), i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        marker = _SKIP.match(lines[start - 1].strip()) if start > 0 else None
        skip = None if marker is None else (marker.group("why") or "").strip()
        out.append(Block(path, start + 1, lang, "\n".join(body) + "\n", skip))
        i += 1
    return out


def ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


# -- shape ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", DOC_FILES, ids=ids(DOC_FILES))
def test_every_fence_names_its_language_and_every_skip_its_reason(path: Path) -> None:
    for block in blocks(path):
        assert block.lang, f"{block.where}: a fence without a language (```python, ```console, ```text...)"
        assert block.skip is None or block.skip, f"{block.where}: docs-test: skip needs a reason in parentheses"


@pytest.mark.parametrize("path", DOC_FILES, ids=ids(DOC_FILES))
def test_links_stay_in_the_repository_and_resolve(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for outside in ("../shared", "/work/", "bench-data"):
        assert outside not in text, f"{path.name} points outside the repository: {outside}"
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+://", target):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f"{path.name}: broken link {target}"
        assert ROOT in linked.parents or linked == ROOT, f"{path.name}: {target} leaves the repository"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{path.name}: no heading for #{anchor} in {linked.name}"


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    out = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().replace("`", "").lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def test_readme_stays_short() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    # 100: the first steps include the extras a command needs and what atc.solve says without a model
    assert len(text.splitlines()) <= 100, "README.md is the pitch and the first steps; the rest goes in docs/"
    assert "docs/cli.md" in text and "docs/README.md" in text


# -- the CLI reference ---------------------------------------------------------------------------


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub)command of the parser tree, with its parser."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def sections(text: str) -> dict[str, str]:
    """``## title`` -> the text up to the next ``## ``."""
    out: dict[str, str] = {}
    title = None
    for line in text.splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            out[title] = ""
        elif title is not None:
            out[title] += line + "\n"
    return out


def test_cli_reference_has_every_command_flag_and_argument() -> None:
    from atc.cli import build_parser

    parts = sections(CLI_MD.read_text(encoding="utf-8"))
    assert "atc" in parts and RUN_OPTIONS in parts
    shared = parts["atc"]
    missing = []
    for path, parser in commands(build_parser()):
        leaf = not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
        title = " ".join(("atc", *path))
        own = [a for a in parser._actions if not isinstance(a, (argparse._SubParsersAction, argparse._HelpAction))]
        if title not in parts:
            # A command group (``atc tools``) needs no section of its own when it has no flag of its own.
            if leaf or any(a.option_strings and not all(o in shared for o in a.option_strings) for a in own):
                missing.append(f"## {title}")
            continue
        section = parts[title]
        extra = parts[RUN_OPTIONS] if RUN_OPTIONS in section else ""
        for action in own:
            for option in action.option_strings or [action.metavar or action.dest]:
                if not re.search(rf"(?<![\w-]){re.escape(str(option))}(?![\w-])", section + shared + extra):
                    missing.append(f"{title}: {option}")
    assert not missing, "docs/cli.md lacks: " + ", ".join(missing)


def test_every_result_field_is_documented() -> None:
    """Every key of the JSON that results print is named in docs/cli.md or docs/python.md."""
    from atc.loop.solving import Attempt, Solution, Usage
    from protocols.model import Collection, Tool
    from protocols.store import CollectionInfo
    from sandbox.api import ErrorInfo, ExecutionResult, ToolCall
    from sandbox.attribution.fault import Attribution

    text = CLI_MD.read_text(encoding="utf-8") + PYTHON_MD.read_text(encoding="utf-8")
    docs: dict[str, Any] = {
        "ExecutionResult": ExecutionResult(ok=True, answer="", sandbox="local", duration_ms=0.0).to_dict(),
        "ErrorInfo": ErrorInfo(type="KeyError", message="").to_dict(),
        "ToolCall": ToolCall("t", {}, "GET", "/", None, False, None, 0.0).to_dict(),
        "Attribution": Attribution(None, "").to_dict(),
        "Solution": Solution(ok=True, answer="", program="").to_dict(),
        "Attempt": Attempt(program="", ok=False, error=None).to_dict(),
        "Usage": Usage().to_dict(),
        "Tool": Tool(name="t", collection="c").to_dict(),
        "Collection": Collection(name="c").to_dict(),
        "CollectionInfo": CollectionInfo("c", 0, "", "", "").to_dict(),
    }
    missing = [f"{kind}.{key}" for kind, doc in docs.items() for key in doc if f'"{key}"' not in text
               and f"`{key}`" not in text]
    assert not missing, "undocumented JSON fields: " + ", ".join(missing)
    for cls in (ExecutionResult, ErrorInfo, ToolCall, Solution, Attempt):
        assert cls.__name__ in PYTHON_MD.read_text(encoding="utf-8")
        assert dataclasses.is_dataclass(cls)


# -- running the blocks --------------------------------------------------------------------------


def _reply_for(programs: dict[str, str]) -> Any:
    def reply(body: dict[str, Any]) -> str:
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        for marker, program in programs.items():
            if f"{marker}(" in prompt:
                return f"```python\n{program}```"
        return "```python\nprint(42)\n```"

    return reply


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedOpenAI]:
    """The scripted model: for each bundled example, a tool name only it has -> its program."""
    from protocols import load_spec

    programs = {}
    for name in examples.names():
        spec = next(p for p in examples.path(name).iterdir() if p.suffix in (".json", ".yaml", ".yml"))
        programs[load_spec(spec).tools[0].name] = examples.path(f"{name}/program.py").read_text()
    with ScriptedOpenAI(router=_reply_for(programs)) as server:
        yield server


@pytest.fixture()
def doc_env(model: ScriptedOpenAI, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATC_", "OPENAI_", "DOCKER_"))}
    env.update(ATC_HOME=str(tmp_path / "atc-home"), ATC_MODEL="scripted", OPENAI_BASE_URL=model.base_url,
               DOCKER_HOST="unix:///nonexistent/docker.sock",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def shell_commands(block: Block) -> list[tuple[str, int]]:
    """(command, expected exit status) of a shell block, continuation lines joined."""
    if block.lang == "console":
        lines, command = [], None
        for raw in block.text.splitlines():
            if command is not None:
                command += "\n" + raw
            elif raw.startswith("$ "):
                command = raw[2:]
            if command is not None and not command.endswith("\\"):
                lines.append(command)
                command = None
    else:
        lines = []
        for raw in re.sub(r"\\\n", " ", block.text).splitlines():
            if raw.strip() and not raw.strip().startswith("#"):
                lines.append(raw)
    out = []
    for line in lines:
        m = _EXIT.search(line)
        out.append((line[: m.start()] if m else line, int(m.group(1)) if m else 0))
    return out


_PRELUDE = r"""
set -o pipefail
__wait_port() {
  for __i in $(seq 1 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "@@@ port $1 never opened" >&2
  return 1
}
__fail() {
  echo "@@@ FAILED: $1" >&2
  kill $(jobs -p) 2>/dev/null
  exit 97
}
"""


def shell_script(path: Path) -> tuple[str, int]:
    """One bash script for every shell command of the file, and how many commands it runs."""
    free = [_free_port()]
    while len(free) < 2:
        free += [port for port in [_free_port()] if port not in free]
    ports = {"8000": str(free[0]), "8765": str(free[1])}
    parts, count = [_PRELUDE], 0
    for block in blocks(path):
        if block.lang not in SHELLS or block.skip is not None:
            continue
        for command, expected in shell_commands(block):
            for fixed, free in ports.items():
                command = re.sub(rf"(?<!\d){fixed}(?!\d)", free, command)
            count += 1
            where = f"{block.where} $ {command.strip()}"
            parts.append(f"echo {json.dumps('@@@ ' + where)} >&2")
            if command.rstrip().endswith("&"):
                parts.append(command)
                listen = re.search(r"--port\s+(\d+)", command)
                if listen and listen.group(1) != "0":
                    parts.append(f"__wait_port {listen.group(1)} || __fail {json.dumps(where)}")
                continue
            parts.append(command)
            parts.append(f'__rc=$?; if [ "$__rc" != "{expected}" ]; then '
                         f'__fail "exit $__rc, expected {expected}: {json.dumps(where)[1:-1]}"; fi')
    parts.append("kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; exit 0")
    return "\n".join(parts) + "\n", count


SHELL_FILES = [p for p in DOC_FILES if any(b.lang in SHELLS and b.skip is None for b in blocks(p))]
PYTHON_FILES = [p for p in DOC_FILES if any(b.lang == "python" and b.skip is None for b in blocks(p))]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", SHELL_FILES, ids=ids(SHELL_FILES))
def test_shell_blocks_run(path: Path, doc_env: dict[str, str], tmp_path: Path) -> None:
    script, count = shell_script(path)
    assert count, f"{path.name}: no command to run"
    # Files, not pipes: a background job still holding a pipe would keep us reading until it dies.
    with open(tmp_path / "out", "w+") as out, open(tmp_path / "err", "w+") as errors:
        proc = subprocess.Popen(["bash", "-c", script], cwd=ROOT, env=doc_env, stdout=out, stderr=errors,
                                text=True, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=240)
        except subprocess.TimeoutExpired:
            timed_out = True  # said below with the command that hung (the last one announced)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # whatever a command left in the background
            except ProcessLookupError:
                pass
            proc.wait()
        errors.seek(0)
        err = errors.read()
    if timed_out:
        started = [ln for ln in err.splitlines() if ln.startswith("@@@ ")]
        pytest.fail(f"{path.name}: still running after 240 s at {started[-1] if started else 'its start'}\n"
                    + err[-3000:])
    failed = [ln for ln in err.splitlines() if ln.startswith("@@@ FAILED") or "never opened" in ln]
    assert proc.returncode == 0 and not failed, (failed or [f"exit {proc.returncode}"])[0] + "\n" + err[-3000:]


PY_DRIVER = r"""
import json, sys, traceback
namespace = {"__name__": "__main__"}
for block in json.load(sys.stdin):
    try:
        exec(compile(block["code"], block["where"], "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        print("@@@ FAILED: " + block["where"], file=sys.stderr)
        sys.exit(1)
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", PYTHON_FILES, ids=ids(PYTHON_FILES))
def test_python_blocks_run(path: Path, doc_env: dict[str, str]) -> None:
    todo = [{"where": b.where, "code": b.text} for b in blocks(path) if b.lang == "python" and b.skip is None]
    done = subprocess.run([sys.executable, "-c", PY_DRIVER], input=json.dumps(todo), cwd=ROOT, env=doc_env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("path", DOC_FILES, ids=ids(DOC_FILES))
def test_json_blocks_parse(path: Path) -> None:
    for block in blocks(path):
        if block.lang == "json" and block.skip is None:
            try:
                json.loads(block.text)
            except ValueError as exc:
                pytest.fail(f"{block.where}: {exc}")
