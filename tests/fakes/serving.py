"""What every HTTP server written for the tests shares: serving a handler class on 127.0.0.1 in a
daemon thread, stopping it, and being a context manager. A subclass defines ``start()``, which
builds its handler class and calls ``_serve``."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

__all__ = ["LoopbackServer"]


class LoopbackServer:
    _server: ThreadingHTTPServer | None = None

    def start(self) -> Self:
        raise NotImplementedError

    def _serve(self, handler: type[BaseHTTPRequestHandler], port: int = 0) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return server

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
