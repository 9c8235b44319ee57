"""How much smaller is ``render_compact`` than the raw OpenAPI a model would otherwise be shown?

For the RestBench TMDB and Spotify specs, 20 operations (three seeded random samples, and the
first 20), and for the FastAPI-style orchestrator of the tests (``tests/support/apis/orchestrator_spec.py``,
Prefect 3's shape of API: nested ``$ref``'d filter bodies; all its 18 operations, and three seeded
samples of 8), compare characters and estimated tokens of:

- raw: the OpenAPI operation objects (with path-level parameters) as JSON, every ``$ref`` resolved;
- raw without examples: the same with ``example``/``examples`` keys removed (a fairer baseline);
- compact: ``render_compact`` of the same tools (with the shapes of structured arguments);
- no shapes: ``render_compact(..., shapes=False)``, what the prompt costs without them.

Checks that every parameter name of every tool appears in the compact text. Goal: compact <= 25% of raw.
Run it with ``PYTHONPATH`` at an older checkout to measure that code (the "no shapes" column is
then blank).

    .venv/bin/python benchmarks/bench_render.py [--bench-data DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from protocols import load_data, load_spec, render_compact
from protocols.refs import Resolver, escape


def _orchestrator_spec() -> dict[str, Any]:
    """The orchestrator's document, loaded by file path: with PYTHONPATH at an older checkout (to
    measure that code), ``tests`` is that checkout's, which may not have it."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "tests/support/apis/orchestrator_spec.py"
    spec = importlib.util.spec_from_file_location("orchestrator_spec", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.orchestrator_spec("http://127.0.0.1:9")  # type: ignore[no-any-return]

_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> int:
    """A simple regex tokenizer (words and single punctuation marks); close to BPE counts for JSON."""
    return len(_TOKEN.findall(text))


def strip_examples(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: strip_examples(v) for k, v in node.items() if k not in ("example", "examples")}
    if isinstance(node, list):
        return [strip_examples(v) for v in node]
    return node


def raw_operation(doc: dict[str, Any], resolver: Resolver, method: str, path: str) -> dict[str, Any]:
    item = doc["paths"][path]
    op = dict(item[method.lower()])
    if "parameters" in item:
        op["parameters"] = list(item["parameters"]) + list(op.get("parameters") or [])
    resolved = resolver.schema(op, f"/paths/{escape(path)}/{method.lower()}")
    return {"path": path, "method": method, **resolved}


def _without_shapes(tools: list[Any]) -> str | None:
    try:
        return render_compact(tools, shapes=False)  # type: ignore[call-arg]
    except TypeError:  # code from before the shapes
        return None


def measure(name: str, doc: dict[str, Any], collection: Any, seeds: list[int | None],
            size: int = 20) -> list[dict[str, Any]]:
    resolver = Resolver(doc, name)
    rows = []
    for seed in seeds:
        tools = collection.tools[:size] if seed is None else random.Random(seed).sample(collection.tools, size)
        raws = [raw_operation(doc, resolver, t.method, t.path) for t in tools]
        raw = json.dumps(raws, ensure_ascii=False)
        raw_noex = json.dumps(strip_examples(raws), ensure_ascii=False)
        compact = render_compact(tools)
        plain = _without_shapes(tools)
        missing = [f"{t.name}.{p}" for t in tools for p in t.properties if not re.search(rf"\b{re.escape(p)}\b", compact)]
        rows.append({"spec": name, "sample": f"first {size}" if seed is None else f"seed {seed}",
                     "raw_chars": len(raw), "raw_noex_chars": len(raw_noex), "compact_chars": len(compact),
                     "plain_chars": len(plain) if plain is not None else None,
                     "raw_tokens": tokens(raw), "raw_noex_tokens": tokens(raw_noex), "compact_tokens": tokens(compact),
                     "chars4_compact": len(compact) // 4, "missing_params": missing})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench-data", type=Path, default=Path("/work/shared/bench-data")
                    if not (Path(__file__).resolve().parents[2] / "shared" / "bench-data").exists()
                    else Path(__file__).resolve().parents[2] / "shared" / "bench-data")
    args = ap.parse_args()
    specs = [args.bench_data / "restbench/specs/tmdb_oas.json", args.bench_data / "restbench/specs/spotify_oas.json"]
    rows = [r for s in specs for r in measure(s.stem, json.loads(s.read_text()), load_spec(s), [None, 0, 1, 2])]
    doc = _orchestrator_spec()
    orchestrator = load_data(doc)
    rows += measure("orchestrator", doc, orchestrator, [None], size=len(orchestrator.tools))
    rows += measure("orchestrator", doc, orchestrator, [0, 1, 2], size=8)
    print(f"{'spec':<12} {'sample':<9} {'raw ch':>8} {'noex ch':>8} {'compact':>8} {'no shapes':>9} {'ratio':>6} "
          f"{'ratio noex':>10} {'raw tok':>8} {'compact tok':>11} {'tok ratio':>9}  missing")
    ok = True
    for r in rows:
        ratio = r["compact_chars"] / r["raw_chars"]
        ratio_noex = r["compact_chars"] / r["raw_noex_chars"]
        tok_ratio = r["compact_tokens"] / r["raw_tokens"]
        plain = "" if r["plain_chars"] is None else str(r["plain_chars"])
        ok &= ratio <= 0.25 and not r["missing_params"]
        print(f"{r['spec']:<12} {r['sample']:<9} {r['raw_chars']:>8} {r['raw_noex_chars']:>8} {r['compact_chars']:>8} "
              f"{plain:>9} {ratio:>6.3f} {ratio_noex:>10.3f} {r['raw_tokens']:>8} {r['compact_tokens']:>11} "
              f"{tok_ratio:>9.3f}  {len(r['missing_params'])}")
    print("goal (compact <= 25% of raw chars, no parameter missing):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
