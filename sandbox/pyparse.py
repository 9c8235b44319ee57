"""``ast.parse`` for the host: one conversion at a time in a process.

CPython 3.11 keeps the counter with which the AST converter checks its recursion in state that
all threads share. When two conversions interleave (a garbage collection during one runs a
finalizer, and another thread takes the interpreter meanwhile and parses), the first one fails
with ``SystemError: AST constructor recursion depth mismatch``. An ``atc eval`` batch of eight
threads hit it once in about 2,000 solves, and the task failed for no fault of its own. Every
parse on the host goes through here; a parse takes microseconds to milliseconds, so waiting for
one costs nothing that matters. (The sandbox's own processes parse alone and call ``compile``
directly.)
"""

from __future__ import annotations

import ast
import threading

__all__ = ["parse"]

# Reentrant: a finalizer that parses in the thread that holds it must not deadlock.
_LOCK = threading.RLock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, never interleaved with another thread's."""
    with _LOCK:
        return ast.parse(source, filename=filename)
