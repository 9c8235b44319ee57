"""A JSON REST server on 127.0.0.1 in the style of the mock servers people stand up from a JSON
file: every resource a list at ``/NAME``, one item at ``/NAME/{id}``, and relations expressed by
**optional filters** named after another resource's id -- ``/comments?postId=1``,
``/photos?albumId=2``, ``/todos?user_id=3``, ``/repos?owner=ada`` -- that the spec lists as
optional query parameters. Without them every list answers everything, so only a probe that tries
the filters finds the relations. ``/users?albumId=`` is a filter the server ignores (as real ones
ignore unknown parameters); ``_limit`` caps a list.

``writes=True`` also serves writes as such mock servers do: ``POST /NAME`` (201; the id given in
the body, else the next number), ``PUT``/``PATCH``/``DELETE /NAME/{id}``; ``spec(writes=True)``
declares them. ``requests`` holds every request as (path, query), ``log`` every one as (method,
path, status); ``data`` is the state, for tests that check nothing else changed.
"""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.fakes.serving import LoopbackServer, QuietHandler

USERS = [{"id": i, "username": name, "name": full, "email": f"{name}@example.test"}
         for i, (name, full) in enumerate([("ada", "Ada Lovelace"), ("alan", "Alan Turing"), ("grace", "Grace Hopper")],
                                          1)]
POSTS = [{"id": i, "userId": 1 + i % 3, "title": f"Post number {i}"} for i in range(1, 10)]
COMMENTS = [{"id": i, "postId": 1 + i % 9, "email": f"c{i}@example.test", "body": f"Comment {i}"} for i in range(1, 28)]
ALBUMS = [{"id": i, "userId": 1 + i % 3, "title": f"Album {i}"} for i in range(1, 7)]
PHOTOS = [{"id": i, "albumId": 1 + i % 6, "title": f"Photo {i}", "url": f"https://img.example.test/{i}.png"}
          for i in range(1, 19)]
TODOS = [{"id": i, "user_id": 1 + i % 3, "title": f"Todo {i}", "done": i % 2 == 0} for i in range(1, 13)]
REPOS = [{"id": 100 + i, "name": f"repo-{i}", "owner": USERS[i % 3]["username"], "stars": i * 7} for i in range(1, 7)]

#: resource -> (records, {filter name: record field})
RESOURCES: dict[str, tuple[list[dict[str, Any]], dict[str, str]]] = {
    "users": (USERS, {}),
    "posts": (POSTS, {"userId": "userId"}),
    "comments": (COMMENTS, {"postId": "postId"}),
    "albums": (ALBUMS, {"userId": "userId"}),
    "photos": (PHOTOS, {"albumId": "albumId"}),
    "todos": (TODOS, {"user_id": "user_id"}),
    "repos": (REPOS, {"owner": "owner"}),
}


@dataclass
class JsonRestAPI(LoopbackServer):
    port: int = 0
    writes: bool = False
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    log: list[tuple[str, str, int]] = field(default_factory=list)
    data: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {name: copy.deepcopy(records) for name, (records, _) in RESOURCES.items()})
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> JsonRestAPI:
        api = self

        class Handler(QuietHandler):
            def _json(self, status: int, obj: Any) -> None:
                with api._lock:
                    api.log.append((self.command, urlsplit(self.path).path, status))
                self.send_json(status, obj)

            def do_GET(self) -> None:
                split = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(split.query).items()}
                with api._lock:
                    api.requests.append((split.path, query))
                parts = [p for p in split.path.split("/") if p]
                if not parts or parts[0] not in RESOURCES:
                    return self._json(404, {})
                records, filters = api.data[parts[0]], RESOURCES[parts[0]][1]
                if len(parts) == 2:
                    found = next((r for r in records if str(r["id"]) == parts[1]), None)
                    return self._json(200, found) if found else self._json(404, {})
                out = [r for r in records if all(str(r[f]) == query[q] for q, f in filters.items() if q in query)]
                if query.get("_limit", "").isdigit():
                    out = out[: int(query["_limit"])]
                self._json(200, out)

            def _write(self) -> None:
                split = urlsplit(self.path)
                raw = self.body()
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    return self._json(400, {"error": "not JSON"})
                parts = [p for p in split.path.split("/") if p]
                if not api.writes or not parts or parts[0] not in RESOURCES or not isinstance(body, dict):
                    return self._json(404, {})
                with api._lock:
                    records = api.data[parts[0]]
                    if self.command == "POST" and len(parts) == 1:
                        ident = body.get("id", max([r["id"] for r in records if isinstance(r["id"], int)] or [0]) + 1)
                        if any(str(r["id"]) == str(ident) for r in records):
                            status, answer = 500, {"error": f"Insert failed, duplicate id {ident}"}
                        else:
                            records.append({**body, "id": ident})
                            status, answer = 201, records[-1]
                    elif len(parts) == 2:
                        found = next((r for r in records if str(r["id"]) == parts[1]), None)
                        if found is None:
                            status, answer = 404, {}
                        elif self.command == "DELETE":
                            records.remove(found)
                            status, answer = 200, {}
                        elif self.command == "PATCH":
                            found.update({k: v for k, v in body.items() if k != "id"})
                            status, answer = 200, found
                        else:  # PUT replaces
                            kept = found["id"]
                            found.clear()
                            found.update({**body, "id": kept})
                            status, answer = 200, found
                    else:
                        status, answer = 404, {}
                self._json(status, answer)

            do_POST = do_PUT = do_PATCH = do_DELETE = _write

        self._serve(Handler, self.port)
        assert self._server is not None
        self.port = self._server.server_address[1]
        return self

    def spec(self, *, writes: bool = False) -> dict[str, Any]:
        def op(op_id: str, params: list[dict[str, Any]], body: dict[str, Any] | None = None) -> dict[str, Any]:
            out: dict[str, Any] = {"operationId": op_id, "parameters": params,
                                   "responses": {"200": {"description": "OK"}}}
            if body is not None:
                out["requestBody"] = {"content": {"application/json": {"schema": body}}}
            return out

        def query(name: str, kind: str = "integer") -> dict[str, Any]:
            return {"name": name, "in": "query", "required": False, "schema": {"type": kind}}

        limit = query("_limit")
        paths: dict[str, Any] = {"/users": {"get": op("listUsers", [query("albumId"), limit])}}
        for name, (_, filters) in RESOURCES.items():
            if name != "users":
                params = [query(f, "string" if f == "owner" else "integer") for f in filters] + [limit]
                paths[f"/{name}"] = {"get": op(f"list{name.title()}", params)}
            one = name[:-1]
            ident = [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer" if not writes
                                                                             else "string"}}]
            paths[f"/{name}/{{id}}"] = {"get": op(f"get{one.title()}", ident)}
            if writes:
                fields = {k: {"type": "integer" if isinstance(v, int) else "string"}
                          for k, v in RESOURCES[name][0][0].items()}
                fields["id"] = {"type": "string"}
                body = {"type": "object", "properties": fields}
                paths[f"/{name}"]["post"] = op(f"create{one.title()}", [], body)
                paths[f"/{name}/{{id}}"].update({"put": op(f"replace{one.title()}", ident, body),
                                                 "patch": op(f"update{one.title()}", ident, body),
                                                 "delete": op(f"delete{one.title()}", ident)})
        return {"openapi": "3.0.3", "info": {"title": "JSON REST", "version": "1"}, "servers": [{"url": self.url}],
                "paths": paths}

    def write_spec(self, path: Path) -> Path:
        path.write_text(json.dumps(self.spec(), indent=1))
        return path
