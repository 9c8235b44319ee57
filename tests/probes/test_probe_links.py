"""How tools link, and what probing keeps of a spec, against two servers on 127.0.0.1:

- a JSON REST server whose relations are optional filters (tests/support/apis/jsonrest.py):
  ``/comments?postId=``, ``/photos?albumId=``, ``/todos?user_id=``, ``/repos?owner=``;
- an admin API in the style of a FastAPI table browser: ``/tables/movie/{row_id}/`` declared as
  a string (a key may be a uuid) whose values are the integer ``id``s of ``/tables/movie/``'s
  items; the first listed row is gone (404); response schemas declared richer than any answer
  (``studio: uuid | null`` with a description, lengths), and one operation that answers the API's
  own, big spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probes import probe
from probes.results.schemas import MAX_BYTES
from protocols import load_data
from tests.support.apis.jsonrest import JsonRestAPI
from tests.support.fakes.serving import QuietHandler, serving

ATC = Path(sys.executable).with_name("atc")


def test_optional_filters_that_name_another_resource_are_links() -> None:
    with JsonRestAPI() as api:
        report = probe(load_data(api.spec(), source="rest"), no_llm=True, cache=False)
        sent = list(api.requests)
    links = {t.name: t.filters for t in report.tools if t.filters}
    assert links["list_comments"]["post_id"]["tool"] == "list_posts"
    assert links["list_photos"]["album_id"]["tool"] == "list_albums"
    assert links["list_todos"]["user_id"]["tool"] == "list_users"
    assert links["list_albums"]["user_id"] == {"tool": "list_users", "field": "[].id",
                                               "narrowed": "6 -> 2 items, all with userId=1"}
    assert links["list_repos"]["owner"]["field"] == "[].username"
    assert "list_users" not in links  # /users ignores albumId: tried once, the answer unchanged, no link
    assert [q for p, q in sent if p == "/users"] == [{}, {"albumId": "1"}]
    comments = report.tool("list_comments")
    assert "list_posts" in comments.depends_on
    program = next(e["program"] for e in comments.examples if "post_id" in e["args"])
    assert "list_posts()" in program and "list_comments(post_id=" in program
    # one request per tool, and one more per filter tried
    assert report.calls == len(sent) == len(report.tools) + len(links) + 1


def test_the_graph_shows_filter_links_and_only_probed_tools(tmp_path: Path) -> None:
    with JsonRestAPI() as api:
        doc = api.spec()
        doc["paths"]["/posts"]["post"] = {"operationId": "createPost", "responses": {"200": {"description": "OK"}}}
        report = probe(load_data(doc, source="rest"), no_llm=True, cache=False, out=tmp_path / "out")
    page = (tmp_path / "out" / "probe.md").read_text()
    graph = page.split("```mermaid", 1)[1].split("```", 1)[0]
    assert "list_posts -->|post_id| list_comments" in graph and "list_users -->|owner| list_repos" in graph
    assert "create_post" not in graph  # never probed: not a node of the graph
    listing = page.split("## Not documented", 1)[1]  # but the page says why, in its short list
    assert "## create_post" not in page and "`create_post`" in listing and "POST may change data" in listing
    assert report.tool("create_post").status == "skipped"


# -- an admin API ------------------------------------------------------------------------------------

MOVIES = [{"id": 7, "title": "Gone", "studio": None, "year": 1977},
          {"id": 8, "title": "Alien", "studio": None, "year": 1979, "rating": 8.5},
          {"id": 9, "title": "Aliens", "studio": None, "year": "1986", "rating": 8.4}]
STUDIOS = [{"id": str(uuid.UUID(int=i)), "name": name} for i, name in enumerate(["Brandywine", "Amblin"], 1)]
TABLES = [{"name": "movie", "count": 3, "key": "id"}, {"name": "studio", "count": 2, "key": "id"}]
STUDIO = {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}], "description": "The studio (studio.id)"}
MOVIE_SCHEMA = {"type": "object", "required": ["id", "title", "studio"], "properties": {
    "id": {"type": "integer"}, "title": {"type": "string", "maxLength": 200, "title": "Title"},
    "studio": STUDIO, "year": {"type": "integer", "minimum": 1888}}}


def big_spec() -> dict[str, Any]:
    """An API description of 300 operations: what a GET that returns the spec itself answers."""
    paths = {f"/things{i}/{{thing_id}}/parts{i}": {"get": {
        "operationId": f"getPart{i}", "summary": f"Part {i} of a thing, with every detail anyone asked for",
        "parameters": [{"name": "thing_id", "in": "path", "required": True, "schema": {"type": "string"}},
                       {"name": f"filter{i}", "in": "query", "schema": {"type": "string", "enum": ["a", "b", "c"]}}],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {
            "type": "object", "properties": {f"field{j}_{i}": {"type": "string"} for j in range(6)}}}}}}}}
        for i in range(300)}
    return {"openapi": "3.0.3", "info": {"title": "Admin", "version": "1"}, "paths": paths}


class AdminHandler(QuietHandler):
    log: list[str] = []

    def do_GET(self) -> None:
        AdminHandler.log.append(self.path)
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if parts == ["openapi.json"]:
            return self.send_json(200, big_spec())
        if parts == ["tables"]:
            return self.send_json(200, TABLES)
        rows = {"movie": MOVIES, "studio": STUDIOS}
        if len(parts) >= 2 and parts[0] == "tables" and parts[1] in rows:
            if len(parts) == 2:
                return self.send_json(200, {"items": rows[parts[1]], "total": len(rows[parts[1]])})
            found = next((r for r in rows[parts[1]] if str(r["id"]) == parts[2] and r.get("title") != "Gone"), None)
            return self.send_json(200, found) if found else self.send_json(404, {"detail": "Not Found"})
        self.send_json(404, {"detail": "Not Found"})


def admin_spec(url: str) -> dict[str, Any]:
    def op(op_id: str, schema: dict[str, Any] | None = None, row: bool = False) -> dict[str, Any]:
        ok: dict[str, Any] = {"description": "OK"}
        if schema is not None:
            ok["content"] = {"application/json": {"schema": schema}}
        params = [{"name": "row_id", "in": "path", "required": True, "schema": {"type": "string"}}] if row else []
        return {"get": {"operationId": op_id, "parameters": params, "responses": {"200": ok}}}

    return {"openapi": "3.0.3", "info": {"title": "Admin", "version": "1"}, "servers": [{"url": url}], "paths": {
        "/openapi.json": op("getSpec"),
        "/tables/": op("listTables"),
        "/tables/movie/": op("listMovies"),
        "/tables/movie/{row_id}/": op("getMovie", MOVIE_SCHEMA, row=True),
        "/tables/studio/": op("listStudios"),
        "/tables/studio/{row_id}/": op("getStudio", row=True)}}


@pytest.fixture()
def admin() -> Iterator[str]:
    AdminHandler.log = []
    with serving(AdminHandler) as url:
        yield url


def test_string_ids_come_from_the_parent_list_and_a_404_tries_the_next(admin: str) -> None:
    report = probe(load_data(admin_spec(admin), source="admin"), no_llm=True, cache=False)
    movie, studio = report.tool("get_movie"), report.tool("get_studio")
    assert movie.status == studio.status == "documented", (movie.reason, studio.reason)
    assert movie.mapping["row_id"] == {"tool": "list_movies", "field": "items[].id"}
    assert studio.mapping["row_id"] == {"tool": "list_studios", "field": "items[].id"}
    details = [p for p in AdminHandler.log if p.startswith("/tables/movie/") and p != "/tables/movie/"]
    assert details[:2] == ["/tables/movie/7/", "/tables/movie/8/"]  # the listed row that is gone, then the next
    words = [p for p in AdminHandler.log if p.rstrip("/").rsplit("/", 1)[-1] in ("movie", "id", "studio", "test")
             and p.count("/") > 3]
    assert words == []  # no word from another answer used as a row id
    assert movie.examples[0]["args"] == {"row_id": "8"}  # a number sent as the string the spec asks for


def test_a_declared_schema_is_kept_and_what_was_learnt_merged_in(admin: str, tmp_path: Path) -> None:
    report = probe(load_data(admin_spec(admin), source="admin"), no_llm=True, cache=False, out=tmp_path / "out")
    schema = report.tool("get_movie").response_schema
    props = schema["properties"]
    assert props["studio"] == STUDIO  # no demo row had a studio: the declared uuid | null stays
    assert props["title"]["maxLength"] == 200 and props["title"]["title"] == "Title"
    assert props["rating"]["type"] == "number" and props["rating"]["x-atc-learnt"] is True
    notes = report.tool("get_movie").schema_notes
    assert any("$.rating: seen, not declared" in n for n in notes)
    assert any("$.year: declared integer, seen string" in n for n in notes) and props["year"]["type"] == "integer"
    assert report.tool("get_movie").schema_source == "declared+learnt"
    # a GET that answers a 300-operation spec: the learnt schema stays small, and so does openapi.json
    spec_schema = report.tool("get_spec").response_schema
    assert len(json.dumps(spec_schema)) <= MAX_BYTES
    assert "additionalProperties" in spec_schema["properties"]["paths"]  # its keys are paths: a map
    assert (tmp_path / "out" / "openapi.json").stat().st_size < 120_000


def test_update_writes_the_merged_schema_into_the_store(admin: str, tmp_path: Path) -> None:
    spec = tmp_path / "admin.json"
    spec.write_text(json.dumps(admin_spec(admin)))
    env = dict(os.environ)
    assert subprocess.run([str(ATC), "tools", "import", str(spec), "--name", "admin"], capture_output=True,
                          env=env, timeout=60).returncode == 0
    done = subprocess.run([str(ATC), "probe", "admin", "--no-llm", "--update"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    shown = json.loads(subprocess.run([str(ATC), "tools", "show", "get_movie", "--json"], capture_output=True,
                                      text=True, env=env, timeout=60).stdout)
    tool = shown[0] if isinstance(shown, list) else shown.get("tools", [shown])[0]
    props = tool["response_schema"]["properties"]
    assert props["studio"]["anyOf"] == STUDIO["anyOf"] and props["studio"]["description"] == STUDIO["description"]
    assert props["rating"]["x-atc-learnt"] is True and tool["examples"]
