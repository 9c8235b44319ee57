"""What counts as a write: the one rule the runtime (write ledger, write policy) and probing share.

A call is a **write** unless it is known to only read:

1. a marking wins: ``Tool.read_only`` is ``True`` (read-only) or ``False`` (a write), set by the
   spec (the OpenAPI operation extension ``x-atc-read-only: true|false``, kept on import) or by the
   user (``atc tools import SPEC --read-only PATTERN``; ``--writes-ops PATTERN`` marks the other
   way);
2. an MCP tool reads only when annotated ``readOnlyHint: true`` (and not ``destructiveHint: true``):
   MCP's own default for an unannotated tool is "may change things";
3. an HTTP operation reads when its method is GET, HEAD or OPTIONS, unless its name or a literal
   segment of its path announces a change (``GET /orders/{id}/cancel``, ``deleteUser``): some APIs
   change data on a GET, and a rule that trusted the method would let them through.

Everything else (POST, PUT, PATCH, DELETE, any other method) is a write. Many real APIs read by
POST (``POST /work_pools/filter``, ``POST /search``); the runtime does not guess those (a guess
that is wrong sends a write under ``--writes deny``): ``looks_like_read`` only names the evidence,
so that a user can mark them and probing can treat them as reads (shown in its dry run).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from protocols.model import Collection, Tool

__all__ = ["READ_METHODS", "CHANGE_WORDS", "READ_WORDS", "READ_ONLY_EXTENSION", "Verdict", "judge", "is_write",
           "looks_like_read", "name_words", "mark", "unmatched", "marked_count"]

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Words in an operation's name or path that announce a change, even on a GET. (Not ``archive`` or
#: ``block``: as nouns they name things one reads, a news archive, a blockchain block.)
CHANGE_WORDS = frozenset(
    "delete remove destroy purge drop erase wipe cancel revoke terminate kill reset unsubscribe deactivate "
    "disable shutdown ban suspend truncate logout signout".split()
)
#: The last word of a POST's path (or the first of its operation name) that names a query rather
#: than a thing made: ``POST /work_pools/filter``, ``POST /flows/count``, ``searchTracks``.
READ_WORDS = frozenset("filter filters search query count paginate lookup find list browse autocomplete suggest "
                       "match read get fetch retrieve aggregate stats".split())
#: The OpenAPI operation extension that marks an operation: ``true`` reads only, ``false`` writes.
READ_ONLY_EXTENSION = "x-atc-read-only"

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SPLIT = re.compile(r"[^a-z0-9]+")


def name_words(name: str) -> list[str]:
    """``cancelOrder`` / ``top-tracks`` / ``read_work_pools`` -> lower-case words."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", str(name))
    return [w for w in _SPLIT.split(_CAMEL.sub(r"\1_\2", name).lower()) if w]


@dataclass(frozen=True)
class Verdict:
    """``write``: a call of the tool may change data; ``reason`` is the evidence, in words a dry run
    or ``atc tools show`` prints; ``marked``: a marking (spec or user) decided, not the rule."""

    write: bool
    reason: str
    marked: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"write": self.write, "reason": self.reason, "marked": self.marked}


def _notes(tool: Tool) -> Mapping[str, Any]:
    return tool.annotations if isinstance(tool.annotations, Mapping) else {}


def _is_mcp(tool: Tool, collection: Collection | None) -> bool:
    """An MCP tool: called on an MCP server, listed by one (a ``tools/list`` read from a file), or
    carrying MCP annotations (only the MCP importer records them)."""
    if tool.method.upper() == "MCP" or bool(_notes(tool)):
        return True
    return collection is not None and (collection.kind == "mcp" or collection.source_format == "mcp")


def _literal_words(tool: Tool) -> set[str]:
    literal = [seg for seg in tool.path.split("/") if seg and not seg.startswith("{")]
    return set(name_words(tool.name)) | {w for seg in literal for w in name_words(seg)}


def judge(tool: Tool, collection: Collection | None = None) -> Verdict:
    """Is a call of ``tool`` a write, and why (see the module docstring for the rule)."""
    if tool.read_only is not None:
        return Verdict(not tool.read_only, "marked read-only" if tool.read_only else "marked as a write", True)
    if _is_mcp(tool, collection):
        notes = _notes(tool)
        if notes.get("readOnlyHint") is True and notes.get("destructiveHint") is not True:
            return Verdict(False, "an MCP tool annotated readOnlyHint")
        return Verdict(True, "an MCP tool not annotated readOnlyHint may change data")
    method = tool.method.upper()
    if method not in READ_METHODS:
        return Verdict(True, f"{method} may change data")
    hit = sorted(_literal_words(tool) & CHANGE_WORDS)
    if hit:
        return Verdict(True, f"a {method} whose name says it changes data ({hit[0]})")
    return Verdict(False, f"{method} only reads")


def is_write(tool: Tool, collection: Collection | None = None) -> bool:
    """``judge(tool).write``: may a call of ``tool`` change data?"""
    return judge(tool, collection).write


def looks_like_read(tool: Tool) -> str | None:
    """Evidence that a POST (or other unmarked write by method) only reads, or None: the last literal
    segment of its path names a query (``/filter``, ``/search``, ``/count``...), or its operation
    name starts with a reading verb (``read_``, ``search_``, ``count_``...), and nothing in its name
    or path announces a change. Never used by the runtime's rule (a wrong guess would send a write
    under ``--writes deny``); probing and ``atc tools show`` show it."""
    if tool.read_only is not None or tool.method.upper() in READ_METHODS or tool.method.upper() in (
            "MCP", "DELETE", "PUT", "PATCH"):
        return None
    said = _literal_words(tool)
    if said & CHANGE_WORDS:
        return None
    literal = [seg for seg in tool.path.split("/") if seg and not seg.startswith("{")]
    last = name_words(literal[-1]) if literal else []
    if last and last[-1] in READ_WORDS:
        return f"{tool.method.upper()} {tool.path}: the path ends in {last[-1]!r}, which names a query"
    first = name_words(tool.name)[:1]
    if first and first[0] in READ_WORDS:
        return f"{tool.method.upper()} {tool.path}: the operation's name starts with {first[0]!r}"
    return None


def mark(collection: Collection, read_only: Iterable[str] = (), writes: Iterable[str] = ()) -> list[str]:
    """Mark the tools of ``collection`` whose name (or ``METHOD /path``) matches one of the glob
    patterns: ``read_only`` ones read only, ``writes`` ones write (a later pattern wins over an
    earlier marking). Returns the names of the tools marked. A pattern that matches nothing is the
    caller's to report (``unmatched``)."""
    marked: list[str] = []
    for patterns, value in ((list(read_only), True), (list(writes), False)):
        for tool in collection.tools:
            if any(_matches(tool, p) for p in patterns):
                tool.read_only = value
                marked.append(tool.name)
    return list(dict.fromkeys(marked))


def unmatched(collection: Collection, patterns: Iterable[str]) -> list[str]:
    """The patterns that match no tool of ``collection``."""
    return [p for p in patterns if not any(_matches(t, p) for t in collection.tools)]


def _matches(tool: Tool, pattern: str) -> bool:
    pattern = pattern.strip()
    if " " in pattern:  # "POST /work_pools/*/filter"
        method, _, path = pattern.partition(" ")
        return fnmatch.fnmatchcase(tool.method.upper(), method.upper()) and fnmatch.fnmatchcase(tool.path, path.strip())
    return fnmatch.fnmatchcase(tool.name, pattern) or fnmatch.fnmatchcase(f"{tool.collection}.{tool.name}", pattern)


def marked_count(collection: Collection) -> int:
    return sum(1 for t in collection.tools if t.read_only is not None)
