"""What a chat completion is: messages, the tool calls a model asks for, a ``Completion``, the
request body, and the ``ModelClient`` seam.

Both real clients (``atc.llm.openai_http.HttpChatModel`` over httpx, ``atc.llm.client.OpenAIModel`` through
the ``openai`` package) and every fake build on these, so they sit below both: the client modules
import this one, never each other's internals. ``atc.llm.client`` re-exports every name here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["Message", "Completion", "ToolCallRequest", "ModelClient", "wire_messages", "chat_request",
           "tool_calls_of", "CONFIG_HINT", "PLACEHOLDER_KEY"]


#: One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``; with function
#: calling also an assistant message carrying ``tool_calls`` (``ToolCallRequest.to_dict()`` items)
#: and ``{"role": "tool", "tool_call_id": ..., "content": str}`` answers.
Message = dict[str, Any]

#: Sent as the API key to servers that need none (local OpenAI-compatible servers).
PLACEHOLDER_KEY = "not-needed"

CONFIG_HINT = (
    "set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL for any OpenAI-compatible server "
    "(Ollama: http://localhost:11434/v1, vLLM, llama.cpp, LM Studio), and ATC_MODEL (or --model) "
    "for the model name"
)


@dataclass(frozen=True)
class ToolCallRequest:
    """A function call the model asked for. ``arguments`` is the raw JSON text the model wrote:
    parsing it (and saying so when it is malformed) is the caller's job, since a model's broken
    JSON is feedback for the model, not an error of the client."""

    id: str
    name: str
    arguments: str = "{}"

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI wire form, as an item of an assistant message's ``tool_calls``."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class Completion:
    """What one completion produced. ``requests`` counts the HTTP requests it took (retries
    included), so that ``usage.llm_calls`` equals what the server saw. ``tool_calls`` are the
    function calls the model asked for (only when it was offered ``tools``)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 1
    tool_calls: tuple[ToolCallRequest, ...] = ()

    def assistant_message(self) -> Message:
        """This reply as the assistant turn of a conversation (with its tool calls, if any)."""
        msg: Message = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        return msg


@runtime_checkable
class ModelClient(Protocol):
    """The seam between atc and a language model. ``model`` names it (for reports).

    ``tools`` offers functions in the OpenAI form (``{"type": "function", "function": {"name",
    "description", "parameters"}}``) and ``tool_choice`` is passed through as the API defines it
    ("auto", "none", "required" or a named function). Both are keyword-only so that wrappers can
    forward ``**kwargs``; callers that use no functions call ``complete(messages)`` as before."""

    model: str

    def complete(self, messages: Sequence[Message], *, tools: Sequence[dict[str, Any]] | None = None,
                 tool_choice: Any = None) -> Completion: ...


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as the chat API takes them: role and content, plus the function-calling keys
    (``tool_calls``, ``tool_call_id``, ``name``) when present; nothing else leaks onto the wire."""
    out: list[dict[str, Any]] = []
    for m in messages:
        msg: dict[str, Any] = {"role": m["role"], "content": m.get("content")}
        for key in ("tool_calls", "tool_call_id", "name"):
            if m.get(key):
                msg[key] = m[key]
        out.append(msg)
    return out


def chat_request(model: str, messages: Sequence[Message], *, temperature: float, max_tokens: int | None,
                 tools: Sequence[dict[str, Any]] | None, tool_choice: Any) -> dict[str, Any]:
    """The body of one chat completion request (shared by both clients)."""
    req: dict[str, Any] = {"model": model, "messages": wire_messages(messages), "temperature": temperature}
    if max_tokens:
        req["max_tokens"] = max_tokens
    if tools:
        req["tools"] = list(tools)
        if tool_choice is not None:
            req["tool_choice"] = tool_choice
    return req


def tool_calls_of(raw: Any) -> tuple[ToolCallRequest, ...]:
    """The tool calls of an answer's message, from JSON dicts or the ``openai`` package's objects.
    Arguments some servers send as an object (not a string) are turned back into JSON text; a
    call without an id gets one, so that the answer can still be paired with it."""
    if not isinstance(raw, (list, tuple)):
        return ()
    out: list[ToolCallRequest] = []
    for i, item in enumerate(raw):
        get = item.get if isinstance(item, dict) else (lambda key, _o=item: getattr(_o, key, None))
        function = get("function")
        fget = function.get if isinstance(function, dict) else (lambda key, _o=function: getattr(_o, key, None))
        name = fget("name") if function is not None else None
        if not isinstance(name, str) or not name:
            continue
        args = fget("arguments")
        if not isinstance(args, str):
            args = json.dumps(args) if args is not None else "{}"
        call_id = get("id")
        out.append(ToolCallRequest(id=call_id if isinstance(call_id, str) and call_id else f"call_{i}",
                                   name=name, arguments=args))
    return tuple(out)
