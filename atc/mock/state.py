"""What ``atc mock`` remembers: objects clients created, changed or deleted, and the spec's examples.

Everything else the mock answers is a pure function of the request (:mod:`atc.mock.gen`); this is
the part that depends on what came before, so that a client's writes read back:

- a POST to a collection mints a new id (outside the generated id space, meeting the id's
  schema) and keeps the object it answered; the object then appears with the same fields on its
  detail endpoint, in the lists it belongs to (its parents' sub-collections first), and wherever
  else an instance of it is generated;
- a PUT to a detail endpoint creates the object under the client's key when it does not exist
  (``/pages/{slug}``), else replaces its fields; a PATCH merges them; a DELETE removes it (404 after);
- the spec's own examples are there from the start: an example response of a detail endpoint is
  that object, and a path parameter's example id exists.

Memory is bounded: at most ``limit`` objects are kept (the oldest go first). Two fresh servers
given the same requests in the same order answer alike.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from atc.mock.entities import IdSpaces

__all__ = ["MockState", "MAX_REMEMBERED"]

#: How many written objects a server keeps.
MAX_REMEMBERED = 10_000


def _key(entity: str, value: Any) -> tuple[str, str]:
    return entity, str(value).strip().lower()


class MockState:
    def __init__(self, spaces: IdSpaces, limit: int = MAX_REMEMBERED) -> None:
        self.spaces = spaces
        self.limit = limit
        self._fields: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self._ids: dict[tuple[str, str], Any] = {}
        self._gone: set[tuple[str, str]] = set()
        self._children: dict[tuple[str, str, str], list[Any]] = {}
        self._minted: dict[str, set[Any]] = {}
        self.lock = threading.RLock()

    # -- reading -------------------------------------------------------------------------------

    def status(self, entity: str, value: Any) -> bool | None:
        """True: the object is here (written or seeded); False: it was deleted; None: unknown here
        (the generated id space decides)."""
        key = _key(entity, value)
        if key in self._gone:
            return False
        return True if key in self._fields else None

    def exists(self, entity: str, value: Any, others: tuple[str, ...] = ()) -> bool:
        """Whether an id names an object: written or seeded here, else in the id space of the
        entity or, leniently, of another one (``others``: a list the mock could not attribute may
        hold ids of any entity)."""
        known = self.status(entity, value)
        if known is not None:
            return known
        return any(self.spaces.contains(e, value) for e in (entity, *others))

    def fields(self, entity: str | None, value: Any) -> dict[str, Any] | None:
        if entity is None or value is None:
            return None
        return self._fields.get(_key(entity, value))

    def gone(self, entity: str | None, value: Any) -> bool:
        return entity is not None and _key(entity, value) in self._gone

    def children(self, child: str, parents: dict[str, Any]) -> list[Any]:
        """Ids of ``child`` objects created under ``parents`` (entity -> id), newest first; with
        no parents, every one created."""
        if not parents:
            found = [self._ids[k] for k in self._fields if k[0] == child and k in self._ids]
        else:
            entity, value = next(iter(parents.items()))
            found = list(self._children.get((entity, str(value).strip().lower(), child), []))
        return [v for v in reversed(found) if not self.gone(child, v)]

    # -- writing -------------------------------------------------------------------------------

    def mint(self, entity: str, kind: str) -> Any:
        taken = self._minted.setdefault(entity, set())
        value = self.spaces.mint(entity, kind, taken)
        taken.add(value)
        return value

    def put(self, entity: str, value: Any, fields: dict[str, Any], *, merge: bool = False,
            parents: dict[str, Any] | None = None) -> None:
        key = _key(entity, value)
        with self.lock:
            self._gone.discard(key)
            old = self._fields.pop(key, None)
            self._fields[key] = {**old, **fields} if merge and old else dict(fields)
            if key not in self._ids:
                self._ids[key] = value
                for parent, pid in (parents or {}).items():
                    self._children.setdefault((parent, str(pid).strip().lower(), entity), []).append(value)
            while len(self._fields) > self.limit:
                dropped, _ = self._fields.popitem(last=False)
                self._ids.pop(dropped, None)

    def delete(self, entity: str, value: Any) -> None:
        key = _key(entity, value)
        with self.lock:
            self._fields.pop(key, None)
            self._gone.add(key)
            if len(self._gone) > self.limit:
                self._gone.pop()

    def seed(self, entity: str, value: Any, fields: dict[str, Any]) -> None:
        """An object the spec's examples describe: it exists and shows its fields, like a written
        one, but lists do not put it first (it was not created by a client)."""
        key = _key(entity, value)
        with self.lock:
            kept = self._fields.setdefault(key, {})
            for k, v in fields.items():
                kept.setdefault(k, v)
