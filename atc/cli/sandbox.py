"""``atc sandbox build|status``: make the Docker sandbox image, and say what ``--sandbox auto`` picks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from atc.cli.common import print_json
from atc.errors import ConfigError, SandboxError, UsageError

__all__ = ["register"]


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("sandbox", parents=parents, help="build or inspect the Docker sandbox image",
                              description="Build or inspect the Docker sandbox image.")
    sub = p.add_subparsers(dest="sandbox_command", metavar="SUBCOMMAND")
    p.set_defaults(handler=lambda _a: _usage(p))

    b = sub.add_parser("build", parents=parents, help="build the sandbox image",
                       description="Build the sandbox image atc-sandbox:latest. Offline (default): "
                       "debootstrap a minimal Debian with python3 from this machine's apt mirror (root "
                       "and debootstrap needed). With --base: on top of that image (pulled unless --offline).")
    b.add_argument("--offline", action="store_true", default=None,
                   help="never pull from a registry (the default unless --base is given)")
    b.add_argument("--base", metavar="IMAGE", help="base image with python3, e.g. python:3.12-slim")
    b.add_argument("--image", default=None, metavar="NAME", help="name of the image to build (atc-sandbox:latest)")
    b.add_argument("--mirror", metavar="URL", help="Debian mirror for debootstrap (default: from the apt sources)")
    b.add_argument("--cache", metavar="DIR", help="where the root filesystem is cached (~/.cache/atc)")
    b.add_argument("--refresh", action="store_true", help="bootstrap again instead of reusing the cache")
    b.set_defaults(handler=_build)

    s = sub.add_parser("status", parents=parents, help="is the engine there, the image built, which backend runs",
                       description="Report the Docker engine, the sandbox image, and the backend --sandbox auto picks.")
    s.add_argument("--image", default=None, metavar="NAME", help="image to look for (atc-sandbox:latest)")
    s.set_defaults(handler=_status)


def _usage(p: argparse.ArgumentParser) -> int:
    raise UsageError("atc sandbox: choose a subcommand: build or status", hint="see 'atc sandbox --help'")


def _build(args: argparse.Namespace) -> int:
    from sandbox.docker.engine import DEFAULT_IMAGE, connect, docker_available
    from sandbox.docker.image import build_image

    if args.offline and args.base is None and args.mirror and not args.mirror.startswith(("http", "file:")):
        raise UsageError(f"--mirror {args.mirror!r} is not a URL", hint="example: --mirror http://mirror.example/debian")

    def log(message: str) -> None:
        if not args.json:
            sys.stderr.write(f"atc: {message}\n")
            sys.stderr.flush()

    try:
        client = connect(timeout=600)
    except SandboxError as exc:  # no engine is a setup problem: exit 2, like missing configuration
        raise ConfigError(exc.message, hint=exc.hint) from exc
    try:
        info = build_image(offline=args.offline, base=args.base, image=args.image or DEFAULT_IMAGE,
                           mirror=args.mirror, cache=Path(args.cache).expanduser() if args.cache else None,
                           refresh=args.refresh, client=client, log=log)
    finally:
        client.close()
    docker_available(info.image, refresh=True)
    if args.json:
        print_json({"ok": True, **info.to_dict()})
    else:
        print(f"built {info.image} ({info.id[:19]}, {info.size_mb} MB) from {info.base}: "
              f"Python {info.python}, atc {info.atc_version}, in {info.duration_s:.1f} s")
    return 0


def _status(args: argparse.Namespace) -> int:
    from sandbox.docker.engine import DEFAULT_IMAGE, connect, docker_available
    from sandbox.docker.image import image_info

    image = args.image or DEFAULT_IMAGE
    doc: dict[str, Any] = {"ok": True, "engine": False, "engine_version": None, "image": image,
                           "image_present": False, "image_info": None, "auto_backend": "local", "error": None}
    try:
        client = connect(timeout=5)
    except SandboxError as exc:
        doc.update(ok=False, error=exc.to_dict())
        if args.json:
            print_json(doc)
        sys.stderr.write(f"atc: error: {exc.message}\n")
        if exc.hint:
            sys.stderr.write(f"  {exc.hint}\n")
        return 2
    try:
        doc["engine"] = True
        doc["engine_version"] = client.version().get("Version")
        info = image_info(client, image)
    except SandboxError as exc:
        doc.update(ok=False, error=exc.to_dict())
        info = None
    except Exception as exc:
        from sandbox.docker.engine import translate_docker_error

        err = translate_docker_error(exc, image=image)
        doc.update(ok=False, error=err.to_dict())
        info = None
    finally:
        client.close()
    if info is not None:
        doc["image_present"] = True
        doc["image_info"] = info.to_dict()
    if docker_available(DEFAULT_IMAGE, refresh=True):  # what --sandbox auto looks for
        doc["auto_backend"] = "docker"
    if args.json:
        print_json(doc)
    else:
        print(f"engine:  {'Docker ' + str(doc['engine_version']) if doc['engine'] else 'not reachable'}")
        if info is not None:
            print(f"image:   {image} ({info.size_mb} MB, Python {info.python or '?'}, "
                  f"atc {info.atc_version or '?'}, base {info.base or '?'})")
        else:
            print(f"image:   {image} not built (run: atc sandbox build --offline)")
        print(f"auto:    --sandbox auto runs programs in {doc['auto_backend']}")
    return 0 if doc["error"] is None else 1
