"""``probe``: document an API collection by calling it (``atc probe``, ``atc.probe``).

    import atc
    report = atc.probe("spec.json", base_url="http://127.0.0.1:8000", no_llm=True, out="probed/")
    print(report.count("documented"), report.calls)
    get_movie = report.tool("get_movie_movie_id")

Order of work: resolve the tools and how to reach them; set the unsafe ones aside (skipped, with
the reason); open the response cache and the budget; then the model's rounds (when a model is
configured and ``no_llm`` is not set) followed by the model-free chain for whatever the model left,
or the model-free chain alone. While it runs, ``--out`` files are rewritten (atomically, at most
once a second) so an interrupted probe leaves its latest state behind; Ctrl-C raises
``ProbeInterrupted`` carrying the report of what was learnt.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from atc.config import atc_home
from atc.errors import ConfigError, UsageError
from atc.model import ModelClient, make_client
from probes.cache import ResponseCache
from probes.calls import Budget, Caller
from probes.chain import ChainProber
from probes.outputs import learnt_collection, write_outputs
from probes.report import ProbeInterrupted, ProbeReport, ProbeSettings
from probes.safety import call_safety
from probes.state import Event, Session, ToolState
from protocols.model import Collection
from sandbox.api import Backend, Limits, Toolset

__all__ = ["probe", "resolve_toolset"]

ToolsArg = Toolset | Collection | Sequence[Collection | str | Path] | str | Path
#: Seconds between two rewrites of the ``--out`` files while probing.
WRITE_EVERY = 1.0


def resolve_toolset(tools: ToolsArg, base_url: str | None = None,
                    credentials: dict[str, str] | None = None) -> Toolset:
    """A ``Toolset`` from a Toolset, Collection(s), spec paths or stored collection names."""
    if isinstance(tools, Toolset):
        if base_url is None and not credentials:
            return tools
        return Toolset(tools.collections, base_url=base_url or tools.base_url,
                       credentials={**tools.credentials, **(credentials or {})})
    items: list[Any] = [tools] if isinstance(tools, Collection | str | Path) else list(tools)
    if not items:
        raise UsageError("no tools given", hint="pass a spec file or the name of an imported collection")
    collections: list[Collection] = []
    for item in items:
        if isinstance(item, Collection):
            collections.append(item)
        elif isinstance(item, str | Path):
            path = Path(item).expanduser()
            if path.exists():
                from protocols.loaders import load_spec

                collections.append(load_spec(path))
            else:
                from protocols.store import Store

                collections.append(Store(atc_home()).get(str(item)))
        else:
            raise UsageError(f"tools must be Collections, spec paths or collection names, not {type(item).__name__}")
    return Toolset(collections, base_url=base_url, credentials=dict(credentials or {}))


def _check_reachable(toolset: Toolset) -> None:
    """Every tool has an absolute http(s) server to go to (else no request could be made)."""
    if toolset.base_url:
        servers = [(toolset.base_url, "--base-url")]
    else:
        servers = []
        for collection in toolset.collections:
            for tool in collection.tools:
                url = next((s for s in tool.servers or collection.servers if s), None)
                if url is None:
                    raise ConfigError(f"{collection.name}: the spec names no server URL for {tool.name}",
                                      hint="pass --base-url URL")
                servers.append((url, f"the server of {tool.name}"))
    for url, what in servers:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"{what} {url!r} is not an absolute http(s) URL", hint="pass --base-url URL")


def _check_credentials(toolset: Toolset) -> None:
    """Every ``--credential`` names a scheme of the specs and a variable that is set (before any request)."""
    import os

    schemes = {s for c in toolset.collections for s in c.security_schemes}
    for scheme, source in toolset.credentials.items():
        if schemes and scheme not in schemes:
            raise ConfigError(f"--credential {scheme}: the tools have no security scheme {scheme!r}",
                              hint=f"schemes: {', '.join(sorted(schemes))}")
        var = source[4:] if source.startswith("env:") else source
        if var not in os.environ:
            raise ConfigError(f"--credential {scheme}=env:{var}: environment variable {var} is not set",
                              hint=f"export {var}=... before probing")


def _pick_client(settings: ProbeSettings, client: ModelClient | None, model: str | None) -> tuple[ModelClient | None, str | None]:
    if not settings.use_llm:
        return None, None
    if client is not None:
        return client, None
    try:
        return make_client(model), None
    except ConfigError as exc:
        return None, f"probed without a model: {exc.message}"


def probe(
    tools: ToolsArg,
    *,
    base_url: str | None = None,
    credentials: dict[str, str] | None = None,
    settings: ProbeSettings | None = None,
    no_llm: bool = False,
    model: str | None = None,
    client: ModelClient | None = None,
    sandbox: str | Backend | None = None,
    out: str | Path | None = None,
    update: bool = False,
    on_event: Event | None = None,
    **options: Any,
) -> ProbeReport:
    """Probe ``tools`` and return the report (see ``ProbeReport``).

    ``settings`` (or keyword ``options`` naming its fields: ``max_calls``, ``per_tool``,
    ``samples``, ``rounds``, ``allow_unsafe``, ``request_timeout``, ``cache``, ``refresh``...)
    say how; ``no_llm`` probes without a model even when one is configured. ``out`` writes the
    OpenAPI document, the Markdown page and the JSON report there; ``update`` writes the learnt
    schemas and examples into the store. ``on_event(event, state)`` reports progress."""
    started = time.perf_counter()
    if settings is None:
        settings = ProbeSettings(**options)
    elif options:
        raise UsageError("give settings= or keyword options, not both")
    if no_llm:
        settings = ProbeSettings(**{**settings.to_dict(), "use_llm": False})
    toolset = resolve_toolset(tools, base_url, credentials)
    _check_reachable(toolset)
    _check_credentials(toolset)
    llm, note = _pick_client(settings, client, model)

    probe_tools = []
    skipped: dict[str, str] = {}
    for collection in toolset.collections:
        for tool in collection.tools:
            verdict = call_safety(tool, collection, allow_unsafe=settings.allow_unsafe)
            if verdict.safe:
                probe_tools.append(tool)
            else:
                skipped[tool.name] = verdict.reason
    all_tools = [t for c in toolset.collections for t in c.tools]
    budget = Budget(total=settings.budget_for(len(probe_tools)), per_tool=settings.per_tool)
    limits = Limits(timeout=settings.timeout, memory_mb=settings.memory_mb, call_timeout=settings.request_timeout,
                    max_calls=max(1, budget.total))
    names = "+".join(c.name for c in toolset.collections)
    cache = ResponseCache(atc_home(), names, toolset.base_url or "", credentials=toolset.credentials,
                          refresh=settings.refresh, enabled=settings.cache)
    caller = Caller(toolset, limits, budget, cache)

    last_write = [0.0]
    write_every = [WRITE_EVERY]
    rounds_used = [0]
    usage = {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    sandbox_used: list[str | None] = [None]

    def build(*, interrupted: bool = False) -> ProbeReport:
        report = ProbeReport(
            tools=session.reports(), calls=budget.spent, collection=names,
            mode="model" if llm is not None else "no-llm", base_url=toolset.base_url, budget=budget.total,
            rounds=rounds_used[0], cached=cache.hits, duration_ms=(time.perf_counter() - started) * 1000,
            interrupted=interrupted, note=note, model=getattr(llm, "model", None), usage=dict(usage),
            sandbox=sandbox_used[0])
        return report

    def write(final: bool = False, *, interrupted: bool = False) -> None:
        if out is None:
            return
        now = time.monotonic()
        if not final and now - last_write[0] < write_every[0]:
            return
        report = build(interrupted=interrupted)
        report.outputs = write_outputs(out, toolset.collections, report)
        # Writing must not take over the probe: wait at least 5 times as long as a write took.
        last_write[0] = time.monotonic()
        write_every[0] = max(WRITE_EVERY, 5 * (last_write[0] - now))

    def event(kind: str, state: ToolState) -> None:
        if on_event is not None:
            on_event(kind, state)
        if kind in ("documented", "failed", "skipped"):
            write()

    session = Session(all_tools, caller, settings, on_event=event)
    for name, reason in skipped.items():
        session.settle(session.states[name], "skipped", reason)
    try:
        first_round = 0
        if llm is not None:
            from probes.llm import ModelProber
            from sandbox.execute import get_backend

            backend = sandbox if isinstance(sandbox, Backend) else get_backend(sandbox)
            model_prober = ModelProber(session, llm, toolset, sandbox=backend, limits=limits)
            try:
                rounds_used[0] = model_prober.run()
            finally:
                usage.update(model_prober.usage)
                sandbox_used[0] = model_prober.sandbox_name
            if model_prober.model_error:
                note = f"the model failed ({model_prober.model_error}); the rest was probed without it"
            first_round = max(1, rounds_used[0])
        chain_rounds = ChainProber(session).run(first_round=first_round)
        rounds_used[0] = max(rounds_used[0], chain_rounds)
        if settings.cache:
            from probes.llm import remember

            for state in session.states.values():
                # A tool documented from recorded answers has its finding already.
                if state.successes and state.source != "model" and not state.successes[0].cached:
                    remember(session, state, state.successes[0])
    except KeyboardInterrupt:
        report = build(interrupted=True)
        if out is not None:
            report.outputs = write_outputs(out, toolset.collections, report)
        raise ProbeInterrupted(report) from None
    report = build()
    if out is not None:
        report.outputs = write_outputs(out, toolset.collections, report)
    if update:
        from protocols.store import Store

        store = Store(atc_home())
        for collection in toolset.collections:
            store.add(learnt_collection(collection, report))
        report.outputs["store"] = ", ".join(c.name for c in toolset.collections)
    return report
