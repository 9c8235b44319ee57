"""How well and how cheaply does ``atc probe --no-llm`` document an API it knows nothing about?

The RestBench specs (TMDB: 54 tools, Spotify: 40) are served by ``atc mock`` from the original
spec; the prober gets a copy with every response schema and example removed. ``atc mock`` answers
404 for ids no response contained, so most tools are reachable only through chains.

Measured against a baseline run in the same process, the paper's probing without its model: every
tool called on its own N times with arguments made from its schema (enum, default, example,
format, type; the i-th call takes each parameter's i-th made value), no chaining, and the
successful responses merged with genson the same way.

Rows: tools documented, requests sent, requests per documented tool, leaf-path recall of the
inferred response schemas against the original ones (over every tool with a true schema, and over
the documented ones), wall time; ``atc probe`` with one sample per tool (no gap-driven extra
samples, no cache) and with the defaults; then a second default run on the same cache.

Usage: .venv/bin/python benchmarks/bench_probe.py [--n 3] [--spec tmdb|spotify|all]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["ATC_HOME"] = tempfile.mkdtemp(prefix="atc-bench-probe-")

from atc.mock import MockServer  # noqa: E402
from probes import probe  # noqa: E402
from probes.calls import classify_body  # noqa: E402
from probes.document import leaf_paths, merge_schema  # noqa: E402
from probes.naming import param_role  # noqa: E402
from probes.safety import call_safety  # noqa: E402
from probes.values import schema_values  # noqa: E402
from protocols import load_data, load_spec  # noqa: E402
from protocols.model import Collection  # noqa: E402
from sandbox.api import Limits, Toolset  # noqa: E402
from sandbox.gateway import Gateway  # noqa: E402

SPECS = {"tmdb": ROOT.parent / "shared" / "bench-data" / "restbench" / "specs" / "tmdb_oas.json",
         "spotify": ROOT.parent / "shared" / "bench-data" / "restbench" / "specs" / "spotify_oas.json"}


def blind_copy(path: Path) -> Collection:
    """The spec with nothing left that says what a response looks like."""
    doc = json.loads(path.read_text())

    def strip(response: Any) -> None:
        if isinstance(response, dict):
            for key in ("content", "schema", "examples"):
                response.pop(key, None)

    for item in doc["paths"].values():
        for op in item.values():
            if isinstance(op, dict) and isinstance(op.get("responses"), dict):
                for response in op["responses"].values():
                    strip(response)
    for response in ((doc.get("components") or {}).get("responses") or {}).values():
        strip(response)
    collection = load_data(doc, source=f"{path.stem}-blind")
    assert all(t.response_schema is None and not t.examples for t in collection.tools)
    return collection


@dataclass
class Row:
    method: str
    tools: int
    documented: int
    requests: int
    recall_all: float
    recall_documented: float
    seconds: float

    @property
    def per_tool(self) -> float:
        return self.requests / self.documented if self.documented else float("inf")


def recall(truth: Collection, schemas: dict[str, dict[str, Any] | None], safe: list[str]) -> tuple[float, float]:
    """(recall over every safe tool with a true schema, recall over the documented ones)."""
    total = found = total_doc = found_doc = 0
    for name in safe:
        expected = leaf_paths(truth.tool(name).response_schema)  # type: ignore[union-attr]
        if not expected:
            continue
        got = leaf_paths(schemas.get(name)) if schemas.get(name) else set()
        hit = len(expected & got)
        total += len(expected)
        found += hit
        if schemas.get(name):
            total_doc += len(expected)
            found_doc += hit
    return found / max(1, total), found_doc / max(1, total_doc)


def naive(blind: Collection, truth: Collection, url: str, n: int) -> Row:
    """The paper's probing without a model: each tool alone, N times, schema-made arguments."""
    safe = [t for t in blind.tools if call_safety(t, blind).safe]
    gateway = Gateway(Toolset([blind], base_url=url), Limits(max_calls=10**6, call_timeout=10))
    started = time.perf_counter()
    schemas: dict[str, dict[str, Any] | None] = {}
    for tool in safe:
        made = {p: schema_values(tool.properties.get(p), param_role(tool, p)) for p in tool.required}
        samples = []
        for i in range(n):
            args = {p: values[min(i, len(values) - 1)].value for p, values in made.items() if values}
            outcome = gateway.call(tool.name, args)
            if outcome.ok and classify_body(outcome.data) == "ok":
                samples.append(outcome.data)
        schemas[tool.name] = merge_schema(samples)
    seconds = time.perf_counter() - started
    names = [t.name for t in safe]
    all_, doc = recall(truth, schemas, names)
    return Row(f"naive (each tool alone, N={n})", len(safe), sum(1 for s in schemas.values() if s),
               len(gateway.calls), all_, doc, seconds)


def atc_probe(blind: Collection, truth: Collection, url: str, label: str, **options: Any) -> Row:
    started = time.perf_counter()
    report = probe(blind, base_url=url, no_llm=True, **options)
    seconds = time.perf_counter() - started
    safe = [t.name for t in blind.tools if call_safety(t, blind).safe]
    schemas = {t.name: t.response_schema for t in report.tools if t.status == "documented"}
    all_, doc = recall(truth, schemas, safe)
    return Row(label, len(safe), report.count("documented"), report.calls, all_, doc, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3, help="calls per tool of the naive baseline (the paper's N)")
    parser.add_argument("--spec", choices=[*SPECS, "all"], default="all")
    args = parser.parse_args()
    names = list(SPECS) if args.spec == "all" else [args.spec]
    for name in names:
        truth = load_spec(SPECS[name])
        blind = blind_copy(SPECS[name])
        with MockServer(truth, keep_requests=100_000, auth=False) as mock:
            base = naive(blind, truth, mock.url, args.n)
            single = atc_probe(blind, truth, mock.url, "atc probe --no-llm --samples 1 (no extra samples)",
                               samples=1, cache=False)
            ours = atc_probe(blind, truth, mock.url, "atc probe --no-llm")
            again = atc_probe(blind, truth, mock.url, "atc probe --no-llm, again (cache)")
            assert len(mock.requests) == base.requests + single.requests + ours.requests + again.requests
        print(f"\n{name.upper()} ({len(blind.tools)} tools, {base.tools} safe to probe), atc mock on 127.0.0.1")
        print("| method | documented | requests | requests / documented tool | leaf-path recall (all) "
              "| recall (documented) | wall s |")
        print("|---|---|---|---|---|---|---|")
        for row in (base, single, ours, again):
            print(f"| {row.method} | {row.documented}/{row.tools} | {row.requests} | {row.per_tool:.2f} | "
                  f"{row.recall_all:.3f} | {row.recall_documented:.3f} | {row.seconds:.2f} |")
        print(f"ratios atc/naive: documented x{ours.documented / max(1, base.documented):.2f}, "
              f"requests per documented tool x{ours.per_tool / base.per_tool:.3f}, "
              f"recall (all) {ours.recall_all - base.recall_all:+.3f}")


if __name__ == "__main__":
    main()
