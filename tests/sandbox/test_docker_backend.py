"""The Docker backend against the real engine, the real sandbox image and real HTTP APIs on 127.0.0.1.

Tests marked ``docker`` skip when there is no engine or no ``atc-sandbox:latest`` (and fail under
``ATC_REQUIRE_DOCKER=1``). The error mapping and the engine-absent paths need no engine.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atc.cli import main
from atc.errors import SandboxError
from sandbox import wire
from sandbox.api import Backend, ExecutionResult, Limits, Toolset
from sandbox.docker.backend import (
    DEFAULT_IMAGE,
    HOST_LABEL,
    INSTANCE_LABEL,
    OWNER_LABEL,
    DockerBackend,
    connect,
    docker_available,
    translate_docker_error,
)
from sandbox.docker.cells import Cell, CellError
from sandbox.inside.container_server import sockets_in_use
from tests.support.apis.library import SECRET, LibraryAPI

REPO = Path(__file__).resolve().parents[2]

needs_docker = pytest.mark.skipif(not docker_available(), reason="no Docker engine or no atc-sandbox:latest image")
docker_test = [pytest.mark.docker, needs_docker]


@pytest.fixture()
def toolset(api: LibraryAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Toolset:
    from protocols.loaders import load_spec

    monkeypatch.setenv("LIB_KEY", SECRET)

    spec = api.write_spec(tmp_path / "library.json")
    return Toolset(collections=[load_spec(spec)], credentials={"api_key": "env:LIB_KEY"})


@pytest.fixture(scope="module")
def backend() -> Iterator[DockerBackend]:
    if not docker_available():
        pytest.skip("no Docker engine or no atc-sandbox:latest image")
    with DockerBackend(pool_size=2) as b:
        yield b


def _containers(owner: int | None = None, *, instance: str | None = None,
                running_only: bool = False) -> list[dict[str, object]]:
    label = f"{OWNER_LABEL}={owner}" if owner is not None else f"{INSTANCE_LABEL}={instance}"
    client = connect(timeout=10)
    try:
        return list(client.api.containers(all=not running_only, filters={"label": label}))
    finally:
        client.close()


# --- error mapping: no engine needed --------------------------------------------------------------


def _exception_classes() -> list[type[BaseException]]:
    import docker.errors
    import requests.exceptions

    out = []
    for module in (docker.errors, requests.exceptions):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and not issubclass(cls, Warning) \
                    and cls.__module__.startswith(("docker", "requests")):
                out.append(cls)
    return out


def _instance(cls: type[BaseException]) -> BaseException:
    for args in (("boom",), ("boom", None), ()):
        try:
            return cls(*args)
        except TypeError:
            continue
    return cls.__new__(cls)


@pytest.mark.parametrize("cls", _exception_classes(), ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_every_docker_and_requests_exception_has_its_own_message(cls: type[BaseException]) -> None:
    err = translate_docker_error(_instance(cls))
    assert isinstance(err, SandboxError)
    assert not err.message.startswith("Docker failed:"), f"{cls.__name__} falls through to the catch-all"
    assert err.message.strip()


def test_engine_and_image_errors_carry_the_fix() -> None:
    import docker.errors
    import requests.exceptions

    refused = translate_docker_error(requests.exceptions.ConnectionError("Connection refused"))
    assert "not reachable" in refused.message and "--sandbox local" in (refused.hint or "")
    down = translate_docker_error(docker.errors.DockerException(
        "Error while fetching server API version: ('Connection aborted.', FileNotFoundError(2))"))
    assert "not reachable" in down.message and "setup-docker.sh" in (down.hint or "")
    missing = translate_docker_error(docker.errors.ImageNotFound("No such image: atc-sandbox:latest"))
    assert "atc-sandbox:latest" in missing.message and "atc sandbox build" in (missing.hint or "")
    already = SandboxError("kept")
    assert translate_docker_error(already) is already


def test_no_engine_means_unavailable_and_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    started = time.monotonic()
    assert docker_available(refresh=True) is False
    assert time.monotonic() - started < 2
    with pytest.raises(SandboxError) as info:
        DockerBackend()
    assert "not running" in info.value.message and "--sandbox local" in (info.value.hint or "")


def test_an_engine_that_refuses_is_translated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "dead.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def hang_up() -> None:
        conn, _ = listener.accept()
        conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    try:
        with pytest.raises(SandboxError) as info:
            connect(timeout=3)
        assert "Docker engine" in info.value.message
    finally:
        listener.close()


def test_status_without_engine_exits_2_with_one_json_document(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    code = main(["sandbox", "status", "--json"])
    out, err = capsys.readouterr()
    assert code == 2
    doc = json.loads(out)
    assert doc["ok"] is False and doc["engine"] is False and doc["auto_backend"] == "local"
    assert "Traceback" not in err and "not running" in err


# --- against the engine ---------------------------------------------------------------------------


@pytest.mark.docker
@needs_docker
def test_backend_satisfies_the_protocol(backend: DockerBackend) -> None:
    assert isinstance(backend, Backend)
    assert backend.name == "docker"


@pytest.mark.docker
@needs_docker
def test_dependent_calls_run_through_the_host_gateway(backend: DockerBackend, toolset: Toolset, api: LibraryAPI,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIB_KEY", SECRET)
    program = (
        "found = search_authors(name='Lem')\n"
        "books = list_author_books(author_id=found['results'][0]['id'])\n"
        "cheapest = min(books['books'], key=lambda b: b['price'])\n"
        "order = create_order(book_id=cheapest['id'], quantity=2)\n"
        "print(cheapest['title'], order['total'])\n"
    )
    result = backend.run(program, toolset, Limits(timeout=20))
    assert result.ok, result.to_dict()
    assert result.sandbox == "docker"
    assert result.answer == "The Cyberiad 17.5\n"
    assert [(c.tool, c.line, c.path) for c in result.calls] == [
        ("search_authors", 1, "/authors"),
        ("list_author_books", 2, "/authors/{author_id}/books"),
        ("create_order", 4, "/orders"),
    ]
    assert [r.path for r in api.requests] == ["/authors?name=Lem", "/authors/2/books", "/orders"]
    assert api.requests[-1].headers.get("X-API-Key") == SECRET
    for item in ("network:none", "readonly-rootfs", "cap-drop:ALL", "no-new-privileges", "user:65534",
                 "pids:64", "memory:512MB"):
        assert item in result.isolation


@pytest.mark.docker
@needs_docker
def test_errors_carry_the_program_line(backend: DockerBackend, toolset: Toolset) -> None:
    program = "a = search_authors(name='Le Guin')\nfirst = a['results'][0]\nprint(first['email'])\n"
    result = backend.run(program, toolset, Limits(timeout=20))
    assert not result.ok and result.error is not None
    assert (result.error.type, result.error.line) == ("KeyError", 3), (result.error.message, result.calls)
    assert result.error.code == "print(first['email'])"

    missing = backend.run("x = 1\nbook = get_book(book_id=999)\n", toolset, Limits(timeout=20))
    assert missing.error is not None
    assert (missing.error.type, missing.error.line, missing.error.tool) == ("ToolError", 2, "get_book")
    assert "404" in missing.error.message

    syntax = backend.run("print(1)\nif True print(2)\n", toolset, Limits(timeout=20))
    assert syntax.error is not None and (syntax.error.type, syntax.error.line) == ("SyntaxError", 2)


@pytest.mark.docker
@needs_docker
def test_the_sandbox_is_locked_down(backend: DockerBackend, toolset: Toolset, api: LibraryAPI,
                                    monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LIB_KEY", SECRET)
    monkeypatch.setenv("H3_HOST_SECRET", "host-secret-51d2")
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text("file-secret-9c1e")
    program = f"""
import json, os, socket
report = {{}}
report['uid'] = os.getuid()
report['ifaces'] = sorted(l.split(':')[0].strip() for l in open('/proc/self/net/dev').read().splitlines()[2:])
s = socket.socket()
s.settimeout(1)
try:
    s.connect(('127.0.0.1', {api.port}))
    report['connect'] = 'connected'
except OSError as e:
    report['connect'] = type(e).__name__
try:
    open('/atc-was-here', 'w')
    report['rootfs'] = 'writable'
except OSError as e:
    report['rootfs'] = e.errno
try:
    open({str(secret_file)!r}).read()
    report['hostfile'] = 'readable'
except OSError as e:
    report['hostfile'] = e.errno
report['env'] = dict(os.environ)
report['caps'] = [l for l in open('/proc/self/status') if l.startswith(('CapEff', 'NoNewPrivs'))]
print(json.dumps(report))
"""
    result = backend.run(program, toolset, Limits(timeout=20))
    assert result.ok, result.to_dict()
    report = json.loads(result.answer)
    assert report["uid"] == 65534
    assert report["ifaces"] == ["lo"]
    assert report["connect"] != "connected"
    assert report["rootfs"] == 30  # EROFS
    assert report["hostfile"] == 2  # ENOENT: the host's files are not there at all
    assert "H3_HOST_SECRET" not in report["env"] and "LIB_KEY" not in report["env"]
    text = json.dumps(result.to_dict())
    for secret in ("host-secret-51d2", "file-secret-9c1e", SECRET):
        assert secret not in text
    assert "CapEff:\t0000000000000000\n" in report["caps"] and "NoNewPrivs:\t1\n" in report["caps"]
    assert api.requests == []


@pytest.mark.docker
@needs_docker
def test_timeout_kills_and_removes_the_container(toolset: Toolset) -> None:
    with DockerBackend(pool_size=1) as b:
        started = time.monotonic()
        result = b.run("while True:\n    pass\n", toolset, Limits(timeout=1.5))
        elapsed = time.monotonic() - started
        assert result.error is not None and result.error.type == "Timeout"
        assert elapsed < 10
    assert _containers(instance=b.instance) == []


@pytest.mark.docker
@needs_docker
def test_memory_limit_is_reported_as_memorylimit(backend: DockerBackend, toolset: Toolset) -> None:
    program = "x = bytearray(300 * 1024 * 1024)\nfor i in range(0, len(x), 4096):\n    x[i] = 1\nprint('survived')\n"
    result = backend.run(program, toolset, Limits(timeout=30, memory_mb=64))
    assert not result.ok and result.error is not None
    assert result.error.type == "MemoryLimit", result.to_dict()
    assert "memory:64MB" in result.isolation
    assert "survived" not in result.answer


@pytest.mark.docker
@needs_docker
def test_a_program_that_dies_like_an_oom_kill_is_not_a_memory_limit(backend: DockerBackend,
                                                                   toolset: Toolset) -> None:
    result = backend.run("import os\nprint('bye')\nos._exit(137)\n", toolset, Limits(timeout=20))
    assert result.error is not None and result.error.type == "SandboxError"
    assert "137" in result.error.message


@pytest.mark.docker
@needs_docker
def test_warm_pool_is_faster_than_cold_starts(toolset: Toolset) -> None:
    limits = Limits(timeout=20)

    def timed(b: DockerBackend, *, refill: bool) -> float:
        if refill:
            assert b.prewarm(limits, timeout=30) == b.pool_size
        t = time.perf_counter()
        r = b.run("print(1)", toolset, limits)
        assert r.ok and r.answer == "1\n"
        return time.perf_counter() - t

    with DockerBackend(pool_size=0) as cold_backend:
        cold = [timed(cold_backend, refill=False) for _ in range(4)]
    with DockerBackend(pool_size=2) as warm_backend:
        warm = [timed(warm_backend, refill=True) for _ in range(6)]
    assert statistics.median(warm) < statistics.median(cold), (warm, cold)


@pytest.mark.docker
@needs_docker
def test_a_pooled_container_that_died_is_replaced(toolset: Toolset) -> None:
    with DockerBackend(pool_size=1) as b:
        assert b.prewarm(Limits(), timeout=30) == 1
        [container] = _containers(instance=b.instance, running_only=True)
        client = connect()
        try:
            client.api.kill(container["Id"])
            client.api.wait(container["Id"], timeout=10)
        finally:
            client.close()
        result = b.run("print('fresh')", toolset, Limits(timeout=20))
        assert result.ok and result.answer == "fresh\n", result.to_dict()


@pytest.mark.docker
@needs_docker
def test_an_impostor_on_the_socket_is_refused(backend: DockerBackend) -> None:
    backend.prewarm(Limits(), timeout=30)
    [container, *_] = _containers(instance=backend.instance, running_only=True)
    ours, theirs = socket.socketpair()
    try:
        with pytest.raises(OSError, match="not the container's runner"):
            backend._check_peer(ours, str(container["Id"]))
    finally:
        ours.close()
        theirs.close()


@pytest.mark.docker
@needs_docker
def test_concurrent_runs_keep_their_own_calls(backend: DockerBackend, toolset: Toolset) -> None:
    results: dict[int, object] = {}

    def one(book_id: int) -> None:
        results[book_id] = backend.run(f"print(get_book(book_id={book_id})['title'])", toolset, Limits(timeout=30))

    threads = [threading.Thread(target=one, args=(i,)) for i in (10, 11, 20, 30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    titles = {10: "A Wizard of Earthsea", 11: "The Left Hand of Darkness", 20: "Solaris", 30: "Kindred"}
    for book_id, result in results.items():
        assert result.ok and result.answer.strip() == titles[book_id]  # type: ignore[attr-defined]
        assert [c.args for c in result.calls] == [{"book_id": book_id}]  # type: ignore[attr-defined]


_OWNER_SCRIPT = """
import sys, time
sys.path.insert(0, {repo!r})
from sandbox.api import Limits
from sandbox.docker.backend import DockerBackend
b = DockerBackend(pool_size=2)
print(b.prewarm(Limits(), timeout=60), flush=True)
time.sleep(120)
"""


@pytest.mark.docker
@needs_docker
def test_containers_of_a_killed_owner_stop_and_are_reaped() -> None:
    proc = subprocess.Popen([sys.executable, "-c", _OWNER_SCRIPT.format(repo=str(REPO))],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "2"
        assert len(_containers(proc.pid, running_only=True)) == 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 15
    while _containers(proc.pid, running_only=True) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _containers(proc.pid, running_only=True) == [], "runners must exit when atc dies"
    assert list(Path(tempfile.gettempdir()).glob(f"atc-docker-{proc.pid}-*")), "the socket dirs are left behind"
    with DockerBackend(pool_size=0):
        pass
    assert _containers(proc.pid) == []
    assert list(Path(tempfile.gettempdir()).glob(f"atc-docker-{proc.pid}-*")) == []


@pytest.mark.docker
@needs_docker
def test_containers_are_labelled_for_reaping(toolset: Toolset) -> None:
    with DockerBackend(pool_size=1) as b:
        b.prewarm(Limits(), timeout=30)
        [container] = _containers(instance=b.instance)
        labels = container["Labels"]
        assert labels[OWNER_LABEL] == str(os.getpid()) and labels[HOST_LABEL] == socket.gethostname()  # type: ignore[index]
    assert _containers(instance=b.instance) == []


@pytest.mark.docker
@needs_docker
def test_a_missing_image_names_the_build_command() -> None:
    with pytest.raises(SandboxError) as info:
        DockerBackend(image="atc-sandbox:no-such-tag")
    assert "atc sandbox build" in (info.value.hint or "")


@pytest.mark.docker
@needs_docker
def test_status_reports_engine_image_and_auto_choice(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sandbox", "status", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["engine"] is True and doc["image_present"] is True and doc["auto_backend"] == "docker"
    assert doc["image"] == DEFAULT_IMAGE
    assert doc["image_info"]["python"].startswith("3.") and doc["image_info"]["atc_version"]


_TOKENS = [*"abxyz019 ()[]{}:=+-*/.,'\"\\\n#_", "print", "get_book", "import os", "while ", "def ", "raise ", "book_id"]
_PROGRAM_TEXT = st.lists(st.sampled_from(_TOKENS), max_size=30).map("".join)


@pytest.mark.docker
@needs_docker
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=_PROGRAM_TEXT)
def test_any_program_text_yields_a_result(backend: DockerBackend, toolset: Toolset, program: str) -> None:
    result = backend.run(program, toolset, Limits(timeout=5, memory_mb=128))
    assert isinstance(result, ExecutionResult) and result.sandbox == "docker"
    assert result.ok == (result.error is None)
    if result.error is not None:
        assert result.error.type and isinstance(result.error.message, str)
    json.dumps(result.to_dict())


# --- the fork server's control protocol, at the host's end (a fake server on a socket pair) ---------

def _cell_and_server() -> tuple[Cell, socket.socket]:
    host, server = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    return Cell(cid="fake", sockdir="", ctl=host, key=None), server


def _hand(server: socket.socket, msg: dict[str, object], *fds: int) -> None:
    socket.send_fds(server, [json.dumps(msg).encode()], list(fds))


def test_the_host_takes_only_a_ready_unix_stream_socket_from_a_clean_reset() -> None:
    """The server hands runners over unasked; the host keeps one only if it is what a runner is (a
    Unix stream socket saying ``ready``) and, after a run, only if the reset came back clean."""
    cell, server = _cell_and_server()
    try:
        read_end, write_end = os.pipe()  # not a socket
        _hand(server, {"op": "runner", "pid": 1}, read_end)
        os.close(read_end)
        os.close(write_end)
        with pytest.raises(CellError, match="could not start a runner"):
            cell.take_runner(2)
        datagram, other = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)  # not a stream
        _hand(server, {"op": "runner", "pid": 2}, datagram.fileno())
        with pytest.raises(CellError, match="could not start a runner"):
            cell.take_runner(2)
        silent, _keep = socket.socketpair()  # never says ready
        _hand(server, {"op": "runner", "pid": 3}, silent.fileno())
        with pytest.raises(CellError, match="did not start"):
            cell.take_runner(2, 0.2)
        ours, runner = socket.socketpair()
        wire.send(runner, {"op": "ready"})
        _hand(server, {"op": "runner", "pid": 4, "clean": True, "ended": {"op": "exit", "pid": 3, "status": 0}},
              ours.fileno())
        cell.take_runner(2, after_run=True)
        assert cell.runner_pid == 4 and cell.exits == {3: 0} and cell.runs == 1 and cell.waiting()
        _hand(server, {"op": "runner", "clean": False})
        with pytest.raises(CellError, match="could not be reset"):
            cell.take_runner(2, after_run=True)
        for sock in (datagram, other, silent, _keep, ours, runner):
            sock.close()
    finally:
        cell.close()
        server.close()


def test_the_reset_counts_the_sockets_of_the_containers_network_not_the_hosts() -> None:
    table = "sockets: used 7\nTCP: inuse 0 orphan 3 tw 0 alloc 35 mem 4\nUDP: inuse 0 mem 2\nRAW: inuse 0\n"
    assert sockets_in_use("sockstat", table) == []  # orphan, alloc, mem and used count the host's
    left = table.replace("tw 0", "tw 2").replace("RAW: inuse 0", "RAW: inuse 1")
    assert sockets_in_use("sockstat", left) == ["sockstat: TCP tw 2", "sockstat: RAW inuse 1"]


@pytest.mark.docker
@needs_docker
def test_a_sessions_runner_has_the_sessions_cpu_time(backend: DockerBackend, toolset: Toolset) -> None:
    """A session's runner is not the pool's (a run's CPU time): the container's server makes one
    with the session's, ``exec_seconds`` plus 2 s, and checks the dropped one's end as a run's."""
    from sandbox.api import SessionLimits

    interpreter = backend.open_session(toolset, Limits(timeout=20), SessionLimits(exec_seconds=40))
    try:
        result = interpreter.execute("import resource\nprint(resource.getrlimit(resource.RLIMIT_CPU)[0])")
    finally:
        interpreter.close()
    assert result.ok and result.answer.strip() == "42", result.to_dict()
