"""Python functions of the host used as tools by the tests (also importable as ``py:`` sources:
``py:tests.support.fakes.functions:INVENTORY`` and friends).

A small warehouse: an inventory read with typed arguments and results (a pydantic model, a
dataclass, an enum, a ``TypedDict``), a write that records what it did, an async lookup, and
functions that misbehave the ways a real one can (raise with a host path in the message, hang,
return what is not JSON, read a host secret).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import os
import threading
import time
from typing import TypedDict

from pydantic import BaseModel, Field

import atc

SECRET_ENV = "WAREHOUSE_TOKEN"


class Unit(enum.Enum):
    """How a quantity is counted."""

    piece = "piece"
    box = "box"


@dataclasses.dataclass
class Place:
    """Where an item is kept.

    Args:
        aisle: the aisle's letter
        shelf: the shelf's number, from the floor
    """

    aisle: str
    shelf: int = 1


class Item(BaseModel):
    sku: str = Field(description="the stock-keeping unit")
    name: str
    count: int
    unit: Unit = Unit.piece
    place: Place | None = None


class Filter(TypedDict, total=False):
    """What to keep of the inventory."""

    min_count: int
    unit: str


STOCK: dict[str, Item] = {
    "A-1": Item(sku="A-1", name="teapot", count=3, place=Place("A", 2)),
    "B-7": Item(sku="B-7", name="cup", count=24, unit=Unit.box, place=Place("B", 1)),
    "C-2": Item(sku="C-2", name="saucer", count=0),
}
MOVES: list[tuple[str, int]] = []
ACTIVE = {"now": 0, "most": 0}
_ACTIVE_LOCK = threading.Lock()


@atc.tool(read_only=True)
def list_items(filter: Filter | None = None, limit: int = 10) -> list[Item]:
    """The items in stock, fewest first.

    Args:
        filter: which items to keep
        limit: at most this many
    """
    f = filter or {}
    found = [i for i in STOCK.values() if i.count >= f.get("min_count", 0) and f.get("unit", i.unit.value) == i.unit.value]
    return sorted(found, key=lambda i: i.count)[:limit]


@atc.tool(read_only=True, description="One item by its SKU.")
def get_item(sku: str) -> Item:
    if sku not in STOCK:
        raise KeyError(sku)
    return STOCK[sku]


def move_item(sku: str, to: Place, count: int = 1) -> dict[str, object]:
    """Move items to another place (a write).

    Args:
        sku: the item
        to: where they go
        count: how many
    """
    if not isinstance(to, Place):
        raise TypeError(f"to is a {type(to).__name__}, not a Place")
    MOVES.append((sku, count))
    STOCK[sku].place = to
    return {"moved": count, "to": to, "unit": STOCK[sku].unit}


async def supplier_of(sku: str) -> dict[str, str]:
    """The supplier of an item (an async client)."""
    await asyncio.sleep(0.01)
    return {"sku": sku, "supplier": "acme" if sku.startswith("A") else "globex"}


def read_ledger(year: int) -> str:
    """The ledger of a year, from a file of the host."""
    raise FileNotFoundError(f"[Errno 2] No such file or directory: '/tmp/warehouse/ledgers/{year}.csv'")


def audit(seconds: float) -> str:
    """Takes as long as it is told."""
    time.sleep(seconds)
    return "audited"


def connection() -> object:
    """Hands back something that is not data."""
    return threading.Lock()


def token_echo(prefix: str) -> str:
    """Leaks the host's secret (a careless function)."""
    token = os.environ.get(SECRET_ENV, "")
    if prefix == "raise":
        raise PermissionError(f"token {token} was refused")
    return f"{prefix}{token}"


def busy(seconds: float = 0.2) -> int:
    """Holds a call open, counting how many run at once."""
    with _ACTIVE_LOCK:
        ACTIVE["now"] += 1
        ACTIVE["most"] = max(ACTIVE["most"], ACTIVE["now"])
    time.sleep(seconds)
    with _ACTIVE_LOCK:
        ACTIVE["now"] -= 1
    return ACTIVE["most"]


INVENTORY = [list_items, get_item, move_item, supplier_of]
MISBEHAVING = [read_ledger, audit, connection, token_echo, busy]


class Warehouse:
    """The same functions as methods of an object (its public methods are the tools)."""

    def __init__(self) -> None:
        self.opened = 0

    def open_door(self, door: int) -> int:
        """Open a door."""
        self.opened += 1
        return self.opened

    def _lock_all(self) -> None:  # private: not a tool
        self.opened = 0


WAREHOUSE = Warehouse()
