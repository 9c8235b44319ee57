"""MCP over HTTP (streamable HTTP, and the older SSE transport), read under bounds (issue 29).

The SDK's HTTP transports take an ``httpx2.AsyncClient``; the one atc gives them
(``bounded_client``) has a transport of its own in front of the network, ``BoundedTransport``,
that judges every answer before the SDK reads it (``sandbox.gateway.mcp.bounds``):

- a JSON body (the answer to one POSTed request) is read up to its request's byte bound and its
  values counted; a body over either is replaced by atc's JSON-RPC error for that request;
- an event stream (``text/event-stream``: the answer to a POST, the GET stream of server
  messages, the SSE transport's stream of every answer) is passed on an event at a time, each
  event held up to its bound and counted; an event over them is replaced by atc's error for its
  request (a POST's own request; on a GET stream the one its id names, or every one waiting),
  and a POST's stream ends there.

Bodies are asked for uncompressed (``Accept-Encoding: identity``): a compressed one could not be
bounded before it is inflated, and one that comes compressed anyway is refused. The SDK's own cap
on SSE events (1 MB, which would refuse results the run's limits allow) is lifted: this one applies.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2

from sandbox.gateway.mcp.bounds import (
    HEAD_BYTES,
    MAX_DEPTH,
    TOO_DEEP,
    Ledger,
    MessageBounds,
    Pieces,
    error_json,
    message_id,
    refusal,
    too_large,
)
from sandbox.jsonbounds import max_depth

__all__ = ["BoundedTransport", "bounded_client", "GET_EVENT_BYTES"]

#: The SDK's timeouts for MCP over HTTP: 30 s to connect and send, 300 s between two reads of a stream.
_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
#: The most of one event of a GET stream that is passed on (the SDK's cap there is 1 MB).
GET_EVENT_BYTES = (1 << 20) - 1024

_TAIL = 512


def bounded_client(ledger: Ledger, *, headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
                   auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
    """The HTTP client of one MCP connection (see the module docstring); the arguments are those
    of the SDK's client factories."""
    return httpx2.AsyncClient(transport=BoundedTransport(ledger), timeout=timeout or _TIMEOUT, headers=headers,
                              auth=auth)


def _event(data: bytes) -> bytes:
    return b"event: message\ndata: " + data + b"\n\n"


def _data(event: bytes) -> bytes:
    """The data of one SSE event (its ``data:`` lines joined)."""
    lines = [ln for ln in event.split(b"\n") if ln.startswith(b"data:")]
    return b"\n".join(ln[6:] if ln.startswith(b"data: ") else ln[5:] for ln in lines)


class _Events(httpx2.AsyncByteStream):
    """An event stream passed on an event at a time, each within bounds (``rid``: the request a
    POST's stream answers, None for a GET stream, whose events name their own)."""

    def __init__(self, inner: Any, ledger: Ledger, rid: Any) -> None:
        self._inner = inner
        self._ledger = ledger
        self._rid = rid

    def _id(self, data: bytes, tail: bytes = b"") -> Any:
        return self._rid if self._rid is not None else message_id(data[:HEAD_BYTES], tail)

    def _limit(self, head: bytes) -> tuple[Any, int]:
        rid = self._id(_data(head))
        limit = self._ledger.reading_limit(rid)
        # The SDK reads a GET stream with its own 1 MB cap per event, and one past it ends the
        # stream (with every call of the older SSE transport): refused here first, the stream lives.
        return rid, limit if self._rid is not None else min(limit, GET_EVENT_BYTES)

    def _problem(self, data: bytes, bounds: MessageBounds) -> str | None:
        reason = refusal(data, bounds)
        if reason is None and self._rid is None and data.count(b"[") + data.count(b"{") > MAX_DEPTH \
                and max_depth(data) > MAX_DEPTH:
            # On a GET stream the SDK's parser would stop at this depth too, with no request to tell
            reason = TOO_DEEP
        return reason

    def _refused(self, rid: Any, reason: str) -> bytes:
        return b"".join(_event(error_json(target, reason)) for target in self._ledger.refuse(rid, reason))

    async def __aiter__(self) -> AsyncIterator[bytes]:
        events = Pieces(b"\n\n", self._limit)
        carry = b""
        try:
            async for chunk in self._inner:
                # SSE lines end in CRLF or LF (a lone CR, which no server sends, makes one long event)
                chunk = (carry + chunk).replace(b"\r\n", b"\n")
                carry = b"\r" if chunk.endswith(b"\r") else b""
                for found in events.feed(chunk[:-1] if carry else chunk):
                    if found[0] == "over":
                        bounds = self._ledger.bounds(found[1])
                        big = too_large(bounds, found[2]) if found[2] >= bounds.bytes else (
                            f"the MCP server's answer is larger than {found[2]} bytes, more than an event of its SSE "
                            "stream may hold")
                        out, end = self._refused(found[1], big), True
                    else:
                        data = _data(found[1])
                        rid = self._id(data, data[-_TAIL:])
                        problem = self._problem(data, self._ledger.bounds(rid)) if data else None
                        if problem is None:
                            if self._rid is None and rid is not None:
                                self._ledger.answered(rid)
                            out, end = found[1] + b"\n\n", False
                        else:
                            out, end = self._refused(rid, problem), True
                    if out:
                        yield out
                    if end and self._rid is not None:
                        return  # a POST's stream answers one request: that answer is given
        finally:
            if self._rid is not None:
                self._ledger.answered(self._rid)

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """The network, with every answer judged before the SDK reads it (see the module docstring)."""

    def __init__(self, ledger: Ledger, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self._ledger = ledger
        self._inner = inner or httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["accept-encoding"] = "identity"
        rid = None
        if request.method == "POST" and b'"method"' in request.content[:HEAD_BYTES]:
            # A request of ours (an answer of ours to the server's request carries its id, not ours)
            rid = message_id(request.content[:HEAD_BYTES])
        response = await self._inner.handle_async_request(request)
        headers = httpx2.Headers(response.headers)
        bounds = self._ledger.bounds(rid)
        coding = headers.get("content-encoding", "identity").strip().lower()
        if coding not in ("", "identity"):
            await response.aclose()
            reason = (f"the MCP server answered compressed ({coding}) though asked not to: atc cannot bound what "
                      "that inflates to")
            return self._replaced(response, request, headers, rid, reason)
        if headers.get("content-type", "").lower().startswith("text/event-stream"):
            return httpx2.Response(response.status_code, headers=headers, request=request,
                                   stream=_Events(response.stream, self._ledger, rid), extensions=response.extensions)
        body, refused = await self._read(response, bounds)
        if refused is not None:
            return self._replaced(response, request, headers, rid, refused)
        if rid is not None and body.strip():  # the answer itself (a 202 says it comes on the GET stream)
            self._ledger.answered(rid)
        return httpx2.Response(response.status_code, headers=headers, request=request, content=body,
                               extensions=response.extensions)

    async def _read(self, response: httpx2.Response, bounds: MessageBounds) -> tuple[bytes, str | None]:
        """The body, or why it is refused (read no further than the byte bound)."""
        body = bytearray()
        try:
            async for chunk in response.stream:  # type: ignore[union-attr]
                body += chunk
                if len(body) > bounds.bytes:
                    return b"", too_large(bounds)
        finally:
            await response.aclose()
        return bytes(body), refusal(body, bounds)

    def _replaced(self, response: httpx2.Response, request: httpx2.Request, headers: httpx2.Headers, rid: Any,
                  reason: str) -> httpx2.Response:
        """The answer with its body replaced by atc's error for the request (none without one)."""
        targets = self._ledger.refuse(rid, reason) if rid is not None else []
        body = error_json(targets[0], reason) if targets else b""
        for name in ("content-encoding", "content-length", "transfer-encoding"):
            headers.pop(name, None)
        headers["content-type"] = "application/json"
        return httpx2.Response(response.status_code, headers=headers, request=request, content=body,
                               extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()
