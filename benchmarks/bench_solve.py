"""What one solve attempt costs, on the RestBench TMDB tasks.

1. Prompt size. For each of the 100 TMDB tasks, 20 candidate tools (the task's gold tools plus
   random others, fixed seed, as in the ATC paper): the characters and estimated tokens of atc's
   generation prompt (system rules + compact protocols + task) against the SAME prompt built with
   the raw OpenAPI of the same 20 operations (operation objects with path-level parameters merged
   and every ``$ref`` resolved, as a model would otherwise be shown them). Tokens are estimated
   twice: characters / 4, and a regex count of words and punctuation marks.
2. Sandbox time per attempt. For each task a generated-like program (the gold tool chain, ids taken
   from the previous response, ``ToolError`` caught) runs in the LOCAL sandbox against ``atc mock``
   of the TMDB spec on 127.0.0.1. Baselines from the same run: starting ``python3 -I -S -c pass``,
   and making the same HTTP requests directly with httpx in this process.

    .venv/bin/python benchmarks/bench_solve.py [--tasks N]

No model is called: this measures what atc puts around the model, not the model.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from atc import prompts  # noqa: E402
from protocols import load_spec  # noqa: E402
from protocols.model import Tool  # noqa: E402
from protocols.render import render_compact  # noqa: E402

DATA = ROOT.parent / "shared" / "bench-data" / "restbench"
SPEC = DATA / "specs" / "tmdb_oas.json"
TASKS = DATA / "datasets" / "tmdb.json"
CANDIDATES = 20
SEED = 0
_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> tuple[float, int]:
    return len(text) / 4, len(_TOKEN.findall(text))


def resolve(node: Any, doc: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """``node`` with local ``$ref``s replaced by their targets (a recursive one is cut)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            if ref in seen:
                return {"type": "object", "description": f"(recursive: {ref.rsplit('/', 1)[-1]})"}
            target: Any = doc
            for part in ref[2:].split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            return resolve(target, doc, (*seen, ref))
        return {k: resolve(v, doc, seen) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve(v, doc, seen) for v in node]
    return node


def raw_operation(doc: dict[str, Any], tool: Tool) -> dict[str, Any]:
    item = doc["paths"][tool.path]
    op = dict(item[tool.method.lower()])
    op["parameters"] = list(item.get("parameters", [])) + list(op.get("parameters", []))
    return {"method": tool.method, "path": tool.path, **resolve(op, doc)}


def generation_prompt(task: str, tools_text: str) -> str:
    return prompts.render("system") + "\n" + prompts.render("generate", tools=tools_text, task=task)


def gold_tools(solution: list[str], by_route: dict[tuple[str, str], Tool]) -> list[Tool]:
    out = []
    for step in solution:
        method, _, path = step.strip().partition(" ")
        tool = by_route.get((method.upper(), path.strip()))
        if tool is not None:  # the documented typo /person/{movie_id}/movie_credits maps to nothing
            out.append(tool)
    return out


def candidates(gold: list[Tool], everything: list[Tool], rng: random.Random) -> list[Tool]:
    chosen = {t.name: t for t in gold}
    others = [t for t in everything if t.name not in chosen]
    for t in rng.sample(others, CANDIDATES - len(chosen)):
        chosen[t.name] = t
    picked = list(chosen.values())
    rng.shuffle(picked)
    return picked


def _arg_value(name: str, schema: dict[str, Any], task: str) -> str:
    if name.endswith("_id") or name == "id":
        return "ident"
    if name == "query":
        return repr(" ".join(task.split()[-3:]).strip("?.!"))
    kind = schema.get("type")
    return {"integer": "1", "number": "1.0", "boolean": "True"}.get(str(kind), repr("x"))


def program_for(task: str, chain: list[Tool]) -> str:
    """A program shaped like what a model writes for this task: the gold chain, each call's id
    taken from the previous response, failures caught, a short answer printed."""
    lines = [
        "def first_id(data):",
        "    if isinstance(data, dict):",
        "        if isinstance(data.get('id'), int):",
        "            return data['id']",
        "        for value in data.values():",
        "            found = first_id(value)",
        "            if found is not None:",
        "                return found",
        "    if isinstance(data, list):",
        "        for value in data[:5]:",
        "            found = first_id(value)",
        "            if found is not None:",
        "                return found",
        "    return None",
        "ident = 1",
        "summary = []",
    ]
    for tool in chain:
        args = ", ".join(f"{p}={_arg_value(p, s, task)}" for p, s in tool.properties.items() if p in tool.required)
        lines += [
            "try:",
            f"    data = {tool.name}({args})",
            "    ident = first_id(data) or ident",
            f"    summary.append(('{tool.name}', len(data) if hasattr(data, '__len__') else 1))",
            "except ToolError as exc:",
            f"    summary.append(('{tool.name}', str(exc)[:40]))",
        ]
    lines.append("print(summary)")
    return "\n".join(lines) + "\n"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    args = parser.parse_args()
    doc = json.loads(SPEC.read_text())
    collection = load_spec(SPEC)
    everything = collection.tools
    by_route = {(t.method.upper(), t.path): t for t in everything}
    tasks = json.loads(TASKS.read_text())[: args.tasks]
    rng = random.Random(SEED)

    # -- 1. prompt size ----------------------------------------------------------------------
    atc_chars, raw_chars, atc_tok, raw_tok, atc_rx, raw_rx = [], [], [], [], [], []
    chains: list[tuple[str, list[Tool]]] = []
    missing_params = 0
    for task in tasks:
        gold = gold_tools(task["solution"], by_route)
        shown = candidates(gold, everything, rng)
        compact = render_compact(shown)
        missing_params += sum(1 for t in shown for p in t.properties if p not in compact)
        raw = json.dumps([raw_operation(doc, t) for t in shown])
        ours, theirs = generation_prompt(task["query"], compact), generation_prompt(task["query"], raw)
        atc_chars.append(len(ours))
        raw_chars.append(len(theirs))
        for text, est, rx in ((ours, atc_tok, atc_rx), (theirs, raw_tok, raw_rx)):
            e, r = tokens(text)
            est.append(e)
            rx.append(r)
        chains.append((task["query"], gold))

    n = len(tasks)
    print(f"TMDB tasks: {n}, {CANDIDATES} candidate tools each (gold + random, seed {SEED})")
    print("generation prompt per task      atc (compact)      raw OpenAPI        atc / raw")
    for label, a, r in (("characters, mean", atc_chars, raw_chars), ("tokens (chars/4), mean", atc_tok, raw_tok),
                        ("tokens (regex), mean", atc_rx, raw_rx)):
        print(f"  {label:<28} {statistics.mean(a):>12,.0f} {statistics.mean(r):>16,.0f} {statistics.mean(a) / statistics.mean(r):>14.1%}")
    print(f"  characters, max              {max(atc_chars):>12,} {max(raw_chars):>16,}")
    print(f"  parameter names missing from the compact rendering: {missing_params}")

    # -- 2. sandbox time per attempt ---------------------------------------------------------
    import httpx

    from atc.loop.checks import check_program
    from atc.loop.extract import extract_program
    from atc.loop.reflection import feedback
    from atc.mock import MockServer
    from sandbox.api import Limits, Toolset
    from sandbox.local.backend import LocalBackend

    starts = []
    for _ in range(20):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
        starts.append((time.perf_counter() - t0) * 1000)

    with MockServer(collection) as mock, LocalBackend() as backend:
        toolset = Toolset([collection], base_url=mock.url)
        limits = Limits(timeout=30)
        backend.warm_up(limits)
        time.sleep(0.5)
        walls, inside, call_counts, failed_calls, direct, host = [], [], [], [], [], []
        with httpx.Client() as client:
            for query, chain in chains:
                program = program_for(query, chain)
                t0 = time.perf_counter()
                result = backend.run(program, toolset, limits)
                walls.append((time.perf_counter() - t0) * 1000)
                inside.append(result.duration_ms)
                if not result.ok:
                    print(f"  run failed: {result.error.type if result.error else '?'}: "
                          f"{result.error.message if result.error else ''}"[:200])
                # host-side work of one attempt around the model and the sandbox
                t0 = time.perf_counter()
                extracted = extract_program(f"Here it is:\n```python\n{program}```\n", toolset.names())
                assert extracted is not None and check_program(extracted, toolset.tools) is None
                if chain:
                    feedback(1, extracted, {"type": "KeyError", "message": "'results'", "line": 17,
                                            "tool": chain[0].name, "traceback": ""},
                             blamed=chain[0], reason="bench", result=result)
                host.append((time.perf_counter() - t0) * 1000)
                call_counts.append(len(result.calls))
                failed_calls.append(sum(1 for c in result.calls if not c.ok))
                # baseline: the same requests, made directly
                t0 = time.perf_counter()
                for call in result.calls:
                    path = call.path
                    params = {}
                    for name, value in call.args.items():
                        binding = collection.tool(call.tool).bindings.get(name)  # type: ignore[union-attr]
                        if binding and binding.location == "path":
                            path = path.replace("{" + binding.name + "}", str(value))
                        elif binding:
                            params[binding.name] = value
                    client.request(call.method, mock.url + path, params=params)
                direct.append((time.perf_counter() - t0) * 1000)

    print(f"\nsandbox run per attempt (local backend, atc mock of TMDB on 127.0.0.1, {len(walls)} programs)")
    print(f"  tool calls per program: mean {statistics.mean(call_counts):.2f}, failed calls {sum(failed_calls)}")
    print("                                   p50 ms     p95 ms")
    print(f"  sandbox run (wall)            {pct(walls, .5):>9.1f} {pct(walls, .95):>10.1f}")
    print(f"  same requests, direct httpx   {pct(direct, .5):>9.1f} {pct(direct, .95):>10.1f}")
    print(f"  python3 -I -S -c pass         {pct(starts, .5):>9.1f} {pct(starts, .95):>10.1f}")
    print(f"  extract + check + reflection  {pct(host, .5):>9.1f} {pct(host, .95):>10.1f}")
    print(f"  sandbox / python start (p50)  {pct(walls, .5) / pct(starts, .5):>9.2f}x")
    print(f"  sandbox - direct (p50)        {pct(walls, .5) - pct(direct, .5):>9.1f} ms added per attempt")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
