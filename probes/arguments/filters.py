"""Optional filters that name another resource's id: how most real list APIs express relations.

``GET /comments`` documents fine without ``postId``, so the chain of probing never needs it, and
``list_posts -> list_comments`` would never be found. After discovery, every documented tool with
an optional query parameter named after an identifier of something else (``postId``,
``user_id``, ``albumId``, ``ownerId``; a bare ``owner`` or ``author`` when another tool's answers
hold values for it) is called once more with that filter set to a value another tool handed out
(``probes.arguments.harvest``). The answer is compared with the unfiltered one:

- fewer items, or every item carrying the value under the filter's name: the filter **narrows**;
  the link is recorded (``ToolReport.filters``: the tool and field the value came from, and how
  it narrowed), the tool depends on that tool, and the call becomes an example;
- the same answer: the API ignores the filter; it is left alone;
- no items: the value found nothing; the next candidate is tried (two at most).

Each try is a request of the tool's own budget (``--per-tool``).
"""

from __future__ import annotations

from typing import Any

from probes.arguments.harvest import Candidate
from probes.arguments.naming import ID_WORDS, IDENT_FIELDS, SYNONYMS, norm
from probes.arguments.planner import signature
from probes.arguments.values import NAMED
from probes.calls import Observation
from probes.state import ProbeState, ToolState

__all__ = ["probe_filters", "narrowing", "filter_params"]

#: Parameters that shape an answer rather than pick what it is about.
_SHAPING = frozenset("sort order fields include exclude expand cursor after before since until view mode "
                     "embed select callback pretty".split())
#: Filters that name a person, and the fields that hold a person's handle.
_PEOPLE = frozenset("owner author creator user assignee member login username maintainer".split())
_PERSON = ("login", "username", "handle", "user_name", "screen_name")
#: Values tried per filter at most.
TRIES = 2
#: The least belief in a value for it to be tried as a filter.
MIN_SCORE = 0.8


def filter_params(probe_state: ProbeState, state: ToolState) -> list[str]:
    """The optional query parameters of a documented tool that look like links to another tool."""
    tool = state.tool
    out = []
    for pname in tool.properties:
        binding = tool.bindings.get(pname)
        if pname in state.required() or binding is None or binding.location != "query":
            continue
        role = probe_state.planner.role(tool, pname)
        if role.text:
            continue
        if (role.entity and role.attribute in ID_WORDS) or (role.id_like and role.attribute in ID_WORDS) or \
                _bare_noun(probe_state, state, pname):
            out.append(pname)
    return out


def _bare_noun(probe_state: ProbeState, state: ToolState, pname: str) -> bool:
    """``owner``, ``author``: a one-word parameter for which another tool's answers hold a strong
    value. Not paging, sorting or shaping (``page``, ``sort``, ``language``): every answer has a
    ``page``, and it links to nothing."""
    schema = state.tool.properties.get(pname)
    if not isinstance(schema, dict) or schema.get("enum") or schema.get("type") not in (None, "string", "integer"):
        return False
    if "_" in norm(pname) or norm(pname) in NAMED or norm(pname) in _SHAPING:
        return False
    return bool(_links(probe_state, state, pname))


def _links(probe_state: ProbeState, state: ToolState, pname: str) -> list[Candidate]:
    """Values other tools handed out for ``pname``. For a bare noun (``owner``) only an object's
    identifier counts (a user's ``username``, ``login``, ``id``): a field that merely has the same
    name elsewhere (``certification`` of another list) is a value, not a link."""
    role = probe_state.planner.role(state.tool, pname)
    wire = norm(pname)
    also = _PERSON if wire in _PEOPLE else ()
    found = [c for c in probe_state.harvest.from_others(state.tool, pname, role, also=also) if c.score >= MIN_SCORE]
    if role.entity and role.attribute in ID_WORDS:
        return found
    return [c for c in found if c.seen is not None and c.seen.norm_key != wire and
            (c.seen.norm_key in IDENT_FIELDS or c.seen.norm_key in SYNONYMS.get(wire, ()) or c.seen.norm_key in also)]


def _items(data: Any) -> list[Any] | None:
    """The list an answer is about: the answer itself, or its largest list field."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        if lists:
            return max(lists, key=len)
    return None


def narrowing(baseline: Any, answer: Any, wire: str, value: Any) -> str | None:
    """How ``answer`` (filtered by ``wire=value``) narrows ``baseline``: a description, ``""``
    when it found nothing, None when the filter made no difference."""
    base, got = _items(baseline), _items(answer)
    if got is None or base is None:
        return None
    if not got:
        return ""
    keys = {norm(wire), norm(wire).removesuffix("_id")}
    holds = all(isinstance(item, dict) and any(norm(str(k)) in keys and str(v) == str(value) for k, v in item.items())
                for item in got)
    if len(got) < len(base):
        return f"{len(base)} -> {len(got)} items" + (f", all with {wire}={value!r}" if holds else "")
    if holds and got != base:
        return f"every item has {wire}={value!r}"
    return None


def probe_filters(probe_state: ProbeState, round_: int) -> None:
    """Try the link-like optional filters of every documented tool (see the module docstring)."""
    for state in list(probe_state.states.values()):
        if probe_state.stopped:
            return
        if state.status != "documented" or not state.successes or state.tool.method.upper() not in ("GET", "MCP") \
                or not probe_state.reads(state.tool):
            continue  # (a write is sent only as a step of the write plan)
        baseline = state.successes[0]
        for pname in filter_params(probe_state, state):
            if pname in baseline.args or probe_state.caller.budget.left(state.name) <= 0:
                continue
            _one(probe_state, state, baseline, pname, round_)


def _one(probe_state: ProbeState, state: ToolState, baseline: Observation, pname: str, round_: int) -> None:
    tool = state.tool
    binding = tool.bindings.get(pname)
    wire = binding.name if binding and binding.name else pname
    tried = 0
    for cand in _links(probe_state, state, pname):
        if tried >= TRIES or probe_state.caller.budget.left(state.name) <= 0 or probe_state.stopped:
            return
        if cand.seen is None or cand.score < MIN_SCORE:
            continue
        args = {**baseline.args, pname: cand.value}
        if signature(args) in state.tried or probe_state.caller.valid(tool, args) is not None:
            continue
        state.tried.add(signature(args))
        provenance = {**baseline.provenance, pname: cand.source}
        obs = probe_state.caller.call(tool, args, provenance=provenance, round_=round_)
        probe_state.observe(state, obs)
        tried += 1
        if not obs.ok:
            return
        found = narrowing(baseline.data, obs.data, wire, cand.value)
        if found is None:
            return  # the API ignores the filter
        if found == "":
            continue  # nothing for this value: another may find something
        state.successes.append(obs)
        probe_state.harvest.add(obs, tool)
        state.filters[pname] = {"tool": cand.seen.tool, "field": cand.seen.field, "narrowed": found}
        if cand.seen.tool not in state.depends_on:
            state.depends_on.append(cand.seen.tool)
        return
