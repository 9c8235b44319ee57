"""Security items of the real-APIs issue: cookies never cross runs or APIs, and a secret the
gateway added never comes back to the program, whatever the API echoes.

The server here behaves like the real ones that caused the problems: a token-authenticated call
answers with a session cookie that logs in later calls (a notebook server does this), an echo
endpoint returns the request headers and URL (an HTTP test service does), and a failed login
quotes the bad key in its error message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from protocols.model import Binding, Collection, SecurityScheme, Tool
from sandbox.api import Limits, Toolset
from sandbox.execute import run
from sandbox.gateway.core import Gateway
from sandbox.gateway.redact import MASK, Redactor
from tests.support.fakes.serving import LoopbackServer, QuietHandler

TOKEN = "tok-9a8b7c6d5e"
SESSION = "sess-1f2e3d4c"


class SessionServer(LoopbackServer):
    """``/login`` with ``Authorization: token TOKEN`` sets ``session=SESSION``; ``/me`` answers 200
    only with that cookie; ``/echo`` returns headers and URL; a bad token gets a 401 quoting it."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.url = ""

    def start(self) -> SessionServer:
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                headers = dict(self.headers.items())
                outer.seen.append({"path": self.path, "headers": headers})
                auth = headers.get("Authorization", "")
                if self.path.startswith("/login") or self.path.startswith("/other/login"):
                    if auth != f"token {TOKEN}":
                        return self.send_json(401, {"error": "Unauthorized",
                                                    "message": f"invalid token {auth.removeprefix('token ')!r}"})
                    return self.send_json(200, {"ok": True}, {"Set-Cookie": f"session={SESSION}; Path=/; HttpOnly"})
                if self.path.startswith("/me") or self.path.startswith("/other/me"):
                    if f"session={SESSION}" in headers.get("Cookie", ""):
                        return self.send_json(200, {"user": "alice"})
                    return self.send_json(401, {"message": "not logged in"})
                self.send_json(200, {"headers": headers, "url": self.path})

        self.url = f"http://127.0.0.1:{self._serve(Handler).server_address[1]}"
        return self

    def cookies_sent(self) -> list[str]:
        return [s["headers"]["Cookie"] for s in self.seen if "Cookie" in s["headers"]]


@pytest.fixture()
def server() -> Iterator[SessionServer]:
    with SessionServer() as s:
        yield s


def _collection(url: str, name: str, prefix: str = "", *, declares_cookie: bool = False) -> Collection:
    token = SecurityScheme("token", "http", scheme="token")
    schemes = {"token": token}
    me_params: dict[str, Any] = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    bindings: dict[str, Binding] = {}
    if declares_cookie:  # the spec says the API takes a session cookie
        me_params["properties"]["session"] = {"type": "string"}
        bindings["session"] = Binding("cookie", "session")
    echo_params = {"type": "object", "properties": {"q": {"type": "string"}}, "required": [],
                   "additionalProperties": False}
    tools = [
        Tool(name=f"{name}_login", collection=name, path=f"{prefix}/login", security=[["token"]]),
        Tool(name=f"{name}_me", collection=name, path=f"{prefix}/me", parameters=me_params, bindings=bindings),
        Tool(name=f"{name}_echo", collection=name, path=f"{prefix}/echo", security=[["token"]],
             parameters=echo_params, bindings={"q": Binding("query", "q")}),
    ]
    return Collection(name=name, tools=tools, servers=[url], security_schemes=schemes)


ENV = {"NB_TOKEN": TOKEN}


def test_a_session_cookie_never_reaches_another_run_or_api(server: SessionServer) -> None:
    """No jar by default: the login's cookie is not kept, in this run or any other, on any API."""
    nb = _collection(server.url, "nb")
    other = _collection(server.url, "other", "/other")
    run_a = Gateway(Toolset([nb, other], credentials={"nb.token": "env:NB_TOKEN"}), environ=ENV)
    assert run_a.call("nb_login", {}).ok
    assert not run_a.call("nb_me", {}).ok  # the spec declares no cookie: none is kept, even in this run
    assert not run_a.call("other_me", {}).ok
    run_b = Gateway(Toolset([nb]), environ={})  # a later run without any credential
    assert run_b.call("nb_me", {}).error["status"] == 401
    assert server.cookies_sent() == []


def test_declared_cookies_live_for_one_run_and_one_api(server: SessionServer) -> None:
    nb = _collection(server.url, "nb", declares_cookie=True)
    other = _collection(server.url, "other", "/other", declares_cookie=True)
    run_a = Gateway(Toolset([nb, other], credentials={"nb.token": "env:NB_TOKEN"}), environ=ENV)
    assert run_a.call("nb_login", {}).ok
    me = run_a.call("nb_me", {})
    assert me.ok and me.data == {"user": "alice"}  # the session works within the run and the API
    assert not run_a.call("other_me", {}).ok  # another API on the same host does not get it
    # A cookie argument of the program's own wins over the jar's cookie of the same name.
    assert not run_a.call("nb_me", {"session": "forged"}).ok
    assert server.seen[-1]["headers"]["Cookie"] == "session=forged"
    run_b = Gateway(Toolset([nb]), environ={})
    assert run_b.call("nb_me", {}).error["status"] == 401  # nor does the next run
    assert server.cookies_sent() == [f"session={SESSION}", "session=forged"]


def test_an_echoed_secret_is_redacted_and_counted(server: SessionServer) -> None:
    gw = Gateway(Toolset([_collection(server.url, "nb")], credentials={"token": "env:NB_TOKEN"}), environ=ENV)
    out = gw.call("nb_echo", {"q": "hello"})
    assert out.ok
    assert server.seen[-1]["headers"]["Authorization"] == f"token {TOKEN}"  # it was sent...
    assert TOKEN not in json.dumps(out.data)  # ...but is not handed back
    assert out.data["headers"]["Authorization"] == f"token {MASK}"
    assert gw.calls[-1].redacted == 1 and TOKEN not in json.dumps(gw.calls[-1].response)


def test_a_secret_quoted_in_an_error_message_is_redacted(server: SessionServer) -> None:
    wrong = "wrong-key-12345"
    gw = Gateway(Toolset([_collection(server.url, "nb")], credentials={"token": "env:NB_TOKEN"}),
                 environ={"NB_TOKEN": wrong})
    out = gw.call("nb_login", {})
    assert not out.ok and out.error["status"] == 401
    assert wrong not in out.error["message"] and MASK in out.error["message"]
    assert wrong not in (gw.calls[-1].error or "") and gw.calls[-1].redacted >= 1


def test_the_program_never_prints_the_secret(server: SessionServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end in the local sandbox: whatever the program does with the echo, no secret."""
    monkeypatch.setenv("NB_TOKEN", TOKEN)
    program = ("r = nb_echo(q='x')\nprint(r)\n"
               "try:\n    nb_login()\nexcept ToolError as e:\n    print(e)\n")
    result = run(program, [_collection(server.url, "nb")], Limits(timeout=20), sandbox="local",
                 credentials={"token": "env:NB_TOKEN"})
    assert result.ok, result.error
    assert TOKEN not in result.answer and MASK in result.answer
    assert TOKEN not in json.dumps(result.to_dict())
    assert result.to_dict()["calls"][0]["redacted"] == 1


@pytest.mark.parametrize(
    ("secret", "echoed"),
    [
        ("abc/def+ghi", "abc%2Fdef%2Bghi"),  # percent-encoded in a URL
        ("abc def+ghi", "abc+def%2Bghi"),  # form-encoded
        ("user:pa55word", "dXNlcjpwYTU1d29yZA=="),  # a Basic header
        ("user:pa55word", "pa55word"),  # the password alone
    ],
)
def test_secrets_are_found_in_their_wire_forms(secret: str, echoed: str) -> None:
    text, n = Redactor([secret]).text(f"seen: {echoed}!")
    assert n == 1 and text == f"seen: {MASK}!"


def test_redaction_walks_keys_nested_data_and_escaped_json() -> None:
    r = Redactor(["s3cr3t-value"])
    raw = b'{"a": [{"s3cr3t-value": "x"}, "pre s3cr\\u0033t-value post"], "n": 1}'
    assert r.may_hold(raw)
    data, n = r.data(json.loads(raw))
    assert n == 2 and data == {"a": [{MASK: "x"}, f"pre {MASK} post"], "n": 1}
    assert not r.may_hold(b'{"plain": "nothing here"}')
    short, count = Redactor(["ab"]).data({"k": "ab", "t": "abc"})  # too short to replace inside text
    assert short == {"k": MASK, "t": "abc"} and count == 1
