"""Programs in a real sandbox against an API that behaves like real ones: response headers and
paging (issue #7 item 9), binary bodies and error responses in the program (10), timeouts that
keep the partial output and blame the call in flight (12), attribution of requests that were sent
(12), the per-call timeout and response cap flags (14), validation modes and static checks (6)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from atc.cli import main
from atc.loop.checks import check_program, find_issues
from protocols import load_data
from protocols.model import Collection
from sandbox.api import Backend, Limits
from sandbox.execute import run
from sandbox.local.backend import LocalBackend
from tests.support.apis.realworld import PNG, RealWorld


@pytest.fixture(scope="module")
def rw() -> Iterator[RealWorld]:
    server = RealWorld().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def local_backend() -> Iterator[LocalBackend]:
    with LocalBackend(pool_size=2) as backend:
        yield backend


@pytest.fixture(scope="module")
def docker_backend_instance() -> Iterator[Backend]:
    from sandbox.docker.backend import DockerBackend

    with DockerBackend() as backend:
        yield backend


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "local":
        yield request.getfixturevalue("local_backend")
        return
    from sandbox.docker.backend import docker_available

    if not docker_available():
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    yield request.getfixturevalue("docker_backend_instance")


def spec(url: str) -> dict[str, Any]:
    def get(op_id: str, params: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return {"get": {"operationId": op_id, "parameters": params or [], "responses": {"200": {"description": "ok"}}}}

    q = {"in": "query", "schema": {"type": "integer"}}
    return {
        "openapi": "3.0.3", "info": {"title": "Real World", "version": "1"}, "servers": [{"url": url}],
        "paths": {
            "/pages/items": get("list_items", [{"name": "page", **q}, {"name": "per_page", **q}]),
            "/contents/{path}": get("get_contents", [{"name": "path", "in": "path", "required": True,
                                                      "schema": {"type": "string"}}]),
            "/slow": get("slow", [{"name": "s", "in": "query", "schema": {"type": "number"}}]),
            "/bin/png": get("get_png"),
            "/echo": get("echo", [{"name": "q", "in": "query", "schema": {"type": "string"}}]),
        },
    }


def tools(url: str) -> Collection:
    return load_data(spec(url), source="realworld.json", name="rw")


PAGING = """
records = []
page = list_items(page=1, per_page=3, with_headers=True)
records += page.data
total = int(page.headers["X-Total-Count"])
while "next" in page.links:
    query = page.links["next"]["url"].split("?", 1)[1]
    params = dict(pair.split("=") for pair in query.split("&"))
    page = list_items(page=int(params["page"]), per_page=3, with_headers=True)
    records += page.data
print(len(records), total, [r["id"] for r in records], page.status, page.headers.get("etag"))
"""


def test_paging_by_link_headers_reads_all_seven_records(rw: RealWorld, backend: Backend) -> None:
    result = run(PAGING, [tools(rw.url)], sandbox=backend)
    assert result.ok, result.error
    assert result.answer.strip() == '7 7 [1, 2, 3, 4, 5, 6, 7] 200 "p3"'
    assert [c.args for c in result.calls] == [{"page": p, "per_page": 3} for p in (1, 2, 3)]


def test_last_response_and_the_plain_return_value(rw: RealWorld, local_backend: LocalBackend) -> None:
    program = textwrap.dedent("""
        first = list_items(page=1, per_page=3)
        assert isinstance(first, list)
        response = last_response()
        print(type(first).__name__, len(first), response.status, response.headers["x-total-count"],
              sorted(response.links))
    """)
    result = run(program, [tools(rw.url)], sandbox=local_backend)
    assert result.ok, result.error
    assert result.answer.strip() == "list 3 200 7 ['last', 'next']"


def test_error_responses_and_binary_bodies_reach_the_program(rw: RealWorld, local_backend: LocalBackend) -> None:
    program = textwrap.dedent("""
        import base64
        try:
            get_contents(path="missing.txt")
        except ToolError as e:
            print(e.status, e.response.status, e.response.data["message"], e.response.headers["content-type"])
        png = get_png()
        raw = base64.b64decode(png["base64"])
        print(png["content_type"], png["size"], raw[:4] == b"\\x89PNG", len(raw))
        print(get_contents(path="")["type"])
    """)
    result = run(program, [tools(rw.url)], sandbox=local_backend)
    assert result.ok, result.error
    lines = result.answer.strip().splitlines()
    assert lines[0] == "404 404 file or directory 'missing.txt' does not exist application/json"
    assert lines[1] == f"image/png {len(PNG)} True {len(PNG)}"
    assert lines[2] == "directory"


def test_python_api_takes_placements_and_per_collection_base_urls(rw: RealWorld, local_backend: LocalBackend,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from protocols.model import Tool
    from tests.support.apis.realworld import SECRET

    no_server = Collection(name="keys", tools=[Tool(name="auth_query", collection="keys", path="/auth/query")])
    monkeypatch.setenv("RW_TOKEN", SECRET)
    result = run("print(auth_query()['authorized'])", [tools(rw.url), no_server], sandbox=local_backend,
                 base_url={"keys": rw.url}, credentials={"keys:query:token": "env:RW_TOKEN"})
    assert result.ok, result.error
    assert result.answer.strip() == "query" and result.calls[0].redacted == 1  # the API echoed the token
    from protocols.errors import ConfigError

    with pytest.raises(ConfigError, match="say which API"):
        run("print(1)", [tools(rw.url), no_server], sandbox=local_backend, base_url={"keys": rw.url},
            credentials={"query:token": "env:RW_TOKEN"})
    with pytest.raises(ConfigError, match="collection 'keys': the spec names no server URL"):
        run("print(1)", [tools(rw.url), no_server], sandbox=local_backend)


def test_a_timeout_keeps_the_output_and_blames_the_call_in_flight(rw: RealWorld, backend: Backend) -> None:
    program = 'print("before the slow call")\nitems = list_items(page=1)\nprint("got", len(items))\nslow(s=10)\nprint("never")\n'
    result = run(program, [tools(rw.url)], Limits(timeout=2), sandbox=backend)
    assert not result.ok and result.error is not None
    assert result.answer == "before the slow call\ngot 3\n"
    assert result.error.type == "Timeout"
    assert (result.error.tool, result.error.line) == ("slow", 4)
    assert "waiting for slow called at line 4" in result.error.message
    assert "ran out of time waiting for slow(...) at line 4" in result.error.attribution["reason"]  # type: ignore[index]
    assert result.calls[-1].failure == "timeout"


def test_a_timeout_in_the_programs_own_loop_keeps_the_output_and_blames_no_tool(
        rw: RealWorld, local_backend: LocalBackend) -> None:
    program = 'print("working", flush=True)\nlist_items(page=1)\nprint("still")\nwhile True:\n    pass\n'
    result = run(program, [tools(rw.url)], Limits(timeout=1.5), sandbox=local_backend)
    assert result.error is not None and result.error.type == "Timeout" and result.error.tool is None
    assert result.answer == "working\nstill\n"


def test_attribution_says_what_happened_to_a_request_that_was_sent(rw: RealWorld,
                                                                   local_backend: LocalBackend) -> None:
    down = tools("http://127.0.0.1:9")
    result = run("echo(q='x')\n", [down], sandbox=local_backend)
    assert result.error is not None and result.error.tool == "echo"
    reason = result.error.attribution["reason"]  # type: ignore[index]
    assert "could not reach the server" in reason and "rejected before" not in reason
    assert result.calls[0].failure == "connect"
    slow = run("slow(s=3)\n", [tools(rw.url)], Limits(call_timeout=0.5), sandbox=local_backend)
    assert slow.error is not None and "no response came in time" in slow.error.attribution["reason"]  # type: ignore[index]
    refused = run("echo(q=5)\n", [tools(rw.url)], sandbox=local_backend)
    assert refused.error is not None and "rejected before any request was sent" in \
        refused.error.attribution["reason"]  # type: ignore[index]


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    code = main(args)
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_call_timeout_max_response_bytes_and_validation_flags(rw: RealWorld, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    spec_path = tmp_path / "rw.json"
    spec_path.write_text(json.dumps(spec(rw.url)))
    program = tmp_path / "p.py"
    base = ["run", str(program), "--tools", str(spec_path), "--sandbox", "local", "--json"]
    program.write_text("slow(s=3)\n")
    code, doc = _cli(base + ["--call-timeout", "0.5"], capsys)
    assert code == 1 and doc["error"]["message"] == "slow: no response within 0.5 s"
    program.write_text("print(len(list_items(page=1, per_page=7)))\n")
    code, doc = _cli(base + ["--max-response-bytes", "100"], capsys)
    assert code == 1 and "larger than the 100-byte cap" in doc["error"]["message"]
    program.write_text("print(echo(q='a', sort='new')['target'])\n")
    code, doc = _cli(base, capsys)
    assert code == 1 and "unknown argument 'sort'" in doc["error"]["message"]
    code, doc = _cli(base + ["--validation", "warn"], capsys)
    assert code == 0 and doc["answer"].strip() == "/echo?q=a&sort=new"
    assert "unknown argument 'sort'" in doc["calls"][0]["warnings"][0]
    code, doc = _cli(base + ["--validation", "real_world=off"], capsys)
    assert code == 0 and doc["calls"][0]["warnings"] == []
    program.write_text("print(echo(q='a', extra_query={'sort': 'new', 'tag': ['x', 'y']})['target'])\n")
    code, doc = _cli(base, capsys)
    assert code == 0 and doc["answer"].strip() == "/echo?q=a&sort=new&tag=x&tag=y"


def test_static_checks_know_the_reserved_keywords_and_lenient_tools(rw: RealWorld) -> None:
    col = tools(rw.url)
    by_name = {t.name: t for t in col.tools}
    assert find_issues("echo(q='a', extra_query={'x': 1}, with_headers=True)\n", by_name) == []
    issues = find_issues("echo(extra_query=['x'])\necho(with_headers='yes')\n", by_name)
    assert [i.message.split(":")[0] for i in issues] == ["echo", "echo()"]
    assert "extra_query must be a dict" in issues[0].message
    unknown = "echo(q='a', sort='new')\n"
    assert check_program(unknown, by_name) is not None
    assert check_program(unknown, by_name, lenient=frozenset({"echo"})) is None
