"""CLI start-up: a command loads only what it uses, the sandbox starts while the tools load, one
runner for one program, one Docker connection for ``auto``; and what was made lazy still holds
(https is verified, the first call's clock is the call's own). Timings are in
benchmarks/bench_cli.py; these tests check the mechanisms."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from atc import examples
from protocols import load_spec
from protocols.model import Collection, Tool
from sandbox import execute
from sandbox.api import Limits, Toolset
from sandbox.gateway.core import Gateway
from sandbox.local.backend import LocalBackend

SPEC = examples.path("bookshop/openapi.json")
HEAVY = ("jsonschema", "httpx", "asyncio", "openai", "docker", "requests", "http.cookiejar")
# Runs the CLI in-process and reports, after everything (atexit runs last what registered first),
# which of the heavy modules were imported.
PROBE = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write("LOADED " + json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)) + "\\n"))
from atc.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
raise SystemExit(code)
"""


def loaded(*argv: str, env: dict[str, str] | None = None) -> tuple[int, list[str], str]:
    done = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})
    line = next((ln for ln in done.stderr.splitlines() if ln.startswith("LOADED ")), "LOADED null")
    return done.returncode, json.loads(line[len("LOADED "):]) or [], done.stdout


def test_help_loads_nothing_heavy() -> None:
    code, heavy, out = loaded("--help")
    assert code == 0 and "solve" in out and heavy == []


def test_run_of_a_program_without_calls_loads_nothing_heavy(tmp_path: Path) -> None:
    program = tmp_path / "p.py"
    program.write_text("print('hi')\n")
    code, heavy, out = loaded("run", str(program), "--tools", str(SPEC), "--sandbox", "local")
    assert code == 0 and out == "hi\n"
    assert heavy == [], "a run that makes no call needs neither validation nor HTTP nor asyncio"


def test_run_with_calls_loads_what_calls_need_only(tmp_path: Path) -> None:
    from atc.mock import MockServer

    with MockServer(load_spec(SPEC)) as api:
        code, heavy, out = loaded("run", str(examples.path("bookshop/program.py")), "--tools", str(SPEC),
                                  "--base-url", api.url, "--sandbox", "local")
    assert code == 0 and out.strip()
    assert {"jsonschema", "httpx"} <= set(heavy), heavy
    assert not {"asyncio", "openai", "docker", "requests"} & set(heavy), heavy


def test_solve_on_the_local_sandbox_does_not_load_docker() -> None:
    from tests.support.fakes.openai_server import ScriptedOpenAI

    with ScriptedOpenAI(["```python\nprint('42')\n```"]) as model:
        code, heavy, out = loaded("solve", "What is it?", "--tools", str(SPEC), "--sandbox", "local",
                                  env={"OPENAI_BASE_URL": model.base_url, "ATC_MODEL": "m"})
    assert code == 0 and out == "42\n"
    # The default model client speaks HTTP itself: the openai package (a second of imports) stays out.
    assert "openai" not in heavy and "docker" not in heavy and "requests" not in heavy


def _spawn_counter(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    spawned: list[float] = []
    original = LocalBackend._spawn

    def counting(self: LocalBackend, limits: Limits) -> Any:
        spawned.append(time.monotonic())
        return original(self, limits)

    monkeypatch.setattr(LocalBackend, "_spawn", counting)
    return spawned


def test_one_shot_prepare_starts_exactly_one_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    spawned = _spawn_counter(monkeypatch)
    limits = Limits(timeout=10)
    pending = execute.prepare("local", limits, one_shot=True)
    backend = pending.backend()  # returns at once: the runner is still starting
    assert isinstance(backend, LocalBackend) and backend.pool_size == 0
    assert backend is not execute._BACKENDS.get("local"), "a one-shot backend is the caller's own"
    result = execute.run("print(6 * 7)", Toolset([load_spec(SPEC)]), limits, sandbox=backend)
    assert result.ok and result.answer == "42\n"
    time.sleep(0.3)
    assert len(spawned) == 1, "the run took the runner being started instead of spawning another, and no pool refills"
    backend.close()


def test_prepare_raises_in_the_callers_thread() -> None:
    pending = execute.prepare("vm", Limits())
    with pytest.raises(Exception, match="unknown sandbox"):
        pending.backend()


def test_a_run_waits_for_the_runner_a_warm_up_is_starting(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[list[Any]] = []  # one slot per _spawn call, in call order, filled with its runner
    original = LocalBackend._spawn

    def recording(self: LocalBackend, limits: Limits) -> Any:
        slot: list[Any] = []
        made.append(slot)
        worker = original(self, limits)
        slot.append(worker)
        return worker

    monkeypatch.setattr(LocalBackend, "_spawn", recording)
    limits = Limits(timeout=10)
    with LocalBackend(pool_size=1) as backend:
        backend.warm_up(limits)
        assert backend.run("print(1)", Toolset([]), limits).ok
        deadline = time.monotonic() + 10
        while not (len(made) == 2 and made[1]) and time.monotonic() < deadline:  # the refill after the take
            time.sleep(0.02)
        time.sleep(0.2)
        pooled = [w for ws in backend._warm.values() for w in ws]
        # The warm-up's runner (spawned first) ran the program; the refill's waits in the pool.
        # A run that did not wait would have spawned its own and left the warm-up's pooled.
        assert len(made) == 2 and pooled == made[1], "no runner was started cold"


@pytest.mark.docker
def test_auto_connects_to_docker_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.docker import backend as docker_backend
    from sandbox.docker import engine as docker_engine

    if not docker_engine.docker_available(refresh=True):
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    connects: list[float] = []
    original = docker_engine.connect

    def counting(timeout: float = 60.0) -> Any:
        connects.append(timeout)
        return original(timeout=timeout)

    monkeypatch.setattr(docker_engine, "connect", counting)
    monkeypatch.setattr(docker_backend, "connect", counting)
    monkeypatch.setattr(execute, "_BACKENDS", {})
    monkeypatch.setattr(execute, "_PROBED", [])
    docker_engine._available.clear()
    backend = execute.get_backend(None)
    try:
        assert backend.name == "docker"
        assert len(connects) == 1, "the probe's client is the backend's"
        assert backend.client.api.timeout == 60  # type: ignore[attr-defined]
        assert backend.run("print(1)", Toolset([]), Limits(timeout=30)).answer == "1\n"
    finally:
        backend.close()


# -- the lazy parts still hold -----------------------------------------------------------------


def _tls_server(tmp_path: Path) -> tuple[ThreadingHTTPServer, int]:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


@pytest.fixture()
def untrusted_https(tmp_path: Path) -> Iterator[int]:
    if not any(os.access(os.path.join(p, "openssl"), os.X_OK) for p in os.environ.get("PATH", "").split(":")):
        pytest.skip("openssl is not installed (it makes the test's certificate)")
    server, port = _tls_server(tmp_path)
    try:
        yield port
    finally:
        server.shutdown()
        server.server_close()


def test_https_is_still_verified(untrusted_https: int) -> None:
    """The shared client makes its TLS side lazily; a self-signed server must still be refused."""
    tool = Tool(name="ping", collection="c", method="GET", path="/ping")
    collection = Collection(name="c", tools=[tool], servers=[f"https://127.0.0.1:{untrusted_https}"])
    outcome = Gateway(Toolset([collection]), Limits()).call("ping", {})
    assert not outcome.ok and outcome.error is not None
    assert "certificate" in outcome.error["message"].lower() or "ssl" in outcome.error["message"].lower()


def test_the_first_calls_clock_excludes_loading(tmp_path: Path) -> None:
    """A fresh process: the first call's duration_ms is about the call, not about importing
    jsonschema and httpx (which happens just before its clock starts)."""
    from atc.mock import MockServer

    code = ("import json, sys, time\n"
            "from protocols import load_spec\nfrom sandbox.api import Limits, Toolset\nfrom sandbox.gateway.core import Gateway\n"
            "t = time.perf_counter()\n"
            "g = Gateway(Toolset([load_spec(sys.argv[1])], base_url=sys.argv[2]), Limits())\n"
            "out = g.call('get_shop', {'shop_id': 1})\n"
            "print(json.dumps({'wall': (time.perf_counter() - t) * 1000, 'call': g.calls[0].duration_ms}))\n")
    with MockServer(load_spec(SPEC)) as api:
        done = subprocess.run([sys.executable, "-c", code, str(SPEC), api.url], capture_output=True, text=True,
                              timeout=60)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["call"] < doc["wall"] / 2, doc


@pytest.mark.docker
def test_a_command_that_fails_early_leaves_no_container(tmp_path: Path) -> None:
    """``atc run`` starts the container while it loads the tools; when the tools turn out to be
    bad (exit 2), the container that was starting is still removed before the process ends."""
    from sandbox.docker.engine import OWNER_LABEL, connect, docker_available

    if not docker_available(refresh=True):
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    bad = tmp_path / "bad.json"
    bad.write_text('{"openapi": "3.0.0", "paths": ')
    program = tmp_path / "p.py"
    program.write_text("print(1)\n")
    atc = Path(sys.executable).parent / "atc"
    proc = subprocess.Popen([str(atc), "run", str(program), "--tools", str(bad), "--sandbox", "docker"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "Traceback" not in err
    client = connect()
    try:
        left = client.api.containers(all=True, filters={"label": [f"{OWNER_LABEL}={proc.pid}"]})
    finally:
        client.close()
    assert left == []


@pytest.mark.docker
def test_closing_waits_for_a_backend_still_being_prepared(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.docker.engine import INSTANCE_LABEL, connect, docker_available

    if not docker_available(refresh=True):
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    monkeypatch.setattr(execute, "_ONE_SHOT", [])
    pending = execute.prepare("docker", Limits(timeout=30), one_shot=True)
    execute.close_backends()  # at once: the backend is not made yet
    backend = pending.backend()
    assert execute._PENDING == [] and backend._closed  # type: ignore[attr-defined]
    time.sleep(1)  # a container a forgotten reservation started would show up by now
    client = connect()
    try:
        left = client.api.containers(all=True, filters={"label": [f"{INSTANCE_LABEL}={backend.instance}"]})  # type: ignore[attr-defined]
    finally:
        client.close()
    assert left == []
