"""Benchmark condense(): how much of a real response reaches the reflection prompt, and at what cost.

Input: the 54 real TMDB responses recorded by ATC's black-box probing
(bench-data/toolflow/dataset/tmdb/tmdb.spec.probed.v2.json, ``examples.response.value`` of each
endpoint), 42 B to 82 KB of JSON. For each response: characters of the condensed form (the
inferred schema as compact JSON plus the excerpt) against the raw JSON (the baseline a prompt
would otherwise carry), whether every key of the response (at any depth) appears in the shape,
and the time of one ``condense`` call against ``json.dumps`` of the same value.

    .venv/bin/python benchmarks/bench_condense.py
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import median_us  # noqa: E402  (benchmarks/ is the script directory)

from sandbox.attribution.condense import condense  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "bench-data" / "toolflow" / "dataset" / "tmdb" / "tmdb.spec.probed.v2.json"


def keys(value: Any, depth: int = 0, limit: int = 6) -> set[str]:
    """Every object key of ``value`` down to ``limit`` levels (the shape's depth cap)."""
    out: set[str] = set()
    if depth >= limit:
        return out
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(str(k))
            out |= keys(v, depth + 1, limit)
    elif isinstance(value, list):
        for v in value:
            out |= keys(v, depth + 1, limit)
    return out



def main() -> None:
    spec = json.loads(DATA.read_text())
    values = []
    for endpoint in spec["endpoints"]:
        try:
            values.append(endpoint["response"]["content"]["application/json"]["examples"]["response"]["value"])
        except (KeyError, TypeError):
            continue
    ratios, condensed_sizes, raw_sizes, cost, base = [], [], [], [], []
    keys_kept = keys_total = 0
    for value in values:
        raw = json.dumps(value, separators=(",", ":"))
        schema, excerpt = condense(value)
        shape_text = json.dumps(schema, separators=(",", ":"))
        size = len(shape_text) + len(excerpt)
        raw_sizes.append(len(raw))
        condensed_sizes.append(size)
        ratios.append(size / len(raw))
        wanted = keys(value)
        keys_total += len(wanted)
        keys_kept += sum(f'"{k}"' in shape_text for k in wanted)
        cost.append(median_us(lambda v=value: condense(v)))
        base.append(median_us(lambda v=value: json.dumps(v)))
    big = [r for r, n in zip(ratios, raw_sizes, strict=True) if n > 5000]
    print(f"## condense (bench_condense.py, {len(values)} real TMDB responses, {min(raw_sizes)} B to {max(raw_sizes)} B)\n")
    print("| what | result |")
    print("|---|---|")
    print(f"| condensed (shape JSON + excerpt) / raw JSON, median | {statistics.median(ratios):.2f} |")
    print(f"| same, responses > 5 KB ({len(big)}) median / max | {statistics.median(big):.3f} / {max(big):.3f} |")
    print(f"| condensed size median / max | {statistics.median(condensed_sizes):.0f} / {max(condensed_sizes)} chars |")
    print(f"| response keys (6 levels) present in the shape | {keys_kept}/{keys_total} ({100 * keys_kept / keys_total:.1f}%) |")
    print(f"| condense() median / max time | {statistics.median(cost):.0f} / {max(cost):.0f} us "
          f"({statistics.median(cost) / statistics.median(base):.0f}x json.dumps of the same value) |")


if __name__ == "__main__":
    main()
