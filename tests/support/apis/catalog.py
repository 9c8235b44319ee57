"""A real HTTP API on 127.0.0.1 for the probing tests: a warehouse catalog whose ids are only
reachable through other tools.

- ``GET /shelves`` lists shelves (no parameters: the only way in);
- ``GET /shelves/{shelf_id}/items`` lists a shelf's items (2 steps to a ``sku``);
- ``GET /items/{sku}`` an item, with its maker's ``maker_ref`` and its variants (3 steps);
- ``GET /makers/{maker_ref}`` a maker (4 steps);
- ``GET /items/{sku}/variants/{variant_no}`` one variant: the number must belong to that item,
  so only a coherent pair of arguments works;
- ``GET /search?q=`` finds items by words of their names; the spec forgets to say that ``q`` is
  required (the API answers 400 naming it), and common search words find nothing;
- ``GET /account`` needs the ``X-Key`` header and echoes it back (the gateway must redact it);
- ``POST /items``, ``DELETE /items/{sku}`` and ``GET /items/{sku}/delete`` change data;
- ``GET /items/{sku}/history`` fails (503) whatever the item, ``GET /broken`` fails (500), ``GET /slow`` never answers in time, ``GET /garbage`` answers broken
  JSON, ``GET /html`` an HTML page, ``GET /quota`` an error report with status 200.

Ids are random-looking strings, so none can be guessed; unknown ids get 404. Every request is
recorded (``requests``) so tests assert on what the server really saw. ``mode="locked"`` answers
401 to everything (an API that wants credentials the probe does not have); ``delay`` slows every
answer (for interrupting a probe).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.support.fakes.serving import LoopbackServer

SECRET = "cat-secret-91be77"

SHELVES = [{"shelf_id": "sh-7f3a", "label": "North wall"}, {"shelf_id": "sh-c21d", "label": "Cold room"}]
MAKERS = {
    "mk-a1b2": {"maker_ref": "mk-a1b2", "name": "Okafor and Sons", "country": "NG", "founded": 1931},
    "mk-99zq": {"maker_ref": "mk-99zq", "name": "Lindqvist Works", "country": "SE", "founded": 1887},
}
ITEMS = {
    "SKU-91X2": {"sku": "SKU-91X2", "name": "Brass lantern", "price": 42.5, "shelf": "sh-7f3a", "maker": "mk-a1b2",
                 "variants": [{"variant_no": 3, "color": "brass", "stock": 4}, {"variant_no": 8, "color": "black",
                                                                                "stock": 0}]},
    "SKU-4K7P": {"sku": "SKU-4K7P", "name": "Copper kettle", "price": 30.0, "shelf": "sh-7f3a", "maker": "mk-99zq",
                 "variants": [{"variant_no": 11, "color": "copper", "stock": 9}]},
    "SKU-0Q5M": {"sku": "SKU-0Q5M", "name": "Oak stool", "price": 55.0, "shelf": "sh-c21d", "maker": "mk-99zq",
                 "variants": [{"variant_no": 21, "color": "natural", "stock": 2, "note": "hand oiled"}]},
}


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]


@dataclass
class CatalogAPI(LoopbackServer):
    mode: str = "open"
    delay: float = 0.0
    slow: float = 3.0
    port: int = 0
    requests: list[Seen] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()

    def paths(self, method: str | None = None) -> list[str]:
        return [r.path for r in self.requests if method is None or r.method == method]

    def start(self) -> CatalogAPI:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *a: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (the slow endpoint): nothing to answer

            def _json(self, status: int, obj: Any) -> None:
                self._send(status, json.dumps(obj).encode())

            def _serve(self) -> None:
                split = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                query = {k: v[-1] for k, v in parse_qs(split.query).items()}
                with api._lock:
                    api.requests.append(Seen(self.command, split.path, query, dict(self.headers.items())))
                if api.delay:
                    time.sleep(api.delay)
                if api.mode == "locked":
                    return self._json(401, {"error": "unauthorized", "message": "an API key is required"})
                parts = [unquote(p) for p in split.path.split("/") if p]
                if self.command == "POST" and parts == ["items"]:
                    return self._json(201, {"sku": "SKU-NEW1", "created": True})
                if self.command == "DELETE" and len(parts) == 2 and parts[0] == "items":
                    return self._json(200, {"deleted": parts[1]})
                if self.command != "GET":
                    return self._json(405, {"error": "method not allowed"})
                self._get(parts, query)

            def _get(self, parts: list[str], q: dict[str, str]) -> None:
                if parts == ["shelves"]:
                    return self._json(200, {"shelves": SHELVES, "count": len(SHELVES)})
                if len(parts) == 3 and parts[0] == "shelves" and parts[2] == "items":
                    if parts[1] not in {s["shelf_id"] for s in SHELVES}:
                        return self._json(404, {"error": "no such shelf"})
                    items = [{"sku": i["sku"], "name": i["name"]} for i in ITEMS.values() if i["shelf"] == parts[1]]
                    return self._json(200, {"shelf_id": parts[1], "items": items})
                if len(parts) >= 2 and parts[0] == "items":
                    item = ITEMS.get(parts[1])
                    if item is None:
                        return self._json(404, {"error": f"no item {parts[1]}"})
                    if len(parts) == 2:
                        maker = MAKERS[item["maker"]]
                        return self._json(200, {"sku": item["sku"], "name": item["name"], "price": item["price"],
                                                "maker": {"maker_ref": maker["maker_ref"], "name": maker["name"]},
                                                "variants": [{"variant_no": v["variant_no"], "color": v["color"]}
                                                             for v in item["variants"]]})
                    if parts[2:] == ["history"]:
                        return self._json(503, {"error": "the history service is down"})
                    if len(parts) == 4 and parts[2] == "variants":
                        variant = next((v for v in item["variants"] if str(v["variant_no"]) == parts[3]), None)
                        if variant is None:
                            return self._json(404, {"error": "no such variant of this item"})
                        return self._json(200, {"sku": item["sku"], **variant})
                if len(parts) == 2 and parts[0] == "makers":
                    maker = MAKERS.get(parts[1])
                    return self._json(200, maker) if maker else self._json(404, {"error": "no such maker"})
                if parts == ["search"]:
                    if "q" not in q:
                        return self._json(400, {"error": "bad_request", "message": "missing required parameter 'q'"})
                    words = q["q"].lower().split()
                    hits = [{"sku": i["sku"], "name": i["name"]} for i in ITEMS.values()
                            if any(w in i["name"].lower().split() for w in words)]
                    return self._json(200, {"query": q["q"], "hits": hits})
                if parts == ["account"]:
                    key = self.headers.get("X-Key")
                    if key != SECRET:
                        return self._json(401, {"error": "wrong or missing X-Key"})
                    return self._json(200, {"plan": "pro", "key_seen": key, "quota": 1000})
                if parts == ["broken"]:
                    return self._json(500, {"error": "internal", "message": "the database is on fire"})
                if parts == ["slow"]:
                    time.sleep(api.slow)
                    return self._json(200, {"late": True})
                if parts == ["garbage"]:
                    return self._send(200, b'{"items": [1, 2, ')
                if parts == ["quota"]:
                    return self._json(200, {"ok": False, "error": "the quota service is unavailable"})
                if parts == ["html"]:
                    return self._send(200, b"<!DOCTYPE html><html><body>Sign in</body></html>", "text/html")
                self._json(404, {"error": "not found"})

            do_GET = do_POST = do_DELETE = do_PUT = _serve

        self._serve(Handler, self.port)
        assert self._server is not None
        self.port = self._server.server_address[1]
        return self

    def spec(self, *, only: tuple[str, ...] | None = None) -> dict[str, Any]:
        return catalog_spec(self.url, only=only)

    def write_spec(self, path: Path, **kw: Any) -> Path:
        path.write_text(json.dumps(self.spec(**kw), indent=1))
        return path


def _op(op_id: str, summary: str, params: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": op_id, "summary": summary,
                          "responses": {"200": {"description": "OK"}, "404": {"description": "Not found"}}}
    if params:
        op["parameters"] = params
    op.update(extra)
    return op


def _path(name: str, kind: str = "string") -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": kind}}


def catalog_spec(url: str, *, only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The OpenAPI 3.0 document of the catalog: operations and parameters, no response schemas."""
    paths: dict[str, Any] = {
        "/shelves": {"get": _op("listShelves", "All shelves of the warehouse.")},
        "/shelves/{shelf_id}/items": {"get": _op("listShelfItems", "The items on one shelf.", [_path("shelf_id")])},
        "/items/{sku}": {"get": _op("getItem", "One item by its SKU.", [_path("sku")]),
                         "delete": _op("deleteItem", "Remove an item from the catalog.", [_path("sku")])},
        "/items/{sku}/delete": {"get": _op("deleteItemViaGet", "Remove an item (legacy GET form).", [_path("sku")])},
        "/items/{sku}/variants/{variant_no}": {"get": _op(
            "getItemVariant", "One variant of an item.", [_path("sku"), _path("variant_no", "integer")])},
        "/makers/{maker_ref}": {"get": _op("getMaker", "A maker by reference.", [_path("maker_ref")])},
        "/items/{sku}/history": {"get": _op("getItemHistory", "Price history of an item.", [_path("sku")])},
        "/search": {"get": _op("searchItems", "Find items by words of their names.", [
            {"name": "q", "in": "query", "schema": {"type": "string"}, "description": "words to look for"}])},
        "/items": {"post": _op("createItem", "Add an item.", requestBody={"required": True, "content": {
            "application/json": {"schema": {"type": "object", "required": ["name"],
                                            "properties": {"name": {"type": "string"}}}}}})},
        "/account": {"get": _op("getAccount", "The caller's account.", security=[{"key": []}])},
        "/broken": {"get": _op("getBroken", "Always fails.")},
        "/slow": {"get": _op("getSlow", "Never answers in time.")},
        "/garbage": {"get": _op("getGarbage", "Answers broken JSON.")},
        "/html": {"get": _op("getHtml", "Answers an HTML page.")},
        "/quota": {"get": _op("getQuota", "Answers an error with status 200.")},
    }
    if only is not None:
        paths = {p: item for p, item in paths.items() if p in only}
    return {
        "openapi": "3.0.3",
        "info": {"title": "Catalog", "version": "1.0", "description": "A warehouse catalog."},
        "servers": [{"url": url}],
        "components": {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"}}},
        "paths": paths,
    }
