"""``atc mock SPEC``: serve a deterministic fake of an API on 127.0.0.1 until Ctrl-C.

Prints one line once the server listens (``atc mock: serving <title> on <url> (N operations)``,
or with ``--json`` the document ``{"url", "operations", ...}``), so scripts can start it in the
background and read where it is. SIGINT and SIGTERM stop it cleanly with exit code 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from atc.cli.common import print_json
from atc.errors import UsageError

__all__ = ["register"]

_SPEC_SUFFIXES = (".json", ".yaml", ".yml")


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "mock", parents=parents, help="serve a deterministic fake of an API on 127.0.0.1",
        description="Serve a deterministic fake of an OpenAPI spec on 127.0.0.1 that answers as the spec "
        "documents: every parameter and body checked against its schema, the declared credentials "
        "required, errors in the spec's own shape and status, the declared media types; ids returned "
        "by lists resolve on the detail endpoints, unknown ids are not found, created objects read "
        "back. Runs until Ctrl-C.")
    p.add_argument("spec", metavar="SPEC", help="a spec file (any format 'atc tools import' takes) or an imported collection")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="loopback address to bind: 127.0.0.1 (default), localhost or ::1")
    p.add_argument("--verbose", "-v", action="store_true", help="log every request on stderr")
    p.add_argument("--no-auth", action="store_true",
                   help="do not check the credentials the spec declares (by default a request without them "
                   "gets 401; any value is accepted)")
    p.add_argument("--credential", action="append", default=[], metavar="SCHEME=VALUE",
                   help="the only value accepted for a security scheme (repeatable): SCHEME=env:VAR reads it "
                   "from the environment, SCHEME=TEXT takes it as written; other values then get 401")
    p.set_defaults(handler=_mock)


def _accepted(items: list[str], collection: Any) -> dict[str, set[str]]:
    """``--credential SCHEME=env:VAR|TEXT`` -> scheme -> accepted values."""
    from sandbox.api import Credentials

    out: dict[str, set[str]] = {}
    for item in items:
        scheme, sep, value = item.partition("=")
        if not sep or not scheme or not value:
            raise UsageError(f"--credential {item!r} is not SCHEME=VALUE", hint="example: --credential api_key=env:KEY")
        if scheme not in collection.security_schemes:
            known = ", ".join(sorted(collection.security_schemes)) or "none"
            raise UsageError(f"--credential {scheme}: the spec has no security scheme of that name",
                             hint=f"its schemes: {known}")
        var = Credentials.reference(value)
        if var is not None:
            if not os.environ.get(var):
                raise UsageError(f"--credential {scheme}=env:{var}: the environment variable {var} is not set")
            value = os.environ[var]
        out.setdefault(scheme, set()).add(value)
    return out


def _collection(spec: str) -> Any:
    from atc.cli.common import load_collections

    path = Path(spec).expanduser()
    if not path.exists() and (path.suffix.lower() in _SPEC_SUFFIXES or "/" in spec):
        raise UsageError(f"no such spec file: {spec}", hint="give a spec file or the name of an imported collection")
    return load_collections([spec])[0]


def _mock(args: argparse.Namespace) -> int:
    from atc.mock import MockServer

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a port number (0-65535; 0 picks a free one)")
    collection = _collection(args.spec)
    server = MockServer(collection, port=args.port, host=args.host, verbose=args.verbose, auth=not args.no_auth,
                        credentials=_accepted(args.credential, collection))
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        schemes = sorted({s for t in collection.tools for alt in t.security for s in alt}) if not args.no_auth else []
        if args.json:
            print_json({"url": server.url, "operations": server.operations, "collection": collection.name,
                        "port": server.port, "pid": os.getpid(), "credentials": schemes})
        else:
            note = ""
            if schemes:
                which = "the values given" if args.credential else "any value"
                note = f"; credentials required: {', '.join(schemes)} ({which}; --no-auth turns this off)"
            sys.stdout.write(f"atc mock: serving {collection.name} on {server.url} ({server.operations} operations"
                             f"{note})\n")
            sys.stdout.flush()
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not args.json:
        sys.stderr.write("atc mock: stopped\n")
    return 0
