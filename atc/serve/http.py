"""Streamable HTTP: atc's MCP server at ``/mcp``, behind bearer tokens.

``Guard`` wraps the SDK's Starlette app (``MCPServer.streamable_http_app``); every request passes
it before the SDK sees anything:

- ``Host`` and ``Origin`` must name this server (``hosts.HostCheck``: the loopback names, the
  loopback address it listens on, and every ``--allow-host``), for every bind address: ``421`` /
  ``403`` otherwise;
- ``Authorization: Bearer TOKEN`` with one of the server's tokens (compared in constant time with
  each); anything else is answered ``401``. Each token is read on the host from an environment
  variable (``--token-env``, repeatable: one per client), never logged; the variable's name names
  the client in budgets and logs;
- a session id is the server's, bound to the client that opened it: the SDK issues it in its
  answer to an ``initialize`` (the guard records it then, with the client: ``Sessions.issue``),
  and a request naming a session that was not issued to its client -- another token's, one a
  client made up, one forgotten -- is answered ``404`` like an unknown session, on either
  protocol era. (On the stateless 2026-07-28 protocol the SDK reads no session id at all, so this
  is the only check there.) The request's ``SessionState`` (None: no session) and client go to the
  handlers in the ASGI scope (``sessions.SCOPE_SESSION``/``SCOPE_CLIENT``); the SDK also learns the
  client (``scope["user"]``), so that it too serves a session to its own client only;
- a client that drops the HTTP request carrying a ``tools/call`` before its answer came stops
  that program: on the 2025 protocol the SDK keeps serving a request whose stream closed (the
  client could resume it), so the guard watches the request for ``http.disconnect`` and cancels
  the run through ``InFlight``. (On the 2026-07-28 protocol the SDK itself cancels a request
  whose stream closes, which reaches the handler as a cancellation.) A ``DELETE`` of a session
  cancels all of its programs and forgets its state.

``listen`` binds the socket first (so ``--port 0`` works and the port is known before serving),
then runs uvicorn on it until SIGINT/SIGTERM, on 127.0.0.1 unless told otherwise. A token is
always required (``check_token``): one of at least ``MIN_TOKEN`` characters, without whitespace,
each client's its own.
"""

from __future__ import annotations

import hmac
import json
import logging
import signal
import socket
from collections.abc import Mapping
from types import FrameType
from typing import TYPE_CHECKING

from atc.errors import UsageError
from atc.serve import mcp_sessions  # its IDLE_SECONDS is read when a server starts
from atc.serve.hosts import HostCheck, is_loopback
from atc.serve.mcp_sessions import SCOPE_CLIENT, SCOPE_SESSION

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from atc.serve.server import AtcServer

__all__ = ["Guard", "listen", "check_token", "check_tokens", "bind", "is_loopback", "MIN_TOKEN", "PATH"]

PATH = "/mcp"
MIN_TOKEN = 16
#: Bytes of a request body the guard keeps to find the request ids of a dropped ``tools/call``.
_MAX_WATCHED_BODY = 1 << 20
_SESSION_HEADER = b"mcp-session-id"

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


def check_tokens(tokens: Mapping[str, str | None]) -> dict[str, str]:
    """Every client's token (variable name -> token), each usable and none shared by two clients."""
    seen: dict[str, str] = {}
    for var, token in tokens.items():
        check_token(token, var)
        assert token is not None
        if token in seen:
            raise UsageError(f"${var} and ${seen[token]} hold the same token: each client needs its own",
                             hint="give each --token-env variable a different random token")
        seen[token] = var
    return {var: token for token, var in seen.items()}


class Guard:
    """ASGI middleware: Host and Origin, the bearer tokens, server-issued sessions bound to their
    client, and cancelling the programs of dropped requests."""

    def __init__(self, app: ASGIApp, tokens: Mapping[str, str], server: AtcServer, hosts: HostCheck) -> None:
        self.app = app
        self._tokens = [(name, token.encode()) for name, token in tokens.items()]
        self.server = server
        self.hosts = hosts

    def _client(self, headers: list[tuple[bytes, bytes]]) -> str | None:
        """The name of the client whose token the request carries (None: no valid token)."""
        given = next((v for k, v in headers if k.lower() == b"authorization"), b"")
        scheme, _, credential = given.partition(b" ")
        credential = credential.strip()
        found = None
        for name, token in self._tokens:  # every token compared: the time says nothing of which matched
            if hmac.compare_digest(credential, token) and scheme.lower() == b"bearer":
                found = name
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)  # lifespan
            return
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers") or [])

        def header(name: bytes) -> str | None:
            return next((v.decode("latin-1") for k, v in headers if k.lower() == name), None)

        refused = self.hosts.refusal(header(b"host"), header(b"origin"))
        if refused is not None:
            log.warning("refused a request for host %r (origin %r): %s", (header(b"host") or "")[:80],
                        (header(b"origin") or "")[:80], refused[1].split(" (")[0])
            await _answer(send, refused[0], refused[1])
            return
        client = self._client(headers)
        if client is None:
            await _unauthorized(send)
            return
        _authenticate(scope, client)
        sid = header(_SESSION_HEADER)
        sessions = self.server.sessions
        if not sid:
            scope[SCOPE_SESSION] = None
            await self.app(scope, receive, self._recording(send, client))
            return
        state = sessions.find(f"http:{sid}", client)
        if state is None:  # made up, another client's, or forgotten: as if it never existed
            log.info("refused a request of client %s naming a session it was not issued", client)
            await _session_not_found(send)
            return
        scope[SCOPE_SESSION] = state
        if scope.get("method") == "DELETE":
            self.server.inflight.cancel_session(state.key, "the client ended its session")
            try:
                await self.app(scope, receive, send)
            finally:
                sessions.drop(state.key)
            return
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        await self._watched(scope, receive, send, state.key)

    def _recording(self, send: Send, client: str) -> Send:
        """``send``, recording the session id the SDK issues in its answer (to ``client``)."""

        async def recorded(message: Message) -> None:
            if message.get("type") == "http.response.start" and message.get("status", 500) < 400:
                for name, value in message.get("headers") or []:
                    if name.lower() == _SESSION_HEADER:
                        self.server.sessions.issue(f"http:{value.decode('latin-1')}", client)
            await send(message)

        return recorded

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


def _authenticate(scope: Scope, client: str) -> None:
    """Tell the SDK (which then serves a session only to the client that opened it) and atc's
    handlers who the client is: the name of its token's variable, never the token."""
    # the MCP SDK: optional (atc[mcp]), over a second to import; only `atc serve` needs it
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    scope["user"] = AuthenticatedUser(AccessToken(token=f"${client}", client_id=client, scopes=[]))
    scope[SCOPE_CLIENT] = client


async def _answer(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _session_not_found(send: Send) -> None:
    """What the SDK answers for a session it does not know (a JSON-RPC error without an id)."""
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}).encode()
    await send({"type": "http.response.start", "status": 404,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


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


def listen(server: AtcServer, sock: socket.socket, tokens: Mapping[str, str], hosts: HostCheck) -> None:
    """Serve MCP at ``/mcp`` on ``sock`` until SIGINT/SIGTERM (blocking), for the clients of
    ``tokens`` (variable name -> token), to requests naming the ``hosts``."""
    # uvicorn and the MCP SDK: optional (atc[mcp]), over a second to import; only `atc serve --http`
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    # Host and Origin are checked by the guard, for every bind address; the SDK's own check (on
    # three loopback names only) would refuse the names of --allow-host.
    app = server.streamable_http_app(
        streamable_http_path=PATH, host=sock.getsockname()[0], session_idle_timeout=mcp_sessions.IDLE_SECONDS,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    config = uvicorn.Config(Guard(app, tokens, server, hosts), log_config=None, log_level="warning",
                            access_log=False, lifespan="on", timeout_graceful_shutdown=5)
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
