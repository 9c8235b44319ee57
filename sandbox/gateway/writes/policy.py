"""The write policy: whether a write may be sent at all, asked of a person, or kept in a scope.

``--writes allow`` (the default) sends writes; ``deny`` refuses every write before it is sent
(the run is read-only: reads go through); ``ask`` shows each write to an approver (a person at a
terminal, an MCP client through elicitation, a Python callable) and sends it only on a yes. A
``guard`` (probing's scope) is asked about every write request, the planned one and every
redirect hop that would repeat it elsewhere, and refuses any that leaves the scope.

Time spent waiting for an approver does not count against the program's deadline: the gate
measures it and the run's deadline moves by as much (``Decision.waited``).

``Writes`` is what travels with a ``Toolset``: the policy and the task's ``WriteLedger``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocols.errors import UsageError
from sandbox.gateway.writes.ledger import WriteLedger, canonical

__all__ = ["WRITE_MODES", "WriteRequest", "Approver", "Guard", "WritePolicy", "Writes", "Decision", "NoApprover"]

WRITE_MODES = ("allow", "deny", "ask")


@dataclass(frozen=True)
class WriteRequest:
    """One write about to be sent, as an approver or a guard sees it. ``url`` is where it goes
    (scheme, host, path and query without the host's credentials; for an MCP tool, the server
    and tool); ``args`` are the program's arguments (they never hold the host's secrets: those are
    added later, on the host); ``hop`` is 0 for the planned request and n for the n-th redirect
    that would send it again; ``reason`` why it counts as a write. ``query`` is a redirect
    target's query string, the host's credentials taken out ("" for a planned request: its query
    values are in ``args``). ``marked_read``: a call marked read-only whose method could write (a
    ``POST .../filter``), asked about a redirect that would repeat it elsewhere (only a guard is
    asked: a marked read needs no approval)."""

    tool: str
    collection: str
    method: str
    path: str
    url: str
    args: dict[str, Any]
    reason: str = ""
    hop: int = 0
    query: str = ""
    marked_read: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "collection": self.collection, "method": self.method, "path": self.path,
                "url": self.url, "args": self.args, "reason": self.reason, "hop": self.hop, "query": self.query,
                "marked_read": self.marked_read}

    def describe(self) -> str:
        """The request in one or two lines: what a person is asked to confirm."""
        args = canonical(self.args)
        args = args if len(args) <= 400 else args[:397] + "..."
        where = f"redirected (hop {self.hop}) to " if self.hop else ""
        query = f"?{self.query}" if self.query else ""
        return f"{self.tool}: {self.method} {where}{self.url}{query}\n  arguments: {args}"


class NoApprover(Exception):
    """Raised by an approver that finds no one to ask (an MCP client without elicitation): the
    write is refused, and the message says why."""


#: An approver answers a write request: True sends it. It may block (a person deciding).
Approver = Callable[[WriteRequest], bool]
#: A guard returns why a write request must not be sent (None: it may).
Guard = Callable[[WriteRequest], "str | None"]


@dataclass(frozen=True)
class Decision:
    """What the policy said: ``refused`` is the reason (None: send it); ``waited`` the seconds an
    approver took (the run's deadline moves by as much)."""

    refused: str | None = None
    waited: float = 0.0


@dataclass(frozen=True)
class WritePolicy:
    """``mode`` is one of ``WRITE_MODES``; ``approve`` answers ``ask`` (None: nobody can be asked,
    every write is refused); ``guard`` bounds every write request, planned or redirected."""

    mode: str = "allow"
    approve: Approver | None = field(default=None, compare=False)
    guard: Guard | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in WRITE_MODES:
            raise UsageError(f"unknown write policy {self.mode!r}", hint="use --writes allow, deny or ask")

    @property
    def reads_requests(self) -> bool:
        """Does ``decide`` look at the request? Not when it allows everything with no guard: then
        a caller need not build one (its URL and shown arguments cost a function tool's call a
        tenth of its host time)."""
        return self.mode != "allow" or self.guard is not None

    def decide(self, request: WriteRequest) -> Decision:
        """May ``request`` be sent? Approvals are asked one at a time (a terminal shows one
        question at once, however many programs of a batch write together)."""
        if self.guard is not None:
            reason = self.guard(request)
            if reason:
                return Decision(reason)
        if self.mode == "allow" or request.marked_read:
            return Decision()
        if self.mode == "deny":
            return Decision("this run is read-only (--writes deny): writes are refused before they are sent, "
                            "reads go through")
        if self.approve is None:
            return Decision("--writes ask, and there is no one to ask here (no terminal, no approver): "
                            "the write was not sent")
        started = time.monotonic()
        with _ASKING:
            try:
                yes = bool(self.approve(request))
            except NoApprover as exc:
                return Decision(f"{exc}: the write was not sent", waited=time.monotonic() - started)
            except Exception as exc:  # an approver that breaks refuses: nothing is sent on doubt
                return Decision(f"the approver failed ({type(exc).__name__}: {str(exc)[:200]}); the write was not "
                                "sent", waited=time.monotonic() - started)
        waited = time.monotonic() - started
        return Decision(None if yes else "the write was declined by the approver (--writes ask)", waited)


_ASKING = threading.Lock()


@dataclass
class Writes:
    """The write policy and the task's ledger, carried by a ``Toolset`` (``Toolset.writes``) to
    every gateway of the task's runs. ``ledger`` None: writes are not recorded (a probe's own
    calls, which keep their own account)."""

    policy: WritePolicy = field(default_factory=WritePolicy)
    ledger: WriteLedger | None = field(default_factory=WriteLedger)

    @classmethod
    def of(cls, mode: str | None = None, approve: Approver | None = None, *, ledger: WriteLedger | None = None,
           guard: Guard | None = None) -> Writes:
        """The usual construction: a mode (None: ``allow``), an approver, a ledger (None: a new one)."""
        return cls(WritePolicy(mode or "allow", approve, guard), ledger if ledger is not None else WriteLedger())
