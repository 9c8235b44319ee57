"""The one reader of a ``tools`` argument: ``collections_of`` and ``toolset_for``.

Every entry point takes the same forms and reads them here: ``atc solve --tools T`` and the other
commands (``atc.cli.common.load_collections``), ``atc.solve``/``atc.Solver``, ``solve_many``,
``atc.run``, ``atc.session``, ``atc.asession``, probing (``atc.probe``), ``atc serve`` and the
collections of an evaluation suite. A ``tools`` argument is a ``Toolset``, a ``Collection``, or one
of these (or a list of any of them):

- ``py:MODULE:NAME``: Python functions (``atc.functions``); loose Python functions share one
  collection named ``functions``, an object holding functions is a collection of its own
  (``protocols.functions``);
- a live MCP source: ``mcp:COMMAND ARGS``, ``mcp+http://...``, an ``mcpServers`` JSON file (one
  collection per server; the servers start once per process);
- an ``http(s)://`` URL of a spec;
- a path of a spec file, or the name of a collection imported into the store.

THE RULE for a word that names both a file (or folder) here and a stored collection: a bare word
(``kinto``) is a collection's name, so the stored collection is taken and a note says that both
exist; a word written as a path (``./kinto``, ``specs/kinto.json``, ``~/kinto``, or a ``Path``
object) is the path. A word that is neither a file here, a URL nor an MCP source is a stored
collection's name (``NotFound``, exit 2, names the store).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atc.config import atc_home, mcp_start_timeout
from atc.errors import UsageError
from atc.functions import load_python
from protocols.functions import function_collections, is_function_source
from protocols.loaders import load_spec
from protocols.model import Collection
from protocols.store import Store
from sandbox.api import Credentials, Toolset
from sandbox.execute import as_toolset
from sandbox.gateway.mcp.sources import check_names, is_mcp_source, load_source

if TYPE_CHECKING:
    from sandbox.execute import BaseUrl, Validation

__all__ = ["ToolsArg", "toolset_for", "collections_of", "stored_wins", "is_mcp"]

#: What ``tools=`` takes (see the module docstring); any Python object may hold functions.
ToolsArg = Toolset | Collection | str | Path | Callable[..., Any] | Sequence[Any] | Any
#: Where the note of an ambiguous word goes (the CLI and the Python API alike: stderr).
Note = Callable[[str], None]


def _stderr(text: str) -> None:
    sys.stderr.write(f"atc: note: {text}\n")


def collections_of(tools: ToolsArg, *, note: Note = _stderr) -> list[Collection]:
    """The collections of a ``tools`` argument other than a ``Toolset`` (see the module docstring).

    Args:
        tools: one source or a list of them (module docstring).
        note: where the note of a word that names both a file and a stored collection goes.

    Returns:
        The collections, in the order given (loose Python functions last, as one collection).

    Raises:
        UsageError: nothing given, or an item of a kind no rule reads.
        NotFound: a word that names no file and no stored collection.
    """
    single = isinstance(tools, Collection | str | Path) or is_function_source(tools)
    items: list[Any] = [tools] if single else list(tools)  # type: ignore[arg-type]
    mcp_sources = [item for item in items if isinstance(item, str) and is_mcp(item)]
    if len(mcp_sources) > 1:
        check_names(mcp_sources)  # before any server starts
    out: list[Collection] = []
    functions: list[Any] = []
    for item in items:
        if isinstance(item, Collection):
            out.append(item)
        elif isinstance(item, str | Path):
            out += _read(item, note)
        elif is_function_source(item):
            functions.append(item)
        else:
            raise UsageError(f"tools must be Collections, spec paths, collection names, MCP sources or Python "
                             f"functions, not {type(item).__name__}")
    if functions:
        out += function_collections(functions)
    if not out:
        raise UsageError("no tools given", hint="pass a Collection, a spec path, an imported collection name "
                                                "or Python functions")
    return out


def _read(item: str | Path, note: Note) -> list[Collection]:
    """The collections of one word or path, by the rules of the module docstring, in order."""
    text = str(item)
    if isinstance(item, str) and item.startswith("py:"):
        return [load_python(item)]
    if isinstance(item, str) and is_mcp(item):
        # lazy: the connections bring asyncio (the MCP SDK's loop), which no other source needs
        from sandbox.gateway.mcp.connections import servers

        servers().start_timeout = mcp_start_timeout()
        return load_source(item)
    if text.startswith(("http://", "https://")):
        return [load_spec(text)]
    path = Path(item).expanduser()
    if path.exists() and not (isinstance(item, str) and stored_wins(item, path, note)):
        return [load_spec(path)]
    return [Store(atc_home()).get(text)]


def stored_wins(word: str, path: Path, note: Note = _stderr) -> bool:
    """Does the bare ``word``, which names a file or folder here, also name a stored collection?
    Then the stored collection is taken (a word is a collection's name; ``./NAME`` is a path),
    and ``note`` says that both exist and how to pick the other."""
    if "/" in word or "\\" in word or word.startswith(("~", ".")):
        return False  # written as a path: the path it is
    if not (atc_home() / "collections" / "index.json").exists() or not Store(atc_home()).has(word):
        return False
    kind = "folder" if path.is_dir() else "file"
    note(f"{word!r} is both a stored collection and a {kind} here; using the stored collection "
         f"(give ./{word} for the {kind})")
    return True


def is_mcp(text: str) -> bool:
    """Does ``text`` name live MCP servers (``mcp:...``, ``mcp+http://...``, an ``mcpServers`` file)?"""
    if not (text.startswith(("mcp:", "mcp+")) or text.endswith(".json")):
        return False  # the common cases decide without importing sandbox.gateway.mcp
    return is_mcp_source(text)


def toolset_for(tools: ToolsArg, base_url: BaseUrl = None,
                credentials: Credentials | Mapping[str, str] | None = None,
                validation: Validation = None) -> Toolset:
    """The ``Toolset`` of a ``tools`` argument (see the module docstring).

    Args:
        tools: a ``Toolset`` (kept, with the overrides applied) or what ``collections_of`` reads.
        base_url: one server URL for every collection, or ``{collection: URL}``.
        credentials: ``{scheme or placement: "env:VAR"}`` or ``Credentials``, parsed here once.
        validation: ``strict``, ``warn``, ``off``, or ``{collection: mode}``.

    Returns:
        The run's ``Toolset``.

    Raises:
        UsageError: a bad argument (see ``collections_of``).
        NotFound: a word that names no file and no stored collection.
    """
    return as_toolset(tools if isinstance(tools, Toolset) else collections_of(tools), base_url=base_url,
                      credentials=Credentials.of(credentials) or None, validation=validation)
