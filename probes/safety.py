"""The one decision "may the prober call this tool?", in one function so that every source of tools
(HTTP specs today, live MCP servers later) is judged in one place.

Probing sends requests nobody asked for, so only operations that read are safe: ``GET`` and
``HEAD``. A ``GET`` whose own name says it changes something (``GET /users/{id}/delete``, an
operation called ``cancelOrder``) is not trusted either: some APIs do that. An MCP tool is safe
only when its annotations say ``readOnlyHint`` (and not ``destructiveHint``); MCP's default for a
tool without annotations is "may write", so that is unsafe. ``--allow-unsafe`` lifts all of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from probes.naming import words
from protocols.model import Collection, Tool

__all__ = ["Safety", "call_safety", "SAFE_METHODS", "DESTRUCTIVE_WORDS"]

SAFE_METHODS = frozenset({"GET", "HEAD"})
#: Words in an operation's name or path that announce a change, even on a GET. (Not ``archive`` or
#: ``block``: as nouns they name things one reads, a news archive, a blockchain block.)
DESTRUCTIVE_WORDS = frozenset(
    "delete remove destroy purge drop erase wipe cancel revoke terminate kill reset unsubscribe deactivate "
    "disable shutdown ban suspend truncate logout signout".split()
)


@dataclass(frozen=True)
class Safety:
    """``safe``: the prober may call the tool; ``reason`` says why not (or why it may)."""

    safe: bool
    reason: str


def _annotations(tool: Tool) -> Mapping[str, Any]:
    """MCP tool annotations, wherever the tool model keeps them (``annotations`` when the MCP
    loader records them; absent otherwise)."""
    found = getattr(tool, "annotations", None)
    return found if isinstance(found, Mapping) else {}


def _is_mcp(tool: Tool, collection: Collection | None) -> bool:
    return (collection is not None and collection.source_format == "mcp") or bool(_annotations(tool))


def call_safety(tool: Tool, collection: Collection | None = None, *, allow_unsafe: bool = False) -> Safety:
    """Whether the prober may send ``tool`` requests of its own making."""
    if allow_unsafe:
        return Safety(True, "--allow-unsafe")
    if _is_mcp(tool, collection):
        notes = _annotations(tool)
        if notes.get("readOnlyHint") is True and notes.get("destructiveHint") is not True:
            return Safety(True, "an MCP tool annotated readOnlyHint")
        return Safety(False, "an MCP tool not annotated readOnlyHint may change data (pass --allow-unsafe to probe it)")
    method = tool.method.upper()
    if method not in SAFE_METHODS:
        return Safety(False, f"{method} may change data on the server (pass --allow-unsafe to probe it)")
    literal = [seg for seg in tool.path.split("/") if seg and not seg.startswith("{")]
    said = set(words(tool.name)) | {w for seg in literal for w in words(seg)}
    hit = sorted(said & DESTRUCTIVE_WORDS)
    if hit:
        return Safety(False, f"a {method} whose name says it changes data ({hit[0]}); pass --allow-unsafe to probe it")
    return Safety(True, f"{method} only reads")
