"""``atc eval SUITE [--tools T] [--strategy S1,S2,...] [RUN OPTIONS] [--model M] [--judge-model J] [--out DIR] [--json]``.

Runs a benchmark suite with one or more strategies on the same tools and limits, and scores it:
Success% (a judge model, ToolEval's two phases and StableToolBench's votes; n/a without one),
Path%, Prec%, RestGPT's correct path and extra calls, the released code's exec success, model
turns, HTTP requests, tokens, API calls, steps, wall time, failures (``atc.evaluation``).
``--preset paper`` sets every strategy to the paper's setting; ``--set`` changes one setting. The table goes to stdout (with
``--json``: the summary document), progress to stderr. With ``--out DIR``: per-strategy run files
(resumable exactly like ``atc batch``), ``results.jsonl``, ``summary.json``, ``summary.md`` and
``chart.png``. Ctrl-C stops taking tasks; what finished is kept, and the same command resumes.

Exit 0: every task ran and was scored (judged, with a judge); 1: some were not (a judge that
failed, a model server that went away: run again to finish); 2: bad input; 130: interrupted.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any, TextIO

from atc.cli.common import (
    add_budget_options,
    add_run_options,
    budget_from_args,
    limits_from_args,
    print_json,
    stop_on_signals,
    toolset_from_args,
)
from atc.errors import UsageError

__all__ = ["register"]


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "eval", parents=parents, help="run a benchmark suite with one or more strategies and score it",
        description="Run a benchmark suite (a tasks JSONL with gold solutions, the built-in 'examples', or "
        "FORMAT:PATH of a public benchmark: restbench-tmdb, restbench-spotify, toolflow-examples (or -movie, -food, "
        "-weather), toolbench) with one or more strategies on the same tools and limits, and score "
        "Success% (with a judge), Path%, Prec% and the cost of each.")
    p.add_argument("suite", metavar="SUITE",
                   help="a tasks .jsonl, a suite.json, 'examples', or FORMAT:PATH (PATH defaults to $ATC_BENCH_DATA)")
    p.add_argument("--tools", "-t", action="append", default=None, metavar="T",
                   help="the collections (replace the suite's): a spec, an imported collection, an MCP server (repeatable)")
    add_run_options(p, tools_flag=False, ledger=False)
    p.add_argument("--strategy", "-s", default=None, metavar="S1,S2,...",
                   help="strategies to compare, comma-separated: chain (default), chain-plain, react, react-text, "
                        "codeact, dfsdt, or an installed plug-in; NAME@k reruns one up to k times until it answers "
                        "(react@3, dfsdt@3: the paper's @3 rows)")
    p.add_argument("--preset", choices=["default", "paper"], default=None,
                   help="every strategy's settings: default, or paper (the Chain-of-Tools paper's: chain's alpha = 3 "
                        "programs, ReAct and DFSDT as ToolBench's code runs them, CodeAct's 10 turns; without "
                        "--strategy it runs Table 1's rows: react,react@3,codeact,dfsdt,dfsdt@3,chain)")
    p.add_argument("--until", choices=["answer", "exec"], default="answer",
                   help="when NAME@k stops rerunning: a run that ends with an answer (ToolBench's CoT@n, default), or "
                        "one whose answer also does not read as an error (exec)")
    p.add_argument("--set", dest="changes", action="append", default=[], metavar="STRATEGY.KEY=VALUE",
                   help="change one setting of a strategy (dfsdt.max_nodes=30, react.format=text), or pick a named "
                        "profile (dfsdt=atc); repeatable; docs/strategies.md lists them")
    add_budget_options(p)
    p.add_argument("--model", "-m", help="model name (default: $ATC_MODEL)")
    p.add_argument("--judge-model", metavar="J", default=None,
                   help="the judge of Success%% (default: $ATC_JUDGE_MODEL; none: Success%% is n/a)")
    p.add_argument("--judge-votes", type=int, default=3, metavar="N",
                   help="judge votes per answer, each scored and averaged, StableToolBench's pass rate (3)")
    p.add_argument("--judge-format", choices=["auto", "function", "json"], default="auto",
                   help="how the judge gives its label: a forced function call, JSON text where the server takes "
                        "no functions (auto), only one, or only the other")
    p.add_argument("--rejudge", action="store_true", help="ask the judge again about answers it already judged")
    p.add_argument("--out", "-o", metavar="DIR", default=None,
                   help="write run files, results.jsonl, summary.json, summary.md and chart.png here (resumable)")
    p.add_argument("--api", choices=["mock", "real"], default=None,
                   help="reach the tools through atc mock of their specs, or the real API (default: the suite's; "
                        "real when --base-url is given)")
    p.add_argument("--concurrency", "-c", type=int, default=4, metavar="N", help="tasks at a time (4)")
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="where tasks run: local threads (default) or a Ray cluster (RAY_ADDRESS, else a local one)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="the first N tasks only")
    p.add_argument("--max-reflections", type=int, default=None, metavar="N",
                   help="chain's repairs after the first attempt (3; --preset paper: 2, alpha = 3 programs in all)")
    p.add_argument("--top-k", type=int, default=None, metavar="K",
                   help="tools shown to the model when a task has no candidates and the collections hold more (20)")
    p.add_argument("--retriever", metavar="NAME", default=None,
                   help="choose the tools shown with this retriever, even for tasks that have candidates")
    p.add_argument("--no-chart", action="store_true", help="write no chart.png")
    p.set_defaults(handler=_handle)


class _Progress:
    """One line on stderr (a terminal only): strategy, done/total, ok and failed."""

    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream, self.total = stream, total
        self.counts: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def __call__(self, strategy: str, index: int, outcome: Any) -> None:
        with self._lock:
            done = self.counts.setdefault(strategy, [0, 0])
            done[0 if outcome.ok else 1] += 1
            self.stream.write(f"\r{strategy}: {sum(done)} of {self.total} run  ok {done[0]}  failed {done[1]}   ")
            self.stream.flush()


def _changes(given: list[str]) -> dict[str, dict[str, str]]:
    """``--set`` values as changes per strategy: ``dfsdt.max_nodes=30``, ``dfsdt=atc`` (a profile)."""
    out: dict[str, dict[str, str]] = {}
    for item in given:
        key, sep, value = item.partition("=")
        name, dot, field = key.strip().partition(".")
        if not sep or not name or (dot and not field.strip()) or not value.strip():
            raise UsageError(f"--set {item!r}: give STRATEGY.KEY=VALUE (dfsdt.max_nodes=30) or STRATEGY=PROFILE "
                             "(dfsdt=atc)")
        out.setdefault(name, {})[field.strip() if dot else "profile"] = value.strip()
    return out


def _settings(args: argparse.Namespace) -> Any:
    from atc.config import ray_address
    from atc.evaluation import RunSettings

    strategies = [s.strip() for s in (args.strategy or "").split(",") if s.strip()]
    if args.strategy is not None and not strategies:
        raise UsageError("no strategy given", hint="--strategy chain,react,...")
    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit must be at least 1")
    if args.top_k is not None and args.top_k < 1:
        raise UsageError("--top-k must be at least 1")
    if args.base_url and args.api == "mock":
        raise UsageError("--base-url names the real API; it does not go with --api mock")
    api = args.api or ("real" if args.base_url else None)
    return RunSettings(strategies=strategies, model=args.model, limits=limits_from_args(args), sandbox=args.sandbox,
                       concurrency=args.concurrency, executor=args.executor, max_reflections=args.max_reflections,
                       top_k=args.top_k, retriever=args.retriever, record=args.record, replay=args.replay, api=api,
                       ray_address=ray_address(), preset=args.preset, changes=_changes(args.changes), until=args.until,
                       writes=args.writes,
                       solve_options={k: v for k, v in budget_from_args(args).items() if v is not None})


def _handle(args: argparse.Namespace) -> int:
    from atc.evaluation import JudgeOptions, evaluate, load_suite
    from atc.evaluation.report import markdown

    settings = _settings(args)
    settings.check()
    suite = load_suite(args.suite, tools=args.tools).head(args.limit)
    toolset = toolset_from_args(args, collections=suite.collections) if suite.collections else suite.toolset()
    judge = JudgeOptions(model=args.judge_model, votes=args.judge_votes, rejudge=args.rejudge,
                         structured=args.judge_format)
    progress = _Progress(sys.stderr, len(suite.tasks)) if sys.stderr.isatty() and not args.json else None
    stop = threading.Event()
    with stop_on_signals(stop, "\natc: stopping: no new tasks; waiting for the running ones to finish and be written "
                         "(Ctrl-C again to stop waiting)\n"):
        result = evaluate(suite, settings, toolset=toolset, judge=judge, out=args.out, chart=not args.no_chart,
                          stop=stop, on_outcome=progress)
    if progress is not None:
        sys.stderr.write("\n")
    if args.json:
        print_json(result.to_dict())
    else:
        sys.stdout.write(markdown(result))
    chartless = next((n for n in result.notes if n.startswith("no chart")), None)
    if chartless and not args.json:
        sys.stderr.write(f"atc: {chartless}\n")
    if args.out and not args.json:
        sys.stderr.write(f"atc: results in {args.out}: results.jsonl, summary.json, summary.md"
                         f"{'' if args.no_chart or chartless else ', chart.png'}, runs/\n")
    again = "run the same command again to " if args.out else "give --out DIR to keep results and "
    if result.interrupted:
        sys.stderr.write(f"atc: interrupted: {'the finished tasks are kept; ' if args.out else ''}{again}resume\n")
        return 130
    if not result.complete:
        sys.stderr.write(f"atc: the evaluation is not complete (see its notes); {again}finish it\n")
        return 1
    return 0
