"""``atc solve "QUERY" --tools T [RUN OPTIONS] [--strategy NAME] [--model M] [--max-reflections N] [--json]``.

Progress goes to stderr (one line per step: chain's attempts say what failed, where, which tool
was blamed; react's and codeact's turns and dfsdt's nodes say what was called and how it went),
the answer to stdout (with ``--answer-schema FILE``, the typed value as one JSON line). Exit 0 when solved, 1 when not, 2 for bad input or missing configuration.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from atc.cli.common import (
    add_answer_option,
    add_budget_options,
    add_run_options,
    answer_from_args,
    budget_from_args,
    limits_from_args,
    print_json,
    recording_from_args,
    strategy_from_args,
    toolset_from_args,
)
from atc.cli.writes import report_ledger, writes_from_args
from atc.errors import UsageError

__all__ = ["register"]


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "solve",
        parents=parents,
        help="the main job: a model writes a program that chains the tools, the sandbox runs it",
        description="A model writes one Python program that chains the tools' API calls; the sandbox runs it; "
        "when it fails, the error is traced to the tool at fault and the model repairs the program.",
    )
    p.add_argument("query", metavar="QUERY", help="the task, in natural language")
    add_run_options(p)
    p.add_argument("--strategy", "-s", metavar="NAME", default=None,
                   help="how the model solves it: chain (default: one program, attributable reflection), "
                        "chain-plain, react, codeact, dfsdt, or an installed plug-in")
    add_budget_options(p)
    add_answer_option(p)
    p.add_argument("--model", "-m", help="model name (default: $ATC_MODEL)")
    p.add_argument("--max-reflections", type=int, default=3, metavar="N",
                   help="repairs after the first attempt (3)")
    p.add_argument("--top-k", type=int, default=None, metavar="K",
                   help="tools shown to the model when the collections hold more (20)")
    p.add_argument("--retriever", metavar="NAME", default=None,
                   help="how the tools shown are chosen: bm25, dense, hybrid, reinvoke, anytool (default: hybrid "
                        "when embeddings are available, else bm25; only when the tools outnumber --top-k)")
    p.set_defaults(handler=_handle)


#: What a step of a strategy is called in messages ("not solved after 3 turns").
def _progress(step: Any) -> None:
    sys.stderr.write(f"{step.kind} {step.number}: {step.summary}\n")
    sys.stderr.flush()


def _handle(args: argparse.Namespace) -> int:
    if args.max_reflections < 0:
        raise UsageError("--max-reflections must be 0 or more")
    if args.top_k is not None and args.top_k < 1:
        raise UsageError("--top-k must be at least 1")
    if not args.query.strip():
        raise UsageError("the task is empty", hint='example: atc solve "Which books did Lem write?" --tools spec.json')
    limits = limits_from_args(args)
    budgets = budget_from_args(args)
    answer = answer_from_args(args)
    toolset = toolset_from_args(args)
    recording = recording_from_args(args)
    client = None
    if recording is not None:
        toolset = recording.wrap_toolset(toolset)
        client = recording.wrap_client(None, args.model)
    writes = writes_from_args(args)
    try:
        solution = _solve(args, toolset, client, limits, budgets, writes, answer)
    except KeyboardInterrupt:
        report_ledger(writes, [], interrupted=True)
        raise
    missing = len(recording.missing) if recording is not None else 0
    if args.json:
        print_json({**solution.to_dict(), **({"unrecorded": missing} if missing else {})})
        return 0 if solution.ok else 1
    if missing:
        sys.stderr.write(f"atc: {missing} request(s) had no recorded answer in {args.replay}\n")
    if solution.ok and answer is not None:  # the typed value is the answer; what was printed, notes
        from atc.loop.answers import json_value

        print_json(json_value(solution.value))
        report_ledger(writes, solution.calls)
        return 0
    if solution.ok:
        sys.stdout.write(solution.answer if solution.answer.endswith("\n") else solution.answer + "\n")
        sys.stdout.flush()
        report_ledger(writes, solution.calls)
        return 0
    err = solution.error or {}
    tries, word = solution.steps, solution.step_unit
    by = f" by {solution.strategy}" if solution.strategy != "chain" else ""
    sys.stderr.write(f"atc: not solved after {tries} {word}{'s' if tries != 1 else ''}{by}: "
                     f"{err.get('type', 'Error')}: {' '.join(str(err.get('message') or '').split())[:300]}\n")
    if solution.program and solution.attempts:
        sys.stderr.write("  the last program is in the --json output ('program')\n")
    elif solution.trace:
        sys.stderr.write("  every step is in the --json output ('trace')\n")
    report_ledger(writes, solution.calls)
    return 1


def _solve(args: argparse.Namespace, toolset: Any, client: Any, limits: Any, budgets: dict[str, int | None],
           writes: Any, answer: Any) -> Any:
    from atc.loop.solving import solve

    return solve(
        args.query,
        toolset,
        client=client,
        model=args.model,
        max_reflections=args.max_reflections,
        limits=limits,
        sandbox=args.sandbox,
        top_k=args.top_k,
        retriever=args.retriever,
        strategy=strategy_from_args(args),
        on_step=None if args.json else _progress,
        max_model_calls=budgets["max_model_calls"],
        max_tokens=budgets["max_tokens"],
        max_steps=budgets["max_steps"],
        writes=writes,
        answer=answer,
    )
