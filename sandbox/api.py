"""The sandbox seam: limits in, an ``ExecutionResult`` out, and the ``Backend`` interface.

The result dataclasses mirror ``atc run --json`` of ``shared/interface.md`` field for field;
``to_dict()`` is that JSON. Extra, non-contract detail (``col``, ``attribution``,
``isolation``) is additive.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from protocols.errors import ConfigError, UsageError
from protocols.model import Collection, Tool
from sandbox.gateway.functions.results import jsonable

if TYPE_CHECKING:
    from sandbox.gateway.writes.policy import Writes

__all__ = ["Limits", "Credentials", "ToolCall", "ErrorInfo", "ExecutionResult", "Toolset", "Backend", "ERROR_TYPES",
           "FAILURE_KINDS", "VALIDATION_MODES", "SessionLimits", "SandboxSession", "SessionBackend"]

#: The ``error.type`` values that are not Python exception class names.
ERROR_TYPES = ("Timeout", "MemoryLimit", "CallBudget", "OutputLimit", "SandboxError", "Cancelled")
#: Values of ``ToolCall.failure``: refused before sending (``arguments``, ``config``, ``budget``),
#: sent without an answer (``connect``, ``timeout``, ``request``), answered unusably
#: (``response``: too large, undecodable), or answered with an error (``http``, ``redirect``; an MCP
#: server: ``tool`` for an ``isError`` result, ``protocol`` for a JSON-RPC error or a malformed answer);
#: ``unrecorded``: a replay (``--replay``) has no recorded answer for the call.
#: ``refused``: a write refused before it was sent (the write policy, an approver, a guard, or an
#: earlier identical write whose outcome is unknown: ``sandbox.gateway.writes``).
FAILURE_KINDS = ("arguments", "config", "budget", "connect", "timeout", "request", "response", "http", "redirect",
                 "tool", "protocol", "unrecorded", "refused")
#: How the gateway checks a call's arguments against the tool's schema: ``strict`` refuses a call
#: that does not conform; ``warn`` sends it and records what failed in ``ToolCall.warnings``;
#: ``off`` sends it unchecked.
VALIDATION_MODES = ("strict", "warn", "off")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one program run. ``timeout`` is wall clock for the whole program."""

    timeout: float = 60.0
    memory_mb: int = 512
    max_calls: int = 100
    call_timeout: float = 30.0
    max_response_bytes: int = 5_000_000
    max_output_bytes: int = 1_000_000
    max_processes: int = 64
    max_file_bytes: int = 16_000_000
    cpu_seconds: int | None = None


#: ``KEY=env:VAR`` of the command line: KEY a security scheme or a placement (``sandbox.gateway.http.credentials``).
_CREDENTIAL = re.compile(r"^(?P<key>[^=]+)=env:(?P<var>[A-Za-z_][A-Za-z0-9_]*)$")


@dataclass(frozen=True, eq=False)
class Credentials(Mapping[str, str]):
    """Where each secret of a run is read on the host: KEY -> the name of an environment variable.

    KEY is a security scheme of a spec or a placement (``header:NAME``, ``bearer``...), maybe
    prefixed by a collection (``sandbox.gateway.http.credentials``). The value itself is read only when a
    request is built, in the gateway, and never crosses into the sandbox. This is the one place
    that parses ``env:VAR``: the edges make a ``Credentials`` (``parse`` for the command line's
    words, ``of`` for the Python API's ``{KEY: "env:VAR"}``) and pass it down. A mapping, so that
    ``dict(credentials)`` and ``credentials == {...}`` work.
    """

    pairs: tuple[tuple[str, str], ...] = ()

    def __getitem__(self, key: str) -> str:
        for name, var in self.pairs:
            if name == key:
                return var
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self.pairs))

    def __len__(self) -> int:
        return len(dict(self.pairs))

    def __repr__(self) -> str:
        return f"Credentials({dict(self.pairs)!r})"

    @staticmethod
    def reference(value: str) -> str | None:
        """The variable ``env:VAR`` names, or None when ``value`` is not an ``env:`` reference."""
        return value[4:] if value.startswith("env:") else None

    @classmethod
    def of(cls, given: Mapping[str, str] | None) -> Credentials:
        """``given`` as ``Credentials``: ``{KEY: "env:VAR"}`` (a bare ``VAR`` is taken as the
        variable too), or a ``Credentials`` as it is. A later key replaces an earlier one."""
        if isinstance(given, Credentials):
            return given
        latest = {key: cls.reference(source) or source for key, source in (given or {}).items()}
        return cls(tuple(latest.items()))

    @classmethod
    def parse(cls, items: Iterable[str]) -> Credentials:
        """The credentials of the command line's ``KEY=env:VAR`` words (``UsageError`` for any other)."""
        found: dict[str, str] = {}
        for item in items:
            m = _CREDENTIAL.match(item)
            if not m:
                raise UsageError(f"--credential {item!r} is not SCHEME=env:VAR (or PLACEMENT=env:VAR)",
                                 hint="examples: --credential api_key=env:TMDB_TOKEN, "
                                      "--credential header:Authorization=env:API_AUTH")
            found[m.group("key")] = m.group("var")
        return cls(tuple(found.items()))

    def merged(self, other: Mapping[str, str] | None) -> Credentials:
        """These credentials with ``other``'s on top (the same KEY: ``other``'s variable)."""
        return Credentials.of({**self, **Credentials.of(other)})


@dataclass(frozen=True)
class SessionLimits:
    """What bounds a sandbox session as a whole (``sandbox/session/interpreter.py``), on top of its
    ``Limits``: there ``timeout`` bounds each snippet, ``memory_mb`` the session's processes
    together, ``max_calls`` the tool calls of all its snippets, ``cpu_seconds`` its CPU time (None:
    ``exec_seconds`` plus 2 s). ``exec_seconds`` is the time its snippets may run in all;
    ``idle_seconds`` how long an open session may go unused and ``lifetime_seconds`` how long it
    may stay open at all before it is closed for its owner (an abandoned session is reaped)."""

    exec_seconds: float = 600.0
    idle_seconds: float = 600.0
    lifetime_seconds: float = 3600.0

    def __post_init__(self) -> None:
        for name in ("exec_seconds", "idle_seconds", "lifetime_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or \
                    not math.isfinite(value):
                raise UsageError(f"SessionLimits.{name} must be a positive number of seconds, not {value!r}")

    def spawn_limits(self, limits: Limits) -> Limits:
        """The limits the session's runner is started with: its CPU time covers the whole session."""
        return replace(limits, cpu_seconds=limits.cpu_seconds or math.ceil(self.exec_seconds) + 2)


@dataclass
class ToolCall:
    """One call a program made, as the gateway saw it. ``status`` is None when no HTTP response
    came (invalid arguments, budget exhausted, no connection, timeout), and for every call of an
    MCP tool (``method`` ``"MCP"``, ``path`` the tool's name on its server). ``response`` is what the
    API returned (kept for attribution and reflection; not part of the contract JSON unless asked
    for), with the host's secrets already taken out; ``redacted`` counts the secrets taken out of
    it. ``failure`` says why a failed call failed (``FAILURE_KINDS``); ``redirects`` lists the
    redirect responses on the way (``{"status", "location", "followed", "reason"?}``; a redirect
    that was not followed ends the call); ``warnings`` are what validation found in ``warn``
    mode (the call went out anyway); ``headers`` are the response headers (redacted; not in the
    contract JSON unless asked for). ``summarized`` names what the log keeps of this call only as a
    bounded summary, ``args``, ``response`` or ``headers``, with the bytes they held in the host
    (counted up to 64 times the summary's limit: at least that many)
    (large ones: the first and last items of long lists, the first keys of wide objects, the head
    of long strings; ``sandbox.jsonbounds.summarize``); the program itself got them whole."""

    tool: str
    args: dict[str, Any]
    method: str
    path: str
    status: int | None
    ok: bool
    line: int | None
    duration_ms: float
    col: int | None = None
    error: str | None = None
    response: Any = None
    redacted: int = 0
    failure: str | None = None
    redirects: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    headers: dict[str, str] | None = None
    summarized: dict[str, int] = field(default_factory=dict)
    #: the call may change data (``protocols.writes``); for writes, ``outcome`` is one of
    #: ``sandbox.gateway.writes.OUTCOMES``: ``done``, ``failed``, ``unknown``, ``replayed``, ``refused``
    write: bool = False
    outcome: str | None = None

    @property
    def sent(self) -> bool:
        """Did a request leave the host (even if it got no answer)? A replayed write did not."""
        if self.outcome in ("replayed", "refused"):
            return False
        return self.status is not None or self.ok or \
            self.failure in ("timeout", "connect", "request", "response", "tool", "protocol")

    def to_dict(self, *, with_response: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "tool": self.tool,
            "args": self.args,
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "ok": self.ok,
            "line": self.line,
            "col": self.col,
            "duration_ms": round(self.duration_ms, 3),
            "error": self.error,
            "redacted": self.redacted,
            "failure": self.failure,
            "redirects": self.redirects,
            "warnings": self.warnings,
            "summarized": self.summarized,
            "write": self.write,
        }
        if self.write:
            d["outcome"] = self.outcome
        if with_response:
            d["response"] = self.response
            d["headers"] = self.headers
        return d


@dataclass
class ErrorInfo:
    """Why a run failed. ``type`` is the Python exception class name or one of ``ERROR_TYPES``.
    ``tool`` is the tool the failure is attributed to (None: the program's own logic).
    ``attribution`` explains the choice and carries the condensed response of that tool:
    ``{"reason": str, "call_index": int | None, "response_shape": {...} | None, "excerpt": str | None}``."""

    type: str
    message: str
    line: int | None = None
    tool: str | None = None
    traceback: str = ""
    col: int | None = None
    code: str | None = None
    attribution: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "message": self.message,
            "line": self.line,
            "tool": self.tool,
            "traceback": self.traceback,
            "col": self.col,
            "code": self.code,
            "attribution": self.attribution,
        }


@dataclass
class ExecutionResult:
    """One run: ``answer`` is what the program printed; ``value`` what it handed to
    ``final_answer(value)`` (JSON data; ``answered`` tells ``None`` from no call at all;
    ``value_line`` is the line of that call), checked against an answer schema by ``atc.loop.answers``
    when one was asked for."""

    ok: bool
    answer: str
    sandbox: str
    duration_ms: float
    error: ErrorInfo | None = None
    calls: list[ToolCall] = field(default_factory=list)
    stderr: str = ""
    isolation: list[str] = field(default_factory=list)
    value: Any = None
    answered: bool = False
    value_line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "answer": self.answer,
            "sandbox": self.sandbox,
            "duration_ms": round(self.duration_ms, 3),
            "error": self.error.to_dict() if self.error else None,
            "calls": [c.to_dict() for c in self.calls],
            "stderr": self.stderr,
            "isolation": self.isolation,
            "value": _json(self.value),
            "answered": self.answered,
        }


def _json(value: Any) -> Any:
    """A typed value (``atc.run(..., answer=Model)``) as its JSON data; JSON data as it is."""
    if value is None or isinstance(value, str | int | float | bool | list | dict):
        return value
    return jsonable(value, 1 << 24)


@dataclass
class Toolset:
    """The tools in play for one run, and how to reach them.

    ``base_url`` overrides every collection's server; ``base_urls`` overrides it per collection
    (collection name -> URL; wins over ``base_url``). ``credentials`` maps a security scheme name,
    or a placement such as ``header:Authorization`` (``sandbox.gateway.http.credentials``), to where its
    secret is read on the host (``Credentials``: a ``{KEY: "env:VAR"}`` given here is parsed
    into one); the value itself is looked up only when a request is
    built, in the gateway, and never crosses into the sandbox. ``validation`` is the mode of
    every collection (``VALIDATION_MODES``) unless ``validations`` names one for it.
    """

    collections: list[Collection]
    base_url: str | None = None
    credentials: Mapping[str, str] = field(default_factory=Credentials)
    base_urls: dict[str, str] = field(default_factory=dict)
    validation: str = "strict"
    validations: dict[str, str] = field(default_factory=dict)
    #: Wrappers of every tool call's exchange with its API (``sandbox.gateway.taps``: record, replay,
    #: tracing), outermost first. Not part of what the tools are: left out of comparisons.
    taps: tuple[Any, ...] = field(default=(), compare=False)
    #: The write policy and the task's write ledger (``sandbox.gateway.writes.Writes``) that every gateway
    #: of the task's runs shares; None: writes are sent as asked and recorded per call only.
    writes: Writes | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        self.credentials = Credentials.of(self.credentials)
        self._tools: dict[str, Tool] = {}
        self._owner: dict[str, Collection] = {}
        _refuse_shared_names(self.collections)
        for c in self.collections:
            for t in c.tools:
                if t.name in self._tools and self._owner[t.name].name != c.name:
                    raise ConfigError(
                        f"tool name {t.name!r} is in both collections {self._owner[t.name].name!r} and {c.name!r}",
                        hint="use one of them per run, or re-import one with another --name and rename the tool",
                    )
                self._tools[t.name] = t
                self._owner[t.name] = c
        names = {c.name for c in self.collections}
        for mode in [self.validation, *self.validations.values()]:
            if mode not in VALIDATION_MODES:
                raise UsageError(f"unknown validation mode {mode!r}", hint="use strict, warn or off")
        for name in [*self.base_urls, *self.validations]:
            if name not in names:
                raise UsageError(f"no collection {name!r} in this run",
                                 hint=f"collections: {', '.join(sorted(names)) or '(none)'}")

    def base_url_for(self, tool: str) -> str | None:
        """The server URL of ``tool``'s API in this run: the collection's override, the run's
        override, else the tool's or its collection's first server (None: none known). An
        override that is a bare origin keeps the path of a RELATIVE spec server (``/api/v3`` with
        ``http://127.0.0.1:8080`` is ``http://127.0.0.1:8080/api/v3``): a relative server is
        relative to wherever the API runs, which is what the override says."""
        collection = self._owner[tool]
        explicit = self.base_urls.get(collection.name) or self.base_url
        spec = next((s for s in (self._tools[tool].servers or collection.servers) if s), None)
        if not explicit:
            return spec
        if spec and not spec.lower().startswith(("http://", "https://")) and \
                urlsplit(explicit).path in ("", "/") and not urlsplit(explicit).query:
            return explicit.rstrip("/") + "/" + spec.strip("/")
        return explicit

    def validation_for(self, tool: str) -> str:
        owner = self._owner.get(tool)
        return self.validations.get(owner.name, self.validation) if owner is not None else self.validation

    @property
    def tools(self) -> dict[str, Tool]:
        return self._tools

    def collection_of(self, tool: str) -> Collection:
        return self._owner[tool]

    def names(self) -> list[str]:
        return list(self._tools)


def _source_of(collection: Collection) -> str:
    if collection.mcp_server is not None:
        return f"the MCP server {collection.mcp_server.describe()!r}"
    return repr(collection.source) if collection.source else "a collection given in code"


def _refuse_shared_names(collections: list[Collection]) -> None:
    """Two collections of one run never share a name: credentials, base URLs, validation modes
    and MCP servers are looked up by it, so a shared name would route one API's calls (or its
    key) to the other. The error names both sources."""
    seen: dict[str, Collection] = {}
    for c in collections:
        first = seen.setdefault(c.name, c)
        if first is c:
            continue
        a, b = _source_of(first), _source_of(c)
        what = f"{a} is given twice" if a == b else f"{a} and {b}"
        raise ConfigError(f"two collections of this run are named {c.name!r}: {what}",
                          hint="give each its own name: a key of its own in an mcpServers file, or "
                               "'atc tools import SOURCE --name NAME' and then --tools NAME")


@runtime_checkable
class Backend(Protocol):
    """A place to run programs. Implementations: ``LocalBackend``, ``DockerBackend``, and the
    in-process fake used by tests of upper layers. ``run`` never raises for anything the program
    does: every outcome of the program is an ``ExecutionResult``. It raises ``SandboxError`` only
    when the backend itself cannot work (engine gone, image missing)."""

    name: str

    def run(self, program: str, tools: Toolset, limits: Limits) -> ExecutionResult: ...

    def close(self) -> None: ...

    def __enter__(self) -> Backend: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class SandboxSession(Protocol):
    """One isolated interpreter whose globals survive from one ``execute`` to the next, under
    ``Limits`` and ``SessionLimits`` for the whole session (``sandbox/session/interpreter.py``). ``execute``
    returns the result of ONE snippet (its output, its calls, its error), never raises for what the
    snippet does, and raises ``SessionEnded`` once the session is over (``ended`` says why: closed,
    reaped, or a snippet that timed out, ran out of memory, spent the call budget or killed its
    interpreter). ``calls`` and ``exec_seconds`` are what the session has used so far."""

    name: str

    def execute(self, code: str) -> ExecutionResult: ...

    def close(self, reason: str = "closed") -> None: ...

    @property
    def alive(self) -> bool: ...

    @property
    def ended(self) -> str | None: ...

    @property
    def calls(self) -> int: ...

    @property
    def exec_seconds(self) -> float: ...

    @property
    def snippets(self) -> int: ...


@runtime_checkable
class SessionBackend(Protocol):
    """A backend that can keep a session: ``LocalBackend``, ``DockerBackend`` and the test fake.
    ``open_session`` raises ``SandboxError`` when no interpreter could be started."""

    name: str

    def open_session(self, tools: Toolset, limits: Limits, session: SessionLimits) -> SandboxSession: ...
