"""Asking a person before a write is sent (``--writes ask``): the terminal's approver.

``task_writes`` gives a task (a solve, a session) its write policy and ledger.

The question goes to the controlling terminal (``/dev/tty``), not to stdout or stdin: ``--json``
output stays one document, and a program fed on stdin does not answer for the person. With no
terminal (a CI job, a service, a notebook kernel) there is no one to ask: ``terminal_approver``
returns None and every write is refused, saying so. Questions are asked one at a time
(``sandbox.gateway.writes.policy`` serialises them), and the time a person takes does not count against
the program's deadline.
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace

from sandbox.api import Toolset
from sandbox.execute import WritesArg
from sandbox.gateway.writes.ledger import WriteLedger
from sandbox.gateway.writes.policy import Approver, WritePolicy, WriteRequest, Writes

__all__ = ["terminal_approver", "task_writes", "TTY"]

#: The terminal asked (a setting for tests that drive a pseudo-terminal).
TTY = "/dev/tty"
_YES = frozenset({"y", "yes"})


def terminal_approver(path: str | None = None) -> Approver | None:
    """An approver that asks at the terminal, or None when there is no terminal to ask."""
    tty = path or TTY
    try:
        fd = os.open(tty, os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return None
    os.close(fd)
    count = [0]
    lock = threading.Lock()

    def ask(request: WriteRequest) -> bool:
        with lock:
            count[0] += 1
            number = count[0]
        try:
            with open(tty, "r+b", buffering=0) as term:
                why = f" ({request.reason})" if request.reason else ""
                term.write(f"\natc: write #{number} of this task wants to be sent{why}:\n  {request.describe()}\n"
                           "send it? [y/N] ".encode())
                answer = term.readline().decode(errors="replace").strip().lower()
        except OSError:
            return False  # the terminal went away: nobody said yes
        return answer in _YES

    return ask


def task_writes(toolset: Toolset, writes: WritesArg = None, approve: Approver | None = None) -> Toolset:
    """``toolset`` with the write policy and ledger of ONE task: ``writes`` a ``Writes`` (the
    caller's: kept), a mode (a new ledger), or None (the toolset's own ``Writes`` when it has one,
    else ``allow`` with a new ledger). ``ask`` without ``approve`` asks the person at the
    terminal, when there is one (``atc.approval``)."""
    if isinstance(writes, Writes):
        chosen = writes
        if approve is not None:
            chosen = Writes(WritePolicy(writes.policy.mode, approve, writes.policy.guard), writes.ledger)
    elif writes is None and approve is None and toolset.writes is not None:
        return toolset
    else:
        mode = writes or (toolset.writes.policy.mode if toolset.writes is not None else "allow")
        guard = toolset.writes.policy.guard if toolset.writes is not None else None
        chosen = Writes(WritePolicy(mode, approve, guard), WriteLedger())
    if chosen.policy.mode == "ask" and chosen.policy.approve is None:
        chosen = Writes(WritePolicy("ask", terminal_approver(), chosen.policy.guard), chosen.ledger)
    return replace(toolset, writes=chosen)
