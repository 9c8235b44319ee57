"""An MCP server's answers are judged on their raw bytes before the SDK parses them (issue 29):
the hostile server of ``tests/support/mcp_servers/hostile.py`` (raw JSON-RPC over stdio, streamable HTTP
with JSON bodies, and with SSE streams) answers a million content items, four million numbers, a
million keys, a 40 MB text item, a value nested 100,000 deep, with its id first, last or nowhere.
Each is a ``ToolError`` (failure ``response``) for that call at once, long before its deadline, in
atc's words only; the same server answers the next call; a call that waits beside a refused one
is not disturbed (unless the refused answer names no request). What the host spends on them is
measured in ``tests/sandbox/test_host_memory.py`` and ``benchmarks/bench_hostile.py``."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

import atc
from sandbox.api import Limits
from sandbox.gateway.mcp.bounds import DEFAULT, HEAD_BYTES, Ledger, MessageBounds, Pieces, message_id
from sandbox.gateway.mcp.connections import McpFailure, McpServers, close_servers
from sandbox.gateway.mcp.sources import load_source, servers_from_source
from tests.support.mcp_servers import ROOT, free_port

STDIO = "mcp:" + shlex.join([sys.executable, "-m", "tests.support.mcp_servers.hostile"])
LIMITS = Limits(timeout=60, call_timeout=30, memory_mb=64)

#: (call, what the refusal says)
HOSTILE = [
    ("items(n=1_000_000)", "larger than"),
    ("items(n=180_000)", "JSON values"),
    ("keys(n=1_000_000, where='tail')", "larger than"),
    ("text(mb=40)", "larger than"),
    ("deep(n=100_000)", "nested more than 200 levels"),
    ("numbers(n=4_000_000, where='none')", "larger than"),
]

PROGRAM = """
import time
for call in CALLS:
    started = time.monotonic()
    try:
        eval(call)
        print('taken', call)
    except ToolError as e:
        print(json.dumps({"call": call, "error": str(e), "tool": e.tool, "s": time.monotonic() - started}))
print(ping(), pid()['pid'])
"""


@pytest.fixture(autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    close_servers()


@pytest.fixture(scope="module", params=["stdio", "http", "sse", "legacy-sse"])
def source(request: pytest.FixtureRequest) -> Iterator[str]:
    """The hostile server over stdio (started by atc), over streamable HTTP answering with JSON
    bodies or with SSE streams, or over the older SSE transport (a process on 127.0.0.1)."""
    if request.param == "stdio":
        yield STDIO
        return
    port = free_port()
    flags = {"sse": ["--sse"], "legacy-sse": ["--legacy-sse"]}.get(request.param, [])
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.mcp_servers.hostile", "--http", str(port), *flags], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                import socket

                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the hostile HTTP server did not start"
                time.sleep(0.05)
        yield f"mcp+sse://127.0.0.1:{port}/sse" if request.param == "legacy-sse" else f"mcp+http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


def test_hostile_answers_are_refused_at_once_and_the_server_answers_on(source: str) -> None:
    collections = load_source(source, name="hostile")
    program = "import json\nCALLS = " + json.dumps([c for c, _ in HOSTILE]) + PROGRAM
    r = atc.run(program, collections, LIMITS, sandbox="local")
    assert r.ok, r.to_dict()
    lines = r.answer.splitlines()
    refused = [json.loads(line) for line in lines[:-1]]
    assert [x["call"] for x in refused] == [c for c, _ in HOSTILE], lines
    for (call, says), got in zip(HOSTILE, refused, strict=True):
        tool = call.split("(")[0]
        # (the older SSE transport holds at most 1 MB of an event: the SDK's own cap there)
        assert got["error"].startswith(f"{tool}: the MCP server's answer ") and (
            says in got["error"] or "an event of its SSE stream" in got["error"] and source.startswith("mcp+sse")), got
        assert got["tool"] == tool
        assert got["s"] < 15, f"{call} took {got['s']:.1f} s (the call's deadline is 30 s)"
        # Nothing of the hostile message: no quote of it, no parser's account of it.
        assert "xxx" not in got["error"] and "input_value" not in got["error"] and "[[[" not in got["error"]
    pong, pid = lines[-1].split()
    assert pong == "pong" and int(pid) > 0
    assert [c.failure for c in r.calls[:len(HOSTILE)]] == ["response"] * len(HOSTILE)
    assert "xxxx" not in json.dumps(r.to_dict())
    # The same process answered before and after: the connection stayed up.
    again = atc.run("print(pid()['pid'])", collections, LIMITS, sandbox="local")
    assert again.answer.strip() == pid


def test_an_answer_within_the_bounds_is_taken(source: str) -> None:
    collections = load_source(source, name="hostile")
    r = atc.run("print(len(items(n=20_000)), len(numbers(n=300_000)['numbers']), len(deep(n=150)['d']))",
                collections, LIMITS, sandbox="local")
    assert r.ok and r.answer == "20000 300000 1\n", r.to_dict()


def _call(manager: McpServers, name: str, args: dict[str, object]) -> object:
    server = servers_from_source(STDIO)[0]
    try:
        return manager.call(server, name, args, 30, bounds=MessageBounds.of(LIMITS))
    except McpFailure as exc:
        return exc


@pytest.mark.parametrize("hostile", [
    {"n": 1_000_000, "where": "head"},  # too large to hold: its first bytes name its request
    {"n": 180_000, "where": "tail"},  # held whole (under the byte bound), its last bytes name it
])
def test_a_call_waiting_beside_a_refused_one_is_answered(hostile: dict[str, object]) -> None:
    with McpServers() as manager:
        assert not isinstance(_call(manager, "ping", {}), McpFailure)
        results: dict[str, object] = {}
        slow = threading.Thread(target=lambda: results.setdefault("slow", _call(manager, "slow", {"seconds": 2})))
        slow.start()
        time.sleep(0.3)
        started = time.monotonic()
        refused = _call(manager, "items", hostile)
        took = time.monotonic() - started
        slow.join(30)
        assert isinstance(refused, McpFailure) and refused.failure == "response", refused
        assert took < 15
        answer = results.get("slow")
        assert isinstance(answer, dict) and answer["content"][0]["text"] == "done", answer


@pytest.mark.parametrize(("tool", "hostile"), [
    ("numbers", {"n": 4_000_000, "where": "none"}),  # no id at all
    ("numbers", {"n": 4_000_000, "where": "tail"}),  # too large to hold up to the id at its end
    ("deep", {"n": 100_000, "where": "none"}),  # the parser stops, and no id shows
])
def test_an_answer_that_names_no_request_fails_every_waiting_call(tool: str, hostile: dict[str, object]) -> None:
    """Which call it answers cannot be told without holding or decoding it: every call that waits
    on that server is refused (none hangs to its deadline), and the server answers on."""
    with McpServers() as manager:
        results: dict[str, object] = {}
        slow = threading.Thread(target=lambda: results.setdefault("slow", _call(manager, "slow", {"seconds": 5})))
        slow.start()
        time.sleep(0.5)
        started = time.monotonic()
        refused = _call(manager, tool, hostile)
        slow.join(30)
        took = time.monotonic() - started
        assert isinstance(refused, McpFailure) and refused.failure == "response", refused
        other = results.get("slow")
        assert isinstance(other, McpFailure) and other.failure == "response", other
        assert took < 4  # before the slow call's own answer
        assert not isinstance(_call(manager, "ping", {}), McpFailure)


# -- the pieces, without servers ---------------------------------------------------------------------

@pytest.mark.parametrize(("message", "expected"), [
    (b'{"jsonrpc":"2.0","id":7,"result":{"id":1}}', 7),
    (b'{"jsonrpc":"2.0","result":{"content":[{"id":1}],"id":2},"id":"a-3"}', "a-3"),
    (b'{"result":{"id":1},"x":"\\"id\\":4","id" : -5 }', -5),
    (b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":3}}', None),
    (b'[{"jsonrpc":"2.0","id":1}]', None),
    (b'{"id":true}', None),
    (b'{"jsonrpc":"2.0","result":{"text":"' + b"x" * (2 * HEAD_BYTES) + b'"}}', None),
])
def test_a_message_names_its_request_at_its_head_or_its_tail(message: bytes, expected: object) -> None:
    assert message_id(message[:HEAD_BYTES], message[-512:]) == expected


def test_pieces_hold_at_most_their_limit_and_drop_the_rest() -> None:
    limit = HEAD_BYTES + 1000
    pieces = Pieces(b"\n", lambda head: (message_id(head), limit))
    big = b'{"id":9,"result":"' + b"y" * (3 * HEAD_BYTES) + b'"}'
    events: list[tuple[object, ...]] = []
    stream = b'{"id":1}\n' + big + b'\n{"id":2}\n'
    for i in range(0, len(stream), 4093):  # chunks that cut lines and the separator anywhere
        events += pieces.feed(stream[i:i + 4093])
    assert events == [("whole", b'{"id":1}'), ("over", 9, limit), ("whole", b'{"id":2}')]
    sse = Pieces(b"\n\n", lambda head: (None, limit))
    assert sse.feed(b"data: 1\n") == [] and sse.feed(b"\ndata: 2\n\n") == [("whole", b"data: 1"), ("whole", b"data: 2")]


def test_a_ledger_charges_an_answer_to_its_request_or_to_every_waiting_one() -> None:
    from sandbox.gateway.mcp.bounds import CallState

    ledger = Ledger()
    small, large = CallState(MessageBounds(1000, 10, "small")), CallState(MessageBounds(5000, 50, "large"))
    ledger.sent(1, small)
    ledger.sent("2", large)
    assert ledger.bounds(1) is small.bounds and ledger.bounds(2) is large.bounds  # "2" and 2 are one id
    assert ledger.bounds(None) is small.bounds and ledger.reading_limit(None) == 5000
    assert ledger.refuse(1, "too big") == [1] and small.refused == "too big" and large.refused is None
    assert ledger.refuse(1, "again") == [] and small.refused == "too big"  # a late answer refuses nothing
    assert ledger.refuse(None, "no id") == ["2"] and large.refused == "no id"
    assert ledger.bounds(None) is DEFAULT


def test_the_bounds_of_a_call_follow_its_runs_limits() -> None:
    small, large = MessageBounds.of(Limits(memory_mb=64)), MessageBounds.of(Limits(memory_mb=512))
    assert small.values == 64 * 8192 and large.values == 512 * 8192
    assert small.bytes == large.bytes > Limits().max_response_bytes
    assert "--memory 64" in small.basis
    assert os.environ.get("ATC_MCP_START_TIMEOUT") is None
