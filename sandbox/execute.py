"""Run a program against tools: the one function the upper layers call.

    from sandbox import run
    result = run("print(get_stats()['books'])", tools=[collection], sandbox="local")

``sandbox`` is a ``Backend`` instance, a name (``"local"``, ``"docker"``) or ``None``/``"auto"``:
Docker when an engine answers and the sandbox image exists (``sandbox.docker_backend.
docker_available()``), else local. Backends are cached per process so that repeated runs reuse
their warm pools; the cache is closed at interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import os
import threading
import warnings

from protocols.errors import ConfigError, UsageError
from protocols.model import Collection
from sandbox.api import Backend, ExecutionResult, Limits, Toolset

__all__ = ["run", "arun", "get_backend", "resolve_backend_name", "as_toolset", "close_backends", "pick_sandbox",
           "check_toolset"]

_BACKENDS: dict[str, Backend] = {}
_LOCK = threading.Lock()
BACKEND_NAMES = ("local", "docker")


def _docker_available() -> bool:
    try:
        from sandbox.docker_backend import docker_available
    except ImportError:
        return False
    try:
        return bool(docker_available())
    except Exception:  # an engine that answers garbage is no engine
        return False


def resolve_backend_name(name: str | None) -> str:
    """``None``/``"auto"`` -> ``"docker"`` or ``"local"``; other names are checked."""
    if name in (None, "", "auto"):
        return "docker" if _docker_available() else "local"
    if name not in BACKEND_NAMES:
        raise UsageError(f"unknown sandbox {name!r}", hint="use --sandbox docker or --sandbox local")
    return name


def get_backend(name: str | None = None) -> Backend:
    """The process-wide backend of that name (created on first use, kept warm)."""
    resolved = resolve_backend_name(name)
    with _LOCK:
        backend = _BACKENDS.get(resolved)
        if backend is None:
            if resolved == "local":
                from sandbox.local_backend import LocalBackend

                backend = LocalBackend()
            else:
                try:
                    from sandbox.docker_backend import DockerBackend
                except ImportError as exc:
                    raise ConfigError("the Docker backend is not available in this installation",
                                      hint="use --sandbox local") from exc
                backend = DockerBackend()
            _BACKENDS[resolved] = backend
        return backend


#: ``base_url`` of ``run``/``solve``: one URL for every collection, or collection name -> URL.
BaseUrl = str | dict[str, str] | None
#: ``validation``: one mode (``strict``, ``warn``, ``off``) for every collection, or name -> mode.
Validation = str | dict[str, str] | None


def as_toolset(tools: Toolset | Collection | list[Collection], *, base_url: BaseUrl = None,
               credentials: dict[str, str] | None = None, validation: Validation = None) -> Toolset:
    """A ``Toolset`` from what callers have at hand; ``base_url``, ``credentials`` and
    ``validation`` override (each a single value for all collections, or a dict per collection)."""
    if isinstance(tools, Toolset):
        if base_url is None and credentials is None and validation is None:
            return tools
        base = tools
        collections = tools.collections
    else:
        base = None
        collections = [tools] if isinstance(tools, Collection) else list(tools)
        if not all(isinstance(c, Collection) for c in collections):
            raise UsageError("tools must be a Toolset, a Collection or a list of Collections")
    one_url = base_url if isinstance(base_url, str) else None
    urls = dict(base_url) if isinstance(base_url, dict) else {}
    one_mode = validation if isinstance(validation, str) else None
    modes = dict(validation) if isinstance(validation, dict) else {}
    return Toolset(
        collections=collections,
        base_url=one_url or (base.base_url if base else None),
        credentials={**(base.credentials if base else {}), **(credentials or {})},
        base_urls={**(base.base_urls if base else {}), **urls},
        validation=one_mode or (base.validation if base else "strict"),
        validations={**(base.validations if base else {}), **modes},
    )


def check_toolset(toolset: Toolset) -> None:
    """What would make every call of a run fail, said before the run (``ConfigError``, exit 2):
    a credential that names neither a security scheme nor a placement, or reads an unset
    variable; a collection whose spec names no usable server URL and has no ``--base-url``."""
    from sandbox.http.credentials import check

    check(toolset.credentials, toolset.collections, os.environ)
    for collection in toolset.collections:
        if not collection.tools:
            continue
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
    tools: Toolset | Collection | list[Collection],
    limits: Limits | None = None,
    *,
    sandbox: str | Backend | None = None,
    base_url: BaseUrl = None,
    credentials: dict[str, str] | None = None,
    backend: str | Backend | None = None,
    validation: Validation = None,
) -> ExecutionResult:
    """Run ``program`` with ``tools`` in a sandbox (``"docker"``, ``"local"``, ``"auto"``/None, or a
    ``Backend``). Every outcome of the program is a result; raises only for bad input
    (``UsageError``/``ConfigError``) or a broken backend (``SandboxError``). ``backend`` is the
    deprecated name of ``sandbox``. ``base_url``: one URL, or ``{collection: URL}``;
    ``credentials``: ``{scheme or placement: "env:VAR"}``; ``validation``: ``"strict"`` (default),
    ``"warn"``, ``"off"``, or ``{collection: mode}``."""
    if not isinstance(program, str):
        raise UsageError("the program must be a string of Python source")
    choice = pick_sandbox(sandbox, backend)
    toolset = as_toolset(tools, base_url=base_url, credentials=credentials, validation=validation)
    check_toolset(toolset)
    chosen = choice if isinstance(choice, Backend) else get_backend(choice)
    return chosen.run(program, toolset, limits or Limits())


async def arun(
    program: str,
    tools: Toolset | Collection | list[Collection],
    limits: Limits | None = None,
    *,
    sandbox: str | Backend | None = None,
    base_url: BaseUrl = None,
    credentials: dict[str, str] | None = None,
    backend: str | Backend | None = None,
    validation: Validation = None,
) -> ExecutionResult:
    """``run`` in a worker thread, for asyncio callers (many programs can run concurrently)."""
    call = functools.partial(run, program, tools, limits, sandbox=pick_sandbox(sandbox, backend),
                             base_url=base_url, credentials=credentials, validation=validation)
    return await asyncio.get_running_loop().run_in_executor(None, call)


def close_backends() -> None:
    """Close every cached backend (their warm runners and containers)."""
    with _LOCK:
        backends = list(_BACKENDS.values())
        _BACKENDS.clear()
    for b in backends:
        try:
            b.close()
        except Exception:  # closing at exit must not mask the real outcome
            pass


atexit.register(close_backends)
