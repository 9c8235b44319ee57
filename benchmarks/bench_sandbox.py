"""Sandbox overhead: local runs, the gateway per call, concurrency; Docker rows when available.

Every number is measured against a baseline taken in the same run:

- program overhead: p50/p95 of ``print(1)`` through ``LocalBackend.run`` -- cold (no pool), warm
  (pool refilled before each run, as between a model's attempts) and burst (back-to-back) --
  against ``python3 -c pass`` (the sandbox's interpreter, started bare);
- gateway overhead per call: a program making 200 ``get_stats()`` calls through the sandbox, and
  200 ``Gateway.call``s in-process, against 200 direct ``httpx`` calls to the same loopback API;
- concurrency: 20 runs in threads, each with distinct calls, checking that no call log holds
  another run's calls.

Usage::

    .venv/bin/python benchmarks/bench_sandbox.py [-n 30] [--no-docker]

The Docker rows come from ``benchmarks/bench_docker.py:docker_rows`` when an engine and the
image are there (``docker_rows_if_available``: the hook the Docker backend plugs into).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import httpx  # noqa: E402
from timing import Row, measure  # noqa: E402

from protocols import load_spec  # noqa: E402
from sandbox.api import Limits, Toolset  # noqa: E402
from sandbox.gateway.core import Gateway  # noqa: E402
from sandbox.local.backend import LocalBackend, sandbox_python  # noqa: E402
from tests.support.apis.library import LibraryAPI  # noqa: E402

LIMITS = Limits(timeout=30)


def program_rows(tools: Toolset, n: int) -> list[Row]:
    python = sandbox_python()
    rows = [measure("python3 -c pass", n, lambda: subprocess.run([python, "-c", "pass"], check=True))]

    def run_on(backend: LocalBackend) -> Callable[[], None]:
        def once() -> None:
            r = backend.run("print(1)", tools, LIMITS)
            if not r.ok or r.answer != "1\n":
                raise RuntimeError(f"benchmark run failed: {r.to_dict()}")
        return once

    with LocalBackend(pool_size=0) as cold:
        rows.append(measure("local cold", n, run_on(cold)))
    with LocalBackend(pool_size=2) as warm:
        rows.append(measure("local warm", n, run_on(warm), before=lambda: warm.prewarm(LIMITS)))
        warm.prewarm(LIMITS)
        rows.append(measure("local burst", n, run_on(warm)))
    return rows


def gateway_rows(tools: Toolset, api: LibraryAPI, calls: int = 200, repeat: int = 5) -> dict[str, float]:
    """Per-call milliseconds (best of ``repeat``) of direct httpx, Gateway.call, and calls made
    by a sandboxed program (minus the same program without calls)."""
    client = httpx.Client()
    url = api.url + "/stats"

    def direct() -> None:
        for _ in range(calls):
            client.get(url).json()

    gateway_client = httpx.Client()

    def via_gateway() -> None:
        gw = Gateway(tools, Limits(max_calls=calls + 1), client=gateway_client)
        for _ in range(calls):
            if not gw.call("get_stats", {}).ok:
                raise RuntimeError("gateway call failed")

    # Interleaved rounds, best of each: the machine is shared, so a slow moment must not land
    # on one side only.
    best = {"direct httpx": float("inf"), "Gateway.call": float("inf")}
    for _ in range(repeat):
        for name, fn in (("direct httpx", direct), ("Gateway.call", via_gateway)):
            started = time.perf_counter()
            fn()
            best[name] = min(best[name], (time.perf_counter() - started) * 1000 / calls)
    out = dict(best)
    limits = Limits(timeout=60, max_calls=calls + 1)
    with LocalBackend(pool_size=2) as backend:
        def program_ms(source: str) -> float:
            times = []
            for _ in range(repeat):
                backend.prewarm(limits)
                started = time.perf_counter()
                r = backend.run(source, tools, limits)
                times.append((time.perf_counter() - started) * 1000)
                if not r.ok:
                    raise RuntimeError(f"benchmark run failed: {r.to_dict()}")
            return min(times)

        empty = program_ms(f"for i in range({calls}):\n    pass\n")
        full = program_ms(f"for i in range({calls}):\n    get_stats()\n")
    out["sandboxed program"] = (full - empty) / calls
    client.close()
    gateway_client.close()
    return out


def concurrency_row(tools: Toolset, runs: int = 20) -> tuple[float, int]:
    """Wall ms of ``runs`` concurrent runs, and how many call logs held a foreign call."""
    books = [10, 11, 20, 21, 30]
    results: dict[int, object] = {}
    with LocalBackend(pool_size=2) as backend:
        backend.prewarm(LIMITS)

        def one(i: int) -> None:
            book, limit = books[i % 5], 1 + i // 5
            results[i] = backend.run(f"get_book(book_id={book})\nlist_book_reviews(book_id={book}, limit={limit})\n"
                                     f"print({i})\n", tools, LIMITS)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(runs)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = (time.perf_counter() - started) * 1000
    crossed = 0
    for i, r in results.items():
        book, limit = books[i % 5], 1 + i // 5
        expected = [("get_book", {"book_id": book}), ("list_book_reviews", {"book_id": book, "limit": limit})]
        if not r.ok or r.answer != f"{i}\n" or [(c.tool, c.args) for c in r.calls] != expected:  # type: ignore[attr-defined]
            crossed += 1
    return wall, crossed


def docker_rows_if_available(n: int) -> list[Row]:
    """The Docker engineer's rows (benchmarks/bench_docker.py), when an engine and image are there."""
    try:
        from sandbox.docker.backend import docker_available
    except ImportError:
        return []
    if not docker_available():
        return []
    from bench_docker import docker_rows

    return [r for r in docker_rows(n) if r.name.startswith("docker ")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=30, help="runs per row")
    parser.add_argument("--no-docker", action="store_true", help="skip the Docker rows")
    args = parser.parse_args(argv)
    api = LibraryAPI()
    api.start()
    try:
        spec = api.write_spec(Path(tempfile.mkdtemp()) / "library.json")
        tools = Toolset([load_spec(spec)])
        rows = program_rows(tools, args.n)
        if not args.no_docker:
            rows += docker_rows_if_available(args.n)
        base = rows[0].p50_ms
        print("| row | n | p50 ms | p95 ms | p50 / python3 -c pass |\n|---|---|---|---|---|")
        for r in rows:
            print(f"| {r.name} | {r.n} | {r.p50_ms:.1f} | {r.p95_ms:.1f} | {r.p50_ms / base:.2f} |")
        per_call = gateway_rows(tools, api)
        direct = per_call["direct httpx"]
        print("\n| per call (200 calls, best of 5) | ms | overhead vs direct httpx |\n|---|---|---|")
        for name, ms in per_call.items():
            print(f"| {name} | {ms:.3f} | {ms - direct:+.3f} ms ({ms / direct:.2f}x) |")
        wall, crossed = concurrency_row(tools)
        print(f"\n20 concurrent runs (threads): {wall:.0f} ms wall, call logs with foreign calls: {crossed}")
        return 0 if crossed == 0 else 1
    finally:
        api.stop()


if __name__ == "__main__":
    sys.exit(main())
