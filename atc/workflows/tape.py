"""A tape: recorded requests and their answers, under one directory, for record and replay.

Two append-only JSON Lines files live in the directory: ``tools.jsonl`` (tool calls, keyed by the
tool and its canonical arguments) and ``model.jsonl`` (model completions, keyed by the canonical
request). Each line is ``{"key": ..., "request": {...}, "response": {...}}``: small, diffable,
greppable. The key is the SHA-256 of the request's canonical JSON (sorted keys, no spaces); the
request and response are stored as they came, in their own key order, so that a replayed answer
is the recorded one exactly.

Repeated identical requests are kept in order: recording appends one line per occurrence, and
replay hands out the lines of a key in file order, one per request (a model asked the same
thing twice may answer differently; the second ask gets the second answer). Appends are one
``write`` of a whole line under an exclusive ``flock``, so concurrent tasks, and processes
(Ray workers on one machine), can record into the same directory; a torn last line (a crash
mid-write) is ignored on load and cut off before the next append.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["TapeFile", "canonical", "key_of", "TOOLS_FILE", "MODEL_FILE"]

TOOLS_FILE = "tools.jsonl"
MODEL_FILE = "model.jsonl"


def canonical(value: Any) -> str:
    """The canonical JSON of ``value``: sorted keys, no spaces, unicode kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def key_of(request: Any) -> str:
    return hashlib.sha256(canonical(request).encode("utf-8")).hexdigest()[:32]


class TapeFile:
    """One JSONL file of recorded exchanges. ``take(key)`` hands out the recorded responses of a
    key in order (replay); ``append(key, request, response)`` records one (record)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._entries: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._taken: dict[str, int] = defaultdict(int)
        self._loaded = False

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        for raw in data.split(b"\n"):
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw)
            except ValueError:
                continue  # a torn line (a crash while recording): never half an answer
            if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                self._entries[entry["key"]].append(entry)

    def __len__(self) -> int:
        with self._lock:
            self._load()
            return sum(len(v) for v in self._entries.values())

    def entries(self) -> list[dict[str, Any]]:
        with self._lock:
            self._load()
            return [e for v in self._entries.values() for e in v]

    def take(self, key: str) -> tuple[dict[str, Any] | None, int]:
        """The next recorded entry of ``key`` (None when none is left) and how many there are."""
        with self._lock:
            self._load()
            recorded = self._entries.get(key, [])
            n = self._taken[key]
            self._taken[key] = n + 1
            return (recorded[n] if n < len(recorded) else None), len(recorded)

    def append(self, key: str, request: Any, response: Any) -> None:
        # The line keeps every object's own key order: a replayed answer must be the recorded one
        # byte for byte (a program that prints a dict prints its keys in that order). Only the
        # lookup key is canonical.
        line = (json.dumps({"key": key, "request": request, "response": response}, separators=(",", ":"),
                           ensure_ascii=False, default=str) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                _cut_torn_tail(fd)
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)  # closing releases the lock


def _cut_torn_tail(fd: int) -> None:
    """Cut a last line without its newline (a writer killed mid-line) so the next line starts clean."""
    size = os.fstat(fd).st_size
    if size == 0:
        return
    last = os.pread(fd, 1, size - 1)
    if last == b"\n":
        return
    start = max(0, size - 1_000_000)
    tail = os.pread(fd, size - start, start)
    cut = tail.rfind(b"\n")
    os.ftruncate(fd, start + cut + 1 if cut >= 0 else start)
