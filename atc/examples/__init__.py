"""Example collections shipped with atc, found the same way from a checkout or an installed wheel.

``bookshop`` is a small hand-written OpenAPI 3.0 API (search, detail and sub-resource endpoints
that depend on each other) with an example program that chains them. Serve it offline with
``atc mock``::

    from atc import examples
    spec = examples.path("bookshop") / "openapi.json"
    program = examples.path("bookshop/program.py")
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
