"""Walks a response schema and fills it with deterministic values: the body ``atc mock`` returns.

The walker knows three things the scalar generators of :mod:`atc.mock.entities` do not:

- the *request*: root properties named like a request argument echo it (``page``, ``query``, a
  posted ``quantity``), id-like path parameters echo at any depth (``author_id`` inside the books
  of ``/authors/{author_id}/books``), and the endpoint's main list honours ``limit``;
- the *entity scope*: an object with an ``id`` of a known entity is generated from
  ``"<entity>#<id>"`` alone, so it looks the same wherever it appears;
- ``oneOf``: a branch is kept only when its value validates against exactly one branch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from atc.mock.entities import (
    ANY_ENTITY,
    GENERIC_CONTAINERS,
    IdSpaces,
    entity_from_name,
    id_entity,
    id_kind,
    rng,
    schema_type,
    singular,
)
from atc.mock.keywords import finite_values, is_cut, more_keys
from atc.mock.request_checks import is_valid
from atc.mock.values import integer_value, number_value, string_value
from protocols.allof import merge_all_of

__all__ = ["RequestContext", "SchemaFaker", "DEFAULT_ITEMS", "MAX_ITEMS", "MAX_DEPTH", "is_cut", "merge_all_of"]

DEFAULT_ITEMS = 3
MAX_ITEMS = 50
#: Below this depth objects stop growing: only required properties, arrays as short as allowed.
MAX_DEPTH = 7
#: How many instances a filtered list looks at to find ``limit`` that satisfy the filters.
FILTER_SCAN = 200
_HARD_DEPTH = MAX_DEPTH + 4
#: Filtered fields of instances kept for later searches (see ``SchemaFaker._filtered``).
_MAX_HEADS = 200_000


@dataclass
class RequestContext:
    """What the walker needs to know about the request being answered.

    ``root_key`` seeds everything outside an entity scope (tool name + canonical arguments);
    ``filters`` are query arguments that narrow the main list (``genre=poetry``, ``query=garden``);
    ``root_entity``/``root_id`` say which entity instance the root object is (detail and
    sub-resource endpoints), ``item_entity`` what the endpoint's main list holds."""

    tool: str
    root_key: str
    echo: dict[str, Any] = field(default_factory=dict)
    path_ids: dict[str, Any] = field(default_factory=dict)
    items: int = DEFAULT_ITEMS
    filters: dict[str, Any] = field(default_factory=dict)
    root_entity: str | None = None
    root_id: Any = None
    item_entity: str | None = None
    #: what clients wrote (:class:`atc.mock.state.MockState`): an instance it holds shows its
    #: fields wherever it is generated, and a deleted one is left out of lists
    state: Any = None
    #: ids that the endpoint's main list shows first (objects created under the request's parents)
    first: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class _Scope:
    """Where values come from: ``key`` seeds them; an entity instance also knows its id and kind."""

    key: str
    entity: str | None = None
    id: Any = None
    kind: str = "int"


def _compatible(value: Any, schema: dict[str, Any]) -> bool:
    """Whether an argument value can stand in for a generated one without breaking the schema."""
    t = schema_type(schema)
    cheap = {"integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
             "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
             "string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
             "array": lambda v: isinstance(v, list), "object": lambda v: isinstance(v, dict)}.get(t or "")
    if t is not None and (cheap is None or not cheap(value)):
        return False
    return is_valid(schema, value)


#: Keywords that can refuse an id of the right type (checked only when a field has one).
_ID_LIMITS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "pattern", "minLength",
              "maxLength", "enum", "const", "format", "not", "allOf")


def _fits_id(value: Any, schema: dict[str, Any]) -> bool:
    """Whether an id from an id space may stand in this field (cheap when the field has no limits)."""
    if not any(k in schema for k in _ID_LIMITS):
        t = schema_type(schema)
        return t is None or (t == "string") == isinstance(value, str)
    return _compatible(value, schema)


def own_id_key(props: dict[str, Any], entity: str | None) -> str | None:
    """The property that is an entity instance's own id: ``id``, else ``<entity>_id`` /
    ``<entity>Id`` (a Stop with ``stop_id``), None when the object has neither."""
    if "id" in props:
        return "id"
    if entity is None:
        return None
    camel = "".join(w.title() if i else w for i, w in enumerate(entity.split("_")))
    return next((k for k in (f"{entity}_id", f"{camel}Id", f"{camel}ID") if k in props), None)


_TOTALS = ("total", "total_results", "total_count", "count", "num_results", "total_items")


def _fix_totals(out: dict[str, Any]) -> None:
    """A root ``total`` never smaller than the list next to it (``total: 1`` beside 3 results)."""
    shown = max((len(v) for k, v in out.items() if isinstance(v, list) and k in GENERIC_CONTAINERS), default=0)
    for k in _TOTALS:
        v = out.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v < shown:
            out[k] = shown + v


def _matches(have: Any, wanted: Any) -> bool:
    """An exact filter: equal, or for a query array (``type=album,track``) one of its values."""
    if have == wanted:
        return True
    if isinstance(wanted, list):
        return any(have == w for w in wanted) or (isinstance(have, list) and any(h in wanted for h in have))
    return False


class SchemaFaker:
    """Turns a (resolved) JSON Schema into a value for one request. Holds no per-request state."""

    def __init__(self, spaces: IdSpaces, known: frozenset[str]) -> None:
        self.spaces = spaces
        self.known = known
        self._heads: dict[tuple[Any, ...], Any] = {}
        self._flat: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        self._instances: dict[tuple[Any, ...], tuple[dict[str, Any], dict[str, Any]]] = {}

    def response(self, schema: dict[str, Any], ctx: RequestContext) -> Any:
        scope = _Scope(ctx.root_key)
        t = schema_type(self._flatten(schema))
        if t == "array":
            return self._array(schema, "", scope, "", 0, ctx, entity=ctx.item_entity, primary=True)
        return self._value(schema, "", scope, "", 0, ctx, entity=ctx.root_entity, root=True)

    # -- dispatch ------------------------------------------------------------------------------

    def _flatten(self, schema: Any) -> dict[str, Any]:
        if not isinstance(schema, dict):
            return {}
        if "allOf" not in schema:
            return schema
        # One merged dict per schema object, so that it has a stable identity (caches key on it).
        hit = self._flat.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        merged = merge_all_of(schema)
        self._flat[id(schema)] = (schema, merged)
        return merged

    def forget(self) -> None:
        """Drop what was kept of generated instances (a client wrote: instances may look new)."""
        self._instances.clear()
        self._heads.clear()

    def _value(self, schema: Any, name: str, scope: _Scope, path: str, depth: int, ctx: RequestContext, *,
               entity: str | None = None, forced_id: Any = None, root: bool = False, primary: bool = False) -> Any:
        schema = self._flatten(schema)
        r = rng(scope.key, path)
        if "const" in schema:
            return schema["const"]
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            choices = [e for e in enum if e is not None] or enum
            return r.choice(choices)
        if isinstance(schema.get("oneOf"), list) or isinstance(schema.get("anyOf"), list):
            return self._choice(schema, name, scope, path, depth, ctx, entity=entity, forced_id=forced_id, root=root)
        t = schema_type(schema) or "string"
        if depth > _HARD_DEPTH:
            return {"object": {}, "array": [], "integer": 0, "number": 0.5, "boolean": False, "null": None}.get(t, "")
        if t == "object":
            return self._object(schema, name, scope, path, depth, ctx, entity=entity, forced_id=forced_id, root=root)
        if t == "array":
            return self._array(schema, name, scope, path, depth, ctx, entity=entity, primary=primary)
        if t == "boolean":
            return r.random() < 0.5
        if t == "null":
            return None
        ref = ANY_ENTITY if name == "id" else id_entity(name)
        if ref is not None and ref != ANY_ENTITY and ref not in self.known:
            ref = entity_from_name(ref, self.known)
        if ref is not None and (ref in self.known or ref == ANY_ENTITY) and t in ("integer", "number", "string"):
            kind = id_kind(schema)
            if kind == "int" and t == "string":
                kind = "str"
            if scope.id is not None and scope.entity in self.known and ref not in (scope.entity, ANY_ENTITY) \
                    and path.count("/") == 1:
                # A direct foreign key of an entity instance: invertible, see IdSpaces.referrers.
                target = self.spaces.foreign(scope.entity, scope.kind, scope.id, ref, kind)
                if target is not None and _fits_id(target, schema):
                    return target
            picked = self.spaces.pick(ref, kind, scope.key, path)
            if _fits_id(picked, schema):
                return picked
            # An id space wider than this field allows (its own maximum, a pattern): the field wins.
        if t == "integer":
            return integer_value(name, schema, r)
        if t == "number":
            return number_value(name, schema, r)
        return string_value(name, schema, scope.entity, r)

    def _choice(self, schema: dict[str, Any], name: str, scope: _Scope, path: str, depth: int,
                ctx: RequestContext, **kw: Any) -> Any:
        """``oneOf``/``anyOf``: try the branches in a seeded order; for ``oneOf`` keep a value that
        validates against exactly one branch (``[integer, number]`` needs a non-integral number)."""
        key = "oneOf" if isinstance(schema.get("oneOf"), list) else "anyOf"
        branches = [b for b in schema[key] if isinstance(b, dict)] or [{}]
        base = {k: v for k, v in schema.items() if k not in ("oneOf", "anyOf")}
        start = rng(scope.key, path, key).randrange(len(branches))
        first: Any = None
        for i in range(len(branches)):
            branch = branches[(start + i) % len(branches)]
            merged = merge_all_of({**base, "allOf": [branch]}) if base else branch
            candidate = self._value(merged, name, scope, path, depth, ctx, **kw)
            if i == 0:
                first = candidate
            if key == "anyOf" or sum(self._valid(b, candidate) for b in branches) == 1:
                return candidate
        return first

    def _valid(self, schema: dict[str, Any], value: Any) -> bool:
        return is_valid(schema, value)

    # -- containers ----------------------------------------------------------------------------

    def _object(self, schema: dict[str, Any], name: str, scope: _Scope, path: str, depth: int,
                ctx: RequestContext, *, entity: str | None, forced_id: Any, root: bool) -> dict[str, Any]:
        props: dict[str, Any] = schema.get("properties") or {}
        if not isinstance(props, dict):
            props = {}
        if depth >= MAX_DEPTH:
            required = set(schema.get("required") or [])
            props = {k: v for k, v in props.items() if k in required}
        own_id: Any = None
        id_key = own_id_key(props, entity) if entity in self.known else None
        if id_key is not None and entity is not None:
            own_id = self._own_id(props[id_key], entity, scope, path, ctx, forced_id, root)
            if own_id is not None:
                kind = "str" if isinstance(own_id, str) and id_kind(self._flatten(props[id_key])) == "int" \
                    else id_kind(self._flatten(props[id_key]))
                scope, path = _Scope(f"{entity}#{own_id}", entity, own_id, kind), ""
        elif entity is not None:
            scope = _Scope(scope.key, entity)
        # An entity instance below the root depends only on itself, its depth and the path's
        # ids (and on what clients wrote, which empties the cache): generated once, shared after.
        cache_key = (id(schema), entity, own_id, depth, tuple(sorted((k, str(v)) for k, v in ctx.path_ids.items()))) \
            if own_id is not None and not root else None
        if cache_key is not None:
            hit = self._instances.get(cache_key)
            if hit is not None and hit[0] is schema:
                return dict(hit[1])
        values: dict[str, Any] = {}
        required = set(schema.get("required") or []) if isinstance(schema.get("required"), list) else set()
        # A response never carries what only a client writes (writeOnly), and a recursion the
        # import cut is left out where the schema allows (an optional field, an empty list).
        props = {k: v for k, v in props.items()
                 if not (isinstance(v, dict) and v.get("writeOnly") is True)
                 and not (is_cut(v) and k not in required)}
        # Ids first, so that ``author_name`` can be the name of the ``author_id`` next to it.
        order = sorted(props, key=lambda k: 0 if k == "id" or id_entity(k) else 1)
        for k in order:
            sub = self._flatten(props[k])
            if k == id_key and own_id is not None:
                values[k] = own_id
                continue
            if root and k in ctx.echo and _compatible(ctx.echo[k], sub):
                values[k] = ctx.echo[k]
                continue
            if k in ctx.path_ids and _compatible(ctx.path_ids[k], sub):
                values[k] = ctx.path_ids[k]
                continue
            named = self._name_of_referenced(k, sub, values)
            if named is not None:
                values[k] = named
                continue
            hint = entity_from_name(k, self.known)
            # The endpoint's main list: ``results``-like, or named after what the endpoint lists
            # (``books`` of /authors/{id}/books); ``limit`` and the filters apply to it.
            primary = depth <= 1 and schema_type(sub) == "array" and (
                k in GENERIC_CONTAINERS or (hint is not None and hint == ctx.item_entity))
            if k in GENERIC_CONTAINERS and not root and entity is not None and own_id is None:
                # The ``items`` of a wrapper named after an entity (Spotify's ``artists: {items}``)
                # are that entity's instances, the same as on its detail endpoint.
                hint = entity
            elif k in GENERIC_CONTAINERS and depth <= 1:
                hint = ctx.item_entity
            if hint is None and root and schema_type(sub) == "array" and ctx.item_entity != ctx.root_entity \
                    and singular(k) == k.lower():
                # A top-level list the name does not explain (``cast`` of /person/{id}/movie_credits)
                # most likely holds what the endpoint is about; a plural (``genres``) names its own.
                hint = ctx.item_entity
            values[k] = self._value(sub, k, scope, f"{path}/{k}", depth + 1, ctx, entity=hint, primary=primary)
        out = {k: values[k] for k in props if k in values}
        instance = own_id if own_id is not None else (ctx.root_id if root and entity == ctx.root_entity else None)
        stored = ctx.state.fields(entity, instance) if ctx.state is not None and instance is not None else None
        if stored:
            for k, v in stored.items():
                if k in props and k != id_key and _compatible(v, self._flatten(props[k])):
                    out[k] = v
        if root:
            _fix_totals(out)
        extra = schema.get("additionalProperties")
        if extra is not False:
            # A name the schema requires without describing it (a spec's slip) still has to be
            # there: a value from additionalProperties, else a plain string.
            for k in sorted(required - set(out)):
                if k not in (schema.get("properties") or {}):
                    out[k] = self._value(extra, k, scope, f"{path}/{k}", depth + 1, ctx) if isinstance(extra, dict) \
                        else string_value(k, {}, entity, rng(scope.key, path, k))
        self._more_keys(schema, out, bool(props), required, scope, path, depth, ctx)
        if cache_key is not None:
            if len(self._instances) > _MAX_HEADS:
                self._instances.clear()
            self._instances[cache_key] = (schema, out)
            return dict(out)
        return out

    def _more_keys(self, schema: dict[str, Any], out: dict[str, Any], declared: bool, required: set[str],
                   scope: _Scope, path: str, depth: int, ctx: RequestContext) -> None:
        """Entries beyond the declared properties (:func:`atc.mock.keywords.more_keys`)."""

        def make(sub: Any, key: str, index: int) -> Any:
            if isinstance(sub, dict) and not is_cut(sub):
                return self._value(sub, key, scope, f"{path}/{key}", depth + 1, ctx)
            return string_value("note", {"type": "string"}, None, rng(scope.key, path, "extra", index))

        more_keys(schema, out, make, seed=(scope.key, path), free=not declared and depth < MAX_DEPTH,
                  required=required)

    def _own_id(self, id_schema: Any, entity: str, scope: _Scope, path: str, ctx: RequestContext,
                forced_id: Any, root: bool) -> Any:
        """The id of an entity object: given by the caller (a sampled list item), the request's
        (detail and sub-resource roots), or picked from the entity's space."""
        id_schema = self._flatten(id_schema)
        t = schema_type(id_schema)
        candidate = forced_id
        if candidate is None and root and ctx.root_id is not None:
            candidate = ctx.root_id
            if t == "integer" and isinstance(candidate, str) and candidate.isdigit():
                candidate = int(candidate)
        if candidate is None:
            kind = "str" if (t == "string" and id_kind(id_schema) == "int") else id_kind(id_schema)
            candidate = self.spaces.pick(entity, kind, scope.key, path, "id")
        if t == "string" and not isinstance(candidate, str):
            candidate = str(candidate)
        return candidate if _compatible(candidate, id_schema) else None

    def _name_of_referenced(self, key: str, schema: dict[str, Any], values: dict[str, Any]) -> str | None:
        """``author_name`` / ``store_title`` next to ``author_id``: the referenced entity's own name."""
        for suffix in ("_name", "_title", "Name", "Title"):
            if key.endswith(suffix) and len(key) > len(suffix) and schema_type(schema) in ("string", None):
                stem = key[: -len(suffix)]
                for id_key in (f"{stem}_id", f"{stem}Id"):
                    ref = singular(stem.lower())
                    if id_key in values and ref in self.known:
                        field = suffix.strip("_").lower()
                        return string_value(field, schema, ref, rng(f"{ref}#{values[id_key]}", f"/{field}"))
        return None

    def _array(self, schema: dict[str, Any], name: str, scope: _Scope, path: str, depth: int,
               ctx: RequestContext, *, entity: str | None, primary: bool) -> list[Any]:
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list) and prefix:
            return self._tuple(schema, prefix, name, scope, path, depth, ctx)
        items = self._flatten(schema.get("items"))
        n = ctx.items if primary else DEFAULT_ITEMS
        if depth >= MAX_DEPTH or is_cut(items):
            n = 0
        lo, hi = schema.get("minItems"), schema.get("maxItems")
        if isinstance(hi, int):
            n = min(n, hi)
        if isinstance(lo, int):
            n = max(n, lo)
        seed: tuple[Any, ...] = (scope.key, path) + ((ctx.tool, ctx.root_key) if primary else ())
        t = schema_type(items)
        ref = id_entity(name[:-1]) if name.endswith(("_ids", "Ids")) else None
        if ref is not None and ref in self.known and t in ("integer", "string"):
            kind = "str" if t == "string" and id_kind(items) == "int" else id_kind(items)
            return self.spaces.sample(ref, kind, n, *seed)
        forced: list[Any] = [None] * n
        props = items.get("properties") if isinstance(items.get("properties"), dict) else None
        key = own_id_key(props, entity) if props and entity in self.known else None
        if entity is not None and props and key is not None:
            id_schema = self._flatten(props[key])
            kind = "str" if schema_type(id_schema) == "string" and id_kind(id_schema) == "int" else id_kind(id_schema)
            pool = self._referring(entity, kind, props, ctx) if primary else None
            if pool is not None:
                r = rng("order", *seed)
                pool = r.sample(pool, len(pool))
            elif primary and ctx.filters:
                pool = self.spaces.sample(entity, kind, FILTER_SCAN, *seed)
            gone = ctx.state.gone if primary and ctx.state is not None else (lambda e, v: False)
            if pool is not None:
                pool = [v for v in [*ctx.first, *pool] if not gone(entity, v)]
                return self._filtered(items, props, pool, n, entity, name, scope, path, depth, ctx)
            forced = list(self.spaces.sample(entity, kind, n, *seed))
            if primary and (ctx.first or ctx.state is not None):
                forced = [v for v in [*ctx.first, *forced] if not gone(entity, v)][:n]
            forced += [None] * (n - len(forced))
        unique = schema.get("uniqueItems") is True
        choices = finite_values(items) if unique else None
        if choices is not None:
            # Distinct values from a finite set: drawn without replacement, never by retrying.
            return rng(scope.key, path, "unique").sample(choices, min(n, len(choices)))
        out: list[Any] = []
        i = 0
        # A repeated value is replaced by the next index's (a few extra tries), so that
        # ``uniqueItems`` does not leave a list shorter than ``minItems``.
        while len(out) < n and i < n + 2 * max(n, 4):
            value = self._value(items, singular(name), scope, f"{path}/{i}", depth + 1, ctx,
                                entity=entity, forced_id=forced[i] if i < len(forced) else None)
            i += 1
            if unique and value in out:
                continue
            out.append(value)
        return out

    def _tuple(self, schema: dict[str, Any], prefix: list[Any], name: str, scope: _Scope, path: str,
               depth: int, ctx: RequestContext) -> list[Any]:
        """OAS 3.1 ``prefixItems``: one value per position, then ``items`` up to ``minItems``."""
        out = [self._value(sub, name, scope, f"{path}/{i}", depth + 1, ctx) for i, sub in enumerate(prefix)]
        rest = schema.get("items")
        lo = schema.get("minItems")
        if isinstance(rest, dict) and isinstance(lo, int):
            for i in range(len(out), lo):
                out.append(self._value(rest, name, scope, f"{path}/{i}", depth + 1, ctx))
        hi = schema.get("maxItems")
        return out[:hi] if isinstance(hi, int) else out

    def _referring(self, entity: str, kind: str, props: dict[str, Any], ctx: RequestContext) -> list[Any] | None:
        """For ``/authors/{author_id}/books``: the books whose ``author_id`` is the requested one
        (None when the list is not scoped by a foreign key in the path)."""
        for wire, value in ctx.path_ids.items():
            target = id_entity(wire)
            if target is None or target == entity or target not in self.known or wire not in props:
                continue
            fk_schema = self._flatten(props[wire])
            fk_kind = "str" if schema_type(fk_schema) == "string" and id_kind(fk_schema) == "int" else id_kind(fk_schema)
            if fk_kind == "str" and not isinstance(value, str):
                value = str(value)
            return self.spaces.referrers(entity, kind, target, fk_kind, value)
        return None

    def _filtered(self, items: dict[str, Any], props: dict[str, Any], pool: list[Any], n: int, entity: str,
                  name: str, scope: _Scope, path: str, depth: int, ctx: RequestContext) -> list[Any]:
        """The main list drawn from ``pool`` (ids of ``entity``): the first ``n`` that satisfy the filters.

        Filters on enums, numbers and booleans are exact (``genre=poetry`` only lists poetry).
        Free-text filters (``query=garden``, ``city=lis``) match words case-insensitively in that
        property, or in ``title``/``name`` for a search term; when no instance matches them, the
        list falls back to ignoring them, as a fuzzy search would rather than answering nothing."""
        hard: dict[str, Any] = {}
        soft: dict[str, list[str]] = {}
        for key, value in ctx.filters.items():
            target = props.get(key)
            if isinstance(target, dict) and not (schema_type(self._flatten(target)) == "string"
                                                 and "enum" not in self._flatten(target)):
                hard[key] = value
            elif isinstance(value, str) and value.strip():
                fields = [key] if key in props else [f for f in ("title", "name") if f in props]
                for f in fields:
                    soft.setdefault(f, []).extend(w.lower() for w in value.split())
        # Filters are checked on a probe holding only the filtered properties (and the ids they may
        # depend on), generated exactly as in the full item; only the chosen ids are generated in full.
        needed = set(hard) | set(soft)
        probe = {**items, "required": [],
                 "properties": {k: v for k, v in props.items() if k == "id" or k in needed or id_entity(k)}}
        # (an own ``<entity>_id`` is an id_entity name too, so it is in the probe as well)
        matches: list[Any] = []
        fallback: list[Any] = []
        probed = tuple(sorted(needed))
        context = tuple(sorted((k, str(v)) for k, v in ctx.path_ids.items()))
        for cid in pool[:FILTER_SCAN]:
            if needed:
                # The filtered fields of an instance depend only on it (and on the path's ids):
                # kept, a search after the first looks at a few hundred dict entries, not objects.
                head_key = (id(items), probed, entity, cid, context)
                head = self._heads.get(head_key)
                written = ctx.state is not None and ctx.state.fields(entity, cid) is not None
                if head is None or written:
                    head = self._value(probe, singular(name), scope, f"{path}/{cid}", depth + 1, ctx,
                                       entity=entity, forced_id=cid)
                    if not written:
                        if len(self._heads) > _MAX_HEADS:
                            self._heads.clear()
                        self._heads[head_key] = head
                if not isinstance(head, dict) or not all(_matches(head.get(k), v) for k, v in hard.items()):
                    continue
                if len(fallback) < n:
                    fallback.append(cid)
                if not all(any(w in str(head.get(f, "")).lower() for w in words) for f, words in soft.items()):
                    continue
            matches.append(cid)
            if len(matches) >= n:
                break
        chosen = matches if (matches or not soft) else fallback
        return [self._value(items, singular(name), scope, f"{path}/{cid}", depth + 1, ctx, entity=entity,
                            forced_id=cid) for cid in chosen]
