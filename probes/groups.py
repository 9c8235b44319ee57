"""Splitting a collection's tools into groups that can be probed apart (``atc probe --executor``).

The chain of probing (``probes.rounds``) feeds a tool the identifiers other tools' answers handed
out: ``getItem(sku=...)`` runs on a ``sku`` that ``listShelfItems`` returned, which ran on a
``shelf_id`` from ``listShelves``. Those links are found while probing, from the answers, so a
split made before probing can only predict them. It predicts generously, because a link cut
costs a tool its documentation while a link kept costs only parallelism:

- a tool *needs* a value for each required parameter that takes an identifier (``param_role``:
  ``id_like``) -- a value that, schema examples aside, only another tool's answer can give;
- a tool *may provide* that value when its endpoint is about the parameter's entity (``/shelves``
  lists shelves, so it provides ``shelf_id``; ``searchItems`` and ``/shelves/{id}/items`` give
  items, so they provide ``sku`` of ``/items/{sku}``), or when its declared response schema has
  a field of the parameter's name (or a synonym, or ``<entity>_<attribute>``);
- a needing tool and every tool that may provide it go into one group (transitively: chains of
  any length stay whole);
- a needing tool for which no provider is seen (``maker_ref`` of ``/makers/{maker_ref}`` comes
  out of an item's answer, which no spec says), and a group in which every tool needs a value
  (``/network/{id}`` and its images, whose ids come out of a TV show's ``networks[]``), are kept
  with every group that has a chain, since their values may come out of any of them;
- everything else -- tools that neither need nor are known to provide a value, and the tools
  that will not be called at all (``call_safety``) -- is a group of its own;
- with ``allow_unsafe`` and tools that may write, everything is one group: the write plan
  (``probes.plan.steps``) orders creates, updates and deletes across all tools of one probe_state.

Groups come in the order of their first tool in the spec, each listing its tools in spec order.
The split depends only on the tools (never on ``--concurrency`` or the executor), so every run
of the same collection probes the same groups.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from probes.arguments.naming import (
    SYNONYMS,
    ParamRole,
    endpoint_nouns,
    norm,
    param_role,
    same_entity,
    singular,
    words,
)
from probes.plan.safety import call_safety
from protocols.model import Tool
from sandbox.api import Toolset

__all__ = ["probe_groups", "needs", "may_provide"]

#: Response-schema nodes read at most per tool when looking for field names.
_MAX_NODES = 2000


def needs(tool: Tool) -> list[str]:
    """The required parameters of ``tool`` that take an identifier (see the module docstring)."""
    return [p for p in tool.required if param_role(tool, p).id_like]


def may_provide(source: Tool, tool: Tool, pname: str) -> bool:
    """Whether ``source``'s answers may hold a value for parameter ``pname`` of ``tool``."""
    role = param_role(tool, pname)
    if role.entity:
        nouns = endpoint_nouns(source)
        if same_entity(nouns.root, role.entity) or same_entity(nouns.items, role.entity):
            return True
        if role.entity in _nouns_said(source):
            return True
    return bool(_names_for(tool, pname, role) & _fields(source.response_schema))


def probe_groups(toolset: Toolset, *, allow_unsafe: bool = False) -> list[list[str]]:
    """The tools of ``toolset`` split into groups to probe apart (see the module docstring)."""
    tools: list[Tool] = []
    callable_: list[bool] = []
    writes = False
    for collection in toolset.collections:
        for tool in collection.tools:
            tools.append(tool)
            callable_.append(call_safety(tool, collection, allow_unsafe=allow_unsafe).safe)
            writes = writes or not call_safety(tool, collection).safe
    if allow_unsafe and writes:
        # The write plan needs every tool in one probe: its scope, what it created, its order.
        return [[t.name for t in tools]]
    parent = list(range(len(tools)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(a: int, b: int) -> None:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    unplaced: list[int] = []
    chained: set[int] = set()
    for b, tool in enumerate(tools):
        if not callable_[b]:
            continue
        for pname in needs(tool):
            providers = [a for a, source in enumerate(tools)
                         if a != b and callable_[a] and may_provide(source, tool, pname)]
            if not providers:
                unplaced.append(b)
                continue
            chained.add(b)
            for a in providers:
                join(a, b)
                chained.add(a)
    # A chain must start somewhere: a component in which every tool needs a value (``/network/{id}``
    # and its images, fed in fact by the ``networks[]`` of a TV show) is fed from outside it.
    starts = {root(i) for i in chained if not needs(tools[i])}
    unplaced += [i for i in chained if root(i) not in starts]
    keep = sorted(chained | set(unplaced))
    for i in keep[1:] if unplaced else ():
        join(keep[0], i)
    groups: dict[int, list[str]] = {}
    for i, tool in enumerate(tools):
        groups.setdefault(root(i), []).append(tool.name)
    return [groups[r] for r in sorted(groups)]


def _nouns_said(tool: Tool) -> set[str]:
    """The nouns of a tool's literal path segments and name, in the singular; ``-ves`` plurals
    are read both ways (``shelves`` -> shelf), which the prober's crude singular does not need."""
    said = [w for seg in tool.path.split("/") if seg and not seg.startswith("{") for w in words(seg)]
    out: set[str] = set()
    for word in [*said, *words(tool.name)]:
        out.add(singular(word))
        if word.endswith("ves") and len(word) > 4:
            out.update({word[:-3] + "f", word[:-3] + "fe"})
    return out


def _names_for(tool: Tool, pname: str, role: ParamRole) -> set[str]:
    """Field names (normalised) under which an answer would hand out this parameter's value."""
    binding = tool.bindings.get(pname)
    wire = norm(binding.name if binding and binding.name else pname)
    names = {wire, *SYNONYMS.get(wire, ())}
    if role.entity and role.attribute:
        names.add(f"{role.entity}_{role.attribute}")
    return names


def _fields(schema: Any) -> set[str]:
    """Every property name (normalised) of a JSON Schema, nested ones included (bounded)."""
    return {norm(name) for name in _property_names(schema)}


def _property_names(schema: Any) -> Iterator[str]:
    stack = [schema]
    seen = 0
    while stack and seen < _MAX_NODES:
        node = stack.pop()
        seen += 1
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict):
                yield from (str(k) for k in props)
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, dict | list))
