"""Streamable HTTP: atc's MCP server at ``/mcp``, behind a bearer token.

``Guard`` wraps the SDK's Starlette app (``MCPServer.streamable_http_app``):

- every request must carry ``Authorization: Bearer TOKEN`` (compared in constant time); anything
  else is answered ``401`` before the SDK sees it. The token is read on the host from an
  environment variable (``--token-env``) and is never logged;
- a client that drops the HTTP request carrying a ``tools/call`` before its answer came stops
  that program: on the 2025 protocol the SDK keeps serving a request whose stream closed (the
  client could resume it), so the guard watches the request for ``http.disconnect`` and cancels
  the run through ``InFlight``. (On the 2026-07-28 protocol the SDK itself cancels a request
  whose stream closes, which reaches the handler as a cancellation.) A ``DELETE`` of a session
  cancels all of its programs and forgets its state.

``listen`` binds the socket first (so ``--port 0`` works and the port is known before serving),
then runs uvicorn on it until SIGINT/SIGTERM, on 127.0.0.1 unless told otherwise. A token is
always required (``check_token``): one of at least ``MIN_TOKEN`` characters, without whitespace.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import signal
import socket
from types import FrameType
from typing import TYPE_CHECKING

from atc.errors import UsageError

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from atc.serve.server import AtcServer

__all__ = ["Guard", "listen", "check_token", "bind", "is_loopback", "MIN_TOKEN", "PATH"]

PATH = "/mcp"
MIN_TOKEN = 16
#: Bytes of a request body the guard keeps to find the request ids of a dropped ``tools/call``.
_MAX_WATCHED_BODY = 1 << 20

log = logging.getLogger("atc.serve")

def check_token(token: str | None, token_env: str) -> None:
    """Refuse to serve without a usable token (``UsageError``, exit 2)."""
    if not token:
        raise UsageError(f"atc serve --transport http needs a bearer token in ${token_env}",
                         hint=f"export {token_env}=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))') "
                              "and give clients 'Authorization: Bearer <that token>'")
    if len(token) < MIN_TOKEN:
        raise UsageError(f"the token in ${token_env} is too short ({len(token)} characters; at least {MIN_TOKEN})",
                         hint="use a random one: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'")
    if any(ch.isspace() for ch in token):
        raise UsageError(f"the token in ${token_env} contains whitespace", hint="use a random URL-safe token")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Guard:
    """ASGI middleware: the bearer token, and cancelling the programs of dropped requests."""

    def __init__(self, app: ASGIApp, token: str, server: AtcServer) -> None:
        self.app = app
        self._token = token.encode()
        self.server = server

    def _authorized(self, scope: Scope) -> bool:
        given = b""
        for name, value in scope.get("headers") or []:
            if name.lower() == b"authorization":
                given = value
                break
        scheme, _, credential = given.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credential.strip(), self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)  # lifespan
            return
        if not self._authorized(scope):
            await _unauthorized(send)
            return
        sid = next((v.decode("latin-1") for k, v in scope.get("headers") or [] if k.lower() == b"mcp-session-id"),
                   None)
        if sid and scope.get("method") == "DELETE":
            self.server.inflight.cancel_session(f"http:{sid}", "the client ended its session")
            try:
                await self.app(scope, receive, send)
            finally:
                self.server.sessions.drop(f"http:{sid}")
            return
        if not sid or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        await self._watched(scope, receive, send, f"http:{sid}")

    async def _watched(self, scope: Scope, receive: Receive, send: Send, session: str) -> None:
        body = bytearray()
        answered = False

        async def watched_receive() -> Message:
            message = await receive()
            if message.get("type") == "http.request" and len(body) < _MAX_WATCHED_BODY:
                body.extend(message.get("body") or b"")
            elif message.get("type") == "http.disconnect" and not answered:
                self._dropped(session, bytes(body))
            return message

        async def watched_send(message: Message) -> None:
            nonlocal answered
            if message.get("type") == "http.response.body" and not message.get("more_body"):
                answered = True
            await send(message)

        await self.app(scope, watched_receive, watched_send)

    def _dropped(self, session: str, body: bytes) -> None:
        """The client went away before the answer: cancel the programs this request started."""
        try:
            doc = json.loads(body)
        except ValueError:
            return
        for message in doc if isinstance(doc, list) else [doc]:
            if isinstance(message, dict) and message.get("method") == "tools/call" and "id" in message:
                if self.server.inflight.cancel_request(session, str(message["id"]), "the client went away"):
                    log.info("request %s: the client went away; its program was stopped", message["id"])


async def _unauthorized(send: Send) -> None:
    body = b'{"error": "unauthorized: send Authorization: Bearer <token>"}'
    await send({"type": "http.response.start", "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b'Bearer realm="atc"')]})
    await send({"type": "http.response.body", "body": body})


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (``UsageError`` when the address cannot be had)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                         hint="pick another --port (0: any free port) or --host") from None
    sock.set_inheritable(False)
    return sock


def listen(server: AtcServer, sock: socket.socket, token: str) -> None:
    """Serve MCP at ``/mcp`` on ``sock`` until SIGINT/SIGTERM (blocking)."""
    import uvicorn

    # On 127.0.0.1, localhost and ::1 the SDK also checks Host and Origin (DNS rebinding).
    app = server.streamable_http_app(streamable_http_path=PATH, host=sock.getsockname()[0])
    config = uvicorn.Config(Guard(app, token, server), log_config=None, log_level="warning", access_log=False,
                            lifespan="on", timeout_graceful_shutdown=5)
    server_ = uvicorn.Server(config)

    def stop(signum: int, frame: FrameType | None) -> None:
        # Before uvicorn takes the signals over, a stop makes it end as soon as it has started;
        # after it has shut down, it re-raises the signal it caught against this handler, which
        # makes a stop a clean return (exit 0) rather than a death by signal.
        server_.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server_.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
