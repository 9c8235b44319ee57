"""Example collections shipped with atc, found the same way from a checkout or an installed wheel.

Each is a small hand-written API with an example program that chains its tools (``program.py``)
and a README; serve any of them offline with ``atc mock``:

- ``bookshop``: OpenAPI 3.0 (JSON): search, detail and sub-resource endpoints that depend on
  each other, an order to place;
- ``tasks``: OpenAPI 3.1 (YAML): a project tracker with a bearer token, paged lists
  (``page``/``per_page``/``next_page``), nullable fields and resources nested three deep;
- ``transit``: Swagger 2.0 (JSON): a city's transit network with an API key in the query,
  ``offset``/``limit`` paging and live departures.

::

    from atc import examples
    spec = examples.path("bookshop") / "openapi.json"
    program = examples.path("tasks/program.py")
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from atc.errors import NotFound

__all__ = ["path", "names"]


def _root() -> Path:
    return Path(str(resources.files(__name__)))


def names() -> list[str]:
    """The bundled examples (folders under ``atc/examples``)."""
    return sorted(p.name for p in _root().iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def path(name: str) -> Path:
    """The file or folder of a bundled example: ``path("bookshop")``, ``path("bookshop/openapi.json")``."""
    root = _root().resolve()
    target = (root / name).resolve()
    if root not in target.parents or not target.exists():
        raise NotFound(f"no bundled example {name!r}", hint="examples: " + ", ".join(names()))
    return target
