"""The chain of probing without a model: B (unprobed) and H (probed) sets, beta rounds.

The paper probes every tool alone first, then retries the ones that failed with helpers from H
that supply their private arguments (an id only another tool hands out). This prober keeps that
structure and makes it cheap:

- **Round 0 (alone)** tries only tools whose required arguments the schema can fill without
  guessing an identifier (no parameters, enums, defaults, examples, formats, search words). A
  tool that wants a ``movie_id`` is not sent a made-up one: that request would only buy a 404.
- **Rounds 1..beta-1 (with helpers)** try the tools of B for which the harvest now holds a
  strong value for every required argument (``probes.arguments.harvest``), best-founded plans first. Each
  success feeds the harvest at once, so a chain of any length can complete within one round; a
  round repeats its pass while it makes progress, and the rounds stop when one documents nothing.
- **A last, guessing round** gives each tool still in B one try with loose matches and made-up
  values, for APIs whose "ids" accept anything.
- **Optional filters that link** (``postId``, ``user_id``, ``owner``) are tried with ids other tools
  handed out, and recorded when they narrow the answer (``probes.arguments.filters``).
- **Extra samples**, while budget remains, go only to documented tools whose schema still has
  gaps (empty lists, nulls), with other arguments.

Each answer teaches something: a 400 (or an MCP tool's error) naming a parameter the call
lacked makes it required (``required_learned``); one naming a given parameter, or a 404, rules
the value out; 401/403 stop the tool, and ``probes.auth`` decides whether they stop the probe
(the API wants credentials, or a credential that worked stopped working); 429 waits; a second
server error (5xx), timeouts, network errors and garbage end the tool with that reason.

Tools that may change data are not probed here: ``probes.plan.send`` sends the planned unsafe calls
between ``run(finish=False)`` and ``more``, which gives the reads still waiting a pass with what
the writes created.
"""

from __future__ import annotations

import re

from probes.arguments.filters import probe_filters
from probes.arguments.planner import Plan, signature
from probes.arguments.values import STRONG
from probes.auth import AUTH_WALL, REFUSED, hint
from probes.calls import Observation
from probes.results.document import gaps
from probes.state import BUDGET_SPENT, ProbeState, ToolState

__all__ = ["ChainProber", "TRIES_PER_ROUND", "AUTH_WALL"]

#: Requests one tool may spend per round (its best plan, then one alternative).
TRIES_PER_ROUND = 2
#: Server errors (5xx) after which a tool is given up: the fault is the server's, not the arguments'.
SERVER_ERRORS = 2
_MAX_INVALID = 20


class ChainProber:
    """Runs the chain of probing over a ``ProbeState``; ``run`` returns the number of rounds used."""

    def __init__(self, probe_state: ProbeState) -> None:
        self.s = probe_state

    # -- the rounds ---------------------------------------------------------------------------

    def run(self, *, first_round: int = 0, finish: bool = True) -> int:
        """Round 0 (unless ``first_round`` > 0: the model had the first rounds), then up to beta-1
        rounds with helpers, the guessing round and the extra samples; returns the rounds used.
        ``finish=False`` leaves the tools not decided pending and the guessing round, the filters and
        the extra samples for ``tail``, after ``more`` (a probe with writes: what the writes create
        is a better guess than a made-up value)."""
        s = self.s
        beta = s.settings.rounds
        if first_round == 0:
            for state in s.pending():
                if s.stopped:
                    break
                self.attempt(state, 0, alone=True)
        start = max(1, first_round)
        used = start
        for round_ in range(start, start + beta - 1):
            if s.stopped or not s.pending():
                break
            used = round_ + 1
            if not self._round(round_):
                break
        if finish:
            self.tail(used)
            self.finish()
        return used

    def tail(self, round_: int) -> None:
        """The guessing round for the tools still pending, the optional filters that link, and the
        extra samples."""
        s = self.s
        if not s.stopped:
            for state in s.pending():
                if s.stopped:
                    break
                self.attempt(state, round_, threshold=0.0, tries=1)
        if not s.stopped:
            probe_filters(s, round_)
        if not s.stopped:
            self.extra_samples(round_)

    def more(self, round_: int) -> bool:
        """One more round for the tools still pending (after the writes created what they need);
        True when it documented something."""
        self.s.waiting.clear()
        if self.s.stopped or not self.s.pending():
            return False
        return self._round(round_)

    def _round(self, round_: int) -> bool:
        """One round with helpers: passes over B, best-founded tools first, until a pass makes no progress."""
        s = self.s
        done: set[str] = set()
        progressed = False
        while not s.stopped:
            ready: list[tuple[int, tuple[float, int, float], int, ToolState]] = []
            for state in s.pending():
                if state.name in done:
                    continue
                best = self._best(state, STRONG)
                if best is not None:
                    ready.append((len(state.required()), best.key(), state.index, state))
            if not ready:
                break
            # Tools with fewer inputs first: they are upstream of the ones with more (a season
            # before its episodes), so the latter find coherent values by the time they run.
            ready.sort(key=lambda item: (item[0], item[1], item[2]))
            gained = False
            for _, _, _, state in ready:
                if s.stopped:
                    break
                if state.status != "pending" or state.name in done:
                    continue
                done.add(state.name)
                if self.attempt(state, round_):
                    progressed = gained = True
            if not gained:
                break
        return progressed

    def _best(self, state: ToolState, threshold: float, *, alone: bool = False) -> Plan | None:
        plans = self.s.planner.plans(state.tool, state.required(), tried=state.tried, bad=state.bad,
                                     weak=threshold < STRONG)
        for plan in plans:
            if plan.score >= threshold and not (alone and plan.harvested):
                return plan
        return None

    # -- one tool -------------------------------------------------------------------------------

    def attempt(self, state: ToolState, round_: int, *, threshold: float = STRONG, tries: int = TRIES_PER_ROUND,
                alone: bool = False) -> bool:
        """Up to ``tries`` requests for ``state``'s tool with the best untried plans; True on success."""
        s = self.s
        if not s.reads(state.tool):
            return False  # a write is sent only as a step of the write plan (``probes.plan.send``)
        invalid = 0
        made = 0  # answers from the cache count too, so a re-run retraces the first run exactly
        while made < tries and not s.stopped:
            if s.caller.budget.left(state.name) <= 0:
                if s.caller.budget.left() <= 0:
                    s.stop_reason = BUDGET_SPENT
                state.reason = state.reason or "its share of the request budget is spent (--per-tool)"
                return False
            plan = self._best(state, threshold, alone=alone)
            if plan is None:
                return False
            state.tried.add(signature(plan.args))
            problem = s.caller.valid(state.tool, plan.args)
            if problem is not None:
                invalid += 1
                if invalid > _MAX_INVALID:
                    return False
                continue
            obs = s.caller.call(state.tool, plan.args, provenance=plan.provenance, round_=round_)
            s.observe(state, obs)
            ruled_out = sum(len(v) for v in state.bad.values())
            if obs.ok:
                s.succeed(state, obs, round_)
                return True
            if not self.react(state, obs, plan):
                return False
            # A value the answer ruled out (404, a 400 naming it, an MCP error) leaves the next
            # candidate to try now, within the tool's budget; any other failure counts as a try.
            if sum(len(v) for v in state.bad.values()) == ruled_out or obs.cached:
                made += 1
        return False

    def react(self, state: ToolState, obs: Observation, plan: Plan) -> bool:
        """Learn from a failed request; False when this tool should not be tried again now."""
        s = self.s
        state.reason = _reason(obs)
        if obs.kind == "budget":
            if s.caller.budget.left() <= 0:
                s.stop_reason = BUDGET_SPENT
            return False
        if obs.kind in ("timeout", "network", "garbage", "too_large"):
            state.status = "failed"
            s.emit("failed", state)
            return False
        if obs.kind in ("empty", "redirect", "invalid"):
            return True
        if obs.kind == "tool_error":
            return self._named_problem(state, obs, plan)
        if obs.kind == "refused":
            for p in params_named(state, obs.error or "") or (list(plan.args) if len(plan.args) == 1 else []):
                if p in plan.args:
                    state.bad.setdefault(p, []).append(plan.args[p])
            return True
        status = obs.status or 0
        if status in REFUSED:
            stop = s.auth.refused(state.tool, obs)
            if stop is not None:
                s.stop_reason = stop
            elif status == 403 and plan.args and s.auth.canary is not None:
                # Others' objects answer 403 where the credential works: another value may be readable.
                path = [p for p in plan.args if (b := state.tool.bindings.get(p)) is not None and b.location == "path"]
                first = (path or list(plan.args))[0]
                state.bad.setdefault(first, []).append(plan.args[first])
                return True
            state.status = "failed"
            state.reason = f"{state.reason} ({hint(s.caller.toolset, state.tool)})"
            s.emit("failed", state)
            return False
        if status in (405, 501) or (status >= 500 and sum(1 for o in state.observations
                                                           if (o.status or 0) >= 500) >= SERVER_ERRORS):
            # Not allowed, or the server keeps failing whatever it is sent: other values will not help.
            state.status = "failed"
            s.emit("failed", state)
            return False
        if status == 429:
            state.tried.discard(signature(plan.args))
            s.caller.sleep(min(4.0, 0.5 * 2 ** min(4, len(state.observations))))
            return True
        if status in (400, 422):
            return self._named_problem(state, obs, plan)
        if status in (404, 410) and len(plan.args) == 1:
            only = next(iter(plan.args))
            state.bad.setdefault(only, []).append(plan.args[only])
        return True

    def _named_problem(self, state: ToolState, obs: Observation, plan: Plan) -> bool:
        """A 400 or an MCP tool error: a parameter it names and the call lacked becomes required;
        one it names (or the only one given) is ruled out for this value."""
        named = params_named(state, obs.error or "")
        missing = [p for p in named if p not in plan.args]
        if missing:
            state.learned += [p for p in missing if p not in state.learned]
            return True
        for p in named or (list(plan.args) if len(plan.args) == 1 else []):
            if p in plan.args:
                state.bad.setdefault(p, []).append(plan.args[p])
        return True

    # -- after the rounds -----------------------------------------------------------------------

    def extra_samples(self, round_: int) -> None:
        """More samples for documented tools whose schema still has gaps, while budget remains. A
        sample that fills none of the gaps ends it for that tool: the gap is in the API's data
        (a list that is always empty, a field that is always null), not in the sample."""
        s = self.s
        for state in list(s.states.values()):
            if s.stopped:
                return
            if not s.reads(state.tool):
                continue  # a write is sent only as a step of the write plan (``probes.plan.send``)
            open_gaps = gaps(state.schema()) if state.status == "documented" else 0
            while (open_gaps > 0 and len(state.successes) < s.settings.samples
                   and s.caller.budget.left(state.name) > 0 and not s.stopped):
                plan = self._best(state, STRONG)
                if plan is None:
                    break
                state.tried.add(signature(plan.args))
                if s.caller.valid(state.tool, plan.args) is not None:
                    continue
                obs = s.caller.call(state.tool, plan.args, provenance=plan.provenance, round_=round_)
                s.observe(state, obs)
                if not obs.ok:
                    break
                state.successes.append(obs)
                s.harvest.add(obs, state.tool)
                left = gaps(state.schema())
                if left >= open_gaps:
                    break
                open_gaps = left

    def finish(self) -> None:
        """Decide every tool still pending: failed (it was tried) or skipped (it never could be)."""
        s = self.s
        s.waiting.clear()
        for state in s.pending():
            if state.observations:
                s.settle(state, "failed", state.reason or "no request succeeded")
            elif s.stop_reason:
                s.settle(state, "skipped", s.stop_reason)
            elif state.reason:
                s.settle(state, "skipped", state.reason)
            else:
                missing = s.planner.missing(state.tool, state.required())
                if missing:
                    s.settle(state, "skipped", f"no value for {', '.join(repr(m) for m in missing)}: no response "
                             "seen had a matching field and the schema gives none")
                else:
                    s.settle(state, "skipped", "no plan was good enough to try")


def _reason(obs: Observation) -> str:
    text = " ".join(str(obs.error or obs.kind).split())
    prefix = f"{obs.tool}: "
    if text.startswith(prefix):
        text = text[len(prefix):]
    return text[:300]


def params_named(state: ToolState, text: str) -> list[str]:
    """Parameters of the tool that an API error message names (by Python or wire name)."""
    tool = state.tool
    found: list[str] = []
    message = text.split("HTTP ", 1)[-1]
    for pname in tool.properties:
        binding = tool.bindings.get(pname)
        names = {pname, binding.name if binding and binding.name else pname}
        if any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", message) for n in names if n):
            found.append(pname)
    return found
