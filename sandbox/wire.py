"""The wire protocol between the in-sandbox runner and the host gateway.

One byte stream (a socketpair for the local backend, a Unix socket mounted into the container
for Docker) carries frames: a 4-byte big-endian length, then that many bytes of UTF-8 JSON. JSON
only, in both directions: the host never unpickles anything that comes out of a sandbox.

Runner -> host::

    {"op": "ready", "pid": int, "python": "3.11.2"}                      once, after connecting
    {"op": "call", "id": int, "tool": str, "args": {...}, "line": int|null, "col": int|null,
     "out": {"stdout": str, "stderr": str}}                               # "out": output since the last frame, optional
    {"op": "output", "stdout": str, "stderr": str}                        # output so far, while the program runs
    {"op": "done", "ok": bool, "stdout": str, "stderr": str, "truncated": bool,
     "error": null | {"type": str, "message": str, "traceback": str,
                      "frames": [{"name", "lineno", "end_lineno", "col", "end_col"}],   # program frames, outermost first
                      "tool": str|null, "status": int|null}}                           # set for ToolError

Host -> runner::

    {"op": "start", "program": str, "tools": [str], "max_output_bytes": int}   # "session": true: stay for more
    {"op": "exec", "program": str, "snippet": int, "max_output_bytes": int}     # a session's next snippet
    {"op": "result", "id": int, "ok": true, "data": JSON, "status": int|null, "headers": {str: str}}
    {"op": "result", "id": int, "ok": false, "error": {"message": str, "status": int|null, "kind": str,
                                                      "failure": str, "data": JSON, "headers": {str: str}}}

``kind`` is ``ToolError`` for a failed call or ``CallBudget`` once the budget is spent; ``failure``
says why a call failed (``sandbox.api.FAILURE_KINDS``); ``data`` and ``headers`` are the API's
answer (error body included) with the host's secrets taken out, header names in lower case, for
``with_headers=True``, ``last_response()`` and ``ToolError.response`` in the program. ``args`` of a
call may hold ``extra_query`` (query parameters the spec does not list); ``with_headers`` never
leaves the runner. ``output`` frames and ``out`` carry the program's output while it runs, so
that the host keeps it when it has to stop the program (the ``done`` frame repeats everything).
The host trusts nothing in a runner message: a hostile program can write frames of its own, so
every field is re-validated and every call goes through the same checks as a stub's.

The host reads every frame under three bounds: its length (the header is checked before the
body is read), its number of JSON values (counted in the raw bytes before decoding,
``sandbox.jsonbounds``: a frame's size in Python objects is not its size in bytes) and a deadline
for the whole frame. ``sandbox.frames`` sets them per run and counts every frame against the run.

The runner (``sandbox/inside/runner.py``) is stdlib-only and standalone because it is mounted into
containers whose Python has nothing else; it carries its own copy of the four-line framing.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

from sandbox.jsonbounds import TooManyValues, loads

__all__ = ["MAX_FRAME", "MAX_VALUES", "FrameError", "ChannelClosed", "FrameTooLarge", "encode", "send", "recv",
           "recv_size", "recv_body"]

#: Largest frame the host accepts (program output is capped well below this).
MAX_FRAME = 16 * 1024 * 1024
#: Most JSON values a frame may hold unless the caller says otherwise (``sandbox.hostbounds``
#: sizes it per run): counted before decoding (``sandbox.jsonbounds``).
MAX_VALUES = 1 << 20

_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """The peer sent something that is not an acceptable frame (oversized, too many values, not
    JSON, not an object with an ``op``)."""


class ChannelClosed(FrameError):
    """The peer closed the channel (or went away) before a whole frame came."""


class FrameTooLarge(FrameError):
    """A frame over its cap in bytes (refused on its header) or in values (refused unparsed)."""


def encode(msg: dict[str, Any]) -> bytes:
    body = json.dumps(msg, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")
    return _HEADER.pack(len(body)) + body


def send(sock: socket.socket, msg: dict[str, Any]) -> None:
    sock.sendall(encode(msg))


def _recv_into(sock: socket.socket, buf: bytearray, deadline: float | None) -> None:
    """Fill ``buf`` from ``sock``; ``deadline`` bounds the whole read, not each ``recv``."""
    view = memoryview(buf)
    got = 0
    while got < len(buf):
        if deadline is not None:
            # Per read, a socket timeout would let a peer that drips a byte at a time run on for ever.
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the frame did not arrive in time")
            sock.settimeout(remaining)
        n = sock.recv_into(view[got:], min(len(buf) - got, 1 << 20))
        if not n:
            raise ChannelClosed("channel closed")
        got += n


def recv_size(sock: socket.socket, *, max_frame: int = MAX_FRAME, deadline: float | None = None) -> int:
    """The length of the next frame, read from its header (``FrameError`` past ``max_frame``)."""
    header = bytearray(_HEADER.size)
    _recv_into(sock, header, deadline)
    (size,) = _HEADER.unpack(header)
    if size > max_frame:
        raise FrameTooLarge(f"frame of {size} bytes exceeds the {max_frame}-byte cap")
    return int(size)


def recv_body(sock: socket.socket, size: int, *, deadline: float | None = None,
              max_values: int = MAX_VALUES) -> dict[str, Any]:
    """The ``size``-byte body of a frame whose header ``recv_size`` read, decoded. Read into one
    buffer (no copies) and refused before decoding when it holds more than ``max_values`` values."""
    body = bytearray(size)
    _recv_into(sock, body, deadline)
    try:
        msg = loads(body, max_values)
    except TooManyValues as exc:
        raise FrameTooLarge(f"frame of {size} bytes is refused unparsed: {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FrameError(f"frame is not JSON: {exc}") from exc
    except RecursionError:
        raise FrameError("frame nested too deeply to decode") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("op"), str):
        raise FrameError("frame is not an object with an 'op'")
    return msg


def recv(sock: socket.socket, *, max_frame: int = MAX_FRAME, deadline: float | None = None,
         max_values: int = MAX_VALUES) -> dict[str, Any]:
    """The next frame. ``deadline`` (a ``time.monotonic()`` value) bounds the whole frame, not
    each read (``TimeoutError`` past it); ``max_frame`` its bytes and ``max_values`` its values."""
    size = recv_size(sock, max_frame=max_frame, deadline=deadline)
    return recv_body(sock, size, deadline=deadline, max_values=max_values)
