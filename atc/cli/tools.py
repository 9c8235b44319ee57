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

    p = sub.add_parser("import", parents=parents, help="add a collection from a spec file or folder",
                       description="Import an OpenAPI 3.0/3.1 or Swagger 2.0 document (JSON or YAML), a "
                       "ToolBench/RapidAPI tool file, folder or query file, or an MCP tools/list result.")
    p.add_argument("spec", metavar="SPEC", help="spec file or ToolBench folder")
    p.add_argument("--name", help="collection name (default: from the spec title or file name)")
    p.add_argument("--base-url", help="server URL to use instead of the spec's servers")
    p.set_defaults(handler=_import)

    p = sub.add_parser("list", parents=parents, help="the collections in the store")
    p.set_defaults(handler=_list)

    p = sub.add_parser("show", parents=parents, help="the protocols of a collection, or of one tool",
                       description="NAME is a collection (prints its tools' protocols) or a tool (prints "
                       "its full protocol); 'collection.tool' picks a tool of one collection.")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(handler=_show)

    p = sub.add_parser("search", parents=parents, help="the most relevant tools for a query (BM25)")
    p.add_argument("query", metavar="QUERY")
    p.add_argument("-k", type=int, default=5, metavar="N", help="how many tools (default 5)")
    p.set_defaults(handler=_search)

    p = sub.add_parser("remove", parents=parents, help="remove a collection from the store")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(handler=_remove)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _import(args: argparse.Namespace) -> int:
    from protocols.loaders import load_spec
    from protocols.store import Store

    collection = load_spec(args.spec, name=args.name, base_url=args.base_url)
    Store(atc_home()).add(collection)
    if args.json:
        print_json({"ok": True, "collection": collection.name, "tools": len(collection.tools),
                    "source": collection.source, "source_format": collection.source_format,
                    "servers": collection.servers, "names": [t.name for t in collection.tools]})
    else:
        server = f", server {collection.servers[0]}" if collection.servers else ""
        print(f"imported {collection.name}: {len(collection.tools)} tools ({collection.source_format}{server})")
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
    if store.has(args.name):
        collection = store.get(args.name)
        if args.json:
            print_json(collection.to_dict())
            return 0
        from protocols.render import render_compact

        head = f"{collection.name}: {len(collection.tools)} tools ({collection.source_format})"
        if collection.servers:
            head += f", server {collection.servers[0]}"
        _out(head + "\n\n" + render_compact(collection.tools) + "\n")
        return 0
    tool = store.get_tool(args.name)
    if args.json:
        print_json(tool.to_dict())
        return 0
    from protocols.render import render_full

    _out(render_full(tool) + "\n")
    return 0


def _search(args: argparse.Namespace) -> int:
    from atc.errors import UsageError
    from protocols.store import Store

    if args.k < 1:
        raise UsageError("-k must be at least 1")
    if not args.query.strip():
        raise UsageError("the query is empty", hint='example: atc tools search "movie credits" -k 5')
    store = Store(atc_home())
    hits = store.search(args.query, k=args.k)
    if args.json:
        print_json({"query": args.query, "hits": [h.to_dict() for h in hits]})
        return 0
    if not store.names():
        print("the store is empty: add a collection with 'atc tools import SPEC'")
        return 0
    if not hits:
        print("no tool matches")
        return 0
    width = max(len(h.tool.name) for h in hits)
    for h in hits:
        print(f"{h.score:6.2f}  {h.tool.name:<{width}}  [{h.tool.collection}]  {h.tool.summary[:80]}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    from protocols.store import Store

    Store(atc_home()).remove(args.name)
    if args.json:
        print_json({"ok": True, "removed": args.name})
    else:
        print(f"removed {args.name}")
    return 0


def _out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
