"""Sending the write plan (``probes.plan``): each unsafe call said first, then sent, then checked.

For each step, in the plan's order:

1. Its placeholders are filled: a pinned value as pinned, what an earlier step created (the id its
   answer gave, or the name the step gave it), a new ``atc-probe-...`` name. A step whose object
   was not created -- its create failed, its answer named no id, a pinned object that existed
   before (``conditional``) -- is **not sent**, and says why.
2. It is **said** before it is sent: one line on stderr (``on_event("unsafe", state)``; the
   library prints it itself when no hook is given) and the same text in the report's ``writes``.
3. It is sent, never from nor into the response cache (a recorded answer to a write must never
   stand in for doing it). A 401/403 goes to ``probes.auth``, which stops the probe when the
   credential that worked is gone; a stopped probe sends no further step.
4. What it created is remembered: for a pinned name only when the API says it created it (HTTP
   201, or an MCP answer that holds the name), for anything else on any 2xx.

The tool is documented from its answer like a read (a 204 counts: the status is the answer).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from probes.calls import Observation, Source
from probes.guard import ScopeGuard
from probes.harvest import Candidate, field_path
from probes.naming import singular
from probes.plan import Bound, Step, WritePlan, shown
from probes.scope import fresh_name
from probes.state import BUDGET_SPENT, Session, ToolState
from probes.text import is_path_like
from probes.values import coerce, type_ok
from protocols.model import Tool

__all__ = ["WriteRunner", "describe", "new_id", "created_candidates"]

#: Wrappers an API puts around the object it created (``{"data": {"id": ...}}``).
_WRAPPERS = ("data", "result", "item", "object", "record", "resource", "created")
_ID_KEYS = ("id", "uuid", "key", "slug", "name")


def new_id(data: Any, entity: str | None) -> tuple[Any, list[str | int]] | None:
    """The id of the object a create answer describes, and where it was: ``id`` (or
    ``<entity>_id``, ``uuid``, ``key``, ``slug``, ``name``) at the top or inside one wrapper."""
    if isinstance(data, list) and len(data) == 1:
        found = new_id(data[0], entity)
        return (found[0], [0, *found[1]]) if found is not None else None
    if not isinstance(data, dict):
        return None
    keys = [*((f"{entity}_id", f"{entity}Id") if entity else ()), *_ID_KEYS]
    for key in keys:
        value = data.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
            return value, [key]
    for wrapper in (*_WRAPPERS, entity or ""):
        inner = data.get(wrapper) if wrapper else None
        if isinstance(inner, dict):
            found = new_id(inner, entity)
            if found is not None:
                return found[0], [wrapper, *found[1]]
    return None


def _field(data: Any, want: str, entity: str | None) -> tuple[Any, list[str | int]] | None:
    """The ``want`` field (``number``, ``slug``, ``<entity>_<want>``) of a create answer, at the top
    or inside one wrapper."""
    if not isinstance(data, dict):
        return None
    for key in (want, f"{entity}_{want}" if entity else ""):
        value = data.get(key) if key else None
        if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
            return value, [key]
    for wrapper in (*_WRAPPERS, entity or ""):
        inner = data.get(wrapper) if wrapper else None
        if isinstance(inner, dict):
            found = _field(inner, want, entity)
            if found is not None:
                return found[0], [wrapper, *found[1]]
    return None


def _holds(data: Any, value: Any, depth: int = 0) -> bool:
    """Whether an answer holds ``value`` anywhere (a pinned name the API says it created)."""
    if depth > 20:
        return False
    if data == value:
        return True
    if isinstance(data, dict):
        return any(_holds(v, value, depth + 1) for v in data.values())
    if isinstance(data, list):
        return any(_holds(v, value, depth + 1) for v in data[:200])
    return isinstance(data, str) and isinstance(value, str) and len(value) > 3 and value in data


def describe(step: Step, tool: Tool, args: dict[str, Any] | None, total: int) -> str:
    """One line saying what a step will do: the verb, the object, the request as sent."""
    given = args if args is not None else step.args
    if tool.method.upper() == "MCP":
        wire = {k: (tool.bindings[k].name if k in tool.bindings and tool.bindings[k].name else k) for k in given}
        call = f"{tool.path or tool.name}({_short({wire[k]: v for k, v in given.items()})})"
    else:
        path = tool.path
        for pname, binding in tool.bindings.items():
            if binding.location == "path" and pname in given:
                value = given[pname]
                text = _in_path(value) if isinstance(value, Bound) else quote(str(value), safe="")
                path = path.replace("{" + binding.name + "}", text)
        where = {k: (tool.bindings[k].location if k in tool.bindings else "body") for k in given}
        body = {k: v for k, v in given.items() if where[k] in ("body", "query")}
        headers = " ".join(f"[{tool.bindings[k].name}: {shown(v)}]" for k, v in given.items() if where[k] == "header")
        call = f"{tool.method.upper()} {path}" + (f" {headers}" if headers else "") + (f" {_short(body)}" if body else "")
    thing = step.entity or "object"
    verb = {"create": f"create {_a(thing)}", "update": f"change the {thing}", "other": f"{tool.name} on the {thing}",
            "delete": f"delete the {thing} that step {step.deletes} created" if step.deletes else f"delete the {thing}",
            "bulk": f"delete every {thing} (named with --allow-bulk)"}.get(step.verb, step.verb)
    if step.verb == "create" and step.creates is not None and step.creates.conditional:
        verb += " (it counts as this probe's only if the API says it created it)"
    return f"step {step.index}/{total}: {verb}: {call}"


def _in_path(bound: Bound) -> str:
    if bound.kind == "scope":
        return quote(str(bound.value), safe="")
    if bound.kind == "created":
        return f"<id from step {bound.step}>"
    return "<new atc-probe-... name>"


def _a(word: str) -> str:
    low = word.lower()
    vowel = low[:1] in "aeio" or (low[:1] == "u" and not low.startswith(("us", "uni", "ut", "ur")))
    return f"an {word}" if vowel else f"a {word}"


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(shown(value), ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


class WriteRunner:
    """Sends a ``WritePlan`` over a ``Session`` (see the module docstring)."""

    def __init__(self, session: Session, plan: WritePlan, *, say: Callable[[str], None] | None = None,
                 guard: ScopeGuard | None = None) -> None:
        self.s = session
        self.plan = plan
        self.say = say
        self.guard = guard
        self.values: dict[int, Any] = {}
        self.origin: dict[int, Source] = {}
        self.own_param: dict[int, str] = {}
        self.made: set[int] = set()
        self._moves: dict[int, tuple[list[int], list[Any]]] = {}
        self.answers: dict[int, tuple[Any, int]] = {}

    # -- filling a step -------------------------------------------------------------------------

    def _value(self, bound: Bound, step: Step, schema: Any) -> tuple[Any, Source] | str:
        if bound.kind == "scope":
            return bound.value, {"kind": "scope"}
        if bound.kind == "created":
            if bound.step not in self.made:
                done = self.plan.step(bound.step)
                why = done.result or done.status
                return f"step {bound.step} ({done.tool}) created nothing this probe owns ({why})"
            answer = self.answers.get(bound.step)
            if bound.want and bound.want != "id" and answer is not None and bound.step not in self.own_param:
                # ``{issue_number}`` takes the new issue's ``number``, not its ``id``
                found = _field(answer[0], bound.want, self.plan.step(bound.step).entity)
                if found is not None:
                    return found[0], {"kind": "harvest", "obs": answer[1], "path": list(found[1]),
                                      "tool": self.plan.step(bound.step).tool, "field": field_path(tuple(found[1]))}
            if self.values.get(bound.step) is None:
                return f"the answer of step {bound.step} did not say what it created"
            return self.values[bound.step], dict(self.origin.get(bound.step) or {"kind": "created"})
        root = bound.root
        made = fresh_name(schema, root=root, entity=step.entity)
        if made is None:
            return "no new name fits the parameter"
        return made, {"kind": "new"}

    def _fill(self, step: Step, tool: Tool) -> tuple[dict[str, Any], dict[str, Source]] | str:
        args: dict[str, Any] = {}
        provenance: dict[str, Source] = {}
        for pname, value in step.args.items():
            schema = tool.properties.get(pname)
            schema = schema if isinstance(schema, dict) else {}
            filled = self._resolve(value, step, schema, provenance, pname, True)
            if isinstance(filled, _Missing):
                return filled.why
            if isinstance(value, Bound) and pname not in tool.required:
                fitted = coerce(filled, schema)
                if fitted is None or not type_ok(fitted, schema):
                    provenance.pop(pname, None)
                    continue  # an optional link whose value does not fit (a string id for a number): left out
                filled = fitted
            args[pname] = filled
            provenance.setdefault(pname, {"kind": "made"})
        return args, provenance

    def _resolve(self, value: Any, step: Step, schema: dict[str, Any], provenance: dict[str, Source],
                 pname: str, top: bool = False) -> Any:
        if isinstance(value, Bound):
            got = self._value(value, step, schema)
            if isinstance(got, str):
                return _Missing(got)
            provenance.setdefault(pname, got[1])
            if self.guard is not None:
                self.guard.know(got[0])  # pinned, created or named by this probe: a path may name it
            moves = self._moves.setdefault(step.index, ([], []))
            if value.kind == "created":
                moves[0].append(value.step)
            elif value.kind == "new" and not value.own:
                moves[1].append(got[0])
            if value.own and step.index not in self.values:
                self.values[step.index] = got[0]  # the name this step gives what it creates
                if top:
                    self.own_param[step.index] = pname
            return got[0]
        if isinstance(value, list):
            items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
            out = []
            for item in value:
                filled = self._resolve(item, step, items or {}, provenance, pname)
                if isinstance(filled, _Missing):
                    return filled
                out.append(filled)
            return out
        if isinstance(value, dict):
            props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
            result = {}
            for key, item in value.items():
                sub = props.get(key) if isinstance(props, dict) else None
                filled = self._resolve(item, step, sub if isinstance(sub, dict) else {}, provenance, pname)
                if isinstance(filled, _Missing):
                    return filled
                result[key] = filled
            return result
        return value

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

    def _send(self, step: Step, round_: int) -> None:
        s = self.s
        state = s.states[step.tool]
        tool = state.tool
        if s.stopped and not (step.verb in ("delete", "bulk") and s.stop_reason == BUDGET_SPENT):
            return self._skip(step, state, f"the probe stopped first ({s.stop_reason})")
        if step.deletes is not None and step.deletes not in self.made:
            done = self.plan.step(step.deletes)
            if done.creates is not None and done.creates.conditional and done.status in ("done", "failed"):
                why = f"it existed before this probe ({done.result}): never deleted"
            else:
                why = f"step {step.deletes} ({done.tool}) created nothing this probe owns ({done.result or done.status})"
            return self._skip(step, state, why)
        filled = self._fill(step, tool)
        if isinstance(filled, str):
            return self._skip(step, state, filled)
        args, provenance = filled
        problem = s.caller.valid(tool, args)
        if problem is not None:
            return self._skip(step, state, f"its arguments do not fit the tool's schema: {problem}")
        if s.caller.budget.left(tool.name) <= 0:
            return self._skip(step, state, "the request budget is spent (--max-calls, --per-tool)")
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
        if planned.conditional:
            value = self.values.get(step.index)
            said = obs.status == 201 if obs.status is not None else _holds(obs.data, value)
            if not said:
                step.result = (step.result or "") + ": it existed before (the API did not say it created it)"
                return
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
        self.made.add(step.index)
        step.created = self.values.get(step.index)
        if self.guard is not None:
            self.guard.know(step.created)
            for key in (*_ID_KEYS, "number"):  # how later steps may name it: its id, its name, its number
                found = _field(obs.data, key, planned.entity)
                if found is not None:
                    self.guard.know(found[0])

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
        """What this probe created and did not delete (said in the report)."""
        deleted = {x.deletes for x in self.plan.steps if x.status == "done" and x.deletes is not None}
        out = []
        for step in self.plan.steps:
            if step.index in self.made and step.index not in deleted and step.creates is not None \
                    and step.creates.named:
                value = self.values.get(step.index)
                out.append(f"{step.entity or 'object'} {value!r} (step {step.index}, {step.tool})"
                           if value is not None else f"a {step.entity or 'object'} (step {step.index}, {step.tool}; "
                           "its answer named no id)")
        return out


class _Missing:
    def __init__(self, why: str) -> None:
        self.why = why


def created_candidates(session: Session, writes: WriteRunner) -> Callable[[Tool, str], list[Candidate]]:
    """Values for the reads of the pass after the creates: what the probe created where a read's
    path parameter names it (``GET /buckets/{bucket_id}/collections/{id}`` <- the collection step
    2 created), and the pinned values."""
    from probes.actions import Target
    from probes.plan import _prefixes
    from probes.scope import Scope

    scope = Scope(session.settings.scope)
    objects = [(step, step.creates) for step in writes.plan.steps
               if step.creates is not None and step.index in writes.made and writes.values.get(step.index) is not None]

    def provide(tool: Tool, pname: str) -> list[Candidate]:
        out: list[Candidate] = []
        role = session.planner.role(tool, pname)
        binding = tool.bindings.get(pname)
        key = f"{role.entity}_{role.attribute}" if role.entity and role.attribute else pname
        pin = scope.pin_for(tool, Target(pname, "ref", key, role.entity, role.attribute))
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
            prefixes = _prefixes(tool)
            for step, planned in reversed(objects):
                if planned.template is not None and position < len(prefixes) and \
                        prefixes[position] == planned.template.rstrip("/") + "/{}":
                    got = writes._value(Bound("created", step=step.index, want=role.attribute), step, schema)
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
