"""``atc run PROGRAM.py --tools T``: execute a given program against the tools, no model involved.

Human output is the program's answer, then (on failure) a short error block: type, message, the
line and its code, and the tool the failure is attributed to. ``--json`` prints the
``ExecutionResult`` of interface.md. Exit 0 when the program ran fine, 1 when it failed, 2 for
bad input (unreadable program, bad spec, bad flags).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from atc.cli.common import (
    add_answer_option,
    add_run_options,
    answer_from_args,
    limits_from_args,
    print_json,
    recording_from_args,
    toolset_from_args,
)
from atc.cli.writes import report_calls, report_ledger, writes_from_args
from atc.errors import UsageError

__all__ = ["register", "format_error"]


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "run", parents=parents, help="execute a program against the tools (no model)",
        description="Run PROGRAM.py in the sandbox. Every tool of the collections in play is a global "
        "function called with keyword arguments; the program's answer is what it prints.")
    p.add_argument("program", metavar="PROGRAM.py", help="the Python program to run ('-' reads stdin)")
    add_run_options(p)
    add_answer_option(p)
    p.set_defaults(handler=_run)


def _read_program(path: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        return Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"cannot read program {path}: {reason}",
                         hint="give the path of a UTF-8 Python file") from exc


def format_error(result: Any) -> str:
    """The short human error block of a failed run."""
    e = result.error
    if e is None:
        return ""
    lines = [f"error: {e.type}: {e.message}"]
    if e.line is not None:
        lines.append(f"  at line {e.line}: {e.code}" if e.code else f"  at line {e.line}")
    if e.tool:
        lines.append(f"  blamed tool: {e.tool}")
    reason = (e.attribution or {}).get("reason")
    if reason:
        lines.append(f"  why: {reason}")
    return "\n".join(lines) + "\n"


def _run(args: argparse.Namespace) -> int:
    from sandbox.execute import prepare, run

    program = _read_program(args.program)
    limits = limits_from_args(args)
    answer = answer_from_args(args)
    # One program: a sandbox of its own starts exactly one runner, while the tools are loaded.
    pending = prepare(args.sandbox, limits, one_shot=True)
    toolset = toolset_from_args(args)
    recording = recording_from_args(args)
    if recording is not None:
        toolset = recording.wrap_toolset(toolset)
    from atc import tracing

    writes = writes_from_args(args)
    with tracing.span("atc.sandbox.run", {"atc.sandbox": args.sandbox}) as current:
        try:
            result = run(program, tracing.wrap_toolset(toolset), limits, sandbox=pending.backend(), writes=writes)
        except KeyboardInterrupt:
            report_ledger(writes, [], interrupted=True)
            raise
        if answer is not None:
            from atc.loop.answers import judge_result

            result, _ = judge_result(result, answer)
        tracing.set_attributes(current, {"atc.status": "ok" if result.ok else "failed",
                                         "atc.attributed_tool": result.error.tool if result.error else None})
    missing = len(recording.missing) if recording is not None else 0
    from sandbox.gateway.http.credentials import auth_hint

    hint = auth_hint(toolset, result.calls)
    if args.json:
        print_json({**result.to_dict(), **({"unrecorded": missing} if missing else {}),
                    **({"hint": hint} if hint else {})})
    else:
        sys.stdout.write(result.answer)
        if result.answer and not result.answer.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
        if result.stderr:
            sys.stderr.write(result.stderr if result.stderr.endswith("\n") else result.stderr + "\n")
        if not result.ok:
            sys.stderr.write(format_error(result))
        if hint:
            sys.stderr.write(f"  hint: {hint}\n")
        report_calls(result.calls)
    return 0 if result.ok else 1
