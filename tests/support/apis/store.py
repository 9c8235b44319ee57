"""A JSON resource store on 127.0.0.1 that holds data worth losing, for the unsafe-probing tests.

It behaves like the JSON storage services people run for real (buckets of collections of
records, groups, user accounts behind Basic auth), generically: every path is a walk down a
tree, ``/KIND/ID/KIND/ID...``, and each KIND answers the same verbs:

- ``GET /KIND`` lists (``{"data": [...]}``; any query parameter filters on an attribute),
  ``POST /KIND`` creates (``{"data": {...}}``; the server picks the id unless ``data.id`` is
  given; 201, or 200 with the existing object when that id exists), ``DELETE /KIND`` deletes
  **every** object of that kind there (a bulk delete);
- ``GET /KIND/ID``, ``PUT`` (create or replace: 201 when created, 200 when replaced;
  ``If-None-Match: *`` makes it 412 instead of replacing), ``PATCH`` (merge), ``DELETE``
  (the object and all under it).

Kinds: ``accounts`` and ``buckets`` at the root, ``collections`` and ``groups`` in a bucket,
``records`` in a collection. A group needs ``data.members``. Every request but ``GET
/__heartbeat__`` needs Basic auth of an account; deleting that account (``DELETE /accounts``
does) makes every later request 401. A bucket with an ``owner`` answers 403 to anyone else.
``POST /__flush__`` wipes everything. ``expire_after=N`` makes the credential stop working after
N requests (a token that expires mid-probe).

``log`` holds every request as the server saw it (method, path, status, the id it created);
``snapshot()`` the state, for tests that assert nothing outside a scope changed.
``sloppy_puts=True`` makes ``PUT`` answer 201 whether it created or replaced, ignoring
``If-None-Match`` (as sloppy real ones do).
"""

from __future__ import annotations

import base64
import copy
import json
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.support.fakes.serving import LoopbackServer, QuietHandler

USER, PASSWORD = "ada", "s3cret-pass-7Q"
#: Which kinds live where.
CHILDREN = {"": ("accounts", "buckets"), "buckets": ("collections", "groups"), "collections": ("records",)}


def initial_state() -> dict[str, Any]:
    """What the user had before any probe: their account, a bucket they care about, another user's bucket."""
    def node(attrs: dict[str, Any], **children: dict[str, Any]) -> dict[str, Any]:
        return {"attrs": attrs, "children": children}

    records = {f"r{i}": node({"id": f"r{i}", "title": title, "done": i % 2 == 0})
               for i, title in enumerate(["Plan the trip", "Book the train", "Pack"], 1)}
    return {"attrs": {}, "children": {
        "accounts": {USER: node({"id": USER, "password": PASSWORD}), "bob": node({"id": "bob", "password": "b0b-pw"})},
        "buckets": {
            "main": node({"id": "main", "title": "Everything I keep"}, collections={
                "todo": node({"id": "todo", "schema": "task"}, records=records)}, groups={
                "family": node({"id": "family", "members": ["ada", "bob"]})}),
            "vault": node({"id": "vault", "owner": "bob"}, collections={}, groups={}),
        }}}


@dataclass
class Logged:
    method: str
    path: str
    status: int
    created: str | None = None


@dataclass
class StoreAPI(LoopbackServer):
    port: int = 0
    expire_after: int | None = None
    sloppy_puts: bool = False
    state: dict[str, Any] = field(default_factory=initial_state)
    log: list[Logged] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return copy.deepcopy(self.state)

    def writes(self) -> list[Logged]:
        return [r for r in self.log if r.method not in ("GET", "HEAD")]

    def start(self) -> StoreAPI:
        api = self

        class Handler(QuietHandler):
            def _answer(self, status: int, obj: Any, created: str | None = None) -> None:
                with api._lock:
                    api.log.append(Logged(self.command, urlsplit(self.path).path, status, created))
                self.send_json(status, obj)

            def _user(self) -> str | None:
                """The account the request's Basic credential names (None: none, a wrong one, or
                every credential expired after ``expire_after`` requests)."""
                with api._lock:
                    requests = len(api.log)
                if api.expire_after is not None and requests >= api.expire_after:
                    return None
                header = self.headers.get("Authorization") or ""
                if not header.startswith("Basic "):
                    return None
                try:
                    user, _, password = base64.b64decode(header[6:]).decode().partition(":")
                except ValueError:
                    return None
                account = api.state["children"]["accounts"].get(user)
                return user if account is not None and account["attrs"].get("password") == password else None

            def _serve(self) -> None:
                split = urlsplit(self.path)
                raw = self.body()
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    return self._answer(400, {"message": "the body is not JSON"})
                parts = [unquote(p) for p in split.path.split("/") if p]
                if parts == ["__heartbeat__"]:
                    return self._answer(200, {"ok": True})
                user = self._user()
                if user is None:
                    return self._answer(401, {"message": "Please authenticate yourself to use this endpoint."})
                if parts == ["__flush__"] and self.command == "POST":
                    with api._lock:
                        api.state = {"attrs": {}, "children": {"accounts": {}, "buckets": {}}}
                    return self._answer(202, {})
                query = {k: v[-1] for k, v in parse_qs(split.query).items()}
                with api._lock:
                    status, answer, created = self._route(parts, body if isinstance(body, dict) else {}, query, user)
                self._answer(status, answer, created)

            def _route(self, parts: list[str], body: dict[str, Any], query: dict[str, str],
                       user: str) -> tuple[int, Any, str | None]:
                node = api.state
                kind = ""
                for i in range(0, len(parts) - 1, 2):
                    name, ident = parts[i], parts[i + 1]
                    if name not in CHILDREN.get(kind, ()):
                        return 404, {"message": f"no such path: /{'/'.join(parts)}"}, None
                    found = node["children"].get(name, {}).get(ident)
                    if found is None:
                        return 404, {"message": f"{name[:-1]} {ident!r} not found"}, None
                    owner = found["attrs"].get("owner")
                    if owner and owner != user:
                        return 403, {"message": f"you may not read {name[:-1]} {ident!r}"}, None
                    node, kind = found, name
                    if i + 2 == len(parts):
                        return self._object(name, ident, node, body, kind_parent(parts, i, api.state))
                name = parts[-1] if len(parts) % 2 == 1 else ""
                if name not in CHILDREN.get(kind, ()):
                    return 404, {"message": f"no such path: /{'/'.join(parts)}"}, None
                return self._list(name, node, body, query)

            def _list(self, name: str, node: dict[str, Any], body: dict[str, Any],
                      query: dict[str, str]) -> tuple[int, Any, str | None]:
                children = node["children"].setdefault(name, {})
                if self.command == "GET":
                    items = [c["attrs"] for c in children.values()
                             if all(str(c["attrs"].get(k)) == v for k, v in query.items() if not k.startswith("_"))]
                    return 200, {"data": [_public(a) for a in items]}, None
                if self.command == "DELETE":
                    gone = [{"id": k, "deleted": True} for k in children]
                    children.clear()
                    return 200, {"data": gone}, None
                if self.command == "POST":
                    data = body.get("data") if isinstance(body.get("data"), dict) else {}
                    problem = _invalid(name, data)
                    if problem:
                        return 400, {"message": problem}, None
                    ident = str(data.get("id") or secrets.token_hex(4))
                    if ident in children:
                        return 200, {"data": _public(children[ident]["attrs"])}, None
                    children[ident] = {"attrs": {**data, "id": ident}, "children": {}}
                    return 201, {"data": _public(children[ident]["attrs"])}, ident
                return 405, {"message": "method not allowed"}, None

            def _object(self, name: str, ident: str, node: dict[str, Any], body: dict[str, Any],
                        parent: dict[str, Any]) -> tuple[int, Any, str | None]:
                if self.command == "GET":
                    return 200, {"data": _public(node["attrs"])}, None
                if self.command == "DELETE":
                    del parent["children"][name][ident]
                    return 200, {"data": {"id": ident, "deleted": True}}, None
                data = body.get("data") if isinstance(body.get("data"), dict) else {}
                if self.command == "PATCH":
                    node["attrs"].update({k: v for k, v in data.items() if k != "id"})
                    return 200, {"data": _public(node["attrs"])}, None
                return 405, {"message": "method not allowed"}, None

            def _put(self) -> None:
                """PUT of one object: create or replace (handled apart: the object may not exist)."""
                split = urlsplit(self.path)
                parts = [unquote(p) for p in split.path.split("/") if p]
                raw = self.body()
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    return self._answer(400, {"message": "the body is not JSON"})
                user = self._user()
                if user is None:
                    return self._answer(401, {"message": "Please authenticate yourself to use this endpoint."})
                if len(parts) % 2 or not parts:
                    return self._answer(405, {"message": "method not allowed"})
                with api._lock:
                    status, answer, created = self._put_in(parts, body if isinstance(body, dict) else {}, user)
                self._answer(status, answer, created)

            def _put_in(self, parts: list[str], body: dict[str, Any], user: str) -> tuple[int, Any, str | None]:
                node = api.state
                kind = ""
                for i in range(0, len(parts) - 2, 2):
                    found = node["children"].get(parts[i], {}).get(parts[i + 1])
                    if parts[i] not in CHILDREN.get(kind, ()) or found is None:
                        return 404, {"message": f"{parts[i][:-1]} {parts[i + 1]!r} not found"}, None
                    if found["attrs"].get("owner") not in (None, user):
                        return 403, {"message": "forbidden"}, None
                    node, kind = found, parts[i]
                name, ident = parts[-2], parts[-1]
                if name not in CHILDREN.get(kind, ()):
                    return 404, {"message": "no such path"}, None
                children = node["children"].setdefault(name, {})
                data = body.get("data") if isinstance(body.get("data"), dict) else {}
                existing = children.get(ident)
                if existing is not None and self.headers.get("If-None-Match") == "*" and not api.sloppy_puts:
                    return 412, {"message": "it exists already"}, None
                if existing is not None and existing["attrs"].get("owner") not in (None, user):
                    return 403, {"message": "forbidden"}, None
                problem = _invalid(name, data)
                if problem:
                    return 400, {"message": problem}, None
                attrs = {**data, "id": ident}
                if existing is not None:
                    existing["attrs"] = attrs
                    return (201 if api.sloppy_puts else 200), {"data": _public(attrs)}, None
                children[ident] = {"attrs": attrs, "children": {}}
                return 201, {"data": _public(attrs)}, ident

            do_GET = do_POST = do_DELETE = do_PATCH = _serve
            do_PUT = _put

        self._serve(Handler, self.port)
        assert self._server is not None
        self.port = self._server.server_address[1]
        return self

    def spec(self) -> dict[str, Any]:
        return store_spec(self.url)

    def write_spec(self, path: Path) -> Path:
        path.write_text(json.dumps(self.spec(), indent=1))
        return path


def kind_parent(parts: list[str], i: int, state: dict[str, Any]) -> dict[str, Any]:
    """The node that holds the object at ``parts[i:i+2]``."""
    node = state
    for j in range(0, i, 2):
        node = node["children"][parts[j]][parts[j + 1]]
    return node


def _public(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if k != "password"}


def _invalid(kind: str, data: dict[str, Any]) -> str | None:
    if kind == "groups" and not isinstance(data.get("members"), list):
        return "data.members is required (a list of account ids)"
    if kind == "accounts" and not data.get("password"):
        return "data.password is required"
    return None


# -- the spec (Swagger 2.0, as such services publish it) ------------------------------------------


def _param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "type": "string"}


def _body(required: bool = False, **data: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {
        "data": {"type": "object", "properties": {"id": {"type": "string"}, **data.get("props", {})},
                 **({"required": data["needs"]} if data.get("needs") else {})},
        "permissions": {"type": "object"}}}
    if required:
        schema["required"] = ["data"]
    return {"name": "body", "in": "body", "required": required, "schema": schema}


def _op(op_id: str, params: list[dict[str, Any]], *more: dict[str, Any]) -> dict[str, Any]:
    return {"operationId": op_id, "parameters": [*params, *more], "responses": {"200": {"description": "OK"}}}


def store_spec(url: str) -> dict[str, Any]:
    split = urlsplit(url)
    paths: dict[str, Any] = {"/__heartbeat__": {"get": _op("heartbeat", [])},
                             "/__flush__": {"post": _op("flush", [])}}
    levels = [("accounts", "account", []), ("buckets", "bucket", []),
              ("collections", "collection", ["buckets"]), ("groups", "group", ["buckets"]),
              ("records", "record", ["buckets", "collections"])]
    singular = {"buckets": "bucket", "collections": "collection"}
    for plural, one, above in levels:
        prefix = "".join(f"/{k}/{{{singular[k]}_id}}" for k in above)
        params = [_param(f"{singular[k]}_id") for k in above]
        own = "id" if one in ("record", "group", "account") else f"{one}_id"
        needs = {"group": ["members"], "account": ["password"]}.get(one)
        props = {"members": {"type": "array", "items": {"type": "string"}}} if one == "group" else \
            {"password": {"type": "string"}} if one == "account" else {"title": {"type": "string"}}
        body = _body(bool(needs), props=props, needs=needs)
        paths[f"{prefix}/{plural}"] = {
            "get": _op(f"get_{plural}", params),
            "post": _op(f"create_{one}", params, body),
            "delete": _op(f"delete_{plural}", params),
        }
        item = params + [_param(own)]
        paths[f"{prefix}/{plural}/{{{own}}}"] = {
            "get": _op(f"get_{one}", item),
            "put": _op(f"update_{one}", item, body,
                       {"name": "If-None-Match", "in": "header", "required": False, "type": "string"}),
            "patch": _op(f"patch_{one}", item, _body(False, props=props)),
            "delete": _op(f"delete_{one}", item),
        }
    return {"swagger": "2.0", "info": {"title": "Store", "version": "1.0"}, "host": split.netloc,
            "basePath": "/", "schemes": ["http"], "securityDefinitions": {"basicAuth": {"type": "basic"}},
            "security": [{"basicAuth": []}], "paths": paths}
