"""``atc mock`` of every collection of a suite, behind one loopback port.

A suite may use hundreds of collections (ToolBench: one per RapidAPI tool). Rather than one
server and one port each, the hub serves collection ``NAME`` under ``/NAME/`` and hands each
request to that collection's ``atc.mock.MockApp`` (built on its first request), so the answers
are exactly ``atc mock``'s (``--no-auth``: credentials are not asked for, since a suite run on the
mock has no real keys). ``base_urls`` is what the run's ``Toolset`` gets (``Toolset.base_urls``).
It binds 127.0.0.1 only and answers nothing but the collections it was given.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from atc.mock import MockApp
from protocols.model import Collection

__all__ = ["MockHub"]

_MAX_BODY = 10_000_000


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    hub: MockHub

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up mid-answer is not worth a traceback


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = b"" if status == 204 else json.dumps(body, ensure_ascii=False).encode()
        self.send_response(status)
        if status != 204:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _serve(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= _MAX_BODY:
            self.close_connection = True
            return self._send(413 if length > 0 else 400, {"error": "bad_request", "message": "bad Content-Length"})
        body = self.rfile.read(length) if length else b""
        target = urlsplit(self.path)
        name, _, rest = target.path.lstrip("/").partition("/")
        app = self.server.hub.app(unquote(name))
        if app is None:
            return self._send(404, {"error": "not_found", "message": f"no collection {unquote(name)!r} here"})
        inner = "/" + rest + (f"?{target.query}" if target.query else "")
        try:
            resp = app.handle(self.command, inner, dict(self.headers.items()), body)
        except Exception as exc:  # our bug: answered as such rather than a dropped connection
            return self._send(500, {"error": "mock_error", "message": f"{type(exc).__name__}: {exc}"})
        self._send(resp.status, resp.body, resp.headers)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve


class MockHub:
    """Mocks of many collections on one port of 127.0.0.1, in a background thread."""

    def __init__(self, collections: list[Collection]) -> None:
        self.collections = {c.name: c for c in collections}
        self._apps: dict[str, MockApp] = {}
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def app(self, name: str) -> MockApp | None:
        with self._lock:
            if name not in self._apps:
                collection = self.collections.get(name)
                if collection is None:
                    return None
                # credentials are not checked: a suite run on the mock needs no real key, and the
                # gateway sends one only when --credential gives it
                self._apps[name] = MockApp(collection, auth=False)
            return self._apps[name]

    @property
    def url(self) -> str:
        assert self._server is not None, "the hub is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_urls(self) -> dict[str, str]:
        """Collection name -> the URL its tools are served at."""
        return {name: f"{self.url}/{quote(name, safe='')}" for name in self.collections}

    def start(self) -> MockHub:
        if self._server is None:
            server = _Server(("127.0.0.1", 0), _Handler)
            server.hub = self
            self._server = server
            self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                            name="atc-eval-mock", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> MockHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
