"""A scripted OpenAI-compatible chat server on 127.0.0.1, driven through the real ``openai`` client.

``POST /v1/chat/completions`` answers from a queue of scripted replies: a string (the assistant's
text), a ``Reply`` (an HTTP status with an error body, e.g. 429 or 500), or a callable taking the
request body and returning either (for routing many concurrent tasks by a marker in their text).
A ``router`` may be set instead of a queue. Every request body is recorded (``requests``), and
every answer carries ``usage`` (tokens estimated as characters / 4), so tests can check what the
model was asked and what atc counted.

Function calling: a ``Reply`` may carry ``tool_calls`` (build them with ``call(name, arguments)``;
arguments given as a string are sent verbatim, so a test can send malformed JSON), answered
with ``finish_reason: "tool_calls"``; ``offered(i)`` names the functions request ``i`` offered.
``delay`` (of the server: every answer; of a ``Reply``: that one) holds an answer back, as a
model's latency would, and ``max_in_flight`` is the largest number of requests the server was
answering at once, so tests can see that agents really run concurrently.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.fakes.serving import LoopbackServer

__all__ = ["Reply", "ScriptedOpenAI", "call"]


@dataclass(frozen=True)
class Reply:
    """A scripted HTTP answer other than a plain text completion (``status`` >= 400 gives an error
    body; ``tool_calls`` makes it a function-calling answer; ``delay`` holds it back)."""

    status: int = 200
    text: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    tool_calls: tuple[dict[str, Any], ...] = ()
    delay: float = 0.0


_CALL_IDS = iter(range(1, 1 << 62))
_CALL_LOCK = threading.Lock()


def call(name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None) -> dict[str, Any]:
    """One tool call of a scripted reply, in the OpenAI wire form."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    if id is None:
        with _CALL_LOCK:
            id = f"call_{next(_CALL_IDS)}"
    return {"id": id, "type": "function", "function": {"name": name, "arguments": args}}


Script = str | Reply | Callable[[dict[str, Any]], "str | Reply"]


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ScriptedOpenAI(LoopbackServer):
    """The server. Use as a context manager; ``base_url`` ends in ``/v1`` as clients expect."""

    def __init__(self, replies: list[Script] | None = None, *, router: Callable[[dict[str, Any]], str | Reply] | None = None,
                 delay: float = 0.0) -> None:
        self.queue: deque[Script] = deque(replies or [])
        self.router = router
        self.delay = delay  # seconds each answer takes (a model's latency, for benchmarks)
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- scripting -------------------------------------------------------------------------

    def push(self, *replies: Script) -> None:
        with self._lock:
            self.queue.extend(replies)

    def request_text(self, index: int) -> str:
        """All message contents of the ``index``-th request, joined: what the model was shown."""
        return "\n".join(str(m.get("content") or "") for m in self.requests[index]["messages"])

    def offered(self, index: int) -> list[str]:
        """The names of the functions the ``index``-th request offered (``tools``)."""
        return [t.get("function", {}).get("name", "") for t in self.requests[index].get("tools") or []]

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            item: Script | None = self.queue.popleft() if self.queue else None
        if item is None and self.router is not None:
            item = self.router
        if item is None:
            return Reply(400, "the scripted server has no reply left")
        if callable(item) and not isinstance(item, (str, Reply)):
            item = item(body)
        return item if isinstance(item, Reply) else Reply(200, item)

    # -- serving ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> ScriptedOpenAI:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # headers and body go out in two writes: without this, Nagle's algorithm and the
                # client's delayed ACK add ~40 ms to every answer (benchmarks time many of them)
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _send(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    return self._send(400, {"error": {"message": "body is not JSON", "type": "invalid_request"}})
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    reply = server._next(body)
                    if reply.delay or server.delay:
                        time.sleep(reply.delay or server.delay)
                finally:
                    with server._lock:
                        server.in_flight -= 1
                if reply.status >= 400:
                    return self._send(reply.status, {"error": {"message": reply.text or f"scripted {reply.status}",
                                                               "type": "scripted", "code": reply.status}},
                                      reply.headers)
                prompt = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
                message: dict[str, Any] = {"role": "assistant", "content": reply.text}
                if reply.tool_calls:
                    message = {"role": "assistant", "content": reply.text or None, "tool_calls": list(reply.tool_calls)}
                completion = reply.text + "".join(json.dumps(c) for c in reply.tool_calls)
                self._send(200, {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                                 "message": message}],
                    "usage": {"prompt_tokens": _tokens(prompt), "completion_tokens": _tokens(completion),
                              "total_tokens": _tokens(prompt) + _tokens(completion)},
                }, reply.headers)

        self._serve(Handler)
        return self
