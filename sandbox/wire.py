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

The runner (``sandbox/runner.py``) is stdlib-only and standalone because it is mounted into
containers whose Python has nothing else; it carries its own copy of the four-line framing.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

__all__ = ["MAX_FRAME", "FrameError", "encode", "send", "recv"]

#: Largest frame the host accepts (program output is capped well below this).
MAX_FRAME = 16 * 1024 * 1024

_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """The peer sent something that is not a frame (closed early, oversized, not JSON)."""


def encode(msg: dict[str, Any]) -> bytes:
    body = json.dumps(msg, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")
    return _HEADER.pack(len(body)) + body


def send(sock: socket.socket, msg: dict[str, Any]) -> None:
    sock.sendall(encode(msg))


def _recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            # Per read, a socket timeout would let a peer that drips a byte at a time run on for ever.
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the frame did not arrive in time")
            sock.settimeout(remaining)
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise FrameError("channel closed")
        buf += chunk
    return bytes(buf)


def recv(sock: socket.socket, *, max_frame: int = MAX_FRAME, deadline: float | None = None) -> dict[str, Any]:
    """The next frame. ``deadline`` (a ``time.monotonic()`` value) bounds the whole frame, not
    each read (``TimeoutError`` past it)."""
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size, deadline))
    if size > max_frame:
        raise FrameError(f"frame of {size} bytes exceeds the {max_frame}-byte cap")
    try:
        msg = json.loads(_recv_exact(sock, size, deadline))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FrameError(f"frame is not JSON: {exc}") from exc
    if not isinstance(msg, dict) or not isinstance(msg.get("op"), str):
        raise FrameError("frame is not an object with an 'op'")
    return msg
