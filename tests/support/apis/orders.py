"""A real HTTP API with writes on 127.0.0.1, for the write ledger and the write policy.

A small shop: products to read, orders to place (``POST /orders``), read, update and cancel, and
payments that take an ``Idempotency-Key`` header (the server applies a key once, like Stripe: the
same key again answers the first payment). Some routes misbehave on purpose, as tests set them:

- ``slow_seconds``: ``POST /orders`` sleeps this long AFTER the order is made (an answer that
  comes after the caller gave up: the write was applied, the caller cannot know);
- ``fail_next``: the next ``fail_next`` order requests get this status (e.g. ``[503]``) and are NOT
  applied;
- ``redirect_writes``: ``PATCH``/``DELETE`` on ``/orders/{id}`` answer ``307`` to
  ``/vault/orders/{id}?from=orders`` (another resource on the same server, which tests count), and
  ``POST /orders/search`` (marked read-only) answers ``308`` to ``/vault/search?scope=all``;
- ``slow_reads``: ``GET /products`` sleeps this long before it answers (a program held in a read
  after it wrote, for a test to interrupt).

Every request that reaches the server is recorded (``requests``), and ``orders`` holds what
was really made, so a test asserts what the API saw, not what atc says it did.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PRODUCTS = [
    {"id": 1, "name": "desk lamp", "price": 24.0},
    {"id": 2, "name": "floor lamp", "price": 79.0},
    {"id": 3, "name": "notebook", "price": 3.5},
]


def spec(url: str = "http://127.0.0.1:1") -> dict[str, Any]:
    """The OpenAPI 3.0 document of the shop, served from ``url``."""
    order = {"type": "object", "properties": {
        "id": {"type": "integer"}, "number": {"type": "string"}, "product_id": {"type": "integer"},
        "quantity": {"type": "integer"}, "status": {"type": "string"}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "Orders", "version": "1"},
        "servers": [{"url": url}],
        "paths": {
            "/products": {"get": {"operationId": "listProducts", "summary": "All products.",
                                  "parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}],
                                  "responses": {"200": {"description": "products", "content": {"application/json": {
                                      "schema": {"type": "array", "items": {"type": "object"}}}}}}}},
            "/orders": {
                "get": {"operationId": "listOrders", "summary": "Every order placed.",
                        "responses": {"200": {"description": "orders", "content": {"application/json": {
                            "schema": {"type": "array", "items": order}}}}}},
                "post": {"operationId": "placeOrder", "summary": "Place an order.",
                         "requestBody": {"required": True, "content": {"application/json": {"schema": {
                             "type": "object", "required": ["product_id", "quantity"],
                             "properties": {"product_id": {"type": "integer"}, "quantity": {"type": "integer"}}}}}},
                         "responses": {"201": {"description": "the order", "content": {
                             "application/json": {"schema": order}}}}},
            },
            "/orders/search": {"post": {
                "operationId": "searchOrders", "summary": "Orders of a product.", "x-atc-read-only": True,
                "requestBody": {"content": {"application/json": {"schema": {
                    "type": "object", "properties": {"product_id": {"type": "integer"}}}}}},
                "responses": {"200": {"description": "orders", "content": {"application/json": {
                    "schema": {"type": "array", "items": order}}}}}}},
            "/orders/{order_id}": {
                "get": {"operationId": "getOrder", "parameters": [
                    {"name": "order_id", "in": "path", "required": True, "schema": {"type": "integer"}}],
                        "responses": {"200": {"description": "the order", "content": {
                            "application/json": {"schema": order}}}}},
                "patch": {"operationId": "updateOrder", "parameters": [
                    {"name": "order_id", "in": "path", "required": True, "schema": {"type": "integer"}}],
                          "requestBody": {"content": {"application/json": {"schema": {
                              "type": "object", "properties": {"quantity": {"type": "integer"}}}}}},
                          "responses": {"200": {"description": "the order", "content": {
                              "application/json": {"schema": order}}}}},
                "delete": {"operationId": "cancelOrder", "parameters": [
                    {"name": "order_id", "in": "path", "required": True, "schema": {"type": "integer"}}],
                           "responses": {"204": {"description": "cancelled"}}},
            },
            "/payments": {"post": {
                "operationId": "pay", "summary": "Pay for an order (applied once per Idempotency-Key).",
                "parameters": [{"name": "Idempotency-Key", "in": "header", "required": True,
                                "schema": {"type": "string"}}],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {
                    "type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "integer"}}}}}},
                "responses": {"201": {"description": "the payment", "content": {"application/json": {
                    "schema": {"type": "object"}}}}}}},
        },
    }


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class OrdersAPI:
    """The shop on 127.0.0.1 (``start``/``stop``, or a context manager). ``reset`` forgets orders,
    payments, requests and misbehaviours."""

    host: str = "127.0.0.1"
    port: int = 0
    requests: list[Seen] = field(default_factory=list)
    orders: dict[int, dict[str, Any]] = field(default_factory=dict)
    payments: dict[str, dict[str, Any]] = field(default_factory=dict)
    slow_seconds: float = 0.0
    fail_next: list[int] = field(default_factory=list)
    redirect_writes: bool = False
    slow_reads: float = 0.0
    vault_hits: int = 0
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def spec(self) -> dict[str, Any]:
        return spec(self.url)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.orders.clear()
            self.payments.clear()
            self.slow_seconds, self.fail_next, self.redirect_writes, self.vault_hits = 0.0, [], False, 0
            self.slow_reads = 0.0

    def writes_seen(self, method: str = "POST", path: str = "/orders") -> int:
        with self._lock:
            return sum(1 for r in self.requests if r.method == method and r.path == path)

    def start(self) -> OrdersAPI:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
                raw = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                try:
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the caller gave up (a timeout): the order was made all the same

            def _handle(self) -> None:
                parts = urlsplit(self.path)
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size) if size else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                with api._lock:
                    api.requests.append(Seen(self.command, parts.path, dict(self.headers.items()), body))
                api.route(self, self.command, parts.path, parse_qs(parts.query), body)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OrdersAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- routes ---------------------------------------------------------------------------------

    def route(self, h: Any, method: str, path: str, query: dict[str, list[str]], body: Any) -> None:
        segments = [s for s in path.split("/") if s]
        if method == "GET" and path == "/products":
            if self.slow_reads:
                time.sleep(self.slow_reads)
            q = (query.get("q") or [""])[0]
            return h._answer(200, [p for p in PRODUCTS if q in p["name"]])
        if path == "/orders" and method == "GET":
            with self._lock:
                return h._answer(200, list(self.orders.values()))
        if path == "/orders" and method == "POST":
            return self._place(h, body)
        if path == "/orders/search" and method == "POST":
            if self.redirect_writes:
                return h._answer(308, {"moved": True}, {"Location": "/vault/search?scope=all"})
            pid = (body or {}).get("product_id")
            with self._lock:
                return h._answer(200, [o for o in self.orders.values() if pid is None or o["product_id"] == pid])
        if path == "/payments" and method == "POST":
            return self._pay(h, body)
        if segments[:1] == ["vault"]:
            with self._lock:
                self.vault_hits += 1
            return h._answer(200, {"vault": True})
        if len(segments) == 2 and segments[0] == "orders" and segments[1].isdigit():
            oid = int(segments[1])
            if self.redirect_writes and method in ("PATCH", "DELETE", "PUT"):
                return h._answer(307, {"moved": True}, {"Location": f"/vault/orders/{oid}?from=orders"})
            with self._lock:
                found = self.orders.get(oid)
                if found is None:
                    return h._answer(404, {"message": f"no order {oid}"})
                if method == "GET":
                    return h._answer(200, found)
                if method == "PATCH":
                    found.update({k: v for k, v in (body or {}).items() if k == "quantity"})
                    return h._answer(200, found)
                if method == "DELETE":
                    del self.orders[oid]
                    return h._answer(204)
        return h._answer(404, {"message": "no such route"})

    def _place(self, h: Any, body: Any) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("product_id"), int):
            return h._answer(400, {"message": "product_id (integer) is required"})
        with self._lock:
            if self.fail_next:
                return h._answer(self.fail_next.pop(0), {"message": "try again later"})
            oid = len(self.orders) + 1 + sum(1 for r in self.requests if r.path == "/vault")
            while oid in self.orders:
                oid += 1
            order = {"id": oid, "number": f"A-{1000 + oid}", "product_id": body["product_id"],
                     "quantity": body.get("quantity", 1), "status": "placed"}
            self.orders[oid] = order
            slow = self.slow_seconds
        if slow:
            time.sleep(slow)
        h._answer(201, order)

    def _pay(self, h: Any, body: Any) -> None:
        key = h.headers.get("Idempotency-Key")
        if not key:
            return h._answer(400, {"message": "Idempotency-Key is required"})
        with self._lock:
            if key in self.payments:
                return h._answer(201, self.payments[key])
            payment = {"id": f"pay_{len(self.payments) + 1}", "order_id": (body or {}).get("order_id"),
                       "key": key}
            self.payments[key] = payment
            slow = self.slow_seconds
        if slow:
            time.sleep(slow)
        h._answer(201, payment)
