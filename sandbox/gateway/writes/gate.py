"""The gateway's side of writes: one ``WriteGate`` per gateway decides, for each write call, whether
it is sent, answered from the ledger, or refused, and records what became of it.

For a call whose tool is a write (``protocols.writes``):

1. ``plan``: its identity in the ledger (``write_key`` of the tool and canonical arguments) and
   its place among the identical writes of this attempt; when the operation declares an
   ``Idempotency-Key`` header (any case) and the program passes none, the key atc sends, derived
   from the task and that place, so that the same write sent again carries the same key;
2. ``admit``: what the ledger and the policy say, in this order:
   - an identical write recorded ``done`` at this place is **replayed**: not sent, the program
     gets the recorded answer;
   - one recorded ``unknown`` (sent, no answer) is sent again only under an idempotency key, or
     when the program passes ``resend_unknown=True`` after checking; otherwise it is refused, with
     a message saying that it may have been applied and how to check;
   - one recorded ``failed`` (the API said it was not applied) is sent again;
   - the policy (``deny``, ``ask``, a guard) may refuse what is left;
   - what is sent is recorded ``unknown`` before it leaves (written ahead);
3. ``settle``: the outcome from the answer: ``done`` (2xx), ``failed`` (the API refused: 4xx,
   most 5xx, a redirect not followed, nothing sent), ``unknown`` (no answer: timeout, a dropped
   connection, a gateway 502/504 whose upstream may have applied it).

A redirect that would send the write again elsewhere (307/308, or 301/302 of a PUT/PATCH/DELETE)
is followed only if the policy admits the new target too (``hop``): probing's scope guard sees
every hop, and ``ask`` asks again, showing where the write now goes.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from protocols.model import Collection, Tool
from protocols.writes import judge
from sandbox.gateway.writes.ledger import Cursor, Entry, created_ids, write_key
from sandbox.gateway.writes.policy import Decision, WritePolicy, WriteRequest, Writes

__all__ = ["WriteGate", "Planned", "Admission", "RESEND_ARGUMENT", "idempotency_parameter", "outcome_of_status"]

#: The reserved argument a program passes to send again a write whose earlier outcome is unknown.
RESEND_ARGUMENT = "resend_unknown"
_KEY_HEADERS = frozenset({"idempotency-key", "x-idempotency-key"})
#: Gateway statuses after which the upstream may have applied the write: the outcome is unknown.
_UNKNOWN_STATUSES = frozenset({502, 504, 522, 524, 598, 599})


def idempotency_parameter(tool: Tool) -> str | None:
    """The parameter that carries the operation's ``Idempotency-Key`` header, if it declares one."""
    for name, binding in tool.bindings.items():
        if binding.location == "header" and binding.name.lower() in _KEY_HEADERS:
            return name
    return None


def outcome_of_status(status: int | None, data: Any = None) -> str:
    """``done`` for 2xx; ``unknown`` for a gateway's 5xx, or a 5xx whose body names what it made;
    ``failed`` for anything else the API answered."""
    if status is None:
        return "unknown"
    if 200 <= status < 300:
        return "done"
    if status in _UNKNOWN_STATUSES or (status >= 500 and created_ids(data)):
        return "unknown"
    return "failed"


@dataclass
class Planned:
    """A write call before admission: its ledger identity and the arguments to send."""

    tool: Tool
    args: dict[str, Any]
    extra_query: dict[str, Any] | None
    key: str
    occurrence: int
    idempotency_key: str | None
    resend: bool
    reason: str


@dataclass
class Admission:
    """What to do with a planned write: ``replay`` (the entry's answer), ``refused`` (the reason),
    or send it (``entry`` is the ledger's, already recorded ``unknown``; None without a ledger).
    ``waited`` is the time an approver took."""

    action: str
    entry: Entry | None = None
    refused: str | None = None
    waited: float = 0.0


class WriteGate:
    """The write handling of ONE gateway (one program run, a session's snippet, an episode's direct
    calls). ``cursor`` is the attempt's walk over the ledger: a new one per run, replaced by the
    caller for a new snippet or a search tree's branch."""

    def __init__(self, writes: Writes | None, collections: list[Collection], base_url: Any) -> None:
        self.writes = writes
        self.policy = writes.policy if writes is not None else WritePolicy()
        self.ledger = writes.ledger if writes is not None else None
        self.cursor: Cursor | None = self.ledger.cursor() if self.ledger is not None else None
        self._kinds = {c.name: c for c in collections}
        self._base_url = base_url
        self._verdicts: dict[str, tuple[bool, str]] = {}

    def verdict(self, tool: Tool) -> tuple[bool, str]:
        """Is ``tool`` a write, and why (cached: the rule is asked once per tool and gateway)."""
        found = self._verdicts.get(tool.name)
        if found is None:
            v = judge(tool, self._kinds.get(tool.collection))
            found = self._verdicts[tool.name] = (v.write, v.reason)
        return found

    def next_attempt(self) -> None:
        """A new attempt over the same ledger (a session's next snippet)."""
        if self.ledger is not None:
            self.cursor = self.ledger.cursor()

    # -- before validation ---------------------------------------------------------------------

    def plan(self, tool: Tool, args: dict[str, Any], extra_query: dict[str, Any] | None, reason: str, *,
             resend: bool = False) -> Planned:
        """The write's identity and the arguments to send (``args`` are the tool's own, after
        wire names; ``resend``: the program passed ``resend_unknown=True``)."""
        key = write_key(tool.name, args, extra_query)
        occurrence = self.cursor.peek(key) if self.cursor is not None else 0
        header = idempotency_parameter(tool)
        token: str | None = None
        if header is not None:
            if args.get(header) not in (None, ""):
                token = str(args[header])
            else:
                task = self.ledger.task if self.ledger is not None else "no-ledger"
                token = _derived_key(task, key, occurrence)
                args = {**args, header: token}
        return Planned(tool, args, extra_query, key, occurrence, token, resend, reason)

    # -- after validation ----------------------------------------------------------------------

    def admit(self, planned: Planned) -> Admission:
        tool = planned.tool
        entry: Entry | None = None
        if self.cursor is not None:
            _, entry = self.cursor.take(planned.key)
        if entry is not None and entry.outcome == "done":
            return Admission("replay", entry)
        if entry is not None and entry.outcome == "unknown" and not entry.idempotency_key and not planned.resend:
            return Admission("refuse", entry, refused=_unknown_message(tool.name, entry))
        decision = self.decide(planned, 0, self.request_url(tool, planned.args)) if self.policy.reads_requests \
            else _SEND
        if decision.refused is not None:
            if self.cursor is not None and entry is None:
                # Nothing was sent: the place stays free for the same write when it is allowed.
                self.cursor.seen[planned.key] -= 1
            return Admission("refuse", None, refused=decision.refused, waited=decision.waited)
        if self.ledger is None or self.cursor is None:
            return Admission("send", None, waited=decision.waited)
        sent = self.ledger.begin(planned.key, planned.occurrence, tool.name, _shown_args(planned),
                                 method=tool.method.upper(), path=tool.path, attempt=self.cursor.attempt,
                                 idempotency_key=planned.idempotency_key, entry=entry)
        return Admission("send", sent, waited=decision.waited)

    def decide(self, planned: Planned, hop: int, url: str, method: str | None = None, *, query: str = "",
               marked_read: bool = False) -> Decision:
        request = WriteRequest(tool=planned.tool.name, collection=planned.tool.collection,
                               method=method or planned.tool.method.upper(), path=planned.tool.path, url=url,
                               args=_shown_args(planned), reason=planned.reason, hop=hop, query=query,
                               marked_read=marked_read)
        return self.policy.decide(request)

    def plan_read(self, tool: Tool, args: dict[str, Any], extra_query: dict[str, Any] | None) -> Planned:
        """A call marked read-only whose method could write: not in the ledger, but a redirect
        that would repeat it elsewhere is shown to the policy's guard (``decide(marked_read=True)``)."""
        return Planned(tool, args, extra_query, "", 0, None, False, "marked read-only")

    def request_url(self, tool: Tool, args: dict[str, Any]) -> str:
        """Where the planned request goes, as a person reads it: the server and the path with its
        parameters filled in (never the query, which may hold a credential)."""
        if tool.method.upper() == "MCP":
            return f"mcp://{tool.collection}/{tool.path}"
        path = tool.path
        for name, binding in tool.bindings.items():
            if binding.location == "path" and name in args:
                path = path.replace("{" + binding.name + "}", quote(str(args[name]), safe=""))
        base = ""
        try:
            base = str(self._base_url(tool.name) or "").rstrip("/")
        except KeyError:
            pass
        return base + path

    def settle(self, entry: Entry | None, outcome: str, *, status: int | None, data: Any = None,
               headers: dict[str, str] | None = None, error: str | None = None, target: str | None = None) -> None:
        if entry is not None and self.ledger is not None:
            self.ledger.settle(entry, outcome, status=status, data=data, headers=headers, error=error, target=target)

    def fork(self) -> WriteGate:
        """A gate on the same ledger whose cursor goes on from this one's place."""
        twin = copy.copy(self)
        twin.cursor = self.cursor.fork() if self.cursor is not None else None
        return twin


#: What a policy that reads no request decides: send.
_SEND = Decision()


def _shown_args(planned: Planned) -> dict[str, Any]:
    """The arguments as the ledger and an approver show them: the program's (a derived key is kept
    apart, in the entry's ``idempotency_key``)."""
    header = idempotency_parameter(planned.tool)
    if header is not None and planned.args.get(header) == planned.idempotency_key and planned.idempotency_key:
        return {k: v for k, v in planned.args.items() if k != header}
    return planned.args


def _derived_key(task: str, key: str, occurrence: int) -> str:
    """A stable key in UUID form (what most APIs accept) from the task, the write and its place."""
    digest = hashlib.blake2b(f"atc:{task}:{key}:{occurrence}".encode(), digest_size=16).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:]}"


def _unknown_message(name: str, entry: Entry) -> str:
    return (f"{name}: not sent: an identical write earlier in this task (attempt {entry.attempt}) was sent and no "
            f"answer came, so it may have been applied. Check with a read whether it was (look for what it "
            f"would have made); if it was not, call {name}(..., {RESEND_ARGUMENT}=True) to send it again")
