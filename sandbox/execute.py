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

__all__ = ["run", "arun", "get_backend", "resolve_backend_name", "as_toolset", "close_backends", "pick_sandbox"]

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


def as_toolset(tools: Toolset | Collection | list[Collection], *, base_url: str | None = None,
               credentials: dict[str, str] | None = None) -> Toolset:
    """A ``Toolset`` from what callers have at hand; ``base_url``/``credentials`` override."""
    if isinstance(tools, Toolset):
        if base_url is None and credentials is None:
            return tools
        return Toolset(collections=tools.collections, base_url=base_url or tools.base_url,
                       credentials={**tools.credentials, **(credentials or {})})
    collections = [tools] if isinstance(tools, Collection) else list(tools)
    if not all(isinstance(c, Collection) for c in collections):
        raise UsageError("tools must be a Toolset, a Collection or a list of Collections")
    return Toolset(collections=collections, base_url=base_url, credentials=dict(credentials or {}))


def _check_credentials(toolset: Toolset) -> None:
    """Credentials name schemes of the specs and variables of the host; say so before running."""
    schemes = {s for c in toolset.collections for s in c.security_schemes}
    for scheme, source in toolset.credentials.items():
        if schemes and scheme not in schemes:
            raise ConfigError(f"--credential {scheme}: the tools have no security scheme {scheme!r}",
                              hint=f"schemes: {', '.join(sorted(schemes))}")
        var = source[4:] if source.startswith("env:") else source
        if var not in os.environ:
            raise ConfigError(f"--credential {scheme}=env:{var}: environment variable {var} is not set",
                              hint=f"export {var}=... before running")


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
    base_url: str | None = None,
    credentials: dict[str, str] | None = None,
    backend: str | Backend | None = None,
) -> ExecutionResult:
    """Run ``program`` with ``tools`` in a sandbox (``"docker"``, ``"local"``, ``"auto"``/None, or a
    ``Backend``). Every outcome of the program is a result; raises only for bad input
    (``UsageError``/``ConfigError``) or a broken backend (``SandboxError``). ``backend`` is the
    deprecated name of ``sandbox``."""
    if not isinstance(program, str):
        raise UsageError("the program must be a string of Python source")
    choice = pick_sandbox(sandbox, backend)
    toolset = as_toolset(tools, base_url=base_url, credentials=credentials)
    _check_credentials(toolset)
    chosen = choice if isinstance(choice, Backend) else get_backend(choice)
    return chosen.run(program, toolset, limits or Limits())


async def arun(
    program: str,
    tools: Toolset | Collection | list[Collection],
    limits: Limits | None = None,
    *,
    sandbox: str | Backend | None = None,
    base_url: str | None = None,
    credentials: dict[str, str] | None = None,
    backend: str | Backend | None = None,
) -> ExecutionResult:
    """``run`` in a worker thread, for asyncio callers (many programs can run concurrently)."""
    call = functools.partial(run, program, tools, limits, sandbox=pick_sandbox(sandbox, backend),
                             base_url=base_url, credentials=credentials)
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
