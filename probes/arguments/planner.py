"""Choosing the arguments of the next probe request for a tool: coherent, ranked, never repeated.

A *plan* is one set of arguments for a tool's required parameters, with the belief that it works
(its weakest argument's score: a call is only as good as its worst guess) and the provenance of
every argument. Plans are built around an *anchor*: one good candidate value, plus the values that
came with it. When a value was harvested from an object, that object's other fields and the
arguments of the request that returned it are the most coherent choices for the tool's other
parameters: the ``episode_number`` found in ``get_season(tv_id=5, season_number=2)`` goes with
``tv_id=5`` and ``season_number=2``, not with a ``tv_id`` seen elsewhere. Those *inherited* values
take the anchor's score, and a plan that inherits more ranks higher among equals.

Plans already tried (by their canonical arguments) and values that proved wrong for a parameter
(a 400 naming it) are never proposed again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from probes.arguments.harvest import Candidate, Harvest, field_path
from probes.arguments.naming import ParamRole, norm, param_role
from probes.arguments.values import coerce, schema_values, within
from probes.calls import Observation, Source
from protocols.model import Tool

__all__ = ["Plan", "Planner", "signature"]

#: Candidates per parameter that may anchor a plan.
ANCHORS = 4


def signature(args: dict[str, Any]) -> str:
    """The canonical form of a set of arguments (for "tried already")."""
    return json.dumps(args, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))


@dataclass
class Plan:
    """Arguments for one request. ``score`` is the weakest argument's belief, ``total`` their sum,
    ``inherited`` how many arguments came along with the anchor (coherence)."""

    args: dict[str, Any]
    provenance: dict[str, Source] = field(default_factory=dict)
    score: float = 1.0
    total: float = 0.0
    inherited: int = 0

    @property
    def harvested(self) -> bool:
        """Whether any argument came from a response (the call then depends on other tools)."""
        return any(s.get("kind") in ("harvest", "inherit") for s in self.provenance.values())

    def key(self) -> tuple[float, int, float]:
        return (-round(self.score, 6), -self.inherited, -round(self.total, 6))


class Planner:
    """Builds plans from the harvest and the schemas. ``observations`` is the caller's list (the
    planner reads the arguments of the requests that produced harvested values)."""

    def __init__(self, harvest: Harvest, observations: Sequence[Observation]) -> None:
        self.harvest = harvest
        self.observations = observations
        self._roles: dict[tuple[str, str], ParamRole] = {}
        #: More values for a parameter, from outside the harvest (what the probe's writes
        #: created, the --scope pins: ``probes.plan.send.created_candidates``).
        self.pins: Callable[[Tool, str], list[Candidate]] | None = None
        #: Tools whose path parameters take only those values (the pins and what the probe created,
        #: never one seen in an answer): reads by POST, whose guess that they only read may be wrong.
        self.scoped: set[str] = set()

    def role(self, tool: Tool, pname: str) -> ParamRole:
        key = (tool.name, pname)
        role = self._roles.get(key)
        if role is None:
            role = self._roles[key] = param_role(tool, pname)
        return role

    def candidates(self, tool: Tool, pname: str, bad: Sequence[Any] = (), *, weak: bool = False) -> list[Candidate]:
        """Every value worth trying for one parameter, best first (harvested before made on ties)."""
        role = self.role(tool, pname)
        binding = tool.bindings.get(pname)
        if tool.name in self.scoped and binding is not None and binding.location == "path":
            found = self.pins(tool, pname) if self.pins is not None else []
            made: list[Candidate] = []
        else:
            found = self.harvest.candidates(tool, pname, role, weak=weak)
            if self.pins is not None:
                found = self.pins(tool, pname) + found
            made = [Candidate(m.value, m.score, {"kind": m.source}) for m in
                    schema_values(tool.properties.get(pname), role)]
        merged = sorted(found + made, key=lambda c: -c.score)
        out: list[Candidate] = []
        seen: list[Any] = []
        for cand in merged:
            if cand.value in seen or cand.value in bad:
                continue
            seen.append(cand.value)
            out.append(cand)
        return out

    def plans(self, tool: Tool, required: Sequence[str], *, tried: set[str] | None = None,
              bad: dict[str, list[Any]] | None = None, weak: bool = False, limit: int = 6) -> list[Plan]:
        """Untried plans for ``tool`` filling ``required``, best first; [] when some parameter has
        no value at all (see ``missing``)."""
        tried = tried or set()
        bad = bad or {}
        if not required:
            plan = Plan(args={})
            return [] if signature(plan.args) in tried else [plan]
        cands = {p: self.candidates(tool, p, bad.get(p, ()), weak=weak) for p in required}
        if any(not c for c in cands.values()):
            return []
        built: dict[str, Plan] = {}
        for anchor in required:
            for cand in cands[anchor][:ANCHORS]:
                around = self._around(tool, required, anchor, cand, cands, bad)
                if around is None:
                    continue
                sig = signature(around.args)
                if sig in tried:
                    continue
                if sig not in built or around.key() < built[sig].key():
                    built[sig] = around
        # Plans made of the best remaining value of each parameter, for when every anchor's
        # combination was tried: walk down each parameter's list in turn.
        for depth in range(1, 4):
            for p in required:
                if len(cands[p]) <= depth:
                    continue
                chosen = {q: cands[q][depth if q == p else 0] for q in required}
                plan = _plan_of(chosen, 0)
                sig = signature(plan.args)
                if sig not in tried and sig not in built:
                    built[sig] = plan
        ranked = sorted(built.values(), key=Plan.key)[:limit]
        for plan in ranked:  # the tool's own parameter order, as a person would write the call
            plan.args = {p: plan.args[p] for p in required}
            plan.provenance = {p: plan.provenance[p] for p in required}
        return ranked

    def missing(self, tool: Tool, required: Sequence[str]) -> list[str]:
        """Required parameters for which no value at all is known."""
        return [p for p in required if not self.candidates(tool, p, weak=True)]

    # -- one plan ------------------------------------------------------------------------------

    def _around(self, tool: Tool, required: Sequence[str], anchor: str, cand: Candidate,
                cands: dict[str, list[Candidate]], bad: dict[str, list[Any]]) -> Plan | None:
        chosen: dict[str, Candidate] = {anchor: cand}
        inherited = 0
        for other in required:
            if other == anchor:
                continue
            found = self._inherit(tool, other, cand, bad.get(other, ()))
            if found is not None:
                chosen[other] = found
                inherited += 1
            elif cands[other]:
                chosen[other] = cands[other][0]
            else:
                return None
        return _plan_of(chosen, inherited)

    def _inherit(self, tool: Tool, pname: str, anchor: Candidate, bad: Sequence[Any]) -> Candidate | None:
        """A value for ``pname`` that came with the anchor: a sibling field of the same name in the
        anchor's object, else an argument of the same name of the request that returned it."""
        seen = anchor.seen
        if seen is None:
            return None
        binding = tool.bindings.get(pname)
        wanted = norm(binding.name if binding and binding.name else pname)
        schema = tool.properties.get(pname)
        schema = schema if isinstance(schema, dict) else {}
        for key, value in seen.siblings.items():
            if norm(key) == wanted and key != seen.key:
                fixed = coerce(value, schema)
                if fixed is not None and fixed not in bad and within(fixed, schema):
                    path = [*seen.path[:-1], key]
                    return Candidate(fixed, anchor.score, {
                        "kind": "harvest", "obs": seen.obs, "path": None if seen.text else path, "tool": seen.tool,
                        "field": f"(text) {key}" if seen.text else field_path(tuple(path))})
        if 0 <= seen.obs < len(self.observations):
            origin = self.observations[seen.obs]
            for arg, value in origin.args.items():
                if norm(arg) == wanted:
                    fixed = coerce(value, schema)
                    if fixed is not None and fixed not in bad and within(fixed, schema):
                        return Candidate(fixed, anchor.score, {"kind": "inherit", "obs": origin.id, "arg": arg})
        return None


def _plan_of(chosen: dict[str, Candidate], inherited: int) -> Plan:
    scores = [c.score for c in chosen.values()]
    return Plan(args={p: c.value for p, c in chosen.items()}, provenance={p: c.source for p, c in chosen.items()},
                score=min(scores) if scores else 1.0, total=sum(scores), inherited=inherited)
