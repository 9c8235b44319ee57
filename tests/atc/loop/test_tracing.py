"""OpenTelemetry spans of a solve, read back with the SDK's in-memory exporter: solve -> attempt ->
model call / sandbox run -> tool call, with the attributes a user filters on. Without OpenTelemetry
configured, nothing of it is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from atc.llm.client import OpenAIModel
from atc.loop.solving import solve
from protocols.loaders import load_data
from sandbox.api import Limits
from tests.support.apis.library import LibraryAPI
from tests.support.fakes.openai_server import ScriptedOpenAI

ROOT = Path(__file__).resolve().parents[3]
ATC = ROOT / ".venv" / "bin" / "atc"


def _exporter() -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the global provider can be set once per process
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def test_spans_of_a_solve_with_a_repair(api: LibraryAPI) -> None:
    exporter = _exporter()
    library = load_data(api.spec(), name="library")
    bad = "```python\nb = get_book(book_id=10)\nprint(b['titel'])\n```"
    good = "```python\nb = get_book(book_id=10)\nprint(b['title'])\n```"
    with ScriptedOpenAI([bad, good]) as server:
        client = OpenAIModel("scripted", base_url=server.base_url)
        solution = solve("The title of book 10?", library, client=client, sandbox="local", limits=Limits(timeout=20))
    assert solution.ok
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}

    def parent(s: Any) -> str | None:
        return by_id[s.parent.span_id].name if s.parent is not None and s.parent.span_id in by_id else None

    [root] = [s for s in spans if s.name == "atc.solve"]
    attempts = sorted((s for s in spans if s.name == "atc.attempt"), key=lambda s: s.attributes["atc.attempt"])
    assert [a.attributes["atc.status"] for a in attempts] == ["failed", "ok"]
    assert attempts[0].attributes["atc.error.type"] == "KeyError"
    assert attempts[0].attributes["atc.attributed_tool"] == "get_book"
    assert all(parent(a) == "atc.solve" for a in attempts)
    models = [s for s in spans if s.name == "chat scripted"]
    runs = [s for s in spans if s.name == "atc.sandbox.run"]
    tools = [s for s in spans if s.name == "execute_tool get_book"]
    assert len(models) == 2 and all(parent(s) == "atc.attempt" for s in models)
    assert all(s.attributes["atc.prompt_tokens"] > 0 and s.attributes["atc.completion_tokens"] > 0 for s in models)
    assert len(runs) == 2 and all(parent(s) == "atc.attempt" for s in runs)
    assert [r.attributes["atc.status"] for r in runs] == ["failed", "ok"]
    assert len(tools) == 2 and all(parent(s) == "atc.sandbox.run" for s in tools)
    assert {t.attributes["atc.tool"] for t in tools} == {"get_book"}
    assert all(t.attributes["http.response.status_code"] == 200 and t.attributes["atc.duration_ms"] > 0 for t in tools)
    assert root.attributes["atc.status"] == "ok" and root.attributes["atc.attempts"] == 2
    assert root.attributes["atc.prompt_tokens"] == solution.usage.prompt_tokens


def test_the_command_line_never_imports_opentelemetry_unless_asked(tmp_path: Path, api: LibraryAPI) -> None:
    spec = api.write_spec(tmp_path / "lib.json")
    program = tmp_path / "p.py"
    program.write_text("print(get_book(book_id=20)['title'])\n")
    code = ("import sys; from atc.cli import main; "
            f"main(['run', {str(program)!r}, '--tools', {str(spec)!r}, '--sandbox', 'local', '--json']); "
            "import atc.loop.solving, atc.workflows.batch; "
            "print('OTEL', any(m.startswith('opentelemetry') for m in sys.modules))")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATC_", "OPENAI_"))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert '"answer": "Solaris\\n"' in out.stdout and "OTEL False" in out.stdout, out
    # ATC_TRACE=console: spans as JSON on stderr
    run = subprocess.run([str(ATC), "run", str(program), "--tools", str(spec), "--sandbox", "local", "--json"],
                         capture_output=True, text=True, env={**env, "ATC_TRACE": "console"}, timeout=60)
    assert run.returncode == 0 and json.loads(run.stdout)["answer"] == "Solaris\n"
    assert '"name": "execute_tool get_book"' in run.stderr and '"atc.tool": "get_book"' in run.stderr


def test_spans_speak_the_genai_conventions_beside_atcs_own() -> None:
    """OpenTelemetry's GenAI semantic conventions, as Phoenix and Langfuse read them: the model
    call, the tool calls (a Python function of the process and its type), the agent's totals."""
    from tests.support.fakes import functions as fx

    exporter = _exporter()
    exporter.clear()
    program = "```python\nlow = list_items(limit=1)\nprint(get_item(sku=low[0]['sku'])['name'])\n```"
    with ScriptedOpenAI([program]) as server:
        client = OpenAIModel("scripted", base_url=server.base_url)
        solution = solve("The item with the fewest units?", fx.INVENTORY, client=client, sandbox="local",
                         limits=Limits(timeout=20))
    assert solution.ok, solution.error
    spans = exporter.get_finished_spans()
    [chat] = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert chat.name == "chat scripted"
    assert chat.attributes["gen_ai.request.model"] == "scripted" and chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["gen_ai.usage.input_tokens"] == solution.usage.prompt_tokens > 0
    assert chat.attributes["gen_ai.usage.output_tokens"] == solution.usage.completion_tokens > 0
    assert chat.attributes["atc.prompt_tokens"] == solution.usage.prompt_tokens  # atc's own, beside them
    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert [t.name for t in tools] == ["execute_tool list_items", "execute_tool get_item"]
    assert [t.attributes["gen_ai.tool.name"] for t in tools] == ["list_items", "get_item"]
    assert {t.attributes["gen_ai.tool.type"] for t in tools} == {"function"}
    assert tools[1].attributes["gen_ai.tool.description"] == "One item by its SKU."
    assert tools[0].attributes["atc.tool"] == "list_items" and "http.request.method" not in tools[0].attributes
    [agent] = [s for s in spans if s.name == "atc.solve"]
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent" and agent.attributes["gen_ai.agent.name"] == "atc"
    assert agent.attributes["gen_ai.usage.input_tokens"] == solution.usage.prompt_tokens
    assert agent.attributes["gen_ai.request.model"] == "scripted"
