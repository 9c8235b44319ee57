"""Benchmark the write ledger (issue 34): what it costs a read call and a write call in the
gateway, against the code before it (``--base``, default: the commit before the ledger), measured
in the same run with the same interpreter and packages.

Each side runs ``Gateway.call`` in-process on the orders API's tools (tests/support/apis/orders.py) with
the transport replaced by an answer made in memory: the network is not what is measured, the
gateway's own work is (budget, validation, the write rule, the ledger, redaction, the call log).
The new code runs with a write ledger and policy attached (what every solve has); writes carry
distinct arguments, so each one is recorded, not replayed. A third row times a replayed write.

    .venv/bin/python benchmarks/bench_writes.py [--base COMMIT] [--calls 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _worker(calls: int, ledger: bool, spec_path: str) -> dict[str, float]:
    """Runs inside the tree being measured (``tree_run.py``): per-call p50 in microseconds."""
    from protocols.loaders import load_data
    from sandbox.api import Limits, Toolset
    from sandbox.gateway.core import Gateway
    from sandbox.gateway.http.transport import Reply

    shop = load_data(json.loads(Path(spec_path).read_text()), name="shop")
    toolset = Toolset([shop])
    if ledger:
        from sandbox.gateway.writes.policy import Writes

        toolset = Toolset([shop], writes=Writes.of("allow"))

    class Fixed(Gateway):
        def _exchange(self, tool: Any, args: Any, extra_query: Any, *rest: Any, **kw: Any) -> Reply:
            body = {"id": 1, "number": "A-1001", "product_id": 1, "quantity": 1} if tool.method == "POST" else [
                {"id": 1, "name": "desk lamp", "price": 24.0}]
            return Reply(status=201 if tool.method == "POST" else 200, headers={}, data=body, raw=b"")

    def per_call(make: Any) -> float:
        gateway = Fixed(toolset, Limits(max_calls=calls * 4 + 10))
        gateway._load()
        samples = []
        for i in range(calls):
            started = time.perf_counter()
            make(gateway, i)
            samples.append((time.perf_counter() - started) * 1e6)
            if len(gateway.calls) > 1000:
                gateway.calls.clear()
        return statistics.median(samples)

    out = {"read": per_call(lambda g, i: g.call("list_products", {"q": "lamp"})),
           "write": per_call(lambda g, i: g.call("place_order", {"product_id": 1, "quantity": i}))}
    if ledger:
        def replayed(g: Any, i: int) -> None:
            if i == 0:
                g.call("place_order", {"product_id": 2, "quantity": 1})
            g.gate.next_attempt()
            g.call("place_order", {"product_id": 2, "quantity": 1})

        out["replayed write"] = per_call(replayed)
    return out


def _base_commit() -> str:
    added = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "--", "sandbox/gateway/writes/gate.py"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return f"{added[-1]}^" if added else "HEAD"


def _run_tree(tree: Path, calls: int, ledger: bool, spec_path: Path) -> dict[str, float]:
    code = ["--worker", str(calls), "--spec", str(spec_path)] + (["--ledger"] if ledger else [])
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tree_run.py"), str(tree), "module",
                           "bench_writes", *code], capture_output=True, text=True, env=env,
                          cwd=ROOT / "benchmarks", check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default=None)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--worker", type=int, default=None)
    parser.add_argument("--ledger", action="store_true")
    parser.add_argument("--spec", default=None)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(_worker(args.worker, args.ledger, args.spec)))
        return 0
    base = args.base or _base_commit()
    with tempfile.TemporaryDirectory() as tmp:
        before, now = Path(tmp) / "before", Path(tmp) / "now"
        for tree, ref in ((before, base), (now, "HEAD")):
            tree.mkdir()
            archive = subprocess.run(["git", "archive", ref, "atc", "protocols", "sandbox", "probes"],
                                     cwd=ROOT, capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        if subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "atc", "protocols", "sandbox"], cwd=ROOT).returncode:
            for package in ("atc", "protocols", "sandbox", "probes"):  # the working tree, uncommitted work too
                subprocess.run(["rm", "-rf", str(now / package)], check=True)
                subprocess.run(["cp", "-r", str(ROOT / package), str(now / package)], check=True)
        sys.path.insert(0, str(ROOT))
        from tests.support.apis.orders import spec

        spec_path = Path(tmp) / "orders.json"
        spec_path.write_text(json.dumps(spec()))
        rounds = [(_run_tree(before, args.calls, False, spec_path), _run_tree(now, args.calls, True, spec_path))
                  for _ in range(3)]
    old = {k: statistics.median(r[0][k] for r in rounds) for k in ("read", "write")}
    new = {k: statistics.median(r[1][k] for r in rounds) for k in ("read", "write", "replayed write")}
    print(f"gateway.call, per call, p50 of {args.calls} calls, median of 3 rounds; base {base}")
    print(f"{'':16}{'before (us)':>14}{'ledger (us)':>14}{'added (ms)':>12}{'ratio':>8}")
    for kind, goal in (("read", 0.05), ("write", 0.2)):
        added = (new[kind] - old[kind]) / 1000
        print(f"{kind:16}{old[kind]:14.1f}{new[kind]:14.1f}{added:12.4f}{new[kind] / old[kind]:8.2f}"
              f"   goal <= {goal} ms: {'met' if added <= goal else 'NOT met'}")
    print(f"{'replayed write':16}{'':14}{new['replayed write']:14.1f}   (answered from the ledger, nothing sent)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
