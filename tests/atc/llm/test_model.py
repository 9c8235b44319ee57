"""The model client against a real HTTP server through the real ``openai`` client."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import openai
import pytest

from atc.errors import AtcError, ConfigError, ModelError
from atc.llm.chat import Completion, ModelClient
from atc.llm.client import OpenAIModel, make_client, translate_error
from tests.support.fakes.openai_server import Reply, ScriptedOpenAI


@pytest.fixture()
def server() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as s:
        yield s


def _model(server: ScriptedOpenAI, **kw: object) -> OpenAIModel:
    return OpenAIModel("scripted-model", base_url=server.base_url, backoff=0.01, **kw)  # type: ignore[arg-type]


def test_completion_text_and_usage(server: ScriptedOpenAI) -> None:
    server.push("print(1)")
    model = _model(server)
    assert isinstance(model, ModelClient)
    done = model.complete([{"role": "system", "content": "rules"}, {"role": "user", "content": "task"}])
    assert done.text == "print(1)"
    assert done.prompt_tokens > 0 and done.completion_tokens > 0 and done.requests == 1
    body = server.requests[0]
    assert body["model"] == "scripted-model" and body["temperature"] == 0.0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_429_then_success_is_retried(server: ScriptedOpenAI) -> None:
    server.push(Reply(429, "slow down"), Reply(503, "busy"), "ok")
    slept: list[float] = []
    model = _model(server, sleep=slept.append)
    done = model.complete([{"role": "user", "content": "x"}])
    assert done.text == "ok" and done.requests == 3 and len(server.requests) == 3
    assert slept == [0.01, 0.02]


def test_retry_after_header_wins(server: ScriptedOpenAI) -> None:
    server.push(Reply(429, "slow down", {"retry-after-ms": "5"}), "ok")
    slept: list[float] = []
    _model(server, sleep=slept.append).complete([{"role": "user", "content": "x"}])
    assert slept == [0.005]


def test_retries_exhausted_is_model_error(server: ScriptedOpenAI) -> None:
    server.push(*[Reply(500, "boom")] * 3)
    with pytest.raises(ModelError, match=r"HTTP 500.*after 3 attempts.*boom"):
        _model(server, max_retries=2).complete([{"role": "user", "content": "x"}])
    assert len(server.requests) == 3


@pytest.mark.parametrize(("status", "pattern"), [
    (401, "refused the API key"), (403, "denied access"), (404, "does not know model"), (400, "refused the request"),
])
def test_refusals_are_not_retried(server: ScriptedOpenAI, status: int, pattern: str) -> None:
    server.push(Reply(status, "nope"))
    with pytest.raises(ModelError, match=pattern) as info:
        _model(server).complete([{"role": "user", "content": "x"}])
    assert info.value.exit_code == 1
    assert isinstance(info.value.__cause__, openai.APIStatusError)
    assert len(server.requests) == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_server_down_is_readable_model_error() -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    model = OpenAIModel("m", base_url=url, max_retries=1, backoff=0.0)
    with pytest.raises(ModelError, match="cannot reach the model server at http://127.0.0.1") as info:
        model.complete([{"role": "user", "content": "x"}])
    assert "after 2 attempts" in info.value.message
    assert isinstance(info.value.__cause__, openai.APIConnectionError)


def test_nothing_configured_names_the_variables() -> None:
    with pytest.raises(ConfigError) as info:
        make_client()
    text = str(info.value)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ATC_MODEL", "Ollama"):
        assert name in text
    assert info.value.exit_code == 2


def test_missing_model_name_is_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match="ATC_MODEL"):
        make_client()


def test_base_url_without_key_uses_placeholder(monkeypatch: pytest.MonkeyPatch, server: ScriptedOpenAI) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("ATC_MODEL", "local-model")
    server.push("hi")
    model = make_client()
    assert model.complete([{"role": "user", "content": "x"}]).text == "hi"
    assert server.requests[0]["model"] == "local-model"


def test_explicit_model_beats_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ATC_MODEL", "from-env")
    assert make_client("explicit").model == "explicit"


def _all_openai_errors() -> list[type[BaseException]]:
    found = {obj for name in dir(openai) if isinstance(obj := getattr(openai, name), type)
             and issubclass(obj, openai.OpenAIError)}
    return sorted(found, key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", _all_openai_errors(), ids=lambda c: c.__name__)
def test_every_openai_error_is_translated(cls: type[BaseException]) -> None:
    exc = cls.__new__(cls)
    Exception.__init__(exc, "server said no")
    request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    for attr, value in (("request", request), ("body", {"error": {"message": "server said no"}}),
                        ("status_code", 418), ("response", httpx.Response(418, request=request))):
        try:
            setattr(exc, attr, value)
        except AttributeError:
            pass
    translated = translate_error(exc, base_url="http://127.0.0.1:1/v1", model="m")
    assert isinstance(translated, AtcError) and not isinstance(translated, ConfigError)
    assert translated.exit_code == 1 and translated.message
    assert len(_all_openai_errors()) >= 15


def test_unrecognised_exception_still_model_error() -> None:
    assert isinstance(translate_error(RuntimeError("x")), ModelError)


def test_garbage_reply_is_model_error(server: ScriptedOpenAI) -> None:
    from atc.llm.client import _completion

    with pytest.raises(ModelError, match="without any choice"):
        _completion(type("R", (), {"choices": []})(), 1)
    assert Completion("x").requests == 1


def test_settings_never_show_the_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from atc.config import embed_settings, model_settings

    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    for settings in (model_settings("m"), embed_settings()):
        assert settings.api_key == "sk-very-secret"
        assert "sk-very-secret" not in repr(settings) and "***" in repr(settings)
