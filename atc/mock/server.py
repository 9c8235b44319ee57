"""``atc mock``: a deterministic, schema-faithful fake of an API, served on 127.0.0.1.

Built from a :class:`~protocols.model.Collection` (any spec ``protocols.load_spec`` reads), so users
and tests can develop against an API offline. What a request gets is decided by
:class:`atc.mock.app.MockApp` (routing, credentials, validation, negotiation, state); this module
is the HTTP server around it: it reads the request, answers HEAD like GET without a body, TRACE
and other undocumented methods with 405 and ``Allow``, OPTIONS with the allowed methods, and
writes the answer's status, media type, headers and bytes.

- bodies are generated from the documented response, deterministically: the same request gives
  the same bytes in every server instance (see :mod:`atc.mock.gen` and :mod:`atc.mock.entities`);
- ids are consistent across endpoints and meet the spec's id schemas: lists and searches return
  ids from each entity's id space, detail endpoints answer for those ids with the same names and
  titles, and unknown ids are not found;
- created objects read back, in sub-collections too; the spec's examples are there from the start.

Known limits: relations are consistent one way only (a book's ``author_id`` resolves, but
``/authors/{id}/books`` lists books whose detail may name another author); a ``pattern`` whose
matching could run without end is not checked (:mod:`atc.mock.request_checks`).
"""

from __future__ import annotations

import socket
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from atc.errors import AtcError, UsageError
from atc.mock.app import MockApp
from atc.mock.responses import MockResponse
from protocols.model import Collection

__all__ = ["MockApp", "MockServer", "MockResponse", "MockRequest", "Serving", "LOCAL_HOSTS", "check_host",
           "MAX_BODY_BYTES"]

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
#: Request bodies above this size are refused (413).
MAX_BODY_BYTES = 10_000_000


def check_host(host: str) -> str:
    """The host to bind: only the loopback interface, never a reachable address."""
    if host not in LOCAL_HOSTS:
        raise UsageError(f"atc mock serves on the loopback interface only, not {host!r}",
                         hint="use --host 127.0.0.1 (the default)")
    return "127.0.0.1" if host == "localhost" else host


@dataclass
class MockRequest:
    """One request the server answered, for tests and ``--verbose``."""

    method: str
    path: str
    query: dict[str, list[str]]
    status: int
    tool: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "path": self.path, "query": self.query, "status": self.status, "tool": self.tool}


def _error(status: int, code: str, message: str, **extra: Any) -> MockResponse:
    return MockResponse(status, {"error": code, "message": message, **extra})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without NODELAY, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every keep-alive request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        if self.server.mock.verbose:
            super().log_message(format, *args)

    def _serve(self) -> None:
        mock = self.server.mock
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY_BYTES:
            resp = _error(413 if length > 0 else 400, "bad_request", "missing, invalid or too large Content-Length")
            self.close_connection = True
        else:
            body = self.rfile.read(length) if length > 0 else b""
            try:
                found = mock.locate(self.path)
                resp = found if isinstance(found, MockResponse) else self._answer(*found, body)
            except Exception as exc:  # our bug: answer it as such rather than dropping the connection
                resp = _error(500, "mock_error", f"atc mock failed on this request: {type(exc).__name__}: {exc}")
        target = urlsplit(self.path)
        mock.record(MockRequest(self.command, target.path, parse_qs(target.query), resp.status, resp.tool))
        data = resp.content()
        self.send_response(resp.status)
        if resp.media_type is not None:  # even without a body: the answer's documented type is said
            self.send_header("Content-Type", resp.media_type)
        if resp.status not in (204, 304) and not 100 <= resp.status < 200:
            self.send_header("Content-Length", str(len(data)))
        for k, v in resp.headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD" and resp.status not in (204, 304):
            self.wfile.write(data)

    def _answer(self, app: MockApp, target: str, body: bytes) -> MockResponse:
        """HEAD is GET without the body and OPTIONS lists the allowed methods, unless the spec
        documents them as operations of their own. ``target`` is the request's path and query as
        the app serves them."""
        method = self.command.upper()
        headers = dict(self.headers.items())
        path = urlsplit(target).path or "/"
        if method in ("HEAD", "OPTIONS") and isinstance(app.route(method, path), MockResponse):
            allowed = app.allowed(path)
            if method == "HEAD" and "GET" in allowed:
                return app.handle("GET", target, headers, body)
            if method == "OPTIONS" and allowed:
                return MockResponse(204, None, {"Allow": ", ".join(sorted({*allowed, "OPTIONS"}))}, media_type=None)
        return app.handle(method, target, headers, body)

    def __getattr__(self, name: str) -> Any:
        # Every method reaches _serve (TRACE, CONNECT, PROPFIND...): an undocumented one gets 405
        # with Allow, never the standard library's HTML 501 page.
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    mock: Serving

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer is not worth a traceback on the user's terminal.
        if self.mock.verbose:
            super().handle_error(request, client_address)


class _Server6(_Server):
    address_family = socket.AF_INET6


class Serving:
    """Mock apps served over HTTP on the loopback interface, in a background thread: what
    ``MockServer`` (one API) and ``atc.evaluation.mockhub.MockHub`` (many behind one port)
    share. A subclass says which app answers a request (``locate``)."""

    host = "127.0.0.1"
    verbose = False
    _port = 0
    _server: _Server | None = None
    _thread: threading.Thread | None = None

    def locate(self, target: str) -> tuple[MockApp, str] | MockResponse:
        """The app that answers ``target`` (the request's path and query) and the target as that
        app serves it, or the answer itself when no app does."""
        raise NotImplementedError

    def record(self, request: MockRequest) -> None:
        """Every request answered (kept by ``MockServer`` for tests and ``--verbose``)."""

    @property
    def port(self) -> int:
        return self._server.server_address[1] if self._server else self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> Self:
        if self._server is not None:
            return self
        cls = _Server6 if ":" in self.host else _Server
        try:
            server = cls((self.host, self._port), _Handler)
        except OSError as exc:
            raise AtcError(f"cannot listen on {self.host}:{self._port}: {exc.strerror or exc}",
                           hint="choose another --port, or --port 0 for any free one") from exc
        server.mock = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name=f"atc-mock-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class MockServer(Serving):
    """The fake API served over HTTP on the loopback interface, in a background thread.

    ::

        with MockServer(load_spec("openapi.json")) as mock:
            httpx.get(mock.url + "/books/search", params={"query": "garden"})
    """

    def __init__(self, collection: Collection, port: int = 0, host: str = "127.0.0.1", *,
                 verbose: bool = False, keep_requests: int = 1000, auth: bool = True,
                 credentials: dict[str, set[str]] | None = None) -> None:
        self.host = check_host(host)
        self.app = MockApp(collection, auth=auth, credentials=credentials)
        self.collection = collection
        self.verbose = verbose
        self._port = port
        self.requests: deque[MockRequest] = deque(maxlen=keep_requests)

    @property
    def operations(self) -> int:
        return self.app.operations

    def locate(self, target: str) -> tuple[MockApp, str]:
        return self.app, target

    def record(self, request: MockRequest) -> None:
        self.requests.append(request)
