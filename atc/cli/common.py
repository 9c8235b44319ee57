"""Pieces shared by the command modules: RUN OPTIONS, resolving ``--tools``, printing."""

from __future__ import annotations

import argparse
import io
import json
import re
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from atc.cli.writes import add_write_options
from atc.errors import UsageError

if TYPE_CHECKING:  # imported by the handlers that use them: ``atc --help`` needs neither
    from atc.loop.strategies.registry import Choice
    from atc.workflows.replay import Recording
    from protocols.model import Collection
    from sandbox.api import Credentials, Limits, Toolset

__all__ = ["add_run_options", "add_budget_options", "add_answer_option", "answer_from_args", "budget_from_args", "strategy_from_args", "recording_from_args", "limits_from_args", "toolset_from_args", "load_collections", "print_json",
           "terminal_safe", "stop_on_signals"]

#: ``NAME=VALUE`` of the per-collection forms of --base-url and --validation (NAME: a collection).
_PER_COLLECTION = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)=(?P<value>.+)$")


def add_run_options(p: argparse.ArgumentParser, *, tools_flag: bool = True, max_calls: bool = True,
                    writes: bool = True, ledger: bool = True) -> None:
    """RUN OPTIONS of interface.md (and ``--tools`` when the command takes it as a flag).
    ``max_calls=False`` leaves ``--max-calls`` to the command (``atc probe`` gives it another meaning);
    ``writes=False`` leaves out ``--writes`` (probing has its scope instead), ``ledger=False``
    ``--ledger`` (a command that keeps its ledgers itself)."""
    if tools_flag:
        p.add_argument("--tools", "-t", action="append", required=True, metavar="T",
                       help="a spec file or URL, the name of an imported collection, an MCP server: "
                            "mcp:'COMMAND ARGS', mcp+http://HOST:PORT/PATH, an mcpServers JSON file, or Python "
                            "functions: py:PACKAGE.MODULE:NAME (repeatable)")
    p.add_argument("--base-url", action="append", default=[], metavar="[NAME=]URL",
                   help="override the spec's server URL: for every collection, or for collection NAME (repeatable)")
    p.add_argument("--credential", action="append", default=[], metavar="KEY=env:VAR",
                   help="a secret read on the host from env var VAR (repeatable). KEY is a security scheme of the "
                        "spec, or where the secret goes: header:NAME, query:NAME, cookie:NAME, bearer, basic; "
                        "prefix COLLECTION. to say which API it is for (petstore.api_key)")
    p.add_argument("--validation", action="append", default=[], metavar="[NAME=]MODE",
                   help="argument checks before a call: strict (default: refuse), warn (send, log what failed), "
                        "off; for every collection, or for collection NAME (repeatable)")
    p.add_argument("--sandbox", choices=["docker", "local"], default=None,
                   help="where programs run (default: docker when an engine and the image are there, else local)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="wall clock for the program (60)")
    p.add_argument("--memory", type=int, default=512, metavar="MB", help="memory limit (512)")
    if max_calls:
        p.add_argument("--max-calls", type=int, default=100, metavar="N", help="tool calls per program (100)")
    p.add_argument("--call-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="wall clock for one tool call, redirects and body included (30)")
    p.add_argument("--max-response-bytes", type=int, default=5_000_000, metavar="N",
                   help="largest response body of one call, compressed and decompressed (5000000)")
    p.add_argument("--record", metavar="DIR", default=None,
                   help="record every tool answer (after redaction: no secret is stored) and model answer in DIR")
    p.add_argument("--replay", metavar="DIR", default=None,
                   help="answer tool calls and model requests from a recording in DIR: no network, no model")
    if writes:
        add_write_options(p, ledger=ledger)


def add_budget_options(p: argparse.ArgumentParser) -> None:
    """What a solve may spend, whatever its strategy (``atc solve``, ``atc batch``, ``atc eval``):
    comparisons of strategies are made at equal cost."""
    p.add_argument("--max-model-calls", type=int, default=None, metavar="N",
                   help="model calls a task may make, retries and a model-based retriever included (no bound)")
    p.add_argument("--max-tokens", type=int, default=None, metavar="N",
                   help="prompt + completion tokens a task may spend; checked before each call (no bound)")
    p.add_argument("--max-steps", type=int, default=None, metavar="N",
                   help="the strategy's own bound: attempts (chain: --max-reflections + 1), turns (react: 12, "
                        "codeact: 10) or tree nodes, i.e. model turns (dfsdt: 200)")


def add_answer_option(p: argparse.ArgumentParser) -> None:
    """``--answer-schema FILE``: a typed answer (``atc.loop.answers``), for ``solve``, ``run``, ``batch``."""
    p.add_argument("--answer-schema", metavar="FILE", default=None,
                   help="a JSON Schema (JSON file) the answer must match: the program hands it to "
                        "final_answer(value), a mismatch is repaired like any failure, the JSON result's "
                        "\"value\" holds it")


def answer_from_args(args: argparse.Namespace) -> Any:
    """The ``AnswerSpec`` of ``--answer-schema FILE`` (read and checked now: exit 2 for a bad one), or None."""
    path = getattr(args, "answer_schema", None)
    if not path:
        return None
    from atc.loop.answers import AnswerSpec

    return AnswerSpec.from_file(Path(path))


def budget_from_args(args: argparse.Namespace) -> dict[str, int | None]:
    """``solve``'s keywords of the budget flags, checked (``UsageError``, exit 2)."""
    out: dict[str, int | None] = {}
    for flag, key in (("--max-model-calls", "max_model_calls"), ("--max-tokens", "max_tokens"),
                      ("--max-steps", "max_steps")):
        value = getattr(args, key, None)
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be at least 1")
        out[key] = value
    return out


def strategy_from_args(args: argparse.Namespace) -> Choice:
    """``--strategy NAME`` (default ``chain``) with ``--max-reflections`` and ``--max-steps``,
    resolved once into its typed settings (``atc.loop.strategies.registry.choose``: an unknown name or
    a bad bound is a ``UsageError`` now, before anything runs)."""
    from atc.loop.strategies.registry import DEFAULT, choose

    return choose(getattr(args, "strategy", None) or DEFAULT, max_reflections=getattr(args, "max_reflections", None),
                  max_steps=getattr(args, "max_steps", None))


def recording_from_args(args: argparse.Namespace) -> Recording | None:
    """The recording of ``--record DIR`` / ``--replay DIR`` (None without either)."""
    if not (getattr(args, "record", None) or getattr(args, "replay", None)):
        return None
    from atc.workflows.replay import open_recording

    return open_recording(args.record, args.replay)


def limits_from_args(args: argparse.Namespace) -> Limits:
    from sandbox.api import Limits

    if args.timeout <= 0 or args.memory <= 0 or args.max_calls < 0:
        raise UsageError("--timeout and --memory must be positive, --max-calls at least 0")
    call_timeout = getattr(args, "call_timeout", 30.0)
    max_response = getattr(args, "max_response_bytes", 5_000_000)
    if call_timeout <= 0 or max_response <= 0:
        raise UsageError("--call-timeout and --max-response-bytes must be positive")
    return Limits(timeout=args.timeout, memory_mb=args.memory, max_calls=args.max_calls,
                  call_timeout=call_timeout, max_response_bytes=max_response)


def split_per_collection(flag: str, items: list[str], *, is_default: Any) -> tuple[str | None, dict[str, str]]:
    """``(value for every collection, {collection: value})`` of a repeatable ``[NAME=]VALUE`` flag.
    ``is_default(item)`` tells an unprefixed value (a URL, a mode) from ``NAME=VALUE``."""
    every: str | None = None
    per: dict[str, str] = {}
    for item in items:
        m = _PER_COLLECTION.match(item)
        if m and not is_default(item):
            per[m.group("name")] = m.group("value")
        elif every is None:
            every = item
        else:
            raise UsageError(f"{flag} given twice without a collection name ({every!r}, {item!r})",
                             hint=f"use {flag} NAME=VALUE to set it for one collection")
    return every, per


def parse_credentials(items: list[str]) -> Credentials:
    """The ``--credential KEY=env:VAR`` flags, parsed once (``sandbox.api.Credentials.parse``)."""
    from sandbox.api import Credentials

    return Credentials.parse(items)


def load_collections(specs: list[str]) -> list[Collection]:
    """Each T of ``--tools``, read by the one reader of every entry point (``atc.toolsets``: its
    docstring has the rules, and the one for a word that names both a file here and a stored
    collection)."""
    from atc.toolsets import collections_of

    return collections_of(list(specs))


def _looks_like_url(item: str) -> bool:
    return "://" in item.split("=", 1)[0] or not _PER_COLLECTION.match(item)


def toolset_from_args(args: argparse.Namespace, collections: list[Any] | None = None) -> Toolset:
    """The run's tools: ``collections`` (default: those of ``--tools``) with ``--base-url``,
    ``--credential`` and ``--validation`` applied."""
    from sandbox.api import Toolset

    base_url, base_urls = split_per_collection("--base-url", list(args.base_url or []), is_default=_looks_like_url)
    for url in [base_url, *base_urls.values()]:
        if url is not None and not re.match(r"^https?://[^/\s]+", url):
            raise UsageError(f"--base-url {url!r} is not an http(s) URL", hint="example: --base-url http://127.0.0.1:8000")
    validation, validations = split_per_collection(
        "--validation", list(getattr(args, "validation", None) or []), is_default=lambda item: "=" not in item)
    return Toolset(
        collections=collections if collections is not None else load_collections(args.tools),
        base_url=base_url,
        credentials=parse_credentials(args.credential),
        base_urls=base_urls,
        validation=validation or "strict",
        validations=validations,
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


@contextmanager
def stop_on_signals(stop: threading.Event, message: str) -> Iterator[None]:
    """While inside: Ctrl-C (or SIGTERM) sets ``stop`` and prints ``message`` (the work in flight
    finishes and is kept); a second one raises ``KeyboardInterrupt`` (stop waiting)."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        sys.stderr.write(message)
        sys.stderr.flush()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
