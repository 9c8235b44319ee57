"""Sending the write plan (``probes.plan.steps``): each unsafe call said first, then sent, then checked.

For each step, in the plan's order:

1. Its placeholders are filled (``probes.plan.filling``). A step whose object was not created -- its
   create failed, its answer named no id, the probe stopped -- is **not sent**, and says why. A
   create of a pinned name first asks a read whether it exists (``probes.plan.created``): if it does,
   the create is not sent (the object is the user's: written to as pinned, never deleted).
2. It is **said** before it is sent: one line on stderr (``on_event("unsafe", state)``; the
   library prints it itself when no hook is given) and the same text in the report's ``writes``.
3. It is sent through the gateway, whose scope guard (``probes.plan.guard``) lets this step through and
   no other write, and follows a redirect only inside the scope. Never from nor into the response
   cache (a recorded answer to a write must never stand in for doing it). A 401/403 goes to
   ``probes.auth``, which stops the probe when the credential that worked is gone; a stopped probe
   sends no further step.
4. What it created is remembered, with the proof that it is this probe's (``probes.plan.created``:
   a name it made up, an id never seen before, a read that answered 404 just before). A delete is
   sent only with a proof; what has none is never deleted and is listed in ``left_behind`` with
   the reason, as is what was created and not deleted.

The tool is documented from its answer like a read (a 204 counts: the status is the answer).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from probes.arguments.harvest import Candidate, field_path
from probes.arguments.naming import singular
from probes.arguments.text import is_path_like
from probes.arguments.values import coerce
from probes.calls import Observation
from probes.plan.actions import reference
from probes.plan.announce import describe
from probes.plan.created import ID_KEYS, Proof, absence_checks, field_of, holds, new_id, seen_in_kind
from probes.plan.filling import StepFiller
from probes.plan.guard import ScopeGuard
from probes.plan.scope import Scope
from probes.plan.steps import Bound, Step, WritePlan, path_prefixes
from probes.state import BUDGET_SPENT, ProbeState, ToolState
from protocols.model import Tool

__all__ = ["WriteRunner", "describe", "new_id", "created_candidates", "pinned_later"]



class WriteRunner(StepFiller):
    """Sends a ``WritePlan`` over a ``ProbeState`` (see the module docstring)."""

    def __init__(self, probe_state: ProbeState, plan: WritePlan, *, say: Callable[[str], None] | None = None,
                 guard: ScopeGuard | None = None) -> None:
        super().__init__(probe_state, plan, guard)
        self.say = say
        #: Why the probe may delete what a step made (``probes.plan.created``).
        self.proofs: dict[int, Proof] = {}
        #: The reads that tell whether a pinned object exists, by create step (``probes.plan.created``).
        self.checks: dict[int, Tool] = absence_checks(plan, {n: st.tool for n, st in probe_state.states.items()},
                                                      [st.tool for st in probe_state.states.values()
                                                       if probe_state.reads(st.tool)])
        self.absent: dict[int, str] = {}

    # -- sending ---------------------------------------------------------------------------------

    def reserve(self) -> None:
        """Keep one request of the budget back for each planned delete: what is created can always
        be deleted, whatever the creates, updates and reads in between spend."""
        self.s.caller.budget.reserved = sum(1 for x in self.plan.steps if x.verb in ("delete", "bulk")
                                            and x.status == "planned")

    def run(self, verbs: tuple[str, ...], round_: int) -> None:
        """Send the planned steps of these verbs, in plan order (deletes from the reserve)."""
        deleting = any(v in ("delete", "bulk") for v in verbs)
        for step in self.plan.steps:
            if step.verb in verbs and step.status == "planned":
                if deleting and step.verb in ("delete", "bulk"):
                    self.s.caller.budget.reserved = 0
                self._send(step, round_)

    def _skip(self, step: Step, state: ToolState, why: str) -> None:
        step.status = "not sent"
        step.result = why
        if not state.observations and state.status == "queued":
            state.reason = f"not sent: {why}"

    def _not_owned(self, step: Step) -> str | None:
        """Why a delete of what step ``step.deletes`` made must not be sent (None: it may)."""
        assert step.deletes is not None
        done = self.plan.step(step.deletes)
        if step.deletes in self.proofs:
            return None
        if step.deletes in self.unproven:
            return f"{self.unproven[step.deletes]}: never deleted"
        return f"step {step.deletes} ({done.tool}) created nothing this probe owns ({done.result or done.status})"

    def _send(self, step: Step, round_: int) -> None:
        s = self.s
        state = s.states[step.tool]
        tool = state.tool
        if s.stopped and not (step.verb in ("delete", "bulk") and s.stop_reason == BUDGET_SPENT):
            return self._skip(step, state, f"the probe stopped first ({s.stop_reason})")
        if step.deletes is not None:
            why = self._not_owned(step)
            if why is not None:
                return self._skip(step, state, why)
        filled = self._fill(step, tool)
        if isinstance(filled, str):
            return self._skip(step, state, filled)
        args, provenance = filled
        if step.deletes is not None:
            why = self._addressed_by_proof(step, args)
            if why is not None:
                return self._skip(step, state, why)
        problem = s.caller.valid(tool, args)
        if problem is not None:
            return self._skip(step, state, f"its arguments do not fit the tool's schema: {problem}")
        if s.caller.budget.left(tool.name) <= 0:
            return self._skip(step, state, "the request budget is spent (--max-calls, --per-tool)")
        if step.index in self.checks:
            why = self._absence(step, tool, args, round_)
            if why is not None:
                return self._skip(step, state, why)
        step.says = describe(step, tool, args, len(self.plan.steps))
        step.sent_args = args
        state.notice = step.says
        self._announce(state)
        if self.guard is not None:
            # The gateway asks the guard about this request and every redirect that would repeat
            # it: this step, with these arguments, is the one write it lets through now.
            with self.guard.sending(tool, args, delete=step.verb in ("delete", "bulk")):
                obs = s.caller.call(tool, args, provenance=provenance, round_=round_, cache=False)
        else:
            obs = s.caller.call(tool, args, provenance=provenance, round_=round_, cache=False)
        s.observe(state, obs)
        s.auth.wrote(f"step {step.index} ({tool.method.upper()} {tool.path}, {tool.name})")
        if obs.kind == "budget" or obs.kind == "invalid":
            step.status = "not sent"
            step.result = obs.error
            return None
        # an MCP write may answer nothing at all; a 2xx that only reports an error did not write
        ok = obs.kind == "ok" or (obs.kind == "empty" and tool.method.upper() == "MCP")
        step.status = "done" if ok else "failed"
        step.result = (f"HTTP {obs.status}" if obs.status is not None else "answered") if ok else \
            " ".join(str(obs.error or obs.kind).split())[:300]
        if ok:
            self._created(step, obs)
            sources, targets = self._moves.get(step.index, ([], []))
            if len(sources) == 1 and len(targets) == 1:
                self.values[sources[0]] = targets[0]  # moved or renamed: it lives at its new name now
            if obs.data is not None:
                s.succeed(state, obs, round_)
            else:
                state.successes.append(obs)
                if state.status != "documented":
                    state.status, state.reason, state.round = "documented", None, round_
                    s.emit("documented", state)
        else:
            state.reason = step.result
            if obs.status in (401, 403, 407):
                stop = s.auth.refused(tool, obs)
                if stop is not None:
                    s.stop_reason = stop
        return None

    def _addressed_by_proof(self, step: Step, args: dict[str, Any]) -> str | None:
        """A delete addresses what it deletes by the value the proof is about: an artifact proven new
        by its new ``id`` is deleted by that id, never by the pinned ``key`` it was made with (a key
        that may name others too)."""
        assert step.deletes is not None
        proof = self.proofs[step.deletes]
        if proof.kind not in ("new",):
            return None
        own = [v for v in step.args.values() if isinstance(v, Bound) and v.kind == "created" and v.step == step.deletes]
        if not own:
            return None
        pinned = {str(v) for _, v in self.s.settings.scope}
        used = [args[p] for p, v in step.args.items() if v in own and p in args]
        if any(str(u) in pinned for u in used):
            return (f"it would name the object by the pinned {used[0]!r}, and only its new id "
                    f"{proof.value!r} shows it is this probe's: never deleted")
        return None

    def _absence(self, step: Step, tool: Tool, args: dict[str, Any], round_: int) -> str | None:
        """Before a create of a pinned name: a read asks whether it exists. None: it does not (the
        create is sent and what it makes is this probe's); else why the create is not sent."""
        s = self.s
        read = self.checks[step.index]
        order = _path_params(tool)
        values = [args[p] for p in order if p in args]
        own = self.own_param.get(step.index)
        if own is not None and own not in order:
            values.append(args[own])
        params = _path_params(read)
        if len(params) != len(values):
            return None
        if s.caller.budget.left(tool.name) < 2:
            return "the request budget is spent (--max-calls, --per-tool): no request left to check first"
        read_args = dict(zip(params, values, strict=True))
        obs = s.caller.call(read, read_args, fresh=True, cache=False, round_=round_, charge_to=tool.name)
        s.observe(s.states[read.name], obs)
        where = read.path
        for pname, value in read_args.items():
            where = where.replace("{" + (read.bindings[pname].name or pname) + "}", quote(str(value), safe=""))
        said = f"GET {where} answered {obs.status if obs.status is not None else obs.kind}"
        if obs.status in (404, 410):
            self.absent[step.index] = said
            return None
        if obs.status is not None and 200 <= obs.status < 300:
            self.unproven[step.index] = f"it existed before this probe ({said})"
            return f"{self.unproven[step.index]}: not created; it may be written as pinned, never deleted"
        if obs.status in (401, 403, 407):
            stop = s.auth.refused(read, obs)
            if stop is not None:
                s.stop_reason = stop
        return f"the probe could not tell whether it exists ({said}): not created"

    def _announce(self, state: ToolState) -> None:
        if self.say is not None:
            self.say(state.notice)
        elif self.s.on_event is not None:
            self.s.emit("unsafe", state)
        else:
            sys.stderr.write(f"atc probe: {state.notice}\n")
            sys.stderr.flush()

    def _created(self, step: Step, obs: Observation) -> None:
        planned = step.creates
        if planned is None:
            return
        self.answers[step.index] = (obs.data, obs.id)
        tool = self.s.states[step.tool].tool
        pinned = self.values.get(step.index) if planned.conditional else None
        if step.index not in self.values or self.values[step.index] is None:
            found = new_id(obs.data, planned.entity)
            if found is not None:
                self.values[step.index] = found[0]
                self.origin[step.index] = {"kind": "harvest", "obs": obs.id, "path": list(found[1]),
                                           "tool": obs.tool, "field": field_path(tuple(found[1]))}
            else:
                self.values[step.index] = None
        elif step.index in self.own_param:
            # later steps read the name from this step's own call (the example programs show the chain)
            self.origin[step.index] = {"kind": "inherit", "obs": obs.id, "arg": self.own_param[step.index]}
        else:
            self.origin[step.index] = {"kind": "new"}
        proof = self._proof(step, obs, tool, pinned)
        if isinstance(proof, Proof):
            self.proofs[step.index] = proof
        else:
            self.unproven[step.index] = proof
            step.result = f"{step.result}: {proof}"
        self.made.add(step.index)
        step.created = self.values.get(step.index)
        if self.guard is not None:
            self.guard.know(step.created)
            for key in (*ID_KEYS, "number"):  # how later steps may name it: its id, its name, its number
                found = field_of(obs.data, key, planned.entity)
                if found is not None:
                    self.guard.know(found[0])

    def _proof(self, step: Step, obs: Observation, tool: Tool, pinned: Any) -> Proof | str:
        """Why what ``step`` made is this probe's (``probes.plan.created``), or why nothing shows it is."""
        planned = step.creates
        assert planned is not None
        value = self.values.get(step.index)
        if planned.conditional:
            if tool.method.upper() == "MCP":
                if holds(obs.data, pinned):
                    return Proof("answer", "the answer says it made it", pinned)
                return "it existed before (the answer does not say it made it)"
            if step.index in self.absent:
                return Proof("absent", f"it did not exist before ({self.absent[step.index]})", pinned)
            found = new_id(obs.data, planned.entity)
            if obs.status == 201 and found is not None and str(found[0]) != str(pinned) and not seen_in_kind(
                    found[0], str(found[1][-1]), planned.template, self.s.caller.observations, self._tools(),
                    obs.id):
                return Proof("new", f"the API answered 201 with a new id {found[0]!r}", found[0])
            return (f"the API answered HTTP {obs.status} for the pinned {pinned!r}, and nothing shows it did not exist "
                    "before (no read of it answered 404 first)")
        if step.index in self.own_param and value is not None and str(value) in self.named_here(step.index):
            return Proof("named", f"named {value!r} by this probe", value)
        if tool.method.upper() == "MCP" and any(holds(obs.data, n) for n in self.named_here(step.index)):
            return Proof("answer", "the answer holds the new name this probe gave it", value)
        if tool.method.upper() == "MCP" and planned.refs:
            # a relation, an observation: named by what it hangs on, which must all be this probe's
            owners = {str(self.values.get(k)) for k in self.proofs}
            hung = [str(self._ref_value(b)) for b in planned.refs.values()]
            if hung and all(h in owners for h in hung):
                return Proof("parts", "it hangs only on what this probe made", value)
            return f"it hangs on {next(h for h in hung if h not in owners)!r}, which this probe did not show it made"
        if value is None:
            return "its answer named no id"
        origin = self.origin.get(step.index) or {}
        path = origin.get("path") or ["id"]
        if tool.method.upper() != "MCP" and seen_in_kind(value, str(path[-1]), planned.template,
                                                         self.s.caller.observations, self._tools(), obs.id):
            return f"its answer names {value!r}, which an earlier answer showed: it may have existed before"
        return Proof("new", f"a new id {value!r}", value)

    def _tools(self) -> dict[str, Tool]:
        return {name: st.tool for name, st in self.s.states.items()}

    # -- the end ---------------------------------------------------------------------------------

    def finish(self) -> None:
        """Settle the write tools: documented or failed by their steps, the rest skipped with why."""
        s = self.s
        for step in self.plan.steps:
            if step.status == "planned":
                self._skip(step, s.states[step.tool], f"the probe stopped first ({s.stop_reason})"
                           if s.stopped else "not reached")
        by_tool: dict[str, list[Step]] = {}
        for step in self.plan.steps:
            by_tool.setdefault(step.tool, []).append(step)
        for name, state in s.states.items():
            if state.status != "queued":
                continue
            steps = by_tool.get(name, [])
            if any(x.status == "failed" for x in steps):
                s.settle(state, "failed", state.reason or "the API refused it")
            elif steps:
                s.settle(state, "skipped", steps[-1].result or "not sent")
            else:
                s.settle(state, "skipped", f"never sent: {self.plan.never.get(name, 'not in the plan')}")

    def left_behind(self) -> list[str]:
        """What this probe made and did not delete, each with why (said in the report): what it
        created and could not delete, what it cannot show it created (never deleted), and the new
        names an action sent that may name something it made."""
        deleted = {x.deletes for x in self.plan.steps if x.status == "done" and x.deletes is not None}
        out = []
        for step in self.plan.steps:
            if step.index not in self.made or step.index in deleted or step.creates is None:
                continue
            if not step.creates.named and step.index in self.proofs:
                continue  # (an MCP ``add_observations``: nothing names it again but its arguments)
            value = self.values.get(step.index)
            what = f"{step.entity or 'object'} {value!r}" if value is not None else f"a {step.entity or 'object'}"
            where = f"step {step.index}, {step.tool}"
            if step.index in self.proofs:
                gone = next((x for x in self.plan.steps if x.deletes == step.index), None)
                why = f"its delete: {gone.result or gone.status}" if gone is not None else "nothing in the plan deletes it"
                out.append(f"{what} ({where}): created by this probe, not deleted ({why})")
            else:
                out.append(f"{what} ({where}): not deleted: {self.unproven.get(step.index, 'not shown to be new')}")
        for step in self.plan.steps:
            if step.creates is None and step.status == "done" and step.verb == "other" and self.named.get(step.index):
                names = ", ".join(repr(n) for n in self.named[step.index])
                out.append(f"what {step.tool} may have made under the new name {names} (step {step.index}): "
                           "no step of the plan deletes it")
        return out


def _path_params(tool: Tool) -> list[str]:
    """A tool's path parameters in the order its path names them."""
    names = [p for p, b in tool.bindings.items() if b.location == "path"]
    return sorted(names, key=lambda p: tool.path.find("{" + (tool.bindings[p].name or p) + "}"))


def created_candidates(probe_state: ProbeState, writes: WriteRunner, *,
                       later: frozenset[str] = frozenset()) -> Callable[[Tool, str], list[Candidate]]:
    """Values for reads from outside their answers: the pinned values (a read names what the user
    pinned, ``GET /work_pools/{name}`` <- ``atc-scratch``), except those in ``later`` (a pinned
    object the plan creates: not asked about before it exists), and what the probe created where a
    read's path parameter names it (``GET /buckets/{bucket_id}/collections/{id}`` <- the collection
    step 2 created)."""
    scope = Scope(probe_state.settings.scope)
    objects = [(step, step.creates) for step in writes.plan.steps
               if step.creates is not None and step.index in writes.made and writes.values.get(step.index) is not None]

    def provide(tool: Tool, pname: str) -> list[Candidate]:
        out: list[Candidate] = []
        role = probe_state.planner.role(tool, pname)
        binding = tool.bindings.get(pname)
        pin = scope.pin_for(tool, reference(tool, pname, role.entity, role.attribute))
        if pin is not None and str(pin[1]) in later:
            pin = None
        schema = tool.properties.get(pname)
        schema = schema if isinstance(schema, dict) else {}
        if pin is not None and not is_path_like(pin[1]):
            value = coerce(pin[1], schema)
            if value is not None:
                out.append(Candidate(value, 0.96, {"kind": "scope"}))
        if binding is not None and binding.location == "path" and tool.method.upper() != "MCP":
            names = [p for p, b in tool.bindings.items() if b.location == "path"]
            order = sorted(names, key=lambda p: tool.path.find("{" + (tool.bindings[p].name or p) + "}"))
            position = order.index(pname)
            prefixes = path_prefixes(tool)
            for step, planned in reversed(objects):
                if planned.template is not None and position < len(prefixes) and \
                        prefixes[position] == planned.template.rstrip("/") + "/{}":
                    got = writes.identity(step.index, role.attribute)
                    value = coerce(got[0], schema) if not isinstance(got, str) else None
                    if value is not None and not isinstance(got, str):
                        out.append(Candidate(value, 0.97, dict(got[1])))
        elif role.entity:
            for step, planned in reversed(objects):
                if planned.template is None and planned.entity and singular(planned.entity) == singular(role.entity):
                    value = coerce(writes.values[step.index], schema)
                    if value is not None:
                        out.append(Candidate(value, 0.97, dict(writes.origin.get(step.index) or {"kind": "created"})))
        return out

    return provide


def pinned_later(plan: WritePlan) -> frozenset[str]:
    """The pinned values the plan's creates make (a pinned work pool the probe creates)."""
    return frozenset(str(b.value) for step in plan.steps if step.creates is not None and step.creates.conditional
                     for b in step.args.values() if isinstance(b, Bound) and b.kind == "scope" and b.own)
