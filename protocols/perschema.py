"""A value computed once per schema object: compiled validators, quick checks, static verdicts.

Keyed by the schema dict's identity, not its content: hashing a schema would cost what computing
its value does. A ``Tool`` keeps its schema dicts alive, and each entry holds its schema too, so an
id cannot be reused for another schema while it is cached. The cache is bounded (a process that
meets more schemas than that starts over rather than growing).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["PerSchema"]

T = TypeVar("T")


class PerSchema(Generic[T]):
    """``build(schema)``, once per schema object (thread-safe; ``most`` entries at a time)."""

    def __init__(self, build: Callable[[Any], T], most: int = 4096) -> None:
        self._build = build
        self._most = most
        self._cache: dict[int, tuple[Any, T]] = {}
        self._lock = threading.Lock()

    def __call__(self, schema: Any) -> T:
        hit = self._cache.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        value = self._build(schema)
        with self._lock:
            if len(self._cache) >= self._most:
                self._cache.clear()
            self._cache[id(schema)] = (schema, value)
        return value
