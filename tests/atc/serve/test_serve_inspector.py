"""A real third-party MCP client talks to ``atc serve``: the MCP inspector's command-line mode
(``@modelcontextprotocol/inspector-cli`` from npm, the TypeScript SDK underneath), installed into
.cache/npm by scripts/install-test-servers.sh. It lists atc's tools and calls ``run_program``
over stdio (it starts atc itself) and over streamable HTTP with the bearer token.

It skips, saying why, when the inspector or node is missing; under ``CI=true`` that fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.serve import ATC, TOKEN, Apis, HttpServe, serve_args, serve_env
from tests.support.serve import apis as apis

pytestmark = pytest.mark.slow  # node and the server take a few seconds to start

ROOT = Path(__file__).resolve().parents[3]
INSPECTOR = ROOT / ".cache" / "npm" / "node_modules" / "@modelcontextprotocol" / "inspector-cli" / "build"
PROGRAM = "a = search_authors(name='Butler')['results'][0]\nprint(a['name'], len(list_author_books(author_id=a['id'])['books']))"


@pytest.fixture(scope="module")
def inspector() -> Path:
    missing = "node is not installed" if shutil.which("node") is None else \
        None if (INSPECTOR / "cli.js").exists() else \
        "the MCP inspector is not installed (scripts/install-test-servers.sh installs it)"
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"under CI the MCP inspector must be installed: {missing}")
        pytest.skip(missing)
    return INSPECTOR


def inspect(inspector: Path, target: list[str], env: dict[str, str], *method: str) -> dict[str, Any]:
    # The inspector finds its own package.json relative to the working directory: run it from its build folder.
    proc = subprocess.run(["node", "cli.js", "--cli", *target, *method], cwd=inspector, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
    doc: dict[str, Any] = json.loads(proc.stdout[proc.stdout.index("{"):])
    return doc


def test_the_inspector_lists_the_tools_and_runs_a_program_over_stdio(inspector: Path, apis: Apis,
                                                                     tmp_path: Path) -> None:
    env = serve_env(tmp_path / "home")
    target = [str(ATC), *serve_args(apis, "--sandbox", "local", shop=False)]
    listed = inspect(inspector, target, env, "--method", "tools/list")
    assert {"search_tools", "describe_tools", "run_program"} <= {t["name"] for t in listed["tools"]}
    ran = inspect(inspector, target, env, "--method", "tools/call", "--tool-name", "run_program",
                  "--tool-arg", f"program={PROGRAM}")
    assert ran["isError"] is False and ran["structuredContent"]["answer"] == "Octavia E. Butler 1\n"
    assert ran["content"][0]["text"].startswith("Octavia E. Butler 1\n[ok: 2 tool calls")


def test_the_inspector_runs_a_program_over_http_with_the_token(inspector: Path, apis: Apis, tmp_path: Path) -> None:
    env = serve_env(tmp_path / "home")
    with HttpServe.start(serve_args(apis, "--sandbox", "local", shop=False), env, tmp_path / "stderr.log") as server:
        target = [server.url, "--transport", "http", "--header", f"Authorization: Bearer {TOKEN}"]
        ran = inspect(inspector, target, env, "--method", "tools/call", "--tool-name", "run_program",
                      "--tool-arg", f"program={PROGRAM}")
        assert ran["structuredContent"]["answer"] == "Octavia E. Butler 1\n"
