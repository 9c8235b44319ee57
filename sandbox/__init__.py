"""Running programs: the sandbox backends, the host-side tool gateway, and ``run``.

    from sandbox import run, Limits
    result = run(program, tools=[collection], limits=Limits(timeout=20), sandbox="local")
    print(result.ok, result.answer, [c.tool for c in result.calls])

Names are imported lazily so that ``import sandbox.inside.runner`` (stdlib-only) or
``import sandbox.api`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY: dict[str, str] = {
    "run": "sandbox.execute",
    "arun": "sandbox.execute",
    "get_backend": "sandbox.execute",
    "Limits": "sandbox.api",
    "SessionLimits": "sandbox.api",
    "open_session": "sandbox.session.open",
    "Session": "sandbox.session.open",
    "Toolset": "sandbox.api",
    "ExecutionResult": "sandbox.api",
    "ToolCall": "sandbox.api",
    "ErrorInfo": "sandbox.api",
    "Backend": "sandbox.api",
    "LocalBackend": "sandbox.local.backend",
    "Gateway": "sandbox.gateway.core",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
