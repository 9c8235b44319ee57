"""The model client: one chat completion in, text and token usage out.

Upper layers (the solve loop, reflection) talk to a ``ModelClient``: anything with
``complete(messages) -> Completion``. Two real ones speak to OpenAI or any OpenAI-compatible
server: ``atc.llm.openai_http.HttpChatModel`` over httpx (the default of ``make_client``: it starts in
milliseconds) and ``OpenAIModel`` through the ``openai`` package (``ATC_MODEL_CLIENT=openai``).
Both target OpenAI or any OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio...), configured
after the OpenAI client's conventions (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``) plus ``ATC_MODEL``.

Retries are our own loop rather than the client's ``max_retries`` so that we know how many HTTP
requests the server saw (``Completion.requests``, summed into ``usage.llm_calls``) and so tests can
make the backoff short. Every foreign exception is translated here into ``ModelError`` (the server
is unreachable, refuses, or answers garbage) or ``ConfigError`` (nothing is configured); see
``translate_error``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from atc.config import ModelSettings, model_settings
from atc.errors import AtcError, ConfigError, ModelError
from atc.llm.chat import (
    CONFIG_HINT,
    PLACEHOLDER_KEY,
    Completion,
    Message,
    ModelClient,
    chat_request,
    tool_calls_of,
)
from atc.llm.openai_http import HttpChatModel

# The message types live in atc.llm.chat (below both clients); they are re-exported here, where
# callers have always found them.
__all__ = ["OpenAIModel", "make_client", "configured_settings", "translate_error", "CLIENTS"]

# HTTP statuses worth another try, as the OpenAI client itself treats them.
_RETRY_STATUSES = frozenset({408, 409, 429})
_MAX_DELAY = 30.0


class OpenAIModel:
    """A chat model behind the OpenAI API (or any server that speaks it).

    ``backoff`` is the first retry delay in seconds (doubled per retry, capped at 30 s; a server's
    ``Retry-After`` wins when it is shorter than the cap). ``max_retries`` counts retries after
    the first request: 429, 408, 409, 5xx and connection errors are retried, anything else is not.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        temperature: float = 0.0,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_tokens: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not model:
            raise ConfigError("no model name is configured", hint=CONFIG_HINT)
        if not api_key and not base_url:
            raise ConfigError("no model server is configured (OPENAI_API_KEY / OPENAI_BASE_URL)", hint=CONFIG_HINT)
        # openai: about 1 s to import (its pydantic types); only ATC_MODEL_CLIENT=openai needs it
        import openai

        self.model = model
        self.base_url = base_url
        self.temperature = temperature
        self.max_retries = max(0, max_retries)
        self.backoff = max(0.0, backoff)
        self.max_tokens = max_tokens
        self._sleep = sleep
        self._client = openai.OpenAI(
            api_key=api_key or PLACEHOLDER_KEY, base_url=base_url, timeout=timeout, max_retries=0
        )

    @classmethod
    def from_settings(
        cls, model: str | None = None, *, base_url: str | None = None, temperature: float | None = None, **kw: Any
    ) -> OpenAIModel:
        """Build the client from explicit values, else the environment (``atc.config.model_settings``)."""
        settings = configured_settings(model, base_url=base_url, temperature=temperature)
        kw.setdefault("timeout", settings.timeout)
        kw.setdefault("max_retries", settings.max_retries)
        assert settings.model is not None
        return cls(settings.model, api_key=settings.api_key, base_url=settings.base_url,
                   temperature=settings.temperature, **kw)

    def complete(self, messages: Sequence[Message], *, tools: Sequence[dict[str, Any]] | None = None,
                 tool_choice: Any = None) -> Completion:
        """One chat completion, retried on transient failures; raises ``ModelError`` otherwise."""
        # openai: about 1 s to import (its pydantic types); only ATC_MODEL_CLIENT=openai needs it
        import openai

        body = chat_request(self.model, messages, temperature=self.temperature, max_tokens=self.max_tokens,
                            tools=tools, tool_choice=tool_choice)
        requests = 0
        while True:
            requests += 1
            try:
                response = self._client.chat.completions.create(**body)
            except openai.OpenAIError as exc:
                if requests <= self.max_retries and _retryable(exc):
                    self._sleep(self._delay(requests, exc))
                    continue
                raise translate_error(exc, base_url=self.base_url, model=self.model, requests=requests) from exc
            return _completion(response, requests)

    def _delay(self, attempt: int, exc: BaseException) -> float:
        delay = min(_MAX_DELAY, self.backoff * 2 ** (attempt - 1))
        after = _retry_after(exc)
        return min(after, _MAX_DELAY) if after is not None else delay

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        return f"OpenAIModel(model={self.model!r}, base_url={self.base_url!r})"


def configured_settings(model: str | None = None, *, base_url: str | None = None,
                        temperature: float | None = None) -> ModelSettings:
    """The model settings from explicit values, else the environment; ``ConfigError`` when no
    model server or no model name is configured. Cheap (nothing imported, nothing contacted), so
    that a missing configuration is reported before anything slow starts."""
    settings = model_settings(model, temperature=temperature)
    settings = settings._replace(base_url=base_url or settings.base_url)
    if not settings.api_key and not settings.base_url:
        raise ConfigError(
            "no model is configured: set OPENAI_API_KEY or OPENAI_BASE_URL, and ATC_MODEL",
            hint=CONFIG_HINT,
        )
    if not settings.model:
        raise ConfigError("no model name is configured: set ATC_MODEL or pass --model", hint=CONFIG_HINT)
    return settings


#: The model clients by name (``ATC_MODEL_CLIENT``, ``make_client(client=...)``).
CLIENTS = ("http", "openai")


def make_client(model: str | None = None, *, client: str | None = None, base_url: str | None = None,
                temperature: float | None = None, **kw: Any) -> ModelClient:
    """The real client from explicit values, else the environment; ``ConfigError`` when nothing
    is configured. ``client``: ``http`` (default: atc's lean HTTP client, ``atc.llm.openai_http``)
    or ``openai`` (the ``openai`` package), else ``ATC_MODEL_CLIENT``."""
    settings = configured_settings(model, base_url=base_url, temperature=temperature)
    kind = (client or settings.client).strip().lower()
    if kind not in CLIENTS:
        raise ConfigError(f"unknown model client {kind!r}", hint=f"ATC_MODEL_CLIENT is one of: {', '.join(CLIENTS)}")
    if kind == "openai":
        return OpenAIModel.from_settings(model, base_url=base_url, temperature=temperature, **kw)
    kw.setdefault("timeout", settings.timeout)
    kw.setdefault("max_retries", settings.max_retries)
    assert settings.model is not None
    return HttpChatModel(settings.model, api_key=settings.api_key, base_url=settings.base_url,
                         temperature=settings.temperature, **kw)


def _completion(response: Any, requests: int) -> Completion:
    """Text and usage of a chat completion; a reply without a message is garbage (``ModelError``)."""
    choices = getattr(response, "choices", None)
    if not choices:
        raise ModelError("the model server answered without any choice", hint="check that the server speaks the OpenAI chat API")
    message = getattr(choices[0], "message", None)
    text = getattr(message, "content", None) if message is not None else None
    usage = getattr(response, "usage", None)
    return Completion(
        text=text if isinstance(text, str) else "",
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        requests=requests,
        tool_calls=tool_calls_of(getattr(message, "tool_calls", None) if message is not None else None),
    )


def _retryable(exc: BaseException) -> bool:
    # openai: about 1 s to import (its pydantic types); only ATC_MODEL_CLIENT=openai needs it
    import openai

    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _RETRY_STATUSES or exc.status_code >= 500
    return False


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                return None
    return None


def _server_text(exc: BaseException) -> str:
    """The server's own error text, short: ``body.error.message`` or ``body.message`` or the body."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            body = err.get("message") or err
        else:
            body = err
    text = str(body if body is not None else exc)
    text = " ".join(text.split())
    return text[:300]


def translate_error(
    exc: BaseException, *, base_url: str | None = None, model: str | None = None, requests: int = 1
) -> AtcError:
    """Map an ``openai`` exception to ``ModelError`` (or ``ConfigError``); every subclass of
    ``openai.OpenAIError`` lands in one branch (a test walks them all)."""
    # openai: about 1 s to import (its pydantic types); only ATC_MODEL_CLIENT=openai needs it
    import openai

    where = base_url or "the OpenAI API"
    tries = f" after {requests} attempts" if requests > 1 else ""
    if isinstance(exc, openai.APITimeoutError):
        return ModelError(f"the model server at {where} did not answer in time{tries}",
                          hint="check that it is running, or raise the timeout")
    if isinstance(exc, openai.APIConnectionError):
        return ModelError(f"cannot reach the model server at {where}{tries}",
                          hint="check that it is running and OPENAI_BASE_URL points to it (e.g. http://localhost:11434/v1)")
    if isinstance(exc, openai.AuthenticationError):
        return ModelError(f"the model server at {where} refused the API key (HTTP 401): {_server_text(exc)}",
                          hint="check OPENAI_API_KEY")
    if isinstance(exc, openai.PermissionDeniedError):
        return ModelError(f"the model server at {where} denied access (HTTP 403): {_server_text(exc)}",
                          hint="check OPENAI_API_KEY and that the key may use this model")
    if isinstance(exc, openai.NotFoundError):
        return ModelError(f"the model server at {where} does not know model {model!r} (HTTP 404): {_server_text(exc)}",
                          hint="check ATC_MODEL / --model and OPENAI_BASE_URL (it usually ends in /v1)")
    if isinstance(exc, openai.RateLimitError):
        return ModelError(f"the model server at {where} is rate limiting (HTTP 429){tries}: {_server_text(exc)}",
                          hint="wait and retry, or lower the concurrency")
    if isinstance(exc, openai.APIStatusError):
        return ModelError(f"the model server at {where} refused the request (HTTP {exc.status_code}){tries}: "
                          f"{_server_text(exc)}")
    if isinstance(exc, openai.APIResponseValidationError):
        return ModelError(f"the model server at {where} answered something that is not a chat completion",
                          hint="check that the server speaks the OpenAI chat API")
    if isinstance(exc, openai.APIError):
        return ModelError(f"the model server at {where} failed: {_server_text(exc)}")
    if isinstance(exc, openai.OpenAIError):
        # Raised by the client itself: missing key, finish-reason errors, bad local setup.
        return ModelError(f"the OpenAI client failed: {' '.join(str(exc).split())[:300]}", hint=CONFIG_HINT)
    return ModelError(f"model call failed: {type(exc).__name__}: {exc}")
