"""Stopping a run from another thread: ``Cancel``.

A run blocks its caller's thread until the program is done (``Backend.run``). A caller that must
be able to stop it early -- an MCP client that cancels its request or goes away while its
program runs (``atc serve``) -- makes a ``Cancel`` and runs the program inside
``cancellable(token)``; any other thread may then call ``token.cancel(reason)``::

    token = Cancel()
    with cancellable(token):                  # in the thread that runs the program
        result = run(program, tools, limits)  # returns soon after token.cancel() elsewhere

The session loop (``sandbox.program_run.serve``, shared by every backend) watches the runner channel
of the current token's run: cancelling shuts that channel down, which wakes the loop at once; the
run ends as a ``Cancelled`` failure, and the backend kills the runner and everything it started
exactly as it does after a timeout (the local jail's PID namespace, the Docker container). A tool
call that is already waiting for its API finishes first (it is bounded by the call timeout);
none is sent after the cancel. Cancelling before the run has reached its runner stops it as soon
as it does. A token is for one run; it is not reset.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Cancel", "cancellable", "current"]

_LOCAL = threading.local()


class Cancel:
    """A cancellation request for one run, safe to signal from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._channels: set[socket.socket] = set()
        self.reason = ""

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str = "the run was cancelled") -> None:
        """Stop the run (idempotent: the first reason is kept)."""
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            channels = list(self._channels)
        for channel in channels:
            _shut(channel)

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    @contextmanager
    def watching(self, channel: socket.socket) -> Iterator[None]:
        """While inside, ``cancel`` shuts ``channel`` down (at once when already cancelled)."""
        with self._lock:
            self._channels.add(channel)
            already = self._event.is_set()
        if already:
            _shut(channel)
        try:
            yield
        finally:
            with self._lock:
                self._channels.discard(channel)


def _shut(channel: socket.socket) -> None:
    # shutdown, not close: it wakes a recv blocked in another thread, and the socket object stays
    # the backend's to close.
    try:
        channel.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


@contextmanager
def cancellable(token: Cancel | None) -> Iterator[None]:
    """Runs started in this thread while inside can be stopped with ``token`` (None: they cannot)."""
    previous = getattr(_LOCAL, "token", None)
    _LOCAL.token = token
    try:
        yield
    finally:
        _LOCAL.token = previous


def current() -> Cancel | None:
    """The token of this thread's ``cancellable`` block, if any."""
    token: Cancel | None = getattr(_LOCAL, "token", None)
    return token
