"""What calling an MCP tool through atc costs per call, against the SDK alone, in the same run:

- baseline: ``ClientSession.call_tool`` straight to the shop server (tests/support/mcp_servers/shop.py,
  stdio), on its own connection, timed call by call inside the event loop;
- ``Gateway.call``: the host side of an atc call (argument validation, the hop from the gateway's
  thread to the connection's event loop, result conversion, redaction, the call log) on the
  connection atc keeps;
- from a program: a program in the local (and, when there, the Docker) sandbox calls the tool in
  a loop and times each call itself, so the row holds the whole trip (stub -> channel -> gateway ->
  MCP server and back);
- for scale: an HTTP tool of the library test API called the same way from a program.

Each row prints p50/p95 and its ratio to the baseline.

Usage::

    .venv/bin/python benchmarks/bench_mcp.py [-n 300] [--no-docker]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from timing import Row  # noqa: E402

import atc  # noqa: E402
from sandbox.api import Limits, Toolset  # noqa: E402
from sandbox.gateway.core import Gateway  # noqa: E402
from sandbox.gateway.mcp.connections import close_servers  # noqa: E402
from tests.support.apis.library import LibraryAPI  # noqa: E402

COMMAND = [sys.executable, "-m", "tests.support.mcp_servers.shop"]
SOURCE = "mcp:" + shlex.join(COMMAND)


def _row(name: str, samples: list[float]) -> Row:
    samples = sorted(samples)
    n = len(samples)
    return Row(name, statistics.median(samples), samples[min(n - 1, round(0.95 * (n - 1)))], n)


async def _direct(n: int) -> list[float]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=COMMAND[0], args=COMMAND[1:], cwd=str(ROOT))
    with open("/dev/null", "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for _ in range(20):
                    await session.call_tool("get_item", {"item_id": 2})
                out = []
                for _ in range(n):
                    started = time.perf_counter()
                    await session.call_tool("get_item", {"item_id": 2})
                    out.append((time.perf_counter() - started) * 1000)
                return out


def _gateway(collections: list[atc.Collection], n: int) -> list[float]:
    gateway = Gateway(Toolset(collections), Limits(max_calls=10**9))
    for _ in range(20):
        gateway.call("get_item", {"item_id": 2})
    out = []
    for _ in range(n):
        started = time.perf_counter()
        outcome = gateway.call("get_item", {"item_id": 2})
        out.append((time.perf_counter() - started) * 1000)
        assert outcome.ok, outcome.error
    return out


PROGRAM = """
import time
samples = []
for i in range(N + 20):
    started = time.perf_counter()
    CALL
    if i >= 20:
        samples.append((time.perf_counter() - started) * 1000)
print(samples)
"""


def _from_program(tools: object, call: str, n: int, sandbox: str) -> list[float]:
    program = PROGRAM.replace("N", str(n)).replace("CALL", call)
    result = atc.run(program, tools, Limits(max_calls=n + 50, timeout=600), sandbox=sandbox)  # type: ignore[arg-type]
    if not result.ok:
        raise SystemExit(f"the {sandbox} program failed: {result.error}")
    samples: list[float] = json.loads(result.answer.replace("'", '"'))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--no-docker", action="store_true")
    args = parser.parse_args()
    n = args.n

    base = _row("direct ClientSession.call_tool (baseline)", asyncio.run(_direct(n)))
    collections = atc.load_mcp(SOURCE)
    rows = [base, _row("Gateway.call of the MCP tool (host side)", _gateway(collections, n)),
            _row("MCP tool from a program, local sandbox",
                 _from_program(collections, 'get_item(item_id=2)', n, "local"))]
    from sandbox.execute import resolve_backend_name

    docker = not args.no_docker and resolve_backend_name(None) == "docker"
    if docker:
        rows.append(_row("MCP tool from a program, docker sandbox",
                         _from_program(collections, 'get_item(item_id=2)', n, "docker")))
    library = LibraryAPI()
    library.start()
    try:
        spec = library.write_spec(Path("/tmp") / "bench-mcp-library.json")
        rows.append(_row("HTTP tool from a program, local sandbox (for scale)",
                         _from_program([atc.load(str(spec))], 'get_book(book_id=20)', n, "local")))
    finally:
        library.stop()
        close_servers()

    print(f"{'row':<52} {'p50 ms':>8} {'p95 ms':>8} {'p50 x base':>10} {'p95 x base':>10}")
    for row in rows:
        print(f"{row.name:<52} {row.p50_ms:>8.3f} {row.p95_ms:>8.3f} {row.p50_ms / base.p50_ms:>10.2f} "
              f"{row.p95_ms / base.p95_ms:>10.2f}")


if __name__ == "__main__":
    main()
