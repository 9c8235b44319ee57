"""The results of probing, and its settings: plain dataclasses whose ``to_dict()`` is the JSON.

``ProbeReport.to_dict()`` is ``atc probe --json`` (``shared/interface.md``)::

    {"tools": [{"name", "status": "documented"|"failed"|"skipped", "calls", "response_schema",
                "examples", "depends_on", "reason", ...}], "calls": int, ...}

The contract's fields come first; everything after them is additive detail (the round a tool was
documented in, the parameter -> field mapping, status codes seen, parameters that proved required,
model usage, where the outputs were written).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from probes.plan.scope import parse_scope
from protocols.errors import UsageError

__all__ = ["ProbeSettings", "ToolReport", "ProbeReport", "ProbeInterrupted", "STATUSES"]

STATUSES = ("documented", "failed", "skipped")


@dataclass(frozen=True)
class ProbeSettings:
    """How to probe. ``max_calls`` is the global request budget (None: ``per_tool`` times the number
    of tools probed); ``per_tool`` caps the requests spent on one tool; ``samples`` is the most
    successful responses merged per tool, and in model mode the most question/program pairs asked
    per tool and round (the paper's N); ``rounds`` is the paper's beta (chain iterations);
    ``use_llm`` False probes without a model. ``request_timeout`` bounds one request, ``timeout``
    one model-written program. ``allow_unsafe`` lets the probe send the unsafe calls of its write
    plan (``probes.plan.steps``), only under the ``scope`` pins (``(("bucket_id", "throwaway"),)``, or
    ``{"bucket_id": "throwaway"}``); ``allow_bulk`` names bulk deletes it may send; ``dry_run``
    sends nothing and reports the plan."""

    max_calls: int | None = None
    per_tool: int = 5
    samples: int = 3
    rounds: int = 4
    allow_unsafe: bool = False
    use_llm: bool = True
    request_timeout: float = 10.0
    timeout: float = 60.0
    memory_mb: int = 512
    cache: bool = True
    refresh: bool = False
    max_examples: int = 3
    scope: tuple[tuple[str, str], ...] = ()
    allow_bulk: tuple[str, ...] = ()
    dry_run: bool = False
    #: Tool patterns (a name glob or ``METHOD /path``) marked read-only for this probe (a POST that
    #: only searches: probed as a read) and marked as writes (never probed as a read).
    read_only: tuple[str, ...] = ()
    writes_op: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        scope: Any = self.scope
        if isinstance(scope, dict):
            scope = [f"{k}={v}" for k, v in scope.items()]
        elif scope and all(isinstance(x, tuple | list) and len(x) == 2 for x in scope):
            scope = [f"{k}={v}" for k, v in scope]
        object.__setattr__(self, "scope", parse_scope(list(scope or ())))
        for name in ("allow_bulk", "read_only", "writes_op"):
            value: Any = getattr(self, name)
            object.__setattr__(self, name, tuple(str(x) for x in ([value] if isinstance(value, str) else value or ())))
        if (self.scope or self.allow_bulk) and not self.allow_unsafe and not self.dry_run:
            raise UsageError("--scope and --allow-bulk only matter with --allow-unsafe (or --dry-run)",
                             hint="add --allow-unsafe to send unsafe calls under the scope, or --dry-run to see the plan")
        if self.max_calls is not None and self.max_calls < 0:
            raise UsageError("--max-calls must be 0 or more")
        if self.per_tool < 1:
            raise UsageError("--per-tool must be at least 1")
        if self.samples < 1:
            raise UsageError("--samples must be at least 1")
        if self.rounds < 1:
            raise UsageError("--rounds must be at least 1")
        if self.request_timeout <= 0 or self.timeout <= 0 or self.memory_mb <= 0:
            raise UsageError("--timeout, --request-timeout and --memory must be positive")
        if not 1 <= self.max_examples <= 10:
            raise UsageError("max_examples must be between 1 and 10")

    def budget_for(self, tools: int) -> int:
        return self.max_calls if self.max_calls is not None else self.per_tool * tools

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["scope"] = dict(self.scope)
        out["allow_bulk"] = list(self.allow_bulk)
        return out


@dataclass
class ToolReport:
    """What probing learnt about one tool.

    ``calls`` counts the requests spent on it (helper calls made on its behalf included; answers
    replayed from the cache are ``cached``, not ``calls``). ``round`` is the chain iteration that
    documented it (0: on its own; k: with helpers found by round k). ``mapping`` says where each
    argument of its first working call came from (``{"tool", "field"}`` or ``{"source"}``);
    ``status_codes`` counts the HTTP statuses seen; ``required_learned`` lists parameters the spec
    left optional that the API demanded. ``response_schema`` is the declared schema with what was
    learnt merged into it (``schema_source`` ``declared+learnt``), or the learnt one when none was
    declared (``learnt``); ``schema_notes`` are the disagreements between the two
    (``probes.results.schemas``). ``filters`` are the optional parameters that proved to filter by
    another tool's ids (``probes.arguments.filters``)."""

    name: str
    status: str = "skipped"
    calls: int = 0
    response_schema: dict[str, Any] | None = None
    examples: list[dict[str, Any]] = field(default_factory=list)
    depends_on: list[str] = field(default_factory=list)
    reason: str | None = None
    method: str = "GET"
    path: str = "/"
    round: int | None = None
    samples: int = 0
    cached: int = 0
    status_codes: dict[str, int] = field(default_factory=dict)
    required_learned: list[str] = field(default_factory=list)
    mapping: dict[str, Any] = field(default_factory=dict)
    source: str = "no-llm"
    schema_source: str | None = None
    schema_notes: list[str] = field(default_factory=list)
    filters: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "calls": self.calls,
            "response_schema": self.response_schema,
            "examples": self.examples,
            "depends_on": self.depends_on,
            "reason": self.reason,
            "method": self.method,
            "path": self.path,
            "round": self.round,
            "samples": self.samples,
            "cached": self.cached,
            "status_codes": self.status_codes,
            "required_learned": self.required_learned,
            "mapping": self.mapping,
            "source": self.source,
            "schema_source": self.schema_source,
            "schema_notes": self.schema_notes,
            "filters": self.filters,
        }


@dataclass
class ProbeReport:
    """The outcome of ``probe``; ``to_dict()`` is ``atc probe --json``. ``calls`` is the number of
    requests sent to the API in this run; ``cached`` the answers replayed from the cache. ``ok`` is
    true when at least one tool was documented. ``writes`` is the write plan, step by step, with
    what each step said before it was sent and what came of it (the plan alone with
    ``dry_run``); ``stopped`` why the probe stopped early (a credential that stopped working, the
    budget), ``left_behind`` what the probe created and could not delete."""

    tools: list[ToolReport]
    calls: int = 0
    collection: str = ""
    mode: str = "no-llm"
    base_url: str | None = None
    budget: int = 0
    rounds: int = 0
    cached: int = 0
    duration_ms: float = 0.0
    interrupted: bool = False
    note: str | None = None
    model: str | None = None
    usage: dict[str, int] = field(default_factory=lambda: {"llm_calls": 0, "prompt_tokens": 0,
                                                             "completion_tokens": 0})
    sandbox: str | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    writes: list[dict[str, Any]] = field(default_factory=list)
    scope: dict[str, str] = field(default_factory=dict)
    dry_run: bool = False
    stopped: str | None = None
    left_behind: list[str] = field(default_factory=list)
    #: What the scope guard refused to send (``probes.plan.guard``): a request or a redirect hop that
    #: would have written outside the scope, ``{"tool", "method", "url", "hop", "reason"}``.
    outside_scope: list[dict[str, Any]] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for t in self.tools if t.status == status)

    @property
    def ok(self) -> bool:
        return self.count("documented") > 0

    def tool(self, name: str) -> ToolReport | None:
        return next((t for t in self.tools if t.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        documented = self.count("documented")
        return {
            "tools": [t.to_dict() for t in self.tools],
            "calls": self.calls,
            "ok": self.ok,
            "collection": self.collection,
            "mode": self.mode,
            "base_url": self.base_url,
            "documented": documented,
            "failed": self.count("failed"),
            "skipped": self.count("skipped"),
            "calls_per_documented_tool": round(self.calls / documented, 3) if documented else None,
            "budget": self.budget,
            "rounds": self.rounds,
            "cached": self.cached,
            "duration_ms": round(self.duration_ms, 3),
            "interrupted": self.interrupted,
            "note": self.note,
            "model": self.model,
            "usage": self.usage,
            "sandbox": self.sandbox,
            "outputs": self.outputs,
            "scope": self.scope,
            "writes": self.writes,
            "dry_run": self.dry_run,
            "stopped": self.stopped,
            "left_behind": self.left_behind,
            "outside_scope": self.outside_scope,
        }


class ProbeInterrupted(KeyboardInterrupt):
    """Ctrl-C during a probe. ``report`` holds what was learnt until then; the cache and any
    ``--out`` files were already written with it."""

    def __init__(self, report: ProbeReport) -> None:
        super().__init__("probe interrupted")
        self.report = report
