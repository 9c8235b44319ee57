"""``atc serve --tools T [RUN OPTIONS] [--transport stdio|http] [--port P] [--token-env VAR]...``.

An MCP server (``atc/serve/``) that gives any MCP client chain-of-tools over the collections:
``search_tools``, ``describe_tools``, ``run_program`` (and, with ``--proxy-tools``, each tool
as its own MCP tool). ``stdio`` (the default) is for desktop hosts and coding agents that start
the server themselves: stdout is the MCP channel, so nothing else is printed there, and the
server ends when the host closes its stdin. ``http`` serves streamable HTTP at ``/mcp`` on
127.0.0.1 (``--host`` to change it; another than loopback needs ``--allow-host``), requiring
``Authorization: Bearer`` with the token read from ``$VAR`` (``--token-env``, default
``ATC_SERVE_TOKEN``; repeated, one token per client); once it listens it prints one line on
stderr (with ``--json``: the document ``{"url", "transport", "tools", "collections", "sandbox"}``
on stdout) and serves until SIGINT/SIGTERM (exit 0).

Every check that can fail is made before serving: the tools load, the credentials are set, the
tokens are there, long enough and distinct, the allowed hosts are given where needed, the address
can be bound (exit 2 otherwise).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from atc.cli.common import (
    add_run_options,
    limits_from_args,
    print_json,
    recording_from_args,
    toolset_from_args,
)
from atc.errors import UsageError

__all__ = ["register"]


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "serve", parents=parents, help="an MCP server: chain-of-tools for any MCP client or agent framework",
        description="Serve the collections to MCP clients: search_tools, describe_tools and run_program (one "
        "program that chains many calls, run in the sandbox, with attributed errors). stdio by default; "
        "--transport http serves streamable HTTP at /mcp on 127.0.0.1 behind a bearer token.")
    add_run_options(p, ledger=False)
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                   help="stdio (default: the host starts atc) or http (streamable HTTP at /mcp)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on with --transport http (127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port for --transport http (8765; 0 picks a free one)")
    p.add_argument("--token-env", action="append", default=None, metavar="VAR",
                   help="environment variable holding a bearer token HTTP clients must send (ATC_SERVE_TOKEN); "
                        "repeat it to give each client a token of its own, named by VAR in budgets and logs")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a host name or address clients use to reach the server (repeatable); requests naming "
                        "another Host or Origin are refused. Loopback names are always allowed; another --host "
                        "than loopback needs at least one")
    p.add_argument("--retriever", default=None, metavar="NAME",
                   help="how search_tools ranks: bm25, dense or hybrid (default: bm25 for up to 30 tools, "
                        "else hybrid when embeddings are available)")
    p.add_argument("--proxy-tools", action="store_true",
                   help="also expose every tool as its own MCP tool (at most 100), through the gateway")
    p.add_argument("--session-max-calls", type=int, default=1000, metavar="N",
                   help="tool calls one client session may make in all, over its programs and proxied calls (1000)")
    p.add_argument("--session-max-runs", type=int, default=200, metavar="N",
                   help="programs one client session may run (200)")
    p.add_argument("--token-max-calls", type=int, default=None, metavar="N",
                   help="tool calls all clients of one token may make in all, with sessions or without (no limit)")
    p.add_argument("--token-max-runs", type=int, default=None, metavar="N",
                   help="programs all clients of one token may run in all (no limit)")
    p.add_argument("--server-max-calls", type=int, default=None, metavar="N",
                   help="tool calls all clients together may make while the server runs (no limit)")
    p.add_argument("--server-max-runs", type=int, default=None, metavar="N",
                   help="programs all clients together may run while the server runs (no limit)")
    p.add_argument("--concurrency", type=int, default=4, metavar="N",
                   help="programs running at once over all sessions; more wait their turn (4)")
    p.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from sandbox.gateway.mcp import require_sdk

    require_sdk()
    http = args.transport == "http"
    if args.json and not http:
        raise UsageError("--json needs --transport http: with stdio, stdout is the MCP channel")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a port number (0-65535)")
    limits = limits_from_args(args)
    from atc.serve.settings import ServeSettings, check_retriever

    check_retriever(args.retriever)  # before anything starts (the settings are made once the tools load)
    token_vars = list(dict.fromkeys(args.token_env or ["ATC_SERVE_TOKEN"]))
    tokens: dict[str, str] = {}
    sock, hosts = None, None
    if http:  # the tokens, the hosts and the address first: a refusal comes before anything starts
        from atc.config import serve_token
        from atc.serve.hosts import HostCheck, is_loopback
        from atc.serve.http import bind, check_tokens

        tokens = check_tokens({var: serve_token(var) for var in token_vars})
        hosts = HostCheck.for_bind(args.host, args.allow_host)
        sock = bind(args.host, args.port)
        if not is_loopback(args.host):
            sys.stderr.write(f"atc serve: listening on {args.host}, reachable from other machines as "
                             f"{', '.join(args.allow_host)}; only the bearer token{'s' if len(tokens) > 1 else ''} "
                             f"in ${', $'.join(tokens)} keep{'' if len(tokens) > 1 else 's'} them out\n")
    elif args.allow_host:
        raise UsageError("--allow-host is for --transport http")
    from sandbox.execute import check_toolset, prepare

    pending = prepare(args.sandbox, limits)  # the sandbox starts while the tools load
    toolset = toolset_from_args(args)
    check_toolset(toolset)
    recording = recording_from_args(args)
    if recording is not None:
        toolset = recording.wrap_toolset(toolset)
    settings = ServeSettings(toolset=toolset, limits=limits, sandbox=args.sandbox, retriever=args.retriever,
                             proxy_tools=args.proxy_tools, session_max_calls=args.session_max_calls,
                             session_max_runs=args.session_max_runs, token_max_calls=args.token_max_calls,
                             token_max_runs=args.token_max_runs, server_max_calls=args.server_max_calls,
                             server_max_runs=args.server_max_runs, concurrency=args.concurrency,
                             writes=args.writes)
    backend = pending.backend()
    from atc.serve.server import build_server

    server = build_server(settings, backend)
    _log_to_stderr()
    if sock is None:
        import anyio

        try:
            anyio.run(server.run_stdio_async)
        except BaseExceptionGroup as group:
            if not _client_gone(group):
                raise
        return 0
    assert hosts is not None
    from atc.serve.http import PATH, listen

    host, port = sock.getsockname()[:2]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}{PATH}"
    if args.json:
        print_json({"url": url, "transport": "http", "tools": len(toolset.tools),
                    "collections": [c.name for c in toolset.collections], "sandbox": backend.name,
                    "proxy_tools": args.proxy_tools})
    else:
        sys.stderr.write(f"atc serve: MCP on {url} ({server.catalog.summary()}; sandbox {backend.name}); "
                         f"clients send Authorization: Bearer ${' or $'.join(tokens)}\n")
    sys.stderr.flush()
    listen(server, sock, tokens, hosts)
    return 0


def _client_gone(exc: BaseException) -> bool:
    """Is every error in ``exc`` a write to a stdio client that is no longer there? (The host
    closed or lost the pipes: the end of the session, not a failure.)"""
    if isinstance(exc, BaseExceptionGroup):
        return all(_client_gone(e) for e in exc.exceptions)
    from anyio import BrokenResourceError, ClosedResourceError

    return isinstance(exc, BrokenPipeError | ConnectionResetError | BrokenResourceError | ClosedResourceError)


def _log_to_stderr() -> None:
    """One line per program run (outcome, calls, time; never arguments, answers or secrets)."""
    import logging  # only when serving: ``atc --help`` and every other command never load it

    log = logging.getLogger("atc.serve")
    if any(getattr(h, "atc_serve", False) for h in log.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("atc serve: %(message)s"))
    handler.atc_serve = True  # type: ignore[attr-defined]
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
