"""Per-session state and the runs in flight.

What a run has, and where it lives, so that one client's state never reaches another's:

- the sandbox: a fresh runner per program (``Backend.run``), killed after it;
- the gateway: one per program (its call log, its cookie jar, its call budget); a session's
  proxied calls share one gateway of their own (``proxy.py``), so an API's session cookie set by
  one proxied call is sent by that session's next one, and by no one else's;
- the budgets: per program (``Limits``) and per session (``SessionState``, here);
- credentials: the server's, read on the host by the gateway; no client ever sees one.

A session is keyed by what the transport says (``session_key``): the ``Mcp-Session-Id`` of a
streamable HTTP session, the one stdio connection of the process, or, for a request that belongs
to no session (the stateless 2026-07-28 HTTP protocol), that request alone. States unused for
longer than the SDK keeps an idle session are forgotten.

``InFlight`` knows every running program by (session, request id) and holds its
``sandbox.cancel.Cancel``: the HTTP layer cancels a program whose client went away (``http.py``),
or all of a session's when it is deleted.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from atc.errors import CallBudget
from sandbox.cancel import Cancel

__all__ = ["SessionState", "Sessions", "InFlight", "session_key", "STDIO", "IDLE_SECONDS"]

STDIO = "stdio"
#: Seconds after which an unused session's state is forgotten (the SDK ends idle HTTP sessions
#: after 30 minutes: a client that comes back later starts a new session anyway).
IDLE_SECONDS = 3600.0


def session_key(headers: Mapping[str, str] | None) -> tuple[str, bool]:
    """``(key, ephemeral)`` of the session a request belongs to; ``ephemeral`` when it is the
    request alone (its state is dropped when the request ends)."""
    if headers is None:
        return STDIO, False
    sid = headers.get("mcp-session-id")
    if sid:
        return f"http:{sid}", False
    return f"request:{uuid.uuid4().hex}", True


@dataclass
class SessionState:
    """One session's budgets and state. ``calls`` counts the tool calls made (programs and
    proxied); ``reserved`` the calls granted to programs still running."""

    key: str
    calls: int = 0
    runs: int = 0
    reserved: int = 0
    last_used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    #: the gateway of this session's proxied calls (made by proxy.py on first use)
    proxy: Any = field(default=None, repr=False)


class Sessions:
    """Every live session's state, and the session budgets (thread-safe)."""

    def __init__(self, max_calls: int, max_runs: int) -> None:
        self.max_calls = max_calls
        self.max_runs = max_runs
        self._states: dict[str, SessionState] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._states)

    def get(self, key: str) -> SessionState:
        now = time.monotonic()
        with self._lock:
            stale = [k for k, s in self._states.items() if now - s.last_used > IDLE_SECONDS and not s.reserved]
            for k in stale:
                del self._states[k]
            state = self._states.get(key)
            if state is None:
                state = self._states[key] = SessionState(key)
            state.last_used = now
            return state

    def drop(self, key: str) -> None:
        with self._lock:
            self._states.pop(key, None)

    @contextmanager
    def scope(self, key: str, ephemeral: bool) -> Iterator[SessionState]:
        """The session's state for one request; an ephemeral one is dropped after it."""
        state = self.get(key)
        try:
            yield state
        finally:
            if ephemeral:
                self.drop(key)

    # -- budgets -------------------------------------------------------------------------------

    def begin_run(self, state: SessionState, wanted: int) -> int:
        """Reserve tool calls for one program: ``wanted`` (its ``max_calls``), cut to what the
        session has left. Raises ``CallBudget`` when the session has no program or call left."""
        with state.lock:
            if state.runs >= self.max_runs:
                raise CallBudget(f"this session has run its {self.max_runs} programs (the server's --session-max-runs)",
                                 hint="start a new session, or ask the server's operator for a larger budget")
            left = self.max_calls - state.calls - state.reserved
            if left <= 0 and wanted > 0:
                raise CallBudget(f"this session has used its {self.max_calls} tool calls (the server's "
                                 "--session-max-calls)", hint="start a new session, or ask for a larger budget")
            grant = max(0, min(wanted, left))
            state.runs += 1
            state.reserved += grant
            return grant

    def pending(self, state: SessionState) -> bool:
        """Would calls be left once the session's running programs hand back what they did not
        use? (Then a new program waits for them instead of being refused.)"""
        with state.lock:
            return state.reserved > 0 and state.calls < self.max_calls and state.runs < self.max_runs

    def end_run(self, state: SessionState, grant: int, used: int) -> None:
        with state.lock:
            state.reserved -= grant
            state.calls += min(used, grant)
            state.last_used = time.monotonic()

    def take_call(self, state: SessionState) -> None:
        """Count one proxied call; ``CallBudget`` when the session has none left."""
        with state.lock:
            if state.calls + state.reserved >= self.max_calls:
                raise CallBudget(f"this session has used its {self.max_calls} tool calls (the server's "
                                 "--session-max-calls)", hint="start a new session, or ask for a larger budget")
            state.calls += 1

    def left(self, state: SessionState) -> int:
        with state.lock:
            return max(0, self.max_calls - state.calls - state.reserved)


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
