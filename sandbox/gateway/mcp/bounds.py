"""What an MCP server's messages may cost the host, judged on their raw bytes before the SDK parses
them (issue 29).

The SDK decodes a whole message into Python objects first: one answer of a million empty content
items cost the atc process 2 GB before any limit of atc's could look at it. So every transport
reads the server's bytes itself (``sandbox.gateway.mcp.stdio``, ``sandbox.gateway.mcp.httpbounds``), holds at most
``MessageBounds.bytes`` of one message (the rest is read and dropped), counts its JSON values
before anything is decoded (``sandbox.jsonbounds.count_values``) and hands the SDK only messages
within bounds. Depth needs no count of its own: the SDK's parser stops at 200 levels at once, and
a message it cannot parse is attributed like a refused one.

A refused message never reaches the SDK; the request it answers gets an error instead, with this
module's code (``REFUSED``), and the call's ``CallState.refused`` says why (the connection turns
that into a ``ToolError`` of failure ``response``). Which request? Each connection keeps a
``Ledger`` of its requests that await an answer, with the bounds of each (a call's are those of
its run's limits, ``MessageBounds.of``; the handshake's and listings' ``DEFAULT``), filled by a
wrapper of the session's write stream (``TrackedWriter``) from the calling task's ``CURRENT``.
A message names its request by its ``id``, found without decoding: at the top level of its first
bytes (``{"jsonrpc":"2.0","id":1,...``, as the Python SDK writes) or as its last member
(``...,"id":1}``, as the TypeScript SDK writes). A message whose id cannot be found is charged to
every request of the connection that waits (they all wait on the server that sent it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from sandbox.api import Limits
from sandbox.hostbounds import HostBounds
from sandbox.jsonbounds import count_values

__all__ = ["MessageBounds", "CallState", "CURRENT", "DEFAULT", "REFUSED", "Ledger", "TrackedWriter", "Pieces",
           "message_id", "refusal", "too_large", "error_json", "HEAD_BYTES", "parse_problem", "MAX_DEPTH", "TOO_DEEP"]

#: The JSON-RPC error code of atc's answer to a request whose answer it refused (the range of
#: implementation-defined server errors; the SDK uses -32000 and -32001).
REFUSED = -32090
#: What a message may hold beyond the result the run's ``max_response_bytes`` allows (the JSON-RPC
#: envelope, the escaping of a text item).
ENVELOPE_BYTES = 64 << 10
#: How much of a message's start is scanned for its id (and kept of a message too large to keep).
HEAD_BYTES = 64 << 10
_TAIL_BYTES = 512


@dataclass(frozen=True)
class MessageBounds:
    """The most one message may hold: ``bytes`` and JSON ``values``; ``basis`` says whose bounds
    they are, for messages."""

    bytes: int
    values: int
    basis: str

    @classmethod
    def of(cls, limits: Limits) -> MessageBounds:
        """The bounds of a call of a run with ``limits`` (those of its HTTP responses)."""
        return cls(limits.max_response_bytes + ENVELOPE_BYTES, HostBounds.of(limits).frame_values,
                   f"a run with --memory {limits.memory_mb}")


#: Bounds of what no call asked for: the handshake, ``tools/list`` pages, notifications while no
#: call waits (a listing of thousands of tools fits; the values are those of a --memory 256 run).
DEFAULT = MessageBounds(16 << 20, 256 * 8192, "atc's bounds for MCP listings")


@dataclass(eq=False)
class CallState:
    """One request's bounds, and why its answer was refused (None: it was not)."""

    bounds: MessageBounds = DEFAULT
    refused: str | None = None


#: The state of the call the current task makes (set by ``McpServers.call``).
CURRENT: ContextVar[CallState | None] = ContextVar("atc_mcp_call", default=None)


def _key(rid: Any) -> Any:
    """A request id as the SDK correlates it ("7" and 7 are one id)."""
    if isinstance(rid, str):
        try:
            return int(rid)
        except ValueError:
            return rid
    return rid


@dataclass
class Ledger:
    """The requests of one connection that wait for an answer (id -> the id as sent, its state).
    Used from the connection's event loop only."""

    _waiting: dict[Any, tuple[Any, CallState]] = field(default_factory=dict)

    def sent(self, rid: Any, state: CallState) -> None:
        self._waiting[_key(rid)] = (rid, state)

    def answered(self, rid: Any) -> None:
        self._waiting.pop(_key(rid), None)

    def forget(self, state: CallState) -> None:
        """Drop the entries of a call that ended (answered, timed out or cancelled)."""
        for key in [k for k, (_, s) in self._waiting.items() if s is state]:
            del self._waiting[key]

    def state(self, rid: Any) -> CallState | None:
        found = self._waiting.get(_key(rid)) if rid is not None else None
        return found[1] if found else None

    def bounds(self, rid: Any) -> MessageBounds:
        """The bounds of the message with id ``rid``: its request's; for a message no waiting
        request sent (a notification, an unknown id), the strictest of those waiting."""
        state = self.state(rid)
        if state is not None:
            return state.bounds
        waiting = [s.bounds for _, s in self._waiting.values()]
        return min(waiting, key=lambda b: b.values) if waiting else DEFAULT

    def reading_limit(self, rid: Any) -> int:
        """Bytes to hold of a message while its end is not there yet: its request's bound when its
        id is known, else the largest of those waiting (its id may come last)."""
        state = self.state(rid)
        if state is not None:
            return state.bounds.bytes
        return max((s.bounds.bytes for _, s in self._waiting.values()), default=DEFAULT.bytes)

    def refuse(self, rid: Any, reason: str) -> list[Any]:
        """Record ``reason`` on the request ``rid`` (on every waiting one when ``rid`` is None: an
        answer that names no request) and stop waiting for it; returns the ids (as sent) to answer
        with an error. An id no request waits for (a late answer) refuses nothing."""
        if rid is None:
            targets = list(self._waiting.values())
        else:
            found = self._waiting.get(_key(rid))
            targets = [found] if found else []
        for sent, state in targets:
            state.refused = state.refused or reason
            self._waiting.pop(_key(sent), None)
        return [sent for sent, _ in targets]


# -- reading a message without decoding it -----------------------------------------------------------

_TOKEN = re.compile(rb'\s*(?:("(?:[^"\\]|\\.)*")|([\[\]{}:,])|([^\s\[\]{}:,"]+))', re.S)
_TAIL_ID = re.compile(rb',\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*}\Z', re.S)


def _id_value(token: bytes) -> Any:
    if token.isdigit():
        return int(token)
    try:
        value = json.loads(token)
    except ValueError:
        return None
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def _head_id(head: bytes) -> Any:
    """The ``id`` member of the top-level object, if it is among the tokens of ``head``."""
    depth, pos, key, after_colon = 0, 0, None, False
    while pos < len(head):
        match = _TOKEN.match(head, pos)
        if match is None:
            return None  # a string that goes on past the head, or no JSON at all
        pos = match.end()
        string, punct, scalar = match.groups()
        if punct in (b"{", b"["):
            if depth == 0 and punct != b"{":
                return None
            depth += 1
            after_colon = False
        elif punct in (b"}", b"]"):
            depth -= 1
            if depth <= 0:
                return None
        elif depth != 1:
            continue
        elif punct == b":":
            after_colon = True
        elif punct == b",":
            key, after_colon = None, False
        elif after_colon:  # a member's value
            if key == b'"id"':
                return _id_value(string or scalar)
            after_colon = False
        elif string is not None:
            key = string
    return None


def message_id(head: bytes | bytearray, tail: bytes | bytearray = b"") -> Any:
    """The id of a JSON-RPC message from its first and last bytes (see the module docstring);
    None when neither shows one."""
    # The tail first: a few hundred bytes settle it for a message whose id comes last, where the
    # head's tokens would be walked to its end. Only from the last '"id"' on.
    end = bytes(tail[-_TAIL_BYTES:]).rstrip()
    at = end.rfind(b'"id"') if end.endswith(b"}") else -1
    match = _TAIL_ID.match(end, end.rfind(b",", 0, at)) if at > 0 else None
    if match:
        return _id_value(match.group(1))
    return _head_id(bytes(head[:HEAD_BYTES]))


class Pieces:
    """Splits a byte stream at ``separator`` (a newline between stdio messages, a blank line
    between SSE events) holding at most a limit of one piece: ``limit(head)`` gives, from a
    piece's first ``HEAD_BYTES``, its request id (or None) and how many bytes it may have.
    ``feed`` returns what a chunk completed: ``("whole", bytes)`` for a piece within its limit,
    ``("over", id, limit)`` once for a piece that passed it, whose rest is then dropped as it
    comes. No byte is searched twice, none is kept of a dropped piece but the separator's start."""

    def __init__(self, separator: bytes, limit: Callable[[bytes], tuple[Any, int]]) -> None:
        self._separator = separator
        self._limit_of = limit
        self._buffer = bytearray()
        self._scanned = 0  # no separator starts before this offset of the buffer
        self._limit: int | None = None
        self._rid: Any = None
        self._dropping = False

    def feed(self, chunk: bytes) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        buffer, separator = self._buffer, self._separator
        buffer += chunk
        while (end := buffer.find(separator, self._scanned)) >= 0:
            if not self._dropping and buffer[:end].strip():
                out.append(("whole", bytes(buffer[:end])))
            del buffer[:end + len(separator)]  # O(1): a bytearray drops its head in place
            self._scanned, self._limit, self._dropping = 0, None, False
        self._scanned = max(0, len(buffer) - len(separator) + 1)
        if self._dropping:
            del buffer[:self._scanned]
            self._scanned = 0
        elif len(buffer) > HEAD_BYTES:
            if self._limit is None:
                self._rid, self._limit = self._limit_of(bytes(buffer[:HEAD_BYTES]))
            if len(buffer) > self._limit:
                out.append(("over", self._rid, self._limit))
                del buffer[:self._scanned]
                self._scanned, self._dropping = 0, True
        return out


def refusal(raw: bytes | bytearray, bounds: MessageBounds) -> str | None:
    """Why a whole message may not be decoded (too many bytes or values), or None."""
    if len(raw) > bounds.bytes:
        return too_large(bounds)
    if count_values(raw, bounds.values) > bounds.values:
        return f"the MCP server's answer holds more than {bounds.values} JSON values, more than {bounds.basis} may take"
    return None


def too_large(bounds: MessageBounds, limit: int | None = None) -> str:
    """Why a message is refused for its size (``limit``: the bytes it was held to, when that is
    more than its own bounds say: its id came too late to tell)."""
    return (f"the MCP server's answer is larger than {max(bounds.bytes, limit or 0)} bytes, more than "
            f"{bounds.basis} may take")


#: The SDK's parser (pydantic's) stops at this depth of nesting.
MAX_DEPTH = 200
TOO_DEEP = f"the MCP server's answer is nested more than {MAX_DEPTH} levels deep"


def parse_problem(exc: Exception) -> str:
    """What is wrong with a message the SDK could not parse, in a few words."""
    if "recursion limit" in str(exc):
        return TOO_DEEP
    return "the MCP server's answer is not a valid JSON-RPC message"


def error_json(rid: Any, reason: str) -> bytes:
    """The JSON-RPC error atc answers a refused request with."""
    return json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": REFUSED, "message": reason}}).encode()


class TrackedWriter:
    """The session's write stream, recording each request it sends in the connection's ledger
    with the sending task's ``CURRENT`` call state (``DEFAULT`` bounds for requests no call made).
    Implements the SDK's ``WriteStream`` protocol."""

    def __init__(self, inner: Any, ledger: Ledger) -> None:
        self._inner = inner
        self._ledger = ledger

    async def send(self, item: Any, /) -> None:
        from mcp.types import JSONRPCRequest  # lazy: the optional MCP SDK

        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCRequest):
            self._ledger.sent(message.id, CURRENT.get() or CallState())
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> TrackedWriter:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc, tb)
        return result
