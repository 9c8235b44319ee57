"""What a tool that may change data does, read from its method, path and name: the input of the
write plan (``probes.plan.send``).

``action_of(tool, collection)`` answers with an ``Action``: a *verb* and the arguments that name
what the call acts on (its *targets*).

Verbs:

- ``read``: GET/HEAD, or an MCP tool annotated ``readOnlyHint`` (``probes.plan.safety`` decides);
- ``create``: a POST to a collection (``POST /buckets/{bucket_id}/collections``), a PUT to one
  object (``PUT /buckets/{id}``: "create or replace"; it counts as created only when the API
  says so), an MCP tool named ``create_*``/``add_*``/``write_*``...;
- ``update``: PUT/PATCH of one object, ``update_*``/``edit_*``/``move_*``/``set_*``;
- ``delete``: DELETE of one object (or of a part of one: ``DELETE /users/{id}/avatar``), a GET or
  POST named ``delete``/``remove``..., an MCP ``delete_*``/``remove_*`` that names what it deletes;
- ``bulk``: a delete or replace that names no object: ``DELETE /accounts``, ``DELETE
  /buckets/{id}/collections``, ``PUT /settings``, ``clear_all()``. It removes everything of a
  kind, whoever made it;
- ``other``: an action (``POST /items/{id}/publish``, ``POST /search``, ``POST /__flush__``).

Targets: an HTTP path parameter is a ``parent`` (what the object lives under) or the ``own``
object; id-like query and body parameters (``post_id``) are ``ref``s to other objects. For an MCP
tool, every argument -- top level, or a field of the objects of a list argument -- whose name
says it names something (``name``, ``entityName``, ``path``, ``from``/``to``, ``*_id``) is a target:
``own`` when it names the tool's own kind of thing, ``new`` when it is a new name (``destination``),
``ref`` otherwise. Nothing here is specific to one API: it is the generic vocabulary of REST
paths and tool names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from probes.arguments.naming import ID_WORDS, norm, param_role, path_template, singular, words
from probes.arguments.text import is_path_like
from probes.plan.safety import DESTRUCTIVE_WORDS, call_safety
from protocols.model import Collection, Tool

__all__ = ["Action", "Target", "action_of", "reference", "template", "PATH_WORDS", "is_path_like"]

_PARAM = re.compile(r"^\{([^{}/]+)\}$")
#: First words of MCP tool names (and operation ids) by what they do.
CREATE_WORDS = frozenset("create add new insert make post upload write register append push store save".split())
UPDATE_WORDS = frozenset("update edit modify patch set rename change replace move merge put tag label".split())
DELETE_WORDS = frozenset("delete remove destroy purge drop erase wipe clear unlink trash".split()) | DESTRUCTIVE_WORDS
#: Last words of a path that say what is done to the object before them (``/items/{id}/publish``).
ACTION_WORDS = frozenset("publish unpublish run send execute copy login logout approve reject archive restore "
                         "start stop restart enable disable lock unlock close open sync import export".split())
#: Names of arguments that hold a path or a file (their values nest: a path under a root is "in" it).
PATH_WORDS = frozenset("path paths file files filename filepath dir directory folder root".split())
#: Names of arguments that give something a new name or place (a move's ``destination``).
NEW_WORDS = frozenset("destination dest dst target new_path new_name newname".split())
#: Names of arguments that point at other objects by name (a relation's ``from`` and ``to``).
REF_WORDS = frozenset("from to source src parent".split())
#: The last words of argument names that name an object (``entityName``, ``user_id``).
NAME_WORDS = ID_WORDS | {"name", "names"} | PATH_WORDS


@dataclass(frozen=True)
class Target:
    """One argument that names something on the server. ``param`` is the tool's (Python) parameter;
    ``field`` a field of the objects of a list argument (``entities[].name``: param ``entities``,
    field ``name``), or None. ``role``: ``parent``, ``own``, ``ref`` or ``new``. ``key`` is the
    name a ``--scope`` pin uses for it (``bucket_id`` for ``{id}`` under ``/buckets/``);
    ``entity`` the kind of thing it names; ``position`` its index among an HTTP path's parameters;
    ``required`` whether the call needs it."""

    param: str
    role: str
    key: str
    entity: str | None
    attribute: str
    field: str | None = None
    position: int = -1
    required: bool = True

    @property
    def label(self) -> str:
        return f"{self.param}[].{self.field}" if self.field else self.param


@dataclass(frozen=True)
class Action:
    """What a tool does (see the module docstring). ``entity`` is the kind of thing it acts on;
    ``collection`` (HTTP) the path template of the collection its object lives in, with every
    parameter written ``{}`` (``/buckets/{}/collections``); ``may_create`` is true for a PUT of
    one object (create or replace)."""

    verb: str
    entity: str | None
    targets: tuple[Target, ...] = ()
    collection: str | None = None
    may_create: bool = False
    mcp: bool = False

    @property
    def own(self) -> Target | None:
        return next((t for t in self.targets if t.role == "own"), None)

    @property
    def anchors(self) -> list[Target]:
        """The targets that place the call (parents, the object itself, refs), outermost first."""
        return [t for t in self.targets if t.role in ("parent", "own", "ref")]


def template(path: str) -> str:
    """A path template with its parameters written ``{}`` and no trailing slash."""
    return path_template(path)


def _noun_of(name: str, skip: frozenset[str]) -> str | None:
    ws = [w for w in words(name) if w not in skip and w not in ("all", "by", "many", "batch", "bulk", "one")]
    return singular(ws[-1]) if ws else None


def action_of(tool: Tool, collection: Collection | None = None) -> Action:
    """The ``Action`` of ``tool`` (see the module docstring)."""
    if call_safety(tool, collection).safe:
        return Action("read", None, mcp=tool.method.upper() == "MCP")
    if tool.method.upper() == "MCP" or (collection is not None and collection.source_format == "mcp"):
        return _mcp_action(tool)
    return _http_action(tool)


# -- HTTP ---------------------------------------------------------------------------------------------


def _http_action(tool: Tool) -> Action:
    method = tool.method.upper()
    segments = [s for s in tool.path.strip("/").split("/") if s]
    names = {b.name: p for p, b in tool.bindings.items() if b.location == "path"}
    params: list[tuple[int, str]] = []  # (segment index, Python name)
    for i, seg in enumerate(segments):
        m = _PARAM.match(seg)
        if m:
            params.append((i, names.get(m.group(1), m.group(1))))
    tail = segments[params[-1][0] + 1:] if params else segments
    tail_words = [w for s in tail for w in words(s)]
    verbs = DELETE_WORDS | CREATE_WORDS | UPDATE_WORDS | ACTION_WORDS
    # ``/items/{id}/publish``: the last word is what is done to the object, not a kind of thing
    action_tail = bool(tail_words) and tail_words[-1] in verbs
    nouns = [w for w in tail_words if w not in verbs]
    plural_tail = bool(nouns) and singular(nouns[-1]) != nouns[-1]
    deleting = method == "DELETE" or bool((set(words(tool.name)) | set(tail_words)) & DELETE_WORDS)
    targets: list[Target] = []
    for position, (_, pname) in enumerate(params):
        role = param_role(tool, pname)
        targets.append(Target(pname, "parent", _key(role.entity, role.attribute, pname, tool), role.entity,
                              role.attribute or "id", position=position))
    creating = method == "POST" and not deleting and not action_tail and (
        plural_tail or (not params and bool(set(words(tool.name)) & CREATE_WORDS)))
    # The object itself: the last path parameter, unless a plural word follows it (a collection).
    if targets and not creating and (not tail or action_tail or not plural_tail):
        targets[-1] = _with_role(targets[-1], "own")
    entity = singular(nouns[-1]) if nouns else (targets[-1].entity if targets else None)
    targets += _refs(tool, exclude={t.param for t in targets})
    upsert = _upsert(tool, method, tail, verbs, targets)
    if upsert is not None:
        # ``POST /work_pools/{name}/workers/heartbeat {"name"}``: registers the worker it names (the API
        # makes it when it is new): a create in ``/workers``, deleted like one
        kind, naming = upsert
        parents = [_with_role(t, "parent") for t in targets if t.position >= 0]
        return Action("create", singular(kind), (*parents, naming), template(
            "/" + "/".join(segments[: len(segments) - 1])))
    if creating and not any(t.role == "own" for t in targets) and tail:
        named = _naming_field(tool, tail[-1], exclude={t.param for t in targets})
        if named is not None:
            targets.append(named)  # ``POST /work_pools/ {"name"}``: the name it gives what it makes
    own = next((t for t in targets if t.role == "own"), None)
    if own is not None and own.position >= 0:
        collection = template("/".join(segments[: params[own.position][0]]))
    else:
        collection = template(tool.path)
    if deleting:
        return Action("delete" if own is not None else "bulk", entity, tuple(targets), collection)
    if creating:
        return Action("create", entity, tuple(targets), template(tool.path))
    if method in ("PUT", "PATCH"):
        if own is None:
            return Action("bulk", entity, tuple(targets), collection)
        return Action("update", entity, tuple(targets), collection, may_create=method == "PUT" and not tail)
    return Action("other", entity, tuple(targets), collection)


def _refs(tool: Tool, exclude: set[str]) -> list[Target]:
    """Id-like query and body parameters: references to other objects (``post_id``, ``owner_id``)."""
    out: list[Target] = []
    required = set(tool.required)
    for pname in tool.properties:
        binding = tool.bindings.get(pname)
        if pname in exclude or binding is None or binding.location not in ("query", "body") or not binding.name:
            continue
        role = param_role(tool, pname)
        if not role.id_like or role.attribute not in ID_WORDS:
            continue
        key = _key(role.entity, role.attribute, pname, tool)
        out.append(Target(pname, "own" if role.entity is None else "ref", key, role.entity, role.attribute,
                          required=pname in required))
    return out


def reference(tool: Tool, pname: str, entity: str | None, attribute: str) -> Target:
    """Parameter ``pname`` of ``tool`` as a reference to something (what a ``--scope`` pin matches)."""
    return Target(pname, "ref", _key(entity, attribute, pname, tool), entity, attribute)


def _key(entity: str | None, attribute: str, pname: str, tool: Tool) -> str:
    if entity and attribute:
        binding = tool.bindings.get(pname)
        if binding is not None and binding.location == "path":
            # ``{name}`` under ``/work_pools/`` is a ``work_pool_name``, as the API's other paths call it
            compound = _segment_before(tool.path, binding.name or pname)
            if compound and compound != entity and compound.endswith("_" + entity):
                entity = compound
        return f"{entity}_{singular(attribute)}"
    binding = tool.bindings.get(pname)
    return norm(binding.name if binding and binding.name else pname)


def _segment_before(path: str, wire: str) -> str | None:
    """The literal segment before path parameter ``wire``, made singular (``work_pools`` -> ``work_pool``)."""
    previous: str | None = None
    for seg in [s for s in path.strip("/").split("/") if s]:
        m = _PARAM.match(seg)
        if m and m.group(1) == wire:
            return "_".join(singular(w) if i == len(words(previous)) - 1 else w
                            for i, w in enumerate(words(previous))) if previous else None
        if not m:
            previous = seg
    return None


#: Wire names of a body field that names what a create makes (``{"name": "atc-scratch"}``).
_NAMING_FIELDS = frozenset({"name", "key", "slug", "handle"})


def _naming_field(tool: Tool, collection: str, exclude: set[str]) -> Target | None:
    """The top-level body field by which a POST to ``collection`` names what it makes, as its own
    target (``name`` of ``POST /work_pools/``, pinned by ``--scope work_pool_name=...``)."""
    noun = "_".join(singular(w) if i == len(words(collection)) - 1 else w
                    for i, w in enumerate(words(collection))) or None
    for pname in tool.properties:
        binding = tool.bindings.get(pname)
        if pname in exclude or binding is None or binding.location != "body" or not binding.name:
            continue
        wire = binding.name
        attribute = words(wire)[-1] if words(wire) else wire
        if wire in _NAMING_FIELDS or (noun and norm(wire) == norm(f"{noun}_{attribute}") and attribute in _NAMING_FIELDS):
            return Target(pname, "own", f"{noun}_{attribute}" if noun else attribute, singular(words(collection)[-1])
                          if words(collection) else None, attribute, required=pname in tool.required)
    return None


def _upsert(tool: Tool, method: str, tail: list[str], verbs: frozenset[str],
            targets: list[Target]) -> tuple[str, Target] | None:
    """A POST to ``<collection>/<action>`` that names a thing of the collection in its body
    (``/workers/heartbeat {"name"}``, ``/tags/ensure {"name"}``): (the collection, its naming
    target), or None."""
    if method != "POST" or len(tail) != 2 or _PARAM.match(tail[0]) or any(t.role == "own" and t.position < 0
                                                                           for t in targets):
        return None
    kind = words(tail[0])
    if not kind or singular(kind[-1]) == kind[-1] or kind[-1] in verbs or set(words(tail[1])) & DELETE_WORDS:
        return None
    named = _naming_field(tool, tail[0], exclude={t.param for t in targets})
    if named is None or not named.required:
        return None
    return tail[0], named


def _with_role(target: Target, role: str) -> Target:
    return Target(target.param, role, target.key, target.entity, target.attribute, target.field, target.position,
                  target.required)


# -- MCP ----------------------------------------------------------------------------------------------


def _mcp_action(tool: Tool) -> Action:
    ws = words(tool.name)
    verb = "other"
    for word in ws:
        if word in DELETE_WORDS:
            verb = "delete"
            break
        if word in CREATE_WORDS:
            verb = "create"
            break
        if word in UPDATE_WORDS:
            verb = "update"
            break
    entity = _noun_of(tool.name, CREATE_WORDS | UPDATE_WORDS | DELETE_WORDS)
    targets = _mcp_targets(tool, entity, verb)
    if verb == "delete" and not any(t.role in ("own", "ref") for t in targets):
        verb = "bulk"  # a delete that names nothing deletes everything of its kind
    return Action(verb, entity, tuple(targets), mcp=True)


def _argument_name(pname: str, tool: Tool) -> str:
    binding = tool.bindings.get(pname)
    return binding.name if binding and binding.name else pname


def _mcp_targets(tool: Tool, entity: str | None, verb: str) -> list[Target]:
    out: list[Target] = []
    required = set(tool.required)
    for pname, schema in tool.properties.items():
        wire = _argument_name(pname, tool)
        found = _naming(wire, entity, verb)
        if found is not None:
            out.append(Target(pname, found[0], found[1], found[2], found[3], required=pname in required))
            continue
        items = schema.get("items") if isinstance(schema, dict) and schema.get("type") == "array" else None
        props = items.get("properties") if isinstance(items, dict) else None
        if not isinstance(props, dict):
            continue
        inner_required = set(items.get("required") or []) if isinstance(items, dict) else set()
        container = singular(words(wire)[-1]) if words(wire) else None
        for field in props:
            # ``entities[].name`` names an entity; ``observations[].entityName`` an entity too
            inner = _naming(str(field), container if words(str(field)) and len(words(str(field))) == 1 else None,
                            verb, parent=entity)
            if inner is not None:
                out.append(Target(pname, inner[0], inner[1], inner[2], inner[3], field=str(field),
                                  required=pname in required and field in inner_required))
    return out


def _naming(name: str, entity: str | None, verb: str, parent: str | None = None) -> tuple[str, str, str | None, str] | None:
    """(role, key, entity, attribute) of an argument that names something, else None."""
    ws = words(name)
    if not ws:
        return None
    last = singular(ws[-1]) if ws[-1] not in PATH_WORDS else ws[-1]
    joined = "_".join(ws)
    if joined in NEW_WORDS:
        return "new", joined, None, joined
    if joined in REF_WORDS:
        return "ref", joined, None, joined
    if ws[-1] not in NAME_WORDS and last not in NAME_WORDS:
        return None
    named = "_".join(singular(w) for w in ws[:-1]) or entity
    if last in PATH_WORDS or ws[-1] in PATH_WORDS:
        return ("own" if verb in ("create", "update", "delete") else "ref"), "path", "path", "path"
    attribute = "name" if last in ("name", "names") else last
    key = f"{named}_{attribute}" if named else attribute
    kind = parent if parent is not None else entity
    role = "own" if named is None or kind is None or named == kind or (verb != "create" and named == entity) else "ref"
    return role, key, named, attribute
