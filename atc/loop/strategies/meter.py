"""What a solve spends on the model, counted in one place, and the budget that bounds it.

Every model call of a strategy goes through the episode's ``Meter``: a ``ModelClient`` that asks
the real client, adds the completion to the solve's ``Usage`` (the model turns, one per completion
the strategy asked for; the HTTP requests the server saw, retries included; and the tokens it
reported) and, once the ``Budget`` is spent, refuses the next call with ``ModelBudget``. Turns
and requests are counted apart because a server that answers 429 and then 200 cost one turn of
the strategy's and two requests of the server's: an evaluation compares strategies by turns. Since every strategy reaches the model only through it, "model calls"
and "tokens" mean the same thing for all of them, and ``--max-model-calls`` / ``--max-tokens``
hold them to the same cost.

The budget is checked BEFORE a call: a call is made while the solve has spent fewer than
``model_calls`` requests and fewer than ``tokens`` tokens (prompt plus completion), so the last
call may take the token count past the budget (a server's answer cannot be cut short); the usage
always says what was really spent.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from atc import tracing
from atc.errors import ModelBudget, UsageError
from atc.llm.chat import Completion, Message, ModelClient

__all__ = ["Usage", "Budget", "Meter"]


@dataclass
class Usage:
    """Model usage of one solve: HTTP requests the model server saw (``llm_calls``, retries
    included), the tokens it reported, and the model turns (``model_turns``: completions the
    strategy asked for, each counted once however many requests it took)."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_turns: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, completion: Completion) -> None:
        self.llm_calls += completion.requests
        self.prompt_tokens += completion.prompt_tokens
        self.completion_tokens += completion.completion_tokens
        self.model_turns += 1

    def merge(self, counts: dict[str, int]) -> None:
        """Add a retriever's model usage (``SearchResult.usage``); a retriever that counts no
        turns of its own is taken to have made one per request."""
        self.llm_calls += counts.get("llm_calls", 0)
        self.prompt_tokens += counts.get("prompt_tokens", 0)
        self.completion_tokens += counts.get("completion_tokens", 0)
        self.model_turns += counts.get("model_turns", counts.get("llm_calls", 0))

    def to_dict(self) -> dict[str, int]:
        return {"llm_calls": self.llm_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "model_turns": self.model_turns}


@dataclass(frozen=True)
class Budget:
    """The most a solve may spend on the model (None: no bound). ``model_calls`` counts HTTP
    requests as ``usage.llm_calls`` does; ``tokens`` counts prompt plus completion tokens."""

    model_calls: int | None = None
    tokens: int | None = None

    def __post_init__(self) -> None:
        for flag, value in (("--max-model-calls", self.model_calls), ("--max-tokens", self.tokens)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise UsageError(f"{flag} must be a whole number of at least 1, not {value!r}")

    def spent(self, usage: Usage) -> str | None:
        """Why no further call is allowed (None: it is)."""
        if self.model_calls is not None and usage.llm_calls >= self.model_calls:
            return f"the model-call budget is spent ({usage.llm_calls} of {self.model_calls} calls)"
        if self.tokens is not None and usage.tokens >= self.tokens:
            return f"the token budget is spent ({usage.tokens} of {self.tokens} tokens)"
        return None

    def to_dict(self) -> dict[str, int | None]:
        return {"max_model_calls": self.model_calls, "max_tokens": self.tokens}


class Meter:
    """A ``ModelClient`` that counts every completion into ``usage`` and enforces ``budget``.

    ``tools`` and ``tool_choice`` are passed on only when given, so that a client that knows no
    function calling (an older plug-in, a test fake) still serves the strategies that use none.
    Each call is a ``chat {model}`` span carrying its tokens (``atc.tracing.model_span``). Thread-safe (a model-backed retriever
    may ask from several threads)."""

    def __init__(self, client: ModelClient, budget: Budget | None = None, usage: Usage | None = None) -> None:
        self.client = client
        self.model: str = str(getattr(client, "model", "") or "")
        self.budget = budget or Budget()
        self.usage = usage or Usage()
        self._lock = threading.Lock()

    def complete(self, messages: Sequence[Message], *, tools: Sequence[dict[str, Any]] | None = None,
                 tool_choice: Any = None) -> Completion:
        with self._lock:
            reason = self.budget.spent(self.usage)
            if reason is not None:
                raise ModelBudget(reason, spent=self.usage.to_dict(),
                                  hint="raise --max-model-calls / --max-tokens, or leave them out")
        with tracing.model_span(self.model or None) as current:
            if tools:
                completion: Completion = cast(Any, self.client).complete(messages, tools=tools,
                                                                         tool_choice=tool_choice)
            else:
                completion = self.client.complete(messages)
            tracing.model_usage(current, completion.prompt_tokens, completion.completion_tokens)
        with self._lock:
            self.usage.add(completion)
        return completion

    def charge(self, counts: dict[str, int]) -> None:
        """Count usage spent outside the meter (a model-backed retriever's, ``SearchResult.usage``)."""
        with self._lock:
            self.usage.merge(counts)
