"""MCP sources on the command line, end to end in real subprocesses of ``atc``: import a live
server into the store and use it by name, list/show/search its tools, probe it, and the ways a
server fails (crashes at start, hangs, speaks garbage, Ctrl-C mid-call): a readable error, the
right exit code, no traceback, and no server process left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.mcp_servers import ROOT, SHOP, read_pid, shop_config, wait_gone

ATC = str(Path(sys.executable).parent / "atc")


def atc(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ATC, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def _program(tmp_path: Path, text: str) -> str:
    p = tmp_path / "prog.py"
    p.write_text(text)
    return str(p)


@pytest.mark.slow
def test_import_stores_the_server_and_runs_use_it_by_name(tmp_path: Path) -> None:
    config, pid_file = shop_config(tmp_path, env={"SHOP_API_KEY": "key-value-123456"})
    r = atc("tools", "import", str(config), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["collection"] == "shop" and doc["source_format"] == "mcp" and "search_items" in doc["names"]
    assert doc["collections"][0]["mcp_server"]["env"] == ["SHOP_API_KEY", "SHOP_PID_FILE"]
    assert wait_gone(read_pid(pid_file))  # the import's server is stopped with the command
    home = Path(os.environ["ATC_HOME"])
    stored = "".join(p.read_text() for p in (home / "collections").glob("*.jsonl"))
    assert "key-value-123456" not in stored and '"SHOP_API_KEY"' in stored

    r = atc("tools", "list", "--json")
    assert [(c["name"], c["source_format"]) for c in json.loads(r.stdout)["collections"]] == [("shop", "mcp")]
    r = atc("tools", "show", "shop")
    assert r.returncode == 0 and "MCP server (stdio)" in r.stdout and "SHOP_API_KEY" in r.stdout
    assert "key-value-123456" not in r.stdout
    r = atc("tools", "show", "get_item", "--json")
    tool = json.loads(r.stdout)
    assert tool["method"] == "MCP" and tool["path"] == "get_item" and tool["annotations"] == {"readOnlyHint": True}
    r = atc("tools", "search", "supplier details", "-k", "1", "--json")
    assert json.loads(r.stdout)["hits"][0]["name"] == "supplier_info"

    prog = _program(tmp_path, 'print(get_item(item_id=2)["name"], whoami()["key"])\n')
    pid_file.unlink()
    r = atc("run", prog, "--tools", "shop", "--sandbox", "local", "--json",
            env={"SHOP_API_KEY": "key-value-123456", "SHOP_PID_FILE": str(pid_file)})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["answer"] == "mug [REDACTED]\n"
    assert wait_gone(read_pid(pid_file))

    r = atc("run", prog, "--tools", "shop", "--sandbox", "local", env={"SHOP_PID_FILE": str(pid_file)})
    # a missing variable is said before the program starts (exit 2), not at the first call
    assert r.returncode == 2 and "environment variable SHOP_API_KEY" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("flag", "wait", "words"), [
    ("--crash-at-start", "20", "exited before it answered (its stderr ends with: shop: missing configuration"),
    ("--hang-at-start", "1", "did not answer the MCP handshake within 1 s"),
    ("--garbage", "5", "non-MCP output on stdout: 'this is not JSON-RPC'"),
])
def test_a_server_that_fails_to_start_is_a_clear_error_and_leaves_no_process(
        tmp_path: Path, flag: str, wait: str, words: str) -> None:
    config, pid_file = shop_config(tmp_path, flag)
    started = time.monotonic()
    r = atc("run", _program(tmp_path, "print(1)"), "--tools", str(config), "--sandbox", "local",
            env={"ATC_MCP_START_TIMEOUT": wait})
    assert r.returncode == 2, r.stderr
    assert words in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) <= 2
    assert time.monotonic() - started < 30
    assert wait_gone(read_pid(pid_file))


@pytest.mark.slow
def test_unknown_command_and_unreachable_url_exit_2(tmp_path: Path) -> None:
    r = atc("tools", "import", "mcp:/nonexistent/mcp-server --stdio")
    assert r.returncode == 2 and "command not found: /nonexistent/mcp-server" in r.stderr
    r = atc("run", _program(tmp_path, "print(1)"), "--tools", "mcp+http://127.0.0.1:9/mcp", "--json")
    assert r.returncode == 2 and json.loads(r.stdout)["ok"] is False and "cannot connect" in r.stderr
    r = atc("run", _program(tmp_path, "print(1)"), "--tools", 'mcp:"unclosed')
    assert r.returncode == 2 and "cannot split the command line" in r.stderr


@pytest.mark.slow
def test_ctrl_c_during_a_call_stops_the_server(tmp_path: Path) -> None:
    config, pid_file = shop_config(tmp_path)
    prog = _program(tmp_path, 'print(greet(name="a"), flush=True)\nslow(seconds=60)\n')
    proc = subprocess.Popen([ATC, "run", prog, "--tools", str(config), "--sandbox", "local"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid = read_pid(pid_file, timeout=30)
        time.sleep(1.5)  # the program is now waiting for slow()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    assert wait_gone(pid)


@pytest.mark.slow
def test_probe_documents_read_only_mcp_tools_and_skips_the_rest(tmp_path: Path) -> None:
    r = atc("probe", SHOP, "--no-llm", "--sandbox", "local", "--json", "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    status = {t["name"]: t for t in json.loads(r.stdout)["tools"]}
    assert status["search_items"]["status"] == "documented"
    assert status["search_items"]["response_schema"]["properties"]["items"]["type"] == "array"
    assert status["get_item"]["status"] == "documented"
    for unsafe in ("order", "crash", "greet"):
        assert status[unsafe]["status"] == "skipped" and "readOnlyHint" in status[unsafe]["reason"]
    assert status["crash"]["calls"] == 0

    # the documented tools, importable again, still call the server
    listing = json.loads((tmp_path / "out" / "tools.json").read_text())
    assert listing["mcpServer"]["command"] == sys.executable and listing["tools"][0]["name"] == "search_items"
    r = atc("tools", "import", str(tmp_path / "out" / "tools.json"), "--name", "probed")
    assert r.returncode == 0, r.stderr
    r = atc("run", _program(tmp_path, 'print(search_items(query="mug")["items"][0]["price"])'), "--tools", "probed",
            "--sandbox", "local")
    assert r.returncode == 0 and r.stdout == "8.5\n", r.stderr
