"""An OpenAI-compatible embeddings server on 127.0.0.1 with deterministic vectors.

``POST /v1/embeddings`` with ``{"model", "input": [texts]}`` answers one vector per text: a
bag of hashed words (each lower-case word adds 1 to one of ``dim`` buckets), so texts sharing
words are similar and results are reproducible. Every request body is recorded (``requests``),
so tests can count what was embedded. ``mode`` makes it misbehave: ``"garbage"`` (a body that is
not an embeddings list), ``"short"`` (one vector too few), ``"dim"`` (a different vector length
on every other request), ``"error"`` (HTTP 500). ``delay``: seconds before each answer (a slow
model, for what an import says while it waits).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.fakes.serving import LoopbackServer

__all__ = ["FakeEmbeddings", "bag_vector"]


def bag_vector(text: str, dim: int) -> list[float]:
    vec = [0.0] * dim
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vec[int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little") % dim] += 1.0
    if not any(vec):
        vec[0] = 1.0
    return vec


class FakeEmbeddings(LoopbackServer):
    """The server; use as a context manager. ``base_url`` ends in ``/v1``."""

    def __init__(self, dim: int = 64, mode: str = "ok", delay: float = 0.0) -> None:
        self.dim = dim
        self.mode = mode
        self.delay = delay
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def texts(self) -> list[str]:
        """Every text embedded so far, in order."""
        return [t for r in self.requests for t in r.get("input", [])]

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        with self._lock:
            self.requests.append(body)
            count = len(self.requests)
        if self.delay:
            time.sleep(self.delay)
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list):
            return 400, {"error": {"message": "input must be a list of strings"}}
        if self.mode == "error":
            return 500, {"error": {"message": "scripted failure"}}
        if self.mode == "garbage":
            return 200, {"object": "list", "data": "not vectors"}
        dim = self.dim + (1 if self.mode == "dim" and count % 2 == 0 else 0)
        data = [{"object": "embedding", "index": i, "embedding": bag_vector(str(t), dim)}
                for i, t in enumerate(texts)]
        if self.mode == "short":
            data = data[:-1]
        data.reverse()  # the API gives an index per item: clients must not rely on the order
        return 200, {"object": "list", "data": data, "model": body.get("model"),
                     "usage": {"prompt_tokens": 0, "total_tokens": 0}}

    def start(self) -> FakeEmbeddings:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.path.rstrip("/") != "/v1/embeddings":
                    status, obj = 404, {"error": {"message": f"no route {self.path}"}}
                else:
                    try:
                        status, obj = server._answer(json.loads(raw or b"{}"))
                    except ValueError:
                        status, obj = 400, {"error": {"message": "body is not JSON"}}
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._serve(Handler)
        return self
