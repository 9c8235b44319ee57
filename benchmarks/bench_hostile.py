"""What hostile programs cost the HOST: the atc process's peak memory and CPU per run (issue 20).

Every case of the hostile-host corpus (``tests/support/hostile_host.py``: validation bombs, frames of
millions of empty lists, streams of ``ready`` and ``output`` frames, huge arguments and responses
kept in the call log, a 500 KB program, ...) plus a normal run, on each backend and for each
``--memory``, in a child atc process (``tests.support.hostile_host.measure``): the peak resident memory
above the process's baseline (taken once, before the first case) and the process's CPU time
during the run, set against the run's own limits: ``peak / --memory`` (the goal: at most 4) and
``CPU / --timeout``. The "normal" row is the baseline measured in the same run.

The hostile MCP server's answers (``tests.support.hostile_host.MCP_CASES``, issue 29: a million content
items, four million numbers, a million keys, a 120 MB text item, a value nested 100,000 deep, with
the id first, last or left out, and the largest answer the values bound lets in) are measured the
same way, once per MCP transport of ``--mcp``: ``stdio`` (the server started by atc), ``http``
(streamable HTTP answering JSON bodies), ``sse`` (streamable HTTP answering SSE streams) and
``legacy-sse`` (the older SSE transport: every answer an event of one GET stream), with
``--mcp-timeout`` as the run's deadline (the SDK takes seconds to decode the largest answer let in).

Usage::

    .venv/bin/python benchmarks/bench_hostile.py [--backends local,docker] [--memory 64,256]
        [--timeout 5] [--cases NAME,...] [--mcp stdio,http,sse,legacy-sse] [--mcp-timeout 15] [--code DIR]
        [--json OUT]

``--code DIR`` measures the code of another checkout (its ``sandbox`` package; this corpus and
its echo API are copied in), e.g. the code before a change.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.apis.echo import EchoAPI  # noqa: E402
from tests.support.hostile_host import CASES, MCP_CASES, HostCase, Measured, measure  # noqa: E402

NORMAL = HostCase("normal run (3 calls)", "for i in range(3):\n    echo(items=[1, 2, 3], blob='x')\nprint('ok')",
                  ("ok",))


def _load() -> str:
    with open("/proc/loadavg") as f:
        return f"load average {' '.join(f.read().split()[:3])} on {os.cpu_count()} cores"


def _prepare(code: Path) -> Path:
    """A checkout to measure, with this corpus and its echo API in it."""
    if code == ROOT:
        return code
    for rel in ("tests/support/hostile_host.py", "tests/support/apis/echo.py", "tests/support/mcp_servers/hostile.py"):
        (code / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, code / rel)
    return code


@contextmanager
def _mcp_source(transport: str, code: Path) -> Iterator[str]:
    """The hostile MCP server as a --tools source: over stdio (atc starts it), or a process on
    127.0.0.1 serving streamable HTTP (``sse``: answering each request as an SSE stream)."""
    if transport == "stdio":
        yield "mcp:" + shlex.join([sys.executable, "-m", "tests.support.mcp_servers.hostile"])
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    flags = {"sse": ["--sse"], "legacy-sse": ["--legacy-sse"]}.get(transport, [])
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.mcp_servers.hostile", "--http", str(port), *flags], cwd=code,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the hostile MCP server did not start") from None
                time.sleep(0.05)
        yield f"mcp+sse://127.0.0.1:{port}/sse" if transport == "legacy-sse" else f"mcp+http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


def _table(title: str, got: list[Measured], memory: int, timeout: float) -> None:
    print(f"\n### {title} (baseline {got[0].baseline_mb:.0f} MB)\n")
    print("| case | outcome | peak MB | peak / --memory | CPU s | CPU / --timeout | wall s |")
    print("|---|---|---|---|---|---|---|")
    for r in got:
        print(f"| {r.name} | {r.outcome} | {r.peak_mb:.1f} | {r.peak_mb / memory:.2f} | {r.cpu_s:.2f} | "
              f"{r.cpu_s / timeout:.2f} | {r.wall_s:.2f} |")
    worst = max(got, key=lambda r: r.peak_mb)
    print(f"\nworst: {worst.name}, {worst.peak_mb:.1f} MB = {worst.peak_mb / memory:.2f} x --memory "
          f"(goal: at most 4); most CPU: {max(r.cpu_s for r in got):.2f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="local,docker")
    parser.add_argument("--memory", default="64,256", help="--memory values (MB), comma-separated")
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--cases", default="", help="only these cases (comma-separated names)")
    parser.add_argument("--mcp", default="stdio,http", help="MCP transports of the MCP cases ('' for none)")
    parser.add_argument("--mcp-timeout", type=float, default=15.0, help="--timeout of the MCP cases' runs")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose sandbox is measured")
    parser.add_argument("--json", type=Path, help="also write every row here")
    args = parser.parse_args(argv)
    wanted = set(filter(None, args.cases.split(",")))
    cases = [NORMAL] + [c for c in CASES if not wanted or c.name in wanted]
    mcp_cases = [NORMAL] + [c for c in MCP_CASES if not wanted or c.name in wanted]
    transports = [t for t in args.mcp.split(",") if t] if len(mcp_cases) > 1 else []
    backends = [b for b in args.backends.split(",") if b]
    if "docker" in backends:
        from sandbox.docker.backend import docker_available

        if not docker_available():
            print("(no Docker engine or no sandbox image: Docker rows left out)")
            backends.remove("docker")
    code = _prepare(args.code.resolve())
    api = EchoAPI().start()
    spec = api.write_spec(Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-hostile-echo-{os.getpid()}.json")
    print(f"before: {_load()}")
    rows: list[Measured] = []
    try:
        for backend in backends:
            for memory in (int(m) for m in args.memory.split(",")):
                if len(cases) > 1:
                    got = measure(backend, cases, spec=spec, limits={"timeout": args.timeout, "memory_mb": memory},
                                  timeout=3600, root=code)
                    rows += got
                    _table(f"{backend}, --memory {memory} --timeout {args.timeout:g}", got, memory, args.timeout)
                for transport in transports:
                    with _mcp_source(transport, code) as source:
                        got = measure(backend, mcp_cases, spec=spec, timeout=3600, root=code, mcp=[source],
                                      limits={"timeout": args.mcp_timeout, "memory_mb": memory})
                    rows += got
                    _table(f"MCP over {transport}, {backend}, --memory {memory} --timeout {args.mcp_timeout:g}", got,
                           memory, args.mcp_timeout)
    finally:
        api.stop()
        spec.unlink(missing_ok=True)
    print(f"\nafter: {_load()}")
    if args.json:
        args.json.write_text(json.dumps([r.to_dict() for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
