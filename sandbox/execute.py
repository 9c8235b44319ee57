"""Run a program against tools: the one function the upper layers call.

    from sandbox import run
    result = run("print(get_stats()['books'])", tools=[collection], sandbox="local")

``sandbox`` is a ``Backend`` instance, a name (``"local"``, ``"docker"``) or ``None``/``"auto"``:
Docker when an engine answers and the sandbox image exists (``sandbox.docker.backend.
docker_available()``), else local. Backends are cached per process so that repeated runs reuse
their warm pools; the cache is closed at interpreter exit. The Docker client that ``auto``'s probe
connected is handed to the Docker backend it picks, rather than connecting twice.

``prepare`` gets a backend ready in a background thread -- made, and its first runner starting --
while the caller does other work (reads the tools, loads the model client): the sandbox's start
then overlaps with the caller's own start-up instead of following it.
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
import warnings
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from protocols.errors import ConfigError, UsageError
from protocols.functions import function_collections, is_function_source
from protocols.loaders import load_spec
from protocols.model import Collection
from sandbox.api import Backend, Credentials, ExecutionResult, Limits, Toolset
from sandbox.cancel import Cancel, cancellable
from sandbox.docker.backend import DockerBackend
from sandbox.docker.engine import docker_available
from sandbox.gateway.http.credentials import check as check_credentials
from sandbox.gateway.mcp.sources import check_ready, is_mcp_source, load_source
from sandbox.gateway.writes.ledger import WriteLedger
from sandbox.gateway.writes.policy import WRITE_MODES, Approver, WritePolicy, Writes
from sandbox.local.backend import LocalBackend

__all__ = ["run", "arun", "get_backend", "resolve_backend_name", "as_toolset", "close_backends", "pick_sandbox",
           "check_toolset", "prepare", "Pending", "warm", "with_writes", "WritesArg"]

_BACKENDS: dict[str, Backend] = {}
_ONE_SHOT: list[Backend] = []  # backends made by prepare(one_shot=True): closed with the others
_PENDING: list[Pending] = []  # prepares under way: close_backends waits for them
_LOCK = threading.Lock()
BACKEND_NAMES = ("local", "docker")
#: A Docker client that ``auto``'s probe connected, for the Docker backend to use (one connect, not two).
_PROBED: list[Any] = []


def _docker_available() -> bool:
    try:
        with _LOCK:
            keep = None if "docker" in _BACKENDS or _PROBED else _PROBED
        return bool(docker_available(keep=keep))
    except Exception:  # an engine that answers garbage is no engine
        return False


def resolve_backend_name(name: str | None) -> str:
    """``None``/``"auto"`` -> ``"docker"`` or ``"local"``; other names are checked."""
    if name in (None, "", "auto"):
        return "docker" if _docker_available() else "local"
    if name not in BACKEND_NAMES:
        raise UsageError(f"unknown sandbox {name!r}", hint="use --sandbox docker or --sandbox local")
    return name


def _make_backend(resolved: str, **options: Any) -> Backend:
    """A new backend of a resolved name (``options`` go to its constructor)."""
    if resolved == "local":
        return LocalBackend(**options)
    client = _PROBED.pop() if _PROBED else None
    if client is not None:
        client.api.timeout = 60  # the probe's client was made with a short timeout
    return DockerBackend(client=client, **options)


def get_backend(name: str | None = None) -> Backend:
    """The process-wide backend of that name (created on first use, kept warm)."""
    resolved = resolve_backend_name(name)
    with _LOCK:
        backend = _BACKENDS.get(resolved)
        if backend is None:
            backend = _BACKENDS[resolved] = _make_backend(resolved)
        return backend


#: What ``tools=`` takes: a ``Toolset``, a ``Collection``, a spec path or URL, an MCP source, a
#: Python function or an object holding functions, or a list of those (``sources_to_collections``).
ToolSources = Any
#: ``base_url`` of ``run``/``solve``: one URL for every collection, or collection name -> URL.
BaseUrl = str | dict[str, str] | None
#: ``validation``: one mode (``strict``, ``warn``, ``off``) for every collection, or name -> mode.
Validation = str | dict[str, str] | None


def warm(backend: Backend, limits: Limits) -> None:
    """Start runners for ``limits`` in the background, when ``backend`` keeps warm ones (a local
    backend spawns its runner processes, a Docker backend starts containers); never waits."""
    warm_up = getattr(backend, "warm_up", None)
    prewarm = getattr(backend, "prewarm", None)
    if callable(warm_up):
        warm_up(limits)
    elif callable(prewarm):
        prewarm(limits, timeout=0)


class Pending:
    """A backend being made ready in a background thread (see ``prepare``)."""

    def __init__(self, make: Any) -> None:
        self._backend: Backend | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._make, args=(make,), name="atc-prepare", daemon=True)
        with _LOCK:
            _PENDING.append(self)
        self._thread.start()

    def _make(self, make: Any) -> None:
        try:
            self._backend = make()
        except BaseException as exc:  # re-raised in the caller's thread by backend()
            self._error = exc
        finally:
            with _LOCK:
                _PENDING.remove(self)

    def wait(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def backend(self) -> Backend:
        """The backend, once ready; raises what making it raised (``SandboxError``...)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._backend is not None
        return self._backend


def prepare(sandbox: str | Backend | None, limits: Limits | None = None, *, one_shot: bool = False) -> Pending:
    """Get the backend for ``sandbox`` ready in the background and start a runner for ``limits``.

    By default that is the process-wide backend of ``get_backend`` with its pool warming up.
    ``one_shot`` is for a caller that runs ONE program (``atc run``): a backend of its own without
    a pool starts exactly one runner, so nothing is started that the process would only stop again
    at exit. Call ``.backend()`` on the result when the backend is needed."""
    limits = limits or Limits()

    def make() -> Backend:
        if isinstance(sandbox, Backend):
            warm(sandbox, limits)
            return sandbox
        if not one_shot:
            backend = get_backend(sandbox)
            warm(backend, limits)
            return backend
        backend = _make_backend(resolve_backend_name(sandbox), pool_size=0)
        with _LOCK:
            _ONE_SHOT.append(backend)
        reserve = getattr(backend, "reserve", None)
        if callable(reserve):
            reserve(limits)
        return backend

    return Pending(make)


def load(source: str | Path, *, name: str | None = None, base_url: str | None = None) -> Collection:
    """``atc.load``: a spec file or URL (``protocols.loaders.load_spec``), or a live MCP source that
    names one server (``mcp:COMMAND ARGS``, ``mcp+http://...``, a one-server ``mcpServers`` file;
    the server is started now and reused by every run of the process).

    Args:
        source: a spec path or URL, or an MCP source naming one server.
        name: the collection's name (default: from the spec or the server).
        base_url: the server URL (a spec only).

    Returns:
        The ``Collection``.

    Raises:
        ProtocolError: the spec cannot be read.
        UsageError: an MCP source that names several servers (use ``atc.load_mcp``).
    """
    if isinstance(source, str):
        if is_mcp_source(source):
            found = load_source(source, name=name)
            if len(found) != 1:
                raise UsageError(f"{source} names {len(found)} MCP servers; atc.load returns one collection",
                                 hint="use atc.load_mcp(source), which returns one collection per server")
            return found[0]
    return load_spec(source, name=name, base_url=base_url)


def sources_to_collections(tools: Any) -> list[Collection]:
    """Collections from a Collection, a spec path, a live MCP source (``mcp:COMMAND ARGS``,
    ``mcp+http://...``, an ``mcpServers`` JSON file; its servers are started once per process),
    Python functions of the host (``protocols.functions.function_collections``: loose functions
    share one collection, an object holding functions is one), or a list of those. The sandbox's
    own API reads only what it can without the store; every ``atc`` entry point reads its ``tools``
    with ``atc.toolsets.collections_of`` first (stored names, and the rule for a word that names
    both a file and a stored collection) and hands the collections down."""
    items = [tools] if isinstance(tools, (Collection, str, Path)) or is_function_source(tools) else list(tools)
    out: list[Collection] = []
    functions: list[Any] = []
    for item in items:
        if isinstance(item, Collection):
            out.append(item)
        elif isinstance(item, (str, Path)):
            if isinstance(item, str) and is_mcp_source(item):
                out += load_source(item)
            elif Path(item).expanduser().exists() or str(item).startswith(("http://", "https://")):
                out.append(load_spec(item))
            else:
                raise UsageError(f"tools: {str(item)!r} is neither a spec file or URL nor an MCP source",
                                 hint="give a Collection, a spec path, mcp:'COMMAND ARGS' or mcp+http://HOST:PORT/PATH")
        elif is_function_source(item):
            functions.append(item)
        else:
            raise UsageError("tools must be a Toolset, Collections, spec paths, MCP sources "
                             f"(mcp:COMMAND, mcp+http://URL) or Python functions, not {type(item).__name__}")
    if functions:
        out.extend(function_collections(functions))
    return out


def as_toolset(tools: ToolSources, *, base_url: BaseUrl = None,
               credentials: Mapping[str, str] | None = None, validation: Validation = None,
               writes: WritesArg = None, approve: Approver | None = None) -> Toolset:
    """A ``Toolset`` from what callers have at hand; ``base_url``, ``credentials`` and
    ``validation`` override (each a single value for all collections, or a dict per collection);
    ``writes``/``approve`` set the write policy (``with_writes``)."""
    if writes is not None or approve is not None:
        return with_writes(as_toolset(tools, base_url=base_url, credentials=credentials, validation=validation),
                           writes, approve)
    if isinstance(tools, Toolset):
        if base_url is None and credentials is None and validation is None:
            return tools
        base = tools
        collections = tools.collections
    else:
        base = None
        collections = sources_to_collections(tools)
    one_url = base_url if isinstance(base_url, str) else None
    urls = dict(base_url) if isinstance(base_url, dict) else {}
    one_mode = validation if isinstance(validation, str) else None
    modes = dict(validation) if isinstance(validation, dict) else {}
    return Toolset(
        collections=collections,
        base_url=one_url or (base.base_url if base else None),
        credentials=Credentials.of(base.credentials if base else None).merged(credentials),
        base_urls={**(base.base_urls if base else {}), **urls},
        validation=one_mode or (base.validation if base else "strict"),
        validations={**(base.validations if base else {}), **modes},
        taps=base.taps if base else (),
        writes=base.writes if base else None,
    )


#: What ``writes=`` takes: a mode (``allow``, ``deny``, ``ask``), a ``Writes`` (a policy and the
#: ledger of a task, to share one ledger across runs), or None (keep what the toolset has).
WritesArg = str | Writes | None


def with_writes(toolset: Toolset, writes: WritesArg = None, approve: Approver | None = None) -> Toolset:
    """``toolset`` with a write policy and a ledger: ``writes`` a mode (a new ledger: one task) or
    a ``Writes`` to share; ``approve`` answers ``ask`` (None with ``ask``: a person at the
    terminal is not asked from here; the caller passes the terminal's approver). Keeps the
    toolset's own when both are None."""
    if writes is None and approve is None:
        return toolset
    if isinstance(writes, Writes):
        chosen = writes if approve is None else Writes(WritePolicy(writes.policy.mode, approve, writes.policy.guard),
                                                       writes.ledger)
    else:
        current = toolset.writes
        mode = writes or (current.policy.mode if current is not None else "allow")
        if mode not in WRITE_MODES:
            raise UsageError(f"unknown write policy {mode!r}", hint="use allow, deny or ask")
        chosen = Writes(WritePolicy(mode, approve, current.policy.guard if current is not None else None),
                        current.ledger if current is not None and current.ledger is not None else WriteLedger())
    return replace(toolset, writes=chosen)


def check_toolset(toolset: Toolset) -> None:
    """What would make every call of a run fail, said before the run (``ConfigError``, exit 2):
    a credential that names neither a security scheme nor a placement, could reach the wrong API,
    or reads an unset variable; a collection whose spec names no usable server URL and has no
    ``--base-url``; an MCP tools/list read from a file (it names no server to call); an MCP
    server that lacks an environment variable, its command or its directory. Every source is
    checked, so that nothing starts (and no API gets a call) when one of them cannot work."""
    check_credentials(toolset.credentials, toolset.collections, os.environ)
    for collection in toolset.collections:
        if collection.kind == "python":  # functions of this process: nothing to reach
            continue
        if collection.mcp_server is not None:
            check_ready(collection.mcp_server, os.environ, collection=collection.name)
            continue
        if not collection.tools:
            continue
        if all(t.method == "PYTHON" for t in collection.tools):
            raise ConfigError(f"collection {collection.name!r} lists Python functions but holds none",
                              hint="functions are never stored: give them to the run itself (tools=[f], "
                                   "--tools py:MODULE:NAME)")
        if all(t.method == "MCP" for t in collection.tools):
            raise ConfigError(f"collection {collection.name!r} is an MCP tools/list with no server to call",
                              hint="import it from the live server: atc tools import mcp:'COMMAND ARGS' "
                                   "(or give --tools mcp:... / mcp+http://... directly)")
        missing = [t.name for t in collection.tools
                   if not (toolset.base_url_for(t.name) or "").startswith(("http://", "https://"))]
        if len(missing) == len(collection.tools):
            base = toolset.base_url_for(collection.tools[0].name)
            what = f"a relative server URL ({base!r})" if base else "no server URL"
            several = len(toolset.collections) > 1
            raise ConfigError(f"collection {collection.name!r}: the spec names {what}",
                              hint=f"pass --base-url {collection.name + '=' if several else ''}URL "
                                   "(e.g. http://127.0.0.1:8000)")


def _check_credentials(toolset: Toolset) -> None:
    """Kept for callers of the old name: see ``check_toolset``."""
    check_toolset(toolset)


def pick_sandbox(sandbox: str | Backend | None, backend: str | Backend | None) -> str | Backend | None:
    """The one sandbox choice of a call that may still use the old keyword ``backend=``.

    The word is ``sandbox`` everywhere (``--sandbox`` on the command line, ``"sandbox"`` in every
    result); ``backend=`` is accepted for a deprecation period, with a warning."""
    if backend is None:
        return sandbox
    warnings.warn("the keyword 'backend' is deprecated; use sandbox=... (the same word as --sandbox)",
                  DeprecationWarning, stacklevel=3)
    if sandbox is not None and sandbox is not backend:
        raise UsageError("give sandbox=... only (backend= is its deprecated name)")
    return backend


def run(
    program: str,
    tools: ToolSources,
    limits: Limits | None = None,
    *,
    sandbox: str | Backend | None = None,
    base_url: BaseUrl = None,
    credentials: dict[str, str] | None = None,
    backend: str | Backend | None = None,
    validation: Validation = None,
    writes: WritesArg = None,
    approve: Approver | None = None,
) -> ExecutionResult:
    """Run ``program`` with ``tools`` in a sandbox (``"docker"``, ``"local"``, ``"auto"``/None, or a
    ``Backend``). Every outcome of the program is a result; raises only for bad input
    (``UsageError``/``ConfigError``) or a broken backend (``SandboxError``). ``backend`` is the
    deprecated name of ``sandbox``. ``base_url``: one URL, or ``{collection: URL}``;
    ``credentials``: ``{scheme or placement: "env:VAR"}``; ``validation``: ``"strict"`` (default),
    ``"warn"``, ``"off"``, or ``{collection: mode}``. ``writes``: ``"allow"`` (default), ``"deny"``
    (read-only), ``"ask"`` (each write goes to ``approve(request) -> bool``), or a ``Writes`` whose
    ledger several runs share (a write is then sent once across them: ``docs/writes.md``)."""
    if not isinstance(program, str):
        raise UsageError("the program must be a string of Python source")
    choice = pick_sandbox(sandbox, backend)
    toolset = as_toolset(tools, base_url=base_url, credentials=credentials, validation=validation, writes=writes,
                         approve=approve)
    check_toolset(toolset)
    chosen = choice if isinstance(choice, Backend) else get_backend(choice)
    return chosen.run(program, toolset, limits or Limits())


async def arun(
    program: str,
    tools: ToolSources,
    limits: Limits | None = None,
    *,
    sandbox: str | Backend | None = None,
    base_url: BaseUrl = None,
    credentials: dict[str, str] | None = None,
    backend: str | Backend | None = None,
    validation: Validation = None,
    writes: WritesArg = None,
    approve: Approver | None = None,
) -> ExecutionResult:
    """``run`` in a worker thread, for asyncio callers (many programs can run concurrently).
    Cancelling the awaiting task stops the program (``sandbox.cancel``): its sandbox is killed as
    after a timeout, instead of running on in the thread."""
    import asyncio  # lazy: asyncio (~30 modules, ~70 ms); tests/test_startup.py keeps it out of a plain run

    token = Cancel()
    call = functools.partial(run, program, tools, limits, sandbox=pick_sandbox(sandbox, backend),
                             base_url=base_url, credentials=credentials, validation=validation, writes=writes,
                             approve=approve)

    def body() -> ExecutionResult:
        with cancellable(token):
            return call()

    try:
        return await asyncio.get_running_loop().run_in_executor(None, body)
    except asyncio.CancelledError:
        token.cancel("the awaiting task was cancelled")
        raise


def close_backends() -> None:
    """Close every cached backend (their warm runners and containers). A backend still being
    prepared is waited for first (a caller that failed before it needed the backend, with a bad
    spec say, must not leave a runner or a container starting behind it)."""
    with _LOCK:
        pending = list(_PENDING)
    for p in pending:
        p.wait(timeout=60)
    with _LOCK:
        backends = list(_BACKENDS.values()) + _ONE_SHOT
        _BACKENDS.clear()
        _ONE_SHOT.clear()
        probed = list(_PROBED)
        _PROBED.clear()
    for client in probed:
        try:
            client.close()
        except Exception:
            pass
    for b in backends:
        try:
            b.close()
        except Exception:  # closing at exit must not mask the real outcome
            pass


atexit.register(close_backends)
