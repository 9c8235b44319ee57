"""A Python function tool's call overhead (issue 33): through the gateway against a direct call.

One program, in the sandbox, calls a function tool ``N`` times and times each call from inside
the program (``time.perf_counter`` around the call), then calls the same function defined in the
program itself ``N`` times the same way: the difference of the medians is what going through
the gateway costs a program (frame to the host, budget, validation, the function on a worker
thread, JSON, redaction, the call log, frame back). The same on the host alone: ``Gateway.call``
against calling the function. Goal: <= 0.3 ms per call from inside the sandbox.

Run: ``python benchmarks/bench_functions.py [--calls N] [--sandbox local,docker]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def lookup(user_id: int, fields: list[str] | None = None) -> dict[str, object]:
    """A user record (what a pipeline's database lookup returns)."""
    return {"id": user_id, "name": f"user {user_id}", "tags": ["a", "b"], "fields": fields or []}


def read_lookup(user_id: int, fields: list[str] | None = None) -> dict[str, object]:
    """The same lookup, declared a read (``atc.tool(read_only=True)``): no write ledger."""
    return lookup(user_id, fields)


def _tool(read: bool) -> object:
    """The function as a tool named ``lookup``: undeclared (a write, atc's default for a function
    it knows nothing of: recorded in the task's ledger) or declared a read."""
    import atc

    return atc.tool(name="lookup", read_only=True)(read_lookup) if read else lookup


PROGRAM = """
import time, statistics
def local_lookup(user_id, fields=None):
    return {{"id": user_id, "name": f"user {{user_id}}", "tags": ["a", "b"], "fields": fields or []}}
gateway, direct = [], []
for i in range({n}):
    t = time.perf_counter(); lookup(user_id=i, fields=["name"]); gateway.append(time.perf_counter() - t)
for i in range({n}):
    t = time.perf_counter(); local_lookup(user_id=i, fields=["name"]); direct.append(time.perf_counter() - t)
print(statistics.median(gateway) * 1000, sorted(gateway)[int(0.95 * len(gateway))] * 1000,
      statistics.median(direct) * 1000)
"""


def in_sandbox(sandbox: str, calls: int, read: bool = False) -> dict[str, float]:
    import atc
    from sandbox.api import Limits

    fn = _tool(read)
    atc.run("print(lookup(user_id=0))", [fn], sandbox=sandbox)  # the backend and the transport warm
    result = atc.run(PROGRAM.format(n=calls), [fn], Limits(timeout=300, max_calls=calls + 10), sandbox=sandbox)
    assert result.ok, result.error
    p50, p95, direct = (float(x) for x in result.answer.split())
    return {"gateway_p50_ms": p50, "gateway_p95_ms": p95, "direct_p50_ms": direct, "overhead_ms": p50 - direct}


def on_host(calls: int, read: bool = False) -> dict[str, float]:
    from protocols.functions import functions_collection
    from sandbox.api import Limits, Toolset
    from sandbox.gateway.core import Gateway

    gateway = Gateway(Toolset([functions_collection([_tool(read)])]), Limits(max_calls=calls + 10))
    gateway.call("lookup", {"user_id": 0})
    through, direct = [], []
    for i in range(calls):
        t0 = time.perf_counter()
        gateway.call("lookup", {"user_id": i, "fields": ["name"]})
        through.append(time.perf_counter() - t0)
    for i in range(calls):
        t0 = time.perf_counter()
        json.dumps(lookup(user_id=i, fields=["name"]))
        direct.append(time.perf_counter() - t0)
    p50, direct_p50 = statistics.median(through) * 1000, statistics.median(direct) * 1000
    return {"gateway_p50_ms": p50, "direct_p50_ms": direct_p50, "overhead_ms": p50 - direct_p50}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--sandbox", default="local,docker")
    args = ap.parse_args()
    for read in (False, True):
        kind = "read (read_only=True)" if read else "write (undeclared)"
        host = on_host(args.calls, read)
        print(f"{kind}: host, Gateway.call vs the function (+ json.dumps): p50 {host['gateway_p50_ms']:.4f} ms vs "
              f"{host['direct_p50_ms']:.4f} ms: overhead {host['overhead_ms']:.4f} ms per call")
        for sandbox in [s for s in args.sandbox.split(",") if s]:
            try:
                found = in_sandbox(sandbox, args.calls, read)
            except Exception as exc:  # no Docker engine: say so, measure the rest
                print(f"{kind}: {sandbox}: not measured ({type(exc).__name__}: {exc})")
                continue
            print(f"{kind}: {sandbox} sandbox, from inside the program, {args.calls} calls: through the gateway p50 "
                  f"{found['gateway_p50_ms']:.4f} ms (p95 {found['gateway_p95_ms']:.4f}), the same function in the "
                  f"program {found['direct_p50_ms']:.4f} ms: overhead {found['overhead_ms']:.4f} ms per call "
                  f"(goal <= 0.3 ms), {found['gateway_p50_ms'] / max(found['direct_p50_ms'], 1e-6):.0f}x a direct call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
