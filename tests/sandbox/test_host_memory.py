"""What a hostile program can make the HOST (the atc process) spend: memory, CPU, time.

The mechanisms one by one (the bounded frame decoder, the frame budget, metered validation, the
call log's summaries, the lint's size cap), then the whole hostile corpus of
``tests/support/hostile_host.py`` on every backend, measured in a child atc process: each run must end
with its expected error, by its deadline, with the process's peak resident memory within
``4 x --memory`` of its baseline (docs/security.md, "What a run costs the host").
"""

from __future__ import annotations

import json
import shlex
import socket
import struct
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols import load_spec
from sandbox.api import Limits, Toolset
from sandbox.frames import FrameReader, FrameRefused
from sandbox.gateway.core import Gateway
from sandbox.hostbounds import HostBounds
from sandbox.jsonbounds import count_values, host_size, summarize
from sandbox.lint import MAX_PROGRAM_CHARS, lint
from tests.support.apis.echo import EchoAPI
from tests.support.hostile_host import CASES, MCP_CASES, HostCase, measure

MEMORY_MB = 64
LIMITS = Limits(timeout=3, memory_mb=MEMORY_MB)


@pytest.fixture(scope="module")
def echo_api() -> Iterator[EchoAPI]:
    api = EchoAPI().start()
    yield api
    api.stop()


@pytest.fixture()
def echo_tools(echo_api: EchoAPI, tmp_path: Path) -> Toolset:
    return Toolset([load_spec(echo_api.write_spec(tmp_path / "echo.json"))])


def _traced(fn: Any) -> tuple[Any, float, float]:
    """``fn()``'s result, the Python memory it allocated at its peak (MB) and its wall time (s)."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        out = fn()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return out, peak / 2**20, time.monotonic() - started


# -- the bounded decoder ---------------------------------------------------------------------

def _values(value: Any) -> int:
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            count += len(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


_JSON = st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers()
                     | st.text(alphabet='ab[]{},:"\\ \n'),
                     lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text('ab[{,:"\\'), inner, max_size=4),
                     max_leaves=30)


@settings(max_examples=150, deadline=None)
@given(value=_JSON)
def test_the_value_count_bounds_what_decoding_makes(value: Any) -> None:
    """Counted in the raw text, structure inside strings (escaped quotes and backslashes too) left
    out: never below what ``json.loads`` makes, never far above."""
    raw = json.dumps(value).encode()
    counted = count_values(raw, 0)
    assert _values(value) <= counted <= 2 * _values(value) + 1


def test_structure_inside_strings_is_not_counted() -> None:
    """An output frame holding a printed list is one value, not a million."""
    raw = json.dumps({"op": "output", "stdout": str(list(range(300_000))), "stderr": ""}).encode()
    assert count_values(raw, 1000) <= 10


def _serve_frames(frames: list[bytes]) -> socket.socket:
    ours, theirs = socket.socketpair()

    def write() -> None:
        try:
            for body in frames:
                theirs.sendall(struct.pack(">I", len(body)))
                theirs.sendall(body)
        except OSError:
            pass
        finally:
            theirs.close()

    threading.Thread(target=write, daemon=True).start()
    return ours


def test_five_million_empty_lists_are_refused_unparsed() -> None:
    """The issue's frame: 15 MB that json.loads would make 320 MB of. A run with the memory to take
    a 15 MB frame (--memory 256) refuses it for its values, before decoding it."""
    body = b'{"op":"call","id":1,"tool":"echo","args":{"x":[' + b"[]," * 5_000_000 + b"[]]}}"
    sock = _serve_frames([body])
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(FrameRefused, match="refused unparsed.*--memory 256"):
            FrameReader(Limits(memory_mb=256)).next(sock, time.monotonic() + 30)
        took = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
        sock.close()
    assert peak < 25, f"refusing the frame held {peak:.0f} MB"  # the 15 MB buffer, no objects
    assert took < 3


def test_every_frame_counts_and_unexpected_ones_end_the_run() -> None:
    limits = Limits(timeout=1, max_calls=2)
    bounds = HostBounds.of(limits)
    tiny = b'{"op":"output","stdout":"","stderr":""}'
    sock = _serve_frames([tiny] * (bounds.frames + 5))
    reader = FrameReader(limits)
    try:
        with pytest.raises(FrameRefused, match="more than .* frames"):
            for _ in range(bounds.frames + 1):
                reader.next(sock, time.monotonic() + 10)
    finally:
        sock.close()
    assert reader.frames == bounds.frames


def test_a_frame_over_the_byte_cap_is_refused_on_its_header() -> None:
    ours, theirs = socket.socketpair()
    try:
        theirs.sendall(struct.pack(">I", 9 << 20))  # a --memory 64 run takes frames of up to 8 MB; no body follows
        with pytest.raises(FrameRefused, match="exceeds the 8388608-byte cap of a run with --memory 64"):
            FrameReader(Limits(memory_mb=64)).next(ours, time.monotonic() + 5)
    finally:
        ours.close()
        theirs.close()


def test_the_frames_of_a_run_have_a_byte_budget() -> None:
    import dataclasses

    limits = Limits()
    body = json.dumps({"op": "output", "stdout": "x" * 300, "stderr": ""}).encode()
    reader = FrameReader(limits, dataclasses.replace(HostBounds.of(limits), wire_bytes=1000))
    sock = _serve_frames([body] * 5)
    try:
        with pytest.raises(FrameRefused, match="more than 0 MB of frames"):
            for _ in range(5):
                reader.next(sock, time.monotonic() + 5)
    finally:
        sock.close()
    assert reader.frames == 3  # refused on the header of the frame that would pass the budget


def _serve_once(frames: list[dict[str, Any]], limits: Limits) -> Any:
    """``session.serve`` against a fake runner that reads ``start`` and sends ``frames``."""
    from sandbox.program_run import serve

    ours, theirs = socket.socketpair()

    def runner() -> None:
        try:
            size = struct.unpack(">I", theirs.recv(4))[0]
            while size:
                size -= len(theirs.recv(size))
            for msg in frames:
                body = json.dumps(msg).encode()
                theirs.sendall(struct.pack(">I", len(body)) + body)
            time.sleep(2)
        except OSError:
            pass

    threading.Thread(target=runner, daemon=True).start()
    try:
        tools = Toolset([])
        return serve(ours, "print(1)", tools, limits, Gateway(tools, limits), deadline=time.monotonic() + 3)
    finally:
        ours.close()
        theirs.close()


def test_a_frame_the_run_does_not_expect_ends_it() -> None:
    outcome = _serve_once([{"op": "ready", "pid": 1, "python": "3.11"}], Limits(timeout=3))
    assert outcome.failure == "SandboxError" and "does not expect: 'ready'" in outcome.detail


def test_output_past_the_cap_ends_the_run() -> None:
    limits = Limits(timeout=3, max_output_bytes=1000)
    outcome = _serve_once([{"op": "output", "stdout": "o" * 600, "stderr": ""}] * 2, limits)
    assert outcome.failure == "SandboxError" and "1000-byte output cap" in outcome.detail
    assert "".join(outcome.stdout) == "o" * 600  # what came within the cap is kept


# -- validation --------------------------------------------------------------------------------

def test_strict_validation_stops_at_the_first_error(echo_tools: Toolset) -> None:
    gateway = Gateway(echo_tools, LIMITS)
    assert gateway.call("echo", {"items": [1]}).ok  # imports, the client, the compiled schema
    args = {"items": ["x"] * 90_000}
    started = time.monotonic()
    outcome = gateway.call("echo", args)
    took = time.monotonic() - started
    assert not outcome.ok and outcome.error["failure"] == "arguments"
    assert outcome.error["message"] == "echo: argument 'items[0]': 'x' is not of type 'integer'"
    assert took < 1, took  # checking all 90,000 would take seconds
    _, peak, _ = _traced(lambda: gateway.call("echo", args))
    assert peak < 20, peak


def test_warn_validation_keeps_a_bounded_list(echo_tools: Toolset) -> None:
    tools = Toolset(echo_tools.collections, validation="warn")
    gateway = Gateway(tools, LIMITS)
    outcome, peak, took = _traced(lambda: gateway.call("echo", {"items": ["x"] * 90_000}))
    assert outcome.ok, outcome.error
    warnings = gateway.calls[0].warnings
    assert 1 < len(warnings) <= 21 and "more problems" in warnings[-1]
    assert peak < 40, peak


@pytest.mark.parametrize("mode", ["strict", "warn"])
def test_an_anyof_bomb_is_cut_at_its_error_budget(echo_tools: Toolset, mode: str) -> None:
    """anyOf gathers every error of a branch before it fails: 90,000 of them if nothing stopped it."""
    gateway = Gateway(Toolset(echo_tools.collections, validation=mode), LIMITS)
    outcome, peak, took = _traced(lambda: gateway.call("echo", {"choice": ["x"] * 90_000}))
    assert peak < 40, peak
    note = "too large to check: checking them made more than 1000 errors"
    if mode == "strict":
        assert not outcome.ok and note in outcome.error["message"]
    else:
        assert outcome.ok and any(note in w and "sent unchecked" in w for w in gateway.calls[0].warnings)


def test_a_check_stops_at_its_step_budget() -> None:
    """Many keywords per value: the check stops at its budget of schema steps (made small here,
    so that the test is quick), and a strict call is refused rather than sent unchecked."""
    import dataclasses

    from protocols.model import Collection, Tool

    value = {"type": "integer", "minimum": 0, "maximum": 10**9, "multipleOf": 1, "not": {"type": "string"}}
    tool = Tool(name="many", collection="many", method="POST", path="/echo",
                parameters={"type": "object", "properties": {"xs": {"type": "array", "items": value}}})
    gateway = Gateway(Toolset([Collection(name="many", tools=[tool], servers=["http://127.0.0.1:9"])]), LIMITS)
    gateway.bounds = dataclasses.replace(gateway.bounds, validation_steps=5_000)
    outcome = gateway.call("many", {"xs": list(range(2_000))})
    assert not outcome.ok and "checking them took more than 5000 schema steps" in outcome.error["message"]
    assert outcome.error["failure"] == "arguments"


def test_json_in_an_mcp_text_result_is_counted_before_it_is_decoded() -> None:
    from sandbox.gateway.mcp.transport import result_data
    from sandbox.jsonbounds import TooManyValues

    text = "[" + "[]," * 200_000 + "[]]"
    with pytest.raises(TooManyValues):
        result_data({"content": [{"type": "text", "text": text}]}, 100_000)
    assert len(result_data({"content": [{"type": "text", "text": text}]}, 1_000_000)) == 200_001


def test_arguments_are_counted_before_they_are_checked(echo_tools: Toolset) -> None:
    gateway = Gateway(echo_tools, LIMITS)
    args = {"items": list(range(400_000))}
    started = time.monotonic()
    outcome = gateway.call("echo", args)
    assert not outcome.ok and "hold more than 100000 values" in outcome.error["message"]
    assert time.monotonic() - started < 1.5  # checking them all would take seconds


def test_validation_stops_at_the_run_deadline(echo_tools: Toolset) -> None:
    """Valid but long to check: the deadline comes first, and the call says so as a timeout (the
    session then ends the run as a Timeout attributed to this call)."""
    gateway = Gateway(echo_tools, LIMITS, deadline=time.monotonic() + 0.1)
    started = time.monotonic()
    outcome = gateway.call("echo", {"items": list(range(95_000))})
    assert time.monotonic() - started < 1.5
    assert not outcome.ok and outcome.error["failure"] == "timeout"
    assert "time ran out" in outcome.error["message"]


# -- the call log ---------------------------------------------------------------------------------

def test_the_call_log_keeps_bounded_summaries(echo_tools: Toolset) -> None:
    gateway = Gateway(echo_tools, LIMITS)
    big = "x" * (1 << 20)
    for _ in range(30):
        assert gateway.call("echo", {"blob": big}).ok
    assert gateway.call("blob", {"n": 20_000, "kind": "numbers"}).ok
    bounds = gateway.bounds
    first, last = gateway.calls[0], gateway.calls[-1]
    assert set(first.summarized) >= {"args", "response"} and first.summarized["args"] > 1 << 20
    assert first.args["blob"] == big[: len(first.args["blob"])]  # the head, not something else
    assert isinstance(last.response, list) and 0 < len(last.response) < 20_000
    assert last.response[0] == 1.5 and "response" in last.summarized
    kept = sum(host_size(c.args) + host_size(c.response) + host_size(c.headers) for c in gateway.calls)
    assert kept <= bounds.log_bytes + 3 * bounds.log_value_bytes
    json.dumps([c.to_dict(with_response=True) for c in gateway.calls], allow_nan=False)


def test_the_call_log_keeps_the_head_of_long_messages(echo_tools: Toolset) -> None:
    """An argument name of a megabyte is quoted in the refusal: the log keeps its head."""
    gateway = Gateway(echo_tools, LIMITS)
    outcome = gateway.call("echo", {"k" * (1 << 20): 1})
    assert not outcome.ok and "unknown argument" in outcome.error["message"]
    call = gateway.calls[0]
    assert call.error is not None and len(call.error) < 5000
    assert host_size(call.args) <= gateway.bounds.log_value_bytes and "args" in call.summarized


def test_summaries_keep_the_shape() -> None:
    rows = [{"id": i, "name": "n" * 50, "tags": ["a", "b"]} for i in range(5000)]
    kept, size, held = summarize(rows, 64 << 10)
    assert held <= 64 << 10 < size
    assert kept[0] == rows[0] and kept[-1] == rows[-1]  # first and last items, whole
    assert summarize(rows[:3], 64 << 10) == (rows[:3], host_size(rows[:3]), host_size(rows[:3]))


# -- the lint --------------------------------------------------------------------------------------

def test_a_huge_program_is_refused_before_it_is_parsed() -> None:
    program = "x = 1\n" * 83_000  # the issue's flat 500 KB
    issue, peak, took = _traced(lambda: lint(program))
    assert issue is not None and f"at most {MAX_PROGRAM_CHARS} characters" in issue.message
    assert peak < 5 and took < 0.5
    from atc.loop.checks import check_program

    static = check_program(program, {})
    assert static is not None and static["type"] == "SandboxError" and "at most" in static["message"]


LINT_COST = """
import json, re, sys, time
from sandbox.lint import lint
lint("x = 1")  # every import the lint needs
def status(field):
    return int(re.search(field + r":\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024
program = sys.stdin.read()
base = status("VmRSS")
open("/proc/self/clear_refs", "w").write("5")
cpu = time.process_time()
issue = lint(program)
print(json.dumps({"issue": issue and issue.message, "mb": status("VmHWM") - base, "cpu": time.process_time() - cpu}))
"""


def test_the_costliest_program_the_lint_takes_costs_little() -> None:
    """Attribute accesses are the shape that costs the lint most per character (measured in
    benchmarks/RESULTS.md): at the cap, tens of megabytes and well under a second."""
    import subprocess
    import sys

    program = "x.y;" * (MAX_PROGRAM_CHARS // 4 - 1)
    out = subprocess.run([sys.executable, "-c", LINT_COST], input=program, capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[2])
    cost = json.loads(out.stdout or "{}") if out.returncode == 0 else pytest.fail(out.stderr[-2000:])
    assert cost["issue"] is None
    assert cost["mb"] < 100, f"the lint of the largest program took {cost['mb']:.0f} MB"


# -- the hostile corpus on every backend, measured in a child atc process -------------------------

#: The cases that run here (``benchmarks/bench_hostile.py`` runs them all): one or more per item
#: of issue 20 (1-4), each ending by a different bound.
TESTED = ("validation_bomb", "validation_bomb_400k", "validation_bomb_anyof", "validation_past_the_deadline",
          "empty_lists_frame_15mb", "empty_lists_frame", "empty_dicts_frame", "numbers_frame", "one_key_objects_frame",
          "keys_frame", "wide_string_frame", "huge_tool_name", "long_traceback_frames", "ready_flood",
          "small_ready_flood", "output_frame_flood", "tiny_frame_flood", "big_arguments_kept", "response_values_bomb",
          "huge_flat_program")


#: And the hostile MCP server's answers (issue 29), over stdio: refused unparsed, and the largest
#: one the values bound of --memory 64 lets in, the costliest for the SDK to decode.
MCP_TESTED = ("mcp_items_1m", "mcp_numbers_4m", "mcp_keys_1m", "mcp_text_120mb", "mcp_deep_100k",
              "mcp_items_1m_id_last", "mcp_numbers_4m_no_id", "mcp_items_180k", "mcp_items_100k_taken")
MCP_SOURCE = "mcp:" + shlex.join([sys.executable, "-m", "tests.support.mcp_servers.hostile"])


def _check_rows(cases: list[HostCase], rows: list[Any], deadline: float) -> None:
    report = "\n".join(f"{r.name}: {r.outcome} peak +{r.peak_mb} MB, {r.cpu_s} s CPU, {r.wall_s} s: {r.message[:120]}"
                       for r in rows)
    for case, row in zip(cases, rows, strict=True):
        assert row.outcome in case.types, f"{case.name} ended {row.outcome}\n{report}"
        assert row.peak_mb <= 4 * MEMORY_MB, f"{case.name} cost the host {row.peak_mb} MB\n{report}"
        assert row.wall_s <= deadline + 10, f"{case.name} outlived its deadline\n{report}"


def _check_measured(backend: str, echo_api: EchoAPI, tmp_path: Path) -> None:
    spec = echo_api.write_spec(tmp_path / "echo.json")
    by_name = {c.name: c for c in CASES + MCP_CASES}
    cases = [by_name[name] for name in TESTED]
    rows = measure(backend, cases, spec=spec, limits={"timeout": LIMITS.timeout, "memory_mb": MEMORY_MB})
    _check_rows(cases, rows, LIMITS.timeout)
    # The MCP cases get the time the SDK needs to decode the largest answer let in (seconds).
    cases = [by_name[name] for name in MCP_TESTED]
    rows = measure(backend, cases, spec=spec, limits={"timeout": 15, "memory_mb": MEMORY_MB}, mcp=[MCP_SOURCE])
    _check_rows(cases, rows, 15)


@pytest.mark.timeout(240)
def test_hostile_runs_cost_the_host_little_on_local(echo_api: EchoAPI, tmp_path: Path) -> None:
    _check_measured("local", echo_api, tmp_path)


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_hostile_runs_cost_the_host_little_on_docker(echo_api: EchoAPI, tmp_path: Path) -> None:
    from sandbox.docker.backend import docker_available

    if not docker_available():
        pytest.skip("no Docker engine or no sandbox image (atc sandbox build)")
    _check_measured("docker", echo_api, tmp_path)
