"""The write plan: which unsafe calls a probe sends, in which order, and with which arguments.

The plan is made from the tools alone (their ``probes.plan.actions``), the ``--scope`` pins and the
bulk deletes named with ``--allow-bulk``, before anything is sent; ``--dry-run`` prints it, and a
real run sends exactly its steps. The rules, in the order they apply:

1. **Only under the scope.** Every argument that names something (a path parameter, an id-like
   query or body parameter, an MCP argument such as ``entityName`` or ``path``) takes a pinned
   value, or the value of something this probe created, or -- for the new thing a create
   names itself -- a new ``atc-probe-...`` name (inside a pinned root for paths). A call none of
   whose arguments is pinned or created (``POST /accounts``, ``POST /__flush__``) touches nothing
   in the scope: it is never sent. Values seen in responses are never used for a write: they are
   the user's data.
2. **Creates first**, parents before children (``PUT /buckets/{id}`` of a pinned bucket, then
   ``POST /buckets/{bucket_id}/collections``, then records in that collection), then
   **updates**, then **other actions** on what is in scope, then **deletes**, last.
3. **Deletes only of what this probe created**, in reverse order of creation (a record before its
   collection; a part, ``DELETE /users/{id}/avatar``, before its object). A pinned object is
   deleted only when the probe's own create made it (HTTP 201, or an answer that holds the new
   name); one that existed before is never deleted.
4. **Bulk deletes never** (a delete that names no object: ``DELETE /accounts``), unless named with
   ``--allow-bulk TOOL``; even then its path stays in the scope, and it comes after every other
   delete.

A step whose object was not created (its create failed, or the probe stopped) is not sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from probes.arguments.naming import singular
from probes.arguments.values import MARK, coerce, made_value
from probes.plan.actions import Action, Target, template
from probes.plan.scope import Scope, fresh_name
from protocols.model import Tool

__all__ = ["Bound", "Planned", "Step", "WritePlan", "plan_writes", "path_prefixes", "made_value", "shown", "MARK"]

_PARAM = re.compile(r"^\{([^{}/]+)\}$")


@dataclass(frozen=True)
class Bound:
    """How a step fills one argument that names something: ``scope`` (a pinned value), ``created``
    (what step ``step`` created), ``new`` (a new name, inside ``root`` for paths). ``own``: it
    names what the step itself creates. ``want``: which field of the created thing the argument
    takes (``number`` for ``{issue_number}``, ``id`` for ``{id}``)."""

    kind: str
    value: Any = None
    step: int = 0
    root: str | None = None
    pin: str = ""
    own: bool = False
    want: str = field(default="", compare=False)

    def label(self) -> str:
        if self.kind == "scope":
            return f"{self.value!r} (--scope {self.pin})"
        if self.kind == "created":
            return f"<what step {self.step} created>"
        if self.kind == "new":
            return f"<a new name inside {self.root}>" if self.root else "<a new atc-probe-... name>"
        return repr(self.value)


@dataclass
class Planned:
    """Something a step creates. ``template`` (HTTP) is the collection it lives in (parameters
    written ``{}``) and ``parents`` how the step filled the path parameters before it;
    ``refs`` (MCP) how it filled the arguments that name other things. ``conditional``: its name
    is pinned, so it counts as created only when the answer says so. ``named``: later steps can
    name it (the API gives it an id, or the step named it); an MCP ``add_observations`` makes
    things nothing names again but the arguments they were made with."""

    step: int
    tool: str
    entity: str | None
    attribute: str
    template: str | None = None
    parents: tuple[Bound, ...] = ()
    refs: dict[str, Bound] = field(default_factory=dict)
    conditional: bool = False
    named: bool = True


@dataclass
class Step:
    """One unsafe call of the plan. ``args`` holds plain values and ``Bound`` placeholders
    (resolved when it is sent); ``uses`` the steps whose objects it needs; ``deletes`` the step
    whose object it deletes; ``creates`` what it makes. The runtime fields say what happened."""

    index: int
    tool: str
    verb: str
    entity: str | None
    method: str
    path: str
    args: dict[str, Any]
    uses: list[int] = field(default_factory=list)
    deletes: int | None = None
    creates: Planned | None = None
    status: str = "planned"
    says: str = ""
    result: str | None = None
    sent_args: dict[str, Any] | None = None
    created: Any = None
    #: For a create of a pinned name: the read asked first whether it exists (``GET /buckets/{}``).
    check: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.index, "tool": self.tool, "action": self.verb, "method": self.method, "path": self.path,
                "args": self.sent_args if self.sent_args is not None else shown(self.args),
                "status": self.status, "says": self.says, "result": self.result, "created": self.created,
                "uses": self.uses, "deletes": self.deletes, **({"check": self.check} if self.check else {})}


@dataclass
class WritePlan:
    """The steps in the order they are sent, and why every other unsafe tool is never sent."""

    steps: list[Step] = field(default_factory=list)
    never: dict[str, str] = field(default_factory=dict)

    def step(self, index: int) -> Step:
        return self.steps[index - 1]


def shown(value: Any) -> Any:
    """Arguments as they are shown before they are filled: every placeholder as its label."""
    if isinstance(value, Bound):
        return value.label()
    if isinstance(value, dict):
        return {k: shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shown(v) for v in value]
    return value


def path_prefixes(tool: Tool) -> list[str]:
    """For each path parameter, the template of the path up to and including it."""
    segments = [s for s in tool.path.strip("/").split("/") if s]
    out = []
    for i, seg in enumerate(segments):
        if _PARAM.match(seg):
            out.append(template("/".join(segments[: i + 1])))
    return out


def _same(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and singular(str(a)) == singular(str(b))


class _Planner:
    def __init__(self, scope: Scope, allow_bulk: set[str]) -> None:
        self.scope = scope
        self.allow_bulk = allow_bulk
        self.objects: list[Planned] = []
        self.steps: list[Step] = []
        self.never: dict[str, str] = {}

    # -- binding one argument ------------------------------------------------------------------

    def _object_at(self, tool: Tool, target: Target, parents: list[Bound], prefixes: list[str],
                   action: Action) -> Planned | None:
        """The latest planned object that fits ``target`` (HTTP: by the path it lives at and the
        same parents; MCP: by its kind)."""
        for obj in reversed(self.objects):
            if target.position >= 0 and not action.mcp:
                if obj.template is not None and target.position < len(prefixes) and \
                        prefixes[target.position] == obj.template.rstrip("/") + "/{}" and \
                        obj.parents == tuple(parents[: target.position]):
                    return obj
            elif target.attribute == "path":
                # a file tool on a file the probe made, a directory tool on a directory, else any path
                same = [o for o in reversed(self.objects) if o.attribute == "path" and _same(o.entity, action.entity)]
                if same:
                    return same[0]
                if obj.attribute == "path":
                    return obj
            elif action.mcp and obj.template is None:
                if obj.named and (target.entity is None or _same(target.entity, obj.entity)):
                    return obj
            elif not action.mcp and target.entity and _same(target.entity, obj.entity):
                return obj
        return None

    def _bind(self, tool: Tool, action: Action, verb: str, *, for_object: Planned | None = None) -> tuple[dict[Target, Bound], list[int], bool, bool] | str:
        """How each target of ``tool`` is filled for a step of ``verb``: (bounds, steps used,
        anchored, conditional), or why the step cannot be made."""
        prefixes = path_prefixes(tool) if not action.mcp else []
        bounds: dict[Target, Bound] = {}
        parents: list[Bound] = []
        uses: list[int] = []
        anchored = conditional = False
        deepest = action.own or (action.anchors[-1] if action.anchors else None)
        for target in action.targets:
            bound: Bound | None = None
            schema = tool.properties.get(target.param)
            schema = schema if isinstance(schema, dict) and target.field is None else {}
            if for_object is not None:
                bound = self._for_object(target, deepest, for_object)
            if bound is None and target.attribute == "path":
                bound = self._path_bound(target, verb, action, parents, prefixes, tool)
            elif bound is None:
                pin = self.scope.pin_for(tool, target)
                creating = target.role == "own" and verb == "create"
                value = coerce(pin[1], schema) if pin is not None else None
                if pin is not None and value is None and schema.get("type") not in (None, "string"):
                    if target.required:
                        return (f"--scope {pin[0]}={pin[1]} does not fit {target.label} (it takes "
                                f"{schema.get('type')})")
                    continue  # a pin for another kind of id: an optional argument is left out
                if pin is not None:
                    bound = Bound("scope", pin[1] if value is None else value, pin=f"{pin[0]}={pin[1]}",
                                  own=creating)
                    conditional = conditional or creating
                elif target.role == "new" and self.scope.roots:
                    bound = Bound("new", root=self.scope.roots[0])  # a move's destination: inside the root
                elif creating or target.role == "new":
                    if not target.required and target.role == "own":
                        continue  # the API names what it creates
                    if fresh_name(schema) is None:
                        return (f"it would have to name the new {action.entity or 'object'} ({target.label}) and "
                                f"{target.label} takes no free text; --scope {target.key}=VALUE would pin it")
                    bound = Bound("new", own=creating)
                else:
                    obj = self._object_at(tool, target, parents, prefixes, action)
                    if obj is not None:
                        bound = Bound("created", step=obj.step, want=target.attribute)
            if bound is None:
                if not target.required and target.role == "ref":
                    continue
                return self._missing(tool, target, verb)
            if bound.kind in ("scope", "created") or (bound.kind == "new" and bound.root):
                anchored = True
            if bound.kind == "created" and bound.step not in uses:
                uses.append(bound.step)
            bounds[target] = bound
            if target.position >= 0:
                parents.append(bound)
        return bounds, uses, anchored, conditional

    def _for_object(self, target: Target, deepest: Target | None, obj: Planned) -> Bound | None:
        """How a delete of ``obj`` fills ``target``: the object itself where the target names it;
        the parents and references it was created with elsewhere (so a delete never reaches
        beyond what was created)."""
        if obj.template is None:
            if _same(target.entity, obj.entity) or (target.attribute == "path" and obj.attribute == "path"):
                return Bound("created", step=obj.step)
            return obj.refs.get(target.key)
        if target is deepest:
            return Bound("created", step=obj.step, want=target.attribute)
        if 0 <= target.position < len(obj.parents):
            return obj.parents[target.position]
        return None

    def _path_bound(self, target: Target, verb: str, action: Action, parents: list[Bound], prefixes: list[str],
                    tool: Tool) -> Bound | None:
        """A path argument: a new path inside a pinned root for what is created or moved, else a
        path the probe created (never the root itself, never a path it only saw)."""
        roots = self.scope.roots
        if target.role == "new" or (target.role == "own" and verb == "create"):
            if roots:
                return Bound("new", root=roots[0], own=target.role == "own")
            # an HTTP path in a repository (``/repos/{owner}/{repo}/contents/{path}``), not a file of
            # this machine: a new name under parents that are in the scope
            return Bound("new", own=target.role == "own") if not action.mcp and parents else None
        obj = self._object_at(tool, target, parents, prefixes, action)
        return Bound("created", step=obj.step) if obj is not None else None

    def _missing(self, tool: Tool, target: Target, verb: str) -> str:
        if target.attribute == "path":
            if not self.scope.roots:
                return f"it writes files ({target.label}) and no --scope pins a folder: pin one with --scope path=DIR"
            return f"no file or folder this probe created fits {target.label}"
        hint = f"--scope {target.key}=VALUE would pin it" if target.role != "new" else ""
        what = (f"an {target.entity}" if target.entity[:1] in "aeiou" else f"a {target.entity}") if target.entity \
            else repr(target.label)
        return (f"{target.label} must name {what} in the scope (pinned or created by this probe) and none is"
                + (f"; {hint}" if hint else ""))

    # -- steps ----------------------------------------------------------------------------------

    def _args(self, tool: Tool, bounds: dict[Target, Bound], verb: str) -> dict[str, Any] | str:
        """The step's arguments: the targets' bounds (inside lists of objects where they belong)
        and every other required parameter made from its schema."""
        args: dict[str, Any] = {}
        by_param: dict[str, list[tuple[Target, Bound]]] = {}
        for target, bound in bounds.items():
            by_param.setdefault(target.param, []).append((target, bound))
        for pname, schema in tool.properties.items():
            schema = schema if isinstance(schema, dict) else {}
            placed = by_param.get(pname)
            if placed:
                top = [b for t, b in placed if t.field is None]
                if top:
                    args[pname] = [top[0]] if schema.get("type") == "array" else top[0]
                    continue
                found = schema.get("items")
                items: dict[str, Any] = found if isinstance(found, dict) else {}
                item = made_value({**items, "required": sorted(set(items.get("required") or [])
                                                              - {t.field for t, _ in placed})}, None, pname) or {}
                if not isinstance(item, dict):
                    return f"cannot make an item of {pname!r}"
                for target, bound in placed:
                    sub = (items.get("properties") or {}).get(target.field) or {}
                    item[str(target.field)] = [bound] if isinstance(sub, dict) and sub.get("type") == "array" \
                        else bound
                args[pname] = [item]
                continue
            if pname in tool.required:
                value = made_value(schema, tool, pname)
                if value is None:
                    return f"no value can be made for the required {pname!r}"
                args[pname] = value
        body = [p for p, b in tool.bindings.items() if b.location == "body"]
        if verb in ("create", "update") and body and not any(p in args for p in body):
            # Many APIs want a JSON body on a write even when every field is optional
            # (``{"data": {}}``): the first object-valued one, with what it requires.
            first = next((p for p in body if isinstance(tool.properties.get(p), dict)
                          and tool.properties[p].get("type") == "object"), None)
            if first is not None:
                value = made_value(tool.properties[first], None, first)
                if value is not None:
                    args[first] = value
        binding_names = {p: (b.name or "").lower() for p, b in tool.bindings.items() if b.location == "header"}
        for pname, wire in binding_names.items():
            if wire == "if-none-match" and pname not in args and tool.method.upper() == "PUT" and verb == "create":
                args[pname] = "*"  # create only: the API answers 412 rather than replace what exists
        return args

    def add(self, tool: Tool, action: Action, verb: str, *, for_object: Planned | None = None) -> Step | str:
        bound = self._bind(tool, action, verb, for_object=for_object)
        if isinstance(bound, str):
            return bound
        bounds, uses, anchored, conditional = bound
        if not anchored:
            return ("outside the scope: nothing it writes is pinned by --scope or created by this probe"
                    + (f" (--scope {action.own.key}=VALUE would pin it)" if action.own is not None else ""))
        args = self._args(tool, bounds, verb)
        if isinstance(args, str):
            return args
        index = len(self.steps) + 1
        step = Step(index, tool.name, verb, action.entity, tool.method.upper(), tool.path, args, uses=uses)
        if for_object is not None:
            step.deletes = for_object.step
        if verb == "create":
            own = next((t for t in bounds if t.role == "own"), None)
            parents = tuple(b for t, b in bounds.items() if t.position >= 0 and t is not own)
            refs = {t.key: b for t, b in bounds.items() if t.role in ("ref", "parent")}
            step.creates = Planned(index, tool.name, action.entity, own.attribute if own is not None else "id",
                                   template=action.collection if not action.mcp else None, parents=parents,
                                   refs=refs, conditional=conditional, named=own is not None or not action.mcp)
            self.objects.append(step.creates)
        self.steps.append(step)
        return step


def plan_writes(tools: list[tuple[Tool, Action]], scope: Scope, allow_bulk: set[str] | frozenset[str] = frozenset()
                ) -> WritePlan:
    """The plan for the unsafe ``tools`` (see the module docstring)."""
    planner = _Planner(scope, set(allow_bulk))
    reasons: dict[str, str] = {}
    posts = {a.collection for _, a in tools if a.verb == "create" and not a.mcp}
    # A PUT of one object creates where nothing else makes that object: no POST to its collection
    # (``PUT /buckets/{id}``), or, for a pinned id, no POST that can take the pinned id
    # (``POST /posts {"id": ...}``). Otherwise the PUT changes what the POST made, or what is pinned.
    pinned_posts = {a.collection for t, a in tools if a.verb == "create" and not a.mcp and a.own is not None
                    and scope.pin_for(t, a.own) is not None}
    creates = [(t, a) for t, a in tools if a.verb == "create" or
               (a.verb == "update" and a.may_create and (a.collection not in posts or (
                   a.own is not None and scope.pin_for(t, a.own) is not None and a.collection not in pinned_posts)))]
    # parents before children: fewer path parameters first, then spec order
    creates.sort(key=lambda ta: len([x for x in ta[1].targets if x.position >= 0]))
    pending = list(creates)
    while pending:
        progressed = False
        for tool, action in list(pending):
            made = planner.add(tool, action, "create")
            if isinstance(made, Step):
                pending.remove((tool, action))
                reasons.pop(tool.name, None)
                progressed = True
            else:
                reasons[tool.name] = made
        if not progressed:
            break
    done = {s.tool for s in planner.steps}
    for verb in ("update", "other"):
        for tool, action in tools:
            if action.verb != verb or tool.name in done:
                continue
            made = planner.add(tool, action, verb)
            reasons[tool.name] = made if isinstance(made, str) else ""
    # A bulk delete named with --allow-bulk inside a created object counts as deleting a part of it.
    deleters = [(t, a) for t, a in tools if a.verb == "delete" or (a.verb == "bulk" and t.name in planner.allow_bulk)]
    used: set[str] = set()
    for obj in reversed(list(planner.objects)):
        fits = [(t, a) for t, a in deleters if _deletes(t, a, obj)]
        # a part of the object (``/users/{id}/avatar``, its records) before the object itself
        fits.sort(key=lambda ta: (not _is_part(ta[0], ta[1], obj), -len(ta[0].path)))
        for tool, action in fits:
            made = planner.add(tool, action, action.verb, for_object=obj)
            if isinstance(made, Step):
                used.add(tool.name)
                if not _is_part(tool, action, obj):
                    break  # the object is gone: one delete of it, newest object first
            else:
                reasons.setdefault(tool.name, made)
    for tool, action in deleters:
        if tool.name not in used and action.verb == "delete":
            reasons.setdefault(tool.name, "it deletes only what this probe created, and the plan creates no "
                                          f"{action.entity or 'such thing'} it could delete")
    for tool, action in tools:
        if action.verb != "bulk" or tool.name in used:
            continue
        if tool.name not in planner.allow_bulk:
            reasons[tool.name] = (f"a bulk {'delete' if tool.method.upper() in ('DELETE', 'MCP') else 'change'}: it "
                                  f"names no single {action.entity or 'object'} and would reach every one, "
                                  f"whoever made it; name it with --allow-bulk {tool.name} to allow it")
            continue
        made = planner.add(tool, action, "bulk")
        if isinstance(made, str) and not action.anchors:
            step = Step(len(planner.steps) + 1, tool.name, "bulk", action.entity, tool.method.upper(), tool.path,
                        {p: made_value(s, tool, p) for p, s in tool.properties.items() if p in tool.required})
            planner.steps.append(step)  # named with --allow-bulk and placed nowhere: the user's explicit choice
        elif isinstance(made, str):
            reasons[tool.name] = made
    sent = {s.tool for s in planner.steps}
    never = {name: why for name, why in reasons.items() if name not in sent and why}
    for tool, _ in tools:
        if tool.name not in sent and tool.name not in never:
            never[tool.name] = "nothing in the plan for it"
    return WritePlan(steps=planner.steps, never=never)


def _deletes(tool: Tool, action: Action, obj: Planned) -> bool:
    """Whether delete ``tool`` acts on ``obj`` or on a part of it (a bulk delete of what lies
    inside it)."""
    if action.mcp or obj.template is None:
        return action.mcp and obj.template is None and action.verb == "delete" and (
            _same(action.entity, obj.entity) or (obj.attribute == "path" and any(
                t.attribute == "path" for t in action.targets)))
    positional = [t for t in action.targets if t.position >= 0]
    deepest = action.own if action.verb == "delete" else (positional[-1] if positional else None)
    if deepest is None or deepest.position < 0:
        return False
    prefixes = path_prefixes(tool)
    return deepest.position < len(prefixes) and prefixes[deepest.position] == obj.template.rstrip("/") + "/{}"


def _is_part(tool: Tool, action: Action, obj: Planned) -> bool:
    """A delete of a part of the object (a literal tail after its parameter), not of the object."""
    return action.verb == "bulk" or (not action.mcp and template(tool.path) != (obj.template or "").rstrip("/") + "/{}")
