"""The fake API without the HTTP server: ``MockApp.handle()`` turns one request into one answer.

A request goes through what a real server of the spec would do, in the order most servers do it:

1. **route** by method and path template (literal segments win over parameters; the server's base
   path is accepted but not needed); an unknown path is 404, a known path with another method
   405 with ``Allow``;
2. **credentials**, when the operation declares ``security`` (any value is valid unless the
   server was given the valid ones; ``auth=False`` turns the check off);
3. **arguments**, read and checked against their full schemas (:mod:`atc.mock.parsing`);
4. **content negotiation** of the success answer's media type against ``Accept``;
5. **existence** of every id in the path (:mod:`atc.mock.state` and the id spaces);
6. the **answer**: generated from the documented response (:mod:`atc.mock.gen`,
   :mod:`atc.mock.responses`), with what clients wrote before applied to it, and this request's own
   writes kept (create, replace, update, delete).

Every refusal is answered in the shape and with a status the operation documents.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from atc.mock.entities import (
    ANY_ENTITY,
    GENERIC_CONTAINERS,
    IdProfile,
    IdSpaces,
    as_dict,
    entity_from_name,
    id_entity,
    merge_profile,
    schema_type,
)
from atc.mock.gen import DEFAULT_ITEMS, MAX_ITEMS, RequestContext, SchemaFaker, merge_all_of
from atc.mock.parsing import BadRequest, Upload, arguments, read_body, read_cookies
from atc.mock.request_checks import credential_problem, is_valid
from atc.mock.responses import (
    HEADER,
    NOT_ACCEPTABLE,
    ErrorMaker,
    MockResponse,
    concrete_media,
    declared_media,
    documents_not_found,
    encode,
    is_json,
    negotiate,
    success_status,
)
from atc.mock.routes import Endpoint, compile_endpoint, known_entities
from atc.mock.satisfy import verdict
from atc.mock.state import MockState
from protocols.model import Collection

__all__ = ["MockApp", "LIMIT_PARAMS"]

#: Query parameters that set how many items the endpoint's main list holds (bounded by MAX_ITEMS).
LIMIT_PARAMS = ("limit", "per_page", "page_size", "pagesize", "size", "max_results", "maxresults", "count", "n")
#: Query parameters that shape a list without being a condition on its items.
_NOT_FILTERS = frozenset("page offset cursor sort sort_by order order_by direction fields include expand "
                         "language lang locale region format api_key apikey key token callback market".split())
_WRITES = ("POST", "PUT", "PATCH", "DELETE")


class MockApp:
    """See the module docstring. ``auth``: check the credentials operations declare;
    ``credentials``: scheme name -> the values that are valid (absent: any value is).

    Thread-safe: reads run side by side; writes (POST, PUT, PATCH, DELETE) one at a time, so that
    what they mint and keep depends only on their order."""

    def __init__(self, collection: Collection, *, auth: bool = True,
                 credentials: dict[str, set[str]] | None = None) -> None:
        self.collection = collection
        self.auth = auth
        self.credentials = {k: set(v) for k, v in (credentials or {}).items()}
        self.known = known_entities(collection)
        endpoints = [compile_endpoint(t, self.known) for t in collection.tools]
        # More literal segments first, then longer literals: /movie/latest before /movie/{id}.
        self.endpoints = sorted(endpoints, key=lambda e: (-e.rank[0], -e.rank[1]))
        self.spaces = IdSpaces(profiles=id_profiles(self.endpoints, self.known))
        self.faker = SchemaFaker(self.spaces, self.known)
        self.errors = ErrorMaker(self.faker)
        self.state = MockState(self.spaces)
        prefixes = {urlsplit(s).path.rstrip("/") for s in collection.servers}
        prefixes |= {urlsplit(s).path.rstrip("/") for t in collection.tools for s in t.servers}
        self.prefixes = sorted((p for p in prefixes if p), key=len, reverse=True)
        self._writes = threading.Lock()
        self._trimmed: dict[tuple[int, frozenset[str]], tuple[dict[str, Any], dict[str, Any]]] = {}
        # The spec's examples are checked against their schemas (which loads jsonschema, the
        # largest part of a cold start): done in the background, before the first answer.
        self._seeded = threading.Event()
        threading.Thread(target=self._seed_in_background, name="atc-mock-seed", daemon=True).start()

    def _seed_in_background(self) -> None:
        try:
            self._seed_examples()
        finally:
            self._seeded.set()

    @property
    def operations(self) -> int:
        return len(self.endpoints)

    def handle(self, method: str, target: str, headers: dict[str, str] | None = None,
               body: bytes = b"") -> MockResponse:
        """Answer one request. ``target`` is the request target (path and query string)."""
        method = method.upper()
        lowered = {k.lower(): v for k, v in (headers or {}).items()}
        self._seeded.wait()
        if method in _WRITES:
            with self._writes:
                return self._handle(method, target, lowered, body)
        return self._handle(method, target, lowered, body)

    # -- routing -------------------------------------------------------------------------------

    def _candidates(self, path: str) -> list[str]:
        return [path] + [path[len(p):] or "/" for p in self.prefixes if path == p or path.startswith(p + "/")]

    def allowed(self, path: str) -> list[str]:
        """The methods documented for a path (with HEAD where GET is), empty for an unknown path."""
        found: list[str] = []
        for candidate in self._candidates(path):
            for ep in self.endpoints:
                if ep.regex.match(candidate):
                    found.append(ep.tool.method.upper())
        if "GET" in found:
            found.append("HEAD")
        return sorted(set(found))

    def route(self, method: str, path: str) -> tuple[Endpoint, dict[str, str]] | MockResponse:
        for candidate in self._candidates(path):
            for ep in self.endpoints:
                m = ep.regex.match(candidate)
                if m and ep.tool.method.upper() == method:
                    return ep, {ep.groups[g]: unquote(v) for g, v in m.groupdict().items()}
        allowed = self.allowed(path)
        if allowed:
            return MockResponse(405, {"error": "method_not_allowed", "message": f"{method} is not allowed on {path}",
                                      "allowed": allowed}, {"Allow": ", ".join(allowed)})
        return MockResponse(404, {"error": "not_found", "message": f"no operation for {method} {path}"})

    # -- one request ---------------------------------------------------------------------------

    def _handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> MockResponse:
        split = urlsplit(target)
        routed = self.route(method, split.path or "/")
        if isinstance(routed, MockResponse):
            return routed
        ep, path_args = routed
        resp = self._answer(ep, path_args, parse_qs(split.query, keep_blank_values=True), headers, body)
        resp.tool = ep.tool.name
        return resp

    def _answer(self, ep: Endpoint, path_args: dict[str, str], query: dict[str, list[str]],
                headers: dict[str, str], body: bytes) -> MockResponse:
        tool = ep.tool
        accept = headers.get("accept")
        cookies = read_cookies(headers)
        if self.auth:
            problem = credential_problem(tool, self.collection, headers, query, cookies, self.credentials)
            if problem is not None:
                return self.errors.make(tool, "unauthorized", f"{problem} (atc mock: any value is accepted "
                                        "unless the mock was given valid ones; --no-auth turns the check off)", accept)
        try:
            payload, form = read_body(tool, headers, body)
            args = arguments(tool, path_args, query, headers, cookies, payload, form)
        except BadRequest as exc:
            return self.errors.make(tool, exc.kind, exc.message, accept, parameter=exc.wire, **{"in": exc.location})
        key = success_status(tool)
        entry = tool.responses.get(key) if key is not None else None
        content = as_dict(as_dict(entry).get("content"))
        media: str | None = "application/json"
        if tool.responses:
            media = negotiate(content, accept)
            if media == NOT_ACCEPTABLE:
                return self.errors.make(tool, "not_acceptable", f"this operation answers in {', '.join(content)}, "
                                        f"none of which Accept: {accept} takes", accept)
        for wire, entity in ep.id_params.items():
            raw = path_args.get(wire, "")
            creating = tool.method.upper() == "PUT" and ep.mode == "detail" and wire == ep.root_param
            # Ids of things the mock could not attribute (ANY_ENTITY: the ``cast`` of credits) are
            # accepted anywhere, so that a chain through such a list does not break.
            if not creating and not self.state.exists(entity, raw, (ANY_ENTITY,)) and documents_not_found(tool):
                return self.errors.make(tool, "not_found", f"no {entity} with id {raw!r}", accept, parameter=wire)
        return self._respond(ep, args, key, media, content, accept)

    def _respond(self, ep: Endpoint, args: dict[tuple[str, str], Any], key: str | None, media: str | None,
                 content: dict[str, Any], accept: str | None = None) -> MockResponse:
        tool = ep.tool
        status = int(key) if key is not None and key.isdigit() else 200
        echo = {wire: v for (loc, wire), v in args.items()
                if loc in ("query", "path", "body") and wire and not isinstance(v, Upload)}
        sent = {wire: v for (loc, wire), v in args.items() if loc == "body" and wire and not isinstance(v, Upload)}
        path_ids = {w: args[("path", w)] for w in ep.id_params if ("path", w) in args}
        parents = {ep.id_params[w]: v for w, v in path_ids.items() if w != ep.root_param}
        owners = {ep.id_params[w]: v for w, v in path_ids.items()}
        items = DEFAULT_ITEMS
        for name in LIMIT_PARAMS:
            value = echo.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                items = max(0, min(MAX_ITEMS, value))
                break
        filters = {wire: v for (loc, wire), v in args.items()
                   if loc == "query" and wire not in LIMIT_PARAMS and wire not in _NOT_FILTERS}
        root_id = args.get(("path", ep.root_param)) if ep.root_param else None
        if ep.mode == "create" and ep.root_entity is not None:
            root_id = self.state.mint(ep.root_entity, self._id_kind(ep.root_entity))
        first = self.state.children(ep.item_entity, owners) if ep.item_entity and tool.method.upper() == "GET" \
            and ep.mode != "detail" else []
        canonical = sorted(args.items(), key=lambda kv: kv[0])
        seed_key = repr([[loc, wire, v] for (loc, wire), v in canonical])
        if ep.mode == "create":
            seed_key += f"#{root_id}"
        ctx = RequestContext(tool=tool.name, root_key=f"{tool.name}?{seed_key}", echo=echo, path_ids=path_ids,
                             items=items, filters=filters, root_entity=ep.root_entity, root_id=root_id,
                             item_entity=ep.item_entity, state=self.state, first=first)
        self._write(ep, root_id, sent, path_ids, parents)
        headers = self.errors.headers(tool, key, f"{tool.name}?{seed_key}") if key is not None else {}
        if status in (204, 205, 304) or (tool.responses and media is None):
            # No body; its media type is still said when the spec documents one for this answer.
            entry = tool.responses.get(key) if key is not None else None
            declared = declared_media(entry, accept) if isinstance(entry, dict) else None
            if declared is not None and as_dict(entry).get("content") and status in (204, 205, 304):
                headers[HEADER] = f"a {status} answer has no body, but the spec documents one ({declared})"
            return MockResponse(status, None, headers, media_type=declared, data=b"" if declared else None)
        schema = content.get(media) if media is not None and tool.responses else tool.response_schema
        if not isinstance(schema, dict) or not schema:
            schema = tool.response_schema if isinstance(tool.response_schema, dict) and is_json(media) \
                else self._fallback_schema(ep) if is_json(media) or not tool.responses else {"type": "string"}
        chosen = self._selected(ep, schema, args)
        value = self.faker.response(chosen, ctx)
        problem = verdict(chosen, value)
        if problem:
            headers[HEADER] = problem
        answered = concrete_media(media) if media is not None else "application/json"
        if is_json(answered):
            return MockResponse(status, value, headers, media_type=answered)
        return MockResponse(status, value, headers, media_type=answered,
                            data=encode(value, answered, schema, seed_key))

    def _selected(self, ep: Endpoint, schema: dict[str, Any], args: dict[tuple[str, str], Any]) -> dict[str, Any]:
        """The answer's schema with only the parts a query parameter selects (Spotify's
        ``/search?type=track`` answers ``tracks`` alone, not albums, artists, ... too).

        A parameter selects parts when its values are an ``enum`` whose every value names one of
        the answer's top-level properties (``track`` -> ``tracks``): a parameter documented that
        way says what it chooses. Required properties stay. Anything else: the schema as is."""
        flat = self.faker._flatten(schema)
        props = flat.get("properties")
        if not isinstance(props, dict) or len(props) < 2:
            return schema
        required = set(flat.get("required") or [])
        for (loc, wire), value in args.items():
            if loc != "query":
                continue
            parts = self._parts(ep, wire, props)
            if parts is None:
                continue
            given = value if isinstance(value, list) else [value]
            chosen = {parts[v.strip().lower()] for g in given if isinstance(g, str)
                      for v in g.split(",") if v.strip().lower() in parts}
            if not chosen:
                continue
            keep = frozenset(chosen | (required & set(props)))
            memo_key = (id(flat), keep)
            hit = self._trimmed.get(memo_key)
            if hit is None or hit[0] is not flat:  # one dict per choice: the faker's caches key on identity
                hit = (flat, {**flat, "properties": {k: v for k, v in props.items() if k in keep}})
                self._trimmed[memo_key] = hit
            return hit[1]
        return schema

    def _parts(self, ep: Endpoint, wire: str, props: dict[str, Any]) -> dict[str, str] | None:
        """A query parameter's enum values -> the top-level properties they name, when every
        value names one (None: not a parameter that selects parts)."""
        tool = ep.tool
        name = next((n for n, b in tool.bindings.items() if b.location == "query" and b.name == wire), wire)
        pschema = as_dict(as_dict(tool.parameters.get("properties")).get(name))
        enum = pschema.get("enum") if "enum" in pschema else as_dict(pschema.get("items")).get("enum")
        if not isinstance(enum, list) or len(enum) < 2:
            return None
        lowered = {k.lower(): k for k in props}
        out: dict[str, str] = {}
        for e in enum:
            if not isinstance(e, str):
                return None
            v = e.lower()
            match = next((lowered[c] for c in (v, v + "s", v + "es", v[:-1] + "ies" if v.endswith("y") else v)
                          if c in lowered), None)
            if match is None:
                return None
            out[v] = match
        return out

    def _write(self, ep: Endpoint, root_id: Any, sent: dict[str, Any], path_ids: dict[str, Any],
               parents: dict[str, Any]) -> None:
        """Keep what a write request changes: the body fields the client sent (and the parents in
        the path), under the object's id."""
        method = ep.tool.method.upper()
        entity = ep.root_entity
        if entity is None or root_id is None or method not in _WRITES or ep.mode not in ("create", "detail"):
            return
        self.faker.forget()
        if method == "DELETE":
            self.state.delete(entity, root_id)
            return
        fields = {k: v for k, v in sent.items() if k != "id"}
        fields.update({w: v for w, v in path_ids.items() if w != ep.root_param})
        fields.update({f"{p}_id": v for p, v in parents.items()})
        self.state.put(entity, root_id, fields, merge=method in ("PATCH", "POST") and ep.mode == "detail",
                       parents=parents)

    def _id_kind(self, entity: str) -> str:
        profile = self.spaces.profiles.get(entity)
        return profile.kind if profile is not None else "int"

    @staticmethod
    def _fallback_schema(ep: Endpoint) -> dict[str, Any]:
        item = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}
        if ep.tool.method.upper() == "GET" and ep.mode in ("free", "sub"):
            return {"type": "object", "properties": {"results": {"type": "array", "items": item}}}
        return item

    # -- the spec's own examples ---------------------------------------------------------------

    def _seed_examples(self) -> None:
        """Objects the spec shows: example responses of detail endpoints, and example path ids."""
        for ep in self.endpoints:
            tool = ep.tool
            for wire, entity in ep.id_params.items():
                pname = next((n for n, b in tool.bindings.items() if b.location == "path" and b.name == wire), wire)
                schema = tool.properties.get(pname)
                example = schema.get("example") if isinstance(schema, dict) else None
                if isinstance(example, (str, int)) and not isinstance(example, bool) \
                        and self.state.status(entity, example) is None:
                    self.state.seed(entity, example, {})
            if ep.mode != "detail" or tool.method.upper() != "GET" or ep.root_entity is None:
                continue
            for ex in tool.examples:
                response = ex.get("response")
                status = ex.get("status")
                if not isinstance(response, dict) or (isinstance(status, int) and not 200 <= status < 300):
                    continue
                ident = response.get("id")
                args = as_dict(ex.get("args"))
                root = next((n for n, b in tool.bindings.items() if b.location == "path" and b.name == ep.root_param),
                            None)
                if root is not None and isinstance(args.get(root), (str, int)):
                    ident = args[root]
                if isinstance(ident, (str, int)) and not isinstance(ident, bool) \
                        and is_valid(tool.response_schema, response):
                    self.state.seed(ep.root_entity, ident, {k: v for k, v in response.items() if k != "id"})
                    self._seed_nested(response, 0)

    def _seed_nested(self, value: Any, depth: int, entity: str | None = None) -> None:
        """The entity instances inside an example (``networks: [{"id": 49, "name": "HBO"}]``, an
        ``author_id``) exist too, so that following the example's references works."""
        if depth > 8:
            return
        if isinstance(value, list):
            for item in value[:100]:
                self._seed_nested(item, depth + 1, entity)
            return
        if not isinstance(value, dict):
            return
        ident = value.get("id")
        if depth and entity is not None and isinstance(ident, (str, int)) and not isinstance(ident, bool):
            self.state.seed(entity, ident, {k: v for k, v in value.items() if k != "id"})
        for key, sub in value.items():
            ref = id_entity(key)
            if ref in self.known and isinstance(sub, (str, int)) and not isinstance(sub, bool):
                self.state.seed(ref, sub, {})
            elif isinstance(sub, (dict, list)):
                self._seed_nested(sub, depth + 1, entity_from_name(key, self.known) if key not in GENERIC_CONTAINERS
                                  else entity)


def id_profiles(endpoints: list[Endpoint], known: frozenset[str]) -> dict[str, IdProfile]:
    """What each entity's ids look like, from every schema that holds one (see ``merge_profile``)."""
    seen: dict[str, list[dict[str, Any]]] = {}
    for ep in endpoints:
        tool = ep.tool
        for wire, entity in ep.id_params.items():
            pname = next((n for n, b in tool.bindings.items() if b.location == "path" and b.name == wire), wire)
            schema = tool.properties.get(pname)
            if isinstance(schema, dict):
                seen.setdefault(entity, []).append(schema)
        if isinstance(tool.response_schema, dict):
            root = ep.root_entity if ep.mode in ("detail", "create") else None
            _collect_ids(tool.response_schema, root, ep.item_entity, known, seen, 0)
    return {e: p for e, schemas in seen.items() if (p := merge_profile(schemas)) is not None}


def _collect_ids(schema: Any, entity: str | None, items_entity: str | None, known: frozenset[str],
                 seen: dict[str, list[dict[str, Any]]], depth: int) -> None:
    if not isinstance(schema, dict) or depth > 6:
        return
    schema = merge_all_of(schema) if "allOf" in schema else schema
    t = schema_type(schema)
    if t == "array":
        _collect_ids(schema.get("items"), items_entity if depth <= 2 else None, None, known, seen, depth + 1)
        return
    props = schema.get("properties")
    if not isinstance(props, dict):
        return
    for name, sub in props.items():
        if not isinstance(sub, dict):
            continue
        sub_type = schema_type(sub)
        if name == "id" and entity is not None and sub_type in ("integer", "number", "string"):
            seen.setdefault(entity, []).append(sub)
        elif (ref := id_entity(name)) is not None and ref in known and sub_type in ("integer", "number", "string"):
            seen.setdefault(ref, []).append(sub)
        elif sub_type in ("object", "array"):
            inner = items_entity if name in GENERIC_CONTAINERS else None
            _collect_ids(sub, None, inner, known, seen, depth + 1)

