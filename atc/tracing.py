"""OpenTelemetry spans, when OpenTelemetry is there and wanted; otherwise nothing at all.

The spans nest as a user reads a run: ``atc.solve`` -> ``atc.attempt`` (``chain``) or
``atc.step`` (a turn or node of the other strategies) -> ``chat MODEL`` (one completion) and
``atc.sandbox.run`` (one program or snippet) -> ``execute_tool TOOL`` (one call), under
``atc.task`` in a batch. Attributes are the ones people filter on: ``atc.tool``, ``atc.status``
(ok / failed / the HTTP status), ``atc.duration_ms``, ``atc.prompt_tokens`` /
``atc.completion_tokens``, ``atc.attributed_tool`` (the tool a failure is traced to),
``atc.error.type``.

Beside them, the spans speak OpenTelemetry's GenAI semantic conventions, which observability
tools with GenAI views (Phoenix, Langfuse, any OTel backend) read: a model call is named
``chat {model}`` with ``gen_ai.operation.name`` ``chat``, ``gen_ai.provider.name`` (and the older
``gen_ai.system``) ``openai`` (atc speaks the OpenAI API to every server), ``gen_ai.request.model``,
``gen_ai.usage.input_tokens`` and ``gen_ai.usage.output_tokens``; a tool call is named
``execute_tool {tool}`` with ``gen_ai.operation.name`` ``execute_tool``, ``gen_ai.tool.name``,
``gen_ai.tool.type`` (``function`` for a Python function of the process, ``extension`` for an
API or an MCP server's tool) and ``gen_ai.tool.description``; the solve carries
``gen_ai.operation.name`` ``invoke_agent``, ``gen_ai.agent.name`` ``atc``, the model and the
tokens of the whole solve.

Tracing is on when the application has imported ``opentelemetry.trace`` (it set up a tracer
provider: atc adds its spans to that), or when the command line was asked to with ``ATC_TRACE``
(``console`` or ``otlp``; ``atc.cli`` calls ``configure``). Otherwise every function here is a
cheap no-op and OpenTelemetry is never imported: the command line pays nothing for it. Install
with ``pip install 'atc[otel]'``.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from atc.errors import ConfigError

if TYPE_CHECKING:
    from sandbox.api import Toolset
    from sandbox.gateway.http.transport import Reply
    from sandbox.gateway.taps import Exchange

__all__ = ["enabled", "span", "model_span", "model_usage", "set_attributes", "wrap_toolset", "configure",
           "ToolSpans", "INSTALL", "PROVIDER"]

INSTALL = "pip install 'atc[otel]'  (opentelemetry-api and opentelemetry-sdk)"
_TRACER_NAME = "atc"
#: ``gen_ai.provider.name`` of atc's model calls: every server is spoken to in the OpenAI API.
PROVIDER = "openai"


def enabled() -> bool:
    """Is anyone listening? (``opentelemetry.trace`` imported by the application or by ``configure``)."""
    return "opentelemetry.trace" in sys.modules


@contextlib.contextmanager
def span(name: str, attributes: dict[str, Any] | None = None) -> Iterator[Any]:
    """A span as the current one (None when tracing is off). An exception passing through marks
    it failed and is re-raised."""
    if not enabled():
        yield None
        return
    # OpenTelemetry: optional (atc[otel]); imported only when tracing is asked for
    from opentelemetry import trace

    tracer = trace.get_tracer(_TRACER_NAME)
    with tracer.start_as_current_span(name, attributes=_clean(attributes or {})) as current:
        yield current


def set_attributes(current: Any, attributes: dict[str, Any]) -> None:
    if current is not None:
        current.set_attributes(_clean(attributes))


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    """OpenTelemetry takes str, bool, int, float (and lists of them); None is left out."""
    return {k: v if isinstance(v, (str, bool, int, float)) else str(v) for k, v in attributes.items() if v is not None}


@contextlib.contextmanager
def model_span(model: str | None) -> Iterator[Any]:
    """The span of one completion: ``chat {model}``, GenAI's name and attributes beside atc's."""
    if not enabled():
        yield None
        return
    with span(f"chat {model}" if model else "chat", {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": PROVIDER, "gen_ai.system": PROVIDER,
            "gen_ai.request.model": model or None, "atc.llm.client": model or None}) as current:
        yield current


def model_usage(current: Any, prompt_tokens: int, completion_tokens: int) -> None:
    """A completion's tokens on its span, in both vocabularies."""
    set_attributes(current, {"atc.prompt_tokens": prompt_tokens, "atc.completion_tokens": completion_tokens,
                             "gen_ai.usage.input_tokens": prompt_tokens,
                             "gen_ai.usage.output_tokens": completion_tokens})


class ToolSpans:
    """A ``sandbox.gateway.taps.Tap``: one ``execute_tool {tool}`` span per call that reaches a transport."""

    def exchange(self, call: Exchange) -> Reply:
        # lazy: sandbox.gateway.http.transport imports httpx (about 40 ms): only a run that calls tools needs it
        from sandbox.gateway.http.transport import SendFailure

        started = time.perf_counter()
        tool = call.tool
        method = tool.method.upper()
        http = method not in ("MCP", "PYTHON")
        with span(f"execute_tool {tool.name}", {
                "atc.tool": tool.name, "http.request.method": method if http else None,
                "url.template": tool.path if http else None, "atc.method": method,
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool.name,
                "gen_ai.tool.type": "function" if method == "PYTHON" else "extension",
                "gen_ai.tool.description": tool.summary or None}) as current:
            try:
                reply = call.send()
            except SendFailure as exc:
                set_attributes(current, {"atc.status": "failed", "atc.failure": exc.failure,
                                         "atc.duration_ms": (time.perf_counter() - started) * 1000})
                raise
            # An MCP reply has no HTTP status: it failed by raising, so an answer is a success.
            ok = reply.status is None or 200 <= reply.status < 300
            set_attributes(current, {"atc.status": "ok" if ok else "failed",
                                     "http.response.status_code": reply.status,
                                     "atc.duration_ms": (time.perf_counter() - started) * 1000})
            return reply


def wrap_toolset(toolset: Toolset) -> Toolset:
    """``toolset`` with a ``ToolSpans`` tap when tracing is on (outermost, so that replayed calls
    get their spans too); the same toolset otherwise, or when it has one already."""
    if not enabled() or any(isinstance(t, ToolSpans) for t in toolset.taps):
        return toolset
    import dataclasses

    return dataclasses.replace(toolset, taps=(ToolSpans(), *toolset.taps))


def configure(exporter: str) -> None:
    """Set up a tracer provider for the command line (``ATC_TRACE``): ``console`` prints finished
    spans as JSON on stderr; ``otlp`` sends them with the OTLP exporter (its own
    ``OTEL_EXPORTER_OTLP_*`` settings). ``ConfigError`` with the install command when missing."""
    try:
        # OpenTelemetry: optional (atc[otel]); imported only when tracing is asked for
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )
    except ImportError as exc:
        raise ConfigError("ATC_TRACE is set but OpenTelemetry is not installed", hint=INSTALL) from exc
    provider = TracerProvider(resource=Resource.create({"service.name": "atc"}))
    if exporter == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
    elif exporter == "otlp":
        try:
            # OpenTelemetry: optional (atc[otel]); imported only when tracing is asked for
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise ConfigError("ATC_TRACE=otlp needs the OTLP exporter",
                              hint="pip install opentelemetry-exporter-otlp-proto-http") from exc
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        raise ConfigError(f"unknown ATC_TRACE value {exporter!r}", hint="use console or otlp")
    trace.set_tracer_provider(provider)
    import atexit

    atexit.register(provider.shutdown)
