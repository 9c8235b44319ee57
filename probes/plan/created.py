"""What a probe's writes created, and whether the probe can show that it did.

A probe deletes only what it can **show** it created. An API's word alone is not enough: a store
that answers ``201 Created`` to a ``PUT`` of a bucket that was already there, or an upsert-like
``POST`` that hands back an existing object, would make the probe delete the user's data. What
counts as proof (``Proof``), by how the created thing is named:

- a name **this probe made up** (``atc-probe-<random hex>``) that the create answered 2xx to:
  nobody else had that name;
- an id **the API assigned**, in the create's answer, that no earlier answer of this probe showed
  for that kind of thing (a list or read of the same collection): it is new;
- a **pinned** name (``--scope bucket_id=throwaway``): only when a read of the object, sent just
  before the create, answered 404 or 410 (``absence_check`` finds that read: ``GET /buckets/{id}``
  for ``PUT /buckets/{id}``, ``GET /work_pools/{name}`` or ``GET /flows/name/{name}`` for a
  ``POST`` that names it); a read that answers 2xx means the object exists: the create is not sent
  at all. Without such a read, a ``201`` whose answer carries a new id (one no earlier answer
  showed, not the pinned value) proves the object that id names, and only that one; an MCP answer
  that holds the new name proves it (MCP servers' create tools report what they made).

Anything else a step made is kept, used by later steps, and reported as left behind with the
reason the probe could not show it was its own -- never deleted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from probes.arguments.naming import param_role
from probes.calls import Observation
from probes.plan.actions import template
from probes.plan.steps import WritePlan
from protocols.model import Tool
from protocols.writes import judge

__all__ = ["WRAPPERS", "ID_KEYS", "new_id", "field_of", "holds", "seen_in_kind", "Proof", "absence_check",
           "absence_checks"]

#: Wrappers an API puts around the object it created (``{"data": {"id": ...}}``).
WRAPPERS = ("data", "result", "item", "object", "record", "resource", "created")
ID_KEYS = ("id", "uuid", "key", "slug", "name")


def new_id(data: Any, entity: str | None) -> tuple[Any, list[str | int]] | None:
    """The id of the object a create answer describes, and where it was: ``id`` (or
    ``<entity>_id``, ``uuid``, ``key``, ``slug``, ``name``) at the top or inside one wrapper."""
    if isinstance(data, list) and len(data) == 1:
        found = new_id(data[0], entity)
        return (found[0], [0, *found[1]]) if found is not None else None
    if not isinstance(data, dict):
        return None
    keys = [*((f"{entity}_id", f"{entity}Id") if entity else ()), *ID_KEYS]
    for key in keys:
        value = data.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
            return value, [key]
    for wrapper in (*WRAPPERS, entity or ""):
        inner = data.get(wrapper) if wrapper else None
        if isinstance(inner, dict):
            found = new_id(inner, entity)
            if found is not None:
                return found[0], [wrapper, *found[1]]
    return None


def field_of(data: Any, want: str, entity: str | None) -> tuple[Any, list[str | int]] | None:
    """The ``want`` field (``id``, ``name``, ``number``, ``<entity>_<want>``) of a create answer, at
    the top or inside one wrapper."""
    if isinstance(data, list) and len(data) == 1:
        found = field_of(data[0], want, entity)
        return (found[0], [0, *found[1]]) if found is not None else None
    if not isinstance(data, dict) or not want:
        return None
    for key in (want, f"{entity}_{want}" if entity else "", f"{entity}{want.title()}" if entity else ""):
        value = data.get(key) if key else None
        if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
            return value, [key]
    for wrapper in (*WRAPPERS, entity or ""):
        inner = data.get(wrapper) if wrapper else None
        if isinstance(inner, dict):
            found = field_of(inner, want, entity)
            if found is not None:
                return found[0], [wrapper, *found[1]]
    return None


def holds(data: Any, value: Any, depth: int = 0) -> bool:
    """Whether an answer holds ``value`` anywhere (a pinned name an MCP server says it created)."""
    if depth > 20:
        return False
    if data == value:
        return True
    if isinstance(data, dict):
        return any(holds(v, value, depth + 1) for v in data.values())
    if isinstance(data, list):
        return any(holds(v, value, depth + 1) for v in data[:200])
    return isinstance(data, str) and isinstance(value, str) and len(value) > 3 and value in data


def _has_key_value(data: Any, key: str, value: Any, depth: int = 0) -> bool:
    if depth > 12:
        return False
    if isinstance(data, dict):
        if key in data and data[key] == value:
            return True
        return any(_has_key_value(v, key, value, depth + 1) for v in data.values() if isinstance(v, dict | list))
    if isinstance(data, list):
        return any(_has_key_value(v, key, value, depth + 1) for v in data[:500])
    return False


def seen_in_kind(value: Any, key: str, collection: str | None, observations: Sequence[Observation],
                 tools: dict[str, Tool], before: int) -> bool:
    """Whether an answer before observation ``before`` of a tool about the same collection (its list
    ``/posts``, one of its objects ``/posts/{}``, a search of it ``/posts/filter``) showed an object
    whose ``key`` is ``value``: then the id a create answered with may name something that existed."""
    if collection is None:
        return False
    base = collection.rstrip("/")
    for obs in observations[:before]:
        tool = tools.get(obs.tool)
        if tool is None or not obs.ok:
            continue
        path = template(tool.path).rstrip("/")
        if path != base and not path.startswith(base + "/"):
            continue
        if _has_key_value(obs.data, key, value):
            return True
    return False


@dataclass(frozen=True)
class Proof:
    """Why the probe may delete what a step created. ``kind``: ``named`` (a name it made up), ``new``
    (an id the API assigned, never seen before), ``absent`` (a read answered 404 just before),
    ``answer`` (an MCP answer that holds the new name). ``value`` is what the proof is about: a
    delete must address the object by it."""

    kind: str
    says: str
    value: Any = None


def absence_check(create: Tool, objects: Iterable[str], attribute: str, reads: Iterable[Tool]) -> Tool | None:
    """A read that tells whether the object a create names exists: a GET whose path is one of
    ``objects`` (templates, parameters written ``{}``: ``/buckets/{}``, ``/flows/name/{}``) and
    whose last path parameter takes the same attribute as the name the create gives (``name`` for
    a name, not an ``{id}`` for a pinned ``key``)."""
    wanted = set(objects)
    for read in reads:
        if read.method.upper() != "GET" or judge(read).write or template(read.path) not in wanted:
            continue
        params = [p for p, b in read.bindings.items() if b.location == "path"]
        if not params:
            continue
        last = max(params, key=lambda p: read.path.find("{" + (read.bindings[p].name or p) + "}"))
        if param_role(read, last).attribute in (attribute, "") or read.path == create.path:
            return read
    return None


def absence_checks(plan: WritePlan, tools: Mapping[str, Tool], reads: Iterable[Tool]) -> dict[int, Tool]:
    """For each create of a pinned name (HTTP), the read that asks first whether it exists (step ->
    read); each such step's ``check`` says which (the dry run shows it)."""
    reads = list(reads)
    found: dict[int, Tool] = {}
    for step in plan.steps:
        planned = step.creates
        if planned is None or not planned.conditional or step.method == "MCP":
            continue
        tool = tools[step.tool]
        if planned.template is None or step.method == "PUT":
            objects = [template(tool.path)]
        else:
            base = planned.template.rstrip("/")
            objects = [base + "/{}", base + f"/{planned.attribute}/{{}}"]
        read = absence_check(tool, objects, planned.attribute, reads)
        if read is not None:
            found[step.index] = read
            step.check = read.path
    return found
