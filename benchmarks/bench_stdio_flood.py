"""What a program that floods its stdio file descriptors costs the host's container daemon.

A Docker container's fds 0-2 are pipes to its ``containerd-shim``, which hands what comes to
``dockerd`` (and its log driver). A program that writes to fd 1 and 2 directly (``os.write``,
past the runner's captured ``sys.stdout``) made the daemon side read everything it wrote. This
runs, in one warm container each, a program that writes ``--mb`` MB to fds 1 and 2 and the same
program writing to ``/dev/null`` it opened itself (the baseline: the same work in the sandbox,
none for the daemon), and prints the CPU time the container's shim, ``dockerd`` and
``containerd`` used meanwhile (from ``/proc/PID/stat``) and ``dockerd``'s resident memory.

``dockerd`` and ``containerd`` are shared with anything else that uses the engine: their rows
are noisy on a busy machine; the shim is this container's alone.

Usage::

    .venv/bin/python benchmarks/bench_stdio_flood.py [--mb 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("ATC_BENCH_TREE", str(ROOT)))

from sandbox.api import Limits, Toolset  # noqa: E402

LIMITS = Limits(timeout=120)
FLOOD = """
import os, time
fd = {target}
chunk = b"x" * 65536
started = time.perf_counter()
for _ in range({mb} * 16):
    os.write(fd, chunk)
    os.write(fd if fd > 2 else 2, chunk[:1])
print(round(time.perf_counter() - started, 3))
"""


def _cpu_ms(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _pid_of(needle: str) -> int | None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if needle in f.read().decode(errors="replace"):
                        return int(entry)
            except OSError:
                continue
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="MB the program writes")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    from sandbox.docker.backend import DockerBackend, docker_available

    if not docker_available():
        print("no Docker engine or no sandbox image")
        return 0
    dockerd = _pid_of("dockerd")
    containerd = _pid_of("containerd --config") or _pid_of("/containerd.toml") or _pid_of("containerd")
    print(f"tree: {sys.path[0]}; dockerd {dockerd}, containerd {containerd}")
    print(f"{'program':<22} {'MB':>5} {'wall s':>7} {'shim cpu ms':>12} {'dockerd cpu ms':>15} "
          f"{'containerd cpu ms':>18} {'dockerd rss MB':>15}")
    for label, target in (("writes /dev/null", 'os.open("/dev/null", os.O_WRONLY)'), ("floods fds 1 and 2", "1")):
        for _ in range(args.repeat):
            with DockerBackend(pool_size=1, pool_max=1) as backend:
                backend.prewarm(LIMITS)
                cid = next(iter(backend._live))
                shim = _pid_of(cid)
                watched = [p for p in (shim, dockerd, containerd) if p]
                before = {p: _cpu_ms(p) for p in watched}
                rss = _rss_mb(dockerd) if dockerd else 0.0
                started = time.perf_counter()
                result = backend.run(FLOOD.format(target=target, mb=args.mb), Toolset(collections=[]), LIMITS)
                wall = time.perf_counter() - started
                after = {p: _cpu_ms(p) for p in watched}
                if not result.ok:
                    print(f"  (run failed: {result.error})")
                cells = [f"{after[p] - before[p]:.0f}" if p in after else "-" for p in (shim, dockerd, containerd)]
                grown = (_rss_mb(dockerd) - rss) if dockerd else 0.0
                print(f"{label:<22} {args.mb:>5} {wall:>7.2f} {cells[0]:>12} {cells[1]:>15} {cells[2]:>18} "
                      f"{grown:>+15.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
