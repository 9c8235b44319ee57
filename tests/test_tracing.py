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

from atc.model import OpenAIModel
from atc.solving import solve
from protocols.loaders import load_data
from sandbox.api import Limits
from tests.apis.library import LibraryAPI
from tests.fakes.openai_server import ScriptedOpenAI

ROOT = Path(__file__).resolve().parents[1]
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
    models = [s for s in spans if s.name == "atc.model"]
    runs = [s for s in spans if s.name == "atc.sandbox.run"]
    tools = [s for s in spans if s.name == "atc.tool"]
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
            "import atc.solving, atc.workflows.batch; "
            "print('OTEL', any(m.startswith('opentelemetry') for m in sys.modules))")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATC_", "OPENAI_"))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert '"answer": "Solaris\\n"' in out.stdout and "OTEL False" in out.stdout, out
    # ATC_TRACE=console: spans as JSON on stderr
    run = subprocess.run([str(ATC), "run", str(program), "--tools", str(spec), "--sandbox", "local", "--json"],
                         capture_output=True, text=True, env={**env, "ATC_TRACE": "console"}, timeout=60)
    assert run.returncode == 0 and json.loads(run.stdout)["answer"] == "Solaris\n"
    assert '"name": "atc.tool"' in run.stderr and '"atc.tool": "get_book"' in run.stderr
