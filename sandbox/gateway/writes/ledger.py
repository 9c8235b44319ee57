"""The write ledger of one task: every write sent, its arguments and its outcome, so that a write
is sent once per task however often the task's programs are run.

A task is one episode: every attempt of a solve (chain's repairs run the corrected program from the
start), every turn and node of a strategy, a batch task across resumes, an ``atc.session``, an
``atc serve`` session. Each attempt walks the ledger with a ``Cursor``; a write is identified by
its tool and its canonical arguments (``write_key``), and the n-th identical write of an attempt
meets the n-th identical write recorded (one for one, in order: a loop that places three equal
orders matches three recorded orders call for call, and a fourth is sent). What the match does
is the gate's (``sandbox.gateway.writes.gate``): replay a ``done`` write, send a ``failed`` one again,
refuse to repeat an ``unknown`` one silently.

The ledger is written ahead: an entry is recorded ``unknown`` before its request leaves the host
and updated when the answer comes, so that a run cut off by its deadline, a kill or Ctrl-C leaves
``unknown`` behind, never nothing. With a file (``LedgerFile``: ``atc batch``'s sidecar,
``--ledger FILE``), every change is appended as one JSON line, so a resumed task finds what the
earlier process wrote. Responses are kept after the gateway took the host's secrets out, and
bounded (``ENTRY_BYTES`` each, ``LEDGER_BYTES`` in all; beyond, a summary).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocols.errors import UsageError
from sandbox.jsonbounds import host_size, summarize

__all__ = ["Entry", "WriteLedger", "Cursor", "LedgerFile", "write_key", "canonical", "OUTCOMES", "ENTRY_BYTES",
           "LEDGER_BYTES", "created_ids"]

#: A write call's ``outcome``: sent and applied (2xx), sent and refused by the API (not applied),
#: sent with no answer (may have been applied), answered from the ledger without sending, or
#: refused by atc before sending (policy, approval, an earlier unknown outcome).
OUTCOMES = ("done", "failed", "unknown", "replayed", "refused")
#: What one entry keeps of its response whole (as the host holds it); beyond, a bounded summary.
ENTRY_BYTES = 1 << 20
#: What a ledger keeps whole in all; past it every further response is summarised.
LEDGER_BYTES = 16 << 20


def canonical(value: Any) -> str:
    """One spelling of a JSON-like value: sorted keys, no spaces (``{"b":1,"a":2}`` and
    ``{"a":2,"b":1}`` are the same write)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)


def write_key(tool: str, args: dict[str, Any], extra_query: dict[str, Any] | None = None) -> str:
    """The identity of a write: its tool and its canonical arguments (and extra query)."""
    text = f"{tool}\0{canonical(args)}\0{canonical(extra_query) if extra_query else ''}"
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


@dataclass
class Entry:
    """One write of the task. ``occurrence`` is its place among the identical writes (same ``key``)
    of the task; ``attempt`` the attempt that last sent it; ``sends`` how many times it left the
    host. ``data``/``status``/``headers`` are the answer the program got (redacted), ``error`` the
    message of an answer that was an error; ``whole`` is False when ``data`` is a summary."""

    index: int
    key: str
    occurrence: int
    tool: str
    args: dict[str, Any]
    method: str = ""
    path: str = ""
    outcome: str = "unknown"
    status: int | None = None
    data: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    idempotency_key: str | None = None
    attempt: int = 0
    sends: int = 0
    at: float = 0.0
    target: str | None = None
    whole: bool = True

    def to_dict(self, *, with_response: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "index": self.index, "tool": self.tool, "args": self.args, "method": self.method, "path": self.path,
            "outcome": self.outcome, "status": self.status, "error": self.error,
            "idempotency_key": self.idempotency_key, "attempt": self.attempt, "sends": self.sends,
            "target": self.target, "created": created_ids(self.data, self.args) if self.outcome == "done" else {},
        }
        if with_response:
            d.update(key=self.key, occurrence=self.occurrence, data=self.data, headers=self.headers,
                     at=round(self.at, 3), whole=self.whole)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Entry:
        return cls(index=int(d["index"]), key=str(d["key"]), occurrence=int(d.get("occurrence") or 0),
                   tool=str(d.get("tool") or ""), args=dict(d.get("args") or {}), method=str(d.get("method") or ""),
                   path=str(d.get("path") or ""), outcome=str(d.get("outcome") or "unknown"),
                   status=d.get("status") if isinstance(d.get("status"), int) else None, data=d.get("data"),
                   headers=dict(d.get("headers") or {}), error=d.get("error"),
                   idempotency_key=d.get("idempotency_key"), attempt=int(d.get("attempt") or 0),
                   sends=int(d.get("sends") or 0), at=float(d.get("at") or 0.0), target=d.get("target"),
                   whole=d.get("whole") is not False)

    def line(self) -> str:
        """One line for a person or a model: outcome, call, status and the ids it created."""
        args = canonical(self.args)
        args = args if len(args) <= 160 else args[:157] + "..."
        text = f"{self.outcome:<8} {self.tool}({args})"
        if self.status is not None:
            text += f" -> HTTP {self.status}"
        ids = created_ids(self.data, self.args) if self.outcome == "done" else {}
        if ids:
            text += " created " + ", ".join(f"{k}={v}" for k, v in ids.items())
        if self.outcome == "unknown":
            text += ": sent, no answer came; it may have been applied"
        elif self.outcome == "failed" and self.error:
            text += f": {self.error[:160]}"
        return text


#: Fields of a write's answer that name what it made (shown in repair prompts and summaries).
_ID_FIELDS = ("id", "uuid", "name", "number", "slug", "handle", "ref", "reference")


def created_ids(data: Any, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """The identifiers in a write's answer: ``id``-like fields at its top (or one level into a
    single wrapped object such as ``{"order": {...}}``), at most four; a field that only echoes an
    argument of the call (``product_id`` given, ``product_id`` answered) made nothing."""
    if isinstance(data, dict) and len(data) == 1:
        inner = next(iter(data.values()))
        if isinstance(inner, dict):
            data = inner
    if not isinstance(data, dict):
        return {}
    found: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(value, str | int) or isinstance(value, bool):
            continue
        low = key.lower()
        if args and key in args and args[key] == value:
            continue
        if key in _ID_FIELDS or low.endswith("_id") or (key.endswith("Id") and len(key) > 2) or low == "id":
            found[key] = value if not isinstance(value, str) else value[:80]
        if len(found) == 4:
            break
    return found


class Cursor:
    """One attempt's walk over the ledger: counts the identical writes this attempt made, so that
    its n-th one meets the ledger's n-th. ``fork`` copies it (a search tree's branch goes on from
    its parent's place)."""

    def __init__(self, ledger: WriteLedger, attempt: int, seen: Counter[str] | None = None) -> None:
        self.ledger = ledger
        self.attempt = attempt
        self.seen: Counter[str] = seen if seen is not None else Counter()

    def peek(self, key: str) -> int:
        """The occurrence number the next write with ``key`` would have."""
        return self.seen[key]

    def take(self, key: str) -> tuple[int, Entry | None]:
        """Advance past one write with ``key``: its occurrence number and the recorded entry it
        meets (None: no identical write was recorded at that place)."""
        n = self.seen[key]
        self.seen[key] = n + 1
        return n, self.ledger.find(key, n)

    def fork(self) -> Cursor:
        return Cursor(self.ledger, self.attempt, Counter(self.seen))


class WriteLedger:
    """The writes of one task (see the module docstring). Thread-safe. ``task`` names the task in
    derived idempotency keys and in a ``LedgerFile``; ``sink`` (set by a ``LedgerFile``) gets
    every change."""

    def __init__(self, task: str | None = None, entries: list[Entry] | None = None, *,
                 sink: LedgerFile | None = None, label: str | None = None) -> None:
        self.task = task or uuid.uuid4().hex
        #: the name the task has in a ``LedgerFile`` (a batch task's id)
        self.label = label if label is not None else self.task
        self.entries: list[Entry] = list(entries or [])
        self._by_key: dict[str, list[Entry]] = {}
        for e in self.entries:
            self._by_key.setdefault(e.key, []).append(e)
        self._attempts = max((e.attempt for e in self.entries), default=0)
        self._kept = sum(host_size(e.data) for e in self.entries)
        self._lock = threading.Lock()
        self._sink = sink

    def cursor(self) -> Cursor:
        """A new attempt's cursor (attempts are numbered from 1 in the order they start)."""
        with self._lock:
            self._attempts += 1
            return Cursor(self, self._attempts)

    def find(self, key: str, occurrence: int) -> Entry | None:
        with self._lock:
            same = self._by_key.get(key)
            return same[occurrence] if same is not None and occurrence < len(same) else None

    def begin(self, key: str, occurrence: int, tool: str, args: dict[str, Any], *, method: str, path: str,
              attempt: int, idempotency_key: str | None, entry: Entry | None = None) -> Entry:
        """Record a write about to be sent (``unknown`` until ``settle``): a new entry, or
        ``entry`` sent again."""
        with self._lock:
            if entry is None:
                args_kept, _, _ = summarize(args, ENTRY_BYTES)
                entry = Entry(index=len(self.entries), key=key, occurrence=occurrence, tool=tool, args=args_kept,
                              method=method, path=path, idempotency_key=idempotency_key)
                self.entries.append(entry)
                self._by_key.setdefault(key, []).append(entry)
            entry.outcome, entry.status, entry.error = "unknown", None, None
            entry.attempt, entry.sends, entry.at = attempt, entry.sends + 1, time.time()
            entry.idempotency_key = idempotency_key or entry.idempotency_key
        self._save(entry)
        return entry

    def settle(self, entry: Entry, outcome: str, *, status: int | None, data: Any = None,
               headers: dict[str, str] | None = None, error: str | None = None, target: str | None = None) -> None:
        """The answer came (or surely will not): record the outcome and what the program got."""
        with self._lock:
            size = host_size(data, ENTRY_BYTES + 1)
            whole = size <= ENTRY_BYTES and self._kept + size <= LEDGER_BYTES
            if not whole:
                data, _, size = summarize(data, min(ENTRY_BYTES, 64 << 10))
            self._kept += size
            entry.outcome, entry.status, entry.data, entry.whole = outcome, status, data, whole
            entry.headers, entry.error, entry.target = dict(headers or {}), error, target
        self._save(entry)

    def _save(self, entry: Entry) -> None:
        if self._sink is not None:
            self._sink.append(self.label, self.task, entry)

    # -- what was done -------------------------------------------------------------------------

    def writes(self) -> list[Entry]:
        with self._lock:
            return list(self.entries)

    def counts(self) -> dict[str, int]:
        return dict(Counter(e.outcome for e in self.writes()))

    def summary(self, *, limit: int = 20) -> str:
        """The writes made so far, one line each (newest last), for a prompt or a terminal."""
        entries = self.writes()
        lines = [e.line() for e in entries[-limit:]]
        if len(entries) > limit:
            lines.insert(0, f"... {len(entries) - limit} earlier write(s) not shown")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "writes": [e.to_dict(with_response=False) for e in self.writes()]}


class LedgerFile:
    """Ledgers kept in one append-only JSON-lines file (``atc batch``'s sidecar of its output, or
    ``--ledger FILE``): each line is ``{"task": LABEL, "ledger": ID, "entry": {...}}``, the last
    line of an entry wins. ``LABEL`` is the task's name (a batch task's id); ``ID`` is the ledger's
    own random id, which derived idempotency keys are made from: two batches that reuse task ids
    never share keys. Lines are appended whole (one ``write`` with ``O_APPEND``), so an
    interrupted process leaves at most a torn last line, which the reader skips."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._known: dict[str, dict[int, Entry]] = {}
        self._ids: dict[str, str] = {}
        #: the file ends in a torn line (a process killed mid-write): the next append starts a new one
        self._torn = False
        self._load()

    def _load(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise UsageError(f"cannot read the write ledger {self.path}: {exc.strerror or exc}") from None
        self._torn = bool(raw) and not raw.endswith(b"\n")
        for line in raw.splitlines():
            try:
                record = json.loads(line)
                entry = Entry.from_dict(record["entry"])
                task = str(record["task"])
                ledger_id = str(record.get("ledger") or task)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a torn last line of an interrupted write, or not ours
            self._known.setdefault(task, {})[entry.index] = entry
            self._ids.setdefault(task, ledger_id)

    def tasks(self) -> list[str]:
        return list(self._known)

    def ledger(self, task: str) -> WriteLedger:
        """The ledger of ``task``, with everything an earlier process recorded for it."""
        earlier = [e for _, e in sorted(self._known.get(task, {}).items())]
        # Ids are dense from 0 in a file this class wrote; anything else (a hand-edited file) is
        # renumbered so that a new entry never shares an index with an old one.
        for n, e in enumerate(earlier):
            e.index = n
        with self._lock:
            ledger_id = self._ids.setdefault(task, uuid.uuid4().hex)
        return WriteLedger(ledger_id, earlier, sink=self, label=task)

    def append(self, label: str, ledger_id: str, entry: Entry) -> None:
        line = json.dumps({"task": label, "ledger": ledger_id, "entry": entry.to_dict()}, ensure_ascii=False,
                          default=repr) + "\n"
        data = line.encode("utf-8", "surrogatepass")
        with self._lock:
            if self._torn:
                data, self._torn = b"\n" + data, False
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
