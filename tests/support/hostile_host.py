"""Hostile programs aimed at the HOST (the atc process), and a way to measure what they cost it.

``tests/sandbox/test_hostile.py`` judges hostile programs by what escapes the sandbox. These ones attack
the process that serves the sandbox: frames that are cheap to send and costly to parse,
arguments whose validation explodes, data piled up in the call log, streams of frames the host
does not expect, programs that are costly to lint. The promise (docs/security.md) is that a
run costs the atc process no more than ``4 x --memory`` of memory above its baseline, and stops
at its deadline.

``measure(backend, cases, ...)`` runs the cases in a CHILD Python process, so that the memory
measured is that of a real atc process and nothing else (the APIs run in the caller): the child
makes a backend, warms it up (a call, a failure, an attribution: every import a run needs),
takes its resident size as the baseline, then for each case resets the kernel's peak counter
(``/proc/self/clear_refs``), runs the case and reads the peak (``VmHWM``). Every peak is set
against the baseline taken once before the first case, so memory a case leaves behind counts
against the cases after it (the measure can only err on the strict side). CPU is the child's
own user+system time during the run (its threads included; the sandbox's processes not).

Run as a module, this file is that child (``python -m tests.support.hostile_host`` with the job as JSON on
stdin, one JSON line per case on stdout).
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

#: Finds the runner's channel the way an attacker would (listing the open descriptors rather than
#: guessing their numbers), with writers of frames and of raw bytes and a reader of frames: the
#: prelude of every program that forges frames (here and in tests/sandbox/test_hostile.py).
FORGE = '''
import os, socket, struct, json
def raw(sock, body):
    sock.sendall(struct.pack(">I", len(body)) + body)
def frame(sock, msg):
    raw(sock, json.dumps(msg).encode())
def read(sock):
    n = struct.unpack(">I", sock.recv(4))[0]
    data = b""
    while len(data) < n:
        data += sock.recv(n - len(data))
    return json.loads(data)
chan = None
for fd in sorted(int(n) for n in os.listdir('/proc/self/fd') if int(n) > 2):
    try:
        s = socket.socket(fileno=fd)
    except OSError:
        continue
    if s.family == socket.AF_UNIX:
        chan = s
        break
'''


@dataclass(frozen=True)
class HostCase:
    """A program against the echo API (``tests/support/apis/echo.py``). ``types`` are the acceptable
    ``error.type`` values (``"ok"``: success is fine too); ``validation`` the run's mode."""

    name: str
    program: str
    types: tuple[str, ...]
    validation: str = "strict"


def _forged_call(args_json: str) -> str:
    return FORGE + f"""
body = b'{{"op":"call","id":1,"tool":"echo","args":{{"data":{{"x":' + {args_json} + b'}}}}}}'
raw(chan, body)
print(read(chan))
"""


CASES = [
    # 1. validation bombs. The issue's: a million invalid items (two errors each if all were kept)
    HostCase("validation_bomb", "echo(items=['x'] * 1_000_000)\nprint('sent')", ("ToolError", "SandboxError")),
    # ... fewer, so that the frame is taken and the gateway's own bounds decide
    HostCase("validation_bomb_400k", "echo(items=['x'] * 400_000)\nprint('sent')", ("ToolError",)),
    HostCase("validation_bomb_400k_warn", "echo(items=['x'] * 400_000)\nprint('sent')", ("ok",),
             validation="warn"),
    HostCase("validation_bomb_anyof", "echo(choice=['x'] * 90_000)\nprint('sent')", ("ToolError",)),
    HostCase("validation_bomb_anyof_warn", "echo(choice=['x'] * 90_000)\nprint('sent')", ("ok",),
             validation="warn"),
    HostCase("validation_bomb_caught", """
for i in range(40):
    try:
        echo(items=['x'] * 300_000)
    except ToolError:
        pass
print('survived')
""", ("ok", "CallBudget", "Timeout")),
    HostCase("validation_past_the_deadline", """
import time
items = list(range(95_000))
time.sleep(max(0.0, LIMIT - 0.3))
echo(items=items)
print('sent')
""", ("Timeout",)),
    # 2. frames that cost the sandbox nothing and the host much: the (15 MB), and ones
    #    under the byte cap of a --memory 64 run, refused for their values
    HostCase("empty_lists_frame_15mb", _forged_call('b"[" + b"[]," * 5_000_000 + b"[]]"'), ("SandboxError",)),
    HostCase("empty_lists_frame", _forged_call('b"[" + b"[]," * 2_600_000 + b"[]]"'), ("SandboxError",)),
    HostCase("empty_dicts_frame", _forged_call('b"[" + b"{},"  * 2_600_000 + b"{}]"'), ("SandboxError",)),
    HostCase("numbers_frame", _forged_call('b"[" + b"1.5," * 1_900_000 + b"1.5]"'), ("SandboxError",)),
    HostCase("one_key_objects_frame", _forged_call('b"[" + b\'{"a":[]},\' * 800_000 + b"{}]"'), ("SandboxError",)),
    HostCase("keys_frame", FORGE + """
buf = bytearray(b'{"op":"call","id":1,"tool":"echo","args":{"data":{')
for i in range(700_000):
    buf += b'"%d":{},' % i
buf += b'"end":0}}}'
raw(chan, bytes(buf))
print(read(chan))
""", ("SandboxError",)),
    HostCase("wide_string_frame", _forged_call('b\'"\' + b"x" * 7_000_000 + "\U0001F600".encode() + b\'"\''),
             ("ok",)),
    HostCase("huge_tool_name", FORGE + """
name = "t" * 7_000_000
for i in range(20):
    frame(chan, {"op": "call", "id": i, "tool": name, "args": {}})
    read(chan)
print('done')
""", ("ok", "SandboxError")),
    HostCase("huge_argument_names", """
name = "k" * 3_000_000
for i in range(30):
    try:
        echo(**{name + str(i): 1})
    except ToolError as e:
        pass
print('done')
""", ("ok", "SandboxError", "Timeout")),
    HostCase("long_traceback_frames", FORGE + """
frame(chan, {"op": "done", "ok": False, "stdout": "", "stderr": "", "truncated": False,
             "error": {"type": "X", "message": "m", "traceback": "", "frames": [{}] * 200_000}})
import time
time.sleep(30)
""", ("X",)),
    # 3. frames the host does not expect
    HostCase("ready_flood", FORGE + """
body = b'{"op":"ready","pid":1,"pad":[' + b"[]," * 2_000_000 + b'[]]}'
for i in range(1000):
    raw(chan, body)
""", ("SandboxError",)),
    HostCase("small_ready_flood", FORGE + """
body = b'{"op":"ready","pid":1,"python":"3"}'
for i in range(100_000):
    raw(chan, body)
""", ("SandboxError",)),
    HostCase("output_frame_flood", FORGE + """
body = json.dumps({"op": "output", "stdout": "o" * 1_000_000, "stderr": ""}).encode()
for i in range(10000):
    raw(chan, body)
""", ("SandboxError",)),
    HostCase("tiny_frame_flood", FORGE + """
body = b'{"op":"output","stdout":"","stderr":""}'
for i in range(2_000_000):
    raw(chan, body)
""", ("SandboxError",)),
    # 4. data piled up in the call log
    HostCase("big_arguments_kept", """
big = 'x' * (4 << 20)
for i in range(100):
    echo(blob=big)
print('done')
""", ("ok", "CallBudget", "Timeout", "SandboxError")),
    HostCase("big_responses_kept", """
for i in range(100):
    blob(n=4_000, kind='text')
print('done')
""", ("ok", "CallBudget", "Timeout")),
    HostCase("number_responses_kept", """
for i in range(100):
    blob(n=300_000, kind='numbers')
print('done')
""", ("ok", "CallBudget", "Timeout")),
    HostCase("response_values_bomb", """
try:
    blob(n=1_600_000, kind='lists')
except ToolError as e:
    print(e)
""", ("ok",)),
    # 5. programs that cost the host to check before they run (the issue's: a flat 500 KB)
    HostCase("huge_flat_program", "x = 1\n" * 83_000 + "print(x)\n", ("SandboxError",)),
    HostCase("largest_costly_program", "x.y;" * 15_990 + "\nprint(1)\n", ("NameError",)),
]


#: Hostile MCP results (issue 29), from ``tests/support/mcp_servers/hostile.py`` as collection ``hostile``
#: (``measure(..., mcp=[source])``): each is refused at once with a ``ToolError`` the program
#: catches, and the same server then answers a ``ping``.
MCP_CASES = [HostCase(f"mcp_{name}", f"""
try:
    {call}
    print('taken')
except ToolError as e:
    print('refused:', str(e)[:200])
print(ping())
""", ("ok",)) for name, call in (
    ("items_1m", "items(n=1_000_000)"),
    ("numbers_4m", "numbers(n=4_000_000)"),
    ("keys_1m", "keys(n=1_000_000)"),
    ("text_120mb", "text(mb=120)"),
    ("deep_100k", "deep(n=100_000)"),
    ("items_1m_id_last", "items(n=1_000_000, where='tail')"),
    ("numbers_4m_no_id", "numbers(n=4_000_000, where='none')"),
    ("items_180k", "items(n=180_000)"),  # under the byte cap, over the values cap
    ("items_100k_taken", "items(n=100_000)"),  # the largest the values cap of --memory 64 lets in
    ("numbers_500k_taken", "numbers(n=500_000)"),
)]


@dataclass
class Measured:
    """What one case cost the atc process. ``peak_mb``: the highest resident size during the run
    above the baseline taken before the first case; ``cpu_s``: the process's user+system time
    during the run; ``wall_s``: the run's wall time."""

    name: str
    backend: str
    outcome: str
    message: str
    peak_mb: float
    cpu_s: float
    wall_s: float
    calls: int
    baseline_mb: float
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure(backend: str, cases: list[HostCase], *, spec: Path, limits: dict[str, Any],
            timeout: float = 600.0, root: Path = ROOT, mcp: list[str] | None = None) -> list[Measured]:
    """Run ``cases`` on ``backend`` ("local" or "docker") in a child atc process (see the module
    docstring); ``spec`` is the echo API's spec file, ``limits`` the fields of ``Limits``, ``root``
    the checkout whose code runs (it must hold this file and ``tests/support/apis/echo.py``); ``mcp``:
    MCP sources (``mcp:COMMAND``, ``mcp+http://...``) whose tools the runs get too, loaded (and,
    for stdio, started) before the baseline is taken."""
    job = {"backend": backend, "spec": str(spec), "limits": limits, "mcp": mcp or [],
           "cases": [{"name": c.name, "program": c.program, "validation": c.validation} for c in cases]}
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATC_") or k == "ATC_HOME"}
    proc = subprocess.run([sys.executable, "-m", "tests.support.hostile_host"], input=json.dumps(job), text=True,
                          capture_output=True, cwd=root, env=env, timeout=timeout)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(rows) != len(cases):
        raise RuntimeError(f"the measuring child failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return [Measured(**row) for row in rows]


# -- the child ---------------------------------------------------------------------------------

def _status_mb(field_name: str) -> float:
    with open("/proc/self/status") as f:
        found = re.search(rf"^{field_name}:\s+(\d+) kB", f.read(), re.M)
    return int(found.group(1)) / 1024 if found else 0.0


def _settle() -> None:
    """Give back what the last run freed (Python's collector, then malloc's free lists)."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _child() -> int:
    job = json.loads(sys.stdin.read())
    from protocols import load_spec
    from sandbox.api import Backend, Limits, Toolset

    limits = Limits(**job["limits"])
    collections = [load_spec(job["spec"])]
    if job.get("mcp"):
        from sandbox.gateway.mcp.sources import load_source

        for source in job["mcp"]:
            collections += load_source(source, name="hostile")
    backend: Backend
    if job["backend"] == "docker":
        from sandbox.docker.backend import DockerBackend

        backend = DockerBackend(pool_size=1)
    else:
        from sandbox.local.backend import LocalBackend

        backend = LocalBackend(pool_size=1)
    with backend:
        tools = Toolset(collections)
        warms = ["print(echo(blob='warm'))", "echo(items=['x'])", "x = echo(blob='y')\nprint(x['nope'])"]
        if job.get("mcp"):
            warms.append("print(ping())")
        for warm in warms:
            backend.run(warm, tools, limits)
        time.sleep(0.5)
        _settle()
        baseline = _status_mb("VmRSS")
        for case in job["cases"]:
            tools = Toolset(collections, validation=case["validation"])
            program = case["program"].replace("LIMIT", repr(limits.timeout))
            _settle()
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # the peak (VmHWM) starts again from the current size
            cpu, started = _cpu(), time.monotonic()
            result = backend.run(program, tools, limits)
            wall, cpu = time.monotonic() - started, _cpu() - cpu
            peak = _status_mb("VmHWM")
            outcome = "ok" if result.ok else (result.error.type if result.error else "no-error")
            message = result.error.message[:300] if result.error else ""
            row = Measured(case["name"], job["backend"], outcome, message, round(peak - baseline, 1),
                           round(cpu, 3), round(wall, 3), len(result.calls), round(baseline, 1),
                           {"summarized": sum(1 for c in result.calls if getattr(c, "summarized", None))})
            del result
            print(json.dumps(row.to_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child())
