"""The in-sandbox runner: runs ONE program whose tool functions are calls to the host.

STDLIB ONLY and standalone: it is mounted read-only into containers (``/atc/runner.py``, run by
Debian's python3) and executed by the local jail, so it imports nothing from atc.

Usage::

    python3 -I -S runner.py --fd N              # an inherited socket (local backend)
    python3 -I -S runner.py --connect PATH      # connect to a Unix socket the host listens on

Protocol (the same as ``sandbox/wire.py``; the framing is copied here on purpose): every frame
is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON. The runner sends
``ready`` as soon as it is connected, then blocks on ``start`` -- this is what lets backends keep
*warm* runners -- compiles the program as ``<program>``, defines each tool name as a global stub
and ``ToolError``, runs it with stdout/stderr captured in capped buffers, sends one ``done`` frame
and exits.

Session mode (``"session": true`` in ``start``; ``sandbox/session/interpreter.py``): after ``done`` the
runner waits for the next snippet, ``{"op": "exec", "program", "snippet": N, "max_output_bytes"}``,
and runs it in the SAME globals (the stubs, ``ToolError`` and whatever earlier snippets defined), like the
cells of a notebook; anything else, or the channel closing, ends it. Snippet N is compiled as
``<snippet N>`` (the ``start`` of a session is snippet 0): positions and traceback frames of the snippet being run are its own, and a frame
of a function an earlier snippet defined is shown with that snippet's source. A snippet that
raises leaves the globals as they were when it raised.

A stub takes keyword arguments only, sends ``{"op": "call", "id", "tool", "args", "line",
"col"}`` with the calling program line and column (``co_positions`` of the caller's current
instruction; columns are 0-based UTF-8 byte offsets, as in ``ast``), blocks for the ``result``
and returns its ``data`` or raises ``ToolError``. Once the host says the call budget is spent it
raises ``CallBudget``, a BaseException the program cannot usefully catch (the host keeps the
verdict anyway).

What a program sees besides the plain JSON return value:

- ``tool(..., with_headers=True)`` returns a ``Response`` instead: ``.data`` (the same value),
  ``.status``, ``.headers`` (a dict with case-insensitive keys) and ``.links`` (the ``Link``
  header parsed like requests does: ``links["next"]["url"]``), for pagination, ``ETag``,
  ``Location`` and totals;
- ``last_response()`` is that ``Response`` for the most recent call (None before any), failed
  calls included;
- ``ToolError`` carries ``.tool``, ``.status`` and ``.response`` (the error's ``Response``, or
  None when no answer came);
- ``tool(..., extra_query={...})`` passes query parameters the spec does not list (the host
  checks and sends them);
- ``final_answer(value)`` hands the task's typed result to the host at once, in an ``answer``
  frame (``{"op": "answer", "value", "line", "col"}``); the value must be JSON data of at most
  ``max_value_bytes`` (from ``start``); a later call replaces it. The host checks it against the
  answer schema when one was asked for (``atc.loop.answers``).

Output is streamed to the host while the program runs (an ``output`` frame at most every
``FLUSH_SECONDS``, and the pending output rides on every ``call`` frame as ``out``), so that a
program stopped at the time limit still reports what it printed so far.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import re
import socket
import struct
import sys
import threading
import time
import traceback

TYPE_CHECKING = False  # typing is not imported at run time: every start of a sandbox pays for imports
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType, TracebackType
    from typing import Any

PROGRAM = "<program>"
#: The name the running program (or snippet) was compiled under, and the source lines of every
#: name compiled so far in this process (a session's earlier snippets), for tracebacks.
_CURRENT = [PROGRAM]
#: The process that serves the host (set by ``main``); a fork of it never sends results.
_OWNER = [os.getpid()]
_SOURCES: dict[str, list[str]] = {}
_HEADER = struct.Struct(">I")
_MAX_FRAME = 64 * 1024 * 1024
_FRAME_HEAD = 25
_FRAME_TAIL = 40
FLUSH_SECONDS = 0.2
# Bound now: a program that rebinds json.dumps or socket methods must not break the channel.
_dumps, _loads, _pack, _unpack = json.dumps, json.loads, _HEADER.pack, _HEADER.unpack


# -- framing (a copy of sandbox/wire.py) --------------------------------------------------------

def send(sock: socket.socket, msg: dict[str, Any]) -> None:
    body = _dumps(msg, ensure_ascii=False, separators=(",", ":"), default=repr).encode("utf-8", "replace")
    sock.sendall(_pack(len(body)) + body)


#: Bytes read from the host and not yet taken: a reply's header and body come in one ``recv``
#: (every read of the channel goes through ``_recv_exact``), one system call a call fewer.
_PENDING = bytearray()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = _PENDING
    while len(buf) < n:
        chunk = sock.recv(min(max(n - len(buf), 1 << 16), 1 << 20))
        if not chunk:
            raise EOFError("channel closed")
        buf += chunk
    out = bytes(buf[:n])
    del buf[:n]
    return out


def recv(sock: socket.socket) -> Any:
    (size,) = _unpack(_recv_exact(sock, _HEADER.size))
    if size > _MAX_FRAME:
        raise EOFError("oversized frame")
    return _loads(_recv_exact(sock, size))


# -- what the program sees ----------------------------------------------------------------------

class Headers(dict):  # type: ignore[type-arg]
    """Response headers: a plain dict with lower-case names, looked up case-insensitively."""

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(key.lower() if isinstance(key, str) else key)

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(key.lower() if isinstance(key, str) else key, default)

    def __contains__(self, key: Any) -> bool:
        return super().__contains__(key.lower() if isinstance(key, str) else key)


def _parse_links(value: str) -> dict[str, dict[str, str]]:
    """``<https://x/?page=2>; rel="next", <...>; rel="last"`` -> ``{"next": {"url", "rel"}, ...}``
    (the shape requests gives ``response.links``; a URL may itself contain commas)."""
    links: dict[str, dict[str, str]] = {}
    for match in re.finditer(r"<([^>]*)>([^<]*)", value):
        link = {"url": match.group(1).strip()}
        for param in match.group(2).split(";"):
            key, _, val = param.strip().strip(",").partition("=")
            if key.strip():
                link[key.strip().lower()] = val.strip().strip(",").strip().strip('"')
        for rel in (link.get("rel") or link["url"]).split():
            links.setdefault(rel, link)
    return links


class Response:
    """A call's answer with its HTTP details (``with_headers=True``, ``last_response()``)."""

    __slots__ = ("data", "status", "headers", "links")

    def __init__(self, data: Any, status: Any, headers: Any) -> None:
        self.data = data
        self.status = status if isinstance(status, int) else None
        self.headers = Headers((str(k).lower(), str(v)) for k, v in (headers or {}).items()) \
            if isinstance(headers, dict) else Headers()
        self.links = _parse_links(self.headers.get("link", ""))

    def __repr__(self) -> str:
        shown = repr(self.data)
        return f"Response(status={self.status}, data={shown[:200] + ('...' if len(shown) > 200 else '')})"


class ToolError(Exception):
    """A tool call failed (invalid arguments, HTTP error). ``tool`` and ``status`` say which/how;
    ``response`` is the API's answer (a ``Response``; None when no answer came)."""

    def __init__(self, message: str, tool: str | None = None, status: int | None = None,
                 response: Response | None = None) -> None:
        super().__init__(message)
        self.tool = tool
        self.status = status
        self.response = response


class CallBudget(BaseException):
    """The program made more tool calls than allowed; not an Exception so ``except Exception``
    does not swallow it."""


class OutputLimit(BaseException):
    """The program printed more than the output cap."""


class CappedText(io.TextIOBase):
    """A text stream that keeps at most ``cap`` bytes (shared with its sibling stream) and then
    stops the program by raising ``OutputLimit`` on every further write. ``on_write`` is called
    after each write (the output pump's wake-up)."""

    def __init__(self, budget: dict[str, Any], name: str, on_write: Callable[[], None] | None = None) -> None:
        super().__init__()
        self._budget = budget
        self._parts: list[str] = []
        self._name = name
        self._on_write = on_write
        self.sent = 0  # parts already streamed to the host

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    @property
    def name(self) -> str:
        return self._name

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        budget = self._budget
        if budget["over"]:
            raise OutputLimit(f"output limit of {budget['cap']} bytes exceeded")
        size = len(s.encode("utf-8", "replace"))
        if budget["used"] + size > budget["cap"]:
            room = budget["cap"] - budget["used"]
            self._parts.append(s.encode("utf-8", "replace")[:max(room, 0)].decode("utf-8", "ignore"))
            budget["used"] = budget["cap"]
            budget["over"] = True
            raise OutputLimit(f"output limit of {budget['cap']} bytes exceeded")
        budget["used"] += size
        self._parts.append(s)
        if self._on_write is not None and s:
            self._on_write()
        return len(s)

    def getvalue(self) -> str:
        return "".join(self._parts)

    def pending(self) -> str:
        """What was written since the last call (the parts list only grows)."""
        end = len(self._parts)
        text = "".join(self._parts[self.sent:end])
        self.sent = end
        return text


class Channel:
    """The runner's end of the host channel. Calls from several threads are serialised; every
    frame is written under one send lock, so the output pump can send while a call waits."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.lock = threading.Lock()
        self.send_lock = threading.Lock()
        self.next_id = 0
        self.last: Response | None = None
        self.streams: tuple[CappedText, CappedText] | None = None
        # ONE pump per channel, for every snippet of a session: a thread per snippet lingered for
        # its flush interval, and fast snippets piled them up (each with its stack and malloc
        # arena, counted against the sandbox's address space).
        self._wake = threading.Event()
        self._pump: threading.Thread | None = None
        self._stopped = False
        self.max_value_bytes = 1 << 20  # the largest final_answer value the host takes (set by start)

    def _pending(self) -> dict[str, str] | None:
        if self.streams is None:
            return None
        out, err = self.streams[0].pending(), self.streams[1].pending()
        return {"stdout": out, "stderr": err} if out or err else None

    def call(self, tool: str, args: dict[str, Any], line: int | None, col: int | None,
             with_headers: bool = False) -> Any:
        with self.lock:
            self.next_id += 1
            call_id = self.next_id
            frame: dict[str, Any] = {"op": "call", "id": call_id, "tool": tool, "args": args, "line": line, "col": col}
            with self.send_lock:
                pending = self._pending()
                if pending:
                    frame["out"] = pending
                send(self.sock, frame)
            reply = recv(self.sock)
        if not isinstance(reply, dict) or reply.get("id") != call_id:
            raise CallBudget("the host channel is out of step")
        if reply.get("ok"):
            answer = Response(reply.get("data"), reply.get("status"), reply.get("headers"))
            self.last = answer
            return answer if with_headers else answer.data
        error = reply.get("error") or {}
        message = str(error.get("message") or f"{tool}: call failed")
        if error.get("kind") == "CallBudget":
            raise CallBudget(message)
        status = error.get("status")
        response = Response(error.get("data"), status, error.get("headers")) if isinstance(status, int) else None
        self.last = response
        raise ToolError(message, tool=tool, status=status, response=response)

    def answer(self, value: Any, line: int | None, col: int | None) -> None:
        """Hand the program's typed answer to the host (an ``answer`` frame, sent at once)."""
        with self.send_lock:
            send(self.sock, {"op": "answer", "value": value, "line": line, "col": col})

    # -- the output pump: what the program prints reaches the host while it runs ----------------

    def wake(self) -> None:
        if self._pump is None and not self._stopped:
            self._pump = threading.Thread(target=self._pump_loop, name="atc-output", daemon=True)
            try:
                self._pump.start()
            except RuntimeError:  # no thread left (the program took them all): the done frame carries it
                return
        self._wake.set()

    def _pump_loop(self) -> None:
        """Sends what the running program printed, at most every ``FLUSH_SECONDS``; between two
        snippets of a session (stopped) it sends nothing and waits for the next one's output."""
        while True:
            self._wake.wait()
            time.sleep(FLUSH_SECONDS)  # gather what a loop prints into one frame
            self._wake.clear()
            with self.send_lock:
                if self._stopped:
                    continue
                pending = self._pending()
                if pending:
                    try:
                        send(self.sock, {"op": "output", **pending})
                    except OSError:
                        return

    def stop(self) -> None:
        """No more output frames (the done frame carries everything)."""
        with self.send_lock:
            self._stopped = True

    def restart(self) -> None:
        """Output frames again, for the next snippet of a session (the same pump serves it)."""
        with self.send_lock:
            self._stopped = False


#: The instruction positions of each code object that called a tool, by ``id`` (the code object is
#: kept beside them, so that an id cannot be reused while cached): listing them cost every call
#: tens of microseconds, more in a long program, the largest share of a call's own work here.
_POSITIONS: dict[int, tuple[Any, tuple[Any, ...]]] = {}


def _position(frame: FrameType) -> tuple[int | None, int | None]:
    """(line, col) of the instruction a frame is executing, via co_positions (3.11+)."""
    try:
        code = frame.f_code
        cached = _POSITIONS.get(id(code))
        if cached is None or cached[0] is not code:
            if len(_POSITIONS) >= 4096:  # a program that makes code objects as it goes (exec in a loop)
                _POSITIONS.clear()
            cached = _POSITIONS[id(code)] = (code, tuple(code.co_positions()))
        line, _end, col, _end_col = cached[1][frame.f_lasti // 2]
        return (line if line is not None else frame.f_lineno), col
    except (AttributeError, IndexError, ValueError):
        return frame.f_lineno, None


def _caller_position() -> tuple[int | None, int | None]:
    frame: FrameType | None = sys._getframe(2)
    current = _CURRENT[0]
    while frame is not None and frame.f_code.co_filename != current:
        frame = frame.f_back
    return _position(frame) if frame is not None else (None, None)


def make_stub(channel: Channel, name: str) -> Callable[..., Any]:
    """The global function ``name`` of the program: keyword arguments only, JSON values only;
    ``with_headers=True`` returns a ``Response``."""

    def stub(*args: Any, **kwargs: Any) -> Any:
        if args:
            raise TypeError(f"{name}() takes keyword arguments only, e.g. {name}(name=value); "
                            f"got {len(args)} positional")
        with_headers = kwargs.pop("with_headers", False)
        if not isinstance(with_headers, bool):
            raise TypeError(f"{name}(): with_headers must be True or False")
        try:
            _dumps(kwargs, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name}(): argument values must be JSON data (str, int, float, bool, None, "
                            f"list, dict): {exc}") from None
        line, col = _caller_position()
        return channel.call(name, kwargs, line, col, with_headers)

    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = (f"Tool {name}: call with keyword arguments; returns the parsed JSON response "
                    "(with_headers=True: a Response with .data, .status, .headers, .links).")
    return stub


# -- errors as the host wants them --------------------------------------------------------------

def _program_entries(tb: TracebackType | None) -> tuple[list[dict[str, Any]], int]:
    """The frames of the program (and, in a session, of earlier snippets: every name in
    ``_SOURCES``), outermost first, each with its ``file``; and how many were left out of a very
    deep traceback (its head and tail are kept)."""
    entries = []
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename in _SOURCES:
            try:
                pos = list(code.co_positions())[tb.tb_lasti // 2]
            except (IndexError, ValueError):
                pos = (tb.tb_lineno, tb.tb_lineno, None, None)
            line = pos[0] if pos[0] is not None else tb.tb_lineno
            entries.append({"file": code.co_filename, "name": code.co_name, "lineno": line,
                            "end_lineno": pos[1] or line, "col": pos[2], "end_col": pos[3]})
        tb = tb.tb_next
    omitted = max(0, len(entries) - _FRAME_HEAD - _FRAME_TAIL)
    if omitted:
        entries = entries[:_FRAME_HEAD] + entries[-_FRAME_TAIL:]
    return entries, omitted


def _format_traceback(frames: list[dict[str, Any]], exc: BaseException, omitted: int) -> str:
    out = ["Traceback (most recent call last):\n"]
    for i, f in enumerate(frames):
        if omitted and i == _FRAME_HEAD:
            out.append(f"  [... {omitted} more frames ...]\n")
        out.append(f'  File "{f["file"]}", line {f["lineno"]}, in {f["name"]}\n')
        lineno = f["lineno"]
        lines = _SOURCES.get(f["file"], [])
        if lineno and 0 < lineno <= len(lines):
            text = lines[lineno - 1]
            stripped = text.lstrip()
            out.append(f"    {stripped.rstrip()}\n")
            col, end = f.get("col"), f.get("end_col")
            if col is not None and end is not None and f.get("end_lineno") == lineno:
                raw = text.encode("utf-8")
                indent = len(raw) - len(stripped.encode("utf-8"))
                width = len(raw[col:end].decode("utf-8", "replace"))
                lead = len(raw[indent:col].decode("utf-8", "replace"))
                if width and width < len(stripped.rstrip()):
                    out.append("    " + " " * lead + "^" * width + "\n")
    out.extend(_exception_only(exc))
    return "".join(out)


def _safe_text(exc: BaseException) -> str:
    """The exception's message; a program's exception whose __str__ fails still gets one."""
    try:
        if isinstance(exc, KeyError) and len(exc.args) == 1:
            return repr(exc.args[0])
        return str(exc)
    except BaseException:
        return f"<{type(exc).__name__}: unprintable message>"


def _exception_only(exc: BaseException) -> list[str]:
    try:
        return traceback.format_exception_only(type(exc), exc)
    except BaseException:
        return [f"{type(exc).__name__}: {_safe_text(exc)}\n"]


def describe(exc: BaseException, lines: list[str]) -> dict[str, Any]:
    """The ``done.error`` dict of an exception raised by the program. ``frames`` are the frames
    of the program being run only (the host reads positions in it); the traceback text also
    shows those of a session's earlier snippets."""
    current = _CURRENT[0]
    _SOURCES.setdefault(current, lines)
    if isinstance(exc, SyntaxError) and exc.filename == current:
        col = (exc.offset - 1) if exc.offset else None
        end_col = (exc.end_offset - 1) if exc.end_offset else None
        frames = [{"name": "<module>", "lineno": exc.lineno, "end_lineno": exc.end_lineno or exc.lineno,
                   "col": col, "end_col": end_col}]
        text = "".join(_exception_only(exc))
        return {"type": type(exc).__name__, "message": str(exc.msg), "traceback": text,
                "frames": frames, "tool": None, "status": None}
    entries, omitted = _program_entries(exc.__traceback__)
    own = [{k: v for k, v in e.items() if k != "file"} for e in entries if e["file"] == current]
    error: dict[str, Any] = {"type": type(exc).__name__, "message": _safe_text(exc),
                             "traceback": _format_traceback(entries, exc, omitted)[-20000:],
                             "frames": own, "tool": None, "status": None}
    if isinstance(exc, ToolError):
        error["tool"] = exc.tool
        error["status"] = exc.status if isinstance(exc.status, int) else None
    return error


# -- the run ------------------------------------------------------------------------------------

def make_final_answer(channel: Channel) -> Callable[[Any], None]:
    """The program's ``final_answer(value)``: JSON data, handed to the host at once (the host
    checks it against the answer schema, when one was asked for); a later call replaces it."""

    def final_answer(value: Any) -> None:
        """Hand over the task's result: JSON data (dict, list, str, int, float, bool, None) that
        matches the answer's schema. Printing stays allowed for notes."""
        try:
            text = _dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"final_answer(): the value must be JSON data (dict, list, str, int, float, bool, "
                            f"None): {exc}") from None
        size = len(text.encode("utf-8", "replace"))
        if size > channel.max_value_bytes:
            raise ValueError(f"final_answer(): the value is {size} bytes as JSON, more than the "
                             f"{channel.max_value_bytes} a run may hand over")
        line, col = _caller_position()
        channel.answer(value, line, col)

    return final_answer


def make_namespace(channel: Channel, tools: Any) -> dict[str, Any]:
    """The globals a program starts with: a stub per tool, ``ToolError``, ``last_response``,
    ``final_answer``."""

    def last_response() -> Response | None:
        """The ``Response`` of the most recent tool call (None before any call)."""
        return channel.last

    namespace = {"__name__": "__main__", "__builtins__": builtins, "ToolError": ToolError,
                 "last_response": last_response, "final_answer": make_final_answer(channel)}
    for name in tools if isinstance(tools, list) else []:
        if isinstance(name, str) and name.isidentifier():
            namespace[name] = make_stub(channel, name)
    return namespace


def run_program(channel: Channel, start: dict[str, Any], namespace: dict[str, Any] | None = None,
                filename: str = PROGRAM) -> dict[str, Any]:
    """Run the program of a ``start`` (or ``exec``) frame in ``namespace`` (default: fresh
    globals); return the ``done`` frame."""
    program = start.get("program") or ""
    if not isinstance(program, str):
        program = ""
    lines = program.splitlines()
    _CURRENT[0] = filename
    _SOURCES[filename] = lines
    cap = int(start.get("max_output_bytes") or 1_000_000)
    budget = {"cap": cap, "used": 0, "over": False}
    out, err = CappedText(budget, "<stdout>", channel.wake), CappedText(budget, "<stderr>", channel.wake)
    channel.streams = (out, err)
    if namespace is None:
        namespace = make_namespace(channel, start.get("tools"))
    error = None
    sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO("")
    try:
        code = compile(program, filename, "exec", dont_inherit=True)
        exec(code, namespace)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error = describe(exc, lines)
            error["message"] = f"sys.exit({exc.code!r})"
    except OutputLimit as exc:
        error = describe(exc, lines)
    except BaseException as exc:  # everything the program raises is reported, nothing escapes
        error = describe(exc, lines)
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        channel.stop()
    if budget["over"]:
        error = error if error and error["type"] == "OutputLimit" else {
            "type": "OutputLimit", "message": f"output limit of {cap} bytes exceeded", "traceback": "",
            "frames": (error or {}).get("frames", []), "tool": None, "status": None}
    return {"op": "done", "ok": error is None, "stdout": out.getvalue(), "stderr": err.getvalue(),
            "truncated": budget["over"], "error": error}


def send_done(sock: socket.socket, done: dict[str, Any]) -> None:
    if os.getpid() != _OWNER[0]:
        # A process the program forked that ran on to the program's end: the result is its
        # parent's to send (and in a session, the next snippet is its parent's to run).
        os._exit(0)
    try:
        send(sock, done)
    except (TypeError, ValueError):
        send(sock, {"op": "done", "ok": False, "stdout": "", "stderr": "", "truncated": False,
                    "error": {"type": "SandboxError", "message": "the result could not be encoded",
                              "traceback": "", "frames": [], "tool": None, "status": None}})


def serve_session(channel: Channel, start: dict[str, Any]) -> int:
    """Session mode: run the first snippet (``start``), then each ``exec`` that follows in the same
    globals, until anything else comes or the channel closes. The channel lock is held from one
    ``done`` to the next ``exec``: a thread the program left running cannot interleave a call of
    its own with them (it waits, and its call is served as part of the next snippet)."""
    namespace = make_namespace(channel, start.get("tools"))
    frame = start
    count = 0
    while True:
        number = frame.get("snippet")  # the host's count (a snippet it refused never came here)
        name = f"<snippet {number if isinstance(number, int) and not isinstance(number, bool) else count}>"
        count += 1
        done = run_program(channel, frame, namespace, name)
        with channel.lock:
            send_done(channel.sock, done)
            try:
                frame = recv(channel.sock)
            except (EOFError, OSError, ValueError):
                return 0
        if not isinstance(frame, dict) or frame.get("op") != "exec":
            return 0
        channel.restart()


def connect(path: str, timeout: float = 10.0) -> socket.socket:
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def main(argv: list[str], before_program: Callable[[], None] | None = None) -> int:
    """Serve one program. ``before_program`` runs once ``start`` came, before the program: the
    Docker fork server (``sandbox/inside/container_server.py``) drops to the run's uid there."""
    if len(argv) != 2 or argv[0] not in ("--fd", "--connect"):
        sys.stderr.write("usage: runner.py --fd N | --connect PATH\n")
        return 2
    _OWNER[0] = os.getpid()
    sock = socket.socket(fileno=int(argv[1])) if argv[0] == "--fd" else connect(argv[1])
    sock.settimeout(None)
    send(sock, {"op": "ready", "pid": os.getpid(), "python": sys.version.split()[0]})
    try:
        start = recv(sock)
    except (EOFError, OSError, ValueError):
        return 0
    if not isinstance(start, dict) or start.get("op") != "start":
        return 3
    if before_program is not None:
        before_program()
    channel = Channel(sock)
    limit = start.get("max_value_bytes")
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        channel.max_value_bytes = limit
    if start.get("session") is True:
        return serve_session(channel, start)
    send_done(sock, run_program(channel, start))
    return 0


if __name__ == "__main__":
    # os._exit: threads the program left running and atexit hooks it registered must not keep
    # the sandbox alive or run after the result was sent.
    code = 1
    try:
        code = main(sys.argv[1:])
    finally:
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        os._exit(code)
