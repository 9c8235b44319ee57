"""Record and replay: a run's tool answers and model completions kept under a directory, and a
later run answered from them with no network and no model.

``--record DIR`` wraps the run's tools with ``ToolRecorder`` (a ``sandbox.gateway.taps.Tap``: it records
each reply AFTER the gateway's redaction, so no secret is ever stored) and its model client with
``RecordingModel``. ``--replay DIR`` swaps both for ``ToolReplayer`` and ``ReplayModel``: a
request that was recorded gets its recorded answer (repeated requests in recorded order); one
that was not is a ``ToolError`` (failure ``unrecorded``) or a ``ModelError`` naming what was
missing, and is counted (``Recording.missing``).

Keys (``atc.workflows.tape``): a tool call is ``{"tool", "args", "extra_query"}``; a model request
is ``{"model", "temperature", "messages", "options"}`` where ``options`` are any keyword arguments
of ``complete`` (tools offered for function calling, tool_choice...).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from atc.errors import ModelError, UsageError
from atc.llm.chat import Completion, Message, ModelClient, tool_calls_of
from atc.llm.client import make_client
from atc.workflows.tape import MODEL_FILE, TOOLS_FILE, TapeFile, canonical, key_of

if TYPE_CHECKING:
    from sandbox.api import Toolset
    from sandbox.gateway.http.transport import Reply
    from sandbox.gateway.taps import Exchange

#: The replay misses of the task running in this context (a batch counts them per task).
MISSES: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("atc_replay_misses", default=None)

#: Result fields that differ between two runs of the same work, a replay included: timings, and
#: the sandbox's per-run isolation details (the run's own uid). ``stable`` leaves them out.
VOLATILE = frozenset({"duration_ms", "wall_ms", "isolation"})

__all__ = ["VOLATILE", "stable", "MISSES", "Recording", "ToolRecorder", "ToolReplayer", "RecordingModel", "ReplayModel", "open_recording"]


def stable(value: Any) -> Any:
    """``value`` (a result line, a summary) without its ``VOLATILE`` fields, at any depth: what a
    replay reproduces exactly."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


@dataclass
class Recording:
    """A recording directory opened to ``record`` into or to ``replay`` from."""

    directory: Path
    mode: str  # "record" | "replay"
    tools: TapeFile = field(init=False)
    model: TapeFile = field(init=False)
    missing: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tools = TapeFile(self.directory / TOOLS_FILE)
        self.model = TapeFile(self.directory / MODEL_FILE)
        self._lock = threading.Lock()

    def miss(self, what: str) -> None:
        with self._lock:
            self.missing.append(what)
        mine = MISSES.get()
        if mine is not None:
            mine.append(what)

    def tap(self) -> ToolRecorder | ToolReplayer:
        return ToolRecorder(self) if self.mode == "record" else ToolReplayer(self)

    def wrap_toolset(self, toolset: Toolset) -> Toolset:
        """``toolset`` with this recording's tap outermost (the other taps still run on record)."""
        import dataclasses

        return dataclasses.replace(toolset, taps=(self.tap(), *toolset.taps))

    def wrap_client(self, client: ModelClient | None, model: str | None = None) -> ModelClient:
        """The model side: ``client`` (else the configured one) recorded, or a replayer that needs
        no client and no configuration at all."""
        if self.mode == "replay":
            return ReplayModel(self, model=model)
        if client is None:
            client = make_client(model)
        return RecordingModel(client, self)


def open_recording(record: str | Path | None = None, replay: str | Path | None = None) -> Recording | None:
    """The recording of ``--record DIR`` or ``--replay DIR`` (at most one), or None."""
    if record and replay:
        raise UsageError("give --record or --replay, not both")
    if record:
        path = Path(record).expanduser()
        if path.exists() and not path.is_dir():
            raise UsageError(f"--record {record}: not a directory")
        path.mkdir(parents=True, exist_ok=True)
        return Recording(path, "record")
    if replay:
        path = Path(replay).expanduser()
        if not (path / TOOLS_FILE).exists() and not (path / MODEL_FILE).exists():
            raise UsageError(f"--replay {replay}: no recording there ({TOOLS_FILE} or {MODEL_FILE})",
                             hint="record one first with --record DIR")
        return Recording(path, "replay")
    return None


# -- tools ------------------------------------------------------------------------------------


def _tool_request(call: Exchange) -> dict[str, Any]:
    return {"tool": call.tool.name, "args": call.args, "extra_query": call.extra_query}


class ToolRecorder:
    """Sends each call and records its (redacted) reply, or its failure to get one."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording

    def exchange(self, call: Exchange) -> Reply:
        # lazy: sandbox.gateway.http.transport imports httpx (about 40 ms): only a run that calls tools needs it
        from sandbox.gateway.http.transport import SendFailure

        request = _tool_request(call)
        key = key_of(request)
        try:
            reply = call.send()
        except SendFailure as exc:
            self.recording.tools.append(key, request, {"failure": {
                "message": call.redact_text(exc.message), "failure": exc.failure, "status": exc.status,
                "redirects": [{k: call.redact_text(v) if isinstance(v, str) else v for k, v in h.items()}
                              for h in exc.redirects]}})
            raise
        clean = call.redact(reply)
        self.recording.tools.append(key, request, {"status": clean.status, "headers": clean.headers,
                                                   "data": clean.data, "redirects": clean.redirects,
                                                   "redacted": clean.redacted})
        return reply


class ToolReplayer:
    """Answers each call from the recording; never sends anything."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording

    def exchange(self, call: Exchange) -> Reply:
        # lazy: sandbox.gateway.http.transport imports httpx (about 40 ms): only a run that calls tools needs it
        from sandbox.gateway.http.transport import Reply, SendFailure

        request = _tool_request(call)
        key = key_of(request)
        entry, count = self.recording.tools.take(key)
        if entry is None:
            what = f"{call.tool.name}({_short(call.args)})"
            self.recording.miss(f"tool call {what}")
            seen = f" (recorded {count} time{'s' if count != 1 else ''}, asked once more)" if count else ""
            raise SendFailure(f"{call.tool.name}: no recorded answer for {what} in {self.recording.directory}{seen}",
                              tool=call.tool.name, failure="unrecorded",
                              hint="record this run again with --record DIR")
        response = entry["response"]
        failure = response.get("failure")
        if isinstance(failure, dict):
            raise SendFailure(str(failure.get("message")), tool=call.tool.name,
                              failure=str(failure.get("failure") or "request"), status=failure.get("status"),
                              redirects=list(failure.get("redirects") or []))
        status = response.get("status")
        redacted = response.get("redacted")
        return Reply(status=status if isinstance(status, int) else None, headers=dict(response.get("headers") or {}),
                     data=response.get("data"), raw=b"", redirects=list(response.get("redirects") or []),
                     redacted=redacted if isinstance(redacted, int) else 0)


def _short(args: dict[str, Any]) -> str:
    text = canonical(args)[1:-1]
    return text if len(text) <= 120 else text[:117] + "..."


# -- the model ----------------------------------------------------------------------------------


def _model_request(model: str | None, temperature: Any, messages: Sequence[Message],
                   options: dict[str, Any]) -> dict[str, Any]:
    return {"model": model, "temperature": temperature, "messages": [dict(m) for m in messages],
            "options": options}


def _completion_dict(c: Completion) -> dict[str, Any]:
    d: dict[str, Any] = {"text": c.text, "prompt_tokens": c.prompt_tokens,
                         "completion_tokens": c.completion_tokens, "requests": c.requests}
    extra = getattr(c, "tool_calls", None)  # function calling: kept in the wire form, read back below
    if extra:
        d["tool_calls"] = [t.to_dict() if hasattr(t, "to_dict") else t for t in extra]
    return d


def _completion_from(d: dict[str, Any]) -> Completion:
    kw: dict[str, Any] = {"text": str(d.get("text") or ""), "prompt_tokens": int(d.get("prompt_tokens") or 0),
                          "completion_tokens": int(d.get("completion_tokens") or 0),
                          "requests": int(d.get("requests") or 1)}
    if d.get("tool_calls"):
        kw["tool_calls"] = tool_calls_of(d["tool_calls"])
    return Completion(**kw)


class RecordingModel:
    """A ``ModelClient`` that asks ``inner`` and records each completion under its request."""

    def __init__(self, inner: ModelClient, recording: Recording) -> None:
        self.inner = inner
        self.recording = recording
        self.model = inner.model
        self.temperature = getattr(inner, "temperature", None)

    def complete(self, messages: Sequence[Message], **kw: Any) -> Completion:
        completion = cast(Any, self.inner).complete(messages, **kw) if kw else self.inner.complete(messages)
        request = _model_request(self.model, self.temperature, messages, kw)
        self.recording.model.append(key_of(request), request, _completion_dict(completion))
        return completion

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()


class ReplayModel:
    """A ``ModelClient`` answered from a recording: no server, no configuration. The model name
    and temperature are the recording's (the one pair it holds) unless ``model`` is given."""

    def __init__(self, recording: Recording, *, model: str | None = None) -> None:
        self.recording = recording
        pairs = {(e["request"].get("model"), e["request"].get("temperature"))
                 for e in recording.model.entries() if isinstance(e.get("request"), dict)}
        named = {p for p in pairs if model is None or p[0] == model}
        if len(named) > 1:
            models = sorted({str(p[0]) for p in named})
            raise UsageError(f"the recording in {recording.directory} holds answers of several models or "
                             f"temperatures ({', '.join(models)})", hint="pass --model (model=) to pick one")
        self.model: str = model or (next(iter(named))[0] if len(named) == 1 else "") or "replay"
        self.temperature = next(iter(named))[1] if len(named) == 1 else None

    def complete(self, messages: Sequence[Message], **kw: Any) -> Completion:
        request = _model_request(self.model, self.temperature, messages, kw)
        entry, count = self.recording.model.take(key_of(request))
        if entry is None:
            last = str(messages[-1].get("content", "")) if messages else ""
            what = " ".join(last.split())[:100]
            self.recording.miss(f"model request ending {what!r}")
            seen = f" (recorded {count} time{'s' if count != 1 else ''}, asked once more)" if count else ""
            raise ModelError(f"no recorded model answer in {self.recording.directory} for the request whose last "
                             f"message starts {what!r}{seen}",
                             hint="record this run again with --record DIR (same model, prompts and tools)")
        return _completion_from(entry["response"])
