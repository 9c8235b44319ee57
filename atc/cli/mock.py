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
        description="Serve a deterministic, schema-conforming fake of an OpenAPI spec on 127.0.0.1: "
        "ids returned by list and search endpoints resolve on the detail endpoints, unknown ids "
        "get 404, missing required parameters 400. Runs until Ctrl-C.")
    p.add_argument("spec", metavar="SPEC", help="a spec file (any format 'atc tools import' takes) or an imported collection")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="loopback address to bind: 127.0.0.1 (default), localhost or ::1")
    p.add_argument("--verbose", "-v", action="store_true", help="log every request on stderr")
    p.set_defaults(handler=_mock)


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
    server = MockServer(collection, port=args.port, host=args.host, verbose=args.verbose)
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        if args.json:
            print_json({"url": server.url, "operations": server.operations, "collection": collection.name,
                        "port": server.port, "pid": os.getpid()})
        else:
            sys.stdout.write(f"atc mock: serving {collection.name} on {server.url} ({server.operations} operations)\n")
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
