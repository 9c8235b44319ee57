"""The one decision "may the prober call this tool?", in one function so that every source of tools
(HTTP specs, live MCP servers) is judged in one place.

Probing sends requests nobody asked for, so only calls that read are safe. What reads is the one
rule the runtime uses too (``protocols.writes``: GET/HEAD/OPTIONS unless the name announces a
change, MCP tools annotated ``readOnlyHint``, and whatever the spec or the user marked
read-only). ``--allow-unsafe`` lifts it (the scope guard then bounds every write).
"""

from __future__ import annotations

from dataclasses import dataclass

from protocols.model import Collection, Tool
from protocols.writes import CHANGE_WORDS, READ_METHODS, judge

__all__ = ["Safety", "call_safety", "SAFE_METHODS", "DESTRUCTIVE_WORDS"]

SAFE_METHODS = READ_METHODS
#: Words that announce a change (``protocols.writes.CHANGE_WORDS``).
DESTRUCTIVE_WORDS = CHANGE_WORDS


@dataclass(frozen=True)
class Safety:
    """``safe``: the prober may call the tool; ``reason`` says why not (or why it may)."""

    safe: bool
    reason: str


def call_safety(tool: Tool, collection: Collection | None = None, *, allow_unsafe: bool = False) -> Safety:
    """Whether the prober may send ``tool`` requests of its own making."""
    if allow_unsafe:
        return Safety(True, "--allow-unsafe")
    verdict = judge(tool, collection)
    if not verdict.write:
        return Safety(True, verdict.reason)
    return Safety(False, f"{verdict.reason} (pass --allow-unsafe to probe it)")
