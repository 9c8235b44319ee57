"""``atc mock``: a deterministic, schema-conforming fake of an API, served on 127.0.0.1.

Built from a :class:`~protocols.model.Collection` (any spec ``protocols.load_spec`` reads), so
users and tests can develop against an API offline:

- routing by method and path template (``/books/{book_id}``; literal segments win over
  parameters, so ``/movie/latest`` is not ``/movie/{movie_id}``); the server's base path
  (``/3`` of ``https://api.themoviedb.org/3``) is accepted but not needed;
- required parameters are checked (400 with a JSON body naming the parameter), values are
  coerced to their schema type and checked against ``enum``;
- bodies are generated from the response schema, deterministically: the same request gives the
  same bytes in every server instance (see :mod:`atc.mock.gen` and :mod:`atc.mock.data`);
- ids are consistent across endpoints: each entity (learnt from id-like path parameters such as
  ``{book_id}`` or ``/albums/{id}``) has a fixed id space; lists and searches return ids from it,
  detail endpoints answer for those ids with the same names and titles, and 404 for ids that no
  response ever contains (an id of another entity is accepted, so that a chain through a list the
  mock could not attribute, like the ``cast`` of a movie's credits, does not break);
- ``POST``/``PUT`` bodies are echoed into response properties of the same name, and an entity
  created that way reads back the same from its detail endpoint;
- an operation without a response schema answers a small plausible object
  (``{"id": ..., "name": ...}``, or ``{"results": [...]}`` for list-like GETs).

Known limits: relations are consistent one way only (a book's ``author_id`` resolves, but
``/authors/{id}/books`` lists books whose detail may name another author); security schemes are
not enforced (any credential is accepted); XML and form responses are answered as JSON.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from atc.errors import AtcError, UsageError
from atc.mock.data import ANY_ENTITY, IdSpaces, schema_type
from atc.mock.gen import DEFAULT_ITEMS, MAX_ITEMS, RequestContext, SchemaFaker
from atc.mock.routes import Endpoint, compile_endpoint, known_entities
from protocols.model import Collection, Tool

__all__ = ["MockApp", "MockServer", "MockResponse", "MockRequest", "LOCAL_HOSTS", "check_host"]

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
#: Query parameters that set how many items the endpoint's main list holds (bounded by MAX_ITEMS).
LIMIT_PARAMS = ("limit", "per_page", "page_size", "pagesize", "size", "max_results", "maxresults", "count", "n")
#: Request bodies above this size are refused (413).
MAX_BODY_BYTES = 10_000_000
#: How many created (POST/PUT/PATCH) objects the server remembers for their detail endpoints.
MAX_REMEMBERED = 10_000
#: Query parameters that shape a list without being a condition on its items.
_NOT_FILTERS = frozenset("page offset cursor sort sort_by order order_by direction fields include expand "
                         "language lang locale region format api_key apikey key token callback".split())


def check_host(host: str) -> str:
    """The host to bind: only the loopback interface, never a reachable address."""
    if host not in LOCAL_HOSTS:
        raise UsageError(f"atc mock serves on the loopback interface only, not {host!r}",
                         hint="use --host 127.0.0.1 (the default)")
    return "127.0.0.1" if host == "localhost" else host


@dataclass
class MockResponse:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    tool: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "body": self.body, "headers": self.headers, "tool": self.tool}


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


class _BadArgument(Exception):
    def __init__(self, wire: str, location: str, message: str) -> None:
        super().__init__(message)
        self.wire, self.location, self.message = wire, location, message


def _has_json_type(value: Any, t: str | None) -> bool:
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    expected = {"string": str, "boolean": bool, "array": list, "object": dict}.get(t or "")
    return expected is None or isinstance(value, expected)


def _coerce(raw: Any, schema: dict[str, Any], *, text: bool) -> Any:
    """An argument as its schema type. ``text``: it came from a path, query, header or cookie."""
    t = schema_type(schema)
    if text:
        if t == "array":
            parts = raw if isinstance(raw, list) else [raw]
            if len(parts) == 1 and "," in parts[0]:
                parts = parts[0].split(",")
            items = schema.get("items")
            return [_coerce(p, items if isinstance(items, dict) else {}, text=True) for p in parts]
        if isinstance(raw, list):
            raw = raw[0]
        if t == "integer":
            if not re.fullmatch(r"[-+]?\d+", raw.strip()):
                raise ValueError("must be an integer")
            value: Any = int(raw)
        elif t == "number":
            try:
                value = float(raw)
            except ValueError:
                raise ValueError("must be a number") from None
        elif t == "boolean":
            low = raw.lower()
            if low not in ("true", "false", "1", "0"):
                raise ValueError("must be true or false")
            value = low in ("true", "1")
        else:
            value = raw
    else:
        value = raw
        if not _has_json_type(value, t):
            raise ValueError(f"must be of type {t}")
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        raise ValueError("must be one of " + ", ".join(json.dumps(e) for e in enum))
    return value


class MockApp:
    """The fake API without the HTTP server: ``handle()`` maps a request to a :class:`MockResponse`.

    Thread-safe (one lock around each request: answers are cheap and the created-objects memory
    must stay consistent)."""

    def __init__(self, collection: Collection) -> None:
        self.collection = collection
        self.known = known_entities(collection)
        self.spaces = IdSpaces()
        self.faker = SchemaFaker(self.spaces, self.known)
        endpoints = [compile_endpoint(t, self.known) for t in collection.tools]
        # More literal segments first, then longer literals: /movie/latest before /movie/{id}.
        self.endpoints = sorted(endpoints, key=lambda e: (-e.rank[0], -e.rank[1]))
        prefixes = {urlsplit(s).path.rstrip("/") for s in collection.servers}
        self.prefixes = sorted((p for p in prefixes if p), key=len, reverse=True)
        self._created: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    @property
    def operations(self) -> int:
        return len(self.endpoints)

    def handle(self, method: str, target: str, headers: dict[str, str] | None = None,
               body: bytes = b"") -> MockResponse:
        """Answer one request. ``target`` is the request target (path and query string)."""
        with self._lock:
            return self._handle(method.upper(), target, {k.lower(): v for k, v in (headers or {}).items()}, body)

    # -- routing -------------------------------------------------------------------------------

    def route(self, method: str, path: str) -> tuple[Endpoint, dict[str, str]] | MockResponse:
        candidates = [path] + [path[len(p):] or "/" for p in self.prefixes if path == p or path.startswith(p + "/")]
        allowed: list[str] = []
        for candidate in candidates:
            for ep in self.endpoints:
                m = ep.regex.match(candidate)
                if not m:
                    continue
                if ep.tool.method.upper() != method:
                    allowed.append(ep.tool.method.upper())
                    continue
                return ep, {ep.groups[g]: unquote(v) for g, v in m.groupdict().items()}
        if allowed:
            return _error(405, "method_not_allowed", f"{method} is not allowed on {path}",
                          allowed=sorted(set(allowed)))
        return _error(404, "not_found", f"no operation for {method} {path}")

    def _handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> MockResponse:
        split = urlsplit(target)
        routed = self.route(method, split.path or "/")
        if isinstance(routed, MockResponse):
            return routed
        ep, path_args = routed
        query = parse_qs(split.query, keep_blank_values=True)
        resp = self._answer(ep, path_args, query, headers, body)
        resp.tool = ep.tool.name
        return resp

    def _answer(self, ep: Endpoint, path_args: dict[str, str], query: dict[str, list[str]],
                headers: dict[str, str], body: bytes) -> MockResponse:
        try:
            payload, form = self._payload(headers, body)
            args = self._arguments(ep.tool, path_args, query, headers, payload, form)
        except _BadArgument as exc:
            return _error(400, "bad_request", exc.message, parameter=exc.wire, **{"in": exc.location})
        for wire, entity in ep.id_params.items():
            raw = path_args.get(wire, "")
            if not any(self.spaces.contains(e, raw) for e in (entity, ANY_ENTITY, *self.known)):
                return _error(404, "not_found", f"no {entity} with id {raw!r}", parameter=wire)
        return self._respond(ep, args)

    # -- arguments -----------------------------------------------------------------------------

    @staticmethod
    def _payload(headers: dict[str, str], body: bytes) -> tuple[Any, bool]:
        """The parsed body, and whether its values are text (a form) rather than JSON values."""
        if not body:
            return None, False
        ctype = headers.get("content-type", "")
        if "application/x-www-form-urlencoded" in ctype:
            form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
            return {k: v[0] if len(v) == 1 else v for k, v in form.items()}, True
        try:
            return json.loads(body), False
        except ValueError:
            if "json" in ctype or not ctype:
                raise _BadArgument("body", "body", "the request body is not valid JSON") from None
            return body.decode("utf-8", "replace"), True

    def _arguments(self, tool: Tool, path_args: dict[str, str], query: dict[str, list[str]],
                   headers: dict[str, str], payload: Any, form: bool) -> dict[tuple[str, str], Any]:
        """The call's arguments keyed by (location, wire name), coerced; 400 on a missing or bad one."""
        cookies = dict(
            part.strip().split("=", 1) for part in headers.get("cookie", "").split(";") if "=" in part
        )
        required = set(tool.required)
        out: dict[tuple[str, str], Any] = {}
        for pname, schema in tool.properties.items():
            binding = tool.bindings.get(pname)
            loc, wire = (binding.location, binding.name) if binding else ("query", pname)
            text = loc != "body" or form
            raw: Any
            if loc == "path":
                raw = path_args.get(wire)
            elif loc == "query":
                raw = query.get(wire)
            elif loc == "header":
                raw = headers.get(wire.lower())
            elif loc == "cookie":
                raw = cookies.get(wire)
            elif wire == "":
                raw = payload
            else:
                raw = payload.get(wire) if isinstance(payload, dict) else None
            if raw is None or raw == []:
                if pname in required:
                    raise _BadArgument(wire or pname, loc, f"missing required parameter '{wire or pname}' ({loc})")
                continue
            try:
                out[(loc, wire)] = _coerce(raw, schema if isinstance(schema, dict) else {}, text=text)
            except ValueError as exc:
                shown = raw[0] if isinstance(raw, list) and len(raw) == 1 else raw
                raise _BadArgument(wire or pname, loc,
                                   f"parameter '{wire or pname}' ({loc}) {exc}, got {json.dumps(shown)[:80]}") from None
        if isinstance(payload, dict):
            for k, v in payload.items():
                out.setdefault(("body", k), v)
        return out

    # -- responses -----------------------------------------------------------------------------

    def _respond(self, ep: Endpoint, args: dict[tuple[str, str], Any]) -> MockResponse:
        tool = ep.tool
        status = self._status(tool)
        if status == 204:
            return MockResponse(204, None)
        echo = {wire: v for (loc, wire), v in args.items() if loc in ("query", "path", "body") and wire}
        path_ids = {w: args[("path", w)] for w in ep.id_params if ("path", w) in args}
        items = DEFAULT_ITEMS
        for name in LIMIT_PARAMS:
            value = echo.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                items = max(0, min(MAX_ITEMS, value))
                break
        filters = {wire: v for (loc, wire), v in args.items()
                   if loc == "query" and wire not in LIMIT_PARAMS and wire not in _NOT_FILTERS}
        key = json.dumps([[loc, wire, v] for (loc, wire), v in sorted(args.items(), key=lambda kv: kv[0])],
                         default=str, sort_keys=True)
        root_id = args.get(("path", ep.root_param)) if ep.root_param else None
        ctx = RequestContext(tool=tool.name, root_key=f"{tool.name}?{key}", echo=echo, path_ids=path_ids,
                             items=items, filters=filters, root_entity=ep.root_entity, root_id=root_id,
                             item_entity=ep.item_entity)
        schema = tool.response_schema if isinstance(tool.response_schema, dict) else self._fallback_schema(ep)
        body = self.faker.response(schema, ctx)
        if isinstance(body, dict) and ep.root_entity and "id" in body:
            remembered = (ep.root_entity, str(body["id"]))
            if tool.method.upper() in ("POST", "PUT", "PATCH"):
                if len(self._created) >= MAX_REMEMBERED:
                    self._created.pop(next(iter(self._created)))
                self._created[remembered] = {k: v for k, v in echo.items() if k in body}
            elif ep.mode == "detail" and remembered in self._created:
                body.update(self._created[remembered])
        return MockResponse(status, body)

    @staticmethod
    def _status(tool: Tool) -> int:
        codes = sorted(int(c) for c in tool.status_codes if c.isdigit() and 200 <= int(c) < 300)
        return codes[0] if codes else 200

    @staticmethod
    def _fallback_schema(ep: Endpoint) -> dict[str, Any]:
        item = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}
        if ep.tool.method.upper() == "GET" and ep.mode in ("free", "sub"):
            return {"type": "object", "properties": {"results": {"type": "array", "items": item}}}
        return item


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
                resp = mock.app.handle(self.command, self.path, dict(self.headers.items()), body)
            except Exception as exc:  # our bug: answer it as such rather than dropping the connection
                resp = _error(500, "mock_error", f"atc mock failed on this request: {type(exc).__name__}: {exc}")
        target = urlsplit(self.path)
        mock.record(MockRequest(self.command, target.path, parse_qs(target.query), resp.status, resp.tool))
        data = b"" if resp.status == 204 else json.dumps(resp.body, ensure_ascii=False).encode()
        self.send_response(resp.status)
        if resp.status != 204:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in resp.headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    mock: MockServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer is not worth a traceback on the user's terminal.
        if self.mock.verbose:
            super().handle_error(request, client_address)


class _Server6(_Server):
    address_family = socket.AF_INET6


class MockServer:
    """The fake API served over HTTP on the loopback interface, in a background thread.

    ::

        with MockServer(load_spec("openapi.json")) as mock:
            httpx.get(mock.url + "/books/search", params={"query": "garden"})
    """

    def __init__(self, collection: Collection, port: int = 0, host: str = "127.0.0.1", *,
                 verbose: bool = False, keep_requests: int = 1000) -> None:
        self.host = check_host(host)
        self.app = MockApp(collection)
        self.collection = collection
        self.verbose = verbose
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.requests: deque[MockRequest] = deque(maxlen=keep_requests)

    @property
    def port(self) -> int:
        return self._server.server_address[1] if self._server else self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def operations(self) -> int:
        return self.app.operations

    def record(self, request: MockRequest) -> None:
        self.requests.append(request)

    def start(self) -> MockServer:
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

    def __enter__(self) -> MockServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
