"""What does ``atc probe --executor`` cost or gain over probing in one session, and what changes?

The RestBench specs (TMDB, Spotify) are served by ``atc mock`` from the original spec behind a
proxy on 127.0.0.1 that holds every request ``--latency`` ms (an API across a network), and the
prober gets a copy with every response schema removed (``bench_probe.blind_copy``). Baseline,
measured in the same run: ``atc probe --no-llm`` in one session. Then the same probe spread over
the tool groups (``probes.groups``) in threads (``--executor local``) and on a Ray cluster started
here (``--executor ray``, cluster start-up timed apart). No cache, so every run sends its requests.

Rows: groups, tools documented, requests, tools whose status differs from the baseline, tools whose
``depends_on`` differs (another tool found first to feed them), wall seconds and the ratio to the
baseline.

Usage: .venv/bin/python benchmarks/bench_probe_spread.py [--latency 20] [--concurrency 4] [--spec tmdb|spotify|all] [--no-ray]
"""

from __future__ import annotations

import argparse
import http.client
import os
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ["ATC_HOME"] = tempfile.mkdtemp(prefix="atc-bench-spread-")

from bench_probe import SPECS, blind_copy  # noqa: E402

from atc.mock import MockServer  # noqa: E402
from probes import probe  # noqa: E402
from probes.groups import probe_groups  # noqa: E402
from protocols import load_spec  # noqa: E402
from sandbox.api import Toolset  # noqa: E402


class SlowProxy:
    """Forwards every GET to ``target`` after ``latency`` seconds (127.0.0.1 only)."""

    def __init__(self, target: str, latency: float) -> None:
        split = urlsplit(target)
        host, port = split.hostname or "127.0.0.1", split.port or 80
        local = threading.local()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                time.sleep(latency)
                conn = getattr(local, "conn", None)
                if conn is None:
                    conn = local.conn = http.client.HTTPConnection(host, port, timeout=30)
                conn.request("GET", self.path)
                answer = conn.getresponse()
                body = answer.read()
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.getheader("Content-Type") or "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def run(blind: Any, url: str, **spread: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    report = probe(blind, base_url=url, no_llm=True, cache=False, sandbox="local", **spread)
    return report, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=20.0, help="ms the proxy holds each request (20)")
    parser.add_argument("--concurrency", type=int, default=4, help="tasks at a time (4)")
    parser.add_argument("--spec", choices=[*SPECS, "all"], default="all")
    parser.add_argument("--no-ray", action="store_true", help="leave out the Ray rows")
    args = parser.parse_args()
    ray_start = None
    if not args.no_ray:
        import ray

        started = time.perf_counter()
        ray.init(_node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 runtime_env={"env_vars": {"ATC_HOME": os.environ["ATC_HOME"]}})
        ray_start = time.perf_counter() - started
    names = list(SPECS) if args.spec == "all" else [args.spec]
    for name in names:
        truth, blind = load_spec(SPECS[name]), blind_copy(SPECS[name])
        groups = probe_groups(Toolset([blind]))
        with MockServer(truth, keep_requests=100_000, auth=False) as mock:
            proxy = SlowProxy(mock.url, args.latency / 1000)
            try:
                base, base_s = run(blind, proxy.url)
                rows = [("atc probe --no-llm (one session)", 1, base, base_s)]
                spread, spread_s = run(blind, proxy.url, executor="local", concurrency=args.concurrency)
                rows.append((f"--executor local -c {args.concurrency}", len(groups), spread, spread_s))
                if not args.no_ray:
                    for when in ("first: workers start", "again: warm workers"):
                        on_ray, ray_s = run(blind, proxy.url, executor="ray", concurrency=args.concurrency)
                        rows.append((f"--executor ray -c {args.concurrency} ({when})", len(groups), on_ray, ray_s))
            finally:
                proxy.close()
        print(f"\n{name.upper()} ({len(blind.tools)} tools; groups of {sorted((len(g) for g in groups), reverse=True)}), "
              f"atc mock behind a {args.latency:.0f} ms proxy on 127.0.0.1")
        print("| run | tasks | documented | requests | status differs | depends_on differs | wall s | vs one session |")
        print("|---|---|---|---|---|---|---|---|")
        for label, tasks, report, seconds in rows:
            status = sum(1 for a, b in zip(base.tools, report.tools, strict=True) if a.status != b.status)
            deps = sum(1 for a, b in zip(base.tools, report.tools, strict=True) if a.depends_on != b.depends_on)
            print(f"| {label} | {tasks} | {report.count('documented')}/{len(report.tools)} | {report.calls} | "
                  f"{status} | {deps} | {seconds:.2f} | x{base_s / seconds:.2f} |")
    if ray_start is not None:
        print(f"\nRay cluster start-up on this machine (not in the rows above): {ray_start:.1f} s")
        import ray

        ray.shutdown()


if __name__ == "__main__":
    main()
