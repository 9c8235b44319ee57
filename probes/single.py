"""One probe of a collection in this process: from the tools to the report.

Order of work: resolve the tools and how to reach them; set the unsafe ones aside (skipped, with
the reason); open the response cache and the budget; then the model's rounds (when a model is
configured and ``no_llm`` is not set) followed by the model-free chain for whatever the model left,
or the model-free chain alone. While it runs, ``--out`` files are rewritten (atomically, at most
once a second) so an interrupted probe leaves its latest state behind; Ctrl-C raises
``ProbeInterrupted`` carrying the report of what was learnt.

``probes.probing.probe`` is the entry point; it comes here, or, with an executor, to
``probes.spread``, whose tasks (``probes.many.probe_task``) each come here in their worker.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from atc.config import atc_home
from atc.errors import ConfigError, UsageError
from atc.llm.chat import ModelClient
from atc.llm.client import make_client
from atc.toolsets import toolset_for
from probes.cache import ResponseCache
from probes.calls import Budget, Caller
from probes.llm import ModelProber
from probes.plan.actions import Action, action_of
from probes.plan.announce import describe
from probes.plan.created import absence_checks
from probes.plan.guard import ScopeGuard, guarded_toolset
from probes.plan.postreads import marked_post_read, marked_toolset, read_evidence
from probes.plan.safety import call_safety
from probes.plan.scope import Scope
from probes.plan.send import WriteRunner, created_candidates, pinned_later
from probes.plan.steps import path_prefixes, plan_writes
from probes.results.findings import remember
from probes.results.outputs import WRITE_EVERY, publish, write_outputs
from probes.results.report import ProbeInterrupted, ProbeReport, ProbeSettings
from probes.rounds import ChainProber
from probes.state import Event, ProbeState, ToolState
from protocols.model import Collection, Tool
from sandbox.api import Backend, Limits, Toolset
from sandbox.execute import BaseUrl, check_toolset, get_backend

__all__ = ["probe_toolset", "resolve_toolset", "ToolsArg"]

ToolsArg = Toolset | Collection | Sequence[Collection | str | Path] | str | Path


def resolve_toolset(tools: ToolsArg, base_url: BaseUrl = None,
                    credentials: Mapping[str, str] | None = None) -> Toolset:
    """The ``Toolset`` of what ``atc.probe`` takes as tools, read by the one reader of every entry
    point (``atc.toolsets.toolset_for``: files, URLs, stored names, MCP sources, Collections).
    ``base_url``: one URL for every collection, or ``{collection: URL}`` (as in ``atc.run``)."""
    if not isinstance(tools, Toolset | Collection | str | Path) and not list(tools):
        raise UsageError("no tools given", hint="pass a spec file or the name of an imported collection")
    return toolset_for(tools, base_url, credentials)


def _pick_client(settings: ProbeSettings, client: ModelClient | None, model: str | None) -> tuple[ModelClient | None, str | None]:
    if not settings.use_llm:
        return None, None
    if client is not None:
        return client, None
    try:
        return make_client(model), None
    except ConfigError as exc:
        return None, f"probed without a model: {exc.message}"


class _Run:
    """One probe: its state, its outputs, and what the report says about how it ran."""

    def __init__(self, toolset: Toolset, settings: ProbeSettings, llm: ModelClient | None, note: str | None,
                 out: str | Path | None, on_event: Event | None) -> None:
        self.started = time.perf_counter()
        self.toolset = toolset
        self.settings = settings
        self.llm = llm
        self.note = note
        self.out = out
        self.on_event = on_event
        self.rounds = 0
        self.usage = {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self.sandbox: str | None = None
        self._last_write = 0.0
        self._write_every = WRITE_EVERY
        tools = [t for c in toolset.collections for t in c.tools]
        unsafe: dict[str, str] = {}
        writers: list[tuple[Tool, Action]] = []
        #: POSTs probed as reads, with the evidence (``probes.plan.postreads``); ``guessed``: recognised by
        #: their names only (not marked), so their paths stay in the scope
        self.post_reads: dict[str, str] = {}
        guessed: set[str] = set()
        for collection in toolset.collections:
            for tool in collection.tools:
                verdict = call_safety(tool, collection)
                marked = marked_post_read(tool, collection)
                if marked is not None:
                    self.post_reads[tool.name] = marked
                if verdict.safe:
                    continue
                evidence = read_evidence(tool, collection)
                if evidence is not None and (settings.allow_unsafe or settings.dry_run):
                    self.post_reads[tool.name] = evidence  # probed as a read, its path kept in the scope
                    guessed.add(tool.name)
                elif evidence is not None:
                    unsafe[tool.name] = (f"{verdict.reason}; it looks like a read ({evidence}): --allow-unsafe "
                                         f"probes it as a read, --read-only {tool.name} vouches that it is one")
                elif settings.allow_unsafe or settings.dry_run:
                    writers.append((tool, action_of(tool, collection)))
                else:
                    unsafe[tool.name] = verdict.reason
        self.plan = plan_writes(writers, Scope(settings.scope), set(settings.allow_bulk)) if writers else None
        self.writes: WriteRunner | None = None
        reads = len(tools) - len(unsafe) - len(writers)
        steps = len(self.plan.steps) if self.plan is not None else 0
        total = settings.max_calls if settings.max_calls is not None else settings.per_tool * reads + steps
        self.budget = Budget(total=total, per_tool=settings.per_tool)
        self.limits = Limits(timeout=settings.timeout, memory_mb=settings.memory_mb,
                             call_timeout=settings.request_timeout, max_calls=max(1, self.budget.total))
        self.name = "+".join(c.name for c in toolset.collections)
        self.cache = ResponseCache(atc_home(), self.name, toolset.base_url or "", credentials=toolset.credentials,
                                   refresh=settings.refresh, enabled=settings.cache)
        # Every call that may write passes the scope guard at the gateway: the planned request and
        # each redirect that would send it again (``probes.plan.guard``).
        self.guard = ScopeGuard(Scope(settings.scope), {t.name: t for t in tools}, toolset.base_url_for,
                                reads=dict(self.post_reads), guessed=set(guessed))
        self.wire = guarded_toolset(toolset, self.guard)
        self.probe_state = ProbeState(tools, Caller(self.wire, self.limits, self.budget, self.cache), settings,
                               on_event=self._event)
        self.probe_state.reads_by_post = dict(self.post_reads)
        self.probe_state.planner.scoped = guessed
        for name, reason in unsafe.items():
            self.probe_state.settle(self.probe_state.states[name], "skipped", reason)
        for tool, _ in writers:
            self.probe_state.states[tool.name].status = "queued"
        if self.plan is not None and not settings.dry_run:
            for name, why in self.plan.never.items():  # said first, before anything is sent
                self.probe_state.settle(self.probe_state.states[name], "skipped", f"never sent: {why}")
        if self.plan is not None and not settings.dry_run:
            made = {x.creates.template.rstrip("/") + "/{}" for x in self.plan.steps
                    if x.creates is not None and x.creates.template is not None}
            self.probe_state.waiting = {st.name for st in self.probe_state.pending() if set(path_prefixes(st.tool)) & made}
            self.writes = WriteRunner(self.probe_state, self.plan, say=self._say if on_event is None else None,
                                      guard=self.guard)

    def _say(self, text: str) -> None:
        """Before an unsafe call, with no progress hook: the library says it on stderr itself."""
        sys.stderr.write(f"atc probe: {text}\n")
        sys.stderr.flush()
    def report(self, *, interrupted: bool = False) -> ProbeReport:
        stopped = self.probe_state.stop_reason
        note = self.note
        if stopped and stopped.startswith("stopped:"):
            note = f"{note}; {stopped}" if note else stopped
        return ProbeReport(
            tools=self.probe_state.reports(), calls=self.budget.spent, collection=self.name,
            mode="model" if self.llm is not None else "no-llm", base_url=self.toolset.base_url,
            budget=self.budget.total, rounds=self.rounds, cached=self.cache.hits,
            duration_ms=(time.perf_counter() - self.started) * 1000, interrupted=interrupted, note=note,
            model=getattr(self.llm, "model", None), usage=dict(self.usage), sandbox=self.sandbox,
            writes=[step.to_dict() for step in self.plan.steps] if self.plan is not None else [],
            scope=dict(self.settings.scope), dry_run=self.settings.dry_run, stopped=stopped,
            left_behind=self.writes.left_behind() if self.writes is not None else [],
            outside_scope=self.guard.to_list())

    def finish(self, *, interrupted: bool = False, update: bool = False) -> ProbeReport:
        """The final report, with the ``--out`` files and the store written from it."""
        return publish(self.report(interrupted=interrupted), self.toolset.collections, self.out, update=update)

    def _event(self, kind: str, state: ToolState) -> None:
        if self.on_event is not None:
            self.on_event(kind, state)
        if kind in ("documented", "failed", "skipped") and self.out is not None:
            now = time.monotonic()
            if now - self._last_write >= self._write_every:
                report = self.report()
                report.outputs = write_outputs(self.out, self.toolset.collections, report)
                # Writing must not take over the probe: wait at least 5 times as long as a write took.
                self._last_write = time.monotonic()
                self._write_every = max(WRITE_EVERY, 5 * (self._last_write - now))

    def dry(self) -> None:
        """``--dry-run``: nothing is sent; every tool says what the probe would do with it."""
        s = self.probe_state
        for state in s.states.values():
            evidence = self.post_reads.get(state.name)
            if state.status == "pending" and evidence is not None:
                how = "" if self.settings.allow_unsafe or evidence.endswith("marked read-only") else \
                    " (sent only with --allow-unsafe, or once --read-only marks it)"
                s.settle(state, "skipped", f"dry run: a read by POST: {evidence}{how}")
            elif state.status == "pending":
                s.settle(state, "skipped", "dry run: a read; it would be probed with arguments found while probing")
        if self.plan is None:
            return
        absence_checks(self.plan, {n: st.tool for n, st in s.states.items()},
                       [st.tool for st in s.states.values() if s.reads(st.tool)])
        for step in self.plan.steps:
            step.says = describe(step, s.states[step.tool].tool, None, len(self.plan.steps))
            s.settle(s.states[step.tool], "skipped", f"dry run: {step.says}")
        for name, why in self.plan.never.items():
            s.settle(s.states[name], "skipped", f"dry run: never sent: {why}")

    def run(self, sandbox: str | Backend | None) -> None:
        """The model's rounds (when there is a model), then the model-free chain for the rest;
        with a write plan, its creates, a round for the reads still waiting, then its updates,
        other actions and deletes."""
        if self.settings.dry_run:
            self.dry()
            return
        if self.writes is not None:
            # Reads name what the user pinned, but a pinned object the plan creates only once it exists.
            self.probe_state.planner.pins = created_candidates(self.probe_state, self.writes,
                                                           later=pinned_later(self.writes.plan))
        first_round = 0
        if self.llm is not None:
            backend = sandbox if isinstance(sandbox, Backend) else get_backend(sandbox)
            model_prober = ModelProber(self.probe_state, self.llm, self.wire, sandbox=backend, limits=self.limits)
            try:
                self.rounds = model_prober.run()
            finally:
                self.usage.update(model_prober.usage)
                self.sandbox = model_prober.sandbox_name
            if model_prober.model_error:
                self.note = f"the model failed ({model_prober.model_error}); the rest was probed without it"
            first_round = max(1, self.rounds)
        chain = ChainProber(self.probe_state)
        self.rounds = max(self.rounds, chain.run(first_round=first_round, finish=self.writes is None))
        if self.writes is not None:
            writes = self.writes
            try:
                writes.reserve()
                writes.run(("create",), self.rounds)
                if any(x in writes.made for x in range(1, len(writes.plan.steps) + 1)):
                    self.probe_state.planner.pins = created_candidates(self.probe_state, writes)
                    if chain.more(self.rounds + 1):
                        self.rounds += 1
                chain.tail(self.rounds)  # guesses come after what the creates made
                writes.run(("update", "other", "delete", "bulk"), self.rounds)
            finally:
                writes.finish()
                chain.finish()
        if self.settings.cache:
            for state in self.probe_state.states.values():
                # A tool documented from recorded answers has its finding already.
                if state.successes and state.source != "model" and not state.successes[0].cached:
                    remember(self.probe_state, state, state.successes[0])


def probe_toolset(toolset: Toolset, settings: ProbeSettings, *, model: str | None = None,
                  client: ModelClient | None = None, sandbox: str | Backend | None = None,
                  out: str | Path | None = None, update: bool = False, on_event: Event | None = None) -> ProbeReport:
    """Probe ``toolset`` here, in this process (``probe`` without an executor; see the module
    docstring); the keywords are ``probe``'s."""
    if settings.dry_run:
        settings = replace(settings, use_llm=False)
    # What would make every request fail is said before the first one: a credential that names
    # neither a scheme nor a placement or reads an unset variable, a collection with no server.
    check_toolset(toolset)
    toolset = marked_toolset(toolset, settings.read_only, settings.writes_op)
    llm, note = _pick_client(settings, client, model)
    run = _Run(toolset, settings, llm, note, out, on_event)
    try:
        run.run(sandbox)
    except KeyboardInterrupt:
        raise ProbeInterrupted(run.finish(interrupted=True, update=update)) from None
    return run.finish(update=update)
