"""The host-side tool gateway: one program's tool calls become validated requests.

A program in the sandbox never talks to an API. Its tool functions are stubs that send
``{"tool", "args"}`` over the channel, and the session hands them to ``Gateway.call``, which

1. checks the call budget (``Limits.max_calls``; past it every call answers ``CallBudget``),
2. validates the arguments against the tool's JSON Schema *before* any request, as the run's
   validation mode for the tool's collection says (``Toolset.validation_for``): ``strict``
   refuses a call that does not conform (unknown argument, missing required, wrong type -> a
   ``ToolError`` naming the tool and the parameter); ``warn`` sends it and records what failed
   in ``ToolCall.warnings``; ``off`` sends it unchecked. A schema that jsonschema cannot use (a
   broken spec the import could not repair) never crashes a call: the call goes out unchecked and
   the log says why. The check is bounded (``sandbox.gateway.validation``): values counted first, schema
   steps and errors metered, the first problem in ``strict``, 20 in ``warn``; arguments too
   large to check are refused in ``strict`` and sent with a warning in ``warn``; a check still
   running at the run's deadline answers a ``timeout`` (the session ends the run as a Timeout).
3. hands the call to its transport (``_exchange``: a tool of an MCP server goes to ``sandbox.gateway.mcp``,
   which sends ``tools/call`` to the server, see its transport's docstring; a Python function of
   the host to ``sandbox.gateway.functions``, which calls it on a worker thread under the deadline; any
   other to HTTP:
   ``sandbox.gateway.http``, which builds the
   request in each parameter's style, adds credentials from the host environment only, follows
   same-origin redirects, keeps a per-run cookie jar for cookie-declaring APIs, decodes
   compressed bodies under the size cap, and cuts slow answers at the per-call timeout),
4. takes every credential value the host holds out of the response: body, headers, redirect
   locations and error text (``sandbox.gateway.redact``: an API that echoes headers must not hand the
   program its key),
5. records a ``ToolCall`` (tool, args, method, path *template*, status, line, column, duration,
   error, failure kind, redirects, warnings, response, headers, redacted; large arguments,
   responses and headers as bounded summaries, ``_keep``) and returns the data
   with the status and headers, or an error whose message names the tool, the HTTP status and the
   API's own error text (``get_book: HTTP 404: book not found``). Any status outside 2xx is an
   error, a redirect that was not followed included.

Besides its parameters every tool takes ``extra_query={...}`` (query parameters the spec does not
list: open-ended filters), which the gateway checks like any query value. ``with_headers`` is
the runner's business and never reaches an API. A parameter may also be given under its name in
the API (``userId`` for ``user_id``, ``Tool.wire_aliases``): it is renamed before validation.

Nothing from the sandbox is trusted: ``call`` takes plain values that came out of a JSON frame
and re-validates all of them, so a forged frame gets exactly the checks a stub call gets.
"""

from __future__ import annotations

import copy
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from protocols.errors import ToolError
from protocols.model import RESERVED_ARGUMENTS, Collection, Tool
from protocols.writes import READ_METHODS
from sandbox.api import Limits, ToolCall, Toolset
from sandbox.gateway.http.credentials import env_var
from sandbox.gateway.redact import Redactor
from sandbox.gateway.taps import Exchange
from sandbox.gateway.validation import MAX_UNIQUE_CHECK, ValidationCut, problems, validator_for
from sandbox.gateway.writes.gate import RESEND_ARGUMENT, Planned, WriteGate, outcome_of_status
from sandbox.gateway.writes.ledger import Entry
from sandbox.hostbounds import LOG_TAIL_BYTES, HostBounds
from sandbox.jsonbounds import summarize

if TYPE_CHECKING:  # imported when the first call comes: a run without calls never pays for them
    import httpx

    from sandbox.gateway.functions.transport import FunctionTransport
    from sandbox.gateway.http.transport import HttpTransport, Reply
    from sandbox.gateway.mcp.transport import McpTransport

__all__ = ["Gateway", "CallOutcome", "validator_for", "shared_client", "uses_cookies", "MAX_UNIQUE_CHECK"]

_LOADED: list[bool] = []  # non-empty once a gateway of this process has loaded its dependencies
#: Longest error or warning message the call log keeps of a call.
_MAX_LOGGED_MESSAGE = 4000
#: Asked before a redirect would send a write again: (method, url, hop) -> (refusal, seconds waited).
HopCheck = Callable[[str, str, int], tuple[str | None, float]]


@dataclass
class Sending:
    """A write on its way: its ledger entry (None without a ledger), and whether its outcome is in."""

    entry: Entry | None
    settled: bool = False


def _failure_outcome(failure: str | None, status: int | None) -> str:
    """The outcome of a write that failed without a usable answer: never sent (bad arguments, no
    connection, no server URL) is ``failed``; sent and unanswered is ``unknown``; answered but
    unusable is what its status says."""
    if failure in ("arguments", "config", "connect", "unrecorded", "tool"):
        return "failed"
    if failure == "response" and status is not None:
        return outcome_of_status(status)
    return "unknown"


def _target(hops: list[dict[str, Any]]) -> str | None:
    """Where a redirected write ended up (None: where it was sent)."""
    followed = [h for h in hops if h.get("followed")]
    return str(followed[-1].get("location")) if followed else None




def shared_client() -> httpx.Client:
    """The process-wide HTTP client (``sandbox.gateway.http.transport.shared_client``)."""
    from sandbox.gateway.http.transport import shared_client as make  # lazy: the transport brings httpx

    return make()


def uses_cookies(collection: Collection) -> bool:
    """Does the spec declare cookies (``sandbox.gateway.http.transport.uses_cookies``)?"""
    from sandbox.gateway.http.transport import uses_cookies as declared  # lazy: the transport brings httpx

    return declared(collection)

@dataclass
class CallOutcome:
    """What the runner gets back for one call: ``data`` when ``ok``, else ``error`` =
    ``{"message", "status", "kind", "failure", "data", "headers"}`` with kind ``ToolError`` or
    ``CallBudget``; ``status`` and ``headers`` of the response when there was one (redacted)."""

    ok: bool
    data: Any = None
    error: dict[str, Any] | None = None
    status: int | None = None
    headers: dict[str, str] | None = None

    def frame(self, call_id: int) -> dict[str, Any]:
        if self.ok:
            return {"op": "result", "id": call_id, "ok": True, "data": self.data, "status": self.status,
                    "headers": self.headers or {}}
        return {"op": "result", "id": call_id, "ok": False, "error": self.error}


#: Fields that carry an API's specific account of an error, most specific first; ``error``,
#: ``title`` and ``code`` are usually generic labels ("Unauthorized", "Bad Request").
_SPECIFIC_KEYS = ("message", "detail", "details", "error_description", "error_message", "errorMessage",
                  "msg", "description", "reason")
_GENERIC_KEYS = ("error", "title", "status_message", "code")


def _error_words(node: Any, depth: int = 0) -> str | None:
    """The most specific error text in an error body: a specific field, at this level or inside
    ``error``/``errors`` (``{"error": {"message": ...}}``, ``{"errors": [{"detail": ...}]}``), before
    a generic label."""
    if depth > 3:
        return None
    if isinstance(node, str):
        return node.strip() or None
    if isinstance(node, list):
        texts = [t for t in (_error_words(x, depth + 1) for x in node[:5]) if t]
        return "; ".join(dict.fromkeys(texts)) or None
    if not isinstance(node, dict):
        return None
    where = node.get("loc")
    if isinstance(node.get("msg"), str) and isinstance(where, list):  # pydantic/FastAPI validation errors
        return f"{'.'.join(str(x) for x in where)}: {node['msg']}"
    for key in _SPECIFIC_KEYS:
        value = node.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, dict | list):
            found = _error_words(value, depth + 1)
            if found:
                return found
    for key in ("error", "errors"):
        inner = node.get(key)
        if isinstance(inner, dict | list):
            found = _error_words(inner, depth + 1)
            if found:
                return found
    for key in _GENERIC_KEYS:
        value = node.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _api_error_text(body: Any) -> str:
    """The API's own words for an error response, short (see ``_error_words``)."""
    if isinstance(body, dict | list):
        found = _error_words(body)
        if found:
            return " ".join(found.split())[:300]
    if body is None or body == "":
        return "(empty body)"
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    text = " ".join(text.split())
    return text[:300] + ("..." if len(text) > 300 else "")


class Gateway:
    """Serves the tool calls of ONE program run and records them in ``calls``.

    ``client`` is shared between gateways for connection reuse (default: ``shared_client()``);
    ``environ`` is where credentials are read (default: ``os.environ`` of the host);
    ``deadline`` (a ``time.monotonic()`` value) caps each call's timeout by the program's end.
    Thread-safe: the budget counter and the call log are guarded, so calls may be served from
    several threads (the session serves a runner's calls one by one, in arrival order).
    """

    def __init__(
        self,
        toolset: Toolset,
        limits: Limits | None = None,
        *,
        client: httpx.Client | None = None,
        environ: Mapping[str, str] | None = None,
        deadline: float | None = None,
    ) -> None:
        self.toolset = toolset
        self.limits = limits or Limits()
        self._client = client
        self.environ = os.environ if environ is None else environ
        self.deadline = deadline
        self.calls: list[ToolCall] = []
        self.budget_exceeded = False
        self.bounds = HostBounds.of(self.limits)
        self._attempts = 0
        self._logged = 0  # host bytes the call log keeps of arguments and responses
        self._lock = threading.Lock()
        self._redactor: Redactor | None = None
        self._http: HttpTransport | None = None
        self._mcp: McpTransport | None = None
        self._gate: WriteGate | None = None
        #: seconds approvers took (``--writes ask``): the deadline moved by as much
        self.waited = 0.0

    @property
    def client(self) -> httpx.Client:
        """The HTTP client: the one given, else ``shared_client()`` (made when first needed)."""
        if self._client is None:
            self._client = shared_client()
        return self._client

    @property
    def http(self) -> HttpTransport:
        """The run's HTTP transport (made with the first call that needs it)."""
        if self._http is None:
            from sandbox.gateway.http.transport import HttpTransport  # lazy: brings httpx (see _load)

            self._http = HttpTransport(self.toolset, self.limits, self.client, self.environ, self.deadline)
        return self._http

    @property
    def mcp(self) -> McpTransport:
        """The run's MCP transport (made with the first call to an MCP server's tool)."""
        if self._mcp is None:
            # lazy: brings httpx and the MCP connections
            from sandbox.gateway.mcp.transport import McpTransport

            self._mcp = McpTransport(self.toolset, self.limits, self.environ, self.deadline)
        return self._mcp

    @cached_property
    def functions(self) -> FunctionTransport:
        """The run's transport for Python functions of the host (made with the first call to
        one); it reads the gateway's deadline when it calls, as a session moves it."""
        from sandbox.gateway.functions.transport import FunctionTransport  # lazy: brings httpx (see _load)

        return FunctionTransport(self.toolset, self.limits, lambda: self.deadline)

    def _load(self) -> None:
        """Import what serving calls takes (jsonschema, httpx, the transport) and make the client,
        once per process and before a call's clock starts: a run that makes no call never pays
        for them, and the first call's ``duration_ms`` is the call's own."""
        # lazy, on purpose: jsonschema and httpx (with the transport) cost a few hundred ms of
        # imports, and tests/test_startup.py holds that a run with no call never loads them
        import jsonschema  # noqa: F401

        import sandbox.gateway.http.transport  # noqa: F401

        _ = self.client
        _LOADED.append(True)

    def next_program(self, deadline: float | None) -> None:
        """Serve the next snippet of a sandbox session (``sandbox/session/interpreter.py``): a call log of
        its own and its own deadline, while the budget (``max_calls``), the transports and their
        cookies go on for the whole session."""
        self.deadline = deadline
        self.calls = []
        self._logged = 0  # the host keeps one snippet's call log at a time
        self.gate.next_attempt()  # a snippet that repeats an earlier one's write meets it in the ledger
        for transport in (self._http, self._mcp):
            if transport is not None:
                transport.deadline = deadline

    # -- the one entry point ------------------------------------------------------------------

    def call(self, tool: Any, args: Any, *, line: Any = None, col: Any = None) -> CallOutcome:
        """Serve one call (never raises for anything the program sent)."""
        if not _LOADED:
            self._load()
        from sandbox.gateway.http.transport import SendFailure  # lazy: loaded by _load just above, with httpx

        line = line if isinstance(line, int) and not isinstance(line, bool) else None
        col = col if isinstance(col, int) and not isinstance(col, bool) else None
        spec = self.toolset.tools.get(tool) if isinstance(tool, str) else None
        # A forged frame may name a "tool" of megabytes: the log and every message keep a head of it.
        name = tool if spec is not None else (tool if isinstance(tool, str) else repr(tool))[:200]
        started = time.perf_counter()
        record = ToolCall(tool=name, args=args if isinstance(args, dict) else {"_": args},
                          method=spec.method.upper() if spec else "", path=spec.path if spec else "",
                          status=None, ok=False, line=line, duration_ms=0.0, col=col)
        write, why = self.gate.verdict(spec) if spec is not None else (False, "")
        record.write = write
        with self._lock:
            self._attempts += 1
            over = self._attempts > self.limits.max_calls
            if over:
                self.budget_exceeded = True
        reply: Reply | None = None
        sending: Sending | None = None
        try:
            if over:
                message = (f"{name}: call budget exhausted: the program may make at most "
                           f"{self.limits.max_calls} tool calls")
                record.error, record.failure = message, "budget"
                record.outcome = "refused" if write else None
                return CallOutcome(False, error={"message": message, "status": None, "kind": "CallBudget",
                                                 "failure": "budget"})
            if spec is None:
                raise ToolError(f"{name}: no such tool", tool=name)
            if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
                raise ToolError(f"{name}: arguments must be keyword arguments", tool=name)
            resend = args.get(RESEND_ARGUMENT) is True and RESEND_ARGUMENT not in spec.properties
            args, extra_query = self._split(spec, args)
            args = _wire_names_to_python(spec, args)
            planned = self.gate.plan(spec, args, extra_query, why, resend=resend) if write else None
            if planned is not None:
                args = planned.args  # with the derived Idempotency-Key, when the operation declares one
            try:
                self._validate(spec, args, record)
            except ValidationCut as cut:  # only the deadline gets here: the run is over
                message = f"{name}: {cut}"
                record.error, record.failure = message, "timeout"
                record.outcome = "refused" if write else None
                return CallOutcome(False, error={"message": message, "status": None, "kind": "ToolError",
                                                 "failure": "timeout", "data": None, "headers": {}})
            if planned is not None:
                admission = self.gate.admit(planned)
                self._wait(admission.waited)
                if admission.action == "replay":
                    assert admission.entry is not None
                    return self._replay(admission.entry, record)
                if admission.action == "refuse":
                    record.outcome, record.failure = "refused", "refused"
                    reason = admission.refused or "refused"
                    raise ToolError(reason if reason.startswith(f"{name}:") else f"{name}: not sent: {reason}",
                                    tool=name)
                sending = Sending(admission.entry)
                record.outcome = "unknown"  # in flight: a run cut off here reports it so
            if planned is not None:
                hop_check: HopCheck | None = self._hop_check(planned)
            elif spec.method.upper() not in READ_METHODS and spec.method.upper() != "MCP":
                # Marked read-only, yet its method repeats its body on a 307/308: a guard still
                # sees where a redirect would take it.
                hop_check = self._hop_check(self.gate.plan_read(spec, args, extra_query), marked_read=True)
            else:
                hop_check = None
            reply = self._tapped(spec, args, extra_query, hop_check)
            reply.data, record.redacted = self._scrub(reply.data, reply.raw)
            record.redacted += reply.redacted  # taken out before it got here (a replayed answer)
            self._scrub_reply(reply, record)
            record.status, record.response, record.headers = reply.status, reply.data, reply.headers
            record.redirects = reply.redirects
            if sending is not None:
                # A transport without status codes (an MCP server, a Python function) answered:
                # its failures raise, so an answer is a write done.
                answered = reply.status is None
                record.outcome = "done" if answered else outcome_of_status(reply.status, reply.data)
                ok_status = answered or (reply.status is not None and 200 <= reply.status < 300)
                self.gate.settle(sending.entry, record.outcome, status=reply.status, data=reply.data,
                                 headers=reply.headers, target=_target(reply.redirects),
                                 error=None if ok_status else f"HTTP {reply.status}: {_api_error_text(reply.data)}")
                sending.settled = True
            if reply.status is not None and not 200 <= reply.status < 300:
                refused = reply.redirects[-1] if reply.redirects and not reply.redirects[-1]["followed"] else None
                if refused is not None:
                    record.failure = "redirect"
                    where = f" to {refused['location']}" if refused["location"] else ""
                    raise ToolError(f"{name}: HTTP {reply.status} redirect{where} not followed: {refused['reason']}",
                                    tool=name, status=reply.status)
                record.failure = "http"
                raise ToolError(f"{name}: HTTP {reply.status}: {_api_error_text(reply.data)}", tool=name,
                                status=reply.status)
            record.ok = True
            return CallOutcome(True, data=reply.data, status=reply.status, headers=reply.headers)
        except ToolError as exc:
            message = self._scrub_text(exc.message, record)
            record.error = message
            if isinstance(exc, SendFailure):
                record.failure = exc.failure
                record.redirects = self._scrub_hops(exc.redirects, record)
            record.failure = record.failure or "arguments"
            record.status = record.status if record.status is not None else exc.status
            if sending is not None and not sending.settled:
                record.outcome = _failure_outcome(record.failure, record.status)
                self.gate.settle(sending.entry, record.outcome, status=record.status, error=message)
                sending.settled = True
            return CallOutcome(False, error={
                "message": message, "status": exc.status, "kind": "ToolError", "failure": record.failure,
                "data": reply.data if reply is not None else None,
                "headers": reply.headers if reply is not None else {}}, status=exc.status,
                headers=reply.headers if reply is not None else None)
        except Exception as exc:
            # Arguments that passed validation can still fail to encode (e.g. a float that is not
            # JSON); that is the call's failure, not the host's: the run must go on and report it.
            message = self._scrub_text(
                f"{name}: the request could not be made: {type(exc).__name__}: {str(exc)[:200]}", record)
            record.error, record.failure = message, "arguments"
            if sending is not None and not sending.settled:
                record.outcome = "failed"  # nothing left the host
                self.gate.settle(sending.entry, "failed", status=None, error=message)
                sending.settled = True
            return CallOutcome(False, error={"message": message, "status": None, "kind": "ToolError",
                                             "failure": "arguments", "data": None, "headers": {}})
        finally:
            # A write still in flight here (Ctrl-C, a kill) stays ``unknown``, in the log and in the
            # ledger (recorded before it was sent).
            record.duration_ms = (time.perf_counter() - started) * 1000
            self._keep(record)

    # -- writes -----------------------------------------------------------------------------------

    @property
    def gate(self) -> WriteGate:
        """The run's write gate (``sandbox.gateway.writes.gate``): the policy and the task's ledger."""
        if self._gate is None:
            self._gate = WriteGate(self.toolset.writes, self.toolset.collections, self.toolset.base_url_for)
        return self._gate

    @gate.setter
    def gate(self, gate: WriteGate) -> None:
        self._gate = gate

    def _wait(self, seconds: float) -> None:
        """An approver took ``seconds``: the run's deadline moves by as much (a person deciding is
        not the program's time)."""
        if seconds <= 0:
            return
        self.waited += seconds
        if self.deadline is not None:
            self.deadline += seconds
            for transport in (self._http, self._mcp):
                if transport is not None:
                    transport.deadline = self.deadline

    def _hop_check(self, planned: Planned, *, marked_read: bool = False) -> HopCheck:
        """Asked before a redirect would send the write again elsewhere: the policy (a guard, an
        approver) must admit the new target too. It sees the target's query with the host's
        credentials taken out."""

        def check(method: str, url: str, hop: int) -> tuple[str | None, float]:
            base, _, query = url.partition("?")
            decision = self.gate.decide(planned, hop, base, method, query=self._redacted_text(query),
                                        marked_read=marked_read)
            self._wait(decision.waited)
            return decision.refused, decision.waited

        return check

    def _replay(self, entry: Entry, record: ToolCall) -> CallOutcome:
        """The answer an identical write got earlier in the task, not sent again."""
        record.outcome = "replayed"
        record.status, record.response, record.headers = entry.status, entry.data, dict(entry.headers)
        if not entry.whole:
            record.warnings.append("the recorded answer was too large to keep whole: the program got a summary")
        if entry.error:
            message = (f"{record.tool}: {entry.error} (an identical write earlier in this task was applied; "
                       "it was not sent again)")
            record.error, record.failure = message, "response"
            return CallOutcome(False, error={"message": message, "status": entry.status, "kind": "ToolError",
                                             "failure": "response", "data": None, "headers": dict(entry.headers)},
                               status=entry.status, headers=dict(entry.headers))
        record.ok = True
        return CallOutcome(True, data=entry.data, status=entry.status, headers=dict(entry.headers))

    def _keep(self, record: ToolCall) -> None:
        """Log ``record``, keeping its arguments, response and headers whole up to
        ``HostBounds.log_value_bytes`` each and a bounded summary beyond (``record.summarized``
        says which, and the size they had); once the run's log holds ``HostBounds.log_bytes``,
        every further one is summarised to ``LOG_TAIL_BYTES``. The runner already has the whole
        response: the log is for the result, attribution and reflection."""
        with self._lock:
            limit = self.bounds.log_value_bytes if self._logged < self.bounds.log_bytes else LOG_TAIL_BYTES
        # Messages quote what the program sent; the log keeps their head.
        if record.error is not None and len(record.error) > _MAX_LOGGED_MESSAGE:
            record.error = record.error[:_MAX_LOGGED_MESSAGE] + "..."
        record.warnings = [w if len(w) <= _MAX_LOGGED_MESSAGE else w[:_MAX_LOGGED_MESSAGE] + "..."
                           for w in record.warnings]
        kept = 0
        for name in ("args", "response", "headers"):
            value, size, held = summarize(getattr(record, name), limit)
            if held < size:
                setattr(record, name, value)
                record.summarized[name] = size
            kept += held
        with self._lock:
            self._logged += kept
            self.calls.append(record)

    def _exchange(self, tool: Tool, args: dict[str, Any], extra_query: dict[str, Any] | None,
                  hop_check: HopCheck | None = None) -> Reply:
        """Send one validated call and return the API's reply. This is the one step a transport
        implements: a tool of an MCP server goes to the MCP transport, any other to HTTP;
        everything around it (budget, validation, writes, redaction, the call log) is the same.
        ``hop_check`` is asked before a redirect would repeat a write elsewhere."""
        if tool.method == "MCP":
            return self.mcp.send(tool, args, extra_query)
        if tool.method == "PYTHON":  # protocols.functions.FUNCTION_METHOD: a function of the host
            return self.functions.send(tool, args, extra_query)
        return self.http.send(tool, args, extra_query, hop_check=hop_check)

    def _tapped(self, tool: Tool, args: dict[str, Any], extra_query: dict[str, Any] | None,
                hop_check: HopCheck | None = None) -> Reply:
        """``_exchange`` through the toolset's taps (``sandbox.gateway.taps``: record, replay, tracing)."""
        taps = self.toolset.taps
        if not taps:
            return self._exchange(tool, args, extra_query, hop_check)
        def send_through(index: int) -> Reply:
            if index == len(taps):
                return self._exchange(tool, args, extra_query, hop_check)
            reply: Reply = taps[index].exchange(Exchange(
                tool, args, extra_query, lambda: send_through(index + 1), self._redacted, self._redacted_text))
            return reply

        return send_through(0)

    def _redacted(self, reply: Reply) -> Reply:
        """A copy of ``reply`` with the host's secrets taken out (what a recording may keep), and in
        ``redacted`` how many; ``reply`` itself is left as it is (the gateway redacts and counts it)."""
        out = copy.copy(reply)
        redactor = self.redactor()
        if redactor:
            plan = redactor.plan(reply.raw) if reply.data is not None else None
            if plan is not None:
                out.data, out.redacted = redactor.data(copy.deepcopy(reply.data), plan)
            out.headers, n = redactor.headers(reply.headers)
            out.redirects = [{k: redactor.text(v)[0] if isinstance(v, str) else v for k, v in h.items()}
                             for h in reply.redirects]
            out.redacted += n + sum(redactor.text(v)[1] for h in reply.redirects for v in h.values()
                                    if isinstance(v, str))
        return out

    def _redacted_text(self, text: str) -> str:
        redactor = self.redactor()
        return redactor.text(text)[0] if redactor else text

    # -- secrets --------------------------------------------------------------------------------

    def redactor(self) -> Redactor:
        """Every credential value this run may add (read on the host when first needed)."""
        if self._redactor is None:
            values = [self.environ.get(env_var(source)) for source in self.toolset.credentials.values()]
            if any(c.mcp_server is not None for c in self.toolset.collections):
                # the env values given to MCP servers (lazy: the MCP transport brings httpx)
                from sandbox.gateway.mcp.transport import secret_values

                values += secret_values(self.toolset, self.environ)
            self._redactor = Redactor(v for v in values if v)
        return self._redactor

    def _scrub(self, body: Any, raw: bytes) -> tuple[Any, int]:
        redactor = self.redactor()
        if not redactor or body is None:
            return body, 0
        return redactor.scrub(body, raw)

    def _scrub_text(self, text: str, record: ToolCall) -> str:
        redactor = self.redactor()
        if not redactor:
            return text
        text, n = redactor.text(text)
        record.redacted += n
        return text

    def _scrub_reply(self, reply: Reply, record: ToolCall) -> None:
        """Headers (names and values) and redirect locations carry secrets too (a ``Location`` with
        the query key, a header named after it)."""
        redactor = self.redactor()
        if not redactor:
            return
        reply.headers, n = redactor.headers(reply.headers)
        record.redacted += n
        reply.redirects = self._scrub_hops(reply.redirects, record)

    def _scrub_hops(self, hops: list[dict[str, Any]], record: ToolCall) -> list[dict[str, Any]]:
        if not self.redactor():
            return hops
        return [{k: self._scrub_text(v, record) if isinstance(v, str) else v for k, v in h.items()} for h in hops]

    # -- validation ---------------------------------------------------------------------------

    def _split(self, tool: Tool, args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The tool's own arguments, and ``extra_query`` (checked: names to scalars, lists, objects).
        A reserved name the tool itself declares (a collection stored before they were reserved)
        stays the tool's."""
        own = tool.properties
        extra = args.get("extra_query") if "extra_query" not in own else None
        rest = {k: v for k, v in args.items() if k not in RESERVED_ARGUMENTS or k in own}
        if extra is None:
            return rest, None
        if not isinstance(extra, dict) or not all(isinstance(k, str) and k for k in extra):
            raise ToolError(f"{tool.name}: extra_query must be a dict of query parameter names to values",
                            tool=tool.name, parameter="extra_query")
        return rest, extra

    def _validate(self, tool: Tool, args: dict[str, Any], record: ToolCall) -> None:
        """Check ``args`` as the tool's validation mode says (``sandbox.gateway.validation``: bounded work).
        Arguments too costly to check are refused in ``strict`` mode and sent unchecked, with a
        warning, in ``warn`` mode; ``ValidationCut`` escapes only when the run's deadline passed."""
        mode = self.toolset.validation_for(tool.name)
        if mode == "off":
            return
        try:
            found, note = self._problems(tool, args, first_only=mode == "strict")
        except ValidationCut as cut:
            if cut.reason == "deadline":
                raise
            message = f"{tool.name}: the arguments are too large to check: {cut}"
            if mode == "strict":
                raise ToolError(f"{message}; send fewer values per call, or run this collection with "
                                "validation warn or off", tool=tool.name) from None
            record.warnings.append(f"{message}; they were sent unchecked")
            return
        if note:
            record.warnings.append(note)
        if not found:
            return
        message, param = found[0]
        if mode == "strict":
            raise ToolError(message, tool=tool.name, parameter=param)
        record.warnings += [m for m, _ in found]

    def _problems(self, tool: Tool, args: dict[str, Any], *,
                  first_only: bool) -> tuple[list[tuple[str, str | None]], str | None]:
        """``sandbox.gateway.validation.problems`` under this run's bounds and deadline."""
        return problems(tool, args, first_only=first_only, bounds=self.bounds, deadline=self.deadline)


def _wire_names_to_python(tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` with the API's own names (``userId``) turned into the tool's Python names
    (``user_id``), before validation: one name-normalising step, nothing else. A value given under
    both names is refused (which one was meant?)."""
    props = tool.properties
    if all(k in props for k in args):
        return args
    aliases = tool.wire_aliases()
    if not aliases or not any(k in aliases for k in args):
        return args
    out: dict[str, Any] = {}
    for key, value in args.items():
        name = aliases.get(key) if key not in props else None
        if name is None:
            out[key] = value
            continue
        if name in args:
            raise ToolError(f"{tool.name}: {key!r} and {name!r} are the same argument ({key!r} is its name in the "
                            f"API, {name!r} in atc); give it once", tool=tool.name, parameter=name)
        out[name] = value
    return out
