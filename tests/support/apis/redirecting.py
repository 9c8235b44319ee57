"""A bucket store on 127.0.0.1 whose writes may answer with redirects, for the tests of probing's
scope guard (issue 29): does a write that the scope allows follow a ``Location`` out of it?

Buckets of items, the way object stores lay them out:

- ``GET /buckets``, ``GET``/``PUT``/``DELETE /buckets/{bucket_id}`` (a ``PUT`` creates: 201, or 200
  when it exists), ``GET``/``POST /buckets/{bucket_id}/items`` (201 with the new id),
  ``GET``/``PATCH``/``DELETE /buckets/{bucket_id}/items/{id}``, and a read by POST, ``POST
  /buckets/{bucket_id}/items/search`` (``{"title": "..."}`` -> the items whose title holds it);
- ``redirect(method, path)`` decides, before anything is done, whether a request is answered with
  a redirect instead: ``(status, location)`` or None. A request that reaches an object is done
  (a ``DELETE`` there really deletes), whatever sent it there;
- a trailing slash is the same path (``/buckets/x/`` is ``/buckets/x``).

The user's data is the bucket ``prod`` (ten items) and ``archive``; ``log`` holds every request as
(method, path, status), ``data`` the state.
"""

from __future__ import annotations

import copy
import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from tests.support.fakes.serving import LoopbackServer, QuietHandler

__all__ = ["RedirectingStore", "INITIAL", "redirecting_spec"]

INITIAL: dict[str, dict[str, dict[str, Any]]] = {
    "prod": {f"p{i}": {"id": f"p{i}", "title": f"invoice {i}"} for i in range(1, 11)},
    "archive": {"a1": {"id": "a1", "title": "old invoice"}},
}
Redirect = Callable[[str, str], "tuple[int, str] | None"]


@dataclass
class RedirectingStore(LoopbackServer):
    port: int = 0
    redirect: Redirect | None = None
    data: dict[str, dict[str, dict[str, Any]]] = field(default_factory=lambda: copy.deepcopy(INITIAL))
    log: list[tuple[str, str, int]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def spec(self) -> dict[str, Any]:
        return redirecting_spec(self.url)

    def writes(self) -> list[tuple[str, str, int]]:
        return [r for r in self.log if r[0] not in ("GET", "HEAD")]

    def start(self) -> RedirectingStore:
        api = self

        class Handler(QuietHandler):
            def _serve(self) -> None:
                raw = self.body()
                path = urlsplit(self.path).path
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = None
                hop = api.redirect(self.command, path) if api.redirect is not None else None
                with api._lock:
                    if hop is not None:
                        api.log.append((self.command, path, hop[0]))
                    else:
                        status, answer = api.answer(self.command, path, body if isinstance(body, dict) else {})
                        api.log.append((self.command, path, status))
                if hop is not None:
                    self.send_json(hop[0], {"moved": hop[1]}, headers={"Location": hop[1]})
                else:
                    self.send_json(status, answer)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        self._serve(Handler, self.port)
        assert self._server is not None
        self.port = self._server.server_address[1]
        return self

    def answer(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """Status and body of one request that was not redirected (called under the lock)."""
        parts = [unquote(p) for p in path.split("/") if p]
        if not parts or parts[0] != "buckets":
            return 404, {"message": "no such path"}
        if len(parts) == 1:
            return (200, {"data": [{"id": b} for b in self.data]}) if method == "GET" else (405, {})
        bucket = self.data.get(parts[1])
        if len(parts) == 2:
            if method == "PUT":
                if bucket is not None:
                    return 200, {"data": {"id": parts[1]}}
                self.data[parts[1]] = {}
                return 201, {"data": {"id": parts[1]}}
            if bucket is None:
                return 404, {"message": f"bucket {parts[1]!r} not found"}
            if method == "DELETE":
                del self.data[parts[1]]
                return 200, {"data": {"id": parts[1], "deleted": True}}
            return (200, {"data": {"id": parts[1], "items": len(bucket)}}) if method == "GET" else (405, {})
        if bucket is None or parts[2] != "items":
            return 404, {"message": "not found"}
        if len(parts) == 3:
            if method == "POST":
                ident = secrets.token_hex(4)
                bucket[ident] = {"id": ident, "title": str(body.get("title") or "")}
                return 201, {"data": bucket[ident]}
            return (200, {"data": list(bucket.values())}) if method == "GET" else (405, {})
        if len(parts) == 4 and parts[3] == "search" and method == "POST":
            words = str(body.get("title") or "")
            return 200, {"data": [i for i in bucket.values() if words in i["title"]]}
        item = bucket.get(parts[3]) if len(parts) == 4 else None
        if item is None:
            return 404, {"message": "item not found"}
        if method == "PATCH":
            item.update({k: v for k, v in body.items() if k == "title"})
            return 200, {"data": item}
        if method == "DELETE":
            del bucket[parts[3]]
            return 200, {"data": {"id": parts[3], "deleted": True}}
        return (200, {"data": item}) if method == "GET" else (405, {})


def _op(op_id: str, params: list[str], body: bool = False, ok: str = "200") -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": op_id, "parameters": [
        {"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in params],
        "responses": {ok: {"description": "OK"}}}
    if body:
        op["requestBody"] = {"content": {"application/json": {"schema": {
            "type": "object", "properties": {"title": {"type": "string"}}}}}}
    return op


def redirecting_spec(url: str) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "Buckets", "version": "1"}, "servers": [{"url": url}], "paths": {
        "/buckets": {"get": _op("list_buckets", [])},
        "/buckets/{bucket_id}": {"get": _op("get_bucket", ["bucket_id"]),
                                 "put": _op("create_bucket", ["bucket_id"], ok="201"),
                                 "delete": _op("delete_bucket", ["bucket_id"])},
        "/buckets/{bucket_id}/items": {"get": _op("list_items", ["bucket_id"]),
                                       "post": _op("create_item", ["bucket_id"], body=True, ok="201")},
        "/buckets/{bucket_id}/items/search": {"post": _op("search_items", ["bucket_id"], body=True)},
        "/buckets/{bucket_id}/items/{id}": {"get": _op("get_item", ["bucket_id", "id"]),
                                            "patch": _op("patch_item", ["bucket_id", "id"], body=True),
                                            "delete": _op("delete_item", ["bucket_id", "id"])},
    }}
