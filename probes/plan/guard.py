"""The scope guard: the one check every request of a probe that may write passes, at the gateway,
before it is sent and before each redirect would send it again.

Probing hands its toolset a write policy (``sandbox.gateway.writes.WritePolicy("allow", guard=...)``): the
gateway asks the guard about every call whose tool may write (``protocols.writes.judge``), the
planned request (``hop`` 0) and every redirect that would repeat it with its method kept (307/308,
or 301/302 of a PUT/PATCH/DELETE; ``hop`` n). What the guard refuses is not sent: a refused hop
ends the call there, the API's redirect answer is the call's answer. The rules:

- **A write is sent only as a step of the write plan** (``probes.plan.steps``): the step being sent now,
  with exactly the arguments the plan filled in, to the path they make. Anything else that may
  write -- another tool, other arguments, a model-written program's call -- is refused. Its
  path-like arguments (``path``, ``destination``) lie inside the pinned roots (``--scope
  path=DIR``), after ``.`` and ``..`` are resolved.
- **A read by POST** that the probe recognised by its name (``probes.plan.postreads.read_evidence``) is
  sent only when every value its path names is *known*: pinned by ``--scope``, or created or named
  by this probe. Should the recognition be wrong and the POST write after all, it writes in the
  scope. One marked read-only (the spec, ``--read-only``) is a read like a GET.
- **A redirect hop** of a write goes only where the write could have gone itself: to the same
  path (a trailing slash aside), or under a *root* of the scope -- the path of a pinned object or
  of one this probe created (``/buckets/throwaway``, ``/posts/atc-probe-1f2e``). A delete follows
  a redirect only to the object it deletes; a read by POST only to its own path. A target whose
  path climbs (``..``) or hides a slash in a segment (``%2F``) is refused, as is one on another
  origin (the transport refuses those anyway). The gateway shows the guard a hop's URL without
  its query (it may hold a credential), so a request that sends arguments in its query follows no
  redirect that keeps its method: the new query may name other objects.

Paths are compared segment by segment after percent-decoding, relative to the API's base URL.
Everything the guard refused is kept (``refusals``) for the report.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote, urlsplit

from probes.plan.scope import Scope, outside_roots
from protocols import origins
from protocols.model import Tool
from protocols.writes import READ_METHODS
from sandbox.api import Toolset
from sandbox.gateway.writes.ledger import canonical
from sandbox.gateway.writes.policy import WritePolicy, WriteRequest, Writes

__all__ = ["ScopeGuard", "guarded_toolset", "filled_path", "Segments"]

Segments = tuple[str, ...]
_PARAM = re.compile(r"\{([^{}/]+)\}")
_CLIMBS = "the target path may climb out (a '.' or '..' segment, or an encoded slash in one)"
_QUERY = ("the request names things in its query, and a redirect's query is not shown to the guard "
          "(it may name other objects): not followed")


def _queried(tool: Tool, args: Mapping[str, Any]) -> bool:
    """Whether the request sends arguments in its query string."""
    return any((b := tool.bindings.get(name)) is not None and b.location == "query" for name in args)


def filled_path(tool: Tool, args: Mapping[str, Any]) -> tuple[Segments, list[int]] | None:
    """The decoded segments of ``tool``'s path with ``args`` filled in, and the indexes of the
    segments that hold a parameter; None when a path parameter has no value."""
    wire = {b.name or p: p for p, b in tool.bindings.items() if b.location == "path"}
    segments: list[str] = []
    params: list[int] = []
    for seg in [s for s in tool.path.split("/") if s]:
        names = _PARAM.findall(seg)
        for name in names:
            pname = wire.get(name, name)
            if pname not in args:
                return None
            seg = seg.replace("{" + name + "}", str(args[pname]))
        if names:
            params.append(len(segments))
        segments.append(seg)
    return tuple(segments), params


def _segments(url_path: str) -> Segments:
    return tuple(unquote(s) for s in url_path.split("/") if s)


def _under(path: Segments, root: Segments) -> bool:
    return bool(root) and path[: len(root)] == root


@dataclass
class _Sending:
    """The write step being sent now: its tool, canonical arguments and path."""

    tool: str
    args: str
    path: Segments | None
    delete: bool


@dataclass
class ScopeGuard:
    """The guard of one probe (see the module docstring). ``reads`` names the tools probed as reads
    although their method may write (tool -> the evidence); ``base_of`` gives a tool's base URL."""

    scope: Scope
    tools: Mapping[str, Tool]
    base_of: Callable[[str], str | None]
    reads: dict[str, str] = field(default_factory=dict)
    #: Of ``reads``, those recognised by name only (not marked read-only): their paths stay in the scope.
    guessed: set[str] = field(default_factory=set)
    #: Values a path may name: the pins, and what this probe created or named (as text).
    known: set[str] = field(default_factory=set)
    #: Paths (decoded segments, relative to the base URL) under which a redirected write may go.
    roots: list[Segments] = field(default_factory=list)
    #: What the guard refused: ``{"tool", "method", "url", "hop", "reason"}``.
    refusals: list[dict[str, Any]] = field(default_factory=list)
    _sending: _Sending | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.known |= {str(v) for _, v in self.scope.pins}

    # -- what the probe tells it -----------------------------------------------------------------

    def know(self, value: Any) -> None:
        """``value`` names something this probe created or named: a path may name it."""
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value) != "":
            with self._lock:
                self.known.add(str(value))

    @contextmanager
    def sending(self, tool: Tool, args: dict[str, Any], *, delete: bool = False) -> Iterator[None]:
        """While a step of the write plan is sent: that request (and no other write) may go."""
        filled = filled_path(tool, args) if tool.method.upper() != "MCP" else None
        path = filled[0] if filled is not None else None
        with self._lock:
            if filled is not None:
                for root in self._anchors(*filled):
                    if root not in self.roots:
                        self.roots.append(root)
            self._sending = _Sending(tool.name, canonical(args), path, delete)
        try:
            yield
        finally:
            with self._lock:
                self._sending = None

    def _anchors(self, path: Segments, params: list[int]) -> list[Segments]:
        """The paths of the objects a step names that are pinned or this probe's: the path up to
        each parameter that holds a known value (``/buckets/throwaway``, then its item)."""
        return [path[: i + 1] for i in params if path[i] in self.known]

    # -- the check ---------------------------------------------------------------------------------

    def __call__(self, request: WriteRequest) -> str | None:
        with self._lock:
            reason = self._check(request)
            if reason is not None:
                self.refusals.append({"tool": request.tool, "method": request.method, "url": request.url,
                                      "hop": request.hop, "reason": reason})
        return reason

    def _check(self, request: WriteRequest) -> str | None:
        tool = self.tools.get(request.tool)
        if tool is None:
            return f"{request.tool} is not a tool of this probe"
        mcp = tool.method.upper() == "MCP"
        if request.tool in self.reads:
            return self._read(tool, request, mcp)
        sending = self._sending
        if sending is None or sending.tool != request.tool:
            return (f"{request.tool} is not the step of the write plan being sent: a probe sends only the "
                    "writes of its plan")
        if request.hop == 0:
            if sending.args != canonical(request.args):
                return "its arguments are not the ones the write plan filled in"
            stray = outside_roots(self.scope, request.args)
            if stray is not None:
                return f"{stray!r} is outside the scope's roots (--scope): never written"
        if mcp:
            return None if request.hop == 0 else "an MCP call is never redirected"
        found = self._relative(tool, request.url)
        if isinstance(found, str):
            return found
        target, strange = found
        if request.hop == 0:
            return None if target == sending.path else "it goes to another path than the step's"
        if strange:
            return _CLIMBS
        if _queried(tool, request.args):
            return _QUERY
        if sending.path is not None and target == sending.path:
            return None
        if sending.delete:
            return ("a delete follows a redirect only to the object it deletes "
                    f"(/{'/'.join(sending.path or ())})")
        if any(_under(target, root) for root in self.roots):
            return None
        return ("the target is outside the scope: under no object pinned by --scope or created by this probe"
                + (f" ({', '.join('/' + '/'.join(r) for r in self.roots)})" if self.roots else ""))

    def _read(self, tool: Tool, request: WriteRequest, mcp: bool) -> str | None:
        """A read by POST: every value its path names is known; a redirect only to its own path."""
        if mcp:
            return None if request.hop == 0 else "an MCP call is never redirected"
        filled = filled_path(tool, request.args)
        if filled is None:
            return "a path parameter has no value"
        path, params = filled
        unknown = [path[i] for i in params if path[i] not in self.known] if request.tool in self.guessed else []
        if unknown:
            return (f"a read by POST ({self.reads[request.tool]}) whose path names {unknown[0]!r}, which is neither "
                    "pinned by --scope nor created by this probe: should the POST write after all, it would write "
                    "outside the scope")
        found = self._relative(tool, request.url)
        if isinstance(found, str):
            return found
        target, strange = found
        if request.hop == 0:
            return None if target == path else "it goes to another path than its arguments make"
        if _queried(tool, request.args):
            return _QUERY
        if not strange and target == path:
            return None
        return "a read by POST follows a redirect that keeps its method only to its own path"

    def _relative(self, tool: Tool, url: str) -> tuple[Segments, bool] | str:
        """The decoded path of ``url`` below the API's base URL, and whether a segment of it is
        strange (``.``, ``..``, or an encoded slash: a path that may climb out); or why it is
        outside the API."""
        base = (self.base_of(tool.name) or "").rstrip("/")
        if base.lower().startswith(("http://", "https://")) and not origins.same_origin(url, base):
            return "the target is on another origin"
        decoded = _segments(urlsplit(url).path)
        strange = any(s in (".", "..") or "/" in s or "\\" in s for s in decoded)
        prefix = _segments(urlsplit(base).path) if base else ()
        if decoded[: len(prefix)] != prefix:
            return "the target is outside the API's base path"
        return decoded[len(prefix):], strange

    def to_list(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self.refusals]



def guarded_toolset(toolset: Toolset, guard: ScopeGuard) -> Toolset:
    """``toolset`` whose gateways ask ``guard`` about every call that may write (a write policy
    that allows what the guard passes and keeps no ledger: a probe keeps its own account). A tool
    the probe reads by POST because it is marked read-only is asked about too: the marking vouches
    for the operation, not for where a redirect that keeps the POST would send it."""
    collections = []
    for collection in toolset.collections:
        tools = [replace(t, read_only=None) if t.name in guard.reads and t.read_only
                 and t.method.upper() not in READ_METHODS else t for t in collection.tools]
        collections.append(replace(collection, tools=tools) if tools != collection.tools else collection)
    return replace(toolset, collections=collections,
                   writes=Writes(WritePolicy("allow", guard=guard), ledger=None))
