"""Sandbox sessions: a snippet in a session against a fresh ``atc.run`` per snippet, same run.

For each backend (local; Docker when an engine and the image are there), p50/p95 in ms of:

- ``fresh run``: ``atc.run("print(1)")`` back to back on a warm pool -- the baseline, what a
  code-per-turn agent pays without a session;
- ``session snippet``: ``s.run("print(1)")`` in one open session;
- ``fresh run + call`` / ``session snippet + call``: the same with one ``get_stats()`` call to
  the library API on 127.0.0.1;
- ``open + close``: a session's own cost (taking a runner, session mode, teardown: the local
  jail reaped, the Docker container removed);
- ``3 turns, fresh``/``3 turns, session``: a three-turn exchange whose later turns use what the
  first one fetched: fresh runs must fetch it again each turn, the session keeps it.

Every row is printed with its ratio to the ``fresh run`` p50 of the same backend.

Usage::

    .venv/bin/python benchmarks/bench_session.py [-n 30] [--no-docker]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from timing import Row, measure  # noqa: E402

import atc  # noqa: E402
from protocols import load_spec  # noqa: E402
from sandbox.api import Backend, Limits, Toolset  # noqa: E402
from sandbox.local.backend import LocalBackend  # noqa: E402
from tests.support.apis.library import LibraryAPI  # noqa: E402

LIMITS = Limits(timeout=30)
FETCH = "books = [get_book(book_id=i) for i in (10, 11, 20)]"
TURNS = ["print(len(books))", "print(sorted(b['title'] for b in books)[0])", "print(sum(b['price'] for b in books))"]


def _ok(result: atc.ExecutionResult) -> None:
    if not result.ok:
        raise RuntimeError(f"benchmark snippet failed: {result.to_dict()}")


def rows_for(backend: Backend, tools: Toolset, n: int) -> list[Row]:
    rows = [measure("fresh run", n, lambda: _ok(atc.run("print(1)", tools, LIMITS, sandbox=backend)))]
    with atc.session(tools, LIMITS, sandbox=backend) as s:
        _ok(s.run("print(0)"))
        rows.append(measure("session snippet", n, lambda: _ok(s.run("print(1)"))))
    rows.append(measure("fresh run + call", n, lambda: _ok(atc.run("print(get_stats())", tools, LIMITS,
                                                                    sandbox=backend))))
    with atc.session(tools, LIMITS, sandbox=backend) as s:
        rows.append(measure("session snippet + call", n, lambda: _ok(s.run("print(get_stats())"))))

    def open_close() -> None:
        with atc.session(tools, LIMITS, sandbox=backend) as s:
            _ok(s.run("x = 1"))

    rows.append(measure("open + snippet + close", max(5, n // 3), open_close))

    def turns_fresh() -> None:
        for turn in TURNS:
            _ok(atc.run(FETCH + "\n" + turn, tools, LIMITS, sandbox=backend))

    def turns_session() -> None:
        with atc.session(tools, LIMITS, sandbox=backend) as s:
            _ok(s.run(FETCH))
            for turn in TURNS:
                _ok(s.run(turn))

    rows.append(measure("3 turns, fresh runs", max(5, n // 3), turns_fresh))
    rows.append(measure("3 turns, one session (open/close in)", max(5, n // 3), turns_session))
    return rows


def show(name: str, rows: list[Row]) -> None:
    base = rows[0].p50_ms
    print(f"\n{name}\n| row | n | p50 ms | p95 ms | p50 / fresh run |\n|---|---|---|---|---|")
    for row in rows:
        print(f"| {row.name} | {row.n} | {row.p50_ms:.2f} | {row.p95_ms:.2f} | {row.p50_ms / base:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=30)
    parser.add_argument("--no-docker", action="store_true")
    args = parser.parse_args()
    api = LibraryAPI()
    api.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            tools = Toolset([load_spec(api.write_spec(Path(tmp) / "library.json"))],
                            credentials={"api_key": "env:ATC_BENCH_KEY"})
            import os

            os.environ["ATC_BENCH_KEY"] = "lib-secret-7f3a9c"
            with LocalBackend(pool_size=2) as local:
                local.prewarm(LIMITS)
                show("local", rows_for(local, tools, args.n))
            if not args.no_docker:
                from sandbox.docker.backend import DockerBackend, docker_available

                if docker_available():
                    with DockerBackend(pool_size=2) as docker:
                        docker.prewarm(LIMITS, timeout=60)
                        show("docker", rows_for(docker, tools, args.n))
                else:
                    print("\n(docker: no engine or no sandbox image; rows skipped)")
    finally:
        api.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
