"""The one exception tree of atc, re-exported from the bottom layer.

The tree lives in ``protocols/errors.py`` so that every layer (``protocols`` <- ``sandbox`` <-
``atc`` <- ``probes``) can raise and catch the same classes without importing upward; this module
is the public name users know (``from atc.errors import ToolError``). See that module's docstring
for the tree itself.
"""

from __future__ import annotations

from protocols.errors import (
    AtcError,
    CallBudget,
    ConfigError,
    MemoryLimit,
    ModelBudget,
    ModelError,
    NotFound,
    OutputLimit,
    ProtocolError,
    SandboxError,
    SessionEnded,
    Timeout,
    ToolError,
    UsageError,
    exit_code_for,
)

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
