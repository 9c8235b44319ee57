"""``atc serve``'s lifecycle: a client that goes away mid-run, and the refusals before serving.

A client process (``tests/support/serve_client.py``) starts a program that never ends and is killed with
SIGKILL -- no cancellation, no goodbye. Over stdio the server sees its stdin close; over HTTP it
sees the request's connection drop. Either way the program must be stopped at once (not at its
60 s timeout) and leave no process or container behind, on the local and the Docker sandbox; the
HTTP server keeps serving everyone else.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from atc.cli import main
from sandbox.docker.engine import docker_available
from tests.support.mcp_servers import ROOT
from tests.support.procs import descendants
from tests.support.serve import (
    TOKEN,
    Apis,
    HttpServe,
    containers,
    http_client,
    serve_args,
    serve_env,
    wait_gone,
    wait_spinning,
)
from tests.support.serve import apis as apis

needs_docker = pytest.mark.skipif(not docker_available(), reason="no Docker engine or no atc-sandbox:latest image")
SANDBOXES = ["local", pytest.param("docker", marks=[pytest.mark.docker, needs_docker])]


def _client(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.serve_client", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "connected"
    return proc


def _serve_pid(client: int) -> int:
    for pid in descendants(client):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in argv and any(a.endswith(b"/atc") for a in argv):
            return pid
    raise AssertionError("the client's atc serve process is not running")


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_stdio_client_that_dies_mid_run_leaves_nothing_behind(sandbox: str, apis: Apis, tmp_path: Path) -> None:
    env = serve_env(tmp_path / "home")
    client = _client(env, "stdio", *serve_args(apis, "--sandbox", sandbox, "--timeout", "60", shop=False))
    try:
        server = _serve_pid(client.pid)
        program = wait_spinning(server)
        everything = descendants(server) | program
    finally:
        client.send_signal(signal.SIGKILL)
        client.wait()
    began = time.monotonic()
    assert wait_gone(program, 15) == set(), "the program still runs after its client died"
    assert time.monotonic() - began < 15
    assert wait_gone({server} | everything, 20) == set(), "atc serve or a sandbox process outlived the client"
    if sandbox == "docker":
        deadline = time.monotonic() + 20
        while containers(server) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert containers(server) == [], "containers of the dead server are left behind"


def drop_mid_run(server: HttpServe, env: dict[str, str]) -> None:
    """A client process starts a never-ending program on ``server`` and is killed: the program
    must stop at once, and the server go on serving."""
    client = _client(env, "http", server.url)
    try:
        program = wait_spinning(server.proc.pid)
    finally:
        client.send_signal(signal.SIGKILL)
        client.wait()
    assert wait_gone(program, 15) == set(), "the program still runs after its client dropped"
    assert server.proc.poll() is None  # the server itself goes on serving

    async def next_client() -> str:
        async with http_client(server.url) as c:
            answer: str = (await c.call_tool("run_program", {"program": "print(6 * 7)"})).structured_content["answer"]
            return answer

    assert anyio.run(next_client) == "42\n"
    assert "the client went away" in server.stderr()


@pytest.mark.slow
@pytest.mark.docker
@needs_docker
def test_an_http_client_that_drops_mid_run_stops_its_program_in_docker(apis: Apis, tmp_path: Path) -> None:
    """(The local sandbox's case is in test_serve.py, on that module's server.)"""
    env = serve_env(tmp_path / "home")
    server = HttpServe.start(serve_args(apis, "--sandbox", "docker", "--timeout", "60", shop=False), env,
                             tmp_path / "stderr.log")
    try:
        drop_mid_run(server, env)
    finally:
        assert server.stop() == 0
    deadline = time.monotonic() + 20
    while containers(server.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert containers(server.proc.pid) == [], "containers of the stopped server are left behind"


# -- refusals before serving -----------------------------------------------------------------------


def _serve(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["serve", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_http_needs_a_long_enough_token(apis: Apis, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    tools = ["--tools", str(apis.specs[0]), "--transport", "http", "--port", "0"]
    code, _, err = _serve(tools, capsys)
    assert code == 2 and "needs a bearer token in $ATC_SERVE_TOKEN" in err and "secrets.token_urlsafe" in err
    code, _, err = _serve([*tools, "--token-env", "MY_TOKEN"], capsys)
    assert code == 2 and "$MY_TOKEN" in err
    monkeypatch.setenv("MY_TOKEN", "short")
    code, _, err = _serve([*tools, "--token-env", "MY_TOKEN"], capsys)
    assert code == 2 and "too short (5 characters" in err and "short" not in err.replace("too short", "")
    # another address than loopback: refused the same way, before anything listens
    code, _, err = _serve([*tools, "--host", "0.0.0.0"], capsys)
    assert code == 2 and "bearer token" in err


def test_bad_usage_is_refused_with_one_line(apis: Apis, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ATC_SERVE_TOKEN", TOKEN)
    spec = str(apis.specs[0])
    code, out, err = _serve(["--tools", spec, "--json"], capsys)
    assert code == 2 and "stdout is the MCP channel" in err and json.loads(out)["ok"] is False
    code, _, err = _serve(["--tools", spec, "--retriever", "anytool"], capsys)
    assert code == 2 and "has no model" in err
    code, _, err = _serve(["--tools", str(tmp_path / "missing.json")], capsys)
    assert code == 2 and "Traceback" not in err
    big = {"openapi": "3.0.3", "info": {"title": "Big", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
           "paths": {f"/r{i}": {"get": {"operationId": f"op{i}", "responses": {"200": {"description": "OK"}}}}
                     for i in range(101)}}
    (tmp_path / "big.json").write_text(json.dumps(big))
    code, _, err = _serve(["--tools", str(tmp_path / "big.json"), "--proxy-tools"], capsys)
    assert code == 2 and "would expose 101 tools" in err
    with HttpServe.start(serve_args(apis, "--sandbox", "local", shop=False), serve_env(tmp_path / "home"),
                         tmp_path / "stderr.log") as running:
        port = running.url.rsplit(":", 1)[1].split("/")[0]
        code, _, err = _serve(["--tools", spec, "--transport", "http", "--port", port, "--sandbox", "local"], capsys)
        assert code == 2 and f"cannot listen on 127.0.0.1:{port}" in err
    assert os.environ["ATC_SERVE_TOKEN"] not in err
