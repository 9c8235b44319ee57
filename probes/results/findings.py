"""Findings: how a tool was documented, recorded so that a later probe need not ask again.

The response cache (``probes.cache``) replays single requests, which is all the model-free prober
needs: it makes the same plans again and finds every answer recorded. A model does not write the
same program twice, so in model mode a re-run would ask the model again and send new requests.
A *finding* records, per documented tool, the chain of calls up to its first successful answer
(each call's arguments, answer and where its arguments came from) and, in model mode, the
question and program; ``replay`` documents the tool from it with no model and no request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from probes.calls import Observation, Source
from probes.state import ProbeState, ToolState

__all__ = ["chain_of", "remember", "replay"]


def chain_of(obs: Observation, observations: Sequence[Observation]) -> list[Observation]:
    """``obs`` and every earlier observation its arguments came from (recursively), in order."""
    found: dict[int, Observation] = {}

    def visit(o: Observation, depth: int) -> None:
        if o.id in found or depth > 12:
            return
        found[o.id] = o
        for src in o.provenance.values():
            origin = src.get("obs")
            if isinstance(origin, int) and 0 <= origin < o.id and origin < len(observations):
                visit(observations[origin], depth + 1)

    visit(obs, 0)
    return [found[i] for i in sorted(found)]


def remember(probe_state: ProbeState, state: ToolState, own: Observation) -> None:
    """Record how ``state``'s tool was documented: the chain of calls up to ``own`` (its first
    success), with provenance as positions in that chain, and the question and program if any."""
    cache = probe_state.caller.cache
    if cache is None:
        return
    chain = chain_of(own, probe_state.caller.observations)
    rank = {o.id: i for i, o in enumerate(chain)}
    calls = []
    for o in chain:
        prov: dict[str, Any] = {}
        for arg, src in o.provenance.items():
            moved = dict(src)
            if isinstance(src.get("obs"), int):
                moved = {**moved, "obs": rank[src["obs"]]} if src["obs"] in rank else {"kind": "model"}
            prov[arg] = moved
        calls.append({**o.record(), "provenance": prov})
    given = state.programs.get(own.id) or {}
    cache.put_finding(state.name, {"program": given.get("program", ""), "question": given.get("question", ""),
                                   "source": state.source, "round": state.round, "calls": calls})


def replay(probe_state: ProbeState, state: ToolState, round_: int) -> bool:
    """Document ``state``'s tool from its recorded finding (no model, no request); False when
    there is none, or it no longer fits the tools."""
    cache = probe_state.caller.cache
    finding = cache.finding(state.name) if cache is not None else None
    if not finding or not isinstance(finding.get("calls"), list):
        return False
    caller = probe_state.caller
    own: Observation | None = None
    base = len(caller.observations)
    for rec in finding["calls"]:
        if not isinstance(rec, dict) or rec.get("tool") not in probe_state.states:
            continue
        raw = rec.get("provenance")
        prov: dict[str, Any] = raw if isinstance(raw, dict) else {}
        obs = Observation(id=len(caller.observations), tool=str(rec["tool"]), args=dict(rec.get("args") or {}),
                          kind=str(rec.get("kind")), status=rec.get("status"), data=rec.get("data"),
                          error=rec.get("error"), cached=True, round=round_,
                          provenance=_rebase(prov, base, len(caller.observations)),
                          helper_for=state.name if rec["tool"] != state.name else None)
        caller.observations.append(obs)
        if obs.tool == state.name:
            probe_state.observe(state, obs)
            if obs.ok and own is None:
                own = obs
        elif obs.ok:
            probe_state.helper_sample(obs)
    if own is None:
        return False
    if cache is not None:
        cache.hits += 1
    if finding.get("program"):
        state.programs[own.id] = {"program": str(finding["program"]), "question": str(finding.get("question") or "")}
    recorded_round = finding.get("round")
    probe_state.succeed(state, own, recorded_round if isinstance(recorded_round, int) else round_,
                    source=str(finding.get("source") or "model"))
    return True


def _rebase(provenance: dict[str, Any], base: int, own_id: int) -> dict[str, Source]:
    """Recorded provenance (positions in the recorded chain) moved to where the replayed calls sit."""
    out: dict[str, Source] = {}
    for arg, src in provenance.items():
        if not isinstance(src, dict):
            continue
        moved = dict(src)
        if isinstance(src.get("obs"), int):
            moved["obs"] = base + src["obs"]
            if moved["obs"] >= own_id:
                moved = {"kind": "model"}
        out[str(arg)] = moved
    return out
