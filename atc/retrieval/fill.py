"""The full model's vectors of every tool, computed in the background after an import.

An import embeds its tools with the static first stage only (static.py: about 0.2 s per 1,000
tools) and returns; a search computes the full vectors of the tools it short-lists when they are
missing (exact.py), which makes the first searches after a large import slower (up to
``SHORT_LIST`` tools: about 0.7 s with onnxruntime int8). So the import also starts this
process, which computes the missing ones, a batch at a time, at a low priority
(``ATC_EMBED_BACKGROUND=off``: it is not started). It writes what a search would write (the
generation's rows and the vector cache) and the answers of searches do not depend on it: it only
makes them faster. It ends when every row has its vector, when the store's folder is gone, or
when another filler of the same store is running (a lock); a new generation (another import)
is taken up where the last one stopped, since its build takes every vector computed so far from
the vector cache.

``python -m atc.retrieval.fill ATC_HOME`` runs it in the foreground (what ``spawn`` starts).
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path
from typing import Any

from atc.config import embed_background
from atc.retrieval.embedders import make_embedder
from atc.retrieval.index import index_dir, open_index

__all__ = ["spawn", "fill", "pending", "complete", "BATCH", "NICE", "INLINE"]

#: tools per batch: the filler checks between batches whether its generation is still the live one
BATCH = 64
#: how much the background process lowers its priority (searches and imports go first)
NICE = 10


#: an import that leaves at most this many tools without their full vectors computes them itself
#: (under a second with the fast encoder): the first search would need them all anyway, since a
#: search short-lists that many (hybrid.SHORT_LIST), and no process is left behind
INLINE = 64


def complete(index: object, embedder: object, progress: Any = None) -> int:
    """Compute the missing full vectors of ``index`` now, in this process; how many."""
    get = getattr(index, "stages", None)
    stages = get(embedder) if callable(get) else None
    if stages is None:
        return 0
    lacking = stages.exact.missing()
    if len(lacking):
        stages.exact.compute(lacking, embedder, progress=progress)
    return int(len(lacking))


def pending(index: object, embedder: object) -> int:
    """How many rows of ``index`` lack the full model's vector (0 without two stages)."""
    get = getattr(index, "stages", None)
    stages = get(embedder) if callable(get) else None
    return int(len(stages.exact.missing())) if stages is not None else 0


def spawn(home: Path) -> int | None:
    """Start the filler of ``home`` in the background, detached; its pid (None: not started,
    ``ATC_EMBED_BACKGROUND=off``)."""
    import subprocess

    if embed_background() == "off":
        return None
    folder = index_dir(home)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "fill.log", "ab") as err:
            os.chmod(err.name, 0o600)
            proc = subprocess.Popen([sys.executable, "-m", "atc.retrieval.fill", str(home)], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=err, start_new_session=True, close_fds=True,
                                    cwd="/")
    except OSError:  # a store we cannot write, no process to spare: searches compute what they need
        return None
    return proc.pid


def fill(home: Path, *, batch: int = BATCH, nice: int = NICE) -> int:
    """Compute every missing full vector of the live index of ``home``; the number computed.
    Returns at once (0) when another filler holds the lock."""
    home = Path(home)
    folder = index_dir(home)
    try:
        lock = open(folder / ".fill.lock", "a+b")
    except OSError:
        return 0
    with lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another filler of this store is at work
        if nice:
            try:
                os.nice(nice)
            except OSError:
                pass
        embedder = make_embedder()
        if embedder is None or getattr(embedder, "static", None) is None:
            return 0
        done = 0
        while home.is_dir():
            index = open_index(home, embedder=embedder, refresh=False)
            stages = index.stages(embedder)
            if stages is None:
                return done
            lacking = stages.exact.missing()
            if not len(lacking):
                return done
            live = index.folder.name
            for start in range(0, len(lacking), batch):
                if _current(folder) != live or not home.is_dir():
                    break  # another generation: its build took what is done so far; go on there
                stages.exact.compute(lacking[start:start + batch], embedder)
                done += len(lacking[start:start + batch])
        return done


def _current(folder: Path) -> str:
    try:
        return (folder / "CURRENT").read_text().strip()
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m atc.retrieval.fill ATC_HOME\n")
        return 2
    fill(Path(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
