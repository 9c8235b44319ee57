"""``atc mock``: real HTTP requests to the fake server on 127.0.0.1.

What it must show: the same request gives the same bytes (twice, across instances, across
processes); every 200 body validates against the operation's response schema (the bundled
bookshop and all 54 RestBench TMDB operations, path ids taken from list/search answers); ids from
lists resolve on detail endpoints with the same names; unknown ids 404; missing or bad parameters
400; the CLI prints its line, serves, and stops cleanly on SIGINT/SIGTERM; and the bundled example
program runs against it with ``atc run``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atc import examples
from atc.errors import NotFound, UsageError
from atc.mock import MockApp, MockServer
from protocols import load_data, load_spec
from protocols.model import Collection

ROOT = Path(__file__).resolve().parents[3]
ATC = ROOT / ".venv" / "bin" / "atc"
SPEC = examples.path("bookshop/openapi.json")
PROGRAM = examples.path("bookshop/program.py")


@pytest.fixture(scope="module")
def bookshop() -> Collection:
    return load_spec(SPEC)


@pytest.fixture(scope="module")
def bookshop_app(bookshop: Collection) -> MockApp:
    return MockApp(bookshop)


@pytest.fixture(scope="module")
def mock(bookshop: Collection) -> Iterator[MockServer]:
    with MockServer(bookshop) as server:
        yield server


@pytest.fixture(scope="module")
def client(mock: MockServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=mock.url, timeout=10) as c:
        yield c


@pytest.fixture(scope="module")
def tmdb(bench_data: Path) -> Collection:
    return load_spec(bench_data / "restbench" / "specs" / "tmdb_oas.json")


def _valid(tool_schema: dict[str, Any] | None, body: Any) -> list[str]:
    if tool_schema is None:
        return []
    return [f"{list(e.absolute_path)}: {e.message[:200]}" for e in jsonschema.Draft7Validator(tool_schema).iter_errors(body)]


# -- determinism ---------------------------------------------------------------------------------


REQUESTS = [
    "/books/search?query=garden&limit=4",
    "/books/search?query=mystery%20island&genre=mystery",
    "/shops",
    "/shops?city=Lisbon",
]


def test_same_request_twice_and_on_two_instances_gives_the_same_bytes(bookshop: Collection,
                                                                        client: httpx.Client) -> None:
    first = [client.get(path) for path in REQUESTS]
    again = [client.get(path) for path in REQUESTS]
    with MockServer(bookshop) as other, httpx.Client(base_url=other.url) as c2:
        elsewhere = [c2.get(path) for path in REQUESTS]
    for a, b, c in zip(first, again, elsewhere, strict=True):
        assert a.status_code == 200
        assert a.content == b.content == c.content
    # A detail of an id from a list is also stable across instances.
    book_id = first[0].json()["results"][0]["id"]
    with MockServer(bookshop) as other, httpx.Client(base_url=other.url) as c2:
        assert c2.get(f"/books/{book_id}").content == client.get(f"/books/{book_id}").content
    # And different requests give different answers (the seed is the request, not a constant).
    assert first[0].json()["results"] != first[1].json()["results"]


# -- schema conformance ------------------------------------------------------------------------


def test_every_bookshop_operation_answers_its_response_schema(bookshop: Collection, client: httpx.Client) -> None:
    search = client.get("/books/search", params={"query": "garden"}).json()
    book = search["results"][0]
    shop = client.get("/shops").json()[0]
    order = client.post("/orders", json={"book_id": book["id"], "shop_id": shop["id"], "email": "a@example.com"})
    assert order.status_code == 201
    path_values = {"book_id": book["id"], "author_id": book["author_id"], "shop_id": shop["id"],
                   "order_id": order.json()["id"]}
    bodies = {"create_order": {"book_id": book["id"], "shop_id": shop["id"], "quantity": 2, "email": "b@example.com"}}
    checked = 0
    for tool in bookshop.tools:
        path = tool.path
        for name, value in path_values.items():
            path = path.replace("{" + name + "}", str(value))
        params = {"query": "garden"} if "query" in tool.required else None
        resp = client.request(tool.method, path, params=params, json=bodies.get(tool.name))
        assert resp.status_code in (200, 201), (tool.name, resp.text)
        assert resp.headers["content-type"] == "application/json"
        assert _valid(tool.response_schema, resp.json()) == [], tool.name
        checked += 1
    assert checked == len(bookshop.tools) == 9


# How a TMDB path parameter is obtained from another endpoint's answer: (tool, path into its body).
TMDB_SOURCES: dict[str, tuple[str, tuple[Any, ...]]] = {
    "movie_id": ("get_search_movie", ("results", 0, "id")),
    "tv_id": ("get_search_tv", ("results", 0, "id")),
    "person_id": ("get_search_person", ("results", 0, "id")),
    "company_id": ("get_search_company", ("results", 0, "id")),
    "collection_id": ("get_search_collection", ("results", 0, "id")),
    "review_id": ("get_movie_movie_id_reviews", ("results", 0, "id")),
    "credit_id": ("get_movie_movie_id_credits", ("cast", 0, "credit_id")),
    "network_id": ("get_tv_tv_id", ("networks", 0, "id")),
}


def _dig(body: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        body = body[step]
    return body


def _tmdb_path(tool: Any, values: dict[str, Any]) -> str:
    path = tool.path
    for pname, binding in tool.bindings.items():
        if binding.location != "path":
            continue
        schema = tool.properties[pname]
        value = values.get(binding.name)
        if value is None:
            value = schema["enum"][0] if "enum" in schema else 1
        path = path.replace("{" + binding.name + "}", str(value))
    return path


def test_every_tmdb_operation_answers_its_response_schema_with_chained_ids(tmdb: Collection) -> None:
    assert len(tmdb.tools) == 54
    tools = {t.name: t for t in tmdb.tools}
    values: dict[str, Any] = {}
    # TMDB declares an api_key in the query of every operation: the mock wants one (any value).
    with MockServer(tmdb) as server, httpx.Client(base_url=server.url, timeout=10, params={"api_key": "k"}) as c:
        def call(tool: Any) -> httpx.Response:
            params = {tool.bindings[p].name: "star" for p in tool.required if tool.bindings[p].location == "query"}
            return c.request(tool.method, _tmdb_path(tool, values), params=params)

        # Ids come from the answers of the endpoints a real chain would use, in dependency order.
        for param, (source, where) in TMDB_SOURCES.items():
            resp = call(tools[source])
            assert resp.status_code == 200, (source, resp.text)
            values[param] = _dig(resp.json(), where)
        failures = []
        for tool in tmdb.tools:
            resp = call(tool)
            if resp.status_code != 200:
                failures.append((tool.name, resp.status_code, resp.text[:200]))
                continue
            errors = _valid(tool.response_schema, resp.json())
            if errors:
                failures.append((tool.name, errors[:3]))
        assert failures == []
        # The chained ids resolve on their detail endpoints, as themselves.
        for param, detail in [("movie_id", "get_movie_movie_id"), ("person_id", "get_person_person_id"),
                              ("review_id", "get_review_review_id"), ("credit_id", "get_credit_credit_id"),
                              ("network_id", "get_network_network_id")]:
            body = c.get(_tmdb_path(tools[detail], values)).json()
            assert body["id"] == values[param], detail


# -- ids consistent across endpoints -------------------------------------------------------------


def test_ids_from_search_and_lists_resolve_with_the_same_names(client: httpx.Client) -> None:
    hits = client.get("/books/search", params={"query": "river", "limit": 5}).json()["results"]
    assert len(hits) == 5 and len({h["id"] for h in hits}) == 5
    for hit in hits:
        book = client.get(f"/books/{hit['id']}")
        assert book.status_code == 200
        detail = book.json()
        for key in ("id", "title", "author_id", "author_name", "price", "genre"):
            assert detail[key] == hit[key], key
        author = client.get(f"/authors/{detail['author_id']}").json()
        assert author["id"] == detail["author_id"]
        assert author["name"] == detail["author_name"]
        stock = client.get(f"/books/{hit['id']}/stock").json()
        assert stock["book_id"] == hit["id"]
        for entry in stock["shops"]:
            shop = client.get(f"/shops/{entry['shop_id']}").json()
            assert shop["name"] == entry["shop_name"]
    for shop in client.get("/shops").json():
        assert client.get(f"/shops/{shop['id']}").json() == shop
    # The books of an author are the books whose detail names that author, and they include the
    # book the author was found through.
    for hit in hits:
        listed = client.get(f"/authors/{hit['author_id']}/books", params={"limit": 20}).json()
        assert listed["author_id"] == hit["author_id"]
        assert hit["id"] in [b["id"] for b in listed["books"]]
        for b in listed["books"]:
            detail = client.get(f"/books/{b['id']}").json()
            assert detail["title"] == b["title"] and detail["author_id"] == hit["author_id"]
            assert detail["author_name"] == hit["author_name"]
    some = client.get(f"/authors/{hits[0]['author_id']}/books", params={"limit": 1}).json()["books"]
    assert len(some) == 1


def test_tmdb_search_results_match_their_details(tmdb: Collection) -> None:
    with MockServer(tmdb) as server, httpx.Client(base_url=server.url, params={"api_key": "k"}) as c:
        for search, detail, name in [("/search/movie", "/movie/{}", "title"), ("/search/person", "/person/{}", "name"),
                                     ("/search/tv", "/tv/{}", "name"), ("/movie/popular", "/movie/{}", "title")]:
            for hit in c.get(search, params={"query": "star"}).json()["results"]:
                body = c.get(detail.format(hit["id"])).json()
                assert body["id"] == hit["id"] and body[name] == hit[name]


def test_limit_and_filters_shape_the_main_list(client: httpx.Client) -> None:
    assert len(client.get("/books/search", params={"query": "x", "limit": 7}).json()["results"]) == 7
    assert len(client.get("/books/search", params={"query": "x"}).json()["results"]) == 3
    poetry = client.get("/books/search", params={"query": "x", "genre": "poetry", "limit": 6}).json()["results"]
    assert poetry and all(b["genre"] == "poetry" for b in poetry)
    gardens = client.get("/books/search", params={"query": "garden"}).json()["results"]
    assert all("garden" in b["title"].lower() for b in gardens)
    lisbon = client.get("/shops", params={"city": "Lisbon"}).json()
    assert lisbon and all(s["city"] == "Lisbon" for s in lisbon)


def test_posted_body_is_echoed_and_reads_back(client: httpx.Client) -> None:
    book = client.get("/books/search", params={"query": "tide"}).json()["results"][0]
    shop = client.get("/shops").json()[1]
    sent = {"book_id": book["id"], "shop_id": shop["id"], "quantity": 3, "email": "reader@example.com"}
    created = client.post("/orders", json=sent)
    assert created.status_code == 201
    order = created.json()
    assert {k: order[k] for k in sent} == sent
    again = client.get(f"/orders/{order['id']}")
    assert again.status_code == 200 and again.json() == order


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path, param", [("/books/1", "book_id"), ("/books/999999999", "book_id"),
                                         ("/authors/0/books", "author_id"), ("/orders/42", "order_id")])
def test_unknown_ids_are_404_with_a_json_error(client: httpx.Client, path: str, param: str) -> None:
    resp = client.get(path)
    assert resp.status_code == 404
    body = resp.json()
    assert body["error"] == "not_found" and body["parameter"] == param
    assert path.split("/")[2] in body["message"]


def test_tmdb_unknown_movie_is_404(tmdb: Collection) -> None:
    with MockServer(tmdb) as server:
        assert httpx.get(server.url + "/movie/1", params={"api_key": "k"}).status_code == 404
        # a literal route wins over {movie_id}
        assert httpx.get(server.url + "/movie/latest", params={"api_key": "k"}).status_code == 200


def test_missing_or_bad_parameters_are_400_naming_the_parameter(client: httpx.Client) -> None:
    resp = client.get("/books/search")
    assert resp.status_code == 400 and resp.json()["parameter"] == "query" and "query" in resp.json()["message"]
    resp = client.get("/books/search", params={"query": "x", "limit": "many"})
    assert resp.status_code == 400 and resp.json()["parameter"] == "limit"
    # GET /books/{book_id} documents 200 and 404 only: a bad id is refused with the documented 404.
    resp = client.get("/books/abc")
    assert resp.status_code == 404 and resp.json()["parameter"] == "book_id" and "integer" in resp.json()["message"]
    resp = client.get("/books/search", params={"query": "x", "genre": "cooking"})
    assert resp.status_code == 400 and "poetry" in resp.json()["message"]
    resp = client.post("/orders", json={"book_id": 1, "shop_id": 2})
    assert resp.status_code == 400 and resp.json()["parameter"] == "email"
    resp = client.post("/orders", content=b"{not json", headers={"content-type": "application/json"})
    assert resp.status_code == 400


def test_unknown_routes_and_methods(client: httpx.Client) -> None:
    assert client.get("/nowhere").status_code == 404
    resp = client.delete("/orders")
    assert resp.status_code == 405 and resp.json()["allowed"] == ["POST"] and resp.headers["allow"] == "POST"
    # The spec's server has a base path (/v1): requests that keep it are served too.
    assert client.get("/v1/shops").json() == client.get("/shops").json()


_SEGMENTS = st.one_of(st.sampled_from(["books", "search", "authors", "shops", "orders", "stock", "v1", "1"]),
                      st.text(max_size=8).map(lambda t: t.replace("/", "")))
_JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                        max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"]),
       segments=st.lists(_SEGMENTS, max_size=4),
       query=st.dictionaries(st.sampled_from(["query", "limit", "genre", "city", "page", "x"]), st.text(max_size=6)),
       body=st.one_of(st.none(), st.binary(max_size=20), _JSONISH,
                      st.fixed_dictionaries({"book_id": _JSONISH, "shop_id": _JSONISH, "email": _JSONISH})))
def test_any_request_gets_a_json_answer_never_an_exception(bookshop_app: MockApp, method: str, segments: list[str],
                                                            query: dict[str, str], body: Any) -> None:
    from urllib.parse import quote, urlencode

    target = "/" + "/".join(quote(s, safe="") for s in segments) + ("?" + urlencode(query) if query else "")
    raw = body if isinstance(body, bytes) else (b"" if body is None else json.dumps(body).encode())
    resp = bookshop_app.handle(method, target, {"Content-Type": "application/json"}, raw)
    assert resp.status in (200, 201, 400, 404, 405)
    json.dumps(resp.body)
    if resp.status >= 400:
        assert resp.body["error"] and resp.body["message"]


def test_http_boundary_answers_even_our_own_bugs_and_bad_framing(bookshop: Collection,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with MockServer(bookshop) as server:
        def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("boom")

        monkeypatch.setattr(server.app, "handle", broken)
        resp = httpx.get(server.url + "/shops")
        assert resp.status_code == 500 and "boom" in resp.json()["message"]
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"POST /orders HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 400")


def test_refuses_to_listen_beyond_loopback(bookshop: Collection) -> None:
    for host in ("0.0.0.0", "192.168.1.10", "example.com"):
        with pytest.raises(UsageError):
            MockServer(bookshop, host=host)


def test_operations_documented_without_content_answer_without_a_body() -> None:
    """A 200 documented with no content is answered with no body and no Content-Type, as the
    spec says; only a collection that documents no responses at all (a ToolBench API, a tool
    list) gets plausible objects."""
    spec = {"openapi": "3.0.0", "info": {"title": "Bare", "version": "1"}, "paths": {
        "/widgets": {"get": {"operationId": "listWidgets", "responses": {"200": {"description": "ok"}}}},
        "/widgets/{widget_id}": {"get": {"operationId": "getWidget", "parameters": [
            {"name": "widget_id", "in": "path", "required": True, "schema": {"type": "integer"}}],
            "responses": {"200": {"description": "ok"}}}}}}
    collection = load_data(spec, source="bare")
    with MockServer(collection) as server:
        resp = httpx.get(server.url + "/widgets")
        assert resp.status_code == 200 and resp.content == b"" and "content-type" not in resp.headers
    for tool in collection.tools:  # as a format without response objects would give them
        tool.responses = {}
        tool.status_codes = {}
    app = MockApp(collection)
    listed = app.handle("GET", "/widgets")
    assert listed.status == 200 and isinstance(listed.body, dict)
    items = listed.body["results"]
    assert len(items) == 3 and all(set(i) == {"id", "name"} for i in items)
    detail = app.handle("GET", f"/widgets/{items[0]['id']}")
    assert detail.status == 200 and detail.body == items[0]
    assert app.handle("GET", "/widgets/7").status == 404


def test_examples_path() -> None:
    assert examples.path("bookshop").is_dir()
    assert (examples.path("bookshop") / "openapi.json") == SPEC
    assert "bookshop" in examples.names()
    for bad in ("nope", "../mock.py", "/etc/passwd"):
        with pytest.raises(NotFound):
            examples.path(bad)


# -- the command line ----------------------------------------------------------------------------


def _start_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(ATC), "mock", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONHASHSEED": "random"})


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_cli_serves_then_stops_cleanly(mock: MockServer, sig: signal.Signals) -> None:
    proc = _start_cli(str(SPEC), "--port", "0", "--json")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        doc = json.loads(line)
        assert doc["operations"] == 9 and doc["url"].startswith("http://127.0.0.1:")
        path = "/books/search?query=lantern&limit=4"
        resp = httpx.get(doc["url"] + path, timeout=10)
        assert resp.status_code == 200
        # Another process, another hash seed: the same bytes as the in-process server.
        assert resp.content == httpx.get(mock.url + path).content
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert out == ""  # nothing but the one JSON line on stdout


def test_cli_prints_the_serving_line() -> None:
    proc = _start_cli(str(SPEC), "--port", "0")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert line.startswith("atc mock: serving bookshop on http://127.0.0.1:") and line.endswith("(9 operations)")
    assert proc.returncode == 0


@pytest.mark.parametrize("content, expect", [
    ('{"openapi": "3.0.0", "info": {"title": "x", "version": "1"}, "paths": {}}', "no operations"),
    ('{"openapi": "3.0.0", "paths": ', "json"),
])
def test_cli_invalid_spec_is_exit_2_without_traceback(tmp_path: Path, content: str, expect: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    r = subprocess.run([str(ATC), "mock", str(bad), "--port", "0"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and str(bad) in r.stderr and expect in r.stderr.lower()
    r = subprocess.run([str(ATC), "mock", str(tmp_path / "missing.json"), "--json"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and json.loads(r.stdout)["ok"] is False


def test_cli_refuses_a_public_host() -> None:
    r = subprocess.run([str(ATC), "mock", str(SPEC), "--host", "0.0.0.0"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "loopback" in r.stderr and "Traceback" not in r.stderr


# -- the bundled example program -------------------------------------------------------------------


@pytest.mark.parametrize("sandbox", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_atc_run_of_the_bundled_program_chains_the_tools(mock: MockServer, client: httpx.Client, sandbox: str) -> None:
    if not (ROOT / "atc" / "cli" / "run.py").exists():
        pytest.skip("atc run is not there yet")
    if sandbox == "docker":
        try:
            from sandbox.docker.backend import docker_available
        except ImportError:
            pytest.skip("sandbox.docker.backend is not importable")
        if not docker_available():
            pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    mock.requests.clear()
    r = subprocess.run([str(ATC), "run", str(PROGRAM), "--tools", str(SPEC), "--base-url", mock.url,
                        "--sandbox", sandbox, "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    seen = [(q.method, q.tool, q.status) for q in mock.requests]
    result = json.loads(r.stdout)
    assert result["ok"] is True and result["answer"].strip() and result["sandbox"] == sandbox
    calls = result["calls"]
    assert [c["tool"] for c in calls] == ["search_books", "get_book", "get_author", "get_book_stock"]
    assert all(c["ok"] and c["status"] == 200 for c in calls)
    # The chain: the book is the cheapest search hit, the author is that book's, the stock is for it.
    hits = client.get("/books/search", params=calls[0]["args"]).json()["results"]
    cheapest = min(hits, key=lambda h: h["price"])
    assert calls[1]["args"] == {"book_id": cheapest["id"]}
    book = client.get(f"/books/{cheapest['id']}").json()
    assert calls[2]["args"] == {"author_id": book["author_id"]}
    assert calls[3]["args"] == {"book_id": book["id"]}
    author = client.get(f"/authors/{book['author_id']}").json()
    assert book["title"] in result["answer"] and author["name"] in result["answer"]
    # The API saw exactly the calls the program made, nothing else.
    assert seen == [("GET", c["tool"], 200) for c in calls]


def test_python_import_of_mock_does_not_need_the_cli() -> None:
    code = "import atc.mock, sys; print('atc.cli' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert r.stdout.strip() == "False"
