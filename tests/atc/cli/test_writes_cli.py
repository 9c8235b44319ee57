"""``--writes`` and the write ledger as a user meets them: real ``atc`` subprocesses against the
orders API on 127.0.0.1, a batch killed with SIGKILL after it wrote and then resumed, Ctrl-C while a
write is in flight, and ``--writes ask`` answered at a real (pseudo-)terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.apis.orders import OrdersAPI

ATC = str(Path(sys.executable).parent / "atc")


@pytest.fixture(scope="module")
def orders_api() -> Iterator[OrdersAPI]:
    with OrdersAPI() as api:
        yield api


@pytest.fixture()
def api(orders_api: OrdersAPI) -> OrdersAPI:
    orders_api.reset()
    return orders_api


@pytest.fixture()
def spec(tmp_path: Path, api: OrdersAPI) -> Path:
    path = tmp_path / "orders.json"
    path.write_text(json.dumps(api.spec()))
    return path


def run_atc(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ATC, *args], capture_output=True, text=True, timeout=timeout, env=os.environ.copy())


def program(tmp_path: Path, code: str, name: str = "prog.py") -> Path:
    path = tmp_path / name
    path.write_text(code)
    return path


def test_deny_in_the_json_and_the_text(tmp_path: Path, spec: Path, api: OrdersAPI) -> None:
    prog = program(tmp_path, "print(len(list_products()))\nplace_order(product_id=1, quantity=1)\n")
    done = run_atc("run", str(prog), "--tools", str(spec), "--sandbox", "local", "--writes", "deny", "--json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert [(c["tool"], c["write"], c.get("outcome")) for c in doc["calls"]] == [
        ("list_products", False, None), ("place_order", True, "refused")]
    assert "read-only" in doc["error"]["message"] and api.writes_seen() == 0
    text = run_atc("run", str(prog), "--tools", str(spec), "--sandbox", "local", "--writes", "deny")
    assert text.returncode == 1 and text.stdout.strip() == "3"
    assert "atc: writes: 1 refused" in text.stderr and "refused  place_order" in text.stderr


def test_a_text_run_ends_with_its_writes(tmp_path: Path, spec: Path, api: OrdersAPI) -> None:
    prog = program(tmp_path, "o = place_order(product_id=2, quantity=1)\nprint(o['number'])\n")
    done = run_atc("run", str(prog), "--tools", str(spec), "--sandbox", "local")
    assert done.returncode == 0 and done.stdout.strip() == "A-1001"
    assert done.stderr.splitlines()[0] == "atc: writes: 1 done"
    assert 'place_order({"product_id":2,"quantity":1}) -> HTTP 201' in done.stderr


def test_a_ledger_file_makes_a_rerun_safe(tmp_path: Path, spec: Path, api: OrdersAPI) -> None:
    ledger = tmp_path / "task.ledger"
    bad = program(tmp_path, "o = place_order(product_id=1, quantity=2)\nprint(o['order_number'])\n")
    first = run_atc("run", str(bad), "--tools", str(spec), "--sandbox", "local", "--ledger", str(ledger))
    assert first.returncode == 1 and "KeyError" in first.stderr
    fixed = program(tmp_path, "o = place_order(product_id=1, quantity=2)\nprint(o['number'])\n", "fixed.py")
    second = run_atc("run", str(fixed), "--tools", str(spec), "--sandbox", "local", "--ledger", str(ledger),
                     "--json")
    assert second.returncode == 0 and json.loads(second.stdout)["calls"][0]["outcome"] == "replayed"
    assert "1 write(s) of this task are in" in second.stderr
    assert api.writes_seen() == 1


def _wait_for(check: object, seconds: float = 30.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def test_a_batch_task_killed_after_it_wrote_is_resumed_without_writing_twice(
        tmp_path: Path, spec: Path, api: OrdersAPI) -> None:
    tasks = tmp_path / "tasks.jsonl"
    code = "o = place_order(product_id=3, quantity=2)\nprint(o['number'], len(list_products()))"
    tasks.write_text(json.dumps({"id": "order-1", "program": code}) + "\n")
    out = tmp_path / "out.jsonl"
    sidecar = tmp_path / "out.jsonl.writes.jsonl"
    api.slow_reads = 30.0  # the program is held in a read after its write
    first = subprocess.Popen([ATC, "batch", str(tasks), "--tools", str(spec), "--sandbox", "local", "--out", str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for(lambda: sidecar.exists() and '"outcome": "done"' in sidecar.read_text())
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the whole process group, its sandbox included
        first.communicate(timeout=30)
    assert api.writes_seen() == 1 and not out.read_text().strip()
    api.slow_reads = 0.0
    second = run_atc("batch", str(tasks), "--tools", str(spec), "--sandbox", "local", "--out", str(out))
    assert second.returncode == 0, second.stderr
    line = json.loads(out.read_text().splitlines()[0])
    assert line["ok"] and line["answer"].split() == ["A-1001", "3"]
    assert [(c["tool"], c.get("outcome")) for c in line["calls"]] == [("place_order", "replayed"), ("list_products", None)]
    assert api.writes_seen() == 1
    assert "writes: 1 replayed" in second.stderr


def test_ctrl_c_during_a_write_reports_it_unknown(tmp_path: Path, spec: Path, api: OrdersAPI) -> None:
    api.slow_seconds = 30.0
    prog = program(tmp_path, "print(place_order(product_id=1, quantity=1))\n")
    proc = subprocess.Popen([ATC, "run", str(prog), "--tools", str(spec), "--sandbox", "local"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: api.orders)  # the API made the order; its answer is held back
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "writes before it was interrupted: 1 unknown" in err
    assert "MAY HAVE BEEN APPLIED" in err or "it may have been applied" in err
    assert "UNKNOWN outcome" in err


def _read_until(fd: int, marker: bytes, seconds: float = 60.0) -> bytes:
    seen = b""
    end = time.monotonic() + seconds
    while marker not in seen and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def test_ask_at_a_terminal(tmp_path: Path, spec: Path, api: OrdersAPI) -> None:
    prog = program(tmp_path, "print(place_order(product_id=1, quantity=1)['number'])\n"
                             "try:\n    place_order(product_id=2, quantity=9)\nexcept ToolError as e:\n"
                             "    print('declined')\n")
    pid, fd = pty.fork()
    if pid == 0:  # the child: atc on the pseudo-terminal, its controlling terminal
        os.execv(ATC, [ATC, "run", str(prog), "--tools", str(spec), "--sandbox", "local", "--writes", "ask",
                       "--timeout", "3"])
    try:
        first = _read_until(fd, b"send it? [y/N]")
        assert b"place_order: POST" in first and b'"quantity":1' in first
        time.sleep(3.5)  # a person thinking, longer than the program's --timeout
        os.write(fd, b"y\n")
        second = _read_until(fd, b"send it? [y/N]")
        assert b'"quantity":9' in second
        os.write(fd, b"n\n")
        rest = _read_until(fd, b"atc: writes:")
        rest += _read_until(fd, b"\n", 5)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, rest
    assert b"A-1001" in rest and b"declined" in rest
    assert api.writes_seen() == 1
