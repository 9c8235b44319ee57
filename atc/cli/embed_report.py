"""What ``atc tools import`` (and ``remove``, and a search that embeds) says while tools are embedded.

Embedding a large collection takes seconds to minutes; silence looks like a hang. On a terminal:
a progress bar on stderr, redrawn in place. Off a terminal (a script, CI, a pipe): one line when
the embedding will take more than a second (the rate of the first small step tells), then one
line with the count when it is done; nothing at all for an embedding that is over in under a
second. The onnxruntime model written on first use is announced the same way.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["EmbedReport"]

#: an embedding expected to take longer than this is announced off a terminal
ANNOUNCE_AFTER_S = 1.0
_BAR = 24


class EmbedReport:
    """A ``progress(done, total)`` callback (tools) that tells the user, and keeps what happened
    for ``--json`` (``to_dict``)."""

    def __init__(self, embedder: Any = None, stream: TextIO | None = None, *, tty: bool | None = None,
                 full: bool = False) -> None:
        self.embedder = embedder
        #: two stages: this reports the full model's vectors (not the import's static stage)
        self.full = full
        self.stream: TextIO = stream if stream is not None else (sys.__stderr__ or sys.stderr)
        self.tty = self.stream.isatty() if tty is None else tty
        self.runtime = ""
        self.tools = 0
        self.done = 0
        self.seconds = 0.0
        self._start: float | None = None
        self._announced = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed pipe must not fail the import
            pass

    def _prepare(self) -> None:
        """Before the first tool is embedded: write the fast encoder's model when it is not there
        yet, saying so (once per models folder, a few seconds), so that the estimate of the
        embedding is not thrown by it; and learn which runtime embeds."""
        embedder = self.embedder
        static = getattr(embedder, "static", None)
        if static is not None and not self.full:  # two stages: the import's static first stage
            self.runtime = "static first stage"
            return
        self.prepare_full()
        self.runtime = str(getattr(embedder, "documents_runtime", "") or getattr(embedder, "name", "") or "")

    def prepare_full(self) -> None:
        """Write the fast encoder's model when it is not there yet, saying so (once per models
        folder, a few seconds)."""
        embedder = self.embedder
        ready = getattr(embedder, "documents_ready", None)
        if callable(ready) and not ready():
            self._write("atc: preparing the fast encoder from the installed weights (once)...\n")
            started = time.monotonic()
            embedder.prepare_documents()
            fallback = getattr(embedder, "fallback", None)
            note = f"; {fallback}: numpy embeds instead" if fallback else ""
            self._write(f"atc: encoder ready in {time.monotonic() - started:.1f} s{note}\n")

    def __call__(self, done: int, total: int) -> None:
        if self._start is None or done == 0:
            if total:
                self._prepare()
            self._start = time.monotonic()
            self.tools, self.done = total, 0
            if self.tty and total:
                self._bar(0, total, None)
            return
        now = time.monotonic()
        self.tools, self.done = total, done
        elapsed = now - self._start
        left = elapsed / done * (total - done) if done else None
        if self.tty:
            self._bar(done, total, left)
        elif not self._announced and done < total and left is not None and elapsed + left > ANNOUNCE_AFTER_S:
            self._announced = True
            self._write(f"atc: embedding {total} tools for search{self._with()}: about {max(1, round(left))} s more "
                        "(--no-embed skips this; an interrupted import keeps what is done)\n")
        if done >= total:
            self.seconds = elapsed
            if self.tty:
                self._write("\n")
            if self.tty or self._announced or elapsed > ANNOUNCE_AFTER_S:
                self._write(f"atc: embedded {total} tools in {elapsed:.1f} s{self._with()}\n")

    def background(self, tools: int, pid: int | None) -> None:
        """Say that the full model's vectors of ``tools`` tools come later (from process ``pid``,
        or, when None, from the searches that short-list them) -- on a terminal only, where it is
        read at once, before the import's last line. Off a terminal (a script, an agent reading the
        streams) it is not said at all: a line on stderr there may be read after the next command
        began, and the import's JSON has it (``embedded.background``, ``embedded.pid``)."""
        if not self.tty:
            return
        if pid is not None:
            self._write(f"atc: the full model embeds {tools} tools in the background (pid {pid}); searches "
                        "meanwhile embed the few they short-list\n")
        else:
            self._write(f"atc: searches will embed {tools} tools with the full model as they short-list them\n")

    def _with(self) -> str:
        return f" ({self.runtime})" if self.runtime else ""

    def _bar(self, done: int, total: int, left: float | None) -> None:
        filled = round(_BAR * done / total) if total else _BAR
        eta = f", {round(left)} s left" if left is not None and done < total else ""
        self._write(f"\ratc: embedding tools [{'#' * filled}{'.' * (_BAR - filled)}] {done}/{total}{eta}   ")

    def to_dict(self) -> dict[str, Any]:
        return {"tools": self.done, "seconds": round(self.seconds, 3), "runtime": self.runtime}
