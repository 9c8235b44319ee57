"""``atc batch`` end to end, as a user runs it: a subprocess, a scripted model server over HTTP and
``atc mock`` serving the bundled bookshop API. Twenty tasks are interrupted halfway with SIGINT,
resumed, and then replayed from the recording with both servers stopped. The model server's
request log and the mock's request log show that no task ran twice and none was lost."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from atc import examples
from atc.workflows.replay import stable
from tests.support.fakes.openai_server import ScriptedOpenAI
from tests.support.procs import descendants

ROOT = Path(__file__).resolve().parents[3]
ATC = ROOT / ".venv" / "bin" / "atc"
SPEC = examples.path("bookshop/openapi.json")
TASKS = 20


def route(body: dict[str, Any]) -> str:
    n = int(re.search(r"\[task (\d+)\]", json.dumps(body["messages"])).group(1))  # type: ignore[union-attr]
    return f"```python\nshops = list_shops(city='city{n}')\nprint('task {n}:', len(shops))\n```"


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` that still run (zombies count as gone)."""
    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.add(pid)
    return out


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def batch(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([str(ATC), "batch", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


@pytest.mark.slow
def test_interrupted_resumed_then_replayed_offline(tmp_path: Path) -> None:
    src = tmp_path / "tasks.jsonl"
    src.write_text("".join(json.dumps({"id": f"t{n}", "query": f"[task {n}] How many shops are in city{n}?"}) + "\n"
                           for n in range(TASKS)))
    out, tape = tmp_path / "out.jsonl", tmp_path / "tape"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATC_", "OPENAI_"))}
    env["ATC_HOME"] = str(tmp_path / "home")
    mock = subprocess.Popen([str(ATC), "mock", str(SPEC), "--port", "0", "--json", "--verbose"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert mock.stdout is not None
        url = json.loads(mock.stdout.readline())["url"]
        with ScriptedOpenAI(router=route, delay=0.25) as model:
            online = {**env, "OPENAI_BASE_URL": model.base_url, "ATC_MODEL": "scripted"}
            args = [str(src), "--tools", str(SPEC), "--base-url", url, "--sandbox", "local", "--out", str(out),
                    "--concurrency", "2", "--record", str(tape), "--json"]
            first = batch(*args, env=online)
            deadline = time.monotonic() + 60
            while (not out.exists() or len(out.read_text().splitlines()) < 6) and time.monotonic() < deadline:
                time.sleep(0.05)
            sandboxes = descendants(first.pid)  # its runner processes (a warm pool at least)
            assert sandboxes
            first.send_signal(signal.SIGINT)
            stdout, stderr = first.communicate(timeout=60)
            # no leftover sandbox: every process the batch had started is gone with it
            deadline = time.monotonic() + 10
            while alive(sandboxes) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not alive(sandboxes)
            assert first.returncode == 130, stderr
            summary = json.loads(stdout)
            assert summary["interrupted"] and summary["not_run"] > 0
            assert "interrupted" in stderr and "run the same command again to resume" in stderr
            done_first = len(lines(out))
            assert 6 <= done_first < TASKS and summary["ran"] == done_first

            second = batch(*args, env=online)
            stdout, stderr = second.communicate(timeout=120)
            assert second.returncode == 0, stderr
            resumed = json.loads(stdout)
            assert resumed["skipped"] == done_first and resumed["ran"] == TASKS - done_first
            assert resumed["solved"] == TASKS and resumed["failed"] == 0
            asked = Counter(int(re.search(r"\[task (\d+)\]", json.dumps(r["messages"])).group(1))  # type: ignore[union-attr]
                            for r in model.requests)
        # every task asked the model exactly once over both runs, and called the API exactly once
        assert asked == Counter(range(TASKS))
    finally:
        mock.send_signal(signal.SIGINT)
        _, mock_log = mock.communicate(timeout=30)
    cities = Counter(re.findall(r"\"GET /shops\?city=city(\d+) HTTP", mock_log))
    assert cities == Counter(str(n) for n in range(TASKS))
    results = {x["id"]: x for x in lines(out)}
    assert sorted(results) == sorted(f"t{n}" for n in range(TASKS)) and len(lines(out)) == TASKS
    assert all(r["ok"] and r["answer"].startswith(f"task {r['id'][1:]}: ") for r in results.values())

    # offline: no model server, no API, no model configuration
    replay_out = tmp_path / "replayed.jsonl"
    third = batch(str(src), "--tools", str(SPEC), "--base-url", url, "--sandbox", "local", "--out", str(replay_out),
                  "--concurrency", "4", "--replay", str(tape), "--json", env=env)
    stdout, stderr = third.communicate(timeout=120)
    assert third.returncode == 0, stderr
    replayed = json.loads(stdout)
    assert replayed["solved"] == TASKS and replayed["unrecorded"] == 0
    again = {x["id"]: x for x in lines(replay_out)}
    assert {k: stable(v) for k, v in again.items()} == {k: stable(v) for k, v in results.items()}
