"""Turning a spec (file, folder or parsed data) into a ``Collection``: the loader registry.

A loader is anything that satisfies the :class:`Loader` protocol. The built-in ones (OpenAPI /
Swagger, ToolBench, MCP) are registered with :func:`register_loader` exactly as a plugin's would
be; :func:`load_data` asks each, in registration order, whether it recognises the document.

The only outcomes of loading are a ``Collection`` or a ``ProtocolError`` naming the source and
the JSON pointer of the problem.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from protocols.building import collection_slug
from protocols.errors import ProtocolError
from protocols.mcp import MCPLoader
from protocols.model import Collection
from protocols.openapi import OpenAPILoader
from protocols.remote import fetch_spec, is_url
from protocols.toolbench import ToolBenchLoader, load_tree

__all__ = ["Loader", "LOADERS", "register_loader", "load_data", "load_spec", "load", "parse_text"]

#: Titles that say nothing about the API; the file name is a better collection name.
_GENERIC_TITLES = {"", "api", "apis", "openapi", "swagger", "rest_api", "untitled", "spec", "toolbench", "mcp"}


@runtime_checkable
class Loader(Protocol):
    """One spec format. ``detect`` must be cheap and never raise; ``load`` returns a Collection
    or raises ``ProtocolError``."""

    name: str

    def detect(self, doc: Any, path: str | None = None) -> bool: ...

    def load(self, doc: Any, *, source: str, name: str | None = None) -> Collection: ...


LOADERS: list[Loader] = []


def register_loader(loader: Loader, *, first: bool = False) -> Loader:
    """Add a loader to the registry (``first=True``: consulted before the built-ins)."""
    if not isinstance(loader, Loader):
        raise TypeError(f"{loader!r} does not implement the Loader protocol")
    LOADERS.insert(0, loader) if first else LOADERS.append(loader)
    return loader


register_loader(OpenAPILoader())
register_loader(ToolBenchLoader())
register_loader(MCPLoader())


def _apply_base_url(collection: Collection, base_url: str | None) -> Collection:
    if base_url:
        url = base_url.rstrip("/")
        collection.servers = [url]
        for tool in collection.tools:
            tool.servers = [url]
    return collection


def _rename(collection: Collection, name: str) -> Collection:
    collection.name = name
    for tool in collection.tools:
        tool.collection = name
    return collection


def load_data(doc: Any, *, source: str = "<data>", name: str | None = None,
              base_url: str | None = None) -> Collection:
    """A Collection from an already parsed document (dict or list) of any registered format."""
    for loader in LOADERS:
        if loader.detect(doc, source):
            collection = loader.load(doc, source=source, name=name)
            return _apply_base_url(collection, base_url)
    what = type(doc).__name__
    raise ProtocolError(
        f"not a recognised tool spec (a JSON {what}): expected OpenAPI 3.x ('openapi' key), Swagger 2.0 "
        "('swagger' key), a ToolBench tool/query file ('api_list') or an MCP tools/list result ('tools')",
        source=source, pointer="")


def parse_text(text: str, source: str) -> Any:
    """JSON, or YAML when the text is not JSON. Errors name the line and column."""
    return _parse(text, source)[0]


def _parse(text: str, source: str) -> tuple[Any, str | None]:
    """The document, and the JSON error when the text looked like JSON but was read as YAML."""
    try:
        return json.loads(text), None
    except RecursionError as exc:
        raise ProtocolError("the document is nested too deeply", source=source) from exc
    except ValueError as json_exc:
        if text.lstrip()[:1] in ("{", "["):
            # Looks like JSON with a slip (a trailing comma...). YAML may still read it; if not,
            # the JSON error is the useful message.
            try:
                doc = _yaml(text, source)
            except ProtocolError:
                doc = None
            if isinstance(doc, (dict, list)):
                return doc, str(json_exc)
            raise ProtocolError(f"invalid JSON: {json_exc}", source=source) from json_exc
        return _yaml(text, source), None


def _yaml(text: str, source: str = "<text>") -> Any:
    import yaml  # lazy: only YAML specs pay for PyYAML's import

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        doc = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        raise ProtocolError(f"neither valid JSON nor valid YAML: {exc}".splitlines()[0], source=source) from exc
    except RecursionError as exc:
        raise ProtocolError("the document is nested too deeply", source=source) from exc
    if not isinstance(doc, (dict, list)):
        raise ProtocolError("the file is neither a JSON nor a YAML document (object or list)", source=source)
    return _plain(doc, source)


def _plain(doc: Any, source: str, depth: int = 0) -> Any:
    """YAML may give non-string keys and dates; make it JSON-shaped (string keys, ISO dates)."""
    if depth > 200:
        raise ProtocolError("the document is nested too deeply", source=source)
    if isinstance(doc, dict):
        return {str(k): _plain(v, source, depth + 1) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_plain(v, source, depth + 1) for v in doc]
    if isinstance(doc, (str, int, float, bool)) or doc is None:
        return doc
    return str(doc)


def _load_url(url: str, *, name: str | None, base_url: str | None, headers: Mapping[str, str] | None,
              fetch_url: str | None) -> Collection:
    """A Collection from a spec served at ``url`` (fetched from ``fetch_url`` when given: the same
    URL with a credential added, which is never stored)."""
    text, final = fetch_spec(fetch_url or url, headers=headers, label=url)
    # Relative server URLs are relative to where the document really is (after redirects); the
    # query (maybe a token) plays no part in that and must not be kept.
    located = urlunsplit(urlsplit(final)._replace(query="", fragment=""))
    doc, json_error = _parse(text, url)
    try:
        collection = load_data(doc, source=located, name=name, base_url=base_url)
    except ProtocolError as exc:
        if json_error and exc.pointer == "":
            raise ProtocolError(f"invalid JSON: {json_error}", source=url) from exc
        raise
    if not name and collection.name in _GENERIC_TITLES:
        stem = collection_slug(PurePosixPath(urlsplit(url).path).stem)
        if stem and stem not in _GENERIC_TITLES:
            _rename(collection, stem)
    collection.source = url
    return collection


def load_spec(path: str | Path, *, name: str | None = None, base_url: str | None = None,
              headers: Mapping[str, str] | None = None, fetch_url: str | None = None) -> Collection:
    """A Collection from a spec file (JSON or YAML, any registered format), a ToolBench folder, or
    an http(s) URL that serves a spec (``headers``/``fetch_url``: see ``_load_url``).

    The collection name defaults to the spec's title as a slug, or the file stem when the title
    is missing or says nothing (``API``).

    Args:
        path: a spec file, a ToolBench folder, or an http(s) URL.
        name: the collection's name (default: from the title or the file stem).
        base_url: the server URL.
        headers: headers of the request for a URL; ``fetch_url``: the URL to fetch instead.

    Returns:
        The ``Collection``.

    Raises:
        ProtocolError: no such file, or not a spec of a known format.
    """
    if isinstance(path, str) and is_url(path):
        return _load_url(path, name=name, base_url=base_url, headers=headers, fetch_url=fetch_url)
    p = Path(path).expanduser()
    source = str(path)
    if p.is_dir():
        tree = _apply_base_url(load_tree(p, source=source, name=name), base_url)
        tree.source = str(p.resolve())
        return tree
    try:
        raw = p.read_bytes()
    except FileNotFoundError as exc:
        raise ProtocolError("no such file", source=source) from exc
    except OSError as exc:
        raise ProtocolError(f"cannot read the file: {exc.strerror or exc}", source=source) from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProtocolError("the file is not UTF-8 text", source=source) from exc
    if not text.strip():
        raise ProtocolError("the file is empty", source=source)
    doc, json_error = _parse(text, source)
    try:
        collection = load_data(doc, source=source, name=name, base_url=base_url)
    except ProtocolError as exc:
        if json_error and exc.pointer == "":
            raise ProtocolError(f"invalid JSON: {json_error}", source=source, pointer=None,
                                hint="fix the JSON (trailing commas and comments are not JSON)") from exc
        raise
    if not name and collection.name in _GENERIC_TITLES:
        stem = collection_slug(p.stem)
        if stem:
            _rename(collection, stem)
    # Errors name the path as the user typed it; the stored collection keeps one that still
    # means something from another directory.
    collection.source = str(p.resolve())
    return collection


#: ``atc.load`` maps here.
load = load_spec
