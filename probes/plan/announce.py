"""What a probe says before each unsafe call: one line naming the step, what it does to what, and the
request as it will be sent (``--dry-run`` prints the same lines with placeholders for what is not
known yet: ``<id from step 2>``, ``<new atc-probe-... name>``)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from probes.plan.steps import Bound, Step, shown
from protocols.model import Tool

__all__ = ["describe"]


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
    if step.verb == "create" and step.creates is not None and step.creates.conditional and \
            tool.method.upper() == "MCP":
        verb += " (it counts as this probe's only if the answer says it made it)"
    elif step.verb == "create" and step.creates is not None and step.creates.conditional:
        verb += (f" (first GET {_filled_check(step, tool, given)}: only if that answers 404 is it created, and then "
                 "deleted at the end)"
                 if step.check else " (no read can tell first whether it exists: it counts as this probe's only if "
                 "the API answers 201 with a new id, and only that id is deleted)")
    return f"step {step.index}/{total}: {verb}: {call}"


def _filled_check(step: Step, tool: Tool, given: dict[str, Any]) -> str:
    """The read asked first, with the values it will be sent: the step's path values in order, then
    the pinned name (``GET /work_pools/atc-scratch``)."""
    order = sorted((p for p, b in tool.bindings.items() if b.location == "path" and p in given),
                   key=lambda p: tool.path.find("{" + (tool.bindings[p].name or p) + "}"))
    values = [given[p] for p in order]
    own = [v for p, v in given.items() if p not in order and isinstance(v, Bound) and v.kind == "scope" and v.own]
    values += own
    out = []
    for seg in str(step.check).split("/"):
        if seg.startswith("{") and seg.endswith("}") and values:
            value = values.pop(0)
            seg = _in_path(value) if isinstance(value, Bound) else quote(str(value), safe="")
        out.append(seg)
    return "/".join(out)


def _in_path(bound: Bound) -> str:
    if bound.kind == "scope":
        return quote(str(bound.value), safe="")
    if bound.kind == "created":
        return f"<{bound.want or 'id'} from step {bound.step}>"
    return "<new atc-probe-... name>"


def _a(word: str) -> str:
    low = word.lower()
    vowel = low[:1] in "aeio" or (low[:1] == "u" and not low.startswith(("us", "uni", "ut", "ur")))
    return f"an {word}" if vowel else f"a {word}"


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(shown(value), ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
