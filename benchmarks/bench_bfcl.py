"""BFCL multi-turn, base category, with the oracle (issue 33): wall time per task.

The oracle (tests/support/fakes/bfcl_oracle.py) behind the scripted OpenAI-compatible server answers each
user turn with that turn's ground-truth calls, so the time is atc's own: a solve per turn (the
model's reply read, the program checked and run in the sandbox, each call through the gateway to
BFCL's class instances on the host), then BFCL's checker. In the same run, the baseline is BFCL's
checker alone replaying the ground truth on its own instances (what scoring a task costs anyway).

Run: ``python benchmarks/bench_bfcl.py [--tasks N] [--strategy chain] [--concurrency 1] [--sandbox local]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--strategy", default="chain")
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--sandbox", default="local")
    args = ap.parse_args()
    import os

    os.environ.setdefault("ATC_HOME", tempfile.mkdtemp(prefix="bench-bfcl-"))
    from atc.evaluation import RunSettings, evaluate, load_suite
    from atc.evaluation.bfcl.checker import check
    from atc.llm.client import OpenAIModel
    from sandbox.api import Limits
    from tests.support.fakes.bfcl_oracle import BfclOracle
    from tests.support.fakes.openai_server import ScriptedOpenAI

    suite = load_suite("bfcl-multi-turn-base").head(args.tasks)
    entries = [suite.entries[t.id] for t in suite.tasks]
    t0 = time.perf_counter()
    for entry in entries:
        assert check(entry, entry.ground_truth)["valid"]
    checker_s = time.perf_counter() - t0
    with ScriptedOpenAI(router=BfclOracle(entries)) as server:
        client = OpenAIModel("oracle", base_url=server.base_url, backoff=0.01)
        t0 = time.perf_counter()
        result = evaluate(suite, RunSettings(strategies=[args.strategy], client=client, sandbox=args.sandbox,
                                             concurrency=args.concurrency, limits=Limits(timeout=60)), chart=False)
        wall_s = time.perf_counter() - t0
    scores = result.scores[args.strategy]
    solved = sum(1 for s in scores if s.success == "solved")
    per_task = [s.wall_s for s in scores]
    turns = sum(len(e.turns) for e in entries)
    print(f"{len(entries)} base tasks ({turns} user turns, {sum(len(t) for e in entries for t in e.ground_truth)} "
          f"ground-truth calls), strategy {args.strategy}, sandbox {args.sandbox}, concurrency {args.concurrency}")
    print(f"solved by BFCL's checker: {solved}/{len(scores)}")
    print(f"wall {wall_s:.1f} s: {wall_s / len(entries) * 1000:.0f} ms per task, {wall_s / turns * 1000:.0f} ms per "
          f"turn; a task's own duration p50 {statistics.median(per_task) * 1000:.0f} ms, "
          f"max {max(per_task) * 1000:.0f} ms")
    print(f"baseline, BFCL's checker alone on the ground truth: {checker_s / len(entries) * 1000:.1f} ms per task "
          f"({wall_s / checker_s:.0f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
