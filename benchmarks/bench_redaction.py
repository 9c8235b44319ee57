"""Benchmark redaction (issue 20, item 6): what looking for encoded secrets costs per response,
against ``json.loads`` of the same body (the parse every response gets anyway), measured in the
same run.

Bodies: the 54 real TMDB responses of bench-data (42 B to 82 KB; skipped when bench-data is
absent), and synthetic 100 KB, 1 MB and 5 MB JSON lists whose strings hold URLs with ``&`` and
``%XX``, ``\\u`` escapes, HTML entities and base64 blobs (what makes the raw-body plan decode
views). Each body is measured three ways: no secret in it (the common case: the plan alone), the
key in it as it stands (plan + walk, no decoding), and the key inside a base64 cursor and
percent-encoded (plan + walk with decoders).

    .venv/bin/python benchmarks/bench_redaction.py
"""

from __future__ import annotations

import base64
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import median_us  # noqa: E402  (benchmarks/ is the script directory)

from sandbox.gateway.redact import Redactor  # noqa: E402

#: ``../shared/bench-data`` of the repository (also one level further up, for a git worktree in a folder)
DATA = next((base / "shared" / "bench-data" / "toolflow" / "dataset" / "tmdb" / "tmdb.spec.probed.v2.json"
             for base in Path(__file__).resolve().parents[2:4]
             if (base / "shared" / "bench-data").is_dir()), Path("/nonexistent"))
KEY = "tmdb-k3y-5f1e9d7c2b"


def synthetic(size: int) -> bytes:
    rows = []
    i = 0
    while sum(len(r) for r in rows) < size:
        rows.append(json.dumps({"id": i, "url": f"https://x.test/a?page={i}&q=caf%C3%A9&amp;x=1",
                                "blob": base64.b64encode(os.urandom(48)).decode(),
                                "text": "caf\u00e9 \"quoted\"\nline", "n": i * 7.5}, ensure_ascii=True))
        i += 1
    return ("[" + ",".join(rows) + "]").encode()


def with_key(raw: bytes, how: str) -> bytes:
    if how == "plain":
        leak = KEY
    else:
        cursor = base64.b64encode(json.dumps({"after": 7, "auth": KEY}).encode()).decode()
        leak = cursor + " " + "".join(f"%{b:02X}" for b in KEY.encode())
    doc = json.loads(raw)
    if isinstance(doc, list):
        doc.append({"leak": leak})
    elif isinstance(doc, dict):
        doc["leak"] = leak
    else:
        doc = [doc, leak]
    return json.dumps(doc, ensure_ascii=True).encode()


def ratio(raw: bytes, redactor: Redactor) -> tuple[float, float, int]:
    """(redaction time / parse time, redaction time in ms, secrets found); small bodies are timed
    in loops of many calls, and parse and redaction interleaved, so that the shared machine's
    noise hits both alike."""
    loops = max(1, 200_000 // max(len(raw), 1))

    def parse() -> None:
        for _ in range(loops):
            json.loads(raw)

    def scrub() -> None:
        for _ in range(loops):
            redactor.scrub(json.loads(raw), raw)

    base = cost = 0.0
    for _ in range(3):
        base += median_us(parse, 3)
        cost += median_us(scrub, 3)
    _, n = redactor.scrub(json.loads(raw), raw)
    return ((cost - base) / base if base else 0.0), max(0.0, cost - base) / 3 / loops / 1000, n


def main() -> None:
    redactor = Redactor([KEY])
    bodies: list[tuple[str, bytes]] = []
    if DATA.exists():
        spec = json.loads(DATA.read_text())
        for endpoint in spec["endpoints"]:
            try:
                value: Any = endpoint["response"]["content"]["application/json"]["examples"]["response"]["value"]
            except (KeyError, TypeError):
                continue
            bodies.append(("tmdb (real)", json.dumps(value).encode()))
    for size in (100_000, 1_000_000, 5_000_000):
        bodies.append((f"synthetic {size // 1000} KB", synthetic(size)))
    print("redaction time / json.loads time of the same body (machine shared; medians, parse and "
          "redaction interleaved)")
    print("each cell: redaction time / parse time (redaction ms per body)")
    print(f"{'bodies':20} {'n':>3} {'KB':>7} {'no secret':>18} {'plain key':>18} {'encoded key':>18}")
    groups: dict[str, list[bytes]] = {}
    for name, raw in bodies:
        groups.setdefault(name, []).append(raw)
    for name, raws in groups.items():
        cols = []
        for how in ("none", "plain", "encoded"):
            values, spent = [], []
            for raw in raws:
                body = raw if how == "none" else with_key(raw, how)
                extra, ms, n = ratio(body, redactor)
                assert (n == 0) == (how == "none"), (name, how, n)
                values.append(extra)
                spent.append(ms)
            cols.append(f"{statistics.median(values):.2f} ({statistics.median(spent):.3f})")
        kb = statistics.median(len(r) for r in raws) / 1000
        print(f"{name:20} {len(raws):>3} {kb:>7.1f} {cols[0]:>18} {cols[1]:>18} {cols[2]:>18}")


if __name__ == "__main__":
    main()
