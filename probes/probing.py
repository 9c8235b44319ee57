"""``probe``: document an API collection by calling it (``atc probe``, ``atc.probe``).

    import atc
    report = atc.probe("spec.json", base_url="http://127.0.0.1:8000", no_llm=True, out="probed/")
    print(report.count("documented"), report.calls)
    get_movie = report.tool("get_movie_movie_id")

The entry point sits above the two ways a probe runs: here, in this process (``probes.single``,
which says the order of work), or with an executor as one task per group of tools
(``probes.spread``, whose tasks run ``probes.single`` in their workers).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from atc.errors import UsageError
from atc.llm.chat import ModelClient
from probes.results.report import ProbeReport, ProbeSettings
from probes.single import ToolsArg, probe_toolset, resolve_toolset
from probes.spread import probe_spread
from probes.state import Event
from sandbox.api import Backend
from sandbox.execute import BaseUrl

__all__ = ["probe"]


def probe(
    tools: ToolsArg,
    *,
    base_url: BaseUrl = None,
    credentials: dict[str, str] | None = None,
    settings: ProbeSettings | None = None,
    no_llm: bool = False,
    model: str | None = None,
    client: ModelClient | None = None,
    sandbox: str | Backend | None = None,
    out: str | Path | None = None,
    update: bool = False,
    on_event: Event | None = None,
    executor: str | None = None,
    concurrency: int = 2,
    **options: Any,
) -> ProbeReport:
    """Probe ``tools`` and return the report (see ``ProbeReport``).

    ``settings`` (or keyword ``options`` naming its fields: ``max_calls``, ``per_tool``,
    ``samples``, ``rounds``, ``allow_unsafe``, ``request_timeout``, ``cache``, ``refresh``...)
    say how; ``no_llm`` probes without a model even when one is configured. ``out`` writes the
    OpenAPI document, the Markdown page and the JSON report there; ``update`` writes the learnt
    schemas and examples into the store. ``on_event(event, state)`` reports progress. Ctrl-C
    raises ``ProbeInterrupted`` with the report of what was learnt (also written to ``out`` and,
    with ``update``, the store). ``executor`` (``"local"`` or ``"ray"``) probes the tools as
    tasks, one per group of tools that depend on each other, at most ``concurrency`` at a time
    (``probes.spread``; pass ``model=`` and a sandbox name, not objects).

    Args:
        tools: what ``atc.toolsets`` reads (spec paths, stored names, MCP sources, Collections).
        base_url: one server URL for every collection, or ``{collection: URL}``.
        credentials: ``{scheme or placement: "env:VAR"}``.
        settings: how to probe (``ProbeSettings``); ``**options`` set its fields instead.
        no_llm: probe without a model; ``model``/``client``: the model otherwise.
        sandbox: where programs run; ``out``: a folder for the outputs; ``update``: write the store.
        on_event: progress; ``executor``/``concurrency``: probe groups of tools as tasks.

    Returns:
        The ``ProbeReport``.

    Raises:
        UsageError: a bad argument or tools form.
        ConfigError: a credential or server URL that cannot work.
        ProbeInterrupted: Ctrl-C, carrying the report of what was learnt.
    """
    if settings is None:
        settings = ProbeSettings(**options)
    elif options:
        raise UsageError("give settings= or keyword options, not both")
    if no_llm or settings.dry_run:
        settings = replace(settings, use_llm=False)
    if executor is not None:
        if client is not None or on_event is not None or not isinstance(sandbox, str | None):
            raise UsageError("with executor=, pass model= and a sandbox name: a client, a backend or on_event "
                             "cannot go to the workers")
        return probe_spread(tools, settings=settings, base_url=base_url, credentials=credentials, model=model,
                            sandbox=sandbox, out=out, update=update, executor=executor, concurrency=concurrency)
    return probe_toolset(resolve_toolset(tools, base_url, credentials), settings, model=model, client=client,
                         sandbox=sandbox, out=out, update=update, on_event=on_event)
