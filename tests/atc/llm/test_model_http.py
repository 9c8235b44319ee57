"""The lean HTTP model client (``atc.llm.openai_http``) against the scripted OpenAI-compatible server,
side by side with the ``openai`` package's client: same requests on the wire, same retries, same
errors. Also: ``make_client`` picks the lean one by default, and it never imports ``openai``."""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from atc.errors import ConfigError, ModelError
from atc.llm.chat import ModelClient
from atc.llm.client import OpenAIModel, make_client
from atc.llm.openai_http import HttpChatModel
from tests.support.fakes.openai_server import Reply, ScriptedOpenAI

KINDS = ["http", "openai"]


@pytest.fixture()
def server() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as s:
        yield s


def _model(kind: str, base_url: str, **kw: Any) -> Any:
    cls = HttpChatModel if kind == "http" else OpenAIModel
    kw.setdefault("backoff", 0.01)
    return cls("scripted-model", base_url=base_url, **kw)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("kind", KINDS)
def test_same_request_and_answer(server: ScriptedOpenAI, kind: str) -> None:
    server.push("print(1)")
    model = _model(kind, server.base_url, max_tokens=77, temperature=0.3)
    assert isinstance(model, ModelClient)
    done = model.complete([{"role": "system", "content": "rules"}, {"role": "user", "content": "task"}])
    assert done.text == "print(1)" and done.requests == 1
    assert done.prompt_tokens > 0 and done.completion_tokens > 0
    body = server.requests[0]
    assert body["model"] == "scripted-model" and body["temperature"] == 0.3 and body["max_tokens"] == 77
    assert body["messages"] == [{"role": "system", "content": "rules"}, {"role": "user", "content": "task"}]


@pytest.mark.parametrize("kind", KINDS)
def test_retries_and_backoff(server: ScriptedOpenAI, kind: str) -> None:
    server.push(Reply(429, "slow down"), Reply(503, "busy"), "ok")
    slept: list[float] = []
    done = _model(kind, server.base_url, sleep=slept.append).complete([{"role": "user", "content": "x"}])
    assert done.text == "ok" and done.requests == 3 and len(server.requests) == 3
    assert slept == [0.01, 0.02]


@pytest.mark.parametrize("kind", KINDS)
def test_retry_after_wins(server: ScriptedOpenAI, kind: str) -> None:
    server.push(Reply(429, "slow down", {"retry-after-ms": "5"}), "ok")
    slept: list[float] = []
    _model(kind, server.base_url, sleep=slept.append).complete([{"role": "user", "content": "x"}])
    assert slept == [0.005]


@pytest.mark.parametrize("kind", KINDS)
def test_exhausted_retries(server: ScriptedOpenAI, kind: str) -> None:
    server.push(*[Reply(500, "boom")] * 3)
    with pytest.raises(ModelError, match=r"HTTP 500.*after 3 attempts.*boom"):
        _model(kind, server.base_url, max_retries=2).complete([{"role": "user", "content": "x"}])
    assert len(server.requests) == 3


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("status", "pattern"), [
    (401, "refused the API key"), (403, "denied access"), (404, "does not know model"), (400, "refused the request"),
])
def test_refusals_read_alike(server: ScriptedOpenAI, kind: str, status: int, pattern: str) -> None:
    server.push(Reply(status, "nope"))
    with pytest.raises(ModelError, match=pattern) as info:
        _model(kind, server.base_url).complete([{"role": "user", "content": "x"}])
    assert "nope" in info.value.message and info.value.exit_code == 1
    assert len(server.requests) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_server_down(kind: str) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    with pytest.raises(ModelError, match="cannot reach the model server at http://127.0.0.1") as info:
        _model(kind, url, max_retries=1, backoff=0.0).complete([{"role": "user", "content": "x"}])
    assert "after 2 attempts" in info.value.message


class _Garbage(http.server.BaseHTTPRequestHandler):
    """Answers every POST with whatever the test put in ``body`` (a server that is not OpenAI's)."""

    body = b""

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.mark.parametrize("body", [b"<html>not json</html>", b"[1, 2]", b'{"choices": []}', b'{"id": "x"}'])
def test_garbage_answers_are_model_errors(body: bytes) -> None:
    handler = type("H", (_Garbage,), {"body": body})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        model = HttpChatModel("m", base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", max_retries=0)
        with pytest.raises(ModelError, match="not a chat completion|without any choice"):
            model.complete([{"role": "user", "content": "x"}])
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_make_client_picks_the_lean_client_unless_told(monkeypatch: pytest.MonkeyPatch, server: ScriptedOpenAI) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("ATC_MODEL", "local-model")
    monkeypatch.delenv("ATC_MODEL_CLIENT", raising=False)
    assert isinstance(make_client(), HttpChatModel)
    assert isinstance(make_client(client="openai"), OpenAIModel)
    monkeypatch.setenv("ATC_MODEL_CLIENT", "openai")
    assert isinstance(make_client(), OpenAIModel)
    monkeypatch.setenv("ATC_MODEL_CLIENT", "grpc")
    with pytest.raises(ConfigError, match="unknown model client 'grpc'"):
        make_client()


def test_not_an_http_url_is_config_error() -> None:
    with pytest.raises(ConfigError, match="not an http"):
        HttpChatModel("m", base_url="localhost:11434/v1")


def test_the_lean_client_never_imports_openai(server: ScriptedOpenAI) -> None:
    server.push("done")
    code = ("import sys\nfrom atc.llm.client import make_client\nc = make_client()\n"
            "print(c.complete([{'role': 'user', 'content': 'x'}]).text, 'openai' in sys.modules)")
    env = {"OPENAI_BASE_URL": server.base_url, "ATC_MODEL": "m", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["done", "False"]
