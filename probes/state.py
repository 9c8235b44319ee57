"""The state of one probe: what is known about each tool, and what every part of the prober shares.

``ToolState`` is the prober's working record of one tool (every request made for it, the
successes, the plans tried, the values that proved wrong, the parameters the API demanded).
``ProbeState`` holds the tools' states in spec order, the caller (budget, cache, gateway), the
harvest and the planner, and the stop flags; it turns states into ``ToolReport``s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from probes.arguments.harvest import Harvest
from probes.arguments.planner import Planner
from probes.auth import AuthWatch
from probes.calls import Caller, Observation
from probes.plan.safety import call_safety
from probes.results.document import (
    choose_examples,
    condense_value,
    dependencies,
    example_program,
    merge_schema,
)
from probes.results.report import ProbeSettings, ToolReport
from probes.results.schemas import combine
from protocols.model import Tool

__all__ = ["ToolState", "ProbeState", "Event", "BUDGET_SPENT"]

#: Why a probe stopped when its request budget ran out (the deletes a write plan keeps back are
#: still sent: ``probes.plan.send``).
BUDGET_SPENT = "the request budget (--max-calls) is spent"

#: A progress hook: ``(event, state)`` with event ``documented``, ``failed``, ``skipped``, ``call`` or
#: ``unsafe`` (an unsafe call is about to be sent; ``state.notice`` says what it will do).
Event = Callable[[str, "ToolState"], None]


@dataclass
class ToolState:
    """Everything known about one tool while probing. ``status`` is ``pending`` until decided
    (``queued`` for a tool that may change data: the write plan decides it, not the rounds);
    ``notice`` is what the probe says before an unsafe call of it."""

    tool: Tool
    index: int
    status: str = "pending"
    reason: str | None = None
    round: int | None = None
    observations: list[Observation] = field(default_factory=list)
    successes: list[Observation] = field(default_factory=list)
    helper_samples: list[Any] = field(default_factory=list)
    learned: list[str] = field(default_factory=list)
    tried: set[str] = field(default_factory=set)
    bad: dict[str, list[Any]] = field(default_factory=dict)
    programs: dict[int, dict[str, str]] = field(default_factory=dict)
    source: str = "no-llm"
    depends_on: list[str] = field(default_factory=list)
    notice: str = ""
    filters: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.tool.name

    def required(self) -> list[str]:
        """The spec's required parameters, then those the API proved required."""
        out = list(self.tool.required)
        out += [p for p in self.learned if p not in out and p in self.tool.properties]
        return out

    def schema(self) -> dict[str, Any] | None:
        return merge_schema([o.data for o in self.successes if o.data is not None] + self.helper_samples)


class ProbeState:
    """Shared state of one probe (single-threaded)."""

    def __init__(self, tools: list[Tool], caller: Caller, settings: ProbeSettings,
                 on_event: Event | None = None) -> None:
        self.settings = settings
        self.caller = caller
        self.harvest = Harvest()
        self.planner = Planner(self.harvest, caller.observations)
        self.states: dict[str, ToolState] = {t.name: ToolState(t, i) for i, t in enumerate(tools)}
        self.tool_names = [t.name for t in tools]
        self.on_event = on_event
        self.stop_reason: str | None = None
        #: Tools whose method may write that this probe sends as reads (tool -> the evidence:
        #: ``probes.plan.postreads``).
        self.reads_by_post: dict[str, str] = {}
        #: Reads that wait for the write plan's creates: their path names an object the plan makes
        #: (``GET /work_pools/{name}`` of a pinned pool it creates), so a guess before would be wasted.
        self.waiting: set[str] = set()
        self.auth = AuthWatch(self)
        self._reports: dict[str, tuple[tuple[Any, ...], ToolReport]] = {}

    # -- bookkeeping --------------------------------------------------------------------------

    def reads(self, tool: Tool) -> bool:
        """Whether this probe sends ``tool`` as a read (a GET, a read-only MCP tool, a read by POST)."""
        if tool.name in self.reads_by_post:
            return True
        return call_safety(tool, self.caller.toolset.collection_of(tool.name)).safe

    def pending(self) -> list[ToolState]:
        """The tools still to probe (B), but those waiting for what the write plan creates."""
        return [s for s in self.states.values() if s.status == "pending" and s.name not in self.waiting]

    def emit(self, event: str, state: ToolState) -> None:
        if self.on_event is not None:
            self.on_event(event, state)

    def observe(self, state: ToolState, obs: Observation) -> None:
        state.observations.append(obs)
        self.auth.answered(state.tool if obs.tool == state.name else self.states[obs.tool].tool, obs)
        self.emit("call", state)

    def succeed(self, state: ToolState, obs: Observation, round_: int, *, source: str = "no-llm") -> None:
        """A successful response of ``state``'s tool: keep it, harvest it, document the tool."""
        state.successes.append(obs)
        self.harvest.add(obs, state.tool)
        if state.status != "documented":
            state.status = "documented"
            state.reason = None
            state.round = round_
            state.source = source
            state.depends_on, _ = dependencies(obs, self.caller.observations)
            self.emit("documented", state)

    def helper_sample(self, obs: Observation) -> None:
        """A successful response of a tool called as a helper (model mode): harvest and merge it."""
        state = self.states.get(obs.tool)
        if state is None:
            return
        self.harvest.add(obs, state.tool)
        if state.status == "documented":
            state.helper_samples.append(obs.data)

    def settle(self, state: ToolState, status: str, reason: str) -> None:
        if state.status not in ("pending", "queued"):
            return
        state.status = status
        state.reason = reason
        self.emit(status, state)

    @property
    def stopped(self) -> bool:
        return self.stop_reason is not None

    # -- reports ------------------------------------------------------------------------------

    def report(self, state: ToolState) -> ToolReport:
        """The ``ToolReport`` of a tool, as known now (rebuilt only when the tool's state changed:
        ``--out`` files are rewritten while probing, and merging schemas is the costly part)."""
        stamp = (state.status, state.reason, len(state.successes), len(state.observations), len(state.helper_samples),
                 self.caller.budget.by_tool.get(state.name, 0), len(state.filters))
        hit = self._reports.get(state.name)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        report = self._build_report(state)
        self._reports[state.name] = (stamp, report)
        return report

    def _build_report(self, state: ToolState) -> ToolReport:
        tool = state.tool
        status = state.status if state.status not in ("pending", "queued") else "skipped"
        reason = state.reason
        if state.status in ("pending", "queued"):
            reason = reason or "not probed (the probe stopped first)"
        codes = Counter(str(o.status) for o in state.observations if o.status is not None)
        report = ToolReport(
            name=tool.name, status=status, reason=None if status == "documented" else reason,
            method=tool.method.upper(), path=tool.path, round=state.round, samples=len(state.successes),
            calls=self.caller.budget.by_tool.get(tool.name, 0),
            cached=sum(1 for o in state.observations if o.cached),
            status_codes=dict(sorted(codes.items())), required_learned=list(state.learned), source=state.source,
        )
        if state.successes:
            sample = next((o.data for o in state.successes if o.data is not None), None)
            report.response_schema, report.schema_notes = combine(tool.response_schema, state.schema(), sample)
            report.schema_source = "declared+learnt" if tool.response_schema else "learnt"
            chosen = choose_examples(state.successes, self.settings.max_examples)
            filtered = [o for o in state.successes if any(p in o.args for p in state.filters)]
            if filtered and not any(o in chosen for o in filtered):
                chosen = [*chosen[: self.settings.max_examples - 1], filtered[0]]  # show the link
            observations = self.caller.observations
            for obs in chosen:
                given = state.programs.get(obs.id) or {}
                example: dict[str, Any] = {
                    "args": obs.args,
                    "response": condense_value(obs.data),
                    "status": obs.status,
                    "program": given.get("program") or example_program(obs, observations, self.tool_names),
                }
                if given.get("question"):
                    example["question"] = given["question"]
                report.examples.append(example)
            report.depends_on, report.mapping = dependencies(chosen[0], observations)
            for obs in chosen[1:]:
                more, _ = dependencies(obs, observations)
                report.depends_on += [t for t in more if t not in report.depends_on]
            report.filters = dict(state.filters)
            report.depends_on += [f["tool"] for f in state.filters.values() if f["tool"] not in report.depends_on]
        return report

    def reports(self) -> list[ToolReport]:
        return [self.report(s) for s in self.states.values()]
