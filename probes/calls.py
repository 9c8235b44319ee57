"""Sending probe requests: the budget, the cache, the gateway, and what an answer means.

Every request of a probe goes through ``sandbox.gateway.core.Gateway.call``, exactly like a program's
calls: credentials are added on the host and redacted from what comes back, arguments are
validated, and timeouts and size caps apply. ``Caller`` adds what probing needs on top:

- the **budget**: a global cap (``--max-calls``) and a per-tool cap; a request the budget does not
  allow is never sent;
- the **cache** (``probes.cache``): a recorded answer is reused and costs nothing;
- a **classification** of each answer (``Observation.kind``), because "did it work" has more than
  two answers when you probe: ``ok`` (2xx with data), ``empty`` (2xx without a body), ``garbage``
  (a 2xx body that claims to be JSON and is not, or an HTML page), ``redirect``, ``http`` (an
  error status), ``timeout``, ``network``, ``too_large``, ``invalid`` (refused before sending),
  ``budget``, ``tool_error`` (an MCP tool answered ``isError`` or a JSON-RPC error: the request
  was sent and counts against the budget), ``refused`` (a 2xx body, or a text, that only reports
  an error).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from probes.cache import ResponseCache, cacheable
from protocols.model import Tool
from sandbox.api import Limits, ToolCall, Toolset
from sandbox.gateway.core import Gateway, validator_for

__all__ = ["Observation", "Budget", "Caller", "classify_body", "Source"]

#: How each argument of a call was chosen: ``{"kind": "harvest", "obs": int, "path": [...], "tool", "field"}``,
#: ``{"kind": "inherit", "obs": int, "arg": str}``, or ``{"kind": <schema source>}``.
Source = dict[str, Any]


@dataclass
class Observation:
    """One probe request and its answer. ``data`` is the decoded body (already redacted);
    ``provenance`` says where each argument came from (for ``depends_on``, the parameter ->
    field mapping and the example program); ``helper_for`` names the tool a helper call served."""

    id: int
    tool: str
    args: dict[str, Any]
    kind: str
    status: int | None = None
    data: Any = None
    error: str | None = None
    cached: bool = False
    duration_ms: float = 0.0
    provenance: dict[str, Source] = field(default_factory=dict)
    round: int = 0
    helper_for: str | None = None

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    @property
    def sent(self) -> bool:
        """Whether this request reached the API (not a cache hit, not refused before sending; an
        MCP ``isError`` answer was sent)."""
        return not self.cached and self.kind not in ("invalid", "budget")

    def record(self) -> dict[str, Any]:
        return {"tool": self.tool, "args": self.args, "kind": self.kind, "status": self.status,
                "data": self.data, "error": self.error}


def classify_body(data: Any) -> str:
    """``ok``, ``empty`` or ``garbage`` for the body of a 2xx answer.

    The gateway hands non-JSON bodies on as text. Plain text is a legitimate answer of some APIs,
    but a body that starts like JSON and does not parse, or an HTML page (a login or error page
    served with 200), is not data about the tool."""
    if data is None or data == "":
        return "empty"
    if isinstance(data, str):
        head = data.lstrip()[:15].lower()
        if _JSON_START.match(data) or head.startswith(("<!doctype", "<html", "<?xml", "<head", "<body")):
            return "garbage"
        if _ERROR_TEXT.match(data):
            return "refused"
    if isinstance(data, dict) and _error_shaped(data):
        return "refused"
    return "ok"


#: A text that starts like JSON (and did not parse): ``{"a"``, ``[1``, ``[{``, ``[]``, ``[true``. Not
#: ``[FILE] notes.txt``, how listing tools start their lines.
_JSON_START = re.compile(r'^\s*(\{\s*("|\}|$)|\[\s*([\[{"\]\d-]|true|false|null|$))')

#: The first words of a text answer that reports a failure instead of data ("Error: ENOENT...",
#: "Access denied - path outside allowed directories", "Unknown tool"): many MCP servers answer
#: errors as ordinary text, and such a text documents nothing.
_ERROR_TEXT = re.compile(
    r"^\s*(error\b|errors?:|exception\b|failed\b|failure\b|fatal\b|invalid\b|access denied|permission denied|"
    r"forbidden\b|unauthori[sz]ed\b|not found\b|no such\b|unknown (tool|command|argument|parameter)\b|"
    r"cannot\b|can't\b|could not\b|unable to\b|\w+error:|enoent|eacces|eperm|traceback)", re.IGNORECASE)

#: Keys of a body that says only "this failed" (many APIs answer errors with status 200).
_ERROR_KEYS = frozenset({"error", "errors", "message", "msg", "status", "code", "success", "ok", "detail",
                         "details", "status_code", "status_message", "error_code", "error_message", "reason"})


def _error_shaped(data: dict[str, Any]) -> bool:
    """A 2xx body that is an error report: nothing but error-ish keys, and one of them says so."""
    if not data or not set(data) <= _ERROR_KEYS:
        return False
    return bool(data.get("error") or data.get("errors") or data.get("error_code") or data.get("error_message")
                or data.get("success") is False or data.get("ok") is False)


@dataclass
class Budget:
    """The global request budget and the per-tool cap; ``spent`` counts requests sent; ``reserved``
    requests are kept back (the write plan keeps one per planned delete, so that what it creates
    can always be deleted)."""

    total: int
    per_tool: int
    spent: int = 0
    by_tool: dict[str, int] = field(default_factory=dict)
    #: Requests kept back for later (the deletes of what a probe's writes create).
    reserved: int = 0

    def left(self, tool: str | None = None) -> int:
        overall = self.total - self.spent - self.reserved
        if tool is None:
            return max(0, overall)
        return max(0, min(overall, self.per_tool - self.by_tool.get(tool, 0)))

    def charge(self, tool: str, n: int = 1) -> None:
        self.spent += n
        self.by_tool[tool] = self.by_tool.get(tool, 0) + n


class Caller:
    """Sends probe requests for one probe (single-threaded)."""

    def __init__(self, toolset: Toolset, limits: Limits, budget: Budget, cache: ResponseCache | None = None,
                 *, gateway: Gateway | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.toolset = toolset
        self.budget = budget
        self.cache = cache
        # The gateway's own call budget is a backstop: the prober never asks for more than ``total``.
        self.gateway = gateway or Gateway(toolset, replace(limits, max_calls=budget.total + 1))
        self.observations: list[Observation] = []
        self.sleep = sleep

    def _new(self, tool: str, args: dict[str, Any], kind: str, **kw: Any) -> Observation:
        obs = Observation(id=len(self.observations), tool=tool, args=args, kind=kind, **kw)
        self.observations.append(obs)
        return obs

    def server(self, tool: Tool) -> str:
        """The base URL a request of ``tool`` goes to (as the gateway chooses it)."""
        return (self.toolset.base_url_for(tool.name) or "").rstrip("/")

    def valid(self, tool: Tool, args: dict[str, Any]) -> str | None:
        """Why ``args`` would be refused by the gateway's validation (None: they pass)."""
        for key in args:
            if key not in tool.properties:
                return f"unknown argument {key!r}"
        missing = [k for k in tool.required if k not in args]
        if missing:
            return f"missing required argument {missing[0]!r}"
        error = next(iter(validator_for(tool.parameters).iter_errors(args)), None)
        return None if error is None else str(error.message)[:200]

    def call(self, tool: Tool, args: dict[str, Any], *, provenance: dict[str, Source] | None = None,
             round_: int = 0, charge_to: str | None = None, fresh: bool = False, cache: bool = True) -> Observation:
        """Send (or replay) one request; never raises for what the API does. ``fresh`` asks the
        API even when an answer is recorded; ``cache=False`` neither reads nor records (a write:
        its answer says what it did once, and must never stand in for doing it again)."""
        extra = {"provenance": dict(provenance or {}), "round": round_}
        payer = charge_to or tool.name
        key = self.cache.key(tool, args, self.server(tool)) if self.cache is not None and cache else None
        if self.cache is not None and key is not None and not fresh:
            hit = self.cache.get(key)
            if hit is not None:
                return self._new(tool.name, args, str(hit.get("kind")), status=hit.get("status"),
                                 data=hit.get("data"), error=hit.get("error"), cached=True, **extra)
        if self.budget.left(payer) <= 0:
            return self._new(tool.name, args, "budget", error="the request budget is spent", **extra)
        started = time.perf_counter()
        self.budget.charge(payer)
        outcome = self.gateway.call(tool.name, args)
        record: ToolCall | None = self.gateway.calls[-1] if self.gateway.calls else None
        status = record.status if record is not None else None
        duration = (time.perf_counter() - started) * 1000
        if outcome.ok:
            kind = "redirect" if status is not None and 300 <= status < 400 else classify_body(outcome.data)
            if kind == "empty" and tool.method.upper() not in ("GET", "MCP"):
                kind = "ok"  # a HEAD answer has no body by definition, nor a 204 to a DELETE: the status is the answer
            error = None if kind == "ok" else _body_problem(kind, status, outcome.data)
            obs = self._new(tool.name, args, kind, status=status, data=outcome.data, error=error,
                            duration_ms=duration, **extra)
        else:
            err = outcome.error or {}
            message = str(err.get("message") or "the call failed")
            status = err.get("status") if isinstance(err.get("status"), int) else status
            kind = _failure_kind(message, status, str(err.get("kind") or ""), str(err.get("failure") or ""))
            data = record.response if record is not None else None
            obs = self._new(tool.name, args, kind, status=status, data=data, error=message, duration_ms=duration,
                            **extra)
        if kind == "invalid":
            # Refused by validation before anything was sent: give the request back.
            self.budget.spent -= 1
            self.budget.by_tool[payer] -= 1
        if self.cache is not None and key is not None and cacheable(obs.kind, obs.status):
            self.cache.put(key, obs.record())
        return obs


def _body_problem(kind: str, status: int | None, data: Any = None) -> str:
    where = f"HTTP {status}" if status is not None else "the MCP result"
    if kind == "refused":
        return f"{where} {'with an error body' if status is not None else 'reports an error'}: {_said(data)}"
    if kind == "empty":
        return f"{where}: the answer has no body"
    if kind == "redirect":
        return f"{where}: a redirect, not data"
    return f"{where}: the body is not JSON data (malformed JSON or an HTML page)"


def _said(data: Any) -> str:
    """The words of an error body, short."""
    if isinstance(data, str):
        return " ".join(data.split())[:200]
    if isinstance(data, dict):
        for key in ("message", "error_message", "status_message", "detail", "msg", "error", "errors"):
            value = data.get(key)
            if isinstance(value, dict):
                value = value.get("message") or value.get("detail")
            if isinstance(value, str) and value.strip():
                return " ".join(value.split())[:200]
    return json.dumps(data, ensure_ascii=False, default=str)[:200]


#: The gateway's ``failure`` of a call -> the prober's kind (``sandbox.api.FAILURE_KINDS``). An MCP
#: server's ``isError`` result (``tool``) or JSON-RPC error (``protocol``) was sent and answered.
_FAILURES = {"budget": "budget", "tool": "tool_error", "protocol": "tool_error", "http": "http", "redirect": "http",
             "timeout": "timeout", "connect": "network", "request": "network", "arguments": "invalid",
             "config": "invalid"}


def _failure_kind(message: str, status: int | None, kind: str, failure: str = "") -> str:
    if kind == "CallBudget":
        return "budget"
    if status is not None:
        return "http"
    if failure in _FAILURES:
        return _FAILURES[failure]
    text = message.lower()
    if "no response within" in text:
        return "timeout"
    if "larger than the" in text:
        return "too_large"
    if "request failed" in text:
        return "network"
    if "nested more than" in text:
        return "garbage"
    return "invalid"
