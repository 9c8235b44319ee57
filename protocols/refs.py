"""Local ``$ref`` resolution for OpenAPI / Swagger / JSON Schema documents.

Two kinds of ``$ref`` need different answers:

- a chain of references (``A -> B -> A``) that never reaches a real node is a broken document:
  :meth:`Resolver.follow` raises a ``ProtocolError``;
- a recursive *schema* (a tree node whose ``children`` are tree nodes) is fine: :meth:`Resolver.schema`
  expands it once and cuts the second visit to ``{"type": "object", "description": "(recursive: Name)"}``.

An expanded reference to a named schema (``#/components/schemas/WorkPoolFilter``, Swagger's
``#/definitions/...``, ``#/$defs/...``) keeps the name under ``NAME_KEY`` (``x-atc-ref``), so that a
protocol can say ``work_pools: WorkPoolFilter`` instead of ``dict``. ``allOf`` is folded
conjunctively (:mod:`protocols.allof`).

External references (other files, URLs) are never fetched: they raise a ``ProtocolError`` naming
the pointer where they occur. Deep documents are cut at ``MAX_DEPTH`` so no input can reach
Python's recursion limit.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from protocols.allof import NAME_KEY, merge_all_of
from protocols.errors import ProtocolError
from protocols.model import SpecWarning
from protocols.repair import finish_root, repair_node

__all__ = ["Resolver", "escape", "merge_all_of", "unshare", "component_name", "MAX_DEPTH", "NAME_KEY"]

#: Nesting beyond this depth is replaced by a marker; keeps hostile input away from RecursionError.
MAX_DEPTH = 48
#: Nodes one expanded schema may have before the rest is cut.
MAX_NODES = 50_000

#: Where named schemas live: a ``$ref`` into one of these keeps the component's name (``NAME_KEY``).
_COMPONENT_HOMES = ("/components/schemas/", "/definitions/", "/$defs/")

#: Keywords whose values are maps of name -> schema.
_SCHEMA_MAPS = ("properties", "patternProperties", "definitions", "$defs", "dependentSchemas")
#: Keywords whose values are lists of schemas.
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
#: Keywords whose values are one schema (``items`` may also be a list in old drafts).
_SCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else",
               "additionalItems", "unevaluatedProperties", "unevaluatedItems")


def escape(token: str) -> str:
    """One JSON-pointer reference token (RFC 6901): ``~`` -> ``~0``, ``/`` -> ``~1``."""
    return token.replace("~", "~0").replace("/", "~1")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


class Resolver:
    """Resolves the local references of one document. ``source`` labels errors.

    Every schema it expands is also repaired (``protocols.repair``), node by node with the node's
    own pointer, so that a mistake in a shared component is fixed and reported once;
    ``warnings`` collects the reports. ``dialect`` is ``"2.0"`` for Swagger, ``"3.0"`` for OpenAPI
    3.0 (both draft-4 flavoured), ``"3.1"`` for OpenAPI 3.1 and plain JSON Schema."""

    def __init__(self, doc: Any, source: str, *, dialect: str = "3.1") -> None:
        self.doc = doc
        self.source = source
        self.dialect = dialect
        self.warnings: list[SpecWarning] = []
        self._seen_warnings: set[tuple[str, str]] = set()
        #: A referenced schema expanded without a cut -> (it, its size in nodes, its height).
        self._cache: dict[str, tuple[Any, int, int]] = {}
        self._budget = MAX_NODES
        self._deepest = 0  # the deepest node the current expansion reached
        self._cuts = 0  # cut markers made so far (a subtree made without one may be shared)

    def warn(self, message: str, pointer: str) -> None:
        """Record a warning once (a node visited from several places reports once)."""
        key = (pointer, message)
        if key not in self._seen_warnings:
            self._seen_warnings.add(key)
            self.warnings.append(SpecWarning(message, pointer))

    def error(self, message: str, pointer: str) -> ProtocolError:
        return ProtocolError(message, source=self.source, pointer=pointer)

    def lookup(self, ref: str, at: str) -> Any:
        """The node a single ``$ref`` string names (no further following). ``at`` is where it occurs."""
        if not isinstance(ref, str):
            raise self.error("$ref must be a string", at)
        if not ref.startswith("#"):
            raise self.error(f"external $ref {ref!r} is not supported (only local '#/...' references)", at)
        frag = ref[1:]
        if frag and not frag.startswith("/"):
            raise self.error(f"$ref {ref!r} is not a JSON pointer", at)
        node = self.doc
        for raw in frag.split("/")[1:] if frag else []:
            token = _unescape(unquote(raw))  # a fragment may be percent-encoded ({ -> %7B)
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise self.error(f"$ref {ref!r} points to nothing", at)
        return node

    def follow(self, node: Any, at: str) -> tuple[Any, str]:
        """Follow ``$ref`` until a node that is not a reference; returns it and its pointer.

        A chain that comes back to itself is an error, not a recursive schema."""
        seen: list[str] = []
        pointer = at
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if isinstance(ref, str) and ref in seen:
                chain = " -> ".join(seen + [ref])
                raise self.error(f"cyclic $ref chain {chain}", at)
            node = self.lookup(ref, pointer)
            seen.append(ref)
            pointer = ref[1:]
        return node, pointer

    def schema(self, node: Any, at: str) -> Any:
        """A deep copy of a schema with every local reference expanded and ``allOf`` merged.

        Recursive references are expanded once, then cut to a marker object. A node budget
        bounds the *expanded* schema, counting a subtree that several references share once per
        reference: documents whose references fan out combinatorially (ten references to a
        schema of ten references to ..., 3 KB that would inline to 10^9 nodes) are cut, with a
        warning, in time proportional to the budget, and so is every later walk over the result
        (copying, rendering, validating, generating data)."""
        self._budget = MAX_NODES
        self._deepest = 0
        return finish_root(self._schema(node, at, (), 0), at, self.warn)

    def _schema(self, node: Any, at: str, stack: tuple[str, ...], depth: int, is_schema: bool = True) -> Any:
        if depth > MAX_DEPTH:
            self._cuts += 1
            return {"description": "(nesting too deep: cut)"}
        self._budget -= 1
        if self._budget < 0:
            self._cuts += 1
            if self._budget == -1:
                self.warn(f"the schema expands to more than {MAX_NODES} nodes (its references fan out): the rest "
                          "is cut", at)
            return {"description": "(schema too large: cut)"}
        self._deepest = max(self._deepest, depth)
        if isinstance(node, list):
            return [self._schema(v, f"{at}/{i}", stack, depth + 1, is_schema) for i, v in enumerate(node)]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return self._reference(node, at, stack, depth, is_schema)
        out: dict[str, Any] = {}
        tags = _discriminator_values(node) if is_schema else {}
        for key, value in node.items():
            sub = f"{at}/{escape(str(key))}"
            if key in _SCHEMA_LISTS and isinstance(value, list) and tags:
                out[key] = [_tagged(self._schema(v, f"{sub}/{i}", stack, depth + 2), *tags.get(i, ("", "")))
                            for i, v in enumerate(value)]
            elif key in _SCHEMA_MAPS and isinstance(value, dict):
                out[key] = {k: self._schema(v, f"{sub}/{escape(str(k))}", stack, depth + 2) for k, v in value.items()}
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [self._schema(v, f"{sub}/{i}", stack, depth + 2) for i, v in enumerate(value)]
            elif key in _SCHEMA_LISTS and isinstance(value, dict):
                out[key] = self._schema(value, sub, stack, depth + 1)  # one schema where a list belongs
            elif key in _SCHEMA_ONE:
                out[key] = self._schema(value, sub, stack, depth + 1)
            elif key in ("example", "examples", "default", "enum", "const"):
                out[key] = value  # data, not schema: a "$ref" key inside an example is just data
            else:
                out[key] = self._schema(value, sub, stack, depth + 1, False)
        if is_schema:
            out = repair_node(out, at, self.warn, dialect=self.dialect)
        if isinstance(out.get("allOf"), list):
            out = merge_all_of(out)
        return out

    def _reference(self, node: dict[str, Any], at: str, stack: tuple[str, ...], depth: int,
                   is_schema: bool) -> Any:
        """A ``$ref`` node expanded (see ``_schema``). A referenced schema expanded without a cut is
        kept with its size and height and shared by the later references to it, each of which
        pays its size from the budget; one that no longer fits (in the budget or under
        ``MAX_DEPTH`` from here) is expanded again, and cut where it runs out."""
        ref = node["$ref"]
        if isinstance(ref, str) and ref in stack:
            self._cuts += 1
            name = ref.rsplit("/", 1)[-1]
            return {"type": "object", "description": f"(recursive: {name})"}
        kept = self._cache.get(ref) if isinstance(ref, str) else None
        if kept is not None and kept[1] <= self._budget + 1 and depth + kept[2] <= MAX_DEPTH:
            resolved, size, height = kept
            self._budget -= size - 1  # the visit of this node was paid already
            self._deepest = max(self._deepest, depth + height)
        else:
            target, pointer = self.follow(node, at)
            # Every ref of the chain is now on the stack, so a schema that refers back is cut.
            chain = stack + (ref,) if isinstance(ref, str) else stack
            budget, deepest, cuts = self._budget + 1, self._deepest, self._cuts
            self._deepest = depth
            resolved = self._schema(target, pointer, chain, depth + 1, is_schema)
            named = component_name(ref) if is_schema else None
            if named and isinstance(resolved, dict) and resolved.get(NAME_KEY) != named:
                # A copy: ``resolved`` may be the cached expansion of another name in the chain.
                resolved = {**resolved, NAME_KEY: named}
            if isinstance(ref, str) and self._cuts == cuts:
                self._cache[ref] = (resolved, budget - self._budget, self._deepest - depth)
            self._deepest = max(deepest, self._deepest)
        extra = {k: v for k, v in node.items() if k != "$ref"}
        if extra and isinstance(resolved, dict):
            # OpenAPI 3.1 allows siblings next to $ref (description, nullable...): they win.
            resolved = {**resolved, **{k: self._schema(v, f"{at}/{escape(k)}", stack, depth + 1, False)
                                       for k, v in extra.items()}}
            if is_schema:
                resolved = repair_node(resolved, at, self.warn, dialect=self.dialect)
        return resolved

def component_name(ref: Any) -> str | None:
    """The name of the component a local ``$ref`` names (``#/components/schemas/WorkPoolFilter`` ->
    ``WorkPoolFilter``), None for a reference to anything else. Expanding a reference would lose
    the name, which is how a reader knows two parameters take the same type; the resolver keeps
    it under ``NAME_KEY``."""
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return None
    pointer = ref[1:]
    for home in _COMPONENT_HOMES:
        if pointer.startswith(home) and "/" not in pointer[len(home):]:
            name = _unescape(unquote(pointer[len(home):]))
            return name or None
    return None


def _discriminator_values(node: dict[str, Any]) -> dict[int, tuple[str, str]]:
    """For a ``oneOf``/``anyOf`` with an OpenAPI ``discriminator``: branch index -> (property,
    value), the value being the branch's key in ``mapping`` or, without one, the name of the
    schema it refers to. Expanding the references loses those names, so the expanded branch
    states its value itself (see ``_tagged``)."""
    disc = node.get("discriminator")
    if not isinstance(disc, dict) or not isinstance(disc.get("propertyName"), str):
        return {}
    prop = disc["propertyName"]
    raw_mapping = disc.get("mapping")
    mapping: dict[str, Any] = raw_mapping if isinstance(raw_mapping, dict) else {}
    by_ref = {str(ref): str(value) for value, ref in mapping.items()}
    out: dict[int, tuple[str, str]] = {}
    for key in ("oneOf", "anyOf"):
        branches = node.get(key)
        if not isinstance(branches, list):
            continue
        for i, branch in enumerate(branches):
            ref = branch.get("$ref") if isinstance(branch, dict) else None
            if isinstance(ref, str):
                out[i] = (prop, by_ref.get(ref) or ref.rsplit("/", 1)[-1])
    return out


def _tagged(branch: Any, prop: str, value: str) -> Any:
    """A resolved branch whose discriminator property accepts only its own value, when the
    branch allows that value at all (a branch whose enum contradicts it is left as written)."""
    if not prop or not isinstance(branch, dict) or not isinstance(branch.get("properties"), dict):
        return branch
    current = branch["properties"].get(prop)
    if not isinstance(current, dict) or current.get("type") not in (None, "string"):
        return branch
    enum = current.get("enum")
    if "const" in current or (isinstance(enum, list) and value not in enum):
        return branch
    return {**branch, "properties": {**branch["properties"], prop: {**current, "enum": [value]}}}




def unshare(node: Any) -> Any:
    """A copy of the dict/list structure. The resolver shares expanded subtrees between the places
    that reference them; each tool gets its own copy so that editing one tool's schema (a prober
    filling in a response) cannot change another's."""
    if isinstance(node, dict):
        return {k: unshare(v) for k, v in node.items()}
    if isinstance(node, list):
        return [unshare(v) for v in node]
    return node
