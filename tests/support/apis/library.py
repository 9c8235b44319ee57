"""A real HTTP API on 127.0.0.1 for tests: authors, their books, reviews and orders.

The endpoints depend on each other the way real APIs do (search -> id -> detail -> sub-resource),
one needs a credential (``X-API-Key``), unknown ids give 404s, and every request that reaches
the server is recorded, so tests can assert what the API really saw.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

SECRET = "lib-secret-7f3a9c"

AUTHORS = {
    1: {"id": 1, "name": "Ursula K. Le Guin", "born": 1929, "country": "US"},
    2: {"id": 2, "name": "Stanislaw Lem", "born": 1921, "country": "PL"},
    3: {"id": 3, "name": "Octavia E. Butler", "born": 1947, "country": "US"},
}
BOOKS = {
    10: {"id": 10, "title": "A Wizard of Earthsea", "year": 1968, "author_id": 1, "price": 9.5, "tags": ["fantasy"]},
    11: {"id": 11, "title": "The Left Hand of Darkness", "year": 1969, "author_id": 1, "price": 12.0, "tags": ["sf"]},
    20: {"id": 20, "title": "Solaris", "year": 1961, "author_id": 2, "price": 11.25, "tags": ["sf"]},
    21: {"id": 21, "title": "The Cyberiad", "year": 1965, "author_id": 2, "price": 8.75, "tags": ["sf", "humor"]},
    30: {"id": 30, "title": "Kindred", "year": 1979, "author_id": 3, "price": 10.0, "tags": ["sf", "history"]},
}
REVIEWS = {
    10: [{"user": "ana", "rating": 5, "text": "timeless"}, {"user": "bo", "rating": 4, "text": "lovely"}],
    11: [{"user": "cy", "rating": 5, "text": "brilliant"}],
    20: [{"user": "dee", "rating": 4, "text": "strange ocean"}],
    21: [],
    30: [{"user": "eli", "rating": 5, "text": "gripping"}, {"user": "fa", "rating": 3, "text": "hard"}],
}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


@dataclass
class LibraryAPI:
    host: str = "127.0.0.1"
    port: int = 0
    requests: list[Request] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._orders = 0

    def start(self) -> None:
        api = self
        api._orders = 0

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; without TCP_NODELAY every keep-alive
            # request after the first waits ~40 ms for the client's delayed ACK.
            disable_nagle_algorithm = True

            def log_message(self, *a: Any) -> None:
                pass

            def _reply(self, status: int, obj: Any) -> None:
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _record(self) -> tuple[list[str], dict[str, str], bytes]:
                split = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                query = {k: v[-1] for k, v in parse_qs(split.query).items()}
                with api._lock:
                    api.requests.append(Request(self.command, self.path, query, dict(self.headers.items()), body))
                parts = [unquote(p) for p in split.path.split("/") if p]
                return parts, query, body

            def do_GET(self) -> None:
                parts, q, _ = self._record()
                if parts == ["authors"]:
                    name = q.get("name", "").lower()
                    hits = [a for a in AUTHORS.values() if name in a["name"].lower()]
                    return self._reply(200, {"results": hits, "count": len(hits)})
                if len(parts) >= 2 and parts[0] == "authors":
                    a = AUTHORS.get(int(parts[1])) if parts[1].isdigit() else None
                    if a is None:
                        return self._reply(404, {"error": "author not found"})
                    if len(parts) == 2:
                        return self._reply(200, a)
                    if parts[2:] == ["books"]:
                        books = [{k: b[k] for k in ("id", "title", "year", "price")}
                                 for b in BOOKS.values() if b["author_id"] == a["id"]]
                        return self._reply(200, {"author_id": a["id"], "books": books})
                if len(parts) >= 2 and parts[0] == "books":
                    b = BOOKS.get(int(parts[1])) if parts[1].isdigit() else None
                    if b is None:
                        return self._reply(404, {"error": "book not found"})
                    if len(parts) == 2:
                        return self._reply(200, b)
                    if parts[2:] == ["reviews"]:
                        limit = int(q["limit"]) if q.get("limit", "").isdigit() else 10
                        return self._reply(200, REVIEWS[b["id"]][:limit])
                if parts == ["stats"]:
                    return self._reply(200, {"books": len(BOOKS), "authors": len(AUTHORS)})
                self._reply(404, {"error": "not found"})

            def do_POST(self) -> None:
                parts, _, body = self._record()
                if parts != ["orders"]:
                    return self._reply(404, {"error": "not found"})
                if self.headers.get("X-API-Key") != SECRET:
                    return self._reply(401, {"error": "missing or wrong API key"})
                try:
                    data = json.loads(body or b"{}")
                    book = BOOKS[int(data["book_id"])]
                    qty = int(data.get("quantity", 1))
                except (ValueError, KeyError, TypeError):
                    return self._reply(400, {"error": "book_id must be a known book"})
                with api._lock:
                    api._orders += 1
                    oid = api._orders
                self._reply(201, {"order_id": oid, "book_id": book["id"], "quantity": qty,
                                  "total": round(book["price"] * qty, 2)})

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    def spec(self, *, responses: bool = True) -> dict[str, Any]:
        return library_spec(self.url, responses=responses)

    def write_spec(self, path: Path, *, responses: bool = True) -> Path:
        path.write_text(json.dumps(self.spec(responses=responses), indent=1))
        return path


def _ok(schema: dict[str, Any], responses: bool) -> dict[str, Any]:
    if not responses:
        return {"200": {"description": "OK"}}
    return {"200": {"description": "OK", "content": {"application/json": {"schema": schema}}},
            "404": {"description": "Not found"}}


def library_spec(url: str, *, responses: bool = True) -> dict[str, Any]:
    """The OpenAPI 3.0 document of the library API (``responses=False``: no response schemas)."""
    author = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                                               "born": {"type": "integer"}, "country": {"type": "string"}}}
    book = {"type": "object", "properties": {"id": {"type": "integer"}, "title": {"type": "string"},
                                             "year": {"type": "integer"}, "author_id": {"type": "integer"},
                                             "price": {"type": "number"},
                                             "tags": {"type": "array", "items": {"type": "string"}}}}
    review = {"type": "object", "properties": {"user": {"type": "string"}, "rating": {"type": "integer"},
                                               "text": {"type": "string"}}}
    id_param = {"in": "path", "required": True, "schema": {"type": "integer"}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "Library", "version": "1.0", "description": "Authors, their books, reviews and orders."},
        "servers": [{"url": url}],
        "components": {"securitySchemes": {"api_key": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}},
        "paths": {
            "/authors": {"get": {
                "operationId": "searchAuthors", "summary": "Search authors by part of their name.",
                "parameters": [{"name": "name", "in": "query", "required": True, "schema": {"type": "string"}}],
                "responses": _ok({"type": "object", "properties": {"results": {"type": "array", "items": author},
                                                                   "count": {"type": "integer"}}}, responses)}},
            "/authors/{author_id}": {"get": {
                "operationId": "getAuthor", "summary": "One author by id.",
                "parameters": [dict(id_param, name="author_id")], "responses": _ok(author, responses)}},
            "/authors/{author_id}/books": {"get": {
                "operationId": "listAuthorBooks", "summary": "The books an author wrote.",
                "parameters": [dict(id_param, name="author_id")],
                "responses": _ok({"type": "object", "properties": {
                    "author_id": {"type": "integer"}, "books": {"type": "array", "items": book}}}, responses)}},
            "/books/{book_id}": {"get": {
                "operationId": "getBook", "summary": "One book by id.",
                "parameters": [dict(id_param, name="book_id")], "responses": _ok(book, responses)}},
            "/books/{book_id}/reviews": {"get": {
                "operationId": "listBookReviews", "summary": "Reader reviews of a book.",
                "parameters": [dict(id_param, name="book_id"),
                               {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 10}}],
                "responses": _ok({"type": "array", "items": review}, responses)}},
            "/orders": {"post": {
                "operationId": "createOrder", "summary": "Order copies of a book.",
                "security": [{"api_key": []}],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {
                    "type": "object", "required": ["book_id"],
                    "properties": {"book_id": {"type": "integer"}, "quantity": {"type": "integer", "default": 1}}}}}},
                "responses": {"201": {"description": "Created", "content": {"application/json": {"schema": {
                    "type": "object", "properties": {"order_id": {"type": "integer"}, "total": {"type": "number"}}}}}},
                    "401": {"description": "Missing or wrong key"}}}},
            "/stats": {"get": {
                "operationId": "getStats", "summary": "Counts of books and authors.",
                "responses": _ok({"type": "object", "properties": {"books": {"type": "integer"},
                                                                   "authors": {"type": "integer"}}}, responses)}},
        },
    }
