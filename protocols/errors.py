"""The one exception tree of atc (re-exported as ``atc.errors``).

::

    AtcError                      anything atc raises on purpose; the CLI prints it, never a traceback
    ├── UsageError                bad command line (exit 2)
    ├── ConfigError               missing or invalid configuration: model, credentials, store (exit 2)
    ├── ProtocolError             an unreadable or invalid tool spec; names the file and JSON pointer (exit 2)
    ├── NotFound                  a collection or tool name that is not in the store (exit 2)
    ├── ToolError                 a tool call failed: invalid arguments, HTTP error, bad response (exit 1)
    ├── SandboxError              the sandbox could not run a program, or stopped it (exit 1)
    │   ├── Timeout               wall-clock limit reached
    │   ├── MemoryLimit           memory limit reached
    │   ├── CallBudget            more tool calls than --max-calls
    │   ├── OutputLimit           the program printed more than the output cap
    │   └── SessionEnded          a sandbox session used after it ended (closed, reaped, or killed by a snippet)
    └── ModelError                the model server is unreachable, refuses, or answers garbage (exit 1)
        └── ModelBudget           the run's model budget (--max-model-calls, --max-tokens) is spent

It lives in the bottom layer and imports nothing of the project, so that every layer
(``protocols`` <- ``sandbox`` <- ``atc`` <- ``probes``) raises and catches the same classes
without importing upward; ``atc.errors`` re-exports it under the public name. Exceptions are
plain data: the context lives in attributes and the constructors have no side effects.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AtcError",
    "UsageError",
    "ConfigError",
    "ProtocolError",
    "NotFound",
    "ToolError",
    "SandboxError",
    "Timeout",
    "MemoryLimit",
    "CallBudget",
    "OutputLimit",
    "SessionEnded",
    "ModelError",
    "ModelBudget",
    "exit_code_for",
]


class AtcError(Exception):
    """Base of every error atc raises on purpose. ``exit_code`` is what the CLI exits with."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def to_dict(self) -> dict[str, Any]:
        return {"type": type(self).__name__, "message": self.message, "hint": self.hint}

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n{self.hint}"


class UsageError(AtcError):
    exit_code = 2


class ConfigError(AtcError):
    exit_code = 2


class NotFound(AtcError):
    exit_code = 2


class ProtocolError(AtcError):
    """A spec that cannot be turned into protocols.

    ``source`` is the file (or a label for in-memory input) and ``pointer`` the JSON pointer
    (RFC 6901) of the offending node, e.g. ``/paths/~1books~1{id}/get/parameters/0``.
    """

    exit_code = 2

    def __init__(
        self, message: str, *, source: str | None = None, pointer: str | None = None, hint: str | None = None
    ) -> None:
        where = ""
        if source:
            where = f"{source}"
            if pointer is not None:
                where += f" at {pointer or '/'}"
            where += ": "
        super().__init__(where + message, hint=hint)
        self.reason = message
        self.source = source
        self.pointer = pointer

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d.update(source=self.source, pointer=self.pointer)
        return d


class ToolError(AtcError):
    """A tool call that failed. ``status`` is the HTTP status, None when no request was sent."""

    def __init__(
        self,
        message: str,
        *,
        tool: str | None = None,
        status: int | None = None,
        parameter: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.tool = tool
        self.status = status
        self.parameter = parameter

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d.update(tool=self.tool, status=self.status, parameter=self.parameter)
        return d


class SandboxError(AtcError):
    pass


class Timeout(SandboxError):
    pass


class MemoryLimit(SandboxError):
    pass


class CallBudget(SandboxError):
    pass


class OutputLimit(SandboxError):
    pass


class SessionEnded(SandboxError):
    """A sandbox session that is over was asked to run a snippet. ``reason`` says how it ended."""

    def __init__(self, message: str, *, reason: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.reason = reason


class ModelError(AtcError):
    pass


class ModelBudget(ModelError):
    """No further model call is allowed: the solve spent its ``--max-model-calls`` or
    ``--max-tokens``. ``spent`` holds the usage counted so far (``llm_calls``, ``prompt_tokens``,
    ``completion_tokens``)."""

    def __init__(self, message: str, *, spent: dict[str, int] | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.spent = dict(spent or {})

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["spent"] = dict(self.spent)
        return d


def exit_code_for(exc: BaseException) -> int:
    """The CLI exit code for an exception: the class's own for AtcError, 1 for anything else."""
    return exc.exit_code if isinstance(exc, AtcError) else 1
