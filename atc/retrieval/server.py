"""The warm search server: ``atc tools search`` answered by a process that already holds numpy,
the embedding model and the open index.

Why: a hybrid search in a fresh process spends most of its wall time getting ready, not
searching (numpy's import, the tokenizer and the weights, the first touch of the index: about
0.25 s of 0.35 s at 17k tools, benchmarks/RESULTS.md). The first hybrid search of a store runs in
its own process as before and leaves a server behind (``ATC_SEARCH_SERVER=auto``, the default);
later searches of the same store ask it over a Unix socket and only pay for Python's start and
the query itself. ``ATC_SEARCH_SERVER=off`` never starts or asks one.

What keeps it honest:

* The answer is the one the command would compute itself: the server runs the same retrievers
  over the same index, and brings the index up to date with the store before every query.
* Only the LLM-free retrievers (``auto``, ``bm25``, ``dense``, ``hybrid``) go to a server; a
  model-backed one runs in the command, with the command's model settings.
* A server belongs to one store, one user, one embedder configuration and one version of the
  code: the socket's name is a hash of all four, so a changed ``ATC_EMBED_MODEL`` or an upgraded
  atc never reaches an old server (which ends on its own when idle).
* The socket lives in a folder of the user's own with mode 0700 (``/tmp/atc-UID``); a folder
  that is not the user's, or open to others, is never used.
* Anything wrong on the way (no server, a dead one, a slow or garbled answer, an error) makes the
  command search in its own process, so a server can make a search faster, never wrong.
* It ends after ``ATC_SEARCH_SERVER_IDLE`` seconds without a query (default 600), when its store
  folder is removed, or when asked (``atc tools server stop``).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atc.config import search_server_idle
from atc.errors import AtcError, UsageError
from atc.retrieval.api import search_store
from atc.retrieval.base import SearchResult
from atc.retrieval.embedders import make_embedder
from atc.retrieval.warm import LLM_FREE, MAX_LINE, PROTOCOL, exchange, socket_path, spawn

__all__ = ["ServerInfo", "start", "stop", "status", "serve", "main"]


@dataclass
class ServerInfo:
    """What ``atc tools server status`` prints: a live server of this store, or none."""

    running: bool
    socket: str
    pid: int | None = None
    home: str | None = None
    uptime_s: float | None = None
    idle_s: float | None = None
    queries: int | None = None
    embedder: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"running": self.running, "socket": self.socket, "pid": self.pid, "home": self.home,
                "uptime_s": self.uptime_s, "idle_s": self.idle_s, "queries": self.queries,
                "embedder": self.embedder, "notes": self.notes}


def start(home: Path, *, wait: float = 30.0) -> ServerInfo:
    """Start a server (unless one answers) and wait until it answers. Without a private socket
    folder no server can be started: the status says why, at once (a spawn could never answer)."""
    if socket_path(home) is None:
        return status(home)
    spawn(home)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        info = status(home)
        if info.running:
            return info
        time.sleep(0.05)
    info = status(home)
    if not info.running:
        log = f"; see {Path(info.socket).with_suffix('.log')}" if info.socket else ""
        info.notes.append(f"the server did not answer within {wait:.0f} s{log}")
    return info


def status(home: Path) -> ServerInfo:
    path = socket_path(home)
    if path is None:
        return ServerInfo(running=False, socket="", notes=["the socket folder (TMPDIR/atc-UID) is not a private "
                                                           "folder of this user: no server is used"])
    answer = exchange(path, {"protocol": PROTOCOL, "op": "status"}, 2.0)
    if answer is None:
        return ServerInfo(running=False, socket=str(path))
    return ServerInfo(running=True, socket=str(path), pid=answer.get("pid"), home=answer.get("home"),
                      uptime_s=answer.get("uptime_s"), idle_s=answer.get("idle_s"), queries=answer.get("queries"),
                      embedder=answer.get("embedder"))


def stop(home: Path) -> bool:
    """Ask the server of ``home`` to end; True when one was running."""
    path = socket_path(home)
    if path is None:
        return False
    return exchange(path, {"protocol": PROTOCOL, "op": "stop"}, 5.0) is not None


# -- the server side ---------------------------------------------------------------------------


class _Searcher:
    """Searches of one store in a process that keeps what they load: the embedder (made once per
    process by ``make_embedder``, its matrices made resident here), the parsed store and the open
    index (kept per file version by store.py and index.py, brought up to date when they change)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        try:
            self.embedder = make_embedder()
        except AtcError:  # each search then fails as it does in the command, which reports it
            self.embedder = None
        resident = getattr(self.embedder, "keep_resident", None)
        if callable(resident):
            resident()

    def search(self, query: str, k: int, retriever: str | None) -> tuple[SearchResult, bool]:
        if k < 1 or not query.strip():
            raise UsageError("bad request")
        # The command's own code path (nothing passed that the command does not pass).
        return search_store(query, k, retriever, home=self.home)


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_LINE:
            raise ValueError("request too long")
    return data.split(b"\n", 1)[0]


def serve(home: Path, *, idle: float | None = None) -> int:
    """Answer searches of the store in ``home`` until idle for ``idle`` seconds, asked to stop, or
    the store's folder is gone. Returns the exit code (0; 1 when the socket could not be bound)."""
    home = Path(home)
    idle = search_server_idle() if idle is None else idle
    path = socket_path(home)
    if path is None:
        return 1
    # Only one server per socket: one started while another answers leaves at once; of two started
    # at the same moment, the one whose socket file the other replaced leaves at its next look.
    if exchange(path, {"protocol": PROTOCOL, "op": "status"}, 1.0) is not None:
        return 0
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        path.unlink(missing_ok=True)
        listener.bind(str(path))
        os.chmod(path, 0o600)
        listener.listen(16)
    except OSError as exc:
        sys.stderr.write(f"atc search server: cannot listen on {path}: {exc}\n")
        return 1
    inode = path.stat().st_ino
    searcher = _Searcher(home)
    started = last = time.monotonic()
    queries = 0
    listener.settimeout(min(5.0, max(0.05, idle / 4)))
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                # Gone: the store's folder, our socket (another server took the name), or our time.
                try:
                    ours = path.stat().st_ino == inode
                except OSError:
                    ours = False
                if not home.is_dir() or not ours or time.monotonic() - last > idle:
                    return 0
                continue
            with conn:
                # A client that connects and says nothing holds up the others for 2 s at most.
                conn.settimeout(2.0)
                answer: dict[str, Any] = {"protocol": PROTOCOL, "ok": False}
                stopping = False
                try:
                    request = json.loads(_read_line(conn))
                    op = request.get("op")
                    if request.get("protocol") != PROTOCOL:
                        answer["error"] = "protocol"
                    elif op == "status":
                        answer.update(ok=True, pid=os.getpid(), home=str(home),
                                      uptime_s=round(time.monotonic() - started, 1),
                                      idle_s=round(time.monotonic() - last, 1), queries=queries,
                                      embedder=searcher.embedder.name if searcher.embedder else None)
                    elif op == "stop":
                        answer["ok"] = stopping = True
                    elif op == "search" and request.get("retriever") in LLM_FREE:
                        last = time.monotonic()
                        queries += 1
                        result, empty = searcher.search(str(request["query"]), int(request["k"]),
                                                        request.get("retriever"))
                        answer.update(ok=True, empty=empty, result=result.to_dict())
                        last = time.monotonic()
                    else:
                        answer["error"] = "unknown request"
                except Exception as exc:  # the command searches itself and reports any error
                    answer["error"] = f"{type(exc).__name__}: {exc}"[:500]
                try:
                    conn.sendall(json.dumps(answer).encode() + b"\n")
                except OSError:
                    pass
                if stopping:
                    return 0
    finally:
        listener.close()
        try:
            if path.stat().st_ino == inode:
                path.unlink()
            log = path.with_suffix(".log")
            if log.stat().st_size == 0:  # nothing went wrong: nothing to keep
                log.unlink()
        except OSError:
            pass


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m atc.retrieval.server ATC_HOME\n")
        return 2
    return serve(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
