"""The gateway against a server that behaves like real APIs (tests/support/apis/realworld.py): redirects
(item 3), credentials for specs without a security scheme (4), validation modes and extra_query
(6), empty path parameters (7), bodies and content encodings (10)."""

from __future__ import annotations

import base64
import json
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from protocols.errors import ConfigError
from protocols.model import Binding, Collection, Tool
from sandbox.api import Limits, Toolset
from sandbox.gateway.core import Gateway
from sandbox.gateway.http.credentials import check
from tests.support.apis.realworld import BASIC, PNG, SECRET, RealWorld


@pytest.fixture(scope="module")
def rw() -> Iterator[RealWorld]:
    server = RealWorld().start()
    other = RealWorld().start()
    server.other = other.url
    server.other_server = other  # type: ignore[attr-defined]
    yield server
    server.stop()
    other.stop()


def _params(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required or [], "additionalProperties": False}


def collection(url: str, name: str = "rw") -> Collection:
    s = {"type": "string"}
    tools = [
        Tool(name="go", collection=name, method="GET", path="/go/{kind}",
             parameters=_params({"kind": s, "token": s}, ["kind"]),
             bindings={"kind": Binding("path", "kind"), "token": Binding("query", "token")}),
        Tool(name="go_post", collection=name, method="POST", path="/go/{kind}",
             parameters=_params({"kind": s, "text": s}, ["kind"]),
             bindings={"kind": Binding("path", "kind"), "text": Binding("body", "text")},
             body_media_type="application/json"),
        Tool(name="echo", collection=name, path="/echo", parameters=_params({"q": s}),
             bindings={"q": Binding("query", "q")}),
        Tool(name="auth", collection=name, path="/auth/{kind}", parameters=_params({"kind": s}, ["kind"]),
             bindings={"kind": Binding("path", "kind")}),
        Tool(name="get_contents", collection=name, path="/contents/{path}", parameters=_params({"path": s}, ["path"]),
             bindings={"path": Binding("path", "path")}),
        Tool(name="get_item", collection=name, path="/echo/{item_id}/details",
             parameters=_params({"item_id": s, "limit": {"type": "integer"}}, ["item_id"]),
             bindings={"item_id": Binding("path", "item_id"), "limit": Binding("query", "limit")}),
        Tool(name="put_blob", collection=name, method="PUT", path="/echo/blob",
             parameters=_params({"body": {"type": "string", "format": "binary"}}, ["body"]),
             bindings={"body": Binding("body", "")}, body_media_type="application/octet-stream"),
    ]
    return Collection(name=name, tools=tools, servers=[url])


def gw(rw: RealWorld, **kw: Any) -> Gateway:
    limits = kw.pop("limits", None)
    environ = kw.pop("environ", None)
    return Gateway(Toolset([collection(rw.url)], **kw), limits, environ=environ)


# -- redirects (item 3) ---------------------------------------------------------------------------

@pytest.mark.parametrize(("code", "method"), [("301", "GET"), ("302", "GET"), ("303", "GET"), ("307", "GET"),
                                              ("308", "GET")])
def test_same_origin_redirects_are_followed(rw: RealWorld, code: str, method: str) -> None:
    g = gw(rw, credentials={"header:Authorization": "env:RW"}, environ={"RW": f"token {SECRET}"})
    out = g.call("go", {"kind": code})
    assert out.ok, out.error
    assert out.data == {"method": method, "body": ""}
    assert g.calls[0].redirects == [{"status": int(code), "location": "/result", "followed": True}]
    # the credential went along to the same origin
    assert rw.requests[-1].headers["authorization"] == f"token {SECRET}"


@pytest.mark.parametrize(("code", "method", "body"), [("303", "GET", ""), ("302", "GET", ""), ("301", "GET", ""),
                                                      ("307", "POST", '{"text": "keep me"}'),
                                                      ("308", "POST", '{"text": "keep me"}')])
def test_redirect_methods_follow_the_rfc(rw: RealWorld, code: str, method: str, body: str) -> None:
    out = gw(rw).call("go_post", {"kind": code, "text": "keep me"})
    assert out.ok, out.error
    assert out.data["method"] == method and out.data["body"].replace(" ", "") == body.replace(" ", "")


def test_a_chain_of_redirects_is_followed_and_logged(rw: RealWorld) -> None:
    g = gw(rw)
    out = g.call("go", {"kind": "relative-chain"})
    assert out.ok and [h["status"] for h in g.calls[0].redirects] == [302, 302]


def test_cross_origin_redirect_is_refused_and_never_reaches_the_other_host(rw: RealWorld) -> None:
    other: RealWorld = rw.other_server  # type: ignore[attr-defined]
    before = len(other.requests)
    g = gw(rw, credentials={"header:Authorization": "env:RW"}, environ={"RW": f"token {SECRET}"})
    out = g.call("go", {"kind": "offsite"})
    assert out.error is not None and out.error["status"] == 302
    assert "redirect to" in out.error["message"] and "not followed" in out.error["message"]
    assert "another origin" in out.error["message"]
    assert len(other.requests) == before
    call = g.calls[0]
    assert (call.ok, call.failure, call.status) == (False, "redirect", 302)
    assert call.redirects[0]["followed"] is False and "another origin" in call.redirects[0]["reason"]


@pytest.mark.parametrize(("kind", "reason"), [("file", "never follows a redirect to a file: URL"),
                                              ("loop", "more than 10 redirects"),
                                              ("nowhere", "no Location header")])
def test_redirects_that_are_never_followed(rw: RealWorld, kind: str, reason: str) -> None:
    g = gw(rw)
    out = g.call("go", {"kind": kind})
    assert out.error is not None and reason in out.error["message"]
    assert g.calls[0].failure == "redirect" and not g.calls[0].ok


def test_cookies_set_on_a_hop_go_to_the_next_hop_for_cookie_apis_only(rw: RealWorld) -> None:
    plain = gw(rw)
    out = plain.call("go", {"kind": "login-cookie"})
    assert out.error is not None and out.error["status"] == 401  # no jar: the API declares no cookies
    col = collection(rw.url)
    col.tools.append(Tool(name="with_cookie", collection="rw", path="/c",
                          parameters=_params({"sid": {"type": "string"}}), bindings={"sid": Binding("cookie", "sid")}))
    g = Gateway(Toolset([col]))
    out = g.call("go", {"kind": "login-cookie"})
    assert out.ok and out.data == {"user": "ada"}
    assert [h["status"] for h in g.calls[0].redirects] == [302]
    # the session stays for this run's later calls to that API, and only this run's
    assert g.call("go", {"kind": "whoami"}).ok
    assert not Gateway(Toolset([col])).call("go", {"kind": "whoami"}).ok


def test_a_secret_in_a_redirect_location_is_redacted(rw: RealWorld) -> None:
    g = gw(rw, credentials={"query:token": "env:RW"}, environ={"RW": SECRET})
    out = g.call("go", {"kind": "keyed"})
    assert out.ok
    log = json.dumps([c.to_dict(with_response=True) for c in g.calls])
    assert SECRET not in log and "[REDACTED]" in log


# -- credentials without a security scheme (item 4) ------------------------------------------------

@pytest.mark.parametrize(
    ("key", "value", "kind"),
    [("header:Authorization", f"token {SECRET}", "header"), ("query:token", SECRET, "query"),
     ("cookie:sid", SECRET, "cookie"), ("bearer", SECRET, "bearer"), ("basic", BASIC, "basic")],
)
def test_placements_put_the_secret_where_the_user_says(rw: RealWorld, key: str, value: str, kind: str) -> None:
    g = gw(rw, credentials={key: "env:RW"}, environ={"RW": value})
    out = g.call("auth", {"kind": kind})
    assert out.ok, out.error
    # the API echoed the credential: the program sees it redacted
    assert SECRET not in json.dumps(out.data) and BASIC.split(":")[1] not in json.dumps(out.data)
    assert g.calls[0].redacted >= 1


def test_a_wrong_placement_is_refused_by_the_api_and_the_quoted_secret_is_redacted(rw: RealWorld) -> None:
    g = gw(rw, credentials={"query:token": "env:RW"}, environ={"RW": SECRET})
    out = g.call("auth", {"kind": "header"})  # the API wants a header
    assert out.error is not None and out.error["status"] == 401
    g = gw(rw, credentials={"header:Authorization": "env:RW"}, environ={"RW": f"token {SECRET}x"})
    out = g.call("auth", {"kind": "header"})
    assert out.error is not None and SECRET not in out.error["message"] and "[REDACTED]" in out.error["message"]


def test_unusable_credentials_are_refused_before_any_run(rw: RealWorld) -> None:
    one = [collection(rw.url)]
    two = [collection(rw.url), collection(rw.url, "other")]
    with pytest.raises(ConfigError, match="no security scheme 'api_key', and it is not a placement"):
        check({"api_key": "env:RW"}, one, {"RW": "x"})
    with pytest.raises(ConfigError, match="say which API"):
        check({"bearer": "env:RW"}, two, {"RW": "x"})
    with pytest.raises(ConfigError, match="RW is not set"):
        check({"bearer": "env:RW"}, one, {})
    check({"other:bearer": "env:RW", "rw:header:X-Key": "env:RW"}, two, {"RW": "x"})


def test_a_scoped_placement_goes_to_its_api_only(rw: RealWorld) -> None:
    other = Collection(name="other", servers=[rw.url], tools=[
        Tool(name="other_echo", collection="other", path="/echo")])
    g = Gateway(Toolset([collection(rw.url), other], credentials={"rw:header:X-Key": "env:RW"}),
                environ={"RW": SECRET})
    assert g.call("echo", {}).ok and rw.requests[-1].headers.get("x-key") == SECRET
    assert g.call("other_echo", {}).ok and "x-key" not in rw.requests[-1].headers


# -- validation modes and extra_query (item 6) ---------------------------------------------------

def test_strict_refuses_warn_sends_and_logs_off_sends_silently(rw: RealWorld) -> None:
    args = {"item_id": "7", "limit": "ten", "sort": "name"}
    before = len(rw.requests)
    strict = gw(rw)
    out = strict.call("get_item", args)
    assert out.error is not None and "unknown argument 'sort'" in out.error["message"]
    assert len(rw.requests) == before and strict.calls[0].failure == "arguments"
    warn = gw(rw, validation="warn")
    out = warn.call("get_item", args)
    assert out.ok, out.error
    assert rw.requests[-1].target == "/echo/7/details?limit=ten&sort=name"
    warnings = warn.calls[0].warnings
    assert any("unknown argument 'sort'" in w for w in warnings) and any("'ten' is not of type" in w for w in warnings)
    assert warn.calls[0].to_dict()["warnings"] == warnings
    off = gw(rw, validations={"rw": "off"})
    assert off.call("get_item", args).ok and off.calls[0].warnings == []


def test_extra_query_passes_open_ended_filters(rw: RealWorld) -> None:
    g = gw(rw)
    out = g.call("echo", {"q": "a", "extra_query": {"filter[status]": "open", "tag": ["x", "y"],
                                                    "where": {"age": {"gt": 3}}}})
    assert out.ok, out.error
    assert out.data["target"] == "/echo?q=a&filter[status]=open&tag=x&tag=y&where[age][gt]=3"
    bad = g.call("echo", {"extra_query": ["not", "a", "dict"]})
    assert bad.error is not None and "extra_query must be a dict" in bad.error["message"]
    crlf = g.call("echo", {"extra_query": {"a": "x\r\nInjected: 1"}})
    assert crlf.error is not None and "must not contain CR, LF" in crlf.error["message"]


def test_a_schema_jsonschema_cannot_use_never_crashes_a_call(rw: RealWorld) -> None:
    broken = Tool(name="broken", collection="b", path="/echo",
                  parameters={"type": "object", "properties": {"q": {"type": "text-ish"}}},
                  bindings={"q": Binding("query", "q")})
    g = Gateway(Toolset([Collection(name="b", tools=[broken], servers=[rw.url])]))
    out = g.call("broken", {"q": "x"})
    assert out.ok, out.error
    assert g.calls[0].warnings and "cannot be checked" in g.calls[0].warnings[0]


# -- empty path parameters (item 7) --------------------------------------------------------------

def test_a_trailing_path_parameter_may_be_empty(rw: RealWorld) -> None:
    g = gw(rw)
    root = g.call("get_contents", {"path": ""})
    assert root.ok and root.data["type"] == "directory" and rw.requests[-1].target == "/contents/"
    nested = g.call("get_contents", {"path": "dir/inner.txt"})
    assert nested.ok and nested.data["content"] == "deep"
    assert rw.requests[-1].target == "/contents/dir%2Finner.txt"


def test_an_empty_value_that_would_change_the_route_is_refused(rw: RealWorld) -> None:
    before = len(rw.requests)
    out = gw(rw).call("get_item", {"item_id": ""})
    assert out.error is not None and "must not be empty here (it would change the route)" in out.error["message"]
    assert len(rw.requests) == before


# -- bodies (item 10) -----------------------------------------------------------------------------

def test_binary_bodies_come_back_uncorrupted(rw: RealWorld) -> None:
    tool = Tool(name="png", collection="b", path="/bin/png")
    octet = Tool(name="octet", collection="b", path="/bin/octet")
    latin = Tool(name="latin", collection="b", path="/bin/latin1")
    g = Gateway(Toolset([Collection(name="b", tools=[tool, octet, latin], servers=[rw.url])]))
    data = g.call("png", {}).data
    assert data["content_type"] == "image/png" and data["size"] == len(PNG)
    assert base64.b64decode(data["base64"]) == PNG
    assert base64.b64decode(g.call("octet", {}).data["base64"]) == bytes(range(256))
    assert g.call("latin", {}).data == "café à la crème"


def test_a_binary_object_uploads_as_raw_bytes(rw: RealWorld) -> None:
    g = gw(rw)
    out = g.call("put_blob", {"body": {"base64": base64.b64encode(PNG).decode(), "content_type": "image/png"}})
    assert out.ok, out.error
    assert base64.b64decode(out.data["body_b64"]) == PNG
    # the spec says only "octet-stream"; the object's own type is the more specific one
    assert rw.requests[-1].headers["content-type"] == "image/png"


@pytest.mark.parametrize("size", [50, 400_000])  # one decoding step, and many (the output is bounded per step)
@pytest.mark.parametrize("encoding", ["gzip", "deflate", "rawdeflate", "br", "zstd"])
def test_compressed_bodies_are_decoded(rw: RealWorld, encoding: str, size: int) -> None:
    tool = Tool(name="enc", collection="e", path=f"/enc/{encoding}",
                parameters=_params({"n": {"type": "integer"}}), bindings={"n": Binding("query", "n")})
    g = Gateway(Toolset([Collection(name="e", tools=[tool], servers=[rw.url])]))
    out = g.call("enc", {"n": size})
    assert out.ok, out.error
    assert out.data == {"ok": True, "encoding": encoding, "text": "ü" * size}
    assert "br" in rw.requests[-1].headers["accept-encoding"] and "zstd" in rw.requests[-1].headers["accept-encoding"]


def test_an_unknown_content_encoding_is_a_clear_error(rw: RealWorld) -> None:
    tool = Tool(name="enc", collection="e", path="/enc/compress")
    out = Gateway(Toolset([Collection(name="e", tools=[tool], servers=[rw.url])])).call("enc", {})
    assert out.error is not None and "content encoding 'compress'" in out.error["message"]


@pytest.mark.parametrize("kind", ["gzip", "br", "zstd"])
def test_a_compression_bomb_is_cut_at_the_decoded_size(rw: RealWorld, kind: str) -> None:
    tool = Tool(name="bomb", collection="e", path=f"/bomb/{kind}")
    g = Gateway(Toolset([Collection(name="e", tools=[tool], servers=[rw.url])]),
                Limits(max_response_bytes=2_000_000))
    from tests.support.apis.realworld import bomb

    wire = len(bomb(kind))
    assert wire < 2_000_000  # small on the wire: only the decoded size can stop it
    tracemalloc.start()
    try:
        out = g.call("bomb", {})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.error is not None and "larger than the 2000000-byte cap once decompressed" in out.error["message"]
    assert g.calls[0].failure == "response"
    assert peak < 20_000_000  # 64 MB decoded were never held


def test_a_header_placement_is_redacted_also_without_its_scheme_word() -> None:
    from sandbox.gateway.redact import Redactor

    redactor = Redactor([f"token {SECRET}", "Basic " + base64.b64encode(BASIC.encode()).decode()])
    text, count = redactor.text(f"invalid token: {SECRET}; user {BASIC}; password {BASIC.split(':')[1]}")
    assert SECRET not in text and BASIC.split(":")[1] not in text and count == 3


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\ud800é', max_size=6),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                         st.text(alphabet='[]{}"\\k', max_size=3), inner, max_size=3), max_leaves=25)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(value=_JSON, ascii_only=st.booleans())
def test_the_depth_check_reads_the_raw_text_right(value: Any, ascii_only: bool) -> None:
    """The depth of a body is measured on its text (strings cut out, brackets summed in C), so that
    a large body is not walked in Python; it must agree with the parsed data whatever the strings
    hold (brackets, quotes, backslashes, escapes)."""
    from sandbox.gateway.http.decoding import _has_lone_surrogate
    from sandbox.jsonbounds import max_depth

    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert max_depth(raw) == _depth(value)
    lone = any("\ud800" in s for s in _strings(value))
    assert _has_lone_surrogate(raw) == (lone and ascii_only) or not ascii_only


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    return []
