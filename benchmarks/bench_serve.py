"""``atc serve`` against the usual way of giving a host tools, in the same run.

The task needs 10 calls to a loopback API (the library test API): list the authors, the books of
each (3 calls), the reviews of each book (5), then the best-rated book (1), and report its title
and mean rating. A host does it either

- through ``run_program``: its model writes ONE program, one MCP call, only the printed answer
  comes back; or
- one tool call per step: the same 10 calls through atc's proxied tools (``--proxy-tools``), or
  through a direct SDK server (``MCPServer`` tools that call the API with httpx: the baseline of a
  hand-written MCP server).

Measured, over streamable HTTP with the official SDK client:

1. the bytes that reach the host's context: each result as the host receives it (the text
   content a model reads, and the whole JSON-RPC result with ``structuredContent``), the
   arguments the model writes, and the tool definitions of ``tools/list`` (all of it, and the
   name, description and input schema a model is shown); and what the model re-reads over the
   task: a host sends the whole context again at every turn (one turn per tool call, and one
   for the answer), so ``re-read`` sums the context at each turn (definitions shown, then every
   call's arguments and text result so far);
2. wall time per call: p50/p95 of one ``get_stats`` call through the direct server (baseline),
   through atc's proxy (the gateway), and of a one-call program through ``run_program`` (the
   sandbox); and the whole 10-call task, 10 round trips against one.

Usage::

    .venv/bin/python benchmarks/bench_serve.py [-n 100] [--sandbox local|docker] [--json]
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOKEN = "bench-serve-token-0a1b2c3d4e"

PROGRAM = """authors = search_authors(name="")["results"]
books = [b for a in authors for b in list_author_books(author_id=a["id"])["books"]]
ratings = {}
for b in books:
    reviews = list_book_reviews(book_id=b["id"])
    if reviews:
        ratings[b["id"]] = sum(r["rating"] for r in reviews) / len(reviews)
best = max(ratings, key=ratings.get)
book = get_book(book_id=best)
print(f'{book["title"]} ({book["year"]}): mean rating {ratings[best]:.2f}, best of {len(ratings)} reviewed books')
"""


# -- the direct SDK server (the baseline), run in a subprocess: bench_serve.py --direct PORT API ----


def direct_server(port: int, api: str) -> None:
    import httpx
    from mcp.server.mcpserver import MCPServer

    client = httpx.Client(base_url=api, timeout=30)
    server = MCPServer("library-direct", log_level="WARNING")

    @server.tool()
    def search_authors(name: str) -> dict[str, Any]:
        """Search authors by part of their name."""
        return dict(client.get("/authors", params={"name": name}).json())

    @server.tool()
    def list_author_books(author_id: int) -> dict[str, Any]:
        """The books an author wrote."""
        return dict(client.get(f"/authors/{author_id}/books").json())

    @server.tool()
    def list_book_reviews(book_id: int, limit: int = 10) -> list[dict[str, Any]]:
        """Reader reviews of a book."""
        return list(client.get(f"/books/{book_id}/reviews", params={"limit": limit}).json())

    @server.tool()
    def get_book(book_id: int) -> dict[str, Any]:
        """One book by id."""
        return dict(client.get(f"/books/{book_id}").json())

    @server.tool()
    def get_stats() -> dict[str, Any]:
        """Counts of books and authors."""
        return dict(client.get("/stats").json())

    server.run("streamable-http", host="127.0.0.1", port=port)


# -- helpers ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port}")


def nbytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def result_bytes(result: Any) -> tuple[int, int]:
    """(text content bytes, whole result bytes) of a ``CallToolResult`` as it came over the wire."""
    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    return len(text.encode()), nbytes(result.model_dump(mode="json", by_alias=True, exclude_none=True))


def row(name: str, samples: list[float], base: float | None) -> dict[str, Any]:
    samples = sorted(samples)
    p50 = statistics.median(samples)
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return {"name": name, "p50_ms": round(p50, 2), "p95_ms": round(p95, 2), "n": len(samples),
            "x_baseline": round(p50 / base, 2) if base else 1.0}


@asynccontextmanager
async def connect(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """The official SDK's client over streamable HTTP (the 2025 handshake, as most hosts speak it)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            yield client


# -- the measurements ----------------------------------------------------------------------------


STEPS: list[tuple[str, dict[str, Any]]] = []  # filled from the API's data: the 10 calls in order


def plan_steps() -> None:
    from tests.support.apis.library import AUTHORS, BOOKS, REVIEWS

    STEPS.append(("search_authors", {"name": ""}))
    STEPS.extend(("list_author_books", {"author_id": a}) for a in AUTHORS)
    STEPS.extend(("list_book_reviews", {"book_id": b}) for b in BOOKS)
    rated = {b: sum(r["rating"] for r in rs) / len(rs) for b, rs in REVIEWS.items() if rs}
    STEPS.append(("get_book", {"book_id": max(rated, key=lambda b: rated[b])}))
    assert len(STEPS) == 10


async def context_bytes(client: Any, style: str) -> dict[str, Any]:
    """What one way of doing the task puts into the host's context."""
    listed = await client.list_tools()
    # What the host loads into its context: atc's own three tools for run_program; every API tool
    # for the one-call-per-step styles (a host lists them all, not only the ones a task needs).
    own = {"search_tools", "describe_tools", "run_program"}
    tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools
             if (t.name in own) == (style == "run_program")]
    definitions = nbytes(tools)
    # what a model is shown of a tool: its name, description and input schema
    shown = nbytes([{k: t.get(k) for k in ("name", "description", "inputSchema")} for t in tools])
    text = whole = args = 0
    transcript = [shown]  # the context at each model turn: definitions, then every call and result so far
    started = time.perf_counter()
    if style == "run_program":
        result = await client.call_tool("run_program", {"program": PROGRAM})
        assert not result.is_error and "Left Hand" in result.structured_content["answer"], result
        text, whole = result_bytes(result)
        args = nbytes({"program": PROGRAM})
        transcript.append(transcript[-1] + args + text)
        calls = 1
    else:
        for name, arguments in STEPS:
            result = await client.call_tool(name, arguments)
            assert not result.is_error, result
            t, w = result_bytes(result)
            text, whole, args = text + t, whole + w, args + nbytes(arguments)
            transcript.append(transcript[-1] + nbytes(arguments) + t)
        calls = len(STEPS)
    wall = (time.perf_counter() - started) * 1000
    return {"style": style, "mcp_calls": calls, "result_text_bytes": text, "result_bytes": whole,
            "argument_bytes": args, "tool_definition_bytes": definitions, "tool_definition_shown_bytes": shown,
            "model_turns": len(transcript), "reread_bytes": sum(transcript), "task_wall_ms": round(wall, 1)}


async def timed(client: Any, name: str, args: dict[str, Any]) -> float:
    started = time.perf_counter()
    result = await client.call_tool(name, args)
    took = (time.perf_counter() - started) * 1000
    assert not result.is_error, result
    return took


async def task_steps(client: Any) -> float:
    started = time.perf_counter()
    for name, arguments in STEPS:
        result = await client.call_tool(name, arguments)
        assert not result.is_error, result
    return (time.perf_counter() - started) * 1000


async def measure(atc_url: str, direct_url: str, n: int) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    out: dict[str, Any] = {"context": []}
    for url, headers, style in ((direct_url, {}, "direct SDK server, one call per step"),
                                (atc_url, auth, "atc proxied tools, one call per step"),
                                (atc_url, auth, "run_program")):
        async with connect(url, headers) as client:
            found = await context_bytes(client, "run_program" if style == "run_program" else "steps")
            out["context"].append(found | {"style": style})
    # The rows are measured interleaved, round by round, so that a busy moment of a shared machine
    # falls on all of them alike.
    samples: dict[str, list[float]] = {k: [] for k in ("direct", "proxied", "one", "task_direct", "task_program")}
    async with connect(direct_url, {}) as direct, connect(atc_url, auth) as served:
        one = {"program": "print(get_stats()['books'])"}
        for _ in range(5):  # warm: pools, connections
            await timed(direct, "get_stats", {})
            await timed(served, "get_stats", {})
            await timed(served, "run_program", one)
        for i in range(n):
            samples["direct"].append(await timed(direct, "get_stats", {}))
            samples["proxied"].append(await timed(served, "get_stats", {}))
            samples["one"].append(await timed(served, "run_program", one))
            if i % 5 == 0:
                samples["task_direct"].append(await task_steps(direct))
                samples["task_program"].append(await timed(served, "run_program", {"program": PROGRAM}))
    base, task_base = statistics.median(samples["direct"]), statistics.median(samples["task_direct"])
    out["timing"] = [row("direct SDK server: get_stats (baseline)", samples["direct"], None),
                     row("atc proxied tool: get_stats (gateway)", samples["proxied"], base),
                     row("atc run_program: a one-call program (sandbox)", samples["one"], base)]
    out["task"] = [row("10-call task, direct SDK server: 10 MCP calls (baseline)", samples["task_direct"], None),
                   row("10-call task, run_program: 1 MCP call", samples["task_program"], task_base)]
    out["task"][1]["per_tool_call_ms"] = round(statistics.median(samples["task_program"]) / 10, 2)
    return out


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--direct":
        direct_server(int(sys.argv[2]), sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=100, help="calls per timing row (100)")
    parser.add_argument("--sandbox", default="local", choices=["local", "docker"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import anyio

    from tests.support.apis.library import LibraryAPI

    plan_steps()
    api = LibraryAPI()
    api.start()
    folder = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    spec = api.write_spec(folder / "library.json")
    env = {**os.environ, "ATC_SERVE_TOKEN": TOKEN, "ATC_HOME": str(folder / "home"), "ATC_EMBED_MODEL": "none",
           "ATC_SEARCH_SERVER": "off"}
    direct_port = free_port()
    direct = subprocess.Popen([sys.executable, __file__, "--direct", str(direct_port), api.url], env=env,
                              stderr=subprocess.DEVNULL)
    served = subprocess.Popen([str(Path(sys.executable).with_name("atc")), "serve", "--tools", str(spec),
                               "--proxy-tools", "--sandbox", args.sandbox, "--transport", "http", "--port", "0",
                               "--json", "--session-max-calls", "1000000", "--session-max-runs", "1000000"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert served.stdout is not None
        atc_url = json.loads(served.stdout.readline())["url"]
        wait_port(direct_port)
        results = anyio.run(measure, atc_url, f"http://127.0.0.1:{direct_port}/mcp", args.n)
    finally:
        for proc in (served, direct):
            proc.terminate()
            proc.wait(30)
        api.stop()
    results["sandbox"] = args.sandbox
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print(f"context of the 10-call task (sandbox {args.sandbox}); bytes, x = against run_program")
    mine = next(c for c in results["context"] if c["style"] == "run_program")
    print(f"{'style':38} {'calls':>5} {'text':>6} {'result':>6} {'args':>5} {'defs shown':>10} {'tools/list':>10} "
          f"{'turns':>5} {'re-read':>7}")
    for c in results["context"]:
        print(f"{c['style']:38} {c['mcp_calls']:>5} {c['result_text_bytes']:>6} {c['result_bytes']:>6} "
              f"{c['argument_bytes']:>5} {c['tool_definition_shown_bytes']:>10} {c['tool_definition_bytes']:>10} "
              f"{c['model_turns']:>5} {c['reread_bytes']:>7}"
              f"  text x{c['result_text_bytes'] / mine['result_text_bytes']:.1f}"
              f", result x{c['result_bytes'] / mine['result_bytes']:.1f}"
              f", re-read x{c['reread_bytes'] / mine['reread_bytes']:.1f}")
    print("\nwall time per MCP call (ms)")
    for r in results["timing"] + results["task"]:
        print(f"{r['name']:60} p50 {r['p50_ms']:>7} p95 {r['p95_ms']:>7}  x{r['x_baseline']}  (n={r['n']})"
              + (f"  {r['per_tool_call_ms']} ms per tool call" if "per_tool_call_ms" in r else ""))


if __name__ == "__main__":
    main()
