"""What a new user meets in the first hour (issue 30, item 6, and the import's last words): the
extras each part needs, said in the README; the README's Python example on a machine without a
model; one-line errors that say ``atc`` once; ``atc tools show COLLECTION TOOL``; an MCP source
without the SDK; and an import that says nothing after it is over.

Real subprocesses of ``atc`` and of the README's own code where the point is what a user sees."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from atc.cli import main
from atc.cli.embed_report import EmbedReport
from tests.test_docs import blocks

ROOT = Path(__file__).resolve().parents[1]
ATC = Path(sys.executable).with_name("atc")


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATC_", "OPENAI_"))}
    env.update({"ATC_HOME": str(tmp_path / "home"), "ATC_SEARCH_SERVER": "off", "PYTHONPATH": str(ROOT), **more})
    return env


# -- extras -------------------------------------------------------------------------------------


def test_the_readme_names_every_extra_and_all_installs_them() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    users = sorted(set(extras) - {"test", "dev", "all"})
    readme = (ROOT / "README.md").read_text()
    lines = [line for line in readme.splitlines() if line.startswith("- `atc[")]
    for name in [*users, "all"]:
        assert sum(f"`atc[{name}]`" in line for line in lines) == 1, f"README: one line for atc[{name}]"
    (everything,) = extras["all"]
    assert sorted(re.fullmatch(r"atc\[(.+)\]", everything).group(1).split(",")) == users  # type: ignore[union-attr]
    # CI installs exactly what it installed before: test, dev and all of the user's extras
    install = next(line for line in (ROOT / "scripts/test.sh").read_text().splitlines() if "pip install" in line)
    assert "'.[test,dev,all]'" in install


@pytest.mark.slow  # the whole README example: a mock, a sandbox run and a session
def test_the_readme_python_example_says_when_no_model_is_configured(tmp_path: Path) -> None:
    (code,) = [b.text for b in blocks(ROOT / "README.md") if b.lang == "python"]
    script = tmp_path / "readme.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env=_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-2:]
    assert last[0].startswith("no model is configured: set OPENAI_API_KEY or OPENAI_BASE_URL"), proc.stdout
    assert "ATC_MODEL" in last[1]  # the hint, as `atc solve` prints it


# -- one-line errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "expected"), [
    (["frobnicate"], "atc: error: argument COMMAND: invalid choice: 'frobnicate'"),
    (["--bogus"], "atc: error: unrecognized arguments: --bogus"),
    (["tools", "show"], "atc: error: tools show: the following arguments are required: NAME"),
    (["sandbox"], "atc: error: sandbox: choose a subcommand"),  # a message of the library that names atc
])
def test_an_error_says_atc_once(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(expected), err
    assert "atc: error: atc" not in err and len(err.strip().splitlines()) <= 2


def test_tools_show_takes_a_collection_and_a_tool_as_two_words(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "import", str(ROOT / "atc/examples/bookshop/openapi.json"), "--no-embed"]) == 0
    capsys.readouterr()
    assert main(["tools", "show", "bookshop", "get_book"]) == 0
    two = capsys.readouterr().out
    assert main(["tools", "show", "bookshop.get_book"]) == 0
    assert capsys.readouterr().out == two and two.startswith("get_book(book_id: int)")
    assert main(["tools", "show", "bookshop", "nosuch"]) == 2
    assert "no tool named 'bookshop.nosuch'" in capsys.readouterr().err
    assert main(["tools", "show", "shop", "get_book"]) == 2
    err = capsys.readouterr().err
    assert "no collection 'shop'" in err and "COLLECTION.TOOL" in err


def test_an_mcp_source_without_the_sdk_is_one_clean_error(tmp_path: Path) -> None:
    """The SDK hidden from a real ``atc`` process: the install hint, and no RuntimeWarning."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n\nclass _NoMcp:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('mcp', 'mcp_types'):\n"
        "            raise ImportError(f'No module named {name!r}')\n        return None\n\n"
        "sys.meta_path.insert(0, _NoMcp())\n")
    env = _env(tmp_path, PYTHONPATH=f"{hide}{os.pathsep}{ROOT}")
    program = tmp_path / "p.py"
    program.write_text("print(1)\n")
    for argv in (["run", str(program), "--tools", "mcp:python -m tests.support.mcp_servers.shop", "--sandbox", "local"],
                 ["tools", "import", "mcp:python -m tests.support.mcp_servers.shop"]):
        proc = subprocess.run([str(ATC), *argv], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.splitlines() == ["atc: error: MCP servers need the MCP SDK, which is not installed",
                                            "  pip install 'atc[mcp]'  (the official MCP SDK: pip install mcp)"]


# -- an import says nothing after it is over -----------------------------------------------------


def test_the_background_embedding_is_said_on_a_terminal_only() -> None:
    """Off a terminal a line on stderr may be read after the next command began (an agent reading
    the streams): the import's JSON says it instead (``embedded.background``, ``embedded.pid``)."""
    quiet, told = io.StringIO(), io.StringIO()
    EmbedReport(None, quiet, tty=False).background(188, 4242)
    EmbedReport(None, quiet, tty=False).background(188, None)
    EmbedReport(None, told, tty=True).background(188, 4242)
    assert quiet.getvalue() == ""
    assert told.getvalue() == ("atc: the full model embeds 188 tools in the background (pid 4242); searches "
                               "meanwhile embed the few they short-list\n")
