"""The Docker engine as the sandbox sees it: connecting, "is it usable?", errors, and reaping.

Everything here is about the engine, not about running a program (that is ``docker_backend``):
the docker SDK client for the environment's engine (``DOCKER_HOST`` or the local socket), a quick
cached ``docker_available()`` for ``--sandbox auto``, the translation of every docker SDK and
requests exception into a ``SandboxError`` that says what to do, and the removal of sandbox
containers (and their socket directories) left behind by atc processes that died.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocols.errors import SandboxError
from sandbox.owners import pid_alive

if TYPE_CHECKING:
    import docker

__all__ = [
    "DEFAULT_IMAGE",
    "OWNER_LABEL",
    "HOST_LABEL",
    "ROLE_LABEL",
    "INSTANCE_LABEL",
    "SOCKET_DIR_PREFIX",
    "connect",
    "docker_available",
    "translate_docker_error",
    "reap_stale_containers",
]

DEFAULT_IMAGE = "atc-sandbox:latest"
OWNER_LABEL = "atc.owner"
HOST_LABEL = "atc.host"
ROLE_LABEL = "atc.sandbox"
INSTANCE_LABEL = "atc.backend"

_ENGINE_HINT = (
    "start the Docker engine (as root: bash scripts/setup-docker.sh), or run with --sandbox local"
)
_BUILD_HINT = "build it with: atc sandbox build --offline"

# What each foreign exception means to a user, keyed by class name and resolved along the MRO, so
# that every class of docker.errors and requests.exceptions lands on a specific entry (the tests
# check that none falls through to the catch-all).
_DOCKER_ERRORS: dict[str, tuple[str, str | None]] = {
    "ImageNotFound": ("the sandbox image {image} is not there", _BUILD_HINT),
    "NotFound": ("Docker object not found ({detail})", None),
    "APIError": ("the Docker engine refused the request: {detail}", None),
    "ContainerError": ("a sandbox container failed: {detail}", None),
    "BuildError": ("building the sandbox image failed: {detail}", None),
    "ImageLoadError": ("loading an image into Docker failed: {detail}", None),
    "InvalidVersion": ("the Docker engine API version is not supported: {detail}", None),
    "InvalidRepository": ("invalid image name: {detail}", "use a name like atc-sandbox:latest"),
    "InvalidArgument": ("invalid argument for the Docker engine: {detail}", None),
    "InvalidConfigFile": ("the Docker client configuration is invalid: {detail}", "check ~/.docker/config.json"),
    "TLSParameterError": ("Docker TLS settings are invalid: {detail}", "check DOCKER_TLS_VERIFY and DOCKER_CERT_PATH"),
    "DeprecatedMethod": ("internal use of a removed docker SDK method: {detail}", None),
    "NullResource": ("internal docker SDK call without a resource id: {detail}", None),
    "MissingContextParameter": ("a Docker context is incomplete: {detail}", "check `docker context ls`"),
    "ContextAlreadyExists": ("a Docker context already exists: {detail}", None),
    "ContextNotFound": ("the Docker context is not found: {detail}", "check DOCKER_CONTEXT / `docker context ls`"),
    "ContextException": ("Docker context error: {detail}", "check `docker context ls`"),
    "StreamParseError": ("the Docker engine sent a stream that could not be parsed: {detail}", None),
    "DockerException": ("cannot talk to the Docker engine: {detail}", _ENGINE_HINT),
    # requests, which the docker SDK speaks HTTP with
    "ConnectTimeout": ("the Docker engine does not answer (connect timed out)", _ENGINE_HINT),
    "ReadTimeout": ("the Docker engine did not answer in time: {detail}", "the engine may be overloaded; try again"),
    "Timeout": ("the Docker engine did not answer in time: {detail}", "the engine may be overloaded; try again"),
    "SSLError": ("TLS error talking to the Docker engine: {detail}", "check DOCKER_HOST and the TLS settings"),
    "ProxyError": ("a proxy refused the connection to the Docker engine: {detail}", "unset HTTP(S)_PROXY for the engine"),
    "ConnectionError": ("the Docker engine is not reachable: {detail}", _ENGINE_HINT),
    "ChunkedEncodingError": ("the connection to the Docker engine broke: {detail}", "is the engine restarting?"),
    "ContentDecodingError": ("the Docker engine sent an undecodable body: {detail}", None),
    "InvalidJSONError": ("the Docker engine sent invalid JSON: {detail}", None),
    "InvalidSchema": ("DOCKER_HOST has an unsupported scheme: {detail}", "use unix:// or tcp://"),
    "MissingSchema": ("DOCKER_HOST is not a URL: {detail}", "use unix:///var/run/docker.sock"),
    "InvalidURL": ("DOCKER_HOST is not a valid URL: {detail}", "use unix:///var/run/docker.sock"),
    "InvalidHeader": ("invalid header for the Docker engine: {detail}", None),
    "TooManyRedirects": ("the Docker engine redirected too often: {detail}", None),
    "URLRequired": ("no Docker engine URL: {detail}", "set DOCKER_HOST or start the local engine"),
    "RetryError": ("the Docker engine kept failing: {detail}", _ENGINE_HINT),
    "StreamConsumedError": ("internal error reading a Docker response twice: {detail}", None),
    "UnrewindableBodyError": ("internal error resending a request body to Docker: {detail}", None),
    "HTTPError": ("the Docker engine answered with an HTTP error: {detail}", None),
    "RequestException": ("the request to the Docker engine failed: {detail}", _ENGINE_HINT),
}


def _detail(exc: BaseException) -> str:
    explanation = getattr(exc, "explanation", None)
    text = str(explanation or exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def translate_docker_error(exc: BaseException, *, image: str = DEFAULT_IMAGE) -> SandboxError:
    """The ``SandboxError`` (message + hint) for an exception of the docker SDK or of requests.

    Raise it with ``raise translate_docker_error(exc) from exc``. An ``AtcError`` passes through;
    anything unknown gets a generic message naming its class.
    """
    if isinstance(exc, SandboxError):
        return exc
    detail = _detail(exc)
    if "Error while fetching server API version" in str(exc) or isinstance(exc, FileNotFoundError):
        return SandboxError(f"the Docker engine is not reachable: {detail}", hint=_ENGINE_HINT)
    for cls in type(exc).__mro__:
        entry = _DOCKER_ERRORS.get(cls.__name__)
        if entry is not None and cls.__module__.startswith(("docker", "requests")):
            message, hint = entry
            if cls.__name__ == "NotFound" and "No such image" in detail:
                message, hint = _DOCKER_ERRORS["ImageNotFound"]
            return SandboxError(message.format(image=image, detail=detail), hint=hint)
    return SandboxError(f"Docker failed: {type(exc).__name__}: {detail}", hint=_ENGINE_HINT)


def _engine_socket_missing() -> bool:
    """True when no DOCKER_HOST is set and the default socket does not exist (answer at once)."""
    host = os.environ.get("DOCKER_HOST", "")
    if host and not host.startswith("unix://"):
        return False
    path = host[len("unix://"):] if host else "/var/run/docker.sock"
    return not os.path.exists(path)


def connect(timeout: float = 60.0) -> docker.DockerClient:
    """A docker SDK client for the engine of the environment (DOCKER_HOST or the local socket).

    Raises ``SandboxError`` with a hint when the SDK is missing or the engine does not answer.
    """
    try:
        import docker  # lazy: the docker SDK (with requests) costs ~0.15 s, which local runs never pay
    except ImportError as exc:  # pragma: no cover - docker is a dependency
        raise SandboxError("the docker Python package is missing", hint="pip install 'docker>=7'") from exc
    if _engine_socket_missing():
        raise SandboxError("the Docker engine is not running (no /var/run/docker.sock)", hint=_ENGINE_HINT)
    try:
        return docker.from_env(timeout=int(max(1, timeout)))
    except Exception as exc:
        raise translate_docker_error(exc) from exc


_available: dict[tuple[str, str], tuple[float, bool]] = {}
_available_lock = threading.Lock()
_AVAILABLE_TTL = {True: 60.0, False: 5.0}


def docker_available(image: str = DEFAULT_IMAGE, *, refresh: bool = False, keep: list[Any] | None = None) -> bool:
    """Whether the Docker backend can run now: the engine answers quickly and ``image`` exists.

    The answer is cached (a minute when yes, a few seconds when no) because ``--sandbox auto``
    asks before every run; ``refresh`` asks again. When the engine was asked and answered yes, the
    connected client is appended to ``keep`` (if given) instead of being closed: the caller owns
    it then (``sandbox.execute`` hands it to the backend it makes).
    """
    now = time.monotonic()
    where = (image, os.environ.get("DOCKER_HOST", ""))
    with _available_lock:
        cached = _available.get(where)
        if cached and not refresh and now - cached[0] < _AVAILABLE_TTL[cached[1]]:
            return cached[1]
    answer = False
    if not _engine_socket_missing():
        client = None
        try:
            client = connect(timeout=3)
            client.images.get(image)
            answer = True
        except Exception:
            answer = False
        finally:
            if client is not None:
                if answer and keep is not None:
                    keep.append(client)
                else:
                    client.close()
    with _available_lock:
        _available[where] = (time.monotonic(), answer)
    return answer



SOCKET_DIR_PREFIX = "atc-docker-"


def _reap_socket_dirs(owner: int | None) -> None:
    """Remove the socket directories (``<tmp>/atc-docker-<pid>-*``) of dead owners, or of ``owner``."""
    root = Path(tempfile.gettempdir())
    for path in root.glob(f"{SOCKET_DIR_PREFIX}*-*"):
        pid_text = path.name[len(SOCKET_DIR_PREFIX):].split("-", 1)[0]
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        if (owner is not None and pid == owner) or (owner is None and not pid_alive(pid)):
            shutil.rmtree(path, ignore_errors=True)


def reap_stale_containers(client: docker.DockerClient, *, owner: int | None = None) -> int:
    """Remove sandbox containers of this host whose owner process is gone (or of ``owner``).

    Returns how many were removed. Containers of owners on other hosts sharing the engine are
    left alone: their pids mean nothing here.
    """
    host = socket.gethostname()
    filters: dict[str, Any] = {"label": [ROLE_LABEL, f"{HOST_LABEL}={host}"]}
    if owner is not None:
        filters["label"].append(f"{OWNER_LABEL}={owner}")
    removed = 0
    try:
        found = client.api.containers(all=True, filters=filters)
    except Exception as exc:
        raise translate_docker_error(exc) from exc
    _reap_socket_dirs(owner)
    for c in found:
        try:
            pid = int((c.get("Labels") or {}).get(OWNER_LABEL, "0"))
        except ValueError:
            pid = 0
        if owner is None and pid > 0 and pid_alive(pid):
            continue
        try:
            client.api.remove_container(c["Id"], force=True)
            removed += 1
        except Exception:  # already gone, or being removed by its owner right now
            pass
    return removed
