"""Recorded responses in ``ATC_HOME``, so that probing the same API again costs no requests.

Layout::

    ATC_HOME/probe-cache/<collection>-<hash of the base URL>/
        <sha256 of the request>.json      one recorded exchange: tool, args, status, kind, data, time
        tool-<tool name>.json             a tool's model-mode finding (question, program, calls)

**Key.** A request is identified by what decides its answer: the server it goes to (the base URL
after ``--base-url``), the operation (method, path template, and where each argument goes on the
wire), the arguments themselves (canonical JSON), and which credentials were configured (scheme
and environment variable *names*; never the secrets). A spec that changes an operation's path or
parameters therefore misses the old entries by itself.

**Invalidation.** Entries older than ``ttl`` seconds (default 7 days) are ignored and rewritten;
``refresh`` ignores every entry (and records anew); ``enabled=False`` neither reads nor writes.
Only answers that say something stable about the API are recorded: 2xx, and 4xx other than
401/403/408/429 (credentials can be fixed, rate limits pass). Server errors, timeouts, network
failures and garbage are never recorded, so a re-run tries them again.

**Safety.** Responses were redacted by the gateway before they get here (no credential value is
ever written); the directory is created ``0700`` and files ``0600``, since recorded responses are
the user's API data. Each file is written to a temporary file in the same directory, fsynced and
``os.replace``d: an interrupted run leaves whole entries or none, and keeps every entry it wrote.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from protocols.files import atomic_write
from protocols.model import Tool

__all__ = ["ResponseCache", "DEFAULT_TTL", "CACHEABLE_KINDS", "cacheable"]

DEFAULT_TTL = 7 * 24 * 3600.0
_FORMAT = 1
CACHEABLE_KINDS = frozenset({"ok", "empty", "http"})
_VOLATILE = frozenset({401, 403, 408, 429})


def cacheable(kind: str, status: int | None) -> bool:
    """Whether an exchange is worth recording (see the module docstring)."""
    if kind not in CACHEABLE_KINDS:
        return False
    if kind == "http":
        return status is not None and 400 <= status < 500 and status not in _VOLATILE
    return True


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:60].strip("._") or "api"


class ResponseCache:
    """The recorded exchanges of one collection at one base URL."""

    def __init__(self, home: Path | str, collection: str, base: str, *, credentials: Mapping[str, str] | None = None,
                 ttl: float = DEFAULT_TTL, refresh: bool = False, enabled: bool = True) -> None:
        digest = hashlib.sha256(base.encode()).hexdigest()[:12]
        self.dir = Path(home).expanduser() / "probe-cache" / f"{_slug(collection)}-{digest}"
        self.ttl = ttl
        self.refresh = refresh
        self.enabled = enabled
        self.credentials = sorted((credentials or {}).items())
        self.hits = 0
        self.writes = 0

    def key(self, tool: Tool, args: dict[str, Any], server: str) -> str:
        """The key of a request to ``server`` (the base URL the gateway sends it to)."""
        wire = {k: (b.location, b.name) for k, b in tool.bindings.items() if k in args}
        doc = [_FORMAT, server, tool.method.upper(), tool.path, sorted(wire.items()), args, self.credentials]
        text = json.dumps(doc, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def _fresh(self, record: Any) -> bool:
        return (isinstance(record, dict) and record.get("format") == _FORMAT
                and isinstance(record.get("at"), int | float) and time.time() - record["at"] <= self.ttl)

    def _read(self, path: Path) -> dict[str, Any] | None:
        if not self.enabled or self.refresh:
            return None
        try:
            record = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None  # missing, or a file some other tool damaged: treat as not recorded
        return record if self._fresh(record) else None

    def _write(self, path: Path, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = json.dumps({**record, "format": _FORMAT, "at": time.time()}, ensure_ascii=False,
                          default=str).encode()
        try:
            atomic_write(path, data)
        except OSError:
            return  # a full or read-only disk costs the reuse, not the probe
        self.writes += 1

    def get(self, key: str) -> dict[str, Any] | None:
        """The recorded exchange for a request key, or None."""
        record = self._read(self.dir / f"{key}.json")
        if record is not None:
            self.hits += 1
        return record

    def put(self, key: str, record: dict[str, Any]) -> None:
        """Record one exchange (callers check ``cacheable`` first)."""
        self._write(self.dir / f"{key}.json", record)

    def finding(self, tool: str) -> dict[str, Any] | None:
        """A tool's recorded model-mode finding (question, program and what its calls returned)."""
        return self._read(self.dir / f"tool-{_slug(tool)}.json")

    def put_finding(self, tool: str, record: dict[str, Any]) -> None:
        self._write(self.dir / f"tool-{_slug(tool)}.json", record)
