"""How much does ``atc mock`` cost compared with a hand-written API on the same HTTP stack?

Three measurements, each with a baseline taken in the same run:

1. HTTP latency per request: ``MockServer`` built from the library fixture's own OpenAPI spec
   against the hand-written ``tests/apis/library.py`` server answering the same five endpoints
   (both stdlib ``ThreadingHTTPServer`` on 127.0.0.1, one keep-alive httpx client each).
2. In-process generation of every RestBench TMDB operation (``MockApp.handle``, 54 operations)
   against ``json.dumps`` of the bodies it produced.
3. ``atc mock SPEC --port 0 --json`` start-up until its JSON line, against ``python -c pass``.

Usage: .venv/bin/python benchmarks/bench_mock.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from atc.mock import MockApp, MockServer  # noqa: E402
from protocols import load_data, load_spec  # noqa: E402
from tests.apis.library import LibraryAPI  # noqa: E402

TMDB = ROOT.parent / "shared" / "bench-data" / "restbench" / "specs" / "tmdb_oas.json"
BOOKSHOP = ROOT / "atc" / "examples" / "bookshop" / "openapi.json"


def _ms(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return statistics.median(samples) * 1000, samples[int(len(samples) * 0.95) - 1] * 1000


def _http_round(client: httpx.Client, paths: list[str], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        for path in paths:
            t = time.perf_counter()
            r = client.get(path)
            out.append(time.perf_counter() - t)
            assert r.status_code == 200, (path, r.status_code, r.text[:200])
    return out


def bench_http(rounds: int) -> None:
    api = LibraryAPI()
    api.start()
    try:
        collection = load_data(api.spec(), source="library")
        with MockServer(collection) as mock, httpx.Client(base_url=api.url) as real, \
                httpx.Client(base_url=mock.url) as fake:
            # Same endpoints, each with ids the server in question knows.
            author = fake.get("/authors", params={"name": "a"}).json()["results"][0]["id"]
            book = fake.get(f"/authors/{author}/books").json()["books"][0]["id"]
            fake_paths = ["/authors?name=le", f"/authors/{author}", f"/authors/{author}/books", f"/books/{book}",
                          f"/books/{book}/reviews"]
            real_paths = ["/authors?name=le", "/authors/1", "/authors/1/books", "/books/10", "/books/10/reviews"]
            _http_round(real, real_paths, 3)
            _http_round(fake, fake_paths, 3)
            base = _ms(_http_round(real, real_paths, rounds))
            mock_ms = _ms(_http_round(fake, fake_paths, rounds))
    finally:
        api.stop()
    print("1. HTTP latency per request, 5 library endpoints x", rounds, "rounds")
    print(f"   hand-written library API   p50 {base[0]:7.3f} ms   p95 {base[1]:7.3f} ms")
    print(f"   atc mock (library spec)    p50 {mock_ms[0]:7.3f} ms   p95 {mock_ms[1]:7.3f} ms"
          f"   ratio p50 {mock_ms[0] / base[0]:.2f}x")


def bench_generation(rounds: int) -> None:
    if not TMDB.exists():
        print("2. skipped: no RestBench TMDB spec at", TMDB)
        return
    collection = load_spec(TMDB)
    app = MockApp(collection)
    targets = []
    for tool in collection.tools:
        path = tool.path
        for pname, b in tool.bindings.items():
            if b.location == "path":
                schema = tool.properties[pname]
                ent = next(e.id_params.get(b.name) for e in app.endpoints if e.tool is tool)
                value = app.spaces.ids(ent, "int" if schema.get("type") == "integer" else "str")[0] if ent \
                    else (schema["enum"][0] if "enum" in schema else 1)
                path = path.replace("{" + b.name + "}", str(value))
        query = "&".join(f"{tool.bindings[p].name}=star" for p in tool.required
                         if tool.bindings[p].location == "query")
        targets.append((tool.method, path + ("?" + query if query else "")))
    gen, ser, sizes = [], [], []
    for _ in range(rounds):
        for method, target in targets:
            t = time.perf_counter()
            resp = app.handle(method, target)
            gen.append(time.perf_counter() - t)
            assert resp.status == 200, (target, resp.body)
            t = time.perf_counter()
            data = json.dumps(resp.body)
            ser.append(time.perf_counter() - t)
            sizes.append(len(data))
    g, s = _ms(gen), _ms(ser)
    print(f"2. TMDB, {len(targets)} operations x {rounds} rounds, in process (bodies: median "
          f"{statistics.median(sizes):.0f} B, max {max(sizes)} B)")
    print(f"   json.dumps of the body     p50 {s[0]:7.3f} ms   p95 {s[1]:7.3f} ms")
    print(f"   MockApp.handle             p50 {g[0]:7.3f} ms   p95 {g[1]:7.3f} ms   ratio p50 {g[0] / s[0]:.1f}x")


def bench_startup(rounds: int) -> None:
    atc = ROOT / ".venv" / "bin" / "atc"
    base, mock = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        base.append(time.perf_counter() - t)
        t = time.perf_counter()
        proc = subprocess.Popen([str(atc), "mock", str(BOOKSHOP), "--port", "0", "--json"], stdout=subprocess.PIPE,
                                text=True)
        assert proc.stdout is not None
        json.loads(proc.stdout.readline())
        mock.append(time.perf_counter() - t)
        proc.terminate()
        proc.wait(timeout=10)
    b, m = _ms(base), _ms(mock)
    print(f"3. start-up until serving, {rounds} runs")
    print(f"   python -c pass             p50 {b[0]:7.1f} ms")
    print(f"   atc mock --port 0 --json   p50 {m[0]:7.1f} ms   ratio p50 {m[0] / b[0]:.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args()
    bench_http(args.rounds)
    bench_generation(max(3, args.rounds // 8))
    bench_startup(5)


if __name__ == "__main__":
    main()
