"""Building the sandbox image, offline or from a registry base.

Offline (the default, and what CI does): ``debootstrap`` a minimal Debian root filesystem with
Python 3 from the apt mirror this machine is already configured with (read from the apt sources at
run time, never written down here), import it into Docker as ``atc-sandbox-base:<suite>``, then
build ``atc-sandbox:latest`` on top of it with the classic builder, which does not pull a local
base. The final layer only sets metadata: the non-root user 65534, a clean environment and labels
recording the atc and Python versions. The runner is not baked in: the backend bind-mounts the
installed ``sandbox/inside/runner.py`` at run time, so the image never goes stale.

Online (``--base python:3.12-slim``): the same final layer on top of a registry image, pulled if
it is not there yet.

The debootstrapped root filesystem is cached (``~/.cache/atc/rootfs/<suite>``) so a rebuild of the
image costs seconds, not minutes.
"""

from __future__ import annotations

import ast
import io
import os
import re
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocols.errors import ConfigError, SandboxError
from sandbox.docker.engine import DEFAULT_IMAGE, connect, translate_docker_error
from sandbox.inside import path_of

if TYPE_CHECKING:
    import docker

__all__ = [
    "DEFAULT_IMAGE",
    "BASE_REPOSITORY",
    "ONLINE_BASE",
    "SUITE",
    "ImageInfo",
    "build_image",
    "image_info",
    "find_apt_mirror",
    "default_cache_dir",
    "runner_modules",
]

BASE_REPOSITORY = "atc-sandbox-base"
ONLINE_BASE = "python:3.12-slim"
SUITE = "bookworm"
SANDBOX_USER = "65534:65534"

#: Parts of the root filesystem a program never needs; left out of the image to keep it small.
_TRIM = ("usr/share/doc/", "usr/share/man/", "usr/share/info/", "usr/share/locale/",
         "var/cache/apt/", "var/lib/apt/lists/", "var/log/")

#: Modules the runner needs when it cannot be parsed (the parse is the normal source of truth).
_FALLBACK_MODULES = ("ast", "json", "socket", "struct", "traceback", "io", "sys", "os", "time")

Log = Callable[[str], None]


@dataclass
class ImageInfo:
    """What ``atc sandbox build`` made (or found): the image, its base and the versions in it."""

    image: str
    id: str
    base: str
    offline: bool
    python: str
    atc_version: str
    size_mb: float
    created: str
    built: bool = False
    duration_s: float = 0.0
    steps: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _atc_version() -> str:
    # From the installed distribution, not ``atc.__version__``: sandbox sits below atc.
    from importlib.metadata import PackageNotFoundError, version  # lazy: importlib.metadata costs ~70 ms

    try:
        return version("atc")
    except PackageNotFoundError:
        return "unknown"


def default_cache_dir() -> Path:
    """Where the debootstrapped root filesystem and the downloaded packages are kept."""
    return Path.home() / ".cache" / "atc"


def runner_modules(runner: Path | None = None) -> list[str]:
    """The top-level modules ``sandbox/inside/runner.py`` imports: the image's Python must have them all."""
    path = runner or path_of("runner.py")
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return list(_FALLBACK_MODULES)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    names.discard("__future__")
    return sorted(names)


# --- the apt mirror -------------------------------------------------------------------------------

_DEB_LINE = re.compile(r"^\s*deb\s+(?:\[[^\]]*\]\s+)?(?P<uri>\S+)\s+(?P<suite>\S+)")


def _is_archive(uri: str, suites: Iterable[str]) -> bool:
    """A main Debian archive, not the security or updates pockets (those lack the base suite)."""
    return "security" not in uri and any("-" not in s and "/" not in s for s in suites)


def find_apt_mirror(root: Path = Path("/")) -> str | None:
    """The Debian mirror this machine's apt uses, read from deb822 ``*.sources`` files (``URIs:``)
    or one-line ``sources.list`` entries (``deb URI suite ...``). None when there is none."""
    apt = root / "etc" / "apt"
    candidates: list[tuple[str, list[str]]] = []
    for path in sorted((apt / "sources.list.d").glob("*.sources")):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for stanza in re.split(r"\n\s*\n", text):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                key, _, value = line.partition(":")
                fields[key.strip().lower()] = value.strip()
            if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
                continue
            for uri in fields.get("uris", "").split():
                candidates.append((uri, fields.get("suites", "").split()))
    lists = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.list"))]
    for path in lists:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            m = _DEB_LINE.match(line)
            if m:
                candidates.append((m.group("uri"), [m.group("suite")]))
    for uri, suites in candidates:
        if uri.startswith(("http://", "https://", "file:/")) and _is_archive(uri, suites):
            return uri
    return None


# --- the offline base -----------------------------------------------------------------------------


def _check_can_debootstrap(tool: str | None = None) -> str:
    if os.geteuid() != 0:
        raise ConfigError(
            "building the offline base image needs root (debootstrap creates device nodes and chroots)",
            hint="run as root: sudo .venv/bin/atc sandbox build --offline  (or bash scripts/setup-docker.sh)",
        )
    # root's PATH may lack the sbin directories (e.g. under su or a minimal CI shell)
    tool = tool or shutil.which("debootstrap", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if not tool or not os.access(tool, os.X_OK):
        raise ConfigError("debootstrap is not installed", hint="apt-get install -y debootstrap")
    return tool


def make_rootfs(cache: Path, *, suite: str = SUITE, mirror: str | None = None,
                refresh: bool = False, debootstrap: str | None = None, log: Log = lambda _m: None) -> Path:
    """A minimal Debian ``suite`` root filesystem with python3, debootstrapped into the cache.

    Reused when a previous run completed (``<suite>.done`` marker) unless ``refresh``.
    ``debootstrap`` is the tool's path (default: looked up on PATH and in /usr/sbin).
    """
    target = cache / "rootfs" / suite
    marker = cache / "rootfs" / f"{suite}.done"
    if marker.exists() and target.is_dir() and not refresh:
        log(f"reusing the root filesystem in {target}")
        return target
    tool = _check_can_debootstrap(debootstrap)
    mirror = mirror or find_apt_mirror()
    if not mirror:
        raise ConfigError("no Debian mirror found in /etc/apt/sources.list(.d)",
                           hint="configure apt, or pass --mirror URL")
    partial = cache / "rootfs" / f"{suite}.partial"
    debs = cache / "debs"
    for p in (target, partial):
        if p.exists():
            shutil.rmtree(p)
    marker.unlink(missing_ok=True)
    debs.mkdir(parents=True, exist_ok=True)
    logfile = cache / f"debootstrap-{suite}.log"
    cmd = [tool, "--variant=minbase", "--include=python3", f"--cache-dir={debs.resolve()}",
           suite, str(partial), mirror]
    log(f"debootstrap {suite} from {mirror} (a minute or two; log: {logfile})")
    with open(logfile, "wb") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        tail = logfile.read_text(errors="replace").strip().splitlines()[-5:]
        raise SandboxError(f"debootstrap failed (exit {proc.returncode}): " + " | ".join(tail),
                           hint=f"full log: {logfile}")
    partial.rename(target)
    marker.write_text(f"{mirror}\n", encoding="utf-8")
    return target


def _keep(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    name = member.name.lstrip("./")
    for prefix in _TRIM:
        if name.startswith(prefix) and name != prefix.rstrip("/"):
            return None
    # numeric ids only: the names are the host's, the ids are the root filesystem's
    member.uname = member.gname = ""
    return member


def write_rootfs_tar(rootfs: Path, out: Path) -> Path:
    """Pack the root filesystem (minus docs, locales and apt caches) into an uncompressed tar."""
    with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as tar:
        for entry in sorted(os.listdir(rootfs)):
            tar.add(rootfs / entry, arcname=entry, recursive=True, filter=_keep)
    return out


def _import_base(client: docker.DockerClient, tarball: Path, tag: str) -> None:
    repo, _, version = tag.partition(":")
    try:
        client.api.import_image_from_file(str(tarball), repository=repo, tag=version or "latest")
    except Exception as exc:
        raise translate_docker_error(exc) from exc


# --- the final image ------------------------------------------------------------------------------


def _probe_python(client: docker.DockerClient, image: str, modules: list[str], user: str | None) -> str:
    """Run ``image`` once (no network) to read its Python version and check the runner's modules."""
    check = f"import platform, {', '.join(modules)}; print(platform.python_version())" if modules else \
        "import platform; print(platform.python_version())"
    try:
        out = client.containers.run(image, ["python3", "-I", "-S", "-c", check], network_mode="none",
                                    user=user, remove=True, stdout=True, stderr=True)
    except Exception as exc:
        if type(exc).__name__ == "ContainerError":
            raise SandboxError(f"the Python in {image} cannot run the sandbox runner: {_tail(exc)}",
                               hint="the image needs python3 (3.8+) with its standard library") from exc
        raise translate_docker_error(exc, image=image) from exc
    return bytes(out).decode().strip().splitlines()[-1]


def _tail(exc: BaseException) -> str:
    stderr = getattr(exc, "stderr", None)
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else str(exc)
    return " ".join(text.strip().splitlines()[-2:])


def _dockerfile(base: str) -> bytes:
    return (
        f"FROM {base}\n"
        f"USER {SANDBOX_USER}\n"
        "WORKDIR /tmp\n"
        "ENV PATH=/usr/local/bin:/usr/bin:/bin PYTHONDONTWRITEBYTECODE=1 LANG=C.UTF-8\n"
    ).encode()


def _build_final(client: docker.DockerClient, base: str, image: str, labels: dict[str, str]) -> str:
    try:
        built, _logs = client.images.build(fileobj=io.BytesIO(_dockerfile(base)), tag=image, pull=False,
                                           rm=True, forcerm=True, labels=labels, network_mode="none")
    except Exception as exc:
        raise translate_docker_error(exc, image=image) from exc
    return str(built.id)


def _info_from_image(img: Any, image: str) -> ImageInfo:
    labels = dict(img.labels or {})
    attrs = img.attrs or {}
    return ImageInfo(
        image=image,
        id=str(img.id),
        base=labels.get("atc.base", ""),
        offline=labels.get("atc.offline", "") == "true",
        python=labels.get("atc.python", ""),
        atc_version=labels.get("atc.version", ""),
        size_mb=round(float(attrs.get("Size", 0)) / 1e6, 1),
        created=str(attrs.get("Created", "")),
        labels=labels,
    )


def image_info(client: docker.DockerClient, image: str = DEFAULT_IMAGE) -> ImageInfo | None:
    """The sandbox image as built (labels read back), or None when there is no such image."""
    import docker.errors  # lazy: the docker SDK, loaded only with Docker's engine

    try:
        img = client.images.get(image)
    except docker.errors.ImageNotFound:
        return None
    except Exception as exc:
        raise translate_docker_error(exc, image=image) from exc
    return _info_from_image(img, image)


def _has_image(client: docker.DockerClient, name: str) -> bool:
    return image_info(client, name) is not None


def build_image(
    *,
    offline: bool | None = None,
    base: str | None = None,
    image: str = DEFAULT_IMAGE,
    suite: str = SUITE,
    mirror: str | None = None,
    cache: Path | None = None,
    refresh: bool = False,
    client: docker.DockerClient | None = None,
    log: Log = lambda _m: None,
) -> ImageInfo:
    """Build the sandbox image and return what was built.

    ``offline`` None means: offline unless a ``base`` is given. Offline with no ``base`` bootstraps
    Debian ``suite`` locally (root and debootstrap needed; the base image and the root filesystem
    are reused unless ``refresh``); offline with a ``base`` uses that local image and never pulls.
    Online pulls ``base`` (default ``python:3.12-slim``) when it is not there.

    Raises ``ConfigError`` when the machine cannot build offline (not root, no debootstrap, no
    mirror, a base that would need a pull) and ``SandboxError`` when the engine or a step fails.
    """
    started = time.monotonic()
    offline = base is None if offline is None else offline
    own_client = client is None
    client = client or connect(timeout=600)
    steps: list[str] = []

    def step(message: str) -> None:
        steps.append(message)
        log(message)

    try:
        if base is None and offline:
            base = f"{BASE_REPOSITORY}:{suite}"
            if refresh or not _has_image(client, base):
                cache = cache or default_cache_dir()
                rootfs = make_rootfs(cache, suite=suite, mirror=mirror, refresh=refresh, log=step)
                tarball = cache / f"rootfs-{suite}.tar"
                step(f"packing {rootfs} into {tarball}")
                write_rootfs_tar(rootfs, tarball)
                step(f"importing {tarball} as {base}")
                try:
                    _import_base(client, tarball, base)
                finally:
                    tarball.unlink(missing_ok=True)
            else:
                step(f"reusing the base image {base}")
        else:
            base = base or ONLINE_BASE
            if not _has_image(client, base):
                if offline:
                    raise ConfigError(f"the base image {base} is not there and --offline forbids pulling it",
                                       hint="drop --base to bootstrap Debian locally, or build online")
                step(f"pulling {base}")
                try:
                    client.images.pull(base)
                except Exception as exc:
                    raise translate_docker_error(exc, image=base) from exc
        modules = runner_modules()
        python = _probe_python(client, base, modules, user=None)
        step(f"{base} has Python {python} with the runner's modules ({', '.join(modules)})")
        labels = {"atc.version": _atc_version(), "atc.python": python, "atc.base": base,
                  "atc.offline": "true" if offline else "false", "atc.sandbox.image": "1"}
        _build_final(client, base, image, labels)
        _probe_python(client, image, modules, user=SANDBOX_USER)
        step(f"built {image} (user {SANDBOX_USER})")
        info = image_info(client, image)
        if info is None:  # pragma: no cover - the engine just said it built it
            raise SandboxError(f"the engine built {image} but cannot find it")
    finally:
        if own_client:
            client.close()
    info.built = True
    info.duration_s = round(time.monotonic() - started, 2)
    info.steps = steps
    return info
