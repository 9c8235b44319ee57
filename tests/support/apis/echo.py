"""A real HTTP API on 127.0.0.1 that hands a program's data back, for the host-memory tests.

An API that echoes what it is sent is the lever a hostile program has on the host's memory
through responses: whatever it sends comes back as a response the gateway decodes, redacts and
logs. The server never parses what it echoes (its own memory stays flat, and it runs in the
test's process, not in the atc process being measured):

- ``POST /echo``: the JSON request body, byte for byte;
- ``GET /blob?n=N&kind=K``: a JSON array of ``n`` items made on the fly: ``lists`` (``[]``, the
  most Python objects per byte), ``numbers`` (``1.5``) or ``text`` (1 KB strings).

The spec's ``echo`` tool takes ``items`` (an array of integers), ``choice`` (an integer array or
a string: an ``anyOf`` whose every branch is tried on a bad value), ``blob`` (a string) and
``data`` (any object); ``blob`` takes ``n`` and ``kind``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.fakes.serving import LoopbackServer, QuietHandler

__all__ = ["EchoAPI", "echo_spec"]

_ITEMS = {"lists": b"[]", "numbers": b"1.5", "text": b'"' + b"t" * 1024 + b'"'}


@dataclass
class EchoAPI(LoopbackServer):
    port: int = 0
    requests: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> EchoAPI:
        api = self

        class Handler(QuietHandler):
            def _send(self, chunks: list[bytes]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(sum(map(len, chunks))))
                self.end_headers()
                for chunk in chunks:
                    self.wfile.write(chunk)

            def do_POST(self) -> None:
                api.requests += 1
                self._send([self.body() or b"{}"])

            def do_GET(self) -> None:
                api.requests += 1
                split = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(split.query).items()}
                n = max(0, min(int(query.get("n", "0") or 0), 50_000_000))
                item = _ITEMS.get(query.get("kind", "lists"), b"[]")
                block = b",".join([item] * 4096)
                whole, rest = divmod(n, 4096)
                chunks = [b"["]
                for i in range(whole):
                    chunks.append(block if i == 0 else b"," + block)
                if rest:
                    chunks.append((b"," if whole else b"") + b",".join([item] * rest))
                chunks.append(b"]")
                self._send(chunks)

        self.port = self._serve(Handler, self.port).server_address[1]
        return self

    def write_spec(self, path: Path) -> Path:
        import json

        path.write_text(json.dumps(echo_spec(self.url)))
        return path


def echo_spec(url: str) -> dict[str, Any]:
    """The OpenAPI 3.0 document of the echo API."""
    return {
        "openapi": "3.0.3",
        "info": {"title": "Echo", "version": "1.0", "description": "Hands back what it is sent."},
        "servers": [{"url": url}],
        "paths": {
            "/echo": {"post": {
                "operationId": "echo", "summary": "Send data and get it back.",
                "requestBody": {"required": True, "content": {"application/json": {"schema": {
                    "type": "object",
                    "properties": {
                        "items": {"type": "array", "items": {"type": "integer"}},
                        "choice": {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "string"}]},
                        "blob": {"type": "string"},
                        "data": {"type": "object"},
                    }}}}},
                "responses": {"200": {"description": "What was sent."}}}},
            "/blob": {"get": {
                "operationId": "blob", "summary": "A JSON array of n generated items.",
                "parameters": [{"name": "n", "in": "query", "required": True, "schema": {"type": "integer"}},
                               {"name": "kind", "in": "query", "schema": {"type": "string",
                                                                         "enum": ["lists", "numbers", "text"]}}],
                "responses": {"200": {"description": "The items."}}}},
        },
    }
