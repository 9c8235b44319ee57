"""``run_program``: one program, run in the sandbox through the gateway, and what the host reads.

A program goes through the same steps as one attempt of ``atc solve``: its code is taken out of
a fenced block if the host's model wrapped it (``atc.loop.extract``), checked statically against the
tools (``atc.loop.checks``: a wrong tool name or argument is reported without spending a run), then
run (``sandbox.execute.run``) under the session's share of the budgets, inside a
``sandbox.cancel.cancellable`` block so that a client that cancels or goes away stops it. A tap
on the run's tools (``ProgressTap``) counts the calls for progress notifications.

``RunAnswer`` is the outcome. ``to_dict()`` is the structured result: the fields of
``ExecutionResult`` (``ok``, ``answer``, ``sandbox``, ``duration_ms``, ``error``, ``calls``, ``stderr``;
not ``isolation``; each call with the contract's fields only, plus its error when it failed),
with the error extended by the blamed tool's full ``protocol`` and the ``response`` it really
returned. ``text()`` is what the host's model reads: on success the answer and one status line;
on failure the feedback ``atc solve`` gives its own model (``atc.loop.reflection``: the error with its
line and traceback, the calls, the blamed tool's protocol and its real response), ending in the
request to call ``run_program`` again with the corrected program -- unless a budget stopped it:
then it says what is left, and a refusal for a spent budget never asks for another call.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from atc import prompts
from atc.loop.checks import check_for_run
from atc.loop.extract import extract_program
from atc.loop.reflection import describe_error, tool_response
from protocols.render import render_full
from sandbox.api import ExecutionResult, Limits, Toolset
from sandbox.cancel import Cancel, cancellable
from sandbox.execute import run

if TYPE_CHECKING:
    from sandbox.api import Backend
    from sandbox.gateway.http.transport import Reply
    from sandbox.gateway.taps import Exchange

__all__ = ["ProgressTap", "RunAnswer", "prepare", "refused", "execute", "answer_for"]

_CALLS_SHOWN = 12
_STDERR_SHOWN = 1000
#: Failures that are about limits or the program's form, never about a tool's data.
_NO_TOOL = frozenset({"SyntaxError", "IndentationError", "TabError", "Timeout", "MemoryLimit", "OutputLimit",
                      "SandboxError", "Cancelled", "CallBudget", "NoProgram"})


class ProgressTap:
    """A ``sandbox.gateway.taps.Tap`` that counts the calls reaching an API, for progress notifications."""

    def __init__(self) -> None:
        self.calls = 0
        self.last: str | None = None
        self._lock = threading.Lock()

    def exchange(self, call: Exchange) -> Reply:
        with self._lock:
            self.calls += 1
            self.last = call.tool.name
        return call.send()

    def status(self) -> tuple[int, str | None]:
        with self._lock:
            return self.calls, self.last


@dataclass
class RunAnswer:
    """The outcome of one ``run_program`` call. ``result`` is None when nothing ran (the program
    was refused before running: no program, a static mistake, no budget left)."""

    program: str
    result: ExecutionResult | None
    error: dict[str, Any] | None
    blamed: Any = None  # the blamed protocols.model.Tool
    #: what to do about a spent budget (a refusal's hint), said instead of "call run_program again"
    hint: str | None = None
    #: the calls the budgets of the program's session, client and server still had when it ended,
    #: when they cut the program's own --max-calls (None: they did not, or they have no bound)
    budget_left: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.result is not None and self.result.ok

    def to_dict(self) -> dict[str, Any]:
        if self.result is not None:
            doc = self.result.to_dict()
            del doc["isolation"]  # what confines the sandbox: the operator's concern, not the host model's
            doc["calls"] = [_call_summary(c) for c in doc["calls"]]
        else:
            doc = {"ok": False, "answer": "", "sandbox": "none", "duration_ms": 0.0, "calls": [], "stderr": ""}
        doc["ok"] = self.ok
        doc["error"] = dict(self.error) if self.error is not None else None
        return doc

    def text(self) -> str:
        if self.ok:
            assert self.result is not None
            return _success_text(self.result)
        return _failure_text(self)


#: The fields of a call in the structured result: those of ``atc run --json``'s contract; what a
#: failed call adds (its error and failure kind), and a count of redacted secrets when there were any.
_CALL_FIELDS = ("tool", "args", "method", "path", "status", "ok", "line", "duration_ms")


def _call_summary(call: dict[str, Any]) -> dict[str, Any]:
    out = {k: call[k] for k in _CALL_FIELDS}
    out["write"] = bool(call.get("write"))
    if out["write"]:
        out["outcome"] = call.get("outcome")
    if not call["ok"]:
        out["error"], out["failure"] = call["error"], call["failure"]
    if call.get("redacted"):
        out["redacted"] = call["redacted"]
    return out


def prepare(text: str, names: list[str]) -> str | None:
    """The program in what the host sent: the text itself, or the program of a fenced block when
    the model wrapped it in one (None: there is no program in it)."""
    if not text or not text.strip():
        return None
    if "```" in text or "~~~" in text:
        return extract_program(text, names)
    return text


def refused(program: str, kind: str, message: str, *, static: bool = True, tool: Any = None,
            hint: str | None = None) -> RunAnswer:
    """A program that did not run, with why (and, for a spent budget, what can be done)."""
    error = {"type": kind, "message": message, "line": None, "tool": getattr(tool, "name", None), "traceback": "",
             "col": None, "code": None, "attribution": None, "static": static, "protocol": None, "response": None}
    return RunAnswer(program=program, result=None, error=error, blamed=tool, hint=hint)


def static_check(program: str, toolset: Toolset) -> RunAnswer | None:
    """The program's first mistake that needs no run (``atc.loop.checks``), or None."""
    error = check_for_run(program, toolset)
    if error is None:
        return None
    blamed = toolset.tools.get(error.get("tool") or "")
    error["protocol"] = render_full(blamed) if blamed is not None else None
    error["response"] = None
    return RunAnswer(program=program, result=None, error=error, blamed=blamed)


def execute(program: str, toolset: Toolset, limits: Limits, backend: Backend, token: Cancel,
            tap: ProgressTap | None = None) -> ExecutionResult:
    """Run ``program`` (blocking; in a worker thread). ``token.cancel()`` from elsewhere stops it."""
    if tap is not None:
        toolset = dataclasses.replace(toolset, taps=(tap, *toolset.taps))
    with cancellable(token):
        return run(program, toolset, limits, sandbox=backend)


def answer_for(program: str, result: ExecutionResult, toolset: Toolset) -> RunAnswer:
    """The answer of a program that ran: its error (if any) with the blamed tool's protocol and
    the response that tool really returned."""
    if result.ok or result.error is None:
        return RunAnswer(program=program, result=result, error=None)
    error = result.error.to_dict()
    blamed = toolset.tools.get(result.error.tool or "")
    error["protocol"] = render_full(blamed) if blamed is not None else None
    seen = tool_response(result, blamed.name) if blamed is not None else None
    error["response"] = {"shape": seen.shape, "excerpt": seen.excerpt} if seen is not None else None
    return RunAnswer(program=program, result=result, error=error, blamed=blamed)


# -- what the host's model reads ----------------------------------------------------------------


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.2f} s" if ms < 10_000 else f"{ms / 1000:.0f} s"


def _success_text(result: ExecutionResult) -> str:
    calls = len(result.calls)
    status = f"[ok: {calls} tool call{'' if calls == 1 else 's'} in {_seconds(result.duration_ms)}]"
    answer = result.answer if result.answer.endswith("\n") or not result.answer else result.answer + "\n"
    if not result.answer.strip():
        status = (f"[ok, but the program printed nothing ({calls} tool call{'' if calls == 1 else 's'}): "
                  "its answer is what it prints, so end it with print(...)]")
    stderr = result.stderr.strip()
    tail = f"[stderr: {stderr[:_STDERR_SHOWN]}{'...' if len(stderr) > _STDERR_SHOWN else ''}]\n" if stderr else ""
    return answer + status + "\n" + tail + _writes_line(result)


def _writes_line(result: ExecutionResult | None) -> str:
    """What became of the run's writes, when it made any (a host that calls again sees why)."""
    if result is None:
        return ""
    counts: dict[str, int] = {}
    for call in result.calls:
        if call.write:
            counts[str(call.outcome)] = counts.get(str(call.outcome), 0) + 1
    if not counts:
        return ""
    text = "[writes: " + ", ".join(f"{n} {k}" for k, n in counts.items())
    if counts.get("replayed"):
        text += " (identical to writes this session already made: not sent again)"
    if counts.get("unknown"):
        text += " (UNKNOWN: sent, no answer came: they may have been applied; check before writing again)"
    return text + "]\n"


def _calls_summary(result: ExecutionResult | None) -> str:
    if result is None or not result.calls:
        return ""
    shown = result.calls[-_CALLS_SHOWN:]
    more = f", the last {len(shown)}" if len(shown) < len(result.calls) else ""
    lines = [f"Tool calls this run made ({len(result.calls)}{more}):"]
    for c in shown:
        args = ", ".join(f"{k}={v!r}" for k, v in c.args.items())
        outcome = ("ok" if c.ok else "failed") if c.method == "MCP" else \
            (f"HTTP {c.status}" if c.status is not None else "not sent")
        if c.write and c.outcome in ("replayed", "unknown", "refused"):
            outcome += f" (write {c.outcome})"
        tail = f": {c.error}" if c.error and not c.ok else ""
        lines.append(f"- line {c.line}: {c.tool}({args}) -> {outcome}{tail}"[:300])
    return "\n".join(lines)


def _failure_text(answer: RunAnswer) -> str:
    error = answer.error or {}
    result = answer.result
    sections: list[str] = []
    if result is not None and result.answer.strip():
        printed = result.answer.strip()
        sections.append("It printed before failing:\n" + (printed[:2000] + ("..." if len(printed) > 2000 else "")))
    sections.append(_calls_summary(result))
    sections.append(_writes_line(result).strip())
    blamed = answer.blamed
    if blamed is not None:
        reason = (error.get("attribution") or {}).get("reason")
        why = f" ({reason})" if reason else ""
        sections.append(f"The error is attributed to the tool `{blamed.name}`{why}. Its full protocol:\n\n"
                        + (error.get("protocol") or render_full(blamed)).strip())
        seen = error.get("response")
        if seen:
            lines = [f"What `{blamed.name}` really returned in this run (use these keys):"]
            if seen.get("shape"):
                lines.append(f"shape: {seen['shape']}")
            if seen.get("excerpt"):
                lines.append(f"excerpt: {seen['excerpt']}")
            sections.append("\n".join(lines))
    elif error.get("type") not in _NO_TOOL and result is not None:
        sections.append("No tool is at fault: the error is in the program's own logic.")
    details = "\n\n".join(s.strip() for s in sections if s and s.strip())
    if result is None and error.get("type") in ("NoProgram", "CallBudget"):
        described = f"Error: {error['type']}: {error.get('message') or ''}"  # nothing ran: no line, no hint
    else:
        described = describe_error(error, answer.program)
    head, then = "The program failed.", _AGAIN
    if result is None and error.get("type") == "CallBudget":
        # Another call would be refused the same way: say what can be done, never "call again".
        head, then = "The program was not run.", f"No program can run here any more: {answer.hint or _NOTHING_LEFT}."
    elif error.get("type") == "CallBudget" and answer.budget_left is not None:
        then = (f"The budget of this session is spent: {_NOTHING_LEFT}." if answer.budget_left <= 0 else
                f"Only {answer.budget_left} tool calls are left in this session's budget: a corrected program must "
                "make fewer, or answer with what this one printed.")
    return prompts.render("serve_failure", head=head, error=described, details=details, then=then)


_AGAIN = "Fix the cause and call run_program again with the complete corrected program. Keep what worked."
_NOTHING_LEFT = "answer with what you have, or ask the user to start a new session"
