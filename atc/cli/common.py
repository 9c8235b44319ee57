"""Pieces shared by the command modules: RUN OPTIONS, resolving ``--tools``, printing."""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from atc.config import atc_home
from atc.errors import UsageError

if TYPE_CHECKING:  # imported by the handlers that use them: ``atc --help`` needs neither
    from sandbox.api import Limits, Toolset

__all__ = ["add_run_options", "limits_from_args", "toolset_from_args", "load_collections", "print_json",
           "terminal_safe"]

_CREDENTIAL = re.compile(r"^(?P<scheme>[^=]+)=env:(?P<var>[A-Za-z_][A-Za-z0-9_]*)$")


def add_run_options(p: argparse.ArgumentParser, *, tools_flag: bool = True) -> None:
    """RUN OPTIONS of interface.md (and ``--tools`` when the command takes it as a flag)."""
    if tools_flag:
        p.add_argument("--tools", "-t", action="append", required=True, metavar="T",
                       help="a spec file or the name of an imported collection (repeatable)")
    p.add_argument("--base-url", help="override the spec's server URL")
    p.add_argument("--credential", action="append", default=[], metavar="SCHEME=env:VAR",
                   help="secret for a security scheme, read on the host from env var VAR (repeatable)")
    p.add_argument("--sandbox", choices=["docker", "local"], default=None,
                   help="where programs run (default: docker when an engine and the image are there, else local)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="wall clock for the program (60)")
    p.add_argument("--memory", type=int, default=512, metavar="MB", help="memory limit (512)")
    p.add_argument("--max-calls", type=int, default=100, metavar="N", help="tool calls per program (100)")


def limits_from_args(args: argparse.Namespace) -> Limits:
    from sandbox.api import Limits

    if args.timeout <= 0 or args.memory <= 0 or args.max_calls < 0:
        raise UsageError("--timeout and --memory must be positive, --max-calls at least 0")
    return Limits(timeout=args.timeout, memory_mb=args.memory, max_calls=args.max_calls)


def parse_credentials(items: list[str]) -> dict[str, str]:
    creds: dict[str, str] = {}
    for item in items:
        m = _CREDENTIAL.match(item)
        if not m:
            raise UsageError(f"--credential {item!r} is not SCHEME=env:VAR",
                             hint="example: --credential api_key=env:TMDB_TOKEN")
        creds[m.group("scheme")] = f"env:{m.group('var')}"
    return creds


def load_collections(specs: list[str], *, base_url: str | None = None) -> list[Any]:
    """Each T of ``--tools``: a spec file when the path exists, else a collection in the store."""
    from protocols.loaders import load_spec

    store = None
    out = []
    for t in specs:
        path = Path(t).expanduser()
        if path.exists():
            out.append(load_spec(path))
        else:
            from protocols.store import Store

            store = store or Store(atc_home())
            out.append(store.get(t))
    return out


def toolset_from_args(args: argparse.Namespace) -> Toolset:
    from sandbox.api import Toolset

    return Toolset(
        collections=load_collections(args.tools),
        base_url=args.base_url,
        credentials=parse_credentials(args.credential),
    )


def print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


# C0 controls but tab and newline, DEL, and C1 controls: what a terminal would act on.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class _TerminalSafe(io.TextIOBase):
    """A text stream that shows control characters as ``\\x1b``-style escapes instead of sending
    them: a program's answer, its stderr and its exception messages are hostile text, and an
    escape sequence must not be able to rewrite the user's terminal (titles, cursor, hidden
    lines)."""

    def __init__(self, raw: TextIO) -> None:
        self._raw = raw

    def write(self, text: str) -> int:
        self._raw.write(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text))
        return len(text)

    def flush(self) -> None:
        self._raw.flush()

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._raw.fileno()


def terminal_safe(stream: TextIO) -> TextIO:
    """``stream`` itself when it is not a terminal (pipes and files get the exact bytes), else a
    wrapper that escapes control characters."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return stream
    return _TerminalSafe(stream) if tty else stream  # type: ignore[return-value]
