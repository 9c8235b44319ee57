"""What every HTTP server written for the tests shares: serving a handler class on 127.0.0.1 in a
daemon thread, stopping it, and being a context manager (``LoopbackServer``; a subclass defines
``start()``, which builds its handler class and calls ``_serve``; ``serving`` does the same for a
fixture); and the habits of their handlers (``QuietHandler``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["LoopbackServer", "QuietHandler", "serving"]


class QuietHandler(BaseHTTPRequestHandler):
    """A test API's handler: HTTP/1.1 keep-alive, no log lines, and no Nagle delay (headers and
    body go out in two writes; without TCP_NODELAY every keep-alive request after the first waits
    ~40 ms for the client's delayed ACK). ``send_json`` answers with a JSON body; ``body`` reads
    the request's."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *a: Any) -> None:
        pass

    def send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""


class LoopbackServer:
    _server: ThreadingHTTPServer | None = None

    def start(self) -> Self:
        raise NotImplementedError

    def _serve(self, handler: type[BaseHTTPRequestHandler], port: int = 0) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return server

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Serving(LoopbackServer):
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.handler = handler

    def start(self) -> Self:
        self._serve(self.handler)
        return self


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on 127.0.0.1 while inside; yields its base URL."""
    with _Serving(handler) as running:
        assert running._server is not None
        yield f"http://127.0.0.1:{running._server.server_address[1]}"
