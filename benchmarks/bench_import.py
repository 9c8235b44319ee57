"""Store speed at ToolBench scale: import 16,000 tools, then show one tool, end to end via the CLI.

Generates a ToolBench query-format file of 16,000 distinct APIs (the real StableToolBench APIs, the
2,490-API union, replicated under new tool names so that every API is distinct), then times, each
as a fresh process, as a user would run them:

- ``atc tools import BIG.json``               goal < 30 s
- ``atc tools show TOOL``  (median of 7)       goal < 0.5 s
- ``atc tools search "QUERY"`` (median of 5)
- ``atc --help`` (median of 7)

against baselines measured in the same run: ``python -c pass`` (interpreter start) and
``python -c "import json; json.load(open(BIG))"`` (just reading the file once).

    .venv/bin/python benchmarks/bench_import.py [--tools 16000] [--bench-data DIR]
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

ATC = str(Path(sys.executable).parent / "atc")


def generate(bench_data: Path, n: int, out: Path) -> tuple[int, str]:
    folder = bench_data / "toolbench/stabletoolbench/solvable_queries/test_instruction"
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for f in sorted(folder.glob("*.json")):
        for q in json.loads(f.read_text()):
            for api in q["api_list"]:
                seen.setdefault((api.get("category_name", ""), api["tool_name"], api["api_name"]), api)
    real = list(seen.values())
    queries: list[dict[str, Any]] = []
    batch: list[dict[str, Any]] = []
    for i in range(n):
        api = dict(real[i % len(real)])
        copy = i // len(real)
        if copy:
            api["tool_name"] = f"{api['tool_name']} v{copy + 1}"
        batch.append(api)
        if len(batch) == 6:
            queries.append({"query": f"synthetic query {len(queries)}", "api_list": batch})
            batch = []
    if batch:
        queries.append({"query": "last", "api_list": batch})
    out.write_text(json.dumps(queries))
    last: dict[str, Any] = batch[-1] if batch else queries[-1]["api_list"][-1]
    from protocols.model import python_identifier

    return n, python_identifier(f"{last['api_name']}_for_{last['tool_name']}")


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{cmd} failed ({r.returncode}): {r.stderr.strip()}")
    return elapsed


def median(cmd: list[str], env: dict[str, str], n: int) -> float:
    return statistics.median(timed(cmd, env) for _ in range(n))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", type=int, default=16_000)
    ap.add_argument("--bench-data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "bench-data")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "toolbench_big.json"
        n, tool_name = generate(args.bench_data, args.tools, big)
        env = {**os.environ, "ATC_HOME": str(Path(tmp) / "home")}
        size_mb = big.stat().st_size / 1e6
        py_start = median([sys.executable, "-c", "pass"], env, 7)
        json_load = median([sys.executable, "-c", f"import json; json.load(open({str(big)!r}))"], env, 5)
        t_import = timed([ATC, "tools", "import", str(big), "--name", "big"], env)
        listing = json.loads(subprocess.run([ATC, "tools", "list", "--json"], env=env, capture_output=True,
                                            text=True).stdout)["collections"]
        assert listing[0]["tools"] == n, listing
        t_show = median([ATC, "tools", "show", tool_name], env, 7)
        t_search = median([ATC, "tools", "search", "weather forecast for a city", "-k", "5"], env, 5)
        t_help = median([ATC, "--help"], env, 7)
        store_mb = sum(p.stat().st_size for p in (Path(tmp) / "home").rglob("*") if p.is_file()) / 1e6
    print(f"collection: {n} tools, spec {size_mb:.1f} MB, store {store_mb:.1f} MB")
    print(f"{'what':<34} {'seconds':>8} {'x python -c pass':>17} {'x json.load':>12}  goal")
    rows = [("python -c pass (baseline)", py_start, ""), ("json.load of the spec (baseline)", json_load, ""),
            ("atc tools import", t_import, "< 30 s"), ("atc tools show TOOL (median 7)", t_show, "< 0.5 s"),
            ("atc tools search (median 5)", t_search, ""), ("atc --help (median 7)", t_help, "")]
    for what, secs, goal in rows:
        print(f"{what:<34} {secs:>8.3f} {secs / py_start:>17.1f} {secs / json_load:>12.2f}  {goal}")
    ok = t_import < 30 and t_show < 0.5
    print("goals:", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
