"""Live MCP sessions for the gateway's threads: ``McpServers``.

The SDK is asyncio/anyio; the gateway serves calls from plain threads. One background thread runs
an event loop that owns every session; ``list_tools`` and ``call`` are blocking wrappers that hand a
coroutine to that loop and wait (bounded) for its answer.

A connection is one task that enters the transport (``sandbox.gateway.mcp.stdio``: the server is a child
process in its own process group, its stderr kept in a temporary file for error messages; or the
SDK's streamable HTTP / SSE client over ``sandbox.gateway.mcp.httpbounds``) and the ``ClientSession``,
initializes it within ``start_timeout``, then waits until it is told to stop. Every transport
judges the server's messages before the SDK parses them (``sandbox.gateway.mcp.bounds``): a call's answer
beyond the bounds of its run's limits (``call(..., bounds=)``) is refused, the call fails at once
(``failure`` ``response``) and the connection stays up for the next. Entering and leaving happen
in that one task (anyio's cancel scopes demand it); stopping cancels its scope and the transport's
shutdown closes the server's stdin, then terminates its process group. Connections are keyed by ``McpServer.key()`` and reused across program runs and
attempts. A server that died (a call saw the connection close) is dropped, and the next use starts
it again.

Every failure is an ``McpFailure`` (a ``ToolError`` with a ``failure`` kind) with a readable message:
a command that is not there, a server that exits before or during a call (with the last line it
wrote to stderr), one that does not answer the handshake (with any non-MCP line it wrote to
stdout), a call that times out.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import tempfile
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from protocols.errors import ToolError
from protocols.model import McpServer
from sandbox.gateway.mcp import require_sdk
from sandbox.gateway.mcp.bounds import (
    CURRENT,
    REFUSED,
    CallState,
    Ledger,
    MessageBounds,
    TrackedWriter,
    parse_problem,
)
from sandbox.gateway.mcp.stdio import bounded_stdio_client

__all__ = ["McpServers", "McpFailure", "servers", "close_servers", "close_mcp_servers", "DEFAULT_START_TIMEOUT"]

#: Seconds a server has to start and answer ``initialize``.
DEFAULT_START_TIMEOUT = 30.0
#: Seconds a stopping connection gets (the SDK's own shutdown: 2 s after stdin closes, 2 s after SIGTERM).
_STOP_GRACE = 10.0
_CONNECTION_CLOSED = -32000
_REQUEST_TIMEOUT = -32001
_PARSE_ERROR = -32700


class McpFailure(ToolError):
    """An MCP exchange that failed. ``failure`` is ``connect`` (could not start or reach the
    server), ``timeout``, ``request`` (the server went away during the call), ``protocol`` (the
    server answered with an error or something unusable)."""

    def __init__(self, message: str, *, tool: str | None = None, failure: str, hint: str | None = None) -> None:
        super().__init__(message, tool=tool, hint=hint)
        self.failure = failure
        self.redirects: list[dict[str, Any]] = []


@dataclass
class _Connection:
    server: McpServer
    session: Any = None
    scope: Any = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    dead: str | None = None
    garbage: list[str] = field(default_factory=list)
    stderr: Any = None
    ledger: Ledger = field(default_factory=Ledger)

    @property
    def live(self) -> bool:
        """Initialized and not known to be gone."""
        return self.session is not None and self.dead is None

    def stderr_tail(self, limit: int = 300) -> str:
        """The last non-empty line the server wrote to stderr (its own account of a crash)."""
        if self.stderr is None:
            return ""
        try:
            self.stderr.flush()
            self.stderr.seek(0, 2)
            size = self.stderr.tell()
            self.stderr.seek(max(0, size - 4096))
            text = self.stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return lines[-1][:limit] if lines else ""

    def account(self) -> str:
        """What the server said on its way out: its stderr, or the non-MCP output it wrote."""
        parts = []
        tail = self.stderr_tail()
        if tail:
            parts.append(f"its stderr ends with: {tail}")
        if self.garbage:
            parts.append(f"it wrote non-MCP output on stdout: {self.garbage[0]}")
        return " (" + "; ".join(parts) + ")" if parts else ""


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = inner[0] if inner else exc.exceptions[0]
    return exc


class McpServers:
    """Live connections to MCP servers, one per server identity; a context manager (``close`` stops
    every server it started). Thread-safe."""

    def __init__(self, *, start_timeout: float = DEFAULT_START_TIMEOUT) -> None:
        self.start_timeout = start_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[str, _Connection] = {}
        self._lock = threading.Lock()
        self._starting: dict[str, threading.Lock] = {}
        self._closed = False

    def __enter__(self) -> McpServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the loop thread -------------------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                require_sdk()
                # The SDK logs a bad stdout line with a traceback; the failure reaches the user as
                # our message instead (a handler here keeps Python's last-resort printer quiet).
                logging.getLogger("mcp").addHandler(logging.NullHandler())
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="atc-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
                self._closed = False
            return self._loop

    def _submit(self, coro: Any, timeout: float, what: str) -> Any:
        try:
            loop = self._ensure_loop()
        except BaseException:  # no SDK: the coroutine never runs (and must not warn that it never ran)
            coro.close()
            raise
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpFailure(f"{what}: no answer within {timeout:.0f} s", failure="timeout") from None

    # -- connections -----------------------------------------------------------------------------

    def connection(self, server: McpServer) -> _Connection:
        """The live connection to ``server``, started (and initialized) when there is none."""
        key = server.key()
        with self._lock:
            conn = self._connections.get(key)
            if conn is not None and conn.live:
                return conn
            gate = self._starting.setdefault(key, threading.Lock())
        with gate:  # one start per server, even when several threads call at once
            with self._lock:
                conn = self._connections.get(key)
                if conn is not None and conn.live:
                    return conn
            if conn is not None:
                self._stop(conn)
                _close_log(conn)
            conn = _Connection(server)
            with self._lock:  # registered before it starts: close() (Ctrl-C) stops a server still starting
                self._connections[key] = conn
            try:
                self._submit(self._open(conn), self.start_timeout + _STOP_GRACE, f"MCP server {server.describe()}")
            except Exception:
                with self._lock:
                    if self._connections.get(key) is conn:
                        del self._connections[key]
                self._stop(conn)
                raise
            return conn

    async def _open(self, conn: _Connection) -> None:
        """Start ``conn``'s owner task and wait until its session is initialized (or it failed)."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().create_task(self._own(conn, ready))
        await ready

    async def _own(self, conn: _Connection, ready: asyncio.Future[None]) -> None:
        # lazy: the optional MCP SDK and its anyio (~1 s), loaded when a server is first started
        import anyio
        from mcp import ClientSession

        server = conn.server
        try:
            with anyio.CancelScope() as scope:
                conn.scope = scope
                try:
                    async with self._transport(conn) as streams:
                        async def on_message(message: Any) -> None:
                            if isinstance(message, Exception) and len(conn.garbage) < 3:
                                conn.garbage.append(_garbage_line(message))

                        writer = TrackedWriter(streams[1], conn.ledger)
                        async with ClientSession(streams[0], writer, message_handler=on_message) as session:
                            with anyio.fail_after(self.start_timeout):
                                await session.initialize()
                            conn.session = session
                            ready.set_result(None)
                            await anyio.sleep_forever()
                except BaseException as exc:
                    if not ready.done():
                        ready.set_exception(self._start_error(conn, _leaf(exc)))
                    elif conn.dead is None:
                        conn.dead = f"the connection ended: {_leaf(exc)!r}"[:300]
                    if not isinstance(exc, Exception):
                        raise
        finally:
            if not ready.done():
                ready.set_exception(McpFailure(f"MCP server {server.describe()} stopped while starting",
                                               failure="connect"))
            conn.dead = conn.dead or "closed"
            conn.finished.set()

    def _transport(self, conn: _Connection) -> Any:
        server = conn.server
        if server.transport == "stdio":
            conn.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed with the connection
            env = {k: v for k, v in server.env.items() if v is not None}
            return bounded_stdio_client(server.command or "", list(server.args), env or None, server.cwd, conn.stderr,
                                        conn.ledger)
        return _http_transport(conn)

    def _start_error(self, conn: _Connection, exc: BaseException) -> McpFailure:
        where = f"MCP server {conn.server.describe()!r}"
        if isinstance(exc, TimeoutError):
            return McpFailure(f"{where} did not answer the MCP handshake within {self.start_timeout:.0f} s"
                              f"{conn.account()}", failure="timeout",
                              hint="is it an MCP server on this transport? (ATC_MCP_START_TIMEOUT sets the wait)")
        if isinstance(exc, FileNotFoundError) and conn.server.transport == "stdio":
            return McpFailure(f"cannot start {where}: command not found: {conn.server.command}", failure="connect",
                              hint="check the command line (is the server installed? is it on PATH?)")
        if isinstance(exc, OSError) and conn.server.transport == "stdio":
            return McpFailure(f"cannot start {where}: {exc}", failure="connect")
        code = getattr(exc, "code", None)
        if code == _CONNECTION_CLOSED or conn.server.transport == "stdio":
            return McpFailure(f"{where} exited before it answered{conn.account()}", failure="connect")
        return McpFailure(f"cannot connect to {where}: {type(exc).__name__}: {str(exc)[:200]}", failure="connect",
                          hint="is the server running and is the URL its MCP endpoint?")

    def _stop(self, conn: _Connection, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Cancel ``conn``'s owner task and wait for its shutdown (the server process is gone after)."""
        loop = loop or self._loop
        if loop is None or conn.finished.is_set():
            return

        async def stop() -> None:
            while conn.scope is None and not conn.finished.is_set():  # its task has not begun yet
                await asyncio.sleep(0.01)
            if conn.scope is not None:
                conn.scope.cancel()
            await conn.finished.wait()

        try:
            asyncio.run_coroutine_threadsafe(stop(), loop).result(_STOP_GRACE)
        except Exception:
            pass

    # -- calls ------------------------------------------------------------------------------------

    def list_tools(self, server: McpServer) -> dict[str, Any]:
        """The server's ``tools/list`` (every page) as JSON, with ``serverInfo``."""
        conn = self.connection(server)

        async def listing() -> dict[str, Any]:
            from mcp.types import PaginatedRequestParams  # lazy: the optional MCP SDK

            tools: list[Any] = []
            cursor = None
            for _ in range(100):
                page = await conn.session.list_tools(
                    params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                tools += [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    break
            info = conn.session.server_info
            return {"tools": tools, "serverInfo": info.model_dump(mode="json", exclude_none=True) if info else None}

        try:
            result: dict[str, Any] = self._submit(listing(), self.start_timeout + _STOP_GRACE,
                                                  f"tools/list of {server.describe()}")
        except McpFailure:
            raise
        except Exception as exc:
            raise self._call_error(conn, None, _leaf(exc), "tools/list") from None
        return result

    def call(self, server: McpServer, name: str, arguments: dict[str, Any], timeout: float, *,
             tool: str | None = None, bounds: MessageBounds | None = None) -> dict[str, Any]:
        """``tools/call`` of ``name``; the ``CallToolResult`` as JSON. ``timeout`` bounds the wait,
        ``bounds`` (default: ``bounds.DEFAULT``) what the answer may hold before it is parsed."""
        conn = self.connection(server)
        label = tool or name

        async def calling() -> dict[str, Any]:
            state = CallState(bounds) if bounds is not None else CallState()
            CURRENT.set(state)  # this task's own context: its request is recorded with these bounds
            try:
                result = await conn.session.call_tool(name, arguments, read_timeout_seconds=timeout)
            except Exception:
                if state.refused is not None:
                    raise McpFailure(f"{label}: {state.refused}", tool=label, failure="response") from None
                raise
            finally:
                conn.ledger.forget(state)
            dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
            return dumped

        try:
            answer: dict[str, Any] = self._submit(calling(), timeout + 2.0, f"{label}: MCP server")
            return answer
        except McpFailure as exc:
            exc.tool = label
            if exc.failure == "timeout":
                exc.message = f"{label}: no answer from the MCP server within {timeout:g} s"
            raise
        except Exception as exc:
            raise self._call_error(conn, label, _leaf(exc), name, timeout) from None

    def _call_error(self, conn: _Connection, tool: str | None, exc: BaseException, what: str,
                    timeout: float | None = None) -> McpFailure:
        label = tool or conn.server.describe()
        code = getattr(exc, "code", None)
        message = str(getattr(exc, "message", "") or exc)[:300]
        if code == _REQUEST_TIMEOUT:
            within = f" within {timeout:.3g} s" if timeout is not None else " in time"
            return McpFailure(f"{label}: no answer from the MCP server{within}", tool=tool, failure="timeout")
        if code == REFUSED:  # refused by atc's bounds (a call's own refusals are told in call())
            return McpFailure(f"{label}: {message}", tool=tool, failure="response")
        if code == _PARSE_ERROR:  # the SDK's, quoting what it could not parse: said in our words only
            return McpFailure(f"{label}: {parse_problem(ValueError(message))}", tool=tool, failure="response")
        if code == _CONNECTION_CLOSED or conn.dead:
            conn.dead = conn.dead or "connection closed"
            self._stop(conn)
            return McpFailure(f"{label}: the MCP server went away during {what}{conn.account()}", tool=tool,
                              failure="request")
        if code is not None:
            return McpFailure(f"{label}: MCP error {code}: {message}", tool=tool, failure="protocol")
        return McpFailure(f"{label}: unusable answer from the MCP server: {type(exc).__name__}: {message}",
                          tool=tool, failure="protocol")

    # -- shutdown ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every server this manager started and end its loop thread."""
        with self._lock:
            conns = list(self._connections.values())
            self._connections.clear()
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        for conn in conns:
            self._stop(conn, loop)
            _close_log(conn)
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(_STOP_GRACE)
            if not loop.is_running():
                loop.close()

    def running(self) -> list[McpServer]:
        """The servers with a live connection now."""
        with self._lock:
            return [c.server for c in self._connections.values() if c.live]


@contextlib.asynccontextmanager
async def _http_transport(conn: _Connection) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP (or SSE) client, on an HTTP client of atc's that bounds what it
    reads (``sandbox.gateway.mcp.httpbounds``)."""
    # lazy: brings httpx2, which stdio servers never need
    from sandbox.gateway.mcp.httpbounds import bounded_client

    url = str(conn.server.url)
    if conn.server.transport == "sse":
        from mcp.client.sse import sse_client  # lazy: the optional MCP SDK's SSE client

        def factory(headers: Any = None, timeout: Any = None, auth: Any = None) -> Any:
            return bounded_client(conn.ledger, headers=headers, timeout=timeout, auth=auth)

        async with sse_client(url, httpx_client_factory=factory) as streams:
            yield streams
        return
    from mcp.client.streamable_http import streamable_http_client  # lazy: the optional MCP SDK

    async with bounded_client(conn.ledger) as client, \
            streamable_http_client(url, http_client=client, max_sse_event_size=None) as streams:
        yield streams


def _close_log(conn: _Connection) -> None:
    if conn.stderr is not None:
        try:
            conn.stderr.close()
        except OSError:
            pass


def _garbage_line(exc: Exception) -> str:
    """A short quote of the non-MCP line behind a parse error."""
    text = str(exc)
    marker = "input_value="
    if marker in text:
        text = text.split(marker, 1)[1].split(", input_type", 1)[0]
    return " ".join(text.split())[:120]


_DEFAULT: list[McpServers] = []
_DEFAULT_LOCK = threading.Lock()


def servers() -> McpServers:
    """The process-wide connections (stopped by ``close_servers()``, and at exit)."""
    with _DEFAULT_LOCK:
        if not _DEFAULT:
            _DEFAULT.append(McpServers())
            atexit.register(close_servers)
        return _DEFAULT[0]


def close_servers() -> None:
    """Stop every MCP server the process-wide connections started (idempotent)."""
    with _DEFAULT_LOCK:
        found = list(_DEFAULT)
    for manager in found:
        manager.close()


#: ``atc.close_mcp_servers``.
close_mcp_servers = close_servers
