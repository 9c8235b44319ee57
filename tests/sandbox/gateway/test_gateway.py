"""The host-side gateway against real HTTP servers on 127.0.0.1: validation before any request,
path/header encoding, credential placement, size cap, timeouts, the call budget, the call log."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from protocols import load_spec
from protocols.model import Binding, Collection, SecurityScheme, Tool
from sandbox.api import Limits, Toolset
from sandbox.gateway.core import Gateway, validator_for
from tests.support.apis.library import SECRET, LibraryAPI


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hanging up on slow or huge answers on purpose is not news


class _Served:
    """A test server on 127.0.0.1 in a background thread."""

    server: ThreadingHTTPServer
    url: str

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = _Quiet(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Echo(_Served):
    """A 127.0.0.1 server that records each request and answers by path: /echo (the request as
    JSON), /slow (sleeps 2 s), /big (3 MB), /text (plain text), /fail (500 with text)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        echo = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *a: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                record = {"method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                          "body": body}
                echo.seen.append(record)
                if self.path.startswith("/slow"):
                    time.sleep(2)
                    return self._send(200, b"{}", "application/json")
                if self.path.startswith("/big"):
                    return self._send(200, b"[" + b"1," * 1_500_000 + b"1]", "application/json")
                if self.path.startswith("/text"):
                    return self._send(200, b"plain words", "text/plain")
                if self.path.startswith("/fail"):
                    return self._send(500, b"upstream exploded", "text/plain")
                self._send(200, json.dumps(record).encode(), "application/json")

            do_GET = do_POST = _handle

        self.serve(Handler)


@pytest.fixture(scope="module")
def echo() -> Iterator[Echo]:
    server = Echo()
    yield server
    server.close()


def _params(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required or [], "additionalProperties": False}


def echo_collection(url: str) -> Collection:
    tools = [
        Tool(name="get_item", collection="echo", path="/echo/items/{item_id}",
             parameters=_params({"item_id": {"type": "string"}, "q": {"type": "string"},
                                 "x_trace": {"type": "string"}, "session": {"type": "string"},
                                 "tags": {"type": "array", "items": {"type": "string"}}}, ["item_id"]),
             bindings={"item_id": Binding("path", "item_id"), "q": Binding("query", "q"),
                       "x_trace": Binding("header", "X-Trace"), "session": Binding("cookie", "session"),
                       "tags": Binding("query", "tag")}),
        Tool(name="post_note", collection="echo", method="POST", path="/echo/notes",
             parameters=_params({"text": {"type": "string"}, "count": {"type": "integer"}}, ["text"]),
             bindings={"text": Binding("body", "text"), "count": Binding("body", "count")},
             body_media_type="application/json"),
        Tool(name="with_key_header", collection="echo", path="/echo/h", security=[["key_header"]]),
        Tool(name="with_key_query", collection="echo", path="/echo/q", security=[["key_query"]]),
        Tool(name="with_key_cookie", collection="echo", path="/echo/c", security=[["key_cookie"]]),
        Tool(name="with_bearer", collection="echo", path="/echo/b", security=[["bearer"]]),
        Tool(name="with_basic", collection="echo", path="/echo/basic", security=[["basic"]]),
        Tool(name="slow", collection="echo", path="/slow"),
        Tool(name="big", collection="echo", path="/big"),
        Tool(name="text", collection="echo", path="/text"),
        Tool(name="fail", collection="echo", path="/fail"),
    ]
    schemes = {
        "key_header": SecurityScheme("key_header", "apiKey", location="header", param="X-Key"),
        "key_query": SecurityScheme("key_query", "apiKey", location="query", param="api_key"),
        "key_cookie": SecurityScheme("key_cookie", "apiKey", location="cookie", param="sid"),
        "bearer": SecurityScheme("bearer", "http", scheme="bearer"),
        "basic": SecurityScheme("basic", "http", scheme="basic"),
    }
    return Collection(name="echo", tools=tools, servers=[url], security_schemes=schemes)


def library_collection(api: LibraryAPI, tmp_path: Path) -> Collection:
    return load_spec(api.write_spec(tmp_path / "library.json"))


# -- validation -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("tool", "args", "fragment", "parameter"),
    [
        ("get_book", {"book": 10}, "get_book: unknown argument 'book' (expected: book_id)", "book"),
        ("get_book", {}, "get_book: missing required argument 'book_id'", "book_id"),
        ("get_book", {"book_id": "ten"}, "get_book: argument 'book_id': 'ten' is not of type 'integer'", "book_id"),
        ("list_book_reviews", {"book_id": 10, "limit": "3"}, "argument 'limit'", "limit"),
        ("get_stats", {"verbose": True}, "get_stats: unknown argument 'verbose' (expected: no arguments)",
         "verbose"),
    ],
)
def test_invalid_arguments_never_reach_the_api(api: LibraryAPI, tmp_path: Path, tool: str, args: dict[str, Any],
                                               fragment: str, parameter: str) -> None:
    gw = Gateway(Toolset([library_collection(api, tmp_path)]))
    out = gw.call(tool, args, line=3, col=4)
    assert not out.ok and out.error is not None
    assert fragment in out.error["message"]
    assert out.error["kind"] == "ToolError" and out.error["status"] is None
    assert api.requests == []
    call = gw.calls[0]
    assert (call.tool, call.ok, call.status, call.line, call.col) == (tool, False, None, 3, 4)
    assert call.error is not None and parameter in call.error


def test_validator_is_compiled_once_per_schema() -> None:
    schema = _params({"a": {"type": "integer"}})
    assert validator_for(schema) is validator_for(schema)
    assert validator_for(dict(schema)) is not validator_for(schema)


def test_good_call_records_template_status_and_response(api: LibraryAPI, tmp_path: Path) -> None:
    gw = Gateway(Toolset([library_collection(api, tmp_path)]))
    out = gw.call("list_book_reviews", {"book_id": 10, "limit": 1}, line=1, col=0)
    assert out.ok and out.data == [{"user": "ana", "rating": 5, "text": "timeless"}]
    call = gw.calls[0]
    assert (call.method, call.path, call.status, call.ok) == ("GET", "/books/{book_id}/reviews", 200, True)
    assert call.response == out.data and call.duration_ms > 0
    assert [r.path for r in api.requests] == ["/books/10/reviews?limit=1"]


def test_http_error_names_tool_status_and_api_text(api: LibraryAPI, tmp_path: Path) -> None:
    gw = Gateway(Toolset([library_collection(api, tmp_path)]))
    out = gw.call("get_book", {"book_id": 999})
    assert out.error is not None
    assert {k: out.error[k] for k in ("message", "status", "kind")} == {
        "message": "get_book: HTTP 404: book not found", "status": 404, "kind": "ToolError"}
    # the program also gets the error body and headers (ToolError.response), and the log says why
    assert out.error["data"] == {"error": "book not found"} and out.error["failure"] == "http"
    assert out.error["headers"]["content-type"] == "application/json"
    assert gw.calls[0].status == 404 and gw.calls[0].response == {"error": "book not found"}


def test_credentials_come_from_the_host_environment(api: LibraryAPI, tmp_path: Path) -> None:
    ts = Toolset([library_collection(api, tmp_path)], credentials={"api_key": "env:LIB_KEY"})
    gw = Gateway(ts, environ={"LIB_KEY": SECRET})
    out = gw.call("create_order", {"book_id": 20, "quantity": 2})
    assert out.ok and out.data["total"] == 22.5
    assert api.requests[-1].headers["X-API-Key"] == SECRET
    missing = Gateway(ts, environ={}).call("create_order", {"book_id": 20})
    assert missing.error is not None and "LIB_KEY is not set" in missing.error["message"]
    no_cred = Gateway(Toolset([library_collection(api, tmp_path)])).call("create_order", {"book_id": 20})
    assert no_cred.error is not None and "HTTP 401: missing or wrong API key" in no_cred.error["message"]
    # A tool that declares no security does not fail for an unset credential it may not need.
    stats = Gateway(ts, environ={}).call("get_stats", {})
    assert stats.ok and stats.data == {"books": 5, "authors": 3}
    assert "X-API-Key" not in api.requests[-1].headers


@pytest.mark.parametrize(
    ("tool", "where", "expected"),
    [
        ("with_key_header", "header", ("X-Key", "s3cr3t")),
        ("with_key_query", "path", "/echo/q?api_key=s3cr3t"),
        ("with_key_cookie", "header", ("Cookie", "sid=s3cr3t")),
        ("with_bearer", "header", ("Authorization", "Bearer s3cr3t")),
        ("with_basic", "header", ("Authorization", "Basic dTpw")),
    ],
)
def test_credential_placement(echo: Echo, tool: str, where: str, expected: Any) -> None:
    creds = {name: "env:SECRET_VALUE" for name in ("key_header", "key_query", "key_cookie", "bearer")}
    creds["basic"] = "env:BASIC_VALUE"
    gw = Gateway(Toolset([echo_collection(echo.url)], credentials=creds),
                 environ={"SECRET_VALUE": "s3cr3t", "BASIC_VALUE": "u:p"})
    out = gw.call(tool, {})
    assert out.ok, out.error
    seen = echo.seen[-1]  # placement is judged by what the server received...
    if where == "path":
        assert seen["path"] == expected
    else:
        assert seen["headers"][expected[0]] == expected[1]
    # ...because the echo the program gets back has the secret taken out.
    assert "s3cr3t" not in json.dumps(out.data) and "dTpw" not in json.dumps(out.data)
    assert "[REDACTED]" in json.dumps(out.data) and gw.calls[-1].redacted >= 1


# -- encoding -------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("value", "raw_path"),
    [
        ("../../admin", "/echo/items/..%2F..%2Fadmin"),
        ("..", "/echo/items/%2E%2E"),
        (".", "/echo/items/%2E"),
        ("a/b?c=d#e", "/echo/items/a%2Fb%3Fc%3Dd%23e"),
        ("%2e%2e", "/echo/items/%252e%252e"),
        ("sp ace", "/echo/items/sp%20ace"),
    ],
)
def test_path_parameters_stay_one_segment(echo: Echo, value: str, raw_path: str) -> None:
    gw = Gateway(Toolset([echo_collection(echo.url)]))
    out = gw.call("get_item", {"item_id": value})
    assert out.ok, out.error
    assert out.data["path"] == raw_path


@pytest.mark.parametrize("param", ["q", "x_trace", "session"])
@pytest.mark.parametrize("bad", ["a\r\nX-Evil: 1", "a\nb", "a\x00b"])
def test_crlf_in_query_header_cookie_is_refused(echo: Echo, param: str, bad: str) -> None:
    before = len(echo.seen)
    gw = Gateway(Toolset([echo_collection(echo.url)]))
    out = gw.call("get_item", {"item_id": "1", param: bad})
    assert out.error is not None and f"argument {param!r} must not contain CR, LF or NUL" in out.error["message"]
    assert len(echo.seen) == before


def test_query_lists_headers_cookies_and_json_body(echo: Echo) -> None:
    gw = Gateway(Toolset([echo_collection(echo.url)]))
    out = gw.call("get_item", {"item_id": "7", "tags": ["a", "b"], "x_trace": "t1", "session": "abc"})
    assert out.ok
    assert out.data["path"] == "/echo/items/7?tag=a&tag=b"
    assert out.data["headers"]["X-Trace"] == "t1" and out.data["headers"]["Cookie"] == "session=abc"
    out = gw.call("post_note", {"text": "hi", "count": 2})
    assert out.ok and json.loads(out.data["body"]) == {"text": "hi", "count": 2}


# -- limits ---------------------------------------------------------------------------------------

def test_response_size_cap_stops_reading(echo: Echo) -> None:
    gw = Gateway(Toolset([echo_collection(echo.url)]), Limits(max_response_bytes=100_000))
    out = gw.call("big", {})
    assert out.error is not None and "larger than the 100000-byte cap" in out.error["message"]
    assert gw.calls[0].status == 200 and not gw.calls[0].ok


def test_per_call_timeout_against_a_slow_endpoint(echo: Echo) -> None:
    gw = Gateway(Toolset([echo_collection(echo.url)]), Limits(call_timeout=0.3))
    started = time.monotonic()
    out = gw.call("slow", {})
    assert time.monotonic() - started < 1.5
    assert out.error is not None and out.error["message"] == "slow: no response within 0.3 s"


def test_deadline_caps_the_call_timeout(echo: Echo) -> None:
    gw = Gateway(Toolset([echo_collection(echo.url)]), Limits(call_timeout=30), deadline=time.monotonic() + 0.3)
    started = time.monotonic()
    assert not gw.call("slow", {}).ok
    assert time.monotonic() - started < 1.5


def test_non_json_bodies_come_back_as_text(echo: Echo) -> None:
    gw = Gateway(Toolset([echo_collection(echo.url)]))
    assert gw.call("text", {}).data == "plain words"
    out = gw.call("fail", {})
    assert out.error is not None and out.error["message"] == "fail: HTTP 500: upstream exploded"


def test_call_budget(api: LibraryAPI, tmp_path: Path) -> None:
    gw = Gateway(Toolset([library_collection(api, tmp_path)]), Limits(max_calls=2))
    assert gw.call("get_stats", {}).ok and gw.call("get_stats", {}).ok
    out = gw.call("get_stats", {})
    assert out.error is not None and out.error["kind"] == "CallBudget" and gw.budget_exceeded
    assert len(api.requests) == 2 and len(gw.calls) == 3


@pytest.mark.parametrize(
    ("tool", "args", "fragment"),
    [
        ("no_such_tool", {}, "no_such_tool: no such tool"),
        (["get_book"], {}, "no such tool"),
        ("get_book", [10], "arguments must be keyword arguments"),
        ("get_book", {"book_id": {"$ne": 1}}, "is not of type 'integer'"),
    ],
)
def test_forged_calls_are_validated(api: LibraryAPI, tmp_path: Path, tool: Any, args: Any, fragment: str) -> None:
    gw = Gateway(Toolset([library_collection(api, tmp_path)]))
    out = gw.call(tool, args, line="1", col=None)
    assert out.error is not None and fragment in out.error["message"]
    assert api.requests == [] and gw.calls[0].line is None


def test_relative_server_is_a_clear_error(tmp_path: Path) -> None:
    col = Collection(name="rel", tools=[Tool(name="ping", collection="rel", path="/ping")], servers=["/api"])
    out = Gateway(Toolset([col])).call("ping", {})
    assert out.error is not None and "'/api' is not an absolute http(s) URL" in out.error["message"]
    none = Collection(name="none", tools=[Tool(name="ping", collection="none", path="/ping")])
    out = Gateway(Toolset([none])).call("ping", {})
    assert out.error is not None and "names no server URL" in out.error["message"]


def test_base_url_override_wins(api: LibraryAPI, tmp_path: Path) -> None:
    col = library_collection(api, tmp_path)
    col.servers = ["http://127.0.0.1:9/nowhere"]
    out = Gateway(Toolset([col], base_url=api.url)).call("get_stats", {})
    assert out.ok and out.data == {"books": 5, "authors": 3}


def test_unfilled_path_template_is_refused(echo: Echo) -> None:
    col = Collection(name="loose", servers=[echo.url], tools=[
        Tool(name="get_thing", collection="loose", path="/echo/things/{thing_id}",
             parameters={"type": "object", "properties": {"thing_id": {"type": "string"}}},
             bindings={"thing_id": Binding("path", "thing_id")})])
    before = len(echo.seen)
    out = Gateway(Toolset([col])).call("get_thing", {})
    assert out.error is not None and out.error["message"] == "get_thing: missing path argument 'thing_id'"
    assert len(echo.seen) == before


# -- hostile APIs (red team): what a server sends must not hang, crash or poison the host ----------

class Nasty(_Served):
    """A 127.0.0.1 server that answers badly on purpose: /drip (a byte every 0.2 s, never done),
    /deep?n=N (N nested arrays), /nan (NaN, Infinity and lone surrogate escapes)."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path.startswith("/drip"):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "100000")
                    self.end_headers()
                    try:
                        for _ in range(100):
                            self.wfile.write(b" ")
                            self.wfile.flush()
                            time.sleep(0.2)
                    except OSError:
                        pass
                    return
                if self.path.startswith("/deep"):
                    n = int(self.path.split("=")[1])
                    return self._send(200, b"[" * n + b"]" * n)
                if self.path.startswith("/nanerr"):
                    return self._send(500, b'{"error": "bad \\ud800 thing", "x": NaN}')
                self._send(200, b'{"x": NaN, "y": -Infinity, "s": "a\\ud800b", "\\udcff": ["\\ud83d\\ude00"]}')

        self.serve(Handler)


@pytest.fixture(scope="module")
def nasty() -> Iterator[Nasty]:
    server = Nasty()
    yield server
    server.close()


def nasty_collection(url: str) -> Collection:
    tools = [Tool(name=n, collection="nasty", path=f"/{n}") for n in ("drip", "nan", "nanerr")]
    tools.append(Tool(name="deep", collection="nasty", path="/deep",
                      parameters=_params({"n": {"type": "integer"}}), bindings={"n": Binding("query", "n")}))
    tools.append(Tool(name="with_host", collection="nasty", path="/nan",
                      parameters=_params({"host": {"type": "string"}, "length": {"type": "string"}}),
                      bindings={"host": Binding("header", "Host"), "length": Binding("header", "Content-Length")}))
    return Collection(name="nasty", tools=tools, servers=[url])


def test_slow_drip_body_is_cut_at_the_call_timeout(nasty: Nasty) -> None:
    gw = Gateway(Toolset([nasty_collection(nasty.url)]), Limits(call_timeout=0.6))
    started = time.monotonic()
    out = gw.call("drip", {})
    assert time.monotonic() - started < 1.5
    assert out.error is not None and out.error["message"] == "drip: no response within 0.6 s"


@pytest.mark.parametrize("depth", [300, 100_000])
def test_deeply_nested_response_is_a_tool_error(nasty: Nasty, depth: int) -> None:
    gw = Gateway(Toolset([nasty_collection(nasty.url)]))
    out = gw.call("deep", {"n": depth})
    assert out.error is not None and out.error["message"] == "deep: the response is nested more than 200 levels deep"
    assert gw.calls[0].status == 200 and not gw.calls[0].ok
    assert gw.call("deep", {"n": 150}).ok


def test_nan_and_lone_surrogates_in_responses_are_made_printable(nasty: Nasty) -> None:
    gw = Gateway(Toolset([nasty_collection(nasty.url)]))
    out = gw.call("nan", {})
    assert out.ok and out.data == {"x": None, "y": None, "s": "a\ufffdb", "\ufffd": ["\U0001f600"]}
    out = gw.call("nanerr", {})
    assert out.error is not None and out.error["message"] == "nanerr: HTTP 500: bad \ufffd thing"
    doc = json.dumps([c.to_dict(with_response=True) for c in gw.calls], ensure_ascii=False, allow_nan=False)
    doc.encode("utf-8")


@pytest.mark.parametrize("param", ["host", "length"])
def test_framing_headers_are_not_taken_from_arguments(nasty: Nasty, param: str) -> None:
    gw = Gateway(Toolset([nasty_collection(nasty.url)]))
    out = gw.call("with_host", {param: "5"})
    assert out.error is not None and "which the gateway does not let programs set" in out.error["message"]
    assert gw.calls[0].status is None


def test_an_unencodable_request_is_a_tool_error_not_a_crash(echo: Echo) -> None:
    gw = Gateway(Toolset([echo_collection(echo.url)]))
    out = gw.call("get_item", {"item_id": "1", "q": "\ud800"})
    assert out.error is not None and out.error["message"].startswith("get_item: the request could not be made")


@pytest.mark.parametrize("value", ["//127.0.0.2:9/x", "user:pw@127.0.0.2", "http://127.0.0.2/", "\\\\127.0.0.2\\x"])
def test_path_arguments_cannot_change_the_host(echo: Echo, value: str) -> None:
    gw = Gateway(Toolset([echo_collection(echo.url)]))
    out = gw.call("get_item", {"item_id": value})
    assert out.ok, out.error
    assert out.data["path"].startswith("/echo/items/") and "/" not in out.data["path"][len("/echo/items/"):]
    assert out.data["headers"]["Host"] == echo.url.removeprefix("http://")


def test_spec_regexes_cannot_stall_the_host(echo: Echo) -> None:
    """``^(a+)+$`` backtracks exponentially on "aaa...!": validating it would hang the gateway for
    hours. Patterns are left to the API; the call goes out at once."""
    tool = Tool(name="by_code", collection="redos", path="/echo/code",
                parameters=_params({"code": {"type": "string", "pattern": "^(a+)+$"}}),
                bindings={"code": Binding("query", "code")})
    gw = Gateway(Toolset([Collection(name="redos", tools=[tool], servers=[echo.url])]))
    started = time.monotonic()
    out = gw.call("by_code", {"code": "a" * 40 + "!"})
    assert time.monotonic() - started < 2
    assert out.ok and out.data["path"].startswith("/echo/code?code=aaaa")


def test_unique_items_on_a_huge_array_cannot_stall_the_host(echo: Echo) -> None:
    """jsonschema checks ``uniqueItems`` pairwise for objects: 20,000 of them would take minutes."""
    tool = Tool(name="bulk", collection="bulk", method="POST", path="/echo/bulk",
                parameters=_params({"items": {"type": "array", "uniqueItems": True}}),
                bindings={"items": Binding("body", "items")}, body_media_type="application/json")
    gw = Gateway(Toolset([Collection(name="bulk", tools=[tool], servers=[echo.url])]))
    started = time.monotonic()
    assert gw.call("bulk", {"items": [{"n": i} for i in range(20_000)]}).ok
    assert time.monotonic() - started < 3
    out = gw.call("bulk", {"items": [{"n": 1}, {"n": 1}]})
    assert out.error is not None and "has non-unique elements" in out.error["message"]


# -- error text -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"error": "Unauthorized", "message": "invalid token 'abc'"}, "invalid token 'abc'"),
        ({"error": {"code": 404, "message": "no such movie"}}, "no such movie"),
        ({"errors": [{"title": "Invalid", "detail": "year must be a number"}]}, "year must be a number"),
        ({"status_code": 34, "status_message": "The resource could not be found."},
         "The resource could not be found."),
        ({"detail": [{"loc": ["query", "q"], "msg": "field required"}]}, "query.q: field required"),
        ({"error": "Not Found"}, "Not Found"),
        ({"unrelated": 1}, '{"unrelated": 1}'),
        ("plain text failure", "plain text failure"),
        (None, "(empty body)"),
    ],
)
def test_error_text_is_the_most_specific_message(body: Any, expected: str) -> None:
    from sandbox.gateway.core import _api_error_text

    assert _api_error_text(body) == expected
