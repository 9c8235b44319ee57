"""One program run over a runner channel, shared by every backend.

A backend gets a connected runner (a socketpair end for the local backend, a socket accepted
from a container for Docker), reads its ``ready`` frame (``wait_ready``), and then::

    gateway = Gateway(toolset, limits, deadline=deadline)
    outcome = serve(sock, program, toolset, limits, gateway, deadline=deadline)
    # ... stop/reap the runner; refine outcome.failure from how it died (e.g. "MemoryLimit") ...
    result = build_result(program, outcome, sandbox="local", isolation=[...], started=started,
                          tools=toolset)

``serve`` sends ``start``, answers every ``call`` frame through the gateway, collects the output
the runner streams while the program runs (``output`` frames and the ``out`` of call frames), and
keeps what the program hands to ``final_answer`` (``answer`` frames: the last one's value and
line), and returns when the runner sends ``done``, closes the channel, or the ``deadline`` (a
``time.monotonic()`` value) passes. A call that is still waiting for its API when the deadline
comes (the gateway cuts its timeout at the deadline) ends the run as a ``Timeout`` attributed to
that call (``RunOutcome.in_flight``). It never raises for anything the runner does; the
backend must kill the runner afterwards whatever the outcome (a finished runner exits by itself).

``build_result`` turns the outcome into the contract ``ExecutionResult``: answer and stderr from
``done`` (or, when the program was stopped, what it had printed so far), the error (type,
message, line, column, source line, traceback), the attributed tool and the explanation from
``sandbox.attribution.fault.attribute``. ``started`` is a ``time.perf_counter()``
value taken when the run began.

Frames are described in ``sandbox/wire.py``; nothing a runner sends is trusted. Every frame is
read through ``sandbox.frames.FrameReader`` (bounded in bytes, in JSON values and by the deadline,
and counted against the run's frame budget), type-checked here, and every call is re-validated by
the gateway. A frame the run does not expect (a second ``ready``, an unknown op, more output than
the cap) ends the run as a ``SandboxError``.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sandbox import wire
from sandbox.api import ErrorInfo, ExecutionResult, Limits, ToolCall, Toolset
from sandbox.cancel import current
from sandbox.frames import FrameReader, FrameRefused, read_ready
from sandbox.hostbounds import HostBounds

if TYPE_CHECKING:
    from sandbox.gateway.core import Gateway

__all__ = ["RunOutcome", "serve", "build_result", "wait_ready", "FAILURES"]

#: Values of ``RunOutcome.failure``: the host stopped or lost the program.
FAILURES = ("Timeout", "CallBudget", "OutputLimit", "MemoryLimit", "SandboxError", "Cancelled")

_MESSAGES = {
    "Timeout": "the program did not finish within {timeout:g} s",
    "CallBudget": "the program made more than {max_calls} tool calls",
    "OutputLimit": "the program printed more than {max_output_bytes} bytes",
    "MemoryLimit": "the program used more than {memory_mb} MB of memory",
}


@dataclass
class RunOutcome:
    """What happened during one run. ``done`` is the runner's (sanitised) done frame, None when it
    never came; ``failure`` is set when the host stopped the program or lost it (see FAILURES);
    ``detail`` says why in words."""

    done: dict[str, Any] | None = None
    calls: list[ToolCall] = field(default_factory=list)
    failure: str | None = None
    detail: str = ""
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    in_flight: int | None = None
    #: what the program handed to ``final_answer`` (the last call), and where it called it
    value: Any = None
    answered: bool = False
    value_line: int | None = None
    _streamed: int = field(default=0, init=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"done": self.done, "calls": [c.to_dict() for c in self.calls],
                "failure": self.failure, "detail": self.detail, "stdout": "".join(self.stdout),
                "stderr": "".join(self.stderr), "in_flight": self.in_flight, "value": self.value,
                "answered": self.answered}

    def stream(self, frame: Any, cap: int) -> None:
        """Keep the output a runner streamed (``{"stdout", "stderr"}``), at most ``cap`` bytes in
        all. A runner stops at ``cap`` by itself: more than that is a forged frame (refused)."""
        if not isinstance(frame, dict):
            return
        for key, parts in (("stdout", self.stdout), ("stderr", self.stderr)):
            text = frame.get(key)
            if isinstance(text, str) and text:
                if self._streamed + len(text) > cap:
                    raise FrameRefused(f"the runner streamed more than the {cap}-byte output cap")
                self._streamed += len(text)
                parts.append(text)


def wait_ready(sock: socket.socket, timeout: float) -> dict[str, Any]:
    """The ``ready`` frame of a runner that was just started (``sandbox.frames.read_ready``: a
    tiny frame, by ``timeout`` seconds for the whole frame; raises ``wire.FrameError``/``OSError``/
    ``TimeoutError`` on EOF, garbage, anything else or no frame in time)."""
    return read_ready(sock, timeout)


#: Bytes of an ``answer`` frame besides its value (the op, the position, the framing).
_ANSWER_FRAME_ROOM = 1024
#: A call that timed out this close to the deadline had its timeout cut by the deadline.
_CUT_BY_DEADLINE = 0.25


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any, cap: int) -> str:
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return text[:cap]


def _sanitize_done(msg: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """The done frame with every field of the documented type (a program could forge it)."""
    cap = max(limits.max_output_bytes, 1)
    done: dict[str, Any] = {
        "ok": msg.get("ok") is True,
        "stdout": _str(msg.get("stdout"), cap),
        "stderr": _str(msg.get("stderr"), cap),
        "truncated": msg.get("truncated") is True,
        "error": None,
    }
    error = msg.get("error")
    if isinstance(error, dict):
        frames = []
        given = error.get("frames")
        for f in given[-200:] if isinstance(given, list) else []:
            if isinstance(f, dict):
                frames.append({"name": _str(f.get("name"), 200),
                               **{k: _int_or_none(f.get(k)) for k in ("lineno", "end_lineno", "col", "end_col")}})
        done["error"] = {
            "type": _str(error.get("type"), 200) or "Exception",
            "message": _str(error.get("message"), 4000),
            "traceback": _str(error.get("traceback"), 20000),
            "frames": frames[-200:],
            "tool": _str(error.get("tool"), 200) or None,
            "status": _int_or_none(error.get("status")),
        }
        done["ok"] = False
    elif not done["ok"]:
        done["error"] = {"type": "SandboxError", "message": "the runner reported failure without an error",
                         "traceback": "", "frames": [], "tool": None, "status": None}
    return done


def _opening(program: str, toolset: Toolset, limits: Limits, snippet: int | None) -> dict[str, Any]:
    """The frame that hands the runner its program: ``start`` (with ``"session": true`` for
    ``snippet`` 0, which opens a session), or the ``exec`` of a session's snippet number N."""
    if snippet:
        return {"op": "exec", "program": program, "snippet": snippet, "max_output_bytes": limits.max_output_bytes}
    frame: dict[str, Any] = {"op": "start", "program": program, "tools": toolset.names(),
                             "max_output_bytes": limits.max_output_bytes,
                             "max_value_bytes": HostBounds.of(limits).frame_bytes - _ANSWER_FRAME_ROOM}
    if snippet is not None:
        frame["session"] = True
    return frame


def serve(
    sock: socket.socket,
    program: str,
    toolset: Toolset,
    limits: Limits,
    gateway: Gateway,
    *,
    deadline: float,
    snippet: int | None = None,
) -> RunOutcome:
    """Run ``program`` on a ready runner: send ``start``, serve calls until done/EOF/deadline, or
    until the thread's ``sandbox.cancel`` token is cancelled (then the run is ``Cancelled``).

    ``snippet`` serves a sandbox session (``sandbox/session/interpreter.py``) with this same loop: 0 sends
    the ``start`` that asks the runner to stay for more (and runs ``program`` first), N the
    ``exec`` of snippet N to the runner that already runs the session."""
    token = current()
    if token is None:
        return _serve(sock, program, toolset, limits, gateway, deadline=deadline, snippet=snippet)
    with token.watching(sock):
        outcome = _serve(sock, program, toolset, limits, gateway, deadline=deadline, snippet=snippet)
    if token.cancelled and outcome.done is None:
        outcome.failure, outcome.detail = "Cancelled", token.reason or "the run was cancelled"
    return outcome


def _serve(
    sock: socket.socket,
    program: str,
    toolset: Toolset,
    limits: Limits,
    gateway: Gateway,
    *,
    deadline: float,
    snippet: int | None = None,
) -> RunOutcome:
    outcome = RunOutcome()
    outcome.calls = gateway.calls
    try:
        program.encode("utf-8")
    except UnicodeEncodeError as exc:
        outcome.failure = "SandboxError"
        outcome.detail = f"the program text is not valid Unicode ({exc.reason} at offset {exc.start})"
        return outcome
    line_count = max(1, len(program.splitlines()))
    reader = FrameReader(limits)
    try:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        wire.send(sock, _opening(program, toolset, limits, snippet))
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            sock.settimeout(remaining)
            msg = reader.next(sock, deadline)  # every frame: bounded, counted, by the deadline
            op = msg.get("op")
            if op == "call":
                if gateway.budget_exceeded:
                    # The runner raised CallBudget on the refused call; a program that swallows it
                    # and calls on gets no more answers (each would grow the call log).
                    return outcome
                call_id = _int_or_none(msg.get("id"))
                # A forged frame may claim any position: keep only one inside the program.
                line = _int_or_none(msg.get("line"))
                line = line if line is not None and 0 < line <= line_count else None
                col = _int_or_none(msg.get("col"))
                col = col if line is not None and col is not None and 0 <= col <= len(program) else None
                outcome.stream(msg.get("out"), limits.max_output_bytes)
                result = gateway.call(msg.get("tool"), msg.get("args"), line=line, col=col)
                if gateway.deadline is not None and gateway.deadline > deadline:
                    deadline = gateway.deadline  # an approver's time (--writes ask) is not the program's
                if not result.ok and (result.error or {}).get("failure") == "timeout" and \
                        deadline - time.monotonic() < _CUT_BY_DEADLINE:
                    # The gateway cut this call's timeout at the program's deadline: the program
                    # ran out of time waiting for it. Its tool is the one to blame.
                    outcome.in_flight = len(gateway.calls) - 1
                    raise TimeoutError
                if gateway.budget_exceeded and outcome.failure is None:
                    outcome.failure = "CallBudget"
                    outcome.detail = _MESSAGES["CallBudget"].format(max_calls=limits.max_calls)
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                wire.send(sock, result.frame(call_id if call_id is not None else -1))
            elif op == "output":
                outcome.stream(msg, limits.max_output_bytes)
            elif op == "answer":  # final_answer(value): already bounded and plain (FrameReader)
                line = _int_or_none(msg.get("line"))
                outcome.value, outcome.answered = msg.get("value"), True
                outcome.value_line = line if line is not None and 0 < line <= line_count else None
            elif op == "done":
                outcome.done = _sanitize_done(msg, limits)
                return outcome
            else:  # "ready" comes once, before the run; anything else is not a runner's
                raise FrameRefused(f"the runner sent a frame the run does not expect: {str(op)[:40]!r}")
    except TimeoutError:
        outcome.failure = "Timeout"
        outcome.detail = _MESSAGES["Timeout"].format(timeout=limits.timeout)
    except (wire.ChannelClosed, OSError) as exc:
        if outcome.failure is None:
            outcome.failure = "SandboxError"
            outcome.detail = f"the runner stopped without a result ({exc})"
    except (wire.FrameError, ValueError) as exc:
        if outcome.failure is None:
            outcome.failure = "SandboxError"
            outcome.detail = f"the host refused a frame from the runner: {exc}"
    return outcome


def _source_line(program: str, line: int | None) -> str | None:
    if line is None:
        return None
    lines = program.splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else None


def _attribute(program: str, error: dict[str, Any], calls: list[ToolCall], names: set[str]) -> dict[str, Any]:
    """The attribution of a failure as a dict; falls back to "a ToolError belongs to its tool"
    when the attribution module is missing or fails (it is advisory: it must not break a result)."""
    try:
        # lazy, and guarded: attribution brings genson and the data-flow tracer, which a run that
        # fails nothing never needs, and a missing module must not break a result
        from sandbox.attribution.fault import attribute
    except ImportError:
        reason = "attribution is not available"
    else:
        try:
            return dict(attribute(program, error, calls, names).to_dict())
        except Exception as exc:
            reason = f"attribution failed: {type(exc).__name__}: {exc}"
    tool = error.get("tool") if error.get("type") == "ToolError" else None
    index = None
    if tool:
        index = max((i for i, c in enumerate(calls) if c.tool == tool and not c.ok), default=None)
        reason = f"a ToolError belongs to its tool ({reason})"
    return {"tool": tool, "reason": reason, "call_index": index, "response_shape": None, "excerpt": None,
            "candidates": []}


def build_result(
    program: str,
    outcome: RunOutcome,
    *,
    sandbox: str,
    isolation: list[str],
    started: float,
    tools: Toolset,
) -> ExecutionResult:
    """The contract result of a run (see the module docstring)."""
    if outcome.done is None and outcome.failure is None:
        outcome.failure, outcome.detail = "SandboxError", "the runner stopped without a result"
    done = outcome.done or {}
    error_dict: dict[str, Any] | None = done.get("error") if not outcome.failure else None
    if outcome.failure:
        runner_error = done.get("error") or {}
        message = outcome.detail or outcome.failure
        error_dict = {"type": outcome.failure, "message": message,
                      "traceback": runner_error.get("traceback", ""), "frames": runner_error.get("frames", []),
                      "tool": None, "status": None}
        waiting = outcome.calls[outcome.in_flight] if outcome.in_flight is not None and \
            0 <= outcome.in_flight < len(outcome.calls) else None
        if outcome.failure == "Timeout" and waiting is not None:
            where = f" called at line {waiting.line}" if waiting.line is not None else ""
            error_dict["message"] = f"{message} (it was waiting for {waiting.tool}{where})"
            error_dict["in_flight"] = outcome.in_flight
            if not error_dict["frames"] and waiting.line is not None:
                error_dict["frames"] = [{"name": "<module>", "lineno": waiting.line, "end_lineno": waiting.line,
                                         "col": waiting.col, "end_col": None}]
        if outcome.failure == "CallBudget" and not error_dict["frames"]:
            first = next((c for c in outcome.calls if c.error and "call budget exhausted" in c.error), None)
            if first is not None and first.line is not None:
                error_dict["frames"] = [{"name": "<module>", "lineno": first.line, "end_lineno": first.line,
                                         "col": first.col, "end_col": None}]
    error: ErrorInfo | None = None
    if error_dict is not None:
        etype = "MemoryLimit" if error_dict["type"] == "MemoryError" else error_dict["type"]
        message = error_dict.get("message") or ""
        if etype == "MemoryLimit" and error_dict["type"] == "MemoryError":
            message = "the program ran out of memory (MemoryError at the memory limit)" + (
                f": {message}" if message else "")
        error_dict = dict(error_dict, type=etype, message=message or f"{etype} (no message)")
        frames = error_dict.get("frames") or []
        innermost = frames[-1] if frames else {}
        line = innermost.get("lineno")
        attribution = _attribute(program, error_dict, outcome.calls, set(tools.names()))
        error = ErrorInfo(
            type=etype,
            message=error_dict.get("message") or "",
            line=line,
            tool=attribution.get("tool"),
            traceback=error_dict.get("traceback") or "",
            col=innermost.get("col"),
            code=_source_line(program, line),
            attribution=attribution,
        )
    # A program that was stopped sent no done frame: what it printed so far is its answer.
    answer = done["stdout"] if outcome.done is not None else "".join(outcome.stdout)
    stderr = done["stderr"] if outcome.done is not None else "".join(outcome.stderr)
    return ExecutionResult(
        ok=error is None and bool(done.get("ok")),
        answer=answer,
        sandbox=sandbox,
        duration_ms=(time.perf_counter() - started) * 1000,
        error=error,
        calls=list(outcome.calls),
        stderr=stderr,
        isolation=list(isolation),
        value=outcome.value,
        answered=outcome.answered,
        value_line=outcome.value_line,
    )
