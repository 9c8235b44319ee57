"""``--writes allow|deny|ask`` and ``--ledger FILE`` on the commands that act on APIs, and the list
of writes a text output ends with (on stderr), unknown outcomes named plainly."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.api import ToolCall
    from sandbox.gateway.writes.policy import Writes

__all__ = ["add_write_options", "writes_from_args", "report_calls", "report_ledger", "report_lines"]

#: Lines of the write list before it says how many more there are.
_SHOWN = 12


def add_write_options(p: argparse.ArgumentParser, *, ledger: bool = True) -> None:
    p.add_argument("--writes", choices=("allow", "deny", "ask"), default="allow",
                   help="writes (any call that may change data: POST/PUT/PATCH/DELETE, MCP tools not read-only): "
                        "allow (default), deny (a read-only run: refused before they are sent), ask (confirm "
                        "each at the terminal; refused when there is none). See docs/writes.md")
    if ledger:
        p.add_argument("--ledger", metavar="FILE", default=None,
                       help="keep the task's write ledger in FILE: running the same task again with the same "
                            "FILE does not send a write it already made (one task per FILE)")


def writes_from_args(args: argparse.Namespace) -> Writes:
    """The policy and ledger of the command's one task (``ask``: the terminal's approver)."""
    from atc.approval import terminal_approver
    from sandbox.gateway.writes.ledger import LedgerFile, WriteLedger
    from sandbox.gateway.writes.policy import WritePolicy, Writes

    mode = getattr(args, "writes", None) or "allow"
    path = getattr(args, "ledger", None)
    ledger = LedgerFile(path).ledger("task") if path else WriteLedger()
    if path and ledger.entries:
        sys.stderr.write(f"atc: {len(ledger.entries)} write(s) of this task are in {path}: identical ones are "
                         "not sent again\n")
    return Writes(WritePolicy(mode, terminal_approver() if mode == "ask" else None), ledger)


def report_lines(calls: Iterable[ToolCall]) -> list[str]:
    """One line per write call: its outcome, the call and what came of it."""
    from sandbox.gateway.writes.ledger import canonical, created_ids

    lines = []
    for call in calls:
        if not call.write:
            continue
        args = canonical(call.args)
        args = args if len(args) <= 120 else args[:117] + "..."
        text = f"  {call.outcome or '?':<8} {call.tool}({args})"
        if call.outcome == "unknown":
            text += ": sent, no answer came: it MAY HAVE BEEN APPLIED; check before writing again"
        elif call.outcome == "replayed":
            text += ": not sent again (an identical write was already made in this task)"
        elif call.outcome in ("refused", "failed") and call.error:
            text += f": {' '.join(call.error.split())[:160]}"
        elif call.status is not None:
            text += f" -> HTTP {call.status}"
            ids = created_ids(call.response, call.args) if call.outcome == "done" else {}
            if ids:
                text += " created " + ", ".join(f"{k}={v}" for k, v in ids.items())
        lines.append(text)
    return lines


def _head(counts: dict[str, int]) -> str:
    order = ("done", "failed", "unknown", "replayed", "refused")
    parts = [f"{counts[k]} {k}" for k in order if counts.get(k)]
    return ", ".join(parts)


def report_calls(calls: list[ToolCall], out: Any = None) -> None:
    """The writes of one run, on stderr (nothing when it made none)."""
    lines = report_lines(calls)
    if not lines:
        return
    counts: dict[str, int] = {}
    for call in calls:
        if call.write:
            counts[str(call.outcome)] = counts.get(str(call.outcome), 0) + 1
    _write(out, counts, lines)


def report_ledger(writes: Writes, calls: list[ToolCall], out: Any = None, *, interrupted: bool = False) -> None:
    """The writes of a task (every attempt): what its ledger holds, plus the calls that were not
    sent (replayed, refused). After Ctrl-C, what was in flight is ``unknown``."""
    ledger = writes.ledger
    entries = ledger.writes() if ledger is not None else []
    unsent = [c for c in calls if c.write and c.outcome in ("replayed", "refused")]
    if not entries and not unsent:
        return
    counts: dict[str, int] = {}
    lines = []
    for e in entries:
        counts[e.outcome] = counts.get(e.outcome, 0) + 1
        line = "  " + e.line()
        if e.outcome == "unknown":
            line += ": check before writing again"
        lines.append(line)
    for c in unsent:
        counts[str(c.outcome)] = counts.get(str(c.outcome), 0) + 1
    lines += report_lines(unsent)
    _write(out, counts, lines, interrupted=interrupted)


def _write(out: Any, counts: dict[str, int], lines: list[str], *, interrupted: bool = False) -> None:
    stream = out or sys.stderr
    when = " before it was interrupted" if interrupted else ""
    stream.write(f"atc: writes{when}: {_head(counts)}\n")
    for line in lines[:_SHOWN]:
        stream.write(line + "\n")
    if len(lines) > _SHOWN:
        stream.write(f"  ... and {len(lines) - _SHOWN} more (all of them: --json)\n")
    if counts.get("unknown"):
        stream.write(f"atc: {counts['unknown']} write(s) have an UNKNOWN outcome: they were sent and no answer "
                     "came; check the API before running the task again\n")
    stream.flush()
