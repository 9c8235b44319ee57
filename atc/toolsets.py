"""What the Python API takes as ``tools``, made into a run's ``Toolset``: ``toolset_for``.

``atc.solve``, ``solve_many``, ``atc.run``, ``atc.session``, ``atc.asession`` and the collections
of an evaluation suite (``atc.evaluation``) take the tools in whatever
form the caller has at hand: a ``Toolset``, a ``Collection``, a spec path or URL, an MCP source
(``mcp:COMMAND``, ``mcp+http://...``, an ``mcpServers`` file), the name of a collection imported
into the store, Python functions (``protocols.functions``: loose functions share one collection
named ``functions``; an object holding functions is a collection of its own; ``py:MODULE:NAME``
names them, ``atc.functions``), or a list of those. One function reads them, so that every entry point takes the
same forms; a word that is neither a file here, a URL nor an MCP source is a stored collection's
name (``NotFound``, exit 2, names the store).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atc.config import atc_home
from atc.errors import UsageError
from atc.functions import load_python
from protocols.functions import function_collections, is_function_source
from protocols.loaders import load_spec
from protocols.model import Collection
from protocols.store import Store
from sandbox.api import Toolset
from sandbox.execute import as_toolset, sources_to_collections
from sandbox.mcp.sources import is_mcp_source

if TYPE_CHECKING:
    from sandbox.execute import BaseUrl, Validation

__all__ = ["ToolsArg", "toolset_for", "collections_of"]

#: What ``tools=`` takes (see the module docstring); any Python object may hold functions.
ToolsArg = Toolset | Collection | str | Path | Callable[..., Any] | Sequence[Any] | Any


def collections_of(tools: ToolsArg) -> list[Collection]:
    """The collections of a ``tools`` argument other than a ``Toolset`` (see the module docstring)."""
    single = isinstance(tools, Collection | str | Path) or is_function_source(tools)
    items: list[Any] = [tools] if single else list(tools)  # type: ignore[arg-type]
    out: list[Collection] = []
    functions: list[Any] = []
    for item in items:
        if isinstance(item, Collection):
            out.append(item)
        elif isinstance(item, str) and item.startswith("py:"):
            out.append(load_python(item))
        elif isinstance(item, str) and _is_mcp(item):
            out += sources_to_collections(item)
        elif isinstance(item, str) and item.startswith(("http://", "https://")):
            out.append(load_spec(item))
        elif isinstance(item, str | Path):
            out.append(_load(item))
        elif is_function_source(item):
            functions.append(item)
        else:
            raise UsageError(f"tools must be Collections, spec paths, collection names or Python functions, "
                             f"not {type(item).__name__}")
    if functions:
        out += function_collections(functions)
    if not out:
        raise UsageError("no tools given", hint="pass a Collection, a spec path, an imported collection name "
                                                "or Python functions")
    return out


def _is_mcp(item: str) -> bool:
    return is_mcp_source(item)


def _load(item: str | Path) -> Collection:
    path = Path(item).expanduser()
    if path.exists():
        return load_spec(path)
    return Store(atc_home()).get(str(item))


def toolset_for(tools: ToolsArg, base_url: BaseUrl = None, credentials: dict[str, str] | None = None,
                validation: Validation = None) -> Toolset:
    """The ``Toolset`` of a ``tools`` argument (see the module docstring), with ``base_url``,
    ``credentials`` and ``validation`` applied (each one value for every collection, or a dict
    per collection)."""
    return as_toolset(tools if isinstance(tools, Toolset) else collections_of(tools), base_url=base_url,
                      credentials=credentials or None, validation=validation)
