"""What ``atc eval`` costs around the solves it runs, and each strategy's row, with scripted models.

All 100 RestBench TMDB tasks (the public data, read from ``../shared/bench-data``), against
``atc mock`` of the TMDB spec on 127.0.0.1, each task shown its 20 candidates, the local sandbox,
8 tasks at a time. The model is the scripted OpenAI-compatible server of tests/support/fakes playing an
oracle that writes each task's gold chain as a program (answering after ``--latency`` seconds);
the judge, when there is one, is another scripted server.

Rows, measured in the same run:

1. the baseline: ``solve_many`` over the same 100 queries, tools, candidates and concurrency, no
   evaluation around it;
2. ``evaluate()`` (what ``atc eval`` runs): the same solves through the batch runner into a run
   file (one fsynced line per task), then scoring, ``results.jsonl``, ``summary.json``/``.md``;
   ratio to row 1; and the chart drawn on its own (matplotlib's import included);
3. the same directory scored again, chart included (nothing runs: resume finds every task done);
4. judging: the 100 answers labelled by a scripted judge (``--judge-latency``) over the finished
   directory, 3 votes each (ToolEval's phase 1 only: the judge is sure), and then again with every
   verdict kept;
5. one row per strategy (``chain``, ``chain-plain``, ``react``, ``react-text``, ``codeact``,
   ``dfsdt``, ``dfsdt@3``; the oracle speaks each one's protocol: a program, function calls, the
   text protocol, snippets), all in one ``evaluate``: model turns, tokens, API calls, steps and
   wall time per task, Path%, Prec%, tokens against ``chain``'s, and each strategy's batch wall
   clock.

This measures mechanics -- what the harness and each strategy spend around a model that never
errs -- not quality, which needs a real model (docs/evaluation.md).

    .venv/bin/python benchmarks/bench_eval.py [--tasks N] [--latency S] [--judge-latency S] [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from atc.evaluation import JudgeOptions, RunSettings, evaluate, load_suite  # noqa: E402
from atc.evaluation.execution import CandidateRetriever, resolve_tools  # noqa: E402
from atc.evaluation.mockhub import MockHub  # noqa: E402
from atc.evaluation.report import chart  # noqa: E402
from atc.llm.client import make_client  # noqa: E402
from atc.loop.strategies import registered  # noqa: E402
from atc.workflows.many import solve_many  # noqa: E402
from sandbox.api import Limits  # noqa: E402
from tests.support.fakes.gold_model import GoldModel, every_protocol, gold_tools, protocol_of  # noqa: E402
from tests.support.fakes.openai_server import ScriptedOpenAI  # noqa: E402

DATA = next((p / "shared" / "bench-data" for p in ROOT.parents if (p / "shared" / "bench-data").is_dir()), None)
CONCURRENCY = 8
STRATEGIES = ["chain", "chain-plain", "react", "react-text", "codeact", "dfsdt", "dfsdt@3"]


def timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def judge_router(body: dict[str, Any]) -> str:
    return json.dumps({"label": "solved", "reason": "scripted"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds each model answer takes (0)")
    ap.add_argument("--judge-latency", type=float, default=0.0, help="seconds each judge answer takes (0)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of rows 1 and 2, interleaved; medians (3)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if DATA is None:
        sys.exit("bench_eval: the public benchmark data (../shared/bench-data) is not there")
    os.environ.setdefault("ATC_SEARCH_SERVER", "off")
    suite = load_suite(f"restbench-tmdb:{DATA}").head(args.tasks)
    n = len(suite.tasks)
    oracle = GoldModel([t.query for t in suite.tasks], [gold_tools(t.solution, suite.collections) for t in suite.tasks])
    limits = Limits(timeout=30)
    rows: dict[str, Any] = {}
    with ScriptedOpenAI(router=oracle, delay=args.latency) as model, \
            ScriptedOpenAI(router=judge_router, delay=args.judge_latency) as judging, \
            tempfile.TemporaryDirectory() as tmp:
        client = make_client("oracle", base_url=model.base_url)
        toolset = suite.toolset()
        # warm-up: the sandbox backend, the model client, the mock (not timed)
        evaluate(suite.head(4), RunSettings(client=client, sandbox="local", concurrency=CONCURRENCY, limits=limits),
                 toolset=toolset, out=Path(tmp) / "warm", chart=False)

        with MockHub(toolset.collections) as hub:
            import dataclasses

            mocked = dataclasses.replace(toolset, base_urls=hub.base_urls)
            candidates = CandidateRetriever({t.query: resolve_tools(t.tools, mocked)[0] for t in suite.tasks})

            def baseline() -> Any:
                return solve_many([t.query for t in suite.tasks], mocked, concurrency=CONCURRENCY, client=client,
                                  sandbox="local", limits=limits, retriever=candidates)

            settings = RunSettings(client=client, sandbox="local", concurrency=CONCURRENCY, limits=limits)
            bases, walls = [], []
            for round_ in range(args.repeat):  # interleaved, so that the machine's load falls on both alike
                base_s, solutions = timed(baseline)
                assert all(s.ok for s in solutions), [s.error for s in solutions if not s.ok][:3]
                out = Path(tmp) / f"eval-{round_}"
                wall_s, result = timed(lambda out=out: evaluate(suite, settings, toolset=toolset, out=out, chart=False))
                bases.append(base_s)
                walls.append(wall_s)
        base, wall = statistics.median(bases), statistics.median(walls)
        chain = result.summaries["chain"]
        rows["solve_many (baseline)"] = {"wall_s": base, "per_task_ms": 1000 * base / n, "x_baseline": 1.0}
        rows["atc eval: run + score + outputs, no chart"] = {"wall_s": wall, "per_task_ms": 1000 * wall / n,
                                                            "x_baseline": wall / base}
        drawn, _ = timed(lambda: chart(result, Path(tmp) / "chart.png"))
        rows["the chart (matplotlib imported once per process)"] = {"wall_s": drawn, "per_task_ms": 1000 * drawn / n,
                                                                    "x_baseline": drawn / base}
        again, _ = timed(lambda: evaluate(suite, settings, toolset=toolset, out=out))
        rows["atc eval: scored again (nothing runs)"] = {"wall_s": again, "per_task_ms": 1000 * again / n,
                                                         "x_baseline": again / base}
        judge = JudgeOptions(client=make_client("judge", base_url=judging.base_url), votes=3)
        judged, with_judge = timed(lambda: evaluate(suite, settings, toolset=toolset, out=out, judge=judge))
        rows[f"atc eval: judged ({n} tasks, 3 votes each)"] = {"wall_s": judged, "per_task_ms": 1000 * judged / n,
                                                                "x_baseline": judged / base}
        cached, _ = timed(lambda: evaluate(suite, settings, toolset=toolset, out=out, judge=judge))
        rows["atc eval: judged again (verdicts kept)"] = {"wall_s": cached, "per_task_ms": 1000 * cached / n,
                                                          "x_baseline": cached / base}
        assert with_judge.summaries["chain"].success == 1.0 and len(judging.requests) == 3 * n, len(judging.requests)
        requests = len(model.requests)
        # every strategy, side by side, the oracle speaking each one's protocol
        model.router = every_protocol(oracle)
        names = [name for name in STRATEGIES if name.split("@")[0] in registered()]
        first = len(model.requests)
        side = evaluate(suite, RunSettings(strategies=names, client=client, sandbox="local", concurrency=CONCURRENCY,
                                           limits=limits), toolset=toolset, out=Path(tmp) / "side", chart=False)
        # the scripted server counts message text only; a real server also counts the function
        # schemas sent with every function-calling turn (react, dfsdt): estimated the same way
        # (a mean per request of each protocol, times a strategy's model turns: dfsdt and dfsdt@3
        # speak the same protocol, so their requests cannot be told apart)
        schemas: dict[str, list[int]] = {}
        for body in model.requests[first:]:
            schemas.setdefault(protocol_of(body), []).append(len(json.dumps(body.get("tools") or [])) // 4
                                                             if body.get("tools") else 0)
    strategies = {}
    for name in names:
        summary = side.summaries[name]
        per = summary.per_task()
        assert summary.failed == 0 and summary.path == 1.0, (name, summary.to_dict())
        sent = schemas.get(name.split("@")[0], [0])
        with_schemas = per["prompt_tokens"] + per["model_calls"] * sum(sent) / max(1, len(sent))
        strategies[name] = {"tasks": summary.tasks, "path": summary.path, "precision": summary.precision,
                            "model_calls": per["model_calls"], "http_requests": per["http_requests"],
                            "requested_calls": per["requested_calls"], "prompt_tokens": per["prompt_tokens"],
                            "prompt_tokens_with_schemas": with_schemas,
                            "completion_tokens": per["completion_tokens"], "api_calls": per["api_calls"],
                            "steps": per["steps"], "wall_s": per["wall_s"],
                            "tokens_x_chain": (with_schemas + per["completion_tokens"])
                            / max(1.0, chain.per_task()["prompt_tokens"] + chain.per_task()["completion_tokens"]),
                            "batch_wall_s": side.wall_s.get(name, 0.0)}
    doc = {"tasks": n, "latency_s": args.latency, "concurrency": CONCURRENCY, "model_requests": requests,
           "harness": rows, "strategies": strategies}
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    print(f"RestBench TMDB, {n} tasks, model latency {args.latency * 1000:.0f} ms, concurrency {CONCURRENCY}\n")
    print("| row | wall s | ms per task | x baseline |\n|---|---:|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['wall_s']:.2f} | {r['per_task_ms']:.1f} | {r['x_baseline']:.2f} |")
    print("\n| strategy | Path% | Prec% | model turns | HTTP requests | prompt tokens | + function schemas "
          "| completion tokens | API calls | requested calls | steps | wall s | tokens x chain | batch wall s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, s in strategies.items():
        print(f"| {name} | {100 * s['path']:.1f} | {100 * s['precision']:.1f} | {s['model_calls']:.2f} "
              f"| {s['http_requests']:.2f} "
              f"| {s['prompt_tokens']:.0f} | {s['prompt_tokens_with_schemas']:.0f} | {s['completion_tokens']:.0f} "
              f"| {s['api_calls']:.2f} | {s['requested_calls']:.2f} | {s['steps']:.2f} "
              f"| {s['wall_s']:.3f} | {s['tokens_x_chain']:.2f} | {s['batch_wall_s']:.2f} |")


if __name__ == "__main__":
    main()
