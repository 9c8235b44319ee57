"""What the ``atc serve`` tests share: real servers and real clients.

- ``Apis``: the HTTP APIs the served programs call, on 127.0.0.1: the library (authors, books,
  orders behind ``X-API-Key``), the catalog's ``/account`` (echoes its ``X-Key``: the gateway must
  redact it) and ``/slow``, and ``CookieAPI`` (``signIn`` sets a session cookie,
  ``whoami`` that reports the cookie it got);
- ``serve_args``: the ``atc serve`` command line over those APIs plus the shop MCP server;
- ``HttpServe``: ``atc serve --transport http`` as a subprocess (its ``--json`` ready line read,
  its stderr kept in a file); ``http_client``/``stdio_client``: the official SDK's client over
  streamable HTTP (with the bearer token) or stdio;
- ``spinning``: the host pids of a server's sandbox processes that burn CPU (its jails'
  descendants, or the processes in its Docker containers), to find a running program.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.apis.catalog import SECRET as CAT_SECRET
from tests.support.apis.catalog import CatalogAPI
from tests.support.apis.library import SECRET as LIB_SECRET
from tests.support.apis.library import LibraryAPI
from tests.support.fakes.serving import LoopbackServer, QuietHandler
from tests.support.mcp_servers import ROOT, SHOP
from tests.support.procs import descendants

ATC = Path(sys.executable).with_name("atc")
TOKEN = "serve-test-token-4f1e9a7c2b"
#: A program that never ends by itself (what a cancelled or disconnected client must stop).
SPIN = "n = 0\nwhile True:\n    n += 1\n"


class CookieAPI(LoopbackServer):
    """``GET /login?user=U`` sets the cookie ``sid=U``; ``GET /whoami`` answers the user of the
    ``sid`` cookie it was sent (``null`` without one)."""

    def start(self) -> CookieAPI:
        class Handler(QuietHandler):
            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                headers = {}
                if path == "/login":
                    user = query.partition("user=")[2] or "nobody"
                    body = {"logged_in": user}
                    headers["Set-Cookie"] = f"sid={user}; Path=/"
                elif path == "/whoami":
                    cookies = dict(c.strip().split("=", 1) for c in (self.headers.get("Cookie") or "").split(";")
                                   if "=" in c)
                    body = {"user": cookies.get("sid")}
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_json(200, body, headers)

        self._serve(Handler)
        return self

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def spec(self) -> dict[str, Any]:
        sid = {"name": "sid", "in": "cookie", "required": False, "schema": {"type": "string"},
               "description": "the session cookie (the API sets it at login)"}
        return {"openapi": "3.0.3", "info": {"title": "Sessions", "version": "1"}, "servers": [{"url": self.url}],
                "paths": {"/login": {"get": {"operationId": "signIn", "summary": "Log in: sets the session cookie.",
                                             "parameters": [{"name": "user", "in": "query", "required": True,
                                                             "schema": {"type": "string"}}],
                                             "responses": {"200": {"description": "OK"}}}},
                          "/whoami": {"get": {"operationId": "currentUser", "summary": "The logged-in user.",
                                              "parameters": [sid], "responses": {"200": {"description": "OK"}}}}}}


@dataclass
class Apis:
    library: LibraryAPI
    catalog: CatalogAPI
    cookies: CookieAPI
    specs: list[Path] = field(default_factory=list)

    @classmethod
    def start(cls, folder: Path) -> Apis:
        library = LibraryAPI()
        library.start()
        apis = cls(library, CatalogAPI(slow=30.0).start(), CookieAPI().start())
        apis.specs = [library.write_spec(folder / "library.json"),
                      apis.catalog.write_spec(folder / "catalog.json", only=("/account", "/slow")),
                      folder / "sessions.json"]
        apis.specs[2].write_text(json.dumps(apis.cookies.spec()))
        return apis

    def stop(self) -> None:
        self.library.stop()
        self.catalog.stop()
        self.cookies.stop()


@pytest.fixture(scope="module")
def apis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Apis]:
    """The APIs for a module's servers (take it with ``from tests.support.serve import apis as apis``)."""
    started = Apis.start(tmp_path_factory.mktemp("specs"))
    try:
        yield started
    finally:
        started.stop()


def serve_args(apis: Apis, *extra: str, shop: bool = True) -> list[str]:
    """``serve --tools ...`` over the APIs (and the shop MCP server), with their credentials."""
    args = ["serve"]
    for spec in apis.specs:
        args += ["--tools", str(spec)]
    if shop:
        args += ["--tools", SHOP]
    return args + ["--credential", "api_key=env:LIB_KEY", "--credential", "key=env:CAT_KEY", *extra]


def serve_env(home: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATC_", "OPENAI_"))}
    env.update({"ATC_HOME": str(home), "ATC_SERVE_TOKEN": TOKEN, "LIB_KEY": LIB_SECRET, "CAT_KEY": CAT_SECRET,
                "ATC_SEARCH_SERVER": "off", "ATC_EMBED_MODEL": "none", "PYTHONPATH": str(ROOT)})
    env.update(more)
    return env


@dataclass
class HttpServe:
    """``atc serve --transport http`` running as a subprocess."""

    proc: subprocess.Popen[str]
    url: str
    ready: dict[str, Any]
    log: Path

    @classmethod
    def start(cls, args: list[str], env: dict[str, str], log: Path) -> HttpServe:
        with log.open("w") as err:
            proc = subprocess.Popen([str(ATC), *args, "--transport", "http", "--port", "0", "--json"],
                                    stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=ROOT)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            proc.wait(10)
            raise AssertionError(f"atc serve did not start (exit {proc.returncode}): {log.read_text()[-2000:]}")
        ready = json.loads(line)
        if "url" not in ready:
            proc.wait(10)
            raise AssertionError(f"atc serve did not start: {ready}")
        return cls(proc, ready["url"], ready, log)

    def stop(self) -> int:
        self.proc.terminate()
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("atc serve did not stop on SIGTERM") from None

    def stderr(self) -> str:
        return self.log.read_text()

    def __enter__(self) -> HttpServe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: The protocol without sessions (each request stands alone): what every MCP SDK 2.x client speaks.
STATELESS = "2026-07-28"


@asynccontextmanager
async def http_client(url: str, token: str = TOKEN, mode: str = "legacy", headers: dict[str, str] | None = None,
                      issued: list[str] | None = None) -> AsyncIterator[Any]:
    """The SDK's ``Client`` over streamable HTTP with ``Authorization: Bearer token`` and any other
    ``headers`` (a session id it was never given, a Host of another site...). ``issued`` collects
    the session ids the server's answers carry."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def note(response: Any) -> None:
        sid = response.headers.get("mcp-session-id")
        if issued is not None and sid and sid not in issued:
            issued.append(sid)

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}", **(headers or {})}, timeout=120,
                                  event_hooks={"response": [note]}) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client


@asynccontextmanager
async def stdio_client(args: list[str], env: dict[str, str]) -> AsyncIterator[Any]:
    """The SDK's ``Client`` over stdio: it starts ``atc ARGS`` and talks on its stdin/stdout."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client as transport

    params = StdioServerParameters(command=str(ATC), args=args, env=env, cwd=str(ROOT))
    async with Client(transport(params), mode="legacy") as client:
        yield client


# -- sandbox processes --------------------------------------------------------------------------


def _ticks(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[11]) + int(fields[12])


def alive(pid: int) -> bool:
    return _ticks(pid) is not None


def container_pids(owner: int) -> set[int]:
    """Host pids of the processes inside the running Docker containers ``owner`` started."""
    try:
        from sandbox.docker.engine import OWNER_LABEL, connect
    except ImportError:
        return set()
    client = connect(timeout=10)
    try:
        pids: set[int] = set()
        for c in client.api.containers(filters={"label": f"{OWNER_LABEL}={owner}"}):
            try:
                top = client.api.top(c["Id"])
            except Exception:  # the container stopped meanwhile
                continue
            index = top["Titles"].index("PID")
            pids |= {int(row[index]) for row in top.get("Processes") or []}
        return pids
    finally:
        client.close()


def containers(owner: int) -> list[str]:
    from sandbox.docker.engine import OWNER_LABEL, connect

    client = connect(timeout=10)
    try:
        return [c["Id"] for c in client.api.containers(all=True, filters={"label": f"{OWNER_LABEL}={owner}"})]
    finally:
        client.close()


def spinning(candidates: Iterable[int], window: float = 0.6) -> set[int]:
    """The pids among ``candidates`` that used CPU for at least a tenth of ``window``."""
    pids = set(candidates)
    before = {p: _ticks(p) for p in pids}
    time.sleep(window)
    hz = os.sysconf("SC_CLK_TCK")
    busy = set()
    for p in pids:
        a, b = before[p], _ticks(p)
        if a is not None and b is not None and (b - a) / hz >= window / 10:
            busy.add(p)
    return busy


def sandbox_pids(server: int) -> set[int]:
    return descendants(server) | container_pids(server)


def wait_spinning(server: int, timeout: float = 30.0) -> set[int]:
    """The sandbox processes of ``server`` running a program, once there are some."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = spinning(sandbox_pids(server))
        if busy:
            return busy
    raise AssertionError("no sandbox process of the server runs the program")


def wait_gone(pids: set[int], timeout: float) -> set[int]:
    """The pids still alive after waiting up to ``timeout`` for all to end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = {p for p in pids if alive(p)}
        if not left:
            return set()
        time.sleep(0.1)
    return {p for p in pids if alive(p)}
