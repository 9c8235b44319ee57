"""The result file of a batch: one JSON line per finished task, appended as each finishes.

Each line is written with one ``write`` and then ``fsync``ed, so a kill (or a power cut after the
call returned) loses nothing that was reported done. Opening an existing file makes the batch
resumable: the ids already there are done and are skipped. A last line without its newline or
that is not JSON (the process died mid-write) is cut off -- that task simply runs again -- and
said on ``repaired``; a bad line anywhere else is not ours to fix (``UsageError``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from atc.errors import UsageError
from atc.workflows.tasks import task_key

__all__ = ["ResultLog"]


class ResultLog:
    """Where results go: a file (resumable) or a stream such as stdout (not resumable)."""

    def __init__(self, path: str | Path | None = None, *, stream: TextIO | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else None
        self.stream = stream if stream is not None else (sys.stdout if path is None else None)
        self.done: dict[str, dict[str, Any]] = {}
        self.repaired: str | None = None
        self._lock = threading.Lock()
        self._fd: int | None = None
        if self.path is not None:
            self._open()

    def _open(self) -> None:
        assert self.path is not None
        if self.path.is_dir():
            raise UsageError(f"--out {self.path} is a directory", hint="give a file path, e.g. results.jsonl")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        data = b""
        while chunk := os.read(self._fd, 1 << 20):
            data += chunk
        good = 0  # bytes of the file that are whole, parsed lines
        *whole, tail = data.split(b"\n")  # ``tail`` is b"" unless the last line lacks its newline
        for index, raw in enumerate(whole):
            try:
                obj = json.loads(raw) if raw.strip() else {}
            except ValueError:
                obj = None
            if obj == {}:
                good += len(raw) + 1
                continue
            if not isinstance(obj, dict) or "id" not in obj:
                if index == len(whole) - 1 and not tail:  # the last line, garbled: torn as well
                    tail = raw
                    break
                raise UsageError(f"{self.path}: line {index + 1} is not a result line of atc batch",
                                 hint="give --out a new file, or the result file of this batch to resume it")
            self.done[task_key(obj["id"])] = obj
            good += len(raw) + 1
        if tail:
            self.repaired = (f"{self.path}: cut off a torn last line ({len(tail)} bytes: the previous run "
                             f"stopped mid-write); that task runs again")
        if good < len(data):
            os.ftruncate(self._fd, good)
            os.fsync(self._fd)
        os.lseek(self._fd, 0, os.SEEK_END)

    def write(self, result: dict[str, Any]) -> None:
        """Append one result line, durably (file) or flushed (stream)."""
        line = json.dumps(result, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            if self._fd is not None:
                view = memoryview(line.encode("utf-8"))
                while view:
                    view = view[os.write(self._fd, view):]
                os.fsync(self._fd)
            elif self.stream is not None:
                self.stream.write(line)
                self.stream.flush()
            self.done[task_key(result.get("id"))] = result

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> ResultLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
