"""MCP servers written for the tests with the official SDK (``mcp``), run as real processes, and
helpers to start them (stdio through atc, streamable HTTP on 127.0.0.1 as a subprocess) and to
check that none is left behind."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
#: ``--tools`` value of the shop server over stdio.
SHOP = "mcp:" + shlex.join([sys.executable, "-m", "tests.support.mcp_servers.shop"])


def shop_config(tmp: Path, *flags: str, env: dict[str, str] | None = None, name: str = "shop") -> tuple[Path, Path]:
    """An ``mcpServers`` file for the shop (run from the repo root) and the file it writes its pid to."""
    pid_file = tmp / f"{name}.pid"
    config = tmp / f"{name}-servers.json"
    config.write_text(json.dumps({"mcpServers": {name: {
        "command": sys.executable, "args": ["-m", "tests.support.mcp_servers.shop", *flags], "cwd": str(ROOT),
        "env": {"SHOP_PID_FILE": str(pid_file), **(env or {})}}}}))
    return config, pid_file


def alive(pid: int) -> bool:
    """Is ``pid`` a live process (a zombie counts as gone)?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)


def read_pid(path: Path, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = path.read_text().strip()
            if text:
                return int(text)
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    raise AssertionError(f"the server wrote no pid to {path}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_shop(transport: str = "http") -> Iterator[str]:
    """The shop over streamable HTTP (or ``transport="sse"``) on 127.0.0.1; yields its
    ``mcp+http://`` (``mcp+sse://``) source."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.mcp_servers.shop", f"--{transport}", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("the HTTP shop did not start") from None
                time.sleep(0.05)
        yield f"mcp+http://127.0.0.1:{port}/mcp" if transport == "http" else f"mcp+sse://127.0.0.1:{port}/sse"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
