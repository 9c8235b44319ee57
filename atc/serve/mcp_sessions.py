"""Per-session state, the budgets every run and proxied call is charged to, and the runs in flight.

What a run has, and where it lives, so that one client's state never reaches another's:

- the sandbox: a fresh runner per program (``Backend.run``), killed after it;
- the gateway: one per program (its call log, its cookie jar, its own call limit); a session's
  proxied calls share one gateway of their own (``proxy.py``), so an API's session cookie set by
  one proxied call is sent by that session's next one, and by no one else's;
- credentials: the server's, read on the host by the gateway; no client ever sees one;
- the budgets (``Budget``): every program and proxied call is charged to three at once -- its
  session's, its client's (the token it authenticated with; ``stdio`` for the one stdio client)
  and the server's -- and is granted only what all three have left.

A session is an id the server issued, never one a client picked (``SessionState.key``):

- ``stdio``: the one stdio connection of the process;
- ``http:ID``: a streamable HTTP session. The SDK issues ``ID`` in its answer to an
  ``initialize``; the HTTP guard (``http.py``) sees it go out and calls ``issue`` with the client
  that authenticated, and from then on accepts the id only from that client (``find``); an id the
  server never issued, or issued to another token, is answered ``404`` before anything reads it;
- ``request:RANDOM``: a request without a session -- the stateless 2026-07-28 protocol, which
  every MCP SDK 2.x client speaks -- is a session of its own that ends with the request
  (``ephemeral``). Such clients are bound by the per-program limits and by their token's and the
  server's budgets, which is why those exist.

A session's state is one object, ``SessionState``: its budget, the gateway of its proxied calls,
its write ledger (every program and proxied call of a session is one task: a write is sent once),
and what else belongs to a session. A request without a session has a ledger of its own request. States unused for ``IDLE_SECONDS`` (the SDK's idle timeout of a session) are forgotten.

``InFlight`` knows every running program by (session key, request id) and holds its
``sandbox.cancel.Cancel``: the HTTP layer cancels a program whose client went away (``http.py``),
or all of a session's when it is deleted.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from atc.errors import CallBudget
from sandbox.cancel import Cancel
from sandbox.gateway.writes.ledger import WriteLedger

__all__ = ["Budget", "Caps", "SessionState", "Sessions", "InFlight", "STDIO", "IDLE_SECONDS", "SCOPE_SESSION",
           "SCOPE_CLIENT"]

STDIO = "stdio"
#: Where the HTTP guard leaves, in a request's ASGI scope, the ``SessionState`` of the session the
#: request belongs to (None: none) and the name of the client that authenticated; the handlers
#: read them there and never the request's headers.
SCOPE_SESSION = "atc.session"
SCOPE_CLIENT = "atc.client"
#: Seconds after which an unused session's state is forgotten: the SDK ends a streamable HTTP
#: session after 30 idle minutes, and a client that comes back later starts a new one anyway.
IDLE_SECONDS = 1800.0


@dataclass(frozen=True)
class Caps:
    """The most tool calls and programs one holder may spend in all (None: no bound)."""

    max_calls: int | None = None
    max_runs: int | None = None


@dataclass
class Budget:
    """What one holder -- a session, a token, the server -- has spent: ``calls`` made (only calls
    that left the host count; one refused before sending costs nothing), ``runs`` started, and
    ``reserved``: calls granted to programs still running. ``who`` and ``flag`` name it in a
    refusal (``this session``, ``--session-max-calls``)."""

    who: str
    flag: str
    caps: Caps
    calls: int = 0
    runs: int = 0
    reserved: int = 0

    def calls_left(self) -> int | None:
        if self.caps.max_calls is None:
            return None
        return max(0, self.caps.max_calls - self.calls - self.reserved)

    def out_of_runs(self) -> bool:
        return self.caps.max_runs is not None and self.runs >= self.caps.max_runs

    def out_of_calls(self) -> bool:
        """Spent for good (not merely lent to programs still running)."""
        return self.caps.max_calls is not None and self.calls >= self.caps.max_calls

    def runs_refusal(self) -> CallBudget:
        return CallBudget(f"{self.who} has run its {self.caps.max_runs} programs (the server's {self.flag}-runs)",
                          hint=_HINTS[self.flag])

    def calls_refusal(self) -> CallBudget:
        return CallBudget(f"{self.who} has used its {self.caps.max_calls} tool calls (the server's {self.flag}-calls)",
                          hint=_HINTS[self.flag])


_HINTS = {
    "--session-max": "start a new session, or ask the server's operator for a larger budget",
    "--token-max": "the budget of this client's token is spent: ask the server's operator for a larger one",
    "--server-max": "the server's budget for all clients is spent: ask its operator to raise or restart it",
}


@dataclass
class SessionState:
    """Everything that belongs to one session (see the module docstring): ``key`` is the id the
    server issued (or ``stdio``, or ``request:...`` for a request alone), ``client`` who
    authenticated (the token's variable name; ``stdio``), ``budget`` what the session has spent.
    New per-session state goes here as one more field."""

    key: str
    client: str
    budget: Budget
    ephemeral: bool = False
    last_used: float = field(default_factory=time.monotonic)
    #: programs of this session running now (a session is not forgotten while one runs)
    running: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    #: the gateway of this session's proxied calls, with its cookie jar (made by proxy.py on first use)
    proxy: Any = field(default=None, repr=False)
    #: the session's write ledger: its programs and proxied calls are one task, so a write that a
    #: host repeats (run_program called again after a timeout) is not sent twice (docs/writes.md)
    ledger: WriteLedger = field(default_factory=WriteLedger, repr=False)

    @property
    def label(self) -> str:
        """How the log names the session: ``stdio``, the head of an issued id, or ``none``."""
        if self.key.startswith("http:"):
            return self.key[5:13]
        return "none" if self.ephemeral else self.key


class Sessions:
    """Every live session's state, and the budgets of sessions, clients and the server (thread-safe)."""

    def __init__(self, session: Caps, token: Caps | None = None, server: Caps | None = None) -> None:
        self.session_caps = session
        self.token_caps = token or Caps()
        self.server = Budget("this server", "--server-max", server or Caps())
        self._tokens: dict[str, Budget] = {}
        self._states: dict[str, SessionState] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._states)

    # -- sessions ------------------------------------------------------------------------------

    def _new(self, key: str, client: str, ephemeral: bool) -> SessionState:
        return SessionState(key, client, Budget("this session", "--session-max", self.session_caps),
                            ephemeral=ephemeral)

    def _forget_idle(self, now: float) -> None:
        stale = [k for k, s in self._states.items()
                 if now - s.last_used > IDLE_SECONDS and not s.running and not s.budget.reserved]
        for k in stale:
            del self._states[k]

    def issue(self, key: str, client: str) -> SessionState:
        """Record a session id the server has just issued, bound to ``client``."""
        now = time.monotonic()
        with self._lock:
            self._forget_idle(now)
            state = self._states.get(key)
            if state is None or state.client != client:
                state = self._states[key] = self._new(key, client, False)
            state.last_used = now
            return state

    def find(self, key: str, client: str) -> SessionState | None:
        """The state of an issued session, when ``client`` is the one it was issued to."""
        now = time.monotonic()
        with self._lock:
            self._forget_idle(now)
            state = self._states.get(key)
            if state is None or state.client != client:
                return None
            state.last_used = now
            return state

    def stdio(self) -> SessionState:
        """The one session of a stdio server (made on first use)."""
        with self._lock:
            state = self._states.get(STDIO)
            if state is None:
                state = self._states[STDIO] = self._new(STDIO, STDIO, False)
            state.last_used = time.monotonic()
            return state

    def alone(self, client: str) -> SessionState:
        """A session for one request that belongs to none: never stored, gone with the request."""
        return self._new(f"request:{uuid.uuid4().hex}", client, True)

    def drop(self, key: str) -> None:
        with self._lock:
            self._states.pop(key, None)

    def token(self, client: str) -> Budget:
        with self._lock:
            return self._token(client)

    def _token(self, client: str) -> Budget:
        budget = self._tokens.get(client)
        if budget is None:
            who = "this server's stdio client" if client == STDIO else f"the token ${client}"
            budget = self._tokens[client] = Budget(who, "--token-max", self.token_caps)
        return budget

    # -- budgets -------------------------------------------------------------------------------

    def _chain(self, state: SessionState) -> tuple[Budget, Budget, Budget]:
        return state.budget, self._token(state.client), self.server

    def begin_run(self, state: SessionState, wanted: int) -> int:
        """Reserve tool calls for one program: ``wanted`` (its ``max_calls``), cut to what its
        session, its token and the server all have left. Raises ``CallBudget`` when one of them
        has no program or no call left."""
        with self._lock:
            chain = self._chain(state)
            for budget in chain:
                if budget.out_of_runs():
                    raise budget.runs_refusal()
            grant = wanted
            for budget in chain:
                left = budget.calls_left()
                if left is not None:
                    if left <= 0 and wanted > 0:
                        raise budget.calls_refusal()
                    grant = min(grant, left)
            grant = max(0, grant)
            for budget in chain:
                budget.runs += 1
                budget.reserved += grant
            state.running += 1
            return grant

    def pending(self, state: SessionState) -> bool:
        """Would calls be left once running programs hand back what they did not use? (Then a
        new program waits for them instead of being refused.)"""
        with self._lock:
            chain = self._chain(state)
            if any(b.out_of_runs() or b.out_of_calls() for b in chain):
                return False
            blocked = [b for b in chain if b.calls_left() == 0]
            return bool(blocked) and all(b.reserved > 0 for b in blocked)

    def end_run(self, state: SessionState, grant: int, sent: int) -> None:
        """A program ended: it made ``sent`` calls that left the host (at most ``grant`` count)."""
        with self._lock:
            for budget in self._chain(state):
                budget.reserved -= grant
                budget.calls += min(sent, grant)
            state.running -= 1
            state.last_used = time.monotonic()

    def take_call(self, state: SessionState) -> None:
        """Reserve one proxied call; ``CallBudget`` when the session, the token or the server has
        none left. ``end_call`` settles it."""
        with self._lock:
            chain = self._chain(state)
            for budget in chain:
                left = budget.calls_left()
                if left is not None and left <= 0:
                    raise budget.calls_refusal()
            for budget in chain:
                budget.reserved += 1

    def end_call(self, state: SessionState, sent: bool) -> None:
        """A proxied call ended; it costs a call only when it left the host."""
        with self._lock:
            for budget in self._chain(state):
                budget.reserved -= 1
                budget.calls += 1 if sent else 0
            state.last_used = time.monotonic()

    def left(self, state: SessionState) -> int | None:
        """The calls a program of this session could be granted now (None: no bound)."""
        with self._lock:
            lefts = [n for n in (b.calls_left() for b in self._chain(state)) if n is not None]
            return min(lefts) if lefts else None


class InFlight:
    """The programs running now, by (session key, request id), with their cancel tokens."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str, str], Cancel] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)

    @contextmanager
    def track(self, session: str, request: str, token: Cancel) -> Iterator[None]:
        key = (session, request)
        with self._lock:
            self._runs[key] = token
        try:
            yield
        finally:
            with self._lock:
                if self._runs.get(key) is token:
                    del self._runs[key]

    def cancel_request(self, session: str, request: str, reason: str) -> bool:
        with self._lock:
            token = self._runs.get((session, request))
        if token is None:
            return False
        token.cancel(reason)
        return True

    def cancel_session(self, session: str, reason: str) -> int:
        with self._lock:
            tokens = [t for (s, _), t in self._runs.items() if s == session]
        for token in tokens:
            token.cancel(reason)
        return len(tokens)
