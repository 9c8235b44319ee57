"""The warm search server (atc/retrieval/server.py, warm.py) as a user meets it: ``atc tools search``
run as subprocesses, real server processes on Unix sockets, the local all-MiniLM-L6-v2 model.

Each test gets its own socket folder (a short ``TMPDIR``) and stops every server it started."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from atc.examples import path as example
from atc.retrieval import warm
from atc.retrieval.weights import local_available

ATC = Path(sys.executable).with_name("atc")

pytestmark = pytest.mark.skipif(not local_available(), reason="needs atc[embed] (the local embedding model)")

QUERIES = ["cheapest book about gardens", "departures from a stop", "which shop has copies of a book",
           "order a book for pickup. Then tell me the stock in every shop.", "next bus"]


@pytest.fixture()
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    tmp = tempfile.mkdtemp(prefix="s", dir="/tmp")  # short: a socket path holds at most 107 bytes
    monkeypatch.setenv("TMPDIR", tmp)
    monkeypatch.setenv("ATC_SEARCH_SERVER", "auto")
    full = dict(os.environ)
    yield full
    for sock in Path(tmp).glob("atc-*/search-*.sock"):
        answer = warm.exchange(sock, {"protocol": warm.PROTOCOL, "op": "status"}, 2.0)
        warm.exchange(sock, {"protocol": warm.PROTOCOL, "op": "stop"}, 2.0)
        if answer and answer.get("pid"):
            _wait(_gone(int(answer["pid"])), 10)
    shutil.rmtree(tmp, ignore_errors=True)


def atc(*args: str, env: dict[str, str], **extra: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(ATC), *args], capture_output=True, text=True, env={**env, **extra}, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def search(query: str, env: dict[str, str], *flags: str, **extra: str) -> dict[str, Any]:
    proc = atc("tools", "search", query, "--json", *flags, env=env, **extra)
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def status(env: dict[str, str], **extra: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(atc("tools", "server", "--json", env=env, **extra).stdout)
    return doc


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has ended (its parent, a command long gone, was init's to reap).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _gone(pid: int) -> Callable[[], bool]:
    return lambda: not _alive(pid)


def _wait(ready: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ready():
            return True
        time.sleep(0.05)
    return ready()


def import_examples(env: dict[str, str]) -> None:
    for spec in ("bookshop/openapi.json", "transit/swagger.json"):
        proc = atc("tools", "import", str(example(spec)), env=env)
        assert proc.returncode == 0, proc.stderr


def test_server_answers_what_the_command_computes_itself(env: dict[str, str]) -> None:
    import_examples(env)
    flags: list[tuple[str, ...]] = [(), ("--retriever", "hybrid"), ("--retriever", "bm25"), ("--retriever", "dense"),
                                    ("-k", "2")]
    here = {(q, f): search(q, env, *f, ATC_SEARCH_SERVER="off") for q in QUERIES for f in flags}
    assert not status(env)["running"]  # off: nothing was started
    started = atc("tools", "server", "start", env=env)
    assert started.returncode == 0 and "search server of" in started.stdout, started.stderr
    before = status(env)
    assert before["running"] and before["queries"] == 0 and before["embedder"] == "all-MiniLM-L6-v2"
    for (q, f), expected in here.items():
        assert search(q, env, *f) == expected, (q, f)
    assert status(env)["queries"] == len(here)  # every one of them was the server's answer
    # The text output is the same too.
    text_here = atc("tools", "search", QUERIES[0], env=env, ATC_SEARCH_SERVER="off").stdout
    assert atc("tools", "search", QUERIES[0], env=env).stdout == text_here and text_here.endswith("(hybrid)\n")


def test_the_first_hybrid_search_leaves_a_server_and_bm25_alone_does_not(env: dict[str, str]) -> None:
    import_examples(env)
    assert search(QUERIES[0], env, "--retriever", "bm25")["retriever"] == "bm25"
    time.sleep(0.5)
    assert not status(env)["running"]
    first = search(QUERIES[0], env)
    assert first["retriever"] == "hybrid"
    assert _wait(lambda: status(env)["running"], 30)
    assert search(QUERIES[0], env) == first and status(env)["queries"] == 1


def test_imports_and_removals_are_seen_at_once(env: dict[str, str]) -> None:
    assert atc("tools", "import", str(example("bookshop/openapi.json")), env=env).returncode == 0
    assert atc("tools", "server", "start", env=env).returncode == 0
    assert {h["collection"] for h in search("departures from a stop", env)["hits"]} == {"bookshop"}
    assert atc("tools", "import", str(example("transit/swagger.json")), "--name", "transit", env=env).returncode == 0
    hits = search("departures from a stop", env)["hits"]
    assert hits[0]["collection"] == "transit"
    assert hits == search("departures from a stop", env, ATC_SEARCH_SERVER="off")["hits"]
    assert atc("tools", "remove", "transit", env=env).returncode == 0
    assert {h["collection"] for h in search("departures from a stop", env)["hits"]} == {"bookshop"}
    assert atc("tools", "remove", "bookshop", env=env).returncode == 0
    proc = atc("tools", "search", "departures", env=env)
    assert proc.returncode == 0 and "the store is empty" in proc.stdout
    assert status(env)["queries"] == 4


def test_another_embedder_configuration_never_reaches_the_server(env: dict[str, str]) -> None:
    import_examples(env)
    assert atc("tools", "server", "start", env=env).returncode == 0
    doc = search(QUERIES[0], env, ATC_EMBED_MODEL="none")
    assert doc["retriever"] == "bm25"  # computed by the command under its own configuration
    assert status(env)["queries"] == 0
    assert not status(env, ATC_EMBED_MODEL="none")["running"]  # its own socket: no server there


def test_a_socket_folder_open_to_others_is_never_used(env: dict[str, str]) -> None:
    import_examples(env)
    folder = Path(env["TMPDIR"]) / f"atc-{os.getuid()}"
    folder.mkdir()
    folder.chmod(0o777)
    first = search(QUERIES[0], env)
    assert first["retriever"] == "hybrid"
    time.sleep(1.0)
    assert list(folder.iterdir()) == []  # nothing spawned, no socket made
    doc = status(env)
    assert not doc["running"] and "not a private folder" in doc["notes"][0]
    t0 = time.monotonic()
    refused = atc("tools", "server", "start", env=env)
    # refused at once, saying why (it once waited 30 s for a server that could never answer)
    assert refused.returncode == 1 and time.monotonic() - t0 < 10
    assert "not a private folder" in refused.stderr and "internal error" not in refused.stderr


def test_socket_and_folder_are_private(env: dict[str, str]) -> None:
    import_examples(env)
    doc = json.loads(atc("tools", "server", "start", "--json", env=env).stdout)
    sock = Path(doc["socket"])
    assert sock.stat().st_mode & 0o777 == 0o600
    assert sock.parent.stat().st_mode & 0o777 == 0o700


class _FakeServer:
    """A listener on the store's socket that answers badly (a seam we own: what the command does
    when the thing at the socket is not a good server)."""

    def __init__(self, path: Path, reply: Callable[[socket.socket], None]) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.reply = reply
        self.count = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.count += 1
                try:
                    self.reply(conn)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("kind", ["garbage", "wrong protocol", "error", "bad hits", "silent close", "huge"])
def test_a_bad_server_makes_the_command_search_itself(env: dict[str, str], kind: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import_examples(env)
    expected = search(QUERIES[1], env, ATC_SEARCH_SERVER="off")
    replies: dict[str, bytes] = {
        "garbage": b"\x00\xffnot json\n",
        "wrong protocol": json.dumps({"protocol": 99, "ok": True, "result": expected}).encode() + b"\n",
        "error": json.dumps({"protocol": warm.PROTOCOL, "ok": False, "error": "boom"}).encode() + b"\n",
        "bad hits": json.dumps({"protocol": warm.PROTOCOL, "ok": True, "result": {
            "retriever": "hybrid", "hits": [{"name": 1}], "usage": {}, "notes": []}}).encode() + b"\n",
        "silent close": b"",
        "huge": b"[" + b"1," * (warm.MAX_LINE // 2 + 10) + b"1]\n",
    }

    def reply(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(replies[kind])

    path = warm.socket_path(Path(env["ATC_HOME"]))
    assert path is not None
    fake = _FakeServer(path, reply)
    try:
        assert search(QUERIES[1], env) == expected
        assert fake.count >= 1  # it was asked, and its answer was not taken
    finally:
        fake.close()


def test_a_hung_server_costs_a_timeout_not_a_wrong_answer(env: dict[str, str]) -> None:
    home = Path(env["ATC_HOME"])
    path = warm.socket_path(home)
    assert path is not None
    hold = threading.Event()
    fake = _FakeServer(path, lambda conn: (conn.recv(65536), hold.wait(5)) and None)
    try:
        started = time.monotonic()
        assert warm.ask(home, "x", 5, None, timeout=0.5) is None
        assert time.monotonic() - started < 3
    finally:
        hold.set()
        fake.close()


def test_model_backed_retrievers_are_never_sent(env: dict[str, str]) -> None:
    home = Path(env["ATC_HOME"])
    path = warm.socket_path(home)
    assert path is not None
    fake = _FakeServer(path, lambda conn: conn.sendall(b"{}\n"))
    try:
        assert warm.ask(home, "x", 5, "anytool") is None and warm.ask(home, "x", 5, "reinvoke") is None
        assert fake.count == 0
    finally:
        fake.close()


def test_the_server_ends_when_idle_when_stopped_and_when_its_store_goes(env: dict[str, str]) -> None:
    import_examples(env)
    short = {"ATC_SEARCH_SERVER_IDLE": "1"}
    doc = json.loads(atc("tools", "server", "start", "--json", env=env, **short).stdout)
    assert doc["running"]
    assert _wait(lambda: not _alive(doc["pid"]), 15)
    assert not Path(doc["socket"]).exists()  # it cleans up its socket

    doc = json.loads(atc("tools", "server", "start", "--json", env=env).stdout)
    stopped = atc("tools", "server", "stop", env=env)
    assert stopped.returncode == 0 and "no search server is running" in stopped.stdout
    assert _wait(lambda: not _alive(doc["pid"]), 10)
    again = atc("tools", "server", "stop", env=env)
    assert "no search server was running" in again.stderr

    doc = json.loads(atc("tools", "server", "start", "--json", env=env).stdout)
    shutil.rmtree(env["ATC_HOME"])
    assert _wait(lambda: not _alive(doc["pid"]), 15)


def test_a_killed_server_is_replaced_by_the_next_search(env: dict[str, str]) -> None:
    import_examples(env)
    doc = json.loads(atc("tools", "server", "start", "--json", env=env).stdout)
    os.kill(doc["pid"], signal.SIGKILL)
    assert _wait(lambda: not _alive(doc["pid"]), 10)
    assert Path(doc["socket"]).exists()  # left behind by the kill
    expected = search(QUERIES[2], env, ATC_SEARCH_SERVER="off")
    assert search(QUERIES[2], env) == expected  # the command searched itself, and started a new one
    assert _wait(lambda: status(env)["running"] and status(env)["pid"] != doc["pid"], 30)
    assert search(QUERIES[2], env) == expected and status(env)["queries"] == 1


def test_commands_at_the_same_moment_each_get_their_own_answer(env: dict[str, str]) -> None:
    import_examples(env)
    expected = {q: search(q, env, ATC_SEARCH_SERVER="off") for q in QUERIES}
    assert atc("tools", "server", "start", env=env).returncode == 0
    procs = {(q, i): subprocess.Popen([str(ATC), "tools", "search", q, "--json"], stdout=subprocess.PIPE, text=True,
                                 env=env) for i in range(2) for q in QUERIES}
    for (q, _), proc in procs.items():
        out, _ = proc.communicate(timeout=120)
        assert json.loads(out) == expected[q]
    assert status(env)["queries"] == len(procs)


def test_two_servers_started_at_once_leave_one(env: dict[str, str]) -> None:
    import_examples(env)
    home = env["ATC_HOME"]
    both = [subprocess.Popen([sys.executable, "-m", "atc.retrieval.server", home], env=env,
                             stderr=subprocess.DEVNULL) for _ in range(2)]
    assert _wait(lambda: status(env)["running"], 30)
    assert _wait(lambda: sum(p.poll() is None for p in both) == 1, 20)  # the other left by itself
    alive = next(p for p in both if p.poll() is None)
    assert status(env)["pid"] == alive.pid
    assert search(QUERIES[0], env) == search(QUERIES[0], env, ATC_SEARCH_SERVER="off")
    atc("tools", "server", "stop", env=env)
    assert alive.wait(timeout=10) == 0
