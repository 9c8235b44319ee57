"""What the kernel-channel closing costs the local sandbox: the seccomp filter and the extra
namespaces, per run, against the same runs without the filter, measured in the same run.

Rows (p50/p95 in ms; the two sides of each pair are interleaved run by run, so that the shared
machine's slow moments fall on both):

- ``warm print(1)``: a run on a warm pool (refilled between runs), filter vs ``seccomp=False``;
  the filter is installed while the runner is spawned, so this is what a model's attempt waits;
- ``cold print(1)``: a run that starts its own jail (``pool_size=0``), which compiles nothing
  (the program is compiled once per process) but installs the filter;
- ``syscalls``: a program making 20,000 allowed system calls that the kernel's per-filter cache
  cannot skip (``socketpair``, checked by argument) and 200,000 that it can (``getppid``): the
  filter's cost per call, worst and common case;
- ``typical``: json, re, threads and a ``/bin/sh`` subprocess, as a generated program might.

Also printed: the time to compile the policy (once per process) and to install it (``prctl``
in a fresh interpreter, median of 50).

Usage::

    .venv/bin/python benchmarks/bench_seccomp.py [-n 30]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from timing import Row, median_us  # noqa: E402

from sandbox.api import Limits, Toolset  # noqa: E402
from sandbox.inside.seccomp import compile_filter  # noqa: E402
from sandbox.local.backend import LocalBackend, jail_path, sandbox_python  # noqa: E402

LIMITS = Limits(timeout=60)
SYSCALLS = """
import os, socket, time
t = time.perf_counter()
for i in range(20000):
    a, b = socket.socketpair()
    a.close()
    b.close()
checked = (time.perf_counter() - t) / 20000 / 3 * 1e6
t = time.perf_counter()
for i in range(200000):
    os.getppid()
cached = (time.perf_counter() - t) / 200000 * 1e6
print("%.3f %.3f" % (checked, cached))
"""
TYPICAL = """
import json, re, subprocess, threading
data = [{"id": i, "name": "item %d" % i, "tags": ["a", "b"]} for i in range(2000)]
text = json.dumps(data)
assert len(json.loads(text)) == 2000 and len(re.findall(r"item \\d+", text)) == 2000
out = []
threads = [threading.Thread(target=lambda: out.append(sum(range(10000)))) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
print(subprocess.run(["/bin/sh", "-c", "echo ok"], capture_output=True, text=True).stdout.strip(), len(out))
"""
INSTALL = r"""
import ctypes, sys, time
sys.path.insert(0, sys.argv[1])
import jail
ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)
t = time.perf_counter()
jail.install_seccomp({"seccomp": sys.argv[2], "seccomp-name": "atc-v2"}, [])
print((time.perf_counter() - t) * 1e6)
"""


def pair(name: str, n: int, with_filter: Callable[[], object], without: Callable[[], object],
         before: Callable[[], object] | None = None) -> tuple[Row, Row]:
    """p50/p95 of both sides, interleaved run by run."""
    samples: dict[bool, list[float]] = {True: [], False: []}
    for i in range(n):
        for side in ((True, False) if i % 2 else (False, True)):
            if before is not None:
                before()
            started = time.perf_counter()
            (with_filter if side else without)()
            samples[side].append((time.perf_counter() - started) * 1000)

    def row(label: str, values: list[float]) -> Row:
        values.sort()
        return Row(label, statistics.median(values), values[min(n - 1, round(0.95 * (n - 1)))], n)

    return row(f"{name}, filter", samples[True]), row(f"{name}, no filter", samples[False])


def run_on(backend: LocalBackend, program: str, check: Callable[[str], bool]) -> Callable[[], str]:
    def once() -> str:
        result = backend.run(program, Toolset([]), LIMITS)
        if not result.ok or not check(result.answer):
            raise RuntimeError(f"benchmark run failed: {result.to_dict()}")
        return result.answer
    return once


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=30, help="runs per row")
    args = parser.parse_args(argv)
    n = args.n
    rows: list[tuple[Row, Row]] = []
    started = time.perf_counter()
    program = compile_filter()
    compile_ms = (time.perf_counter() - started) * 1000
    install = [float(subprocess.run([sandbox_python(), "-I", "-S", "-c", INSTALL, str(jail_path().parent),
                                     program.hex()], capture_output=True, text=True, check=True).stdout)
               for _ in range(50)]

    with LocalBackend(pool_size=2) as on, LocalBackend(pool_size=2, seccomp=False) as off:
        assert "seccomp:atc-v2" in on.run("print(1)", Toolset([]), LIMITS).isolation
        assert "seccomp:off" in off.run("print(1)", Toolset([]), LIMITS).isolation

        def refill() -> None:
            on.prewarm(LIMITS)
            off.prewarm(LIMITS)

        one = lambda answer: answer == "1\n"  # noqa: E731
        rows.append(pair("warm print(1)", n, run_on(on, "print(1)", one), run_on(off, "print(1)", one), refill))
        rows.append(pair("typical", n, run_on(on, TYPICAL, lambda a: a == "ok 8\n"),
                         run_on(off, TYPICAL, lambda a: a == "ok 8\n"), refill))
        per_call: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for _ in range(5):
            for side, backend in ((True, on), (False, off)):
                refill()
                checked, cached = map(float, run_on(backend, SYSCALLS, lambda a: True)().split())
                per_call[side].append((checked, cached))
    with LocalBackend(pool_size=0) as cold_on, LocalBackend(pool_size=0, seccomp=False) as cold_off:
        rows.append(pair("cold print(1)", n, run_on(cold_on, "print(1)", one), run_on(cold_off, "print(1)", one)))

    print("| row | n | p50 ms | p95 ms | p50 filter - no filter |\n|---|---|---|---|---|")
    for with_row, without_row in rows:
        for r in (with_row, without_row):
            delta = f"{with_row.p50_ms - without_row.p50_ms:+.2f} ms" if r is with_row else ""
            print(f"| {r.name} | {r.n} | {r.p50_ms:.2f} | {r.p95_ms:.2f} | {delta} |")
    best = {side: (min(c for c, _ in v), min(g for _, g in v)) for side, v in per_call.items()}
    print("\n| per system call (best of 5 runs) | filter us | no filter us | difference |\n|---|---|---|---|")
    for i, label in enumerate(("socketpair/close (checked by argument)", "getppid (cached: allowed for any argument)")):
        print(f"| {label} | {best[True][i]:.3f} | {best[False][i]:.3f} | {best[True][i] - best[False][i]:+.3f} us |")
    print(f"\ncompile the policy (once per process): {compile_ms:.2f} ms, {len(program) // 8} instructions; "
          f"install it (prctl, median of 50): {statistics.median(install):.0f} us; "
          f"compile again: {median_us(compile_filter, 20):.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
