"""What runs alone under a bare interpreter, importing nothing of the project: the in-sandbox
runner, the jail's steps and system-call filter, and the two fork servers.

They import nothing of the project (``tests/test_layers.py``), so that each can run alone: the
host starts them by path (``path_of``), and imports only the system-call filter's compiler and its
tables (``seccomp``) as a module."""

from pathlib import Path

__all__ = ["path_of"]


def path_of(name: str) -> Path:
    """The file ``name`` (e.g. ``"runner.py"``) of this folder: the host starts these by path, never imports them."""
    return Path(__file__).resolve().with_name(name)
