"""Function calling through both real model clients (atc's HTTP client and the ``openai``
package) against the scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from atc.llm.chat import Completion, ModelClient, ToolCallRequest
from atc.llm.client import OpenAIModel
from atc.llm.openai_http import HttpChatModel
from tests.support.fakes.openai_server import Reply, ScriptedOpenAI, call

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.fixture()
def server() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as s:
        yield s


@pytest.fixture(params=["http", "openai"])
def client(request: pytest.FixtureRequest, server: ScriptedOpenAI) -> ModelClient:
    if request.param == "http":
        return HttpChatModel("scripted", base_url=server.base_url, backoff=0.01)
    return OpenAIModel("scripted", base_url=server.base_url, backoff=0.01)


def test_tool_calls_come_back_with_raw_arguments(server: ScriptedOpenAI, client: ModelClient) -> None:
    server.push(Reply(text="checking", tool_calls=(call("get_weather", {"city": "Oslo"}, id="c1"),
                                                    call("get_weather", '{"city": "Rome"', id="c2"))))
    done = client.complete([{"role": "user", "content": "weather?"}], tools=[WEATHER], tool_choice="auto")
    assert done.tool_calls == (ToolCallRequest("c1", "get_weather", '{"city": "Oslo"}'),
                               ToolCallRequest("c2", "get_weather", '{"city": "Rome"'))  # malformed kept verbatim
    assert done.text == "checking"
    assert done.completion_tokens > 0 and done.prompt_tokens > 0 and done.requests == 1
    body = server.requests[0]
    assert server.offered(0) == ["get_weather"]
    assert body["tool_choice"] == "auto"


def test_conversation_with_tool_results_goes_over_the_wire(server: ScriptedOpenAI, client: ModelClient) -> None:
    server.push(Reply(tool_calls=(call("get_weather", {"city": "Oslo"}, id="c9"),)), "It is 3 degrees in Oslo.")
    messages = [{"role": "user", "content": "weather in Oslo?"}]
    first = client.complete(messages, tools=[WEATHER])
    assert first.text == "" and first.tool_calls[0].name == "get_weather"
    messages.append(first.assistant_message())
    messages.append({"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": json.dumps({"temp": 3})})
    second = client.complete(messages, tools=[WEATHER])
    assert second.text == "It is 3 degrees in Oslo." and second.tool_calls == ()
    sent = server.requests[1]["messages"]
    assert sent[1]["role"] == "assistant"
    assert sent[1]["tool_calls"][0]["id"] == "c9"
    assert sent[1]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    assert sent[2] == {"role": "tool", "tool_call_id": "c9", "content": '{"temp": 3}'}


def test_plain_calls_are_unchanged(server: ScriptedOpenAI, client: ModelClient) -> None:
    server.push("hello")
    done = client.complete([{"role": "user", "content": "hi"}])
    assert done == Completion("hello", done.prompt_tokens, done.completion_tokens, 1, ())
    assert "tools" not in server.requests[0] and "tool_choice" not in server.requests[0]
    assert server.requests[0]["messages"] == [{"role": "user", "content": "hi"}]


def test_arguments_sent_as_an_object_become_json_text(server: ScriptedOpenAI) -> None:
    # Some servers (Ollama among them) send arguments as an object, and some omit the id.
    raw = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
    server.push(Reply(tool_calls=(raw,)))
    done = HttpChatModel("scripted", base_url=server.base_url).complete([{"role": "user", "content": "x"}],
                                                                        tools=[WEATHER])
    assert done.tool_calls == (ToolCallRequest("call_0", "get_weather", '{"city": "Oslo"}'),)


def test_retries_count_requests_with_tools(server: ScriptedOpenAI, client: ModelClient) -> None:
    server.push(Reply(503, "busy"), Reply(tool_calls=(call("get_weather", {"city": "Oslo"}),)))
    done = client.complete([{"role": "user", "content": "x"}], tools=[WEATHER])
    assert done.requests == 2 and len(server.requests) == 2
    assert server.offered(1) == ["get_weather"]
