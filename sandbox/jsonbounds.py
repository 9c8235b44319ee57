"""JSON the host takes from a sandbox or an API, bounded by what it would cost to hold.

A byte cap alone does not bound the host's memory: ``json.loads`` turns 3 bytes of ``[],`` into a
56-byte list and its 8-byte slot, so a 15 MB frame of empty lists is 320 MB of Python objects.
Three tools bound that cost by the *number of values*, before and after decoding:

- ``count_values(raw, cap)`` counts, cheaply and before anything is decoded, an upper bound on the
  values a JSON text holds (one per ``[``, ``{``, ``,`` and ``:`` outside strings, plus one). Most
  texts are settled by four ``bytes.count`` calls; only a text whose raw count passes the cap is
  looked at more closely, still in C: escapes are dropped, everything but structure and quotes is
  deleted, empty strings vanish, and what is left is split on quotes a window at a time, so that
  the characters inside strings (a printed list in an ``output`` frame) are not counted.
  ``loads(raw, max_values)`` refuses (``TooManyValues``) before decoding a text over its cap.
- ``host_size(value)`` estimates what decoded data really holds in the host (``sys.getsizeof`` of
  every object, shared ones counted each time they are reached, so it never underestimates).
- ``summarize(value, limit)`` keeps a bounded copy of data too large to keep whole (the call log
  of a run): the first and last items of long lists, the first keys of wide objects, the head of
  long strings, a bounded depth; the shape survives, which is what attribution and reflection read.
"""

from __future__ import annotations

import json
import struct
import sys
from itertools import accumulate
from typing import Any

__all__ = ["TooManyValues", "count_values", "loads", "max_depth", "host_size", "summarize", "VALUE_COST"]

#: Host bytes one counted value may cost once decoded (measured: an empty list in a list is 64,
#: a one-key object 62 per counted value, a float 32, a short string 59): the factor between a
#: cap on values and the memory it bounds.
VALUE_COST = 64

_STRUCTURE = b"[{,:"
_DROP = bytes(b for b in range(256) if b not in b'[{,:"')
_WINDOW = 1 << 16
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b'[{]}"')
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


class TooManyValues(ValueError):
    """A JSON text holds more values than its cap (refused before decoding)."""

    def __init__(self, count: int, cap: int) -> None:
        super().__init__(f"it holds about {count} JSON values, more than the {cap} allowed")
        self.count = count
        self.cap = cap


def count_values(raw: bytes | bytearray, cap: int | None = None) -> int:
    """An upper bound on the number of values ``json.loads(raw)`` would make (see the module
    docstring). With a ``cap``, the count stops early: a result at most ``cap`` is an upper bound,
    one above it only says that the text is over. No copy of ``raw`` is made: the close look
    goes a window at a time."""
    quick = sum(raw.count(c) for c in (b"[", b"{", b",", b":")) + 1
    if (cap is not None and quick <= cap) or b'"' not in raw:
        return quick
    count, inside, start, size = 1, False, 0, len(raw)
    while start < size:
        end = min(start + _WINDOW, size)
        while end < size and raw[end - 1] == 0x5C:  # a backslash run stays with what it escapes
            end += 1
        window = raw[start:end]
        if b"\\" in window:
            # Escaped backslashes first, then escaped quotes: what is left of a quote opens or
            # closes a string.
            window = window.replace(b"\\\\", b"").replace(b'\\"', b"")
        # Only structure and quotes are kept; "" (a string with no structure in it) goes.
        pieces = window.translate(None, _DROP).replace(b'""', b"").split(b'"')
        count += sum(map(len, pieces[1 if inside else 0::2]))
        if len(pieces) % 2 == 0:  # an odd number of quotes in the window
            inside = not inside
        if cap is not None and count > cap:
            break  # over the cap: how far over does not matter
        start = end
    return count


def loads(raw: bytes | bytearray, max_values: int) -> Any:
    """``json.loads(raw)``, refused with ``TooManyValues`` when ``raw`` holds more than
    ``max_values`` values (``json.JSONDecodeError``/``UnicodeDecodeError`` as usual)."""
    count = count_values(raw, max_values)
    if count > max_values:
        raise TooManyValues(count, max_values)
    return json.loads(raw)


def max_depth(raw: bytes | bytearray) -> int:
    """How deep the arrays and objects of a (valid) JSON text nest, without decoding it: escaped
    backslashes and quotes are dropped, everything but brackets and quotes is deleted, the strings
    (now just quotes around brackets) are dropped, and the brackets are summed as +1/-1 -- every
    step in C. (Callers first check ``raw.count(b"[") + raw.count(b"{")`` against their limit:
    the text cannot nest deeper than that.)"""
    skeleton = bytes(raw).replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_BRACKETS)
    steps = b"".join(skeleton.split(b'"')[::2]).translate(_STEPS)  # the even pieces lie outside strings
    return max(accumulate(struct.unpack(f"{len(steps)}b", steps)), default=0)


def host_size(value: Any, stop: int | None = None) -> int:
    """Bytes ``value`` holds in this process, estimated from above; the walk ends as soon as the
    total passes ``stop``. Iterative: any depth."""
    total = 0
    stack = [value]
    size_of = sys.getsizeof
    while stack:
        item = stack.pop()
        total += size_of(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        if stop is not None and total > stop:
            break
    return total


#: (items per list, characters per string, keys per object, depth) tried in turn, loosest first.
_LEVELS = ((200, 4000, 100, 12), (50, 1000, 40, 8), (12, 300, 16, 6), (4, 100, 8, 4), (2, 40, 4, 3))


def _cut(value: Any, items: int, chars: int, keys: int, depth: int) -> Any:
    if isinstance(value, str):
        return value[:chars]
    if isinstance(value, list | tuple):
        if depth <= 0:
            return []
        kept = list(value) if len(value) <= items else [*value[: (items + 1) // 2], *value[len(value) - items // 2:]]
        return [_cut(v, items, chars, keys, depth - 1) for v in kept]
    if isinstance(value, dict):
        if depth <= 0:
            return {}
        out: dict[Any, Any] = {}
        for key in value:
            if len(out) >= keys:
                break
            out[key[:chars] if isinstance(key, str) else key] = _cut(value[key], items, chars, keys, depth - 1)
        return out
    return value


#: How far past its limit ``summarize`` counts the size of what it cuts (the count is for the
#: record; walking a few million values to the end would cost more than the rest).
SIZE_COUNTED = 64


def summarize(value: Any, limit: int) -> tuple[Any, int, int]:
    """``(kept, size, kept_size)``: ``value`` itself when it holds at most ``limit`` bytes
    (``host_size``; then ``kept_size == size``), else a bounded copy of it that does, and the
    size ``value`` had, counted up to ``SIZE_COUNTED x limit`` (a larger one shows as just over
    that: "at least"). The copy
    keeps the first and last items of long lists (``sandbox.attribution.condense`` samples the same way), the
    first keys of wide objects and the head of long strings; it says nothing inline about what was
    cut (a marker would change the data's shape): the caller records that it is a summary."""
    size = host_size(value, stop=limit)
    if size <= limit:
        return value, size, size
    size = host_size(value, stop=SIZE_COUNTED * limit)
    cut: Any = None
    kept = 0
    for items, chars, keys, depth in _LEVELS:
        cut = _cut(value, items, chars, keys, depth)
        kept = host_size(cut, stop=limit)
        if kept <= limit:
            break
    return cut, size, kept
