"""``atc tools``: import, list, show, search and remove tool collections in the store.

Handlers import ``protocols`` lazily so that ``atc --help`` and the other commands do not pay for it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from atc.cli.common import print_json
from atc.config import atc_home

__all__ = ["register"]


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    tools = subparsers.add_parser("tools", parents=parents, help="import, list, show and search tool collections",
                                  description="Manage the tool collections in the store (ATC_HOME).")
    sub = tools.add_subparsers(dest="tools_command", metavar="SUBCOMMAND")
    tools.set_defaults(handler=lambda args: _help(tools))

    p = sub.add_parser("import", parents=parents, help="add a collection from a spec file, folder or URL",
                       description="Import an OpenAPI 3.0/3.1 or Swagger 2.0 document (JSON or YAML), a "
                       "ToolBench/RapidAPI tool file, folder or query file, or an MCP tools/list result. SPEC may "
                       "be an http(s) URL that serves the spec, or a live MCP server (mcp:'COMMAND ARGS', "
                       "mcp+http://HOST:PORT/PATH, an mcpServers JSON file): its tools/list is stored with how to "
                       "start or reach the server again. Repairs of well-known spec mistakes and problems "
                       "the import worked around are printed as warnings.")
    p.add_argument("spec", metavar="SPEC", help="spec file, ToolBench folder, http(s) URL, or a live MCP server: "
                   "mcp:'COMMAND ARGS', mcp+http://HOST:PORT/PATH, an mcpServers JSON file")
    p.add_argument("--name", help="collection name (default: from the spec title or file name)")
    p.add_argument("--base-url", help="server URL to use instead of the spec's servers")
    p.add_argument("--credential", action="append", default=[], metavar="KEY=env:VAR",
                   help="a secret for fetching SPEC from a URL (header:NAME, query:NAME, cookie:NAME, bearer, "
                        "basic); used for the download only, never stored")
    p.add_argument("--no-embed", action="store_true",
                   help="do not embed the tools for hybrid search now (BM25 works at once; the first search with "
                        "--retriever hybrid embeds what is missing)")
    p.add_argument("--read-only", action="append", default=[], metavar="PATTERN",
                   help="mark the tools whose name (a glob: '*_filter_post') or 'METHOD /path' matches as reads "
                        "(a POST that only searches): --writes deny lets them through, the write ledger skips "
                        "them, probing reads them (repeatable; see docs/writes.md)")
    p.add_argument("--writes-op", action="append", default=[], metavar="PATTERN",
                   help="mark the matching tools as writes (a GET that changes data); repeatable")
    p.set_defaults(handler=_import)

    p = sub.add_parser("list", parents=parents, help="the collections in the store")
    p.set_defaults(handler=_list)

    p = sub.add_parser("show", parents=parents, help="the protocols of a collection, or of one tool",
                       description="NAME is a collection (prints its tools' protocols) or a tool (prints "
                       "its full protocol); 'collection.tool' picks a tool of one collection, and so do the "
                       "two words 'collection tool'.")
    p.add_argument("name", metavar="NAME")
    p.add_argument("tool", metavar="TOOL", nargs="?", default=None,
                   help="a tool of the collection NAME (the same as NAME.TOOL)")
    p.set_defaults(handler=_show)

    p = sub.add_parser("search", parents=parents, help="the most relevant tools for a query",
                       description="Rank every tool of the store for QUERY with a retriever: bm25 (lexical), "
                       "hybrid (bm25 fused with embeddings), or a model-based one (reinvoke, anytool). The "
                       "default is hybrid when the index holds embeddings, else bm25; the output says which ran.")
    p.add_argument("query", metavar="QUERY")
    p.add_argument("-k", type=int, default=5, metavar="N", help="how many tools (default 5)")
    p.add_argument("--retriever", metavar="NAME", default=None,
                   help="bm25, hybrid, dense, reinvoke, anytool, or any registered retriever (default: automatic)")
    p.add_argument("--model", "-m", help="model of a model-based retriever (default: $ATC_MODEL)")
    p.set_defaults(handler=_search)

    p = sub.add_parser("server", parents=parents, help="the warm search server of this store: status, start, stop",
                       description="A hybrid search leaves a server behind that keeps numpy, the embedding "
                       "model and the index loaded, so that later searches of the same store answer fast "
                       "(ATC_SEARCH_SERVER=off: never; it ends after ATC_SEARCH_SERVER_IDLE seconds idle, "
                       "default 600). The answers are those the command computes itself.")
    p.add_argument("action", nargs="?", choices=("status", "start", "stop"), default="status")
    p.set_defaults(handler=_server)

    p = sub.add_parser("queries", parents=parents, help="generate Re-Invoke's synthetic queries for stored tools",
                       description="Ask the model for a few user requests per tool (Re-Invoke's index), kept in "
                       "ATC_HOME/retrieval/queries by a hash of each tool's document: unchanged tools are never "
                       "asked about again and an interrupted run keeps what it did. Default: every collection.")
    p.add_argument("collections", nargs="*", metavar="COLLECTION", help="collections to cover (default: all)")
    p.add_argument("--per-tool", type=int, default=5, metavar="N", help="synthetic queries per tool (5)")
    p.add_argument("--batch", type=int, default=8, metavar="N", help="tools per model request (8)")
    p.add_argument("--model", "-m", help="model name (default: $ATC_MODEL)")
    p.set_defaults(handler=_queries)

    p = sub.add_parser("remove", parents=parents, help="remove a collection from the store")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(handler=_remove)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


#: Warnings printed by ``tools import`` before "... and N more" (all of them are in --json).
_SHOWN_WARNINGS = 20


def _fetch_with(spec: str, items: list[str]) -> tuple[dict[str, str], str | None]:
    """Headers, and the URL with query credentials added, for fetching ``spec`` (a URL)."""
    import os

    from atc.cli.common import parse_credentials
    from atc.errors import ConfigError, UsageError
    from sandbox.gateway.http.credentials import PLACEMENT_FORMS, apply_secret, env_var, parse_placement

    if not items:
        return {}, None
    if not spec.lower().startswith(("http://", "https://")):
        raise UsageError("--credential of 'tools import' is for fetching a spec from a URL",
                         hint="give the secrets at run time: atc run/solve --credential ...")
    headers: dict[str, str] = {}
    query: list[tuple[str, str]] = []
    cookies: list[tuple[str, str]] = []
    for key, source in parse_credentials(items).items():
        placement = parse_placement(key)
        if placement is None:
            raise UsageError(f"--credential {key}: say where the secret goes to fetch the spec",
                             hint=f"one of: {PLACEMENT_FORMS}")
        var = env_var(source)
        if var not in os.environ:
            raise ConfigError(f"--credential {key}=env:{var}: environment variable {var} is not set",
                              hint=f"export {var}=... before importing")
        apply_secret(placement.scheme(), os.environ[var], headers, query, cookies)
    if cookies:
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies)
    if not query:
        return headers, None
    from urllib.parse import urlencode

    return headers, spec + ("&" if "?" in spec else "?") + urlencode(query)


def _index_with_report(store: Any, embedder: Any, *, deferred: bool = False) -> dict[str, Any] | None:
    """Bring the retrieval index up to date with the store, embedding new tools with ``embedder``
    (None: BM25 only) and telling the user how it goes (embed_report.py). The report's JSON, or
    None when nothing was embedded."""
    from atc.cli.embed_report import EmbedReport
    from atc.retrieval.index import update_index

    if embedder is None:
        update_index(atc_home(), store=store, embedder=None, deferred=deferred)
        return None
    report = EmbedReport(embedder)
    index = update_index(atc_home(), store=store, embedder=embedder, progress=report)
    out = report.to_dict() if report.done else None
    # Two stages (the local model): the full model's vectors of the new tools are computed by a
    # process of their own after the import returns; searches compute what they need meanwhile.
    # A few are computed here (fill.INLINE). Either way the fast encoder is written first, when
    # it is not there yet, saying so: a search would otherwise pay its few seconds unannounced.
    from atc.retrieval.fill import INLINE, complete, pending, spawn

    waiting = pending(index, embedder)
    if waiting:
        report.prepare_full()
        if waiting <= INLINE:
            complete(index, embedder, EmbedReport(embedder, full=True))
            if out is not None:
                out["background"] = 0
        else:
            pid = spawn(atc_home())
            report.background(waiting, pid)
            if out is not None:
                out["background"] = waiting if pid is not None else 0
                out["pid"] = pid
    return out


def _import_embedder(args: argparse.Namespace) -> Any:
    """The embedder an import uses, checked before anything is stored (None: BM25 only)."""
    from atc.retrieval.embedders import make_embedder

    embedder = make_embedder()  # a misconfigured embedder is said before anything is stored
    return None if getattr(args, "no_embed", False) else embedder


def _mark(collections: list[Any], args: argparse.Namespace) -> None:
    """``--read-only`` / ``--writes-op``: mark the matching tools (``protocols.writes.mark``); a
    pattern that matches no tool is a usage error before anything is stored (a typo would leave a
    write unmarked, or a read refused under ``--writes deny``)."""
    from atc.errors import UsageError
    from protocols.writes import mark, unmatched

    reads, writes = list(getattr(args, "read_only", None) or []), list(getattr(args, "writes_op", None) or [])
    if not reads and not writes:
        return
    for pattern in reads + writes:
        if all(unmatched(c, [pattern]) for c in collections):
            raise UsageError(f"--read-only/--writes-op {pattern!r} matches no tool",
                             hint="give a tool name or a glob ('*_filter_post'), or 'METHOD /path' "
                                  "('POST /work_pools/filter')")
    for c in collections:
        mark(c, reads, writes)


def _import(args: argparse.Namespace) -> int:
    from atc.toolsets import is_mcp
    from protocols.loaders import load_spec
    from protocols.store import Store

    if is_mcp(args.spec):
        return _import_mcp(args)
    if args.spec.startswith("py:"):
        from atc.errors import UsageError

        raise UsageError(f"{args.spec}: Python functions live in the process that runs them; they are not imported",
                         hint="give them to each command instead: atc solve ... --tools py:MODULE:NAME")
    headers, fetch_url = _fetch_with(args.spec, list(getattr(args, "credential", None) or []))
    embedder = _import_embedder(args)
    collection = load_spec(args.spec, name=args.name, base_url=args.base_url, headers=headers or None,
                           fetch_url=fetch_url)
    _mark([collection], args)
    store = Store(atc_home())
    store.add(collection)
    # The retrieval index follows the store; vectors of unchanged tools come from the cache.
    embedded = _index_with_report(store, embedder, deferred=args.no_embed)
    warnings = collection.warnings
    if args.json:
        print_json({"ok": True, "collection": collection.name, "tools": len(collection.tools),
                    "source": collection.source, "source_format": collection.source_format,
                    "servers": collection.servers, "names": [t.name for t in collection.tools],
                    "security_schemes": {k: v.to_dict() for k, v in collection.security_schemes.items()},
                    "warnings": [w.to_dict() for w in warnings], "embedded": embedded})
    else:
        for w in warnings[:_SHOWN_WARNINGS]:
            sys.stderr.write(f"atc: warning: {collection.name}: {w}\n")
        if len(warnings) > _SHOWN_WARNINGS:
            sys.stderr.write(f"atc: warning: {collection.name}: ... and {len(warnings) - _SHOWN_WARNINGS} more "
                             "(all of them: --json, or 'atc tools show NAME --json')\n")
        server = f", server {collection.servers[0]}" if collection.servers and collection.servers[0] else ""
        print(f"imported {collection.name}: {len(collection.tools)} tools ({collection.source_format}{server})")
    return 0


def _import_mcp(args: argparse.Namespace) -> int:
    """Live MCP servers: one collection per server, from its ``tools/list``, stored with how to
    reach the server again (command, args and env NAMES, or the URL)."""
    from atc.config import mcp_start_timeout
    from atc.errors import UsageError
    from protocols.store import Store
    from sandbox.gateway.mcp.connections import servers
    from sandbox.gateway.mcp.sources import load_source

    if args.base_url or getattr(args, "credential", None):
        raise UsageError("--base-url and --credential are for HTTP specs, not MCP servers",
                         hint="give an MCP server's secrets in its config's \"env\" (they go to the server only)")
    servers().start_timeout = mcp_start_timeout()
    embedder = _import_embedder(args)
    collections = load_source(args.spec, name=args.name)
    _mark(collections, args)
    store = Store(atc_home())
    for collection in collections:
        store.add(collection)
    # MCP tools are searched like any others
    embedded = _index_with_report(store, embedder, deferred=args.no_embed)
    if args.json:
        print_json({"ok": True, "collections": [
            {"collection": c.name, "tools": len(c.tools), "source": c.source, "source_format": c.source_format,
             "mcp_server": c.mcp_server.to_dict() if c.mcp_server else None, "names": [t.name for t in c.tools]}
            for c in collections],
            # the first one's fields at the top level too, as for every other import
            "collection": collections[0].name, "tools": len(collections[0].tools), "source": collections[0].source,
            "source_format": "mcp", "servers": [], "names": [t.name for t in collections[0].tools],
            "security_schemes": {}, "warnings": [], "embedded": embedded})
    else:
        for c in collections:
            where = c.mcp_server.describe() if c.mcp_server else c.source
            print(f"imported {c.name}: {len(c.tools)} tools (mcp, server {where})")
    return 0


def _list(args: argparse.Namespace) -> int:
    from protocols.store import Store

    infos = Store(atc_home()).list()
    if args.json:
        print_json({"collections": [i.to_dict() for i in infos]})
        return 0
    if not infos:
        print("no collections yet: add one with 'atc tools import SPEC'")
        return 0
    width = max(len(i.name) for i in infos)
    for i in infos:
        print(f"{i.name:<{width}}  {i.tools:>6} tools  {i.source_format:<12} {i.imported_at}  {i.source}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from protocols.store import Store

    store = Store(atc_home())
    if args.tool is not None:  # "COLLECTION TOOL": the tool of that collection
        if not store.has(args.name):
            from atc.errors import UsageError

            raise UsageError(f"no collection {args.name!r}: 'atc tools show COLLECTION TOOL' names a tool of a "
                             "stored collection", hint="see 'atc tools list', or give one name: COLLECTION.TOOL or TOOL")
        args.name = f"{args.name}.{args.tool}"
    if store.has(args.name):
        collection = store.get(args.name)
        if args.json:
            print_json(collection.to_dict())
            return 0
        from protocols.render import render_compact

        head = f"{collection.name}: {len(collection.tools)} tools ({collection.source_format})"
        if collection.mcp_server is not None:
            server = collection.mcp_server
            head += f", MCP server ({server.transport}) {server.describe()}"
            if server.cwd:
                head += f" (run in {server.cwd})"
            if server.env:
                head += f"\nenv (from the host environment at start): {', '.join(sorted(server.env))}"
            _out(head + "\n\n" + render_compact(collection.tools) + "\n")
            return 0
        if collection.servers and collection.servers[0]:
            head += f", server {collection.servers[0]}"
        else:
            head += ", no server URL (runs need --base-url)"
        head += "\n" + _auth_lines(collection)
        if collection.warnings:
            head += f"\n{len(collection.warnings)} import warning(s): see --json"
        _out(head + "\n\n" + render_compact(collection.tools) + "\n")
        return 0
    tool = store.get_tool(args.name)
    from protocols.writes import judge, looks_like_read

    verdict = judge(tool)
    if args.json:
        print_json({**tool.to_dict(), "write": verdict.write, "write_reason": verdict.reason})
        return 0
    from protocols.render import render_full

    _out(render_full(tool) + "\n" + _write_line(tool, verdict, looks_like_read(tool)) + "\n")
    return 0


def _write_line(tool: Any, verdict: Any, read_hint: str | None) -> str:
    """What ``--writes deny`` and the write ledger make of the tool, and why."""
    if not verdict.write:
        return f"reads only: {verdict.reason}"
    line = f"a write: {verdict.reason} (--writes deny refuses it; the write ledger sends it once per task)"
    if read_hint:
        line += (f"\n  it looks like a read ({read_hint}): if it is, re-import with "
                 f"--read-only {tool.name}")
    return line


def _auth_lines(collection: Any) -> str:
    """How the collection authenticates, and how to give each credential at run time."""
    schemes = collection.security_schemes
    if not schemes:
        return ("auth: the spec declares no security scheme (if the API wants a key, say where it goes: "
                "--credential header:NAME=env:VAR, query:NAME=..., cookie:NAME=..., bearer=..., basic=...)")
    lines = ["auth:"]
    for key, scheme in schemes.items():
        if scheme.type == "apiKey":
            what = f"API key in {scheme.location} {scheme.param!r}"
        elif scheme.type == "http":
            what = f"HTTP {scheme.scheme or 'bearer'}"
        else:
            what = scheme.type
        used = sum(1 for t in collection.tools if any(key in alt for alt in t.security))
        lines.append(f"  {key}: {what}; used by {used} tool(s); --credential {key}=env:VAR")
    return "\n".join(lines)


def _index_embedder() -> Any:
    """The embedder the live index was built with, when it can be made here (else BM25 only)."""
    from atc.retrieval.embedders import make_embedder
    from atc.retrieval.index import index_dir

    if not (index_dir(atc_home()) / "CURRENT").exists():
        return make_embedder()
    from atc.retrieval.index import open_index

    if open_index(atc_home(), refresh=False).embedder is None:
        return None
    return make_embedder()


def _search(args: argparse.Namespace) -> int:
    from atc.config import search_server_mode
    from atc.errors import UsageError

    if args.k < 1:
        raise UsageError("-k must be at least 1")
    if not args.query.strip():
        raise UsageError("the query is empty", hint='example: atc tools search "movie credits" -k 5')
    # One request's products are too small for BLAS threads to help, and starting OpenBLAS's
    # pool made numpy's import take 190 ms instead of 110 ms here (a variable the user set wins).
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    home = atc_home()
    warm = search_server_mode() != "off"
    if warm:
        from atc.retrieval.warm import ask

        answered = ask(home, args.query, args.k, args.retriever)
        if answered is not None:
            return _print_search(args, *answered)
    result, empty = _search_here(args)
    if warm and not empty and result.retriever in ("hybrid", "dense"):
        from atc.retrieval.warm import LLM_FREE, spawn

        # Worth keeping warm only where getting ready is the cost: numpy and the embedding model.
        if args.retriever in LLM_FREE:
            spawn(home)
    return _print_search(args, result.to_dict(), empty)


def _search_here(args: argparse.Namespace) -> tuple[Any, bool]:
    """The search in this process: the result, and whether the store is empty."""
    from atc.retrieval.api import load_builtins, search_store
    from atc.retrieval.base import factory

    if args.retriever:
        load_builtins()
        factory(args.retriever)  # an unknown name is a usage error, even over an empty store
    options: dict[str, Any] = {}
    if args.retriever not in (None, "auto", "bm25", "dense", "hybrid"):
        from atc.llm.client import make_client

        options["client"] = make_client(args.model)
    if args.retriever in ("dense", "hybrid"):  # over an index without vectors, they are embedded first
        from atc.cli.embed_report import EmbedReport

        options["embed_progress"] = EmbedReport()
    return search_store(args.query, args.k, args.retriever, home=atc_home(), **options)


def _print_search(args: argparse.Namespace, doc: dict[str, Any], empty: bool) -> int:
    """Print a search's ``SearchResult.to_dict()`` (computed here or by the search server)."""
    if args.json:
        print_json({"query": args.query, **doc})
        return 0
    for note in doc["notes"]:
        sys.stderr.write(f"atc: note: {note}\n")
    if empty:
        print("the store is empty: add a collection with 'atc tools import SPEC'")
        return 0
    hits = doc["hits"]
    if not hits:
        print("no tool matches")
        return 0
    width = max(len(h["name"]) for h in hits)
    for h in hits:
        print(f"{h['score']:6.2f}  {h['name']:<{width}}  [{h['collection']}]  {h['description'][:80]}")
    print(f"({doc['retriever']})")
    return 0


def _server(args: argparse.Namespace) -> int:
    from atc.retrieval import server

    home = atc_home()
    if args.action == "start":
        info = server.start(home)
    elif args.action == "stop":
        stopped = server.stop(home)
        info = server.status(home)
        if not stopped:
            info.notes.append("no search server was running for this store")
    else:
        info = server.status(home)
    if args.json:
        print_json(info.to_dict())
    else:
        for note in info.notes:
            sys.stderr.write(f"atc: note: {note}\n")
        if info.running:
            print(f"search server of {info.home}: pid {info.pid}, up {info.uptime_s} s, idle {info.idle_s} s, "
                  f"{info.queries} queries, embedder {info.embedder or 'none'}")
        else:
            print("no search server is running for this store")
    return 1 if args.action == "start" and not info.running else 0


def _queries(args: argparse.Namespace) -> int:
    from atc.errors import UsageError
    from atc.llm.client import make_client
    from atc.retrieval.queries import QueryStore, generate
    from protocols.store import Store

    if args.per_tool < 1 or args.batch < 1:
        raise UsageError("--per-tool and --batch must be at least 1")
    store = Store(atc_home())
    names = list(args.collections) or store.names()
    tools = [t for name in names for t in store.get(name).tools]
    if not tools:
        raise UsageError("no tools to cover", hint="import a collection first: atc tools import SPEC")
    client = make_client(args.model)
    # Our own text, carriage returns included: written to the real stream, not through the
    # wrapper that escapes the control characters of hostile text on a terminal.
    term = sys.__stderr__ if not args.json and sys.stderr.isatty() else None

    def progress(done: int, total: int) -> None:
        if term is not None:
            term.write(f"\rsynthetic queries: {done}/{total} tools")
            term.flush()

    report = generate(tools, client, QueryStore(atc_home()), per_tool=args.per_tool, batch=args.batch,
                      on_progress=progress)
    if term is not None:
        term.write("\n")
    if args.json:
        print_json(report.to_dict())
    else:
        u = report.usage
        print(f"{report.tools} tools: {report.cached} already done, {report.generated} generated, {report.failed} "
              f"failed; {u['llm_calls']} model calls, {u['prompt_tokens']} prompt + {u['completion_tokens']} "
              "completion tokens")
        for error in report.errors:
            sys.stderr.write(f"atc: error: {error}\n")
    return 0 if report.to_dict()["ok"] else 1


def _remove(args: argparse.Namespace) -> int:
    from protocols.store import Store

    store = Store(atc_home())
    store.remove(args.name)
    _index_with_report(store, _index_embedder())
    if args.json:
        print_json({"ok": True, "removed": args.name})
    else:
        print(f"removed {args.name}")
    return 0


def _out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
