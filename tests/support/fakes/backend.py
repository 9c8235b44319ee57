"""An in-process sandbox backend for tests of the layers above the sandbox (a seam we own).

``FakeBackend(handlers)`` runs a program with ``exec`` in this process: each tool is a global
that calls ``handlers[tool](**kwargs)`` (a plain Python function returning the "response", or
raising ``ToolError``), and every call is recorded as a ``ToolCall`` with the program line it came
from. Errors become an ``ErrorInfo`` with the innermost program line; a ``ToolError`` is attributed
to its tool, and ``attribute`` (optional) lets a test decide other attributions. It isolates
nothing: use it only with programs the test wrote.

``open_session`` gives a ``FakeSession`` (``sandbox.api.SandboxSession``): snippets run with
``exec`` in one dict of globals that persists until ``close``; the call budget counts across
snippets; afterwards ``execute`` raises ``SessionEnded``. ``sandbox.session.open.open_session``
takes it like a real backend's.
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from atc.errors import SessionEnded, ToolError
from sandbox.api import ErrorInfo, ExecutionResult, Limits, SessionLimits, ToolCall, Toolset

__all__ = ["FakeBackend", "FakeSession"]

Handler = Callable[..., Any]


class FakeBackend:
    name = "fake"

    def __init__(
        self,
        handlers: dict[str, Handler] | None = None,
        *,
        attribute: Callable[[ErrorInfo, list[ToolCall]], dict[str, Any] | None] | None = None,
    ) -> None:
        self.handlers = handlers or {}
        self.attribute = attribute
        self.programs: list[str] = []

    def _stub(self, name: str, tools: Toolset, calls: list[ToolCall]) -> Callable[..., Any]:
        tool = tools.tools[name]

        def call(*args: Any, **kwargs: Any) -> Any:
            line = sys._getframe(1).f_lineno
            record = ToolCall(name, dict(kwargs), tool.method, tool.path, None, False, line, 0.0)
            calls.append(record)
            if args:
                raise TypeError(f"{name}() takes keyword arguments only")
            handler = self.handlers.get(name)
            if handler is None:
                raise ToolError(f"{name}: HTTP 501: no fake handler", tool=name, status=501)
            started = time.perf_counter()
            try:
                response = handler(**kwargs)
            except ToolError as exc:
                record.status, record.error = exc.status, exc.message
                raise
            finally:
                record.duration_ms = (time.perf_counter() - started) * 1000
            record.status, record.ok, record.response = 200, True, response
            return response

        return call

    def run(self, program: str, tools: Toolset, limits: Limits) -> ExecutionResult:
        calls: list[ToolCall] = []
        env: dict[str, Any] = {"__name__": "__main__", "ToolError": ToolError}
        env.update({name: self._stub(name, tools, calls) for name in tools.names()})
        return self.execute(program, env, calls)

    def open_session(self, tools: Toolset, limits: Limits, session: SessionLimits) -> FakeSession:
        return FakeSession(self, tools, limits)

    def execute(self, program: str, env: dict[str, Any], calls: list[ToolCall]) -> ExecutionResult:
        """Run ``program`` in ``env``, whose tool stubs record into ``calls``."""
        self.programs.append(program)
        started = time.perf_counter()
        out = io.StringIO()
        error: ErrorInfo | None = None
        try:
            code = compile(program, "<program>", "exec")
            with contextlib.redirect_stdout(out):
                exec(code, env)
        except SyntaxError as exc:
            error = ErrorInfo("SyntaxError", str(exc.msg), exc.lineno)
        except Exception as exc:
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<program>"]
            line = frames[-1].lineno if frames else None
            lines = program.splitlines()
            code_line = lines[line - 1].strip() if line and 0 < line <= len(lines) else None
            tb = "Traceback (most recent call last):\n" + "".join(
                f'  File "<program>", line {f.lineno}, in {f.name}\n    {lines[f.lineno - 1].strip()}\n'
                for f in frames if f.lineno) + f"{type(exc).__name__}: {exc}"
            tool = exc.tool if isinstance(exc, ToolError) else None
            error = ErrorInfo(type(exc).__name__, str(exc), line, tool, tb, code=code_line)
            if tool:
                error.attribution = {"reason": "the call raised ToolError", "call_index": len(calls) - 1,
                                     "response_shape": None, "excerpt": None}
            elif self.attribute is not None:
                found = self.attribute(error, calls)
                if found:
                    error.tool = found.get("tool")
                    error.attribution = found
        return ExecutionResult(ok=error is None, answer=out.getvalue(), sandbox=self.name,
                               duration_ms=(time.perf_counter() - started) * 1000, error=error, calls=list(calls))

    def close(self) -> None:
        pass

    def __enter__(self) -> FakeBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FakeSession:
    """A sandbox session of the fake backend (see the module docstring)."""

    def __init__(self, backend: FakeBackend, tools: Toolset, limits: Limits) -> None:
        self.name = backend.name
        self.backend = backend
        self.limits = limits
        self._calls: list[ToolCall] = []
        self._env: dict[str, Any] = {"__name__": "__main__", "ToolError": ToolError}
        self._env.update({name: self._counted(backend._stub(name, tools, self._calls)) for name in tools.names()})
        self._ended: str | None = None
        self._used = 0
        self._seconds = 0.0
        self._snippets = 0

    def _counted(self, stub: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if len(self._calls) + self._used >= self.limits.max_calls:
                raise ToolError("call budget exhausted", tool=stub.__name__)
            return stub(*args, **kwargs)

        call.__name__ = stub.__name__
        return call

    def execute(self, code: str) -> ExecutionResult:
        if self._ended is not None:
            raise SessionEnded(f"this sandbox session has ended ({self._ended})", reason=self._ended)
        self._snippets += 1
        result = self.backend.execute(code, self._env, self._calls)
        self._used += len(self._calls)
        self._calls.clear()
        self._seconds += result.duration_ms / 1000
        return result

    def close(self, reason: str = "closed") -> None:
        self._ended = self._ended or reason
        self._env.clear()

    @property
    def alive(self) -> bool:
        return self._ended is None

    @property
    def ended(self) -> str | None:
        return self._ended

    @property
    def calls(self) -> int:
        return self._used

    @property
    def exec_seconds(self) -> float:
        return self._seconds

    @property
    def snippets(self) -> int:
        return self._snippets
