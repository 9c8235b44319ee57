"""A hostile MCP server that speaks raw JSON-RPC (no SDK, so that every byte is its choice):
``python -m tests.support.mcp_servers.hostile`` (stdio) or ``... --http PORT`` (streamable HTTP on
127.0.0.1 at ``/mcp``; with ``--sse`` it answers each request as an SSE stream instead of a JSON
body; with ``--legacy-sse`` it speaks the older SSE transport at ``/sse``: every answer an event
of the one GET stream).

Its tools answer results that are cheap to send and costly to decode (issue 29):

- ``items(n)``: ``n`` empty text items; ``numbers(n)``: ``structuredContent`` with ``n``
  integers; ``keys(n)``: ``structuredContent`` with ``n`` keys; ``deep(n)``: ``structuredContent``
  nested ``n`` deep; ``text(mb)``: one text item of ``mb`` MB;
- ``where`` (every hostile tool): where the answer's ``id`` is: ``head`` (first, as the Python
  SDK writes it), ``tail`` (last, as the TypeScript SDK writes it) or ``none`` (left out: a
  message no one can attribute);
- ``ping()``: ``pong``; ``pid()``: ``{"pid": N}`` (the same process answers after a refusal);
  ``slow(seconds)``: ``done`` after a while (a call pending while another is refused).
"""

import json
import os
import queue
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_INT = {"type": "integer"}
_WHERE = {"type": "string", "enum": ["head", "tail", "none"]}
TOOLS = [
    {"name": "ping", "description": "Answers pong.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "pid", "description": "The server's process id.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "slow", "description": "Answers done after some seconds.",
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}},
    *({"name": name, "description": what,
       "inputSchema": {"type": "object", "properties": {arg: _INT, "where": _WHERE}, "required": [arg]}}
      for name, arg, what in (("items", "n", "n empty text items"), ("numbers", "n", "n integers"),
                              ("keys", "n", "an object of n keys"), ("deep", "n", "a value nested n deep"),
                              ("text", "mb", "one text item of mb MB"))),
]


def result_body(name: str, args: dict[str, Any]) -> bytes:
    """The JSON of a tool's result (bytes, built without decoding anything)."""
    n = int(args.get("n") or 0)
    if name == "ping":
        return b'{"content":[{"type":"text","text":"pong"}]}'
    if name == "pid":
        return b'{"content":[],"structuredContent":{"pid":%d}}' % os.getpid()
    if name == "slow":
        time.sleep(float(args.get("seconds") or 0))
        return b'{"content":[{"type":"text","text":"done"}]}'
    if name == "items":
        return b'{"content":[' + b'{"type":"text","text":""},' * (n - 1) + b'{"type":"text","text":""}]}'
    if name == "numbers":
        return b'{"content":[],"structuredContent":{"numbers":[' + b"7," * (n - 1) + b"7]}}"
    if name == "keys":
        return b'{"content":[],"structuredContent":{' + b"".join(b'"k%d":0,' % i for i in range(n)) + b'"end":0}}'
    if name == "deep":
        return b'{"content":[],"structuredContent":{"d":' + b"[" * n + b"]" * n + b"}}"
    if name == "text":
        return b'{"content":[{"type":"text","text":"' + b"x" * (int(args.get("mb") or 0) << 20) + b'"}]}'
    raise KeyError(name)


def answer(message: dict[str, Any]) -> bytes | None:
    """The answer (one JSON text, no newline) to a request; None for a notification."""
    if "id" not in message:
        return None
    rid = json.dumps(message["id"]).encode()
    method = message.get("method")
    where = "head"
    if method == "initialize":
        body = json.dumps({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                           "serverInfo": {"name": "hostile", "version": "1"}}).encode()
    elif method == "tools/list":
        body = json.dumps({"tools": TOOLS}).encode()
    elif method == "tools/call":
        params = message.get("params") or {}
        args = params.get("arguments") or {}
        where = str(args.get("where") or "head")
        try:
            body = result_body(str(params.get("name")), args)
        except KeyError:
            return b'{"jsonrpc":"2.0","id":' + rid + b',"error":{"code":-32602,"message":"unknown tool"}}'
    elif method == "ping":
        body = b"{}"
    else:
        return b'{"jsonrpc":"2.0","id":' + rid + b',"error":{"code":-32601,"message":"no such method"}}'
    if where == "tail":
        return b'{"jsonrpc":"2.0","result":' + body + b',"id":' + rid + b"}"
    if where == "none":
        return b'{"jsonrpc":"2.0","result":' + body + b"}"
    return b'{"jsonrpc":"2.0","id":' + rid + b',"result":' + body + b"}"


def serve_stdio() -> None:
    out = sys.stdout.buffer
    lock = threading.Lock()

    def reply(message: dict[str, Any]) -> None:
        data = answer(message)
        if data is not None:
            with lock:
                out.write(data + b"\n")
                out.flush()

    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        message = json.loads(line)
        # Each request on a thread of its own: a slow call does not hold up the others.
        threading.Thread(target=reply, args=(message,), daemon=True).start()


class _Handler(BaseHTTPRequestHandler):
    sse = False
    legacy = False
    stream: "queue.Queue[bytes]" = queue.Queue()  # the latest GET stream's (the older SSE transport)

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        if self.legacy:  # the answer goes out on the GET stream
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
            out = _Handler.stream
            threading.Thread(target=lambda: out.put(answer(message) or b""), daemon=True).start()
            return
        data = answer(message)
        if data is None:
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        if self.sse:
            data = b"event: message\ndata: " + data + b"\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream" if self.sse else "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except OSError:
            pass  # the client stopped reading (it refused the answer)

    def do_GET(self) -> None:
        if self.legacy and self.path.startswith("/sse"):
            mine = _Handler.stream = queue.Queue()  # a new client: answers go to its stream only
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            try:
                self.wfile.write(b"event: endpoint\ndata: /messages?session_id=hostile\n\n")
                self.wfile.flush()
                while True:
                    data = mine.get()
                    if data:
                        self.wfile.write(b"event: message\ndata: " + data + b"\n\n")
                        self.wfile.flush()
            except OSError:
                return
        self.send_response(405)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()


def main(argv: list[str]) -> None:
    if "--http" in argv:
        _Handler.sse = "--sse" in argv
        _Handler.legacy = "--legacy-sse" in argv
        port = int(argv[argv.index("--http") + 1])
        ThreadingHTTPServer(("127.0.0.1", port), _Handler).serve_forever()
    else:
        serve_stdio()


if __name__ == "__main__":
    main(sys.argv[1:])
