"""Filling the steps of a write plan: the placeholders of ``probes.plan.steps`` (``Bound``) made into the
values a request sends.

- a **pinned** value as pinned (``--scope bucket_id=throwaway``);
- what an earlier step **created**, named the way the parameter wants it (``identity``): the name
  the step gave it when the parameter takes that (``{name}``), else the field of that name in the
  create's answer (``{issue_number}`` takes the new issue's ``number``; ``DELETE /artifacts/{id}``
  the new artifact's ``id``, never the pinned ``key`` it was made with), else its id;
- a **new** name (``atc-probe-<random hex>``, inside a pinned root for paths);
- text the plan had to make up (``probes.arguments.values.MARK``): this run's own name, so that a second run
  never collides with what a first one made (a 409, or an upsert that answers the old object),
  while the parts a step deletes carry the same text they were added with.

Every value a step is filled with that names something is told to the scope guard
(``probes.plan.guard``): pinned, created or named by this probe, a path may name it.
"""

from __future__ import annotations

from typing import Any

from probes.arguments.harvest import field_path
from probes.arguments.values import MARK, coerce, type_ok, within
from probes.calls import Source
from probes.plan.created import field_of
from probes.plan.guard import ScopeGuard
from probes.plan.scope import fresh_name
from probes.plan.steps import Bound, Step, WritePlan
from probes.state import ProbeState
from protocols.model import Tool

__all__ = ["StepFiller", "Missing"]


class StepFiller:
    """The values of one probe's write plan: what each step named, created and was answered."""

    def __init__(self, probe_state: ProbeState, plan: WritePlan, guard: ScopeGuard | None = None) -> None:
        self.s = probe_state
        self.plan = plan
        self.guard = guard
        self.values: dict[int, Any] = {}
        self.origin: dict[int, Source] = {}
        self.own_param: dict[int, str] = {}
        #: Steps whose answer said what they made (later steps may name it; not yet a proof).
        self.made: set[int] = set()
        #: Why a step made nothing later steps can name (shown when they cannot be sent).
        self.unproven: dict[int, str] = {}
        #: New names a step sent that may name something it made (an upsert-like POST).
        self.named: dict[int, list[str]] = {}
        self._moves: dict[int, tuple[list[int], list[Any]]] = {}
        self.answers: dict[int, tuple[Any, int]] = {}
        #: The text this run writes where it must make one up (``atc-probe-<random hex>``).
        self.token = str(fresh_name({}))

    def _value(self, bound: Bound, step: Step, schema: Any) -> tuple[Any, Source] | str:
        if bound.kind == "scope":
            return bound.value, {"kind": "scope"}
        if bound.kind == "created":
            if bound.step not in self.made:
                done = self.plan.step(bound.step)
                why = self.unproven.get(bound.step) or done.result or done.status
                return f"step {bound.step} ({done.tool}) created nothing this probe can name ({why})"
            return self.identity(bound.step, bound.want)
        root = bound.root
        made = fresh_name(schema, root=root, entity=step.entity)
        if made is None:
            return "no new name fits the parameter"
        return made, {"kind": "new"}

    def identity(self, index: int, want: str) -> tuple[Any, Source] | str:
        """How later steps name what step ``index`` made, for a parameter that takes its ``want``
        (``id``, ``name``, ``number``): the name the step gave it when that is what is wanted, else
        the field of that name in the create's answer (``{issue_number}`` takes the new issue's
        ``number``; ``DELETE /artifacts/{id}`` the new artifact's ``id``, not the pinned ``key`` it
        was made with), else the id its answer gave."""
        step = self.plan.step(index)
        own = self.own_param.get(index)
        tool = self.s.states[step.tool].tool
        named_so = own is not None and (not want or self.s.planner.role(tool, own).attribute == want)
        answer = self.answers.get(index)
        if not named_so and answer is not None and want:
            found = field_of(answer[0], want, step.entity)
            if found is not None:
                return found[0], {"kind": "harvest", "obs": answer[1], "path": list(found[1]), "tool": step.tool,
                                  "field": field_path(tuple(found[1]))}
        if self.values.get(index) is None:
            return f"the answer of step {index} did not say what it created"
        return self.values[index], dict(self.origin.get(index) or {"kind": "created"})

    def _fill(self, step: Step, tool: Tool) -> tuple[dict[str, Any], dict[str, Source]] | str:
        args: dict[str, Any] = {}
        provenance: dict[str, Source] = {}
        for pname, value in step.args.items():
            schema = tool.properties.get(pname)
            schema = schema if isinstance(schema, dict) else {}
            filled = self._resolve(value, step, schema, provenance, pname, True)
            if isinstance(filled, Missing):
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
                return Missing(got)
            provenance.setdefault(pname, got[1])
            if self.guard is not None:
                self.guard.know(got[0])  # pinned, created or named by this probe: a path may name it
            moves = self._moves.setdefault(step.index, ([], []))
            if value.kind == "created":
                moves[0].append(value.step)
            elif value.kind == "new" and not value.own:
                moves[1].append(got[0])
                self.named.setdefault(step.index, []).append(got[0])
            if value.own and step.index not in self.values:
                self.values[step.index] = got[0]  # the name this step gives what it creates
                if top:
                    self.own_param[step.index] = pname
            return got[0]
        if value == MARK and "enum" not in schema and "const" not in schema:
            # Text the plan had to make up: this run's own name, so that a second run never
            # collides with what the first one made (409, or an upsert that answers the old one),
            # while the parts a step deletes carry the same text they were added with.
            made = self.token if type_ok(self.token, schema) and within(self.token, schema) else fresh_name(schema)
            if made is not None:
                self.named.setdefault(step.index, []).append(made)
                return made
            return value
        if isinstance(value, list):
            items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
            out = []
            for item in value:
                filled = self._resolve(item, step, items or {}, provenance, pname)
                if isinstance(filled, Missing):
                    return filled
                out.append(filled)
            return out
        if isinstance(value, dict):
            props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
            result = {}
            for key, item in value.items():
                sub = props.get(key) if isinstance(props, dict) else None
                filled = self._resolve(item, step, sub if isinstance(sub, dict) else {}, provenance, pname)
                if isinstance(filled, Missing):
                    return filled
                result[key] = filled
            return result
        return value

    def _ref_value(self, bound: Bound) -> Any:
        if bound.kind == "created":
            return self.values.get(bound.step)
        return bound.value

    def named_here(self, index: int) -> set[str]:
        """The names step ``index`` made up itself (own or not)."""
        step = self.plan.step(index)
        own = [v for v in step.args.values() if isinstance(v, Bound) and v.kind == "new" and v.own]
        out = {str(x) for x in self.named.get(index, [])}
        if own and self.values.get(index) is not None:
            out.add(str(self.values[index]))
        return out


class Missing:
    """Why a placeholder has no value yet (the step is not sent)."""

    def __init__(self, why: str) -> None:
        self.why = why
