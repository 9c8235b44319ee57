"""Docker backend overhead: a trivial program, cold and warm, against baselines from the same run.

Rows (p50/p95 over N runs of ``print(1)``, in ms):

- ``python3 -c pass``: a bare interpreter start on the host (the floor of any process sandbox);
- ``docker exec``: a bare exec of ``python3 -I -S -c pass`` into an already running container
  through the engine API (the floor of anything that asks Docker for a process);
- ``docker cold``: ``DockerBackend(pool_size=0)``, a container started for each run;
- ``docker warm``: ``DockerBackend(pool_size=2)`` with the pool refilled between runs;
- ``docker burst``: back-to-back runs on the warm backend without waiting for refills.

Ratios are against ``python3 -c pass`` and against ``docker exec``. Usage::

    .venv/bin/python benchmarks/bench_docker.py [-n 20]

``docker_rows(n)`` returns the rows for ``benchmarks/bench_sandbox.py`` to print with its own.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import Row, measure  # noqa: E402

from sandbox.api import Limits, Toolset  # noqa: E402
from sandbox.docker.backend import DEFAULT_IMAGE, DockerBackend, connect, docker_available  # noqa: E402

__all__ = ["Row", "docker_rows", "main"]


# The real interpreter, not a shim (pyenv's ``python3`` is a shell script that costs 100 ms).
PYTHON = os.path.realpath(sys.executable)


def _python_pass() -> None:
    subprocess.run([PYTHON, "-c", "pass"], check=True)


def docker_rows(n: int = 20) -> list[Row]:
    """Measure every row (see the module docstring); needs the engine and the sandbox image."""
    rows = [measure("python3 -c pass", n, _python_pass)]
    client = connect()
    container = client.containers.run(DEFAULT_IMAGE, ["python3", "-c", "import time; time.sleep(600)"], detach=True,
                                      network_mode="none", labels={"atc.bench": "1"})
    try:
        def bare_exec() -> None:
            exec_id = client.api.exec_create(container.id, ["python3", "-I", "-S", "-c", "pass"])["Id"]
            client.api.exec_start(exec_id)

        rows.append(measure("docker exec", n, bare_exec))
    finally:
        container.remove(force=True)
        client.close()

    tools = Toolset(collections=[])
    limits = Limits(timeout=30)

    def run_on(backend: DockerBackend) -> Callable[[], None]:
        def once() -> None:
            result = backend.run("print(1)", tools, limits)
            if not result.ok or result.answer != "1\n":
                raise RuntimeError(f"benchmark run failed: {result.to_dict()}")
        return once

    with DockerBackend(pool_size=0) as cold:
        rows.append(measure("docker cold", max(5, n // 2), run_on(cold)))
    with DockerBackend(pool_size=2) as warm:
        rows.append(measure("docker warm", n, run_on(warm), before=lambda: warm.prewarm(limits)))
        warm.prewarm(limits)
        rows.append(measure("docker burst", n, run_on(warm)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="runs per row (cold uses half)")
    args = parser.parse_args(argv)
    if not docker_available():
        print("no Docker engine or no sandbox image: run `atc sandbox build --offline` first", file=sys.stderr)
        return 2
    rows = docker_rows(args.n)
    base, exec_row = rows[0], rows[1]
    print(f"{'row':<16} {'n':>3} {'p50 ms':>9} {'p95 ms':>9} {'p50/python':>11} {'p50/exec':>9}")
    for r in rows:
        print(f"{r.name:<16} {r.n:>3} {r.p50_ms:>9.1f} {r.p95_ms:>9.1f} "
              f"{r.p50_ms / base.p50_ms:>11.2f} {r.p50_ms / exec_row.p50_ms:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
