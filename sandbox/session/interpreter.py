"""A sandbox session: one isolated interpreter that keeps its globals across snippets.

A backend that can keep a session (``LocalBackend.open_session``, ``DockerBackend.open_session``)
takes one runner as for a run -- a jail, a container's runner -- and hands it, as a
``RunnerHandle``, to an ``Interpreter``. The interpreter opens the runner in session mode (a
``start`` with ``"session": true``, ``sandbox/inside/runner.py``) and then sends each snippet as an
``exec``; every snippet is served by the same loop as a whole run (``sandbox.program_run.serve``) and
turned into the same contract result (``build_result``): its printed output is the answer, its
calls are its own, its error has its line and its attributed tool.

What holds for the whole session (``Limits`` and ``SessionLimits``):

- memory: it is one process tree in one cgroup (one container);
- the call budget: one gateway serves every snippet, so ``max_calls`` counts across them (its
  transports, with their cookie jars, last the session too);
- time: ``timeout`` bounds each snippet; a snippet's deadline is also cut at what is left of
  ``exec_seconds`` (the time all snippets may run) and at the end of ``lifetime_seconds``; CPU
  time is an rlimit on the runner for the whole session (``SessionLimits.spawn_limits``), which
  also bounds what a program that forged its ``done`` frame goes on doing between snippets;
- output: ``max_output_bytes`` caps each snippet's output (each result is the caller's).

A snippet that raises leaves the session running with the globals as they were when it raised.
A snippet whose result is ``Timeout``, ``MemoryLimit``, ``CallBudget`` or ``SandboxError`` (the
host stopped the interpreter, or lost it) ends the session: the runner and everything of it are
removed, that result's message says so, and every later ``execute`` raises ``SessionEnded``
naming the reason (``ended``). So does ``close``. Teardown is the backend's, through
``RunnerHandle.end``: every process, file, cgroup and uid of a local jail, the whole container on
Docker (never recycled: a session's container serves no other run).

Nothing from the runner is trusted more than in a run: frames are checked by the serve loop, and a
program that writes frames itself can only lie about its own results.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Protocol

from protocols.errors import SandboxError, SessionEnded, UsageError
from sandbox.api import ErrorInfo, ExecutionResult, Limits, SessionLimits, Toolset
from sandbox.gateway.core import Gateway
from sandbox.lint import lint
from sandbox.program_run import RunOutcome, build_result, serve

__all__ = ["Interpreter", "RunnerHandle", "ENDING", "OPEN_TIMEOUT"]

#: Result error types after which a session's interpreter cannot go on.
ENDING = frozenset({"Timeout", "MemoryLimit", "CallBudget", "SandboxError"})
#: Seconds the runner has to confirm it is in session mode.
OPEN_TIMEOUT = 15.0


class RunnerHandle(Protocol):
    """One runner a backend lent to a session: its channel, what confines it, and its end."""

    @property
    def sock(self) -> socket.socket: ...

    @property
    def isolation(self) -> list[str]: ...

    def end(self, outcome: RunOutcome | None) -> None:
        """Stop the runner and everything it started, and remove what is left of it (files,
        cgroups, uid: before returning; a Docker container is killed with its PID 1 at once and
        removed in the background); idempotent. With the ``outcome`` of a snippet that did not
        finish, first refine ``outcome.failure`` from how the runner died (memory, CPU)."""
        ...


def refused(program: str, message: str, line: int | None, *, sandbox: str, isolation: list[str],
            started: float) -> ExecutionResult:
    """The result of a snippet the sandbox lint refused (it never reached the interpreter)."""
    lines = program.splitlines()
    code = lines[line - 1].strip() if line and 0 < line <= len(lines) else None
    error = ErrorInfo(type="SandboxError", message=f"program refused by the sandbox lint: {message}", line=line,
                      code=code, attribution={"tool": None, "reason": "the program itself reached for Python internals",
                                              "call_index": None, "response_shape": None, "excerpt": None,
                                              "candidates": []})
    return ExecutionResult(ok=False, answer="", sandbox=sandbox, duration_ms=(time.perf_counter() - started) * 1000,
                           error=error, isolation=list(isolation))


class Interpreter:
    """``sandbox.api.SandboxSession`` over a runner of a real backend (see the module docstring).

    ``execute`` runs one snippet at a time (callers from several threads wait their turn);
    ``close`` may come from any thread at any moment, also while a snippet runs (it is stopped).
    """

    def __init__(self, runner: RunnerHandle, toolset: Toolset, limits: Limits, session: SessionLimits, *,
                 sandbox: str, client: Any = None) -> None:
        self.name = sandbox
        self.runner = runner
        self.toolset = toolset
        self.limits = limits
        self.session = session
        self.opened = time.monotonic()
        self.gateway = Gateway(toolset, limits, client=client, deadline=None)
        self._ended: str | None = None
        self._stopped = False
        self._calls = 0
        self._exec_seconds = 0.0
        self._snippets = 0
        self._lock = threading.Lock()  # one snippet at a time
        self._end_lock = threading.Lock()  # one end of the runner

    # -- what the session has used ---------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._ended is None

    @property
    def ended(self) -> str | None:
        return self._ended

    @property
    def calls(self) -> int:
        """Tool calls made so far (refused ones included: they count against ``max_calls``)."""
        return self._calls

    @property
    def exec_seconds(self) -> float:
        """Seconds the snippets have run so far (of ``SessionLimits.exec_seconds``)."""
        return self._exec_seconds

    @property
    def snippets(self) -> int:
        """Snippets run so far (refused ones included)."""
        return self._snippets

    @property
    def isolation(self) -> list[str]:
        return list(self.runner.isolation)

    # -- the lifecycle ---------------------------------------------------------------------------

    def open(self) -> Interpreter:
        """Put the runner in session mode (an empty snippet 0: for Docker, the runner takes the
        sandbox's uid here); raises ``SandboxError`` when it does not answer."""
        deadline = time.monotonic() + min(OPEN_TIMEOUT, max(self.limits.timeout, 1.0))
        try:
            outcome = serve(self.runner.sock, "", self.toolset, self.limits, self.gateway, deadline=deadline,
                            snippet=0)
        except BaseException:
            self.close("the session could not be opened")
            raise
        if outcome.done is None or not outcome.done.get("ok"):
            self.close("the session could not be opened")
            raise SandboxError(f"the {self.name} sandbox did not open a session: "
                               f"{outcome.detail or (outcome.done or {}).get('error')}")
        return self

    def close(self, reason: str = "closed") -> None:
        """End the session now (a snippet that is running is stopped); idempotent."""
        if self._ended is None:
            self._ended = reason
        self._stop(None)

    def _stop(self, outcome: RunOutcome | None) -> None:
        with self._end_lock:
            if self._stopped:
                return
            self._stopped = True
            self.runner.end(outcome)

    def __enter__(self) -> Interpreter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one snippet -----------------------------------------------------------------------------

    def execute(self, code: str) -> ExecutionResult:
        """Run ``code`` in the session's globals; the result of this snippet alone."""
        if not isinstance(code, str):
            raise UsageError("a snippet must be a string of Python source")
        with self._lock:
            if self._ended is not None:
                raise SessionEnded(f"this sandbox session has ended ({self._ended}); its state is gone",
                                   reason=self._ended, hint="open a new session")
            return self._execute(code)

    def _deadline(self, now: float) -> tuple[float, str | None]:
        """When this snippet must end, and what other than ``timeout`` sets that (or None)."""
        left = self.session.exec_seconds - self._exec_seconds
        end_of_life = self.opened + self.session.lifetime_seconds
        deadline, why = now + self.limits.timeout, None
        if now + left < deadline:
            deadline, why = now + max(left, 0.0), (f"the session's execution time ({self.session.exec_seconds:g} s "
                                                   "for all its snippets) ran out")
        if end_of_life < deadline:
            deadline, why = end_of_life, f"the session reached its lifetime of {self.session.lifetime_seconds:g} s"
        return deadline, why

    def _execute(self, code: str) -> ExecutionResult:
        started = time.perf_counter()
        self._snippets += 1
        number = self._snippets
        issue = lint(code)
        if issue is not None:
            return refused(code, issue.message, issue.line, sandbox=self.name, isolation=self.isolation,
                           started=started)
        began = time.monotonic()
        deadline, cut = self._deadline(began)
        self.gateway.next_program(deadline)
        waited = self.gateway.waited
        outcome = RunOutcome()
        try:
            outcome = serve(self.runner.sock, code, self.toolset, self.limits, self.gateway, deadline=deadline,
                            snippet=number)
        except BaseException:
            # Ctrl-C (or anything) while the snippet ran: its state is unknown, so it goes.
            self.close("interrupted while a snippet ran")
            raise
        finally:
            # An approver's time (--writes ask) is not the session's execution time.
            self._exec_seconds += time.monotonic() - began - (self.gateway.waited - waited)
            self._calls += len(self.gateway.calls)
        finished = outcome.done is not None and outcome.failure is None
        if not finished:
            self._stop(outcome)
            if outcome.failure == "Timeout" and cut is not None and outcome.detail.startswith("the program did not"):
                outcome.detail = cut
        result = build_result(code, outcome, sandbox=self.name, isolation=self.isolation, started=started,
                              tools=self.toolset)
        kind = result.error.type if result.error is not None else None
        if finished and kind not in ENDING:
            return result
        reason = f"snippet {number} ended it: {kind or 'SandboxError'}"
        if self._ended is None:
            self._ended = reason
        self._stop(None)  # a MemoryError the program caught also ends it: the memory is not back
        if result.error is not None:
            result.error.message += f" (the session has ended: {self._ended})"
        return result
