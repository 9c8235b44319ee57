"""A 127.0.0.1 API that gives the caller's key back, encoded the ways real APIs (and hostile ones)
do, for the tests of redaction, credential binding and spec fetching.

- ``GET /leak/{how}`` answers the ``X-API-Key`` header it received, as ``how`` says:
  ``plain``, ``number`` (a JSON number), ``cursor`` (a base64 pagination cursor that packs the
  request, key included), ``cursor-url`` (base64url, no padding), ``nested-cursor`` (a cursor
  inside a cursor), ``header-name`` (a response header NAMED after the key), ``hex``, ``upper``,
  ``percent`` (every byte percent-encoded), ``html`` (character references), ``json-text`` (a
  text body holding JSON with ``\\u`` escapes), ``basic`` (the key in a Basic header value,
  inside a cursor);
- ``GET /sink?v=...`` takes anything (where a program would exfiltrate what it read);
- ``GET /whoami`` says whether the key arrived;
- ``GET /spec.json`` serves the API's own OpenAPI document (behind the key when ``private``);
- ``GET /go?to=URL`` redirects (``302``, or ``status=``) to URL;
- ``GET /private`` answers 401 without a key;
- ``GET /users/{userId}/posts?pageSize=N`` echoes what it got under the API's own (camelCase) names.

Every request is recorded (``requests``: method, raw target, headers).
"""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.fakes.serving import LoopbackServer, QuietHandler

__all__ = ["LeakyAPI", "LEAKS", "Seen"]

LEAKS = ("plain", "number", "cursor", "cursor-url", "nested-cursor", "header-name", "hex", "upper", "percent",
         "html", "json-text", "basic")


def _cursor(payload: dict[str, Any], *, url: bool = False) -> str:
    raw = json.dumps(payload).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=") if url else base64.b64encode(raw).decode()


@dataclass
class Seen:
    method: str
    target: str
    headers: dict[str, str]


@dataclass
class LeakyAPI(LoopbackServer):
    """``prefix`` starts every operationId of its spec (two of them can be in one run);
    ``scheme`` is the name of its security scheme (``HeaderKey``, as in many real specs)."""

    prefix: str = "leaky"
    scheme: str = "HeaderKey"
    private: bool = False
    requests: list[Seen] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def keys_seen(self) -> list[str]:
        return [s.headers.get("X-API-Key", "") for s in self.requests if s.headers.get("X-API-Key")]

    def spec(self, *, declare_scheme: bool = True) -> dict[str, Any]:
        """Its OpenAPI document; ``declare_scheme=False``: like the many specs that say nothing of
        the key the API wants."""
        p = self.prefix

        def op(op_id: str, params: list[dict[str, Any]]) -> dict[str, Any]:
            return {"get": {"operationId": op_id, "parameters": params,
                            "responses": {"200": {"description": "ok"}}}}

        doc: dict[str, Any] = {
            "openapi": "3.0.3", "info": {"title": p, "version": "1"}, "servers": [{"url": self.url}],
            "paths": {
                "/leak/{how}": op(f"{p}Leak", [{"name": "how", "in": "path", "required": True,
                                                "schema": {"type": "string"}}]),
                "/sink": op(f"{p}Sink", [{"name": "v", "in": "query", "schema": {"type": "string"}}]),
                "/whoami": op(f"{p}Whoami", []),
                "/private": op(f"{p}Private", []),
                "/users/{userId}/posts": op(f"{p}Posts", [
                    {"name": "userId", "in": "path", "required": True, "schema": {"type": "integer"}},
                    {"name": "pageSize", "in": "query", "schema": {"type": "integer", "maximum": 50}}]),
            },
        }
        if declare_scheme:
            doc["components"] = {"securitySchemes": {self.scheme: {"type": "apiKey", "in": "header",
                                                                    "name": "X-API-Key"}}}
            doc["security"] = [{self.scheme: []}]
        return doc

    def start(self) -> LeakyAPI:
        api = self

        class Handler(QuietHandler):
            def _send(self, status: int, body: bytes, ctype: str = "application/json",
                      headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def _json(self, obj: Any, headers: dict[str, str] | None = None) -> None:
                self.send_json(200, obj, headers)

            def do_GET(self) -> None:
                with api._lock:
                    api.requests.append(Seen("GET", self.path, dict(self.headers.items())))
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                key = self.headers.get("X-API-Key", "")
                if parts.path.startswith("/leak/"):
                    return self._leak(parts.path[len("/leak/"):], key)
                if parts.path == "/sink":
                    return self._json({"ok": True})
                if parts.path == "/whoami":
                    return self._json({"key_given": bool(key)})
                if parts.path == "/private":
                    if not key:
                        return self._send(401, b'{"message": "an API key is required"}')
                    return self._json({"secret_stuff": 42})
                if parts.path.startswith("/users/") and parts.path.endswith("/posts"):
                    return self._json({"userId": parts.path.split("/")[2], "pageSize": query.get("pageSize")})
                if parts.path == "/spec.json":
                    if api.private and not key:
                        return self._send(401, b'{"error": "key required"}')
                    return self._json(api.spec())
                if parts.path == "/go":
                    status = int(query.get("status", "302"))
                    return self._send(status, b"", headers={"Location": query.get("to", "/")})
                self._send(404, b'{"error": "no such route"}')

            def _leak(self, how: str, key: str) -> None:
                if how == "plain":
                    return self._json({"you_sent": key})
                if how == "number":
                    return self._json({"id": int(key), "items": [1, 2]})
                if how == "cursor":
                    return self._json({"items": [1, 2], "next": _cursor({"offset": 2, "auth": key})})
                if how == "cursor-url":
                    return self._json({"items": [1, 2], "next": _cursor({"o": 2, "k": key, "x": "?~"}, url=True)})
                if how == "nested-cursor":
                    inner = _cursor({"after": 7, "auth": key})
                    return self._json({"next": _cursor({"page": 3, "prev": inner})})
                if how == "header-name":
                    return self._json({"ok": True}, headers={f"X-Seen-{key}": "yes"})
                if how == "hex":
                    return self._json({"trace": "id-" + key.encode().hex() + "-end"})
                if how == "upper":
                    return self._json({"normalised": key.upper()})
                if how == "percent":
                    return self._json({"url": "/x?k=" + "".join(f"%{b:02X}" for b in key.encode())})
                if how == "html":
                    return self._send(200, ("<p>key: " + "".join(f"&#{ord(c)};" for c in key) + "</p>").encode(),
                                      "text/html")
                if how == "json-text":
                    body = json.dumps({"k": key}).replace(key[:3], "".join(f"\\u{ord(c):04x}" for c in key[:3]))
                    return self._send(200, f"debug: {body}".encode(), "text/plain")
                if how == "basic":
                    token = base64.b64encode(f"user:{key}".encode()).decode()
                    return self._json({"next": _cursor({"headers": {"Authorization": f"Basic {token}"}})})
                self._send(404, b'{"error": "no such leak"}')

        self._serve(Handler)
        return self
