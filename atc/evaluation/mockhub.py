"""``atc mock`` of every collection of a suite, behind one loopback port.

A suite may use hundreds of collections (ToolBench: one per RapidAPI tool). Rather than one
server and one port each, the hub serves collection ``NAME`` under ``/NAME/`` and hands each
request to that collection's ``atc.mock.MockApp`` (built on its first request), through the HTTP
server of ``atc mock`` itself (``atc.mock.server.Serving``): the answers are exactly ``atc mock``'s,
media types, HEAD and OPTIONS included (``--no-auth``: credentials are not asked for, since a
suite run on the mock has no real keys). ``base_urls`` is what the run's ``Toolset`` gets
(``Toolset.base_urls``). It binds 127.0.0.1 only and answers nothing but the collections it was
given.
"""

from __future__ import annotations

import threading
from urllib.parse import quote, unquote, urlsplit

from atc.mock import MockApp
from atc.mock.responses import MockResponse
from atc.mock.server import Serving
from protocols.model import Collection

__all__ = ["MockHub"]


class MockHub(Serving):
    """Mocks of many collections on one port of 127.0.0.1, in a background thread."""

    def __init__(self, collections: list[Collection]) -> None:
        self.collections = {c.name: c for c in collections}
        self._apps: dict[str, MockApp] = {}
        self._lock = threading.Lock()

    def app(self, name: str) -> MockApp | None:
        with self._lock:
            if name not in self._apps:
                collection = self.collections.get(name)
                if collection is None:
                    return None
                # credentials are not checked: a suite run on the mock needs no real key, and the
                # gateway sends one only when --credential gives it
                self._apps[name] = MockApp(collection, auth=False)
            return self._apps[name]

    def locate(self, target: str) -> tuple[MockApp, str] | MockResponse:
        """``/NAME/rest?query`` is ``/rest?query`` of collection NAME's app."""
        parts = urlsplit(target)
        name, _, rest = parts.path.lstrip("/").partition("/")
        app = self.app(unquote(name))
        if app is None:
            return MockResponse(404, {"error": "not_found", "message": f"no collection {unquote(name)!r} here"})
        return app, "/" + rest + (f"?{parts.query}" if parts.query else "")

    @property
    def base_urls(self) -> dict[str, str]:
        """Collection name -> the URL its tools are served at."""
        return {name: f"{self.url}/{quote(name, safe='')}" for name in self.collections}
