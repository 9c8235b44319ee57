"""Probing is built for APIs in general, not for one fixture: two more APIs on 127.0.0.1 in the
styles of well-known real ones, with their own naming habits.

- a code forge (GitHub style): root-list responses, a field that is null in one record only, ``{username}`` filled from ``login``,
  ``/repos/{owner}/{repo}`` from a repo's ``name`` and its ``owner.login``, issue numbers that only
  exist for their repo, and a HEAD operation;
- a blog (json-server style): ``{id}`` under ``/authors/`` filled from a post's ``authorId``, nested
  ``/posts/{id}/comments``, an array parameter of ids, and a required ``city`` with no hint in its
  schema (a common value for the name)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from probes import probe
from protocols import load_data
from tests.support.fakes.serving import QuietHandler, serving

USERS = {"octo": {"login": "octo", "id": 1, "name": "Octo Cat", "bio": None},
         "mona": {"login": "mona", "id": 2, "name": "Mona", "bio": "Painter"}}
REPOS = {("octo", "hello"): {"id": 10, "name": "hello", "full_name": "octo/hello", "stars": 5,
                             "owner": {"login": "octo", "id": 1}},
         ("mona", "lisa"): {"id": 11, "name": "lisa", "full_name": "mona/lisa", "stars": 9,
                            "owner": {"login": "mona", "id": 2}}}
ISSUES = {("octo", "hello"): [{"number": 3, "title": "Crash on start", "state": "open"}],
          ("mona", "lisa"): [{"number": 8, "title": "Smile more", "state": "closed"}]}
POSTS = [{"id": 1, "authorId": 7, "title": "On probing"}, {"id": 2, "authorId": 9, "title": "On chains"}]
AUTHORS = {7: {"id": 7, "name": "Ada", "email": "ada@example.com"}, 9: {"id": 9, "name": "Bo", "email": "bo@x.io"}}
COMMENTS = {1: [{"id": 100, "postId": 1, "body": "Nice"}], 2: [{"id": 200, "postId": 2, "body": "Hm"}]}


class Handler(QuietHandler):
    log: list[tuple[str, str]] = []

    def _json(self, status: int, obj: Any) -> None:
        body = b"" if self.command == "HEAD" else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        split = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(split.query).items()}
        Handler.log.append((self.command, self.path))
        p = [x for x in split.path.split("/") if x]
        found: Any = None
        if p == ["users"]:
            found = [{"login": u["login"], "id": u["id"]} for u in USERS.values()]
        elif len(p) == 2 and p[0] == "users" and p[1] in USERS:
            found = USERS[p[1]]
        elif len(p) == 3 and p[0] == "users" and p[2] == "repos" and p[1] in USERS:
            found = [r for (owner, _), r in REPOS.items() if owner == p[1]]
        elif len(p) >= 3 and p[0] == "repos" and (p[1], p[2]) in REPOS:
            repo = (p[1], p[2])
            if len(p) == 3:
                found = REPOS[repo]
            elif p[3:] == ["issues"]:
                found = ISSUES[repo]
            elif len(p) == 5 and p[3] == "issues":
                found = next((i for i in ISSUES[repo] if str(i["number"]) == p[4]), None)
        elif p == ["posts"]:
            found = POSTS
        elif len(p) == 3 and p[0] == "posts" and p[2] == "comments" and p[1].isdigit():
            found = COMMENTS.get(int(p[1]))
        elif len(p) == 2 and p[0] == "comments" and p[1].isdigit():
            found = next((c for cs in COMMENTS.values() for c in cs if c["id"] == int(p[1])), None)
        elif len(p) == 2 and p[0] == "authors" and p[1].isdigit():
            found = AUTHORS.get(int(p[1]))
        elif p == ["weather"]:
            if q.get("city", "").lower() not in ("london", "paris"):
                return self._json(400, {"message": "unknown city"})
            found = {"city": q["city"], "temp": 11.5, "units": q.get("units", "metric")}
        elif p == ["batch"]:
            ids = [int(x) for x in q.get("post_ids", "").split(",") if x.isdigit()]
            found = [x for x in POSTS if x["id"] in ids] or None
        if found is None:
            return self._json(404, {"message": "Not Found"})
        self._json(200, found)


def _op(op_id: str, params: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"operationId": op_id, "parameters": params or [], "responses": {"200": {"description": "OK"}}}


def _p(name: str, kind: str = "string", where: str = "path", **schema: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "required": True, "schema": {"type": kind, **schema}}


def spec(url: str) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "Forge and blog", "version": "1"}, "servers": [{"url": url}],
            "paths": {
                "/users": {"get": _op("listUsers")},
                "/users/{username}": {"get": _op("getUser", [_p("username")]),
                                      "head": _op("checkUser", [_p("username")])},
                "/users/{username}/repos": {"get": _op("listUserRepos", [_p("username")])},
                "/repos/{owner}/{repo}": {"get": _op("getRepo", [_p("owner"), _p("repo")])},
                "/repos/{owner}/{repo}/issues": {"get": _op("listIssues", [_p("owner"), _p("repo")])},
                "/repos/{owner}/{repo}/issues/{issue_number}": {"get": _op(
                    "getIssue", [_p("owner"), _p("repo"), _p("issue_number", "integer")])},
                "/posts": {"get": _op("listPosts")},
                "/posts/{id}/comments": {"get": _op("listPostComments", [_p("id", "integer")])},
                "/comments/{id}": {"get": _op("getComment", [_p("id", "integer")])},
                "/authors/{id}": {"get": _op("getAuthor", [_p("id", "integer")])},
                "/weather": {"get": _op("getWeather", [_p("city", where="query"),
                                                       {"name": "units", "in": "query",
                                                        "schema": {"type": "string", "enum": ["metric", "imperial"]}}])},
                "/batch": {"get": _op("getPostsBatch", [_p("post_ids", "array", where="query",
                                                           items={"type": "integer"})])},
            }}


@pytest.fixture()
def server() -> Iterator[str]:
    Handler.log = []
    with serving(Handler) as url:
        yield url


def test_forge_and_blog_styles(server: str) -> None:
    report = probe(load_data(spec(server), source="forge"), no_llm=True)
    status = {t.name: t.status for t in report.tools}
    assert all(s == "documented" for s in status.values()), [(t.name, t.reason) for t in report.tools]
    m = {t.name: t.mapping for t in report.tools}
    assert m["get_user"]["username"] == {"tool": "list_users", "field": "[].login"}
    assert m["get_repo"]["repo"]["field"] == "[].name" and m["get_repo"]["owner"]["field"] == "[].owner.login"
    assert m["get_issue"]["issue_number"] == {"tool": "list_issues", "field": "[].number"}
    assert m["get_author"]["id"] == {"tool": "list_posts", "field": "[].authorId"}
    assert m["get_comment"]["id"] == {"tool": "list_post_comments", "field": "[].id"}
    assert m["get_weather"]["city"] == {"source": "name"}
    assert m["get_posts_batch"]["post_ids"]["tool"] == "list_posts"
    head = report.tool("check_user")
    assert head.response_schema is None and head.status_codes == {"200": 1}
    # Every tool worked at its first request: chains were found before the tools that need them ran.
    # One more request went to get_user: its first answer had a null "bio", so its type was unknown.
    assert report.calls == len(Handler.log) == len(report.tools) + 1
    user = report.tool("get_user")
    assert user.samples == 2 and set(user.response_schema["properties"]["bio"]["type"]) == {"null", "string"}
    assert not [path for method, path in Handler.log if "/issues/" in path and method == "GET"
                and not path.endswith(("/issues/3", "/issues/8"))]
