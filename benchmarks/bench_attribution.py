"""Benchmark attribution: how often it blames the right tool, and what it costs.

Runs every program of tests/support/attribution_cases.py once through the real local sandbox against
the library API on 127.0.0.1, then, on the recorded error dicts and call logs:

- accuracy of ``sandbox.attribution.fault.attribute`` against two baselines measured on the same
  failures: "the last tool called" (what a log-only system would say) and "the tool called on
  the failing line, else the last tool called";
- time of one ``attribute`` call against ``ast.parse`` of the same program (the floor of any
  AST-based analysis) and against the sandbox run itself.

    .venv/bin/python benchmarks/bench_attribution.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import median_us  # noqa: E402  (benchmarks/ is the script directory)

from protocols import load_spec  # noqa: E402
from sandbox.api import Limits, ToolCall, Toolset  # noqa: E402
from sandbox.attribution.fault import attribute  # noqa: E402
from sandbox.execute import run  # noqa: E402
from tests.support.apis.library import SECRET, LibraryAPI  # noqa: E402
from tests.support.attribution_cases import CASES  # noqa: E402


def last_called(error_type: str, tool: str | None, line: int | None, calls: list[ToolCall]) -> str | None:
    if error_type == "ToolError":
        return tool
    return calls[-1].tool if calls else None


def on_failing_line(error_type: str, tool: str | None, line: int | None, calls: list[ToolCall]) -> str | None:
    if error_type == "ToolError":
        return tool
    same = [c.tool for c in calls if c.line == line]
    return same[-1] if same else last_called(error_type, tool, line, calls)



def main() -> None:
    from tests.sandbox.attribution.test_attribution import (
        InProcessRunner,  # the unit tests' harness: same frames as the runner
    )

    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    api = LibraryAPI()
    api.start()
    harness = InProcessRunner(api)
    os.environ["BENCH_LIBRARY_KEY"] = SECRET
    ours = base_last = base_line = 0
    att_us: list[float] = []
    parse_us: list[float] = []
    run_ms: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        spec = api.write_spec(Path(tmp) / "library.json", responses=False)
        toolset = Toolset([load_spec(spec)], credentials={"api_key": "env:BENCH_LIBRARY_KEY"})
        names = frozenset(toolset.names())
        for case in CASES:
            t = time.perf_counter()
            result = run(case.program, toolset, Limits(timeout=30), sandbox="local")
            run_ms.append((time.perf_counter() - t) * 1000)
            err = result.error
            assert err is not None, case.name
            # accuracy: the real sandbox's verdict vs baselines on the same error line and call log
            ours += err.tool == case.expected_tool
            raw_tool = err.tool if err.type == "ToolError" else None
            base_last += last_called(err.type, raw_tool, err.line, result.calls) == case.expected_tool
            base_line += on_failing_line(err.type, raw_tool, err.line, result.calls) == case.expected_tool
            # cost: attribute() alone, on the runner-format error dict of the in-process harness
            local = harness.run(case.program)
            assert local.error is not None
            error, calls = local.error, local.calls
            program = case.program
            att_us.append(median_us(lambda: attribute(program, error, calls, names), args.repeat))  # noqa: B023
            parse_us.append(median_us(lambda: ast.parse(program), args.repeat))  # noqa: B023
    api.stop()
    n = len(CASES)
    print(f"## attribution (bench_attribution.py, {n} failing programs, local sandbox)\n")
    print("| what | result |")
    print("|---|---|")
    print(f"| right tool (or None): attribute() in the sandbox | {ours}/{n} ({100 * ours / n:.0f}%) |")
    print(f"| baseline: last tool called | {base_last}/{n} ({100 * base_last / n:.0f}%) |")
    print(f"| baseline: tool called on the failing line, else last | {base_line}/{n} ({100 * base_line / n:.0f}%) |")
    a, p = statistics.median(att_us), statistics.median(parse_us)
    print(f"| attribute() median per failure | {a:.0f} us ({a / p:.1f}x ast.parse of the program, {p:.0f} us) |")
    print(f"| attribute() max per failure | {max(att_us):.0f} us |")
    r = statistics.median(run_ms)
    print(f"| attribute() share of a local sandbox run (median run {r:.1f} ms) | {100 * a / 1000 / r:.1f}% |")


if __name__ == "__main__":
    main()
