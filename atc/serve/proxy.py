"""Each served tool as its own MCP tool (``--proxy-tools``): the classic one-call-per-turn style,
next to ``run_program``, for hosts and tasks that want it.

A proxied call is not a way around atc: it goes through a ``sandbox.gateway.core.Gateway`` exactly as
a program's call does -- the arguments are validated against the tool's schema, credentials are
added on the host, the response is redacted -- and counts against the tool-call budgets of its
session, its client's token and the server, when it left the host (a call refused for its
arguments costs nothing). Each session has a gateway of its own for its proxied calls (cookies an API sets reach
that session's later calls only); its call log is emptied after every call, so a long session
keeps no responses in memory.

The tool's input schema is the tool's own JSON Schema (the SDK does no validation of its own for
these tools: the gateway's is the one that counts); the description is the compact protocol.
The result is the response as JSON text, or ``isError`` with the gateway's message (tool, HTTP
status, the API's own error text).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from protocols.model import Tool
from protocols.render import render_compact
from protocols.writes import is_write
from sandbox.api import Limits, Toolset
from sandbox.gateway.core import Gateway
from sandbox.gateway.writes.gate import WriteGate

__all__ = ["ProxyReply", "input_schema", "description", "read_only", "call"]


@dataclass
class ProxyReply:
    ok: bool
    text: str
    #: did the request leave the host (``ToolCall.sent``)? Only then does it cost a call.
    sent: bool = True


@dataclass
class _SessionGateway:
    gateway: Any
    lock: threading.Lock = field(default_factory=threading.Lock)


def input_schema(tool: Tool) -> dict[str, Any]:
    schema = dict(tool.parameters) if isinstance(tool.parameters, dict) else {}
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def description(tool: Tool) -> str:
    return render_compact([tool]) + "\n(A single API call through atc. To chain many calls, write one program " \
                                    "with run_program instead.)"


def read_only(tool: Tool) -> bool:
    """The MCP ``readOnlyHint`` of a proxied tool: atc's one rule (``protocols.writes``)."""
    return not is_write(tool)


def _gateway_of(state: Any, toolset: Toolset, limits: Limits) -> _SessionGateway:
    """The session's proxy gateway (made on its first proxied call; ``state`` is a ``SessionState``)."""
    with state.lock:
        if state.proxy is None:
            # The budgets are counted by Sessions.take_call/end_call; the gateway's own counter only
            # needs to never refuse first.
            state.proxy = _SessionGateway(Gateway(toolset, Limits(
                timeout=limits.timeout, max_calls=1 << 30, call_timeout=limits.call_timeout,
                max_response_bytes=limits.max_response_bytes)))
        found: _SessionGateway = state.proxy
        return found


def call(state: Any, toolset: Toolset, limits: Limits, name: str, args: dict[str, Any]) -> ProxyReply:
    """One proxied call of tool ``name`` for the session of ``state`` (blocking). ``toolset``
    carries this request's write policy (an ``ask`` asks this request's client) and the session's
    ledger: a write identical to one the session already made is answered from the ledger."""
    proxy = _gateway_of(state, toolset, limits)
    with proxy.lock:
        gateway = proxy.gateway
        if toolset.writes is not None:
            gateway.gate = WriteGate(toolset.writes, toolset.collections, toolset.base_url_for)
        outcome = gateway.call(name, args)
        logged = gateway.calls
        sent = bool(logged[-1].sent) if logged else True
        replayed = bool(logged) and logged[-1].outcome == "replayed"
        logged.clear()
    if outcome.ok:
        text = json.dumps(outcome.data, ensure_ascii=False, default=str)
        if replayed:
            text = ("(not sent again: an identical write was already made in this session; this is the answer it "
                    "got)\n" + text)
        return ProxyReply(True, text, sent)
    return ProxyReply(False, str((outcome.error or {}).get("message") or f"{name}: the call failed"), sent)
