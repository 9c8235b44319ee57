"""Sandbox sessions for their users: ``Session`` and ``open_session`` (``atc.session``).

    with open_session(tools, Limits(timeout=20), sandbox="local") as s:
        s.run("books = search_books(query='garden')['results']")
        r = s.run("print(len(books))")            # the globals of the first snippet are there
        print(r.answer, s.calls, s.exec_seconds)

A ``Session`` wraps the ``SandboxSession`` a backend opened (``sandbox/session/interpreter.py``) and makes
sure it ends whatever its owner does:

- ``close()``, the end of a ``with`` block, or an exception out of it (Ctrl-C included: a
  ``KeyboardInterrupt`` while a snippet runs stops that snippet and ends the session);
- garbage collection of an unreachable session, and interpreter exit (``weakref.finalize``; the
  backends also end their open sessions when they close, at exit too);
- an abandoned session: the reaper thread closes every session that has not run a snippet for
  ``SessionLimits.idle_seconds``, or is older than ``lifetime_seconds`` (a snippet that runs then
  is cut at that moment by its own deadline);
- the backend being closed (it ends its open sessions first).

Ending it removes the interpreter and everything it started (see the backends' handles in
``sandbox/session/runners.py``); ``run`` afterwards raises ``SessionEnded`` with the reason.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

from protocols.errors import UsageError
from protocols.model import Collection
from sandbox.api import Backend, ExecutionResult, Limits, SandboxSession, SessionLimits, Toolset
from sandbox.execute import as_toolset, check_toolset, get_backend

__all__ = ["Session", "open_session", "live_sessions"]


def _end(interpreter: SandboxSession, reason: str) -> None:
    try:
        interpreter.close(reason)
    except Exception:  # a finalizer or the reaper must not raise; the backend's close retries
        pass


class Session:
    """One sandbox session: ``run(code)`` snippets in one interpreter that keeps its globals.

    ``run`` returns each snippet's own ``ExecutionResult`` (as ``atc.run`` would for it: output,
    calls, error with line and attributed tool) and raises ``SessionEnded`` once the session is
    over. ``calls``, ``exec_seconds``, ``snippets`` and ``age_seconds`` say what it has used;
    ``alive`` and ``ended`` (why it ended) whether it still runs.
    """

    def __init__(self, interpreter: SandboxSession, *, limits: Limits, session_limits: SessionLimits) -> None:
        self.interpreter = interpreter
        self.sandbox = interpreter.name
        self.limits = limits
        self.session_limits = session_limits
        self.opened = time.monotonic()
        self._last = self.opened
        self._lock = threading.Lock()
        self._busy = False
        self._finalizer = weakref.finalize(self, _end, interpreter, "the session was garbage-collected")
        _REAPER.watch(self)

    # -- use ---------------------------------------------------------------------------------------

    def run(self, code: str) -> ExecutionResult:
        """Run one snippet in the session's globals and return its result."""
        with self._lock:
            self._busy = True
            try:
                return self.interpreter.execute(code)
            finally:
                self._busy = False
                self._last = time.monotonic()
                _REAPER.poke()  # its expiry moved (the reaper waits for a busy session's lifetime)

    def close(self) -> None:
        """End the session: its interpreter and everything it started are removed (idempotent)."""
        self._finalizer.detach()
        _end(self.interpreter, "closed")

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what it has used --------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self.interpreter.alive

    @property
    def ended(self) -> str | None:
        """Why the session ended (None while it runs)."""
        return self.interpreter.ended

    @property
    def calls(self) -> int:
        """Tool calls made so far, of ``limits.max_calls`` for the whole session."""
        return self.interpreter.calls

    @property
    def exec_seconds(self) -> float:
        """Seconds its snippets have run so far, of ``session_limits.exec_seconds``."""
        return self.interpreter.exec_seconds

    @property
    def snippets(self) -> int:
        return self.interpreter.snippets

    @property
    def age_seconds(self) -> float:
        """Seconds since it opened (of ``session_limits.lifetime_seconds``)."""
        return time.monotonic() - self.opened

    def to_dict(self) -> dict[str, Any]:
        return {"sandbox": self.sandbox, "alive": self.alive, "ended": self.ended, "snippets": self.snippets,
                "calls": self.calls, "max_calls": self.limits.max_calls,
                "exec_seconds": round(self.exec_seconds, 3), "age_seconds": round(self.age_seconds, 3)}

    def __repr__(self) -> str:
        state = "alive" if self.alive else f"ended: {self.ended}"
        return f"<Session {self.sandbox} {state}, {self.snippets} snippets, {self.calls} calls>"

    # -- reaping -----------------------------------------------------------------------------------

    def _expiry(self) -> float:
        """When an unused session is reaped (one running a snippet: only at its lifetime, which
        that snippet's own deadline respects)."""
        if self._busy:
            return self.opened + self.session_limits.lifetime_seconds
        return min(self._last + self.session_limits.idle_seconds, self.opened + self.session_limits.lifetime_seconds)

    def _reap(self, now: float) -> None:
        """Close the session if it is past its expiry and no snippet runs (one that runs ends by
        its own deadline, and the session is looked at again right after)."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            if self.alive and not self._busy and now >= self._expiry():
                idle = now - self._last
                why = (f"reaped after {idle:.0f} s unused (idle_seconds={self.session_limits.idle_seconds:g})"
                       if self._last + self.session_limits.idle_seconds <= now else
                       f"reaped at its lifetime (lifetime_seconds={self.session_limits.lifetime_seconds:g})")
                self._finalizer.detach()
                _end(self.interpreter, why)
        finally:
            self._lock.release()


class _Reaper:
    """One daemon thread per process that closes sessions past their idle or lifetime bound."""

    def __init__(self) -> None:
        self._sessions: weakref.WeakSet[Session] = weakref.WeakSet()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, session: Session) -> None:
        with self._cond:
            self._sessions.add(session)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="atc-session-reaper", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def poke(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def live(self) -> list[Session]:
        with self._cond:
            return [s for s in self._sessions if s.alive]

    def _loop(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                live = [s for s in self._sessions if s.alive]
                for gone in [s for s in self._sessions if not s.alive]:
                    self._sessions.discard(gone)
                due = [s for s in live if s._expiry() <= now]
                soonest = min((s._expiry() for s in live), default=None)
                # No strong reference may outlive this look: a session that nothing else holds
                # must stay collectable (its finalizer closes it) while this thread waits.
                del live
                if not due:
                    # A session in use may outlive its expiry: look again a little later.
                    self._cond.wait(None if soonest is None else max(0.05, soonest - now))
                    continue
            for session in due:
                session._reap(now)
            del due, session
            time.sleep(0.05)  # a busy session that is due is looked at again, not spun on


_REAPER = _Reaper()


def live_sessions() -> list[Session]:
    """The sessions of this process that are still open (for diagnostics and tests)."""
    return _REAPER.live()


def open_session(
    tools: Toolset | Collection | str | Sequence[Collection | str],
    limits: Limits | None = None,
    *,
    sandbox: str | Backend | None = None,
    session_limits: SessionLimits | None = None,
    base_url: str | dict[str, str] | None = None,
    credentials: dict[str, str] | None = None,
    validation: str | dict[str, str] | None = None,
) -> Session:
    """Open a sandbox session on ``sandbox`` (as for ``sandbox.run``: a name, None/"auto", or a
    backend that has ``open_session``). Raises ``UsageError``/``ConfigError`` for bad input and
    ``SandboxError`` when no interpreter could be started."""
    limits = limits if limits is not None else Limits()
    session_limits = session_limits if session_limits is not None else SessionLimits()
    if not isinstance(limits, Limits) or not isinstance(session_limits, SessionLimits):
        raise UsageError("limits must be a Limits and session_limits a SessionLimits")
    toolset = as_toolset(tools, base_url=base_url, credentials=credentials, validation=validation)
    check_toolset(toolset)
    backend = sandbox if isinstance(sandbox, Backend) else get_backend(sandbox)
    opener = getattr(backend, "open_session", None)
    if not callable(opener):
        raise UsageError(f"the {backend.name} sandbox cannot keep a session", hint="use sandbox='local' or 'docker'")
    interpreter = opener(toolset, limits, session_limits)
    return Session(interpreter, limits=limits, session_limits=session_limits)
