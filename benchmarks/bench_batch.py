"""What a batch costs on top of the model: ``solve_many`` and ``atc batch`` over 100 tasks.

Each task is one solve: a scripted OpenAI-compatible model on 127.0.0.1 that answers in 50 ms
(``tests/support/fakes/openai_server.py`` with ``delay``), a real local sandbox running the program, one
tool call to ``atc mock`` of the bundled bookshop API on 127.0.0.1. The ideal wall time of a batch
is (tasks x model latency) / concurrency: what it would take if the sandbox, the tool call and
atc itself cost nothing. Rows:

1. two floors measured at the same concurrency in the same run: the 100 model requests alone
   (HTTP and the latency), and the 100 programs alone in the local sandbox (no model);
2. ``solve_many`` at concurrency 1, 4, 8, 16, with the ratio wall / ideal and wall / the larger floor;
3. ``solve_many`` with a null sandbox (runs nothing): the model, the solve loop and the batch
   machinery alone, against the model-only floor;
4. ``atc batch`` end to end (a subprocess: start-up, input check, fsync of every result line) at
   concurrency 8, then the same batch replayed from its recording (``--replay``: no model, no API).

    .venv/bin/python benchmarks/bench_batch.py [--tasks N] [--latency SECONDS]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from atc import examples  # noqa: E402
from atc.llm.client import make_client  # noqa: E402
from atc.mock import MockServer  # noqa: E402
from atc.workflows.many import solve_many  # noqa: E402
from protocols import load_spec  # noqa: E402
from sandbox.api import ExecutionResult, Limits  # noqa: E402
from tests.support.fakes.openai_server import ScriptedOpenAI  # noqa: E402

SPEC = examples.path("bookshop/openapi.json")
ATC = ROOT / ".venv" / "bin" / "atc"


def route(body: dict[str, Any]) -> str:
    n = int(re.search(r"\[task (\d+)\]", json.dumps(body["messages"])).group(1))  # type: ignore[union-attr]
    return f"```python\nshops = list_shops(city='city{n}')\nprint('task {n}:', len(shops))\n```"


def floor(base_url: str, tasks: int, concurrency: int) -> float:
    """Wall seconds of the model requests alone."""
    with httpx.Client(timeout=30) as client:
        def ask(n: int) -> None:
            client.post(f"{base_url}/chat/completions", json={
                "model": "scripted", "messages": [{"role": "user", "content": f"[task {n}]"}]}).raise_for_status()

        started = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(ask, range(tasks)))
        return time.perf_counter() - started


def sandbox_floor(shop: Any, url: str, tasks: int, concurrency: int) -> float:
    """Wall seconds of the tasks' programs alone in the local sandbox (no model), at the same
    concurrency: what the sandbox and the tool call cost."""
    from sandbox.execute import run

    def one(n: int) -> None:
        result = run(f"shops = list_shops(city='city{n}')\nprint('task {n}:', len(shops))\n", [shop],
                     Limits(timeout=30), sandbox="local", base_url=url)
        assert result.ok, result.error

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(tasks)))
    return time.perf_counter() - started


class NullSandbox:
    """A backend that runs nothing and answers at once: what is left is the model, the solve
    loop and the batch machinery (prompt building, checks, threads, the result hooks)."""

    name = "null"

    def run(self, program: str, tools: Any, limits: Limits) -> ExecutionResult:
        return ExecutionResult(ok=True, answer="done\n", sandbox=self.name, duration_ms=0.0)

    def close(self) -> None:
        pass

    def __enter__(self) -> NullSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.05)
    opts = parser.parse_args()
    shop = load_spec(SPEC)
    queries = [f"[task {n}] How many shops are in city{n}?" for n in range(opts.tasks)]
    rows: list[dict[str, Any]] = []
    print(f"{opts.tasks} tasks, model latency {opts.latency * 1000:.0f} ms, local sandbox, {os.cpu_count()} CPUs")
    with MockServer(shop) as api, ScriptedOpenAI(router=route, delay=opts.latency) as model:
        client = make_client("scripted", base_url=model.base_url)
        solve_many(queries[:4], shop, client=client, base_url=api.url, sandbox="local", limits=Limits(timeout=30),
                   concurrency=4)  # warm the sandbox pool and the imports
        for concurrency in (1, 4, 8, 16):
            ideal = opts.tasks * opts.latency / concurrency
            base = floor(model.base_url, opts.tasks, concurrency)
            boxes = sandbox_floor(shop, api.url, opts.tasks, concurrency)
            started = time.perf_counter()
            sols = solve_many(queries, shop, client=client, base_url=api.url, sandbox="local",
                              limits=Limits(timeout=30), concurrency=concurrency)
            wall = time.perf_counter() - started
            assert all(s.ok for s in sols), [s.error for s in sols if not s.ok][:1]
            rows.append({"what": f"solve_many, concurrency {concurrency}", "wall_s": round(wall, 2),
                         "ideal_s": round(ideal, 2), "wall/ideal": round(wall / ideal, 2),
                         "model-only floor_s": round(base, 2), "sandbox-only floor_s": round(boxes, 2),
                         "wall/max(floors)": round(wall / max(base, boxes), 2)})
            print(rows[-1], flush=True)
            started = time.perf_counter()
            sols = solve_many(queries, shop, client=client, base_url=api.url, sandbox=NullSandbox(),
                              limits=Limits(timeout=30), concurrency=concurrency)
            wall = time.perf_counter() - started
            assert all(s.ok for s in sols)
            rows.append({"what": f"solve_many, null sandbox, concurrency {concurrency}", "wall_s": round(wall, 2),
                         "ideal_s": round(ideal, 2), "wall/ideal": round(wall / ideal, 2),
                         "model-only floor_s": round(base, 2), "wall/floor": round(wall / base, 2)})
            print(rows[-1], flush=True)

        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            src = work / "tasks.jsonl"
            src.write_text("".join(json.dumps({"id": n, "query": q}) + "\n" for n, q in enumerate(queries)))
            env = {k: v for k, v in os.environ.items() if not k.startswith(("ATC_", "OPENAI_"))}
            env.update(ATC_HOME=str(work / "home"), OPENAI_BASE_URL=model.base_url, ATC_MODEL="scripted")
            common = [str(ATC), "batch", str(src), "--tools", str(SPEC), "--base-url", api.url, "--sandbox", "local",
                      "--concurrency", "8", "--json"]
            for label, extra, run_env in (
                    ("atc batch (subprocess), concurrency 8, --record", ["--out", str(work / "a.jsonl"), "--record",
                                                                          str(work / "tape")], env),
                    ("atc batch --replay (no model, no API), concurrency 8",
                     ["--out", str(work / "b.jsonl"), "--replay", str(work / "tape")],
                     {k: v for k, v in env.items() if not k.startswith("OPENAI_")})):
                started = time.perf_counter()
                done = subprocess.run(common + extra, capture_output=True, text=True, env=run_env, timeout=600)
                wall = time.perf_counter() - started
                summary = json.loads(done.stdout)
                assert done.returncode == 0 and summary["solved"] == opts.tasks, done.stderr
                ideal = opts.tasks * opts.latency / 8
                rows.append({"what": label, "wall_s": round(wall, 2), "ideal_s": round(ideal, 2),
                             "wall/ideal": round(wall / ideal, 2), "batch wall_s (in-process)":
                             round(summary["wall_ms"] / 1000, 2)})
                print(rows[-1], flush=True)
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
