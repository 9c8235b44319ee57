"""The host's one bounded receive of a runner's frames: every frame counts against its run.

A program can write frames itself (it holds the runner's socket), so a frame costs the host
whatever its sender chose unless the host bounds it *before* it pays. ``FrameReader.next`` is the
only way the session reads a frame during a run, and for every frame, whatever it says:

1. counts it against the run's frame budget (``HostBounds.frames``: a run's calls, its output
   stream and its end need far fewer), before reading it;
2. reads its header and refuses a body over ``HostBounds.frame_bytes``, or one that would take the
   run's frames past ``HostBounds.wire_bytes``, before reading the body;
3. reads the body by the run's deadline (the whole frame, not each read) and refuses it unparsed
   when it holds more than ``HostBounds.frame_values`` JSON values (``sandbox.jsonbounds``);
4. refuses decoded data that is not plain, printable JSON (``plain_problem``, which also looks at
   the deadline: decoding itself is bounded by the values cap, in C, a fraction of a second).

A refusal is ``FrameRefused`` (a ``wire.FrameError``) with a message that names the bound and the
limit to raise; the session then ends the run as a ``SandboxError``. The ``ready`` frame a runner
sends before its run is read with ``read_ready``, bounded the same way and tiny.
"""

from __future__ import annotations

import math
import socket
import time
from math import isfinite
from typing import Any

from sandbox import wire
from sandbox.api import Limits
from sandbox.hostbounds import HostBounds

__all__ = ["FrameReader", "FrameRefused", "plain_problem", "read_ready", "MAX_FRAME_DEPTH", "READY_FRAME_BYTES"]

#: Deepest nesting of lists/objects a runner frame may have. A legitimate runner never comes near
#: it; deeper data would overflow the host's recursive JSON encoder/validators later on.
MAX_FRAME_DEPTH = 100
#: Largest ``ready`` frame (``{"op": "ready", "pid": int, "python": str}``).
READY_FRAME_BYTES = 4096


class FrameRefused(wire.FrameError):
    """The runner sent a frame this run does not take (over a bound, or not expected now)."""


def _scalar_problem(item: Any) -> str | None:
    if isinstance(item, str):
        if not item.isascii():
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "a string with a lone surrogate character"
    elif isinstance(item, float) and not math.isfinite(item):
        return "NaN or Infinity"
    return None


def plain_problem(value: Any, deadline: float | None = None) -> str | None:
    """Why decoded frame data must not enter the host's results, or None. Iterative, so that the
    check itself cannot overflow the stack, and only containers wait on its stack (a tuple per
    number would double what a frame of numbers holds). A genuine runner sends no NaN/Infinity
    (its stubs refuse them) and no lone surrogates (it encodes with ``replace``); only a forged
    frame does, and either would make the ``--json`` output invalid or unprintable.
    ``TimeoutError`` once ``deadline`` passes (looked at every 65,536 values)."""
    if not isinstance(value, dict | list):
        return _scalar_problem(value)
    stack: list[tuple[Any, int]] = [(value, 0)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        if depth >= MAX_FRAME_DEPTH:
            return f"data nested more than {MAX_FRAME_DEPTH} levels deep"
        children = item.values() if isinstance(item, dict) else item
        if isinstance(item, dict):
            for key in item:
                if (problem := _scalar_problem(key)) is not None:
                    return problem
        for child in children:  # decoded JSON: exact types; a str or float is looked at inline
            kind = type(child)
            if kind is list or kind is dict:
                stack.append((child, depth + 1))
            elif kind is float:
                if not isfinite(child):
                    return "NaN or Infinity"
            elif kind is str and not child.isascii() and (problem := _scalar_problem(child)) is not None:
                return problem
        seen += len(item)
        if deadline is not None and seen > 0xFFFF:
            seen = 0
            if time.monotonic() > deadline:
                raise TimeoutError("the frame was still being checked at the deadline")
    return None


class FrameReader:
    """Reads the frames of ONE run under its ``HostBounds`` (see the module docstring);
    ``frames`` and ``received`` (bytes) count what came so far."""

    def __init__(self, limits: Limits, bounds: HostBounds | None = None) -> None:
        self.limits = limits
        self.bounds = bounds or HostBounds.of(limits)
        self.frames = 0
        self.received = 0

    def next(self, sock: socket.socket, deadline: float) -> dict[str, Any]:
        """The next frame (``FrameRefused``/``wire.FrameError`` when refused, ``ChannelClosed`` at
        EOF, ``TimeoutError`` when it is not all in by ``deadline``)."""
        bounds = self.bounds
        if self.frames >= bounds.frames:
            raise FrameRefused(f"the runner sent more than {bounds.frames} frames (the most a run with "
                               f"{self.limits.max_calls} calls and {self.limits.timeout:g} s can need)")
        self.frames += 1
        try:
            size = wire.recv_size(sock, max_frame=bounds.frame_bytes, deadline=deadline)
        except wire.FrameTooLarge as exc:
            raise FrameRefused(f"{exc} of a run with --memory {self.limits.memory_mb}") from None
        self.received += size + 4
        if self.received > bounds.wire_bytes:
            raise FrameRefused(f"the runner sent more than {bounds.wire_bytes >> 20} MB of frames in one run")
        try:
            msg = wire.recv_body(sock, size, deadline=deadline, max_values=bounds.frame_values)
        except wire.FrameTooLarge as exc:
            raise FrameRefused(f"{exc} in a run with --memory {self.limits.memory_mb}") from None
        problem = plain_problem(msg, deadline)
        if problem is not None:
            raise FrameRefused(f"frame is not plain JSON data: {problem}")
        return msg


def read_ready(sock: socket.socket, timeout: float) -> dict[str, Any]:
    """The ``ready`` frame of a runner that was just started, by ``timeout`` seconds from now
    (raises ``wire.FrameError``/``OSError``/``TimeoutError`` on EOF, garbage, anything else or
    no frame in time)."""
    msg = wire.recv(sock, max_frame=READY_FRAME_BYTES, deadline=time.monotonic() + timeout, max_values=64)
    if msg.get("op") != "ready":
        raise wire.FrameError(f"expected a 'ready' frame, got {str(msg.get('op'))[:40]!r}")
    return msg
