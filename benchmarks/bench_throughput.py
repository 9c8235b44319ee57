"""Sustained sandbox throughput: 200 back-to-back trivial runs on each backend, before and after.

For each backend (local; Docker when an engine and the image are there), ``print(1)`` runs
through ``Backend.run`` with a toolset of no tools:

- burst: ``--burst`` runs back to back (default 200), right after ``prewarm``;
- burst again: the same once more right away ("after" only), with the pool grown to the demand
  the first burst showed;
- spaced: ``-n`` runs with 0.2 s between them (untimed), as between a model's attempts;

each with the policy before this change ("before": a fixed pool of two runners refilled in the
background -- for local a new interpreter per runner, for Docker a new container per run) and
the current default ("after": a pool sized to demand; local jails forked by the fork server,
Docker containers reset and reused). All rows are set against ``python3 -c pass`` (the
sandbox's interpreter started bare) measured in the same run. The machine's load is printed
before and after (other work on the machine slows every row alike, the burst rows most).

Usage::

    .venv/bin/python benchmarks/bench_throughput.py [--burst 200] [-n 30] [--no-docker]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from timing import Row, measure  # noqa: E402

from sandbox.api import Backend, Limits, Toolset  # noqa: E402
from sandbox.local.backend import LocalBackend, sandbox_python  # noqa: E402

LIMITS = Limits(timeout=30)
TOOLS = Toolset(collections=[])


def _once(backend: Backend) -> Callable[[], None]:
    def once() -> None:
        result = backend.run("print(1)", TOOLS, LIMITS)
        if not result.ok or result.answer != "1\n":
            raise RuntimeError(f"benchmark run failed: {result.to_dict()}")
    return once


def backend_rows(label: str, make: Callable[[], Backend], burst: int, n: int,
                 again: bool) -> tuple[list[Row], dict[str, int]]:
    """The burst and spaced rows of one backend configuration, and its pool's stats after the burst."""
    backend = make()
    try:
        backend.prewarm(LIMITS)  # type: ignore[attr-defined]
        time.sleep(0.5)
        rows = [measure(f"{label} burst", burst, _once(backend))]
        stats: dict[str, int] = backend.pool_stats(LIMITS) if hasattr(backend, "pool_stats") else {}
        if again:  # the same burst once more, the pool grown to the demand it saw (no idle pause)
            rows.append(measure(f"{label} burst again", burst, _once(backend)))
        time.sleep(0.5)
        rows.append(measure(f"{label} spaced", n, _once(backend), before=lambda: time.sleep(0.2)))
        return rows, stats
    finally:
        backend.close()  # type: ignore[attr-defined]


def load() -> str:
    with open("/proc/loadavg") as f:
        avg = " ".join(f.read().split()[:3])
    pressure = ""
    try:
        with open("/proc/pressure/cpu") as f:
            pressure = ", cpu pressure " + f.readline().split()[1]
    except OSError:
        pass
    return f"load average {avg} on {os.cpu_count()} cores{pressure}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=200, help="back-to-back runs per burst row")
    parser.add_argument("-n", type=int, default=30, help="runs per spaced row")
    parser.add_argument("--no-docker", action="store_true")
    args = parser.parse_args(argv)
    print(f"before: {load()}")
    python = sandbox_python()
    rows = [measure("python3 -c pass", args.n, lambda: subprocess.run([python, "-c", "pass"], check=True))]
    pools: dict[str, dict[str, int]] = {}
    configs: list[tuple[str, Callable[[], Backend]]] = [
        ("local before", lambda: LocalBackend(pool_size=2, pool_max=2, fork_server=False)),
        ("local after", lambda: LocalBackend()),
    ]
    if not args.no_docker:
        from sandbox.docker.backend import DockerBackend, docker_available

        if docker_available():
            configs += [("docker before", lambda: DockerBackend(pool_size=2, pool_max=2, reuse=False)),
                        ("docker after", lambda: DockerBackend())]
        else:
            print("(no Docker engine or no sandbox image: Docker rows left out)")
    for label, make in configs:
        got, stats = backend_rows(label, make, args.burst, args.n, again=label.endswith("after"))
        rows += got
        pools[label] = stats
    print(f"after: {load()}")
    base = rows[0]
    print(f"\n{'row':<22} {'n':>4} {'p50 ms':>8} {'p95 ms':>8} {'p50/python':>11}")
    for r in rows:
        print(f"{r.name:<22} {r.n:>4} {r.p50_ms:>8.1f} {r.p95_ms:>8.1f} {r.p50_ms / base.p50_ms:>11.2f}")
    print("\npool after the burst (peak: the largest size the demand asked for):")
    for label, stats in pools.items():
        print(f"  {label:<14} {stats}")
    by_name = {r.name: r for r in rows}
    print("\ngoal: burst p50 <= 5 ms and p95 <= 30 ms")
    for backend in ("local", "docker"):
        before = by_name.get(f"{backend} before burst")
        for which in ("burst", "burst again"):
            after = by_name.get(f"{backend} after {which}")
            if before and after:
                met = after.p50_ms <= 5 and after.p95_ms <= 30
                print(f"  {backend} {which}: p50 {before.p50_ms:.1f} -> {after.p50_ms:.1f} ms "
                      f"({before.p50_ms / after.p50_ms:.1f}x), p95 {before.p95_ms:.1f} -> {after.p95_ms:.1f} ms: "
                      f"{'met' if met else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
