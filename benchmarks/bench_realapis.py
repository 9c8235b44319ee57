"""What the real-APIs work (issue #7) costs and buys, each row against a baseline of the same run:

- gateway per call: ``Gateway.call`` of a plain GET and of a call with styled parameters
  (deepObject, pipeDelimited, a JSON form body) against direct ``httpx`` calls to the same
  loopback server -- the added milliseconds per call;
- compressed bodies: a 1 MB JSON body sent gzip/br/zstd through the gateway's bounded decoder
  against httpx's own decoding of the same response;
- compression bombs: the peak memory while a 64 MB brotli/zstd/gzip bomb is refused at a 5 MB
  cap by the gateway, against reading the same response with httpx's decoder and the same cap
  checked per chunk (what the gateway did before);
- import: importing the TMDB and Spotify specs with the schema repairs against the same import
  with the repair step switched off.

Usage::

    .venv/bin/python benchmarks/bench_realapis.py [-n 200]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import httpx  # noqa: E402

from protocols import load_data, load_spec  # noqa: E402
from protocols.model import Binding, Collection, Tool  # noqa: E402
from sandbox.api import Limits, Toolset  # noqa: E402
from sandbox.gateway.core import Gateway  # noqa: E402
from tests.support.apis.realworld import RealWorld, bomb  # noqa: E402

SPECS = Path("/work/shared/bench-data/restbench/specs")


def p50_ms(fn: Callable[[], object], n: int) -> float:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def paired_ms(base: Callable[[], object], ours: Callable[[], object], n: int) -> tuple[float, float]:
    """Medians of ``base`` and ``ours`` timed alternately, so that the load of a shared machine
    weighs on both alike."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(n):
        for fn, samples in ((base, a), (ours, b)):
            started = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(a), statistics.median(b)


def _tools(url: str) -> Collection:
    obj = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    arr = {"type": "array", "items": {"type": "string"}}
    tools = [
        Tool(name="plain", collection="b", path="/echo",
             parameters={"type": "object", "properties": {"q": {"type": "string"}, "page": {"type": "integer"},
                                                          "limit": {"type": "integer"}}},
             bindings={"q": Binding("query", "q"), "page": Binding("query", "page"),
                       "limit": Binding("query", "limit")}),
        Tool(name="styled", collection="b", method="POST", path="/echo",
             parameters={"type": "object", "properties": {"filter": obj, "ids": arr, "tags": arr, "note": obj}},
             bindings={"filter": Binding("query", "filter", style="deepObject", explode=True),
                       "ids": Binding("query", "ids", style="pipeDelimited", explode=False),
                       "tags": Binding("body", "tags"), "note": Binding("body", "note", style="deepObject")},
             body_media_type="application/x-www-form-urlencoded"),
    ]
    for kind in ("gzip", "br", "zstd"):
        tools.append(Tool(name=f"big_{kind}", collection="b", path=f"/files/big.{kind}"))
        tools.append(Tool(name=f"bomb_{kind}", collection="b", path=f"/bomb/{kind}"))
    return Collection(name="b", tools=tools, servers=[url])


def call_rows(rw: RealWorld, n: int) -> list[dict[str, Any]]:
    gw = Gateway(Toolset([_tools(rw.url)]), Limits(max_calls=10**9))
    client = httpx.Client(trust_env=False)
    args = {"q": "garden", "page": 2, "limit": 20}
    styled = {"filter": {"a": 1, "b": "x y"}, "ids": ["1", "2", "3"], "tags": ["p", "q"], "note": {"a": 2}}
    direct, plain = paired_ms(lambda: client.get(rw.url + "/echo", params=args).json(),
                              lambda: gw.call("plain", args), n)
    direct_post, fancy = paired_ms(lambda: client.post(rw.url + "/echo?filter[a]=1&filter[b]=x%20y&ids=1|2|3",
                                                       data={"tags": ["p", "q"], "note[a]": "2"}).json(),
                                   lambda: gw.call("styled", styled), n)
    client.close()
    return [
        {"row": "GET, 3 query params", "baseline": "httpx direct", "baseline_ms": direct, "gateway_ms": plain,
         "added_ms": plain - direct, "ratio": plain / direct},
        {"row": "POST deepObject+pipes query, form body", "baseline": "httpx direct", "baseline_ms": direct_post,
         "gateway_ms": fancy, "added_ms": fancy - direct_post, "ratio": fancy / direct_post},
    ]


def _compress(kind: str, data: bytes) -> bytes:
    if kind == "gzip":
        return gzip.compress(data)
    if kind == "br":
        import brotli

        return bytes(brotli.compress(data, quality=5))
    import zstandard

    return bytes(zstandard.ZstdCompressor().compress(data))


def decode_rows(rw: RealWorld, n: int) -> list[dict[str, Any]]:
    body = json.dumps([{"id": i, "name": f"item {i}", "tags": ["a", "b"], "score": i * 0.5}
                       for i in range(16_000)]).encode()
    gw = Gateway(Toolset([_tools(rw.url)]), Limits(max_calls=10**9))
    client = httpx.Client(trust_env=False)
    rows = []
    for kind in ("gzip", "br", "zstd"):
        rw.files[f"big.{kind}"] = (_compress(kind, body), "application/json", {"Content-Encoding": kind})
        url = rw.url + f"/files/big.{kind}"

        def direct(url: str = url) -> None:
            json.loads(client.get(url).content)  # httpx decodes gzip, br and zstd itself

        out = gw.call(f"big_{kind}", {})
        assert out.ok, out.error
        base, ours = paired_ms(direct, lambda kind=kind: gw.call(f"big_{kind}", {}), n)
        rows.append({"row": f"1 MB JSON as {kind}", "baseline": "httpx + one-shot decompress", "baseline_ms": base,
                     "gateway_ms": ours, "added_ms": ours - base, "ratio": ours / base})
    client.close()
    return rows


def bomb_rows(rw: RealWorld) -> list[dict[str, Any]]:
    cap = 5_000_000
    gw = Gateway(Toolset([_tools(rw.url)]), Limits(max_response_bytes=cap))
    client = httpx.Client(trust_env=False)
    rows = []
    for kind in ("gzip", "br", "zstd"):
        wire = len(bomb(kind))

        def old_way(kind: str = kind) -> str:
            size = 0
            with client.stream("GET", rw.url + f"/bomb/{kind}") as r:
                for chunk in r.iter_bytes():  # httpx decodes a whole network chunk at once
                    size += len(chunk)
                    if size > cap:
                        return "refused"
            return "read"

        def peak(fn: Callable[[], object]) -> tuple[float, object]:
            tracemalloc.start()
            try:
                result = fn()
                return tracemalloc.get_traced_memory()[1] / 1e6, result
            finally:
                tracemalloc.stop()

        old_mb, _ = peak(old_way)
        new_mb, out = peak(lambda kind=kind: gw.call(f"bomb_{kind}", {}))
        assert not out.ok  # type: ignore[attr-defined]
        rows.append({"row": f"64 MB {kind} bomb ({wire:,} bytes on the wire), 5 MB cap",
                     "baseline": "httpx decoding, cap per chunk", "baseline_peak_mb": old_mb,
                     "gateway_peak_mb": new_mb, "ratio": new_mb / old_mb if old_mb else 0.0})
    client.close()
    return rows


def import_rows(repeat: int = 5) -> list[dict[str, Any]]:
    import protocols.refs as refs

    rows = []
    for name in ("tmdb_oas.json", "spotify_oas.json"):
        path = SPECS / name
        if not path.exists():
            continue
        doc = json.loads(path.read_text())
        with_repair = statistics.median(_timed(lambda doc=doc, name=name: load_data(doc, source=name)) for _ in range(repeat))
        original = refs.repair_node
        refs.repair_node = lambda node, at, warn, dialect="3.0": node  # type: ignore[assignment]
        try:
            without = statistics.median(_timed(lambda doc=doc, name=name: load_data(doc, source=name)) for _ in range(repeat))
        finally:
            refs.repair_node = original
        warnings = len(load_spec(path).warnings)
        rows.append({"row": f"import {name} ({warnings} repairs)", "baseline": "same import, repair switched off",
                     "baseline_ms": without, "gateway_ms": with_repair, "added_ms": with_repair - without,
                     "ratio": with_repair / without})
    return rows


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200, help="calls per row")
    args = parser.parse_args()
    rw = RealWorld().start()
    try:
        rows = call_rows(rw, args.n) + decode_rows(rw, max(10, args.n // 10)) + bomb_rows(rw) + import_rows()
    finally:
        rw.stop()
    for row in rows:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}))


if __name__ == "__main__":
    main()
