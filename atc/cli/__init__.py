"""The ``atc`` command: a thin layer over the library.

Each command group lives in its own module (``tools``, ``run``, ``solve``, ``probe``, ``mock``, ``serve``,
``sandbox``) exposing ``register(subparsers, parents)``; handlers take the parsed arguments and
return the exit code. This module owns the conventions of ``shared/interface.md``: exit codes,
one or two readable lines on stderr, no traceback unless ``--debug``, and with ``--json`` exactly
one JSON document on stdout, also on failure.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from atc.errors import AtcError, UsageError

__all__ = ["main", "build_parser"]

COMMAND_MODULES = ("tools", "run", "solve", "batch", "eval", "probe", "mock", "sandbox", "serve")


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so that --json can still print one document. The
    message names the command without the program (``atc: error: tools show: ...``): the error
    line already starts with ``atc``."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.partition(" ")[2]
        raise UsageError(f"{command}: {message}" if command else message, hint=f"see '{self.prog} --help'")


def _common_flags(suppress: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    default: Any = argparse.SUPPRESS if suppress else False
    p.add_argument("--json", action="store_true", default=default, help="print one JSON document on stdout")
    p.add_argument("--debug", action="store_true", default=default, help="show tracebacks of internal errors")
    return p


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (``argv`` naming a command) one with that command only: the other
    command modules are neither imported nor registered, a fifth of a short command's start."""
    parser = _Parser(
        prog="atc",
        description="Automatic Tool Chain: a model writes one program that chains API calls, "
        "a sandbox runs it, and failures are traced back to the tool at fault.",
        parents=[_common_flags(suppress=False)],
    )
    from atc import __version__

    parser.add_argument("--version", action="version", version=f"atc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    parents = [_common_flags(suppress=True)]
    first = next((a for a in argv or () if not a.startswith("-")), None)
    for name in (first,) if first in COMMAND_MODULES else COMMAND_MODULES:
        importlib.import_module(f"atc.cli.{name}").register(sub, parents)
    return parser


def _print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    streams = sys.stdout, sys.stderr
    if "--json" not in argv:
        from atc.cli.common import terminal_safe

        sys.stdout, sys.stderr = terminal_safe(sys.stdout), terminal_safe(sys.stderr)
    try:
        return _main(argv)
    finally:
        if "sandbox.gateway.mcp.connections" in sys.modules:  # stop the MCP servers this command started
            sys.modules["sandbox.gateway.mcp.connections"].close_servers()
        sys.stdout, sys.stderr = streams


def _main(argv: list[str]) -> int:
    want_json = "--json" in argv
    debug = "--debug" in argv
    try:
        from atc.config import trace_exporter

        exporter = trace_exporter()
        if exporter:  # ATC_TRACE: only then is OpenTelemetry imported at all
            from atc.tracing import configure

            configure(exporter)
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        if not getattr(args, "handler", None):
            parser.print_help()
            return 0 if not argv else 2
        code: int = args.handler(args)
        return code
    except AtcError as exc:
        if debug:
            raise
        if want_json:
            _print_json({"ok": False, "error": exc.to_dict()})
        message = exc.message[4:] if exc.message.startswith("atc ") else exc.message  # "atc: error: atc ..." once
        sys.stderr.write(f"atc: error: {message}\n")
        if exc.hint:
            sys.stderr.write(f"  {exc.hint}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("atc: interrupted\n")
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # our bug: say so plainly, keep the traceback behind --debug
        if debug:
            raise
        if want_json:
            _print_json({"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}})
        sys.stderr.write(f"atc: internal error: {type(exc).__name__}: {exc}\n  run again with --debug for the traceback\n")
        return 1


def entry() -> NoReturn:
    code = main()
    # The process ends here: exit handlers still run (they close sandboxes and remove containers),
    # but the collector no longer walks every object of every module while the interpreter shuts
    # down -- about 0.2 s of CPU once the openai package is loaded.
    gc.freeze()
    sys.exit(code)
