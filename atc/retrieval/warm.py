"""The command's side of the warm search server (server.py): where a store's server listens, and
one question to it.

This module is on the path of every ``atc tools search``, before anything else is loaded, so it
imports as little as it can: the C halves of ``socket`` and ``hashlib`` (``_socket``, ``_blake2``:
the Python wrappers and OpenSSL cost a search about 10 ms), no dataclasses, and answers as plain
JSON dicts (``SearchResult.to_dict()``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

try:
    import _socket as _sock  # the C module; socket.py adds nothing a Unix stream needs here
except ImportError:  # pragma: no cover - an interpreter without it
    import socket as _sock  # type: ignore[no-redef]
try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover
    from hashlib import blake2b
import atc
from atc.config import embed_runtime, embed_settings, temp_dir

__all__ = ["LLM_FREE", "PROTOCOL", "MAX_LINE", "socket_path", "private_dir", "exchange", "ask", "spawn"]

#: the retrievers a server answers for (None: the automatic choice); the others need a model
LLM_FREE = frozenset({None, "", "auto", "bm25", "dense", "hybrid"})
#: bumped when a request or an answer changes shape
PROTOCOL = 1
#: the largest answer read (a query is short; 500 hits are about 100 KB)
MAX_LINE = 4 << 20
_MAX_PATH = 104


def _code_stamp() -> str:
    """The version of the code that answers: the newest change among the modules a search runs
    (an upgrade or an edit of atc never reaches a server started by the old code)."""
    root = Path(atc.__file__).parent
    newest = 0
    for folder in (root, root / "retrieval", root.parent / "protocols"):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(".py"):
                newest = max(newest, entry.stat().st_mtime_ns)
    return f"{atc.__version__}:{newest}"


def _fingerprint(home: Path) -> str:
    """One store, one interpreter, one version of the code, one embedder configuration."""
    emb = embed_settings()
    key = blake2b(digest_size=10)
    # The API key only enters the hash, never the name (a different key is a different server).
    # The interpreter as an environment (its prefix) and a binary (resolved): ``.venv/bin/python``
    # and ``.venv/bin/python3`` are one interpreter, two virtual environments are two.
    interpreter = f"{sys.prefix}\0{os.path.realpath(sys.executable)}"
    for part in (str(home.resolve()), interpreter, _code_stamp(), emb.model or "", embed_runtime(),
                 emb.base_url or "",
                 blake2b((emb.api_key or "").encode()).hexdigest()):
        key.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return key.hexdigest()


def private_dir() -> Path | None:
    """``$TMPDIR/atc-UID`` (``/tmp`` without TMPDIR), made with mode 0700; None when it exists
    but is not this user's own, or is open to others (then no server is used at all)."""
    uid = getattr(os, "getuid", lambda: None)()
    if uid is None or not hasattr(_sock, "AF_UNIX"):  # no users or no Unix sockets here: no server
        return None
    folder = temp_dir() / f"atc-{uid}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        st = folder.lstat()
    except OSError:
        return None
    if (st.st_mode & 0o170000) != 0o040000 or st.st_uid != uid or st.st_mode & 0o077:
        return None
    return folder


def socket_path(home: Path) -> Path | None:
    """The socket of the server of the store in ``home`` under this configuration (None: no safe place)."""
    folder = private_dir()
    if folder is None:
        return None
    path = folder / f"search-{_fingerprint(home)}.sock"
    # A Unix socket's path holds at most 107 bytes: a longer TMPDIR gets no server, not a failing one.
    return path if len(os.fsencode(path)) <= _MAX_PATH else None


def exchange(path: Path, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """One request and its answer, or None on any failure (no server, a dead, slow or garbled one)."""
    conn = _sock.socket(_sock.AF_UNIX, _sock.SOCK_STREAM)
    try:
        conn.settimeout(timeout)
        conn.connect(str(path))
        conn.sendall(json.dumps(request).encode() + b"\n")
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_LINE:
                return None
        answer = json.loads(b"".join(chunks))
    except (OSError, ValueError):
        return None
    finally:
        conn.close()
    return answer if isinstance(answer, dict) and answer.get("protocol") == PROTOCOL else None


def _valid(doc: Any) -> bool:
    """An answer shaped like ``SearchResult.to_dict()`` (anything else: the command searches itself)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("retriever"), str) or not isinstance(doc.get("hits"), list):
        return False
    for hit in doc["hits"]:
        if not (isinstance(hit, dict) and isinstance(hit.get("name"), str) and isinstance(hit.get("collection"), str)
                and isinstance(hit.get("score"), int | float) and isinstance(hit.get("description", ""), str)):
            return False
    return isinstance(doc.get("notes", []), list) and isinstance(doc.get("usage", {}), dict)


def ask(home: Path, query: str, k: int, retriever: str | None, *,
        timeout: float = 10.0) -> tuple[dict[str, Any], bool] | None:
    """The server's answer for the store in ``home``: ``(SearchResult.to_dict(), store_is_empty)``,
    or None when the caller should search itself (no server, a retriever that needs a model,
    or anything amiss)."""
    if retriever not in LLM_FREE:
        return None
    path = socket_path(home)
    if path is None or not path.exists():
        return None
    answer = exchange(path, {"protocol": PROTOCOL, "op": "search", "query": query, "k": k,
                             "retriever": retriever or None}, timeout)
    if answer is None or not answer.get("ok") or not _valid(answer.get("result")):
        return None
    return answer["result"], bool(answer.get("empty"))


def spawn(home: Path) -> bool:
    """Start a server for ``home`` in the background, detached (it outlives the command and
    answers the next search). False when there is no safe place for its socket or one answers."""
    import subprocess

    path = socket_path(home)
    if path is None or exchange(path, {"protocol": PROTOCOL, "op": "status"}, 1.0) is not None:
        return False
    with open(path.with_suffix(".log"), "ab") as err:
        os.chmod(err.name, 0o600)
        subprocess.Popen([sys.executable, "-m", "atc.retrieval.server", str(home)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=err, start_new_session=True, close_fds=True, cwd="/")
    return True
