"""How much does ``atc mock`` cost compared with a hand-written API on the same HTTP stack?

Three measurements, each with a baseline taken in the same run:

1. HTTP latency per request: ``MockServer`` built from the library fixture's own OpenAPI spec
   against the hand-written ``tests/support/apis/library.py`` server answering the same five endpoints
   (both stdlib ``ThreadingHTTPServer`` on 127.0.0.1, one keep-alive httpx client each).
2. In-process generation of every RestBench TMDB operation (``MockApp.handle``, 54 operations)
   against ``json.dumps`` of the bodies it produced.
3. ``atc mock SPEC --port 0 --json`` start-up until its JSON line, against ``python -c pass``.
4. Per spec (bookshop, RestBench TMDB and Spotify), the way a client meets a mock server: start-up
   until it serves, memory (RSS) once serving and after the requests, and HTTP latency over a mix
   of lists, free-text searches and details (ids taken from the lists), for ``atc mock`` and, when
   it is installed (``prism`` on PATH or ``PRISM=path``), Stoplight Prism in static mode, in the
   same run, against the same ``python -c pass`` baseline. The free-text searches are also shown
   alone.

Usage: .venv/bin/python benchmarks/bench_mock.py [--rounds N] [--specs-only]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from atc.mock import MockApp, MockServer  # noqa: E402
from protocols import load_data, load_spec  # noqa: E402
from tests.support.apis.library import LibraryAPI  # noqa: E402

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
    app = MockApp(collection, auth=False)
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


SPOTIFY = ROOT.parent / "shared" / "bench-data" / "restbench" / "specs" / "spotify_oas.json"
#: Per spec: requests a client makes (``{id}`` is filled from the first list's answer), the
#: free-text searches among them, and the credential (query parameter or header) it sends.
MIXES: dict[str, tuple[Path, list[str], list[str], dict[str, str], dict[str, str]]] = {
    "bookshop": (BOOKSHOP, ["/books/search?query=garden", "/books/{id}", "/shops", "/books/search?query=tide&limit=5",
                            "/books/{id}/stock"], ["/books/search?query=garden", "/books/search?query=tide&limit=5"],
                 {}, {}),
    "tmdb": (TMDB, ["/search/movie?query=star", "/movie/{id}", "/movie/popular", "/search/person?query=coppola",
                    "/movie/{id}/credits", "/genre/movie/list"],
             ["/search/movie?query=star", "/search/person?query=coppola"], {"api_key": "k"}, {}),
    "spotify": (SPOTIFY, ["/search?q=abba&type=artist", "/artists/{id}", "/browse/new-releases",
                          "/search?q=love&type=track", "/artists/{id}/top-tracks?market=ES", "/artists/{id}/related-artists"],
                ["/search?q=abba&type=artist", "/search?q=love&type=track"], {}, {"Authorization": "Bearer k"}),
}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _start(cmd: list[str], ready: Callable[[subprocess.Popen[str]], str]) -> tuple[subprocess.Popen[str], str, float]:
    t = time.perf_counter()
    # atc mock says where it listens on stdout (read once); Prism logs every request there.
    out = subprocess.PIPE if "--json" in cmd else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, text=True)
    url = ready(proc)
    return proc, url, time.perf_counter() - t


def _atc_ready(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return str(json.loads(proc.stdout.readline())["url"])


def _prism_ready(port: int) -> Callable[[subprocess.Popen[str]], str]:
    def ready(proc: subprocess.Popen[str]) -> str:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"exited with {proc.returncode} (it cannot serve this spec)")
            try:
                httpx.get(url + "/__none__", timeout=0.5)
                return url
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("prism did not start")
    return ready


def _fill(path: str, ident: Any, params: dict[str, str] | None = None) -> str:
    """The request target: ``{id}`` filled, ``params`` added to the path's own query."""
    path = path.replace("{id}", str(ident))
    if params:
        path += ("&" if "?" in path else "?") + "&".join(f"{k}={v}" for k, v in params.items())
    return path


def _first_id(client: httpx.Client, path: str, params: dict[str, str], headers: dict[str, str]) -> Any:
    body = client.get(_fill(path, None, params), headers=headers).json()
    stack = [body]
    while stack:
        node = stack.pop(0)
        if isinstance(node, dict):
            if "id" in node and not isinstance(node["id"], (dict, list)):
                return node["id"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return 1


def _serve_rows(name: str, label: str, client: httpx.Client, rounds: int) -> tuple[list[float], list[float]]:
    spec, mix, searches, params, headers = MIXES[name]
    ident = _first_id(client, mix[0], params, headers)
    everything, search = [], []
    for _ in range(3):
        for path in mix:
            resp = client.get(_fill(path, ident, params), headers=headers)
            if resp.status_code >= 300:
                raise RuntimeError(f"{label} {name}: {path} answered {resp.status_code}: {resp.text[:200]}")
    for _ in range(rounds):
        for path in mix:
            t = time.perf_counter()
            client.get(_fill(path, ident, params), headers=headers)
            took = time.perf_counter() - t
            everything.append(took)
            if path in searches:
                search.append(took)
    return everything, search


def bench_specs(rounds: int) -> None:
    atc = ROOT / ".venv" / "bin" / "atc"
    prism = os.environ.get("PRISM") or shutil.which("prism")
    base = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        base.append(time.perf_counter() - t)
    b = statistics.median(base) * 1000
    print(f"4. per spec, {rounds} rounds of each mix; python -c pass p50 {b:.1f} ms"
          + ("" if prism else "; Prism not installed (PRISM=path/to/prism to compare)"))
    print(f"   {'spec':9} {'server':9} {'start-up':>13} {'RSS start/after':>16} {'mix p50/p95 ms':>16} "
          f"{'search p50 ms':>14}")
    for name, (spec, *_rest) in MIXES.items():
        if not spec.exists():
            print(f"   {name}: skipped, no spec at {spec}")
            continue
        servers: list[tuple[str, list[str], Callable[[subprocess.Popen[str]], str]]] = [
            ("atc mock", [str(atc), "mock", str(spec), "--port", "0", "--json"], _atc_ready)]
        if prism:
            port = _free_port()
            servers.append(("prism", [prism, "mock", "-h", "127.0.0.1", "-p", str(port), str(spec)], _prism_ready(port)))
        for label, cmd, ready in servers:
            try:
                proc, url, started = _start(cmd, ready)
            except RuntimeError as exc:
                print(f"   {name:9} {label:9} did not start: {exc}")
                continue
            try:
                rss0 = _rss_kb(proc.pid)
                with httpx.Client(base_url=url, timeout=30) as client:
                    mix, search = _serve_rows(name, label, client, rounds)
                rss1 = _rss_kb(proc.pid)
            finally:
                proc.terminate()
                proc.wait(timeout=10)
            m, sr = _ms(mix), _ms(search)
            print(f"   {name:9} {label:9} {started * 1000:7.0f} ms {started * 1000 / b:4.1f}x "
                  f"{rss0 / 1024:6.0f}/{rss1 / 1024:4.0f} MB {m[0]:7.2f}/{m[1]:7.2f} {sr[0]:13.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--specs-only", action="store_true", help="only the per-spec rows (4)")
    args = ap.parse_args()
    if not args.specs_only:
        bench_http(args.rounds)
        bench_generation(max(3, args.rounds // 8))
        bench_startup(5)
    bench_specs(args.rounds)


if __name__ == "__main__":
    main()
