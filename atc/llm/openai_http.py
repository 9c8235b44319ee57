"""A lean client of the OpenAI HTTP API: chat completions (and any other JSON endpoint) over httpx.

Why not only the ``openai`` package: importing it takes about a second (``openai.types`` alone is
0.8 s of pydantic models), which is most of what ``atc solve`` spends before its first request.
atc needs one request shape and its JSON answer, so the default client speaks HTTP itself with
httpx, which the gateway loads anyway. ``OpenAIModel`` (the ``openai`` package) stays available:
``ATC_MODEL_CLIENT=openai`` or ``make_client(..., client="openai")``.

The wire conventions are the OpenAI client's: ``POST {base_url}/chat/completions`` with
``Authorization: Bearer KEY`` (a placeholder when a local server needs none), the base URL
defaulting to OpenAI's own, retries on 408/409/429/5xx and connection errors with exponential
backoff unless the server's ``Retry-After`` says otherwise. Every failure becomes a ``ModelError``
worded like ``translate_error``'s.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from atc.errors import ConfigError, ModelError
from atc.llm.chat import CONFIG_HINT, PLACEHOLDER_KEY, Completion, Message, chat_request, tool_calls_of

if TYPE_CHECKING:
    import httpx

__all__ = ["HttpChatModel", "DEFAULT_BASE_URL", "post_json"]

#: Where requests go when only an API key is configured (the OpenAI client's default).
DEFAULT_BASE_URL = "https://api.openai.com/v1"
_RETRY_STATUSES = frozenset({408, 409, 429})
_MAX_DELAY = 30.0
#: Largest answer read from a model server (a chat completion is a few KB; this bounds a broken one).
MAX_ANSWER_BYTES = 64 * 1024 * 1024


class _Failure(Exception):
    """One failed request: ``kind`` is ``timeout``, ``connect``, ``status`` or ``garbage``."""

    def __init__(self, kind: str, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.status, self.retry_after = kind, message, status, retry_after

    @property
    def retryable(self) -> bool:
        if self.kind in ("timeout", "connect"):
            return True
        return self.kind == "status" and self.status is not None and (
            self.status in _RETRY_STATUSES or self.status >= 500)


def _retry_after(headers: Any) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                return None
    return None


def _server_text(body: bytes) -> str:
    """The server's own error text, short: ``error.message``, ``message`` or the body."""
    text = body.decode("utf-8", "replace")
    try:
        doc: Any = json.loads(text)
    except ValueError:
        doc = text
    if isinstance(doc, dict):
        err = doc.get("error", doc)
        doc = (err.get("message") or err) if isinstance(err, dict) else err
    return " ".join(str(doc).split())[:300]


def post_json(client: httpx.Client, url: str, payload: dict[str, Any], *, api_key: str, timeout: float) -> dict[str, Any]:
    """One POST of ``payload`` as JSON; the JSON object answered, or ``_Failure``."""
    # httpx: about 100 ms to import; only a request needs it
    import httpx

    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json", "Accept": "application/json"}
    try:
        with client.stream("POST", url, content=json.dumps(payload).encode(), headers=headers, timeout=timeout) as response:
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise _Failure("garbage", f"an answer larger than {MAX_ANSWER_BYTES} bytes")
                chunks.append(chunk)
            body = b"".join(chunks)
            status = response.status_code
            after = _retry_after(response.headers)
    except httpx.TimeoutException as exc:
        raise _Failure("timeout", str(exc)) from exc
    except httpx.HTTPError as exc:
        raise _Failure("connect", f"{type(exc).__name__}: {exc}") from exc
    if not 200 <= status < 300:
        raise _Failure("status", _server_text(body), status=status, retry_after=after)
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise _Failure("garbage", "the answer is not JSON") from exc
    if not isinstance(doc, dict):
        raise _Failure("garbage", "the answer is not a JSON object")
    return doc


class HttpChatModel:
    """A chat model behind the OpenAI API (or any server that speaks it), without the ``openai``
    package. Same settings and behaviour as ``OpenAIModel``: ``backoff`` is the first retry
    delay (doubled per retry, capped at 30 s; a shorter ``Retry-After`` wins), ``max_retries``
    counts retries after the first request."""

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
        base = (base_url or DEFAULT_BASE_URL).rstrip("/")
        if not base.lower().startswith(("http://", "https://")):
            raise ConfigError(f"the model server URL {base_url!r} is not an http(s) URL",
                              hint="e.g. OPENAI_BASE_URL=http://localhost:11434/v1")
        self.model = model
        self.base_url = base_url
        self.temperature = temperature
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.backoff = max(0.0, backoff)
        self.max_tokens = max_tokens
        self._base = base
        self._key = api_key or PLACEHOLDER_KEY
        self._sleep = sleep
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    @property
    def client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                # httpx: about 100 ms to import; only a request needs it
                import httpx

                # trust_env=False: the model server is what OPENAI_BASE_URL says, not a proxy's guess.
                self._client = httpx.Client(trust_env=False, follow_redirects=False,
                                            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16))
            return self._client

    def post(self, path: str, payload: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """POST ``payload`` to ``{base_url}/{path}``, retried on transient failures: the JSON
        answer and how many requests it took; ``ModelError`` otherwise."""
        requests = 0
        while True:
            requests += 1
            try:
                return post_json(self.client, f"{self._base}/{path.lstrip('/')}", payload,
                                 api_key=self._key, timeout=self.timeout), requests
            except _Failure as exc:
                if requests <= self.max_retries and exc.retryable:
                    delay = min(_MAX_DELAY, self.backoff * 2 ** (requests - 1))
                    self._sleep(min(exc.retry_after, _MAX_DELAY) if exc.retry_after is not None else delay)
                    continue
                raise self._error(exc, requests) from None

    def complete(self, messages: Sequence[Message], *, tools: Sequence[dict[str, Any]] | None = None,
                 tool_choice: Any = None) -> Completion:
        """One chat completion, retried on transient failures; raises ``ModelError`` otherwise.
        ``tools``/``tool_choice``: function calling, as in ``atc.llm.client.ModelClient``."""
        body = chat_request(self.model, messages, temperature=self.temperature, max_tokens=self.max_tokens,
                            tools=tools, tool_choice=tool_choice)
        doc, requests = self.post("chat/completions", body)
        choices = doc.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ModelError(f"the model server at {self._where} answered without any choice",
                             hint="check that the server speaks the OpenAI chat API")
        message = choices[0].get("message")
        text = message.get("content") if isinstance(message, dict) else None
        raw_usage = doc.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        return Completion(text=text if isinstance(text, str) else "",
                          prompt_tokens=_count(usage.get("prompt_tokens")),
                          completion_tokens=_count(usage.get("completion_tokens")), requests=requests,
                          tool_calls=tool_calls_of(message.get("tool_calls") if isinstance(message, dict) else None))

    @property
    def _where(self) -> str:
        return self.base_url or "the OpenAI API"

    def _error(self, exc: _Failure, requests: int) -> ModelError:
        where = self._where
        tries = f" after {requests} attempts" if requests > 1 else ""
        if exc.kind == "timeout":
            return ModelError(f"the model server at {where} did not answer in time{tries}",
                              hint="check that it is running, or raise the timeout")
        if exc.kind == "connect":
            return ModelError(f"cannot reach the model server at {where}{tries}",
                              hint="check that it is running and OPENAI_BASE_URL points to it (e.g. http://localhost:11434/v1)")
        if exc.kind == "garbage":
            return ModelError(f"the model server at {where} answered something that is not a chat completion "
                              f"({exc.message})", hint="check that the server speaks the OpenAI chat API")
        status, text = exc.status, exc.message
        if status == 401:
            return ModelError(f"the model server at {where} refused the API key (HTTP 401): {text}",
                              hint="check OPENAI_API_KEY")
        if status == 403:
            return ModelError(f"the model server at {where} denied access (HTTP 403): {text}",
                              hint="check OPENAI_API_KEY and that the key may use this model")
        if status == 404:
            return ModelError(f"the model server at {where} does not know model {self.model!r} (HTTP 404): {text}",
                              hint="check ATC_MODEL / --model and OPENAI_BASE_URL (it usually ends in /v1)")
        if status == 429:
            return ModelError(f"the model server at {where} is rate limiting (HTTP 429){tries}: {text}",
                              hint="wait and retry, or lower the concurrency")
        return ModelError(f"the model server at {where} refused the request (HTTP {status}){tries}: {text}")

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __repr__(self) -> str:
        return f"HttpChatModel(model={self.model!r}, base_url={self.base_url!r})"


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
