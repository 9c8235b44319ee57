"""CLI start-up: what a user waits for around the real work, against ``python -c pass``.

Every row is a fresh process, as a user runs it (p50/p95 of wall time over N runs, in ms):

- ``python -c pass``: the same interpreter starting and doing nothing (the baseline);
- ``atc --help``: the command line alone (argparse, the command modules);
- ``atc run`` of a trivial program (``print("hi")``) with the bundled bookshop spec, per sandbox
  (``local``, ``docker`` when an engine and the image are there, ``auto``);
- ``atc run`` of the bookshop example program (five chained tool calls) against ``atc mock`` of
  the same spec, on the local sandbox: the path a real program takes (gateway, validation, HTTP);
- ``atc solve`` with an instant model: the scripted OpenAI-compatible server of
  ``tests/support/fakes/openai_server.py`` answers every request at once with a trivial program, so
  what is measured is everything atc does around the model's answer (the real ``openai`` client
  included).

Two floors are measured in the same run: ``python -c "import openai"`` (what the model client
costs before it can send anything) and, with Docker, one fresh container doing
``python3 -c pass`` through the engine API (create + start + wait, in this process).

``--baseline DIR`` also runs every atc row on another source tree of atc (e.g. the commit before a
change: ``git archive COMMIT | tar -x -C DIR``), interleaved with the current tree so that both
see the same load; both trees are imported from their folders, with the same interpreter and
packages. Goals (issue #8): ``atc run`` of the trivial program <= 350 ms on each sandbox,
``atc solve`` <= 600 ms.

``--importtime`` prints the import profile of ``atc run`` and ``atc solve`` (``python -X
importtime``): the time spent importing, and which of the heavy packages each loads, with what
each costs alone. Usage::

    .venv/bin/python benchmarks/bench_cli.py [-n 7] [--sandbox local,docker,auto] [--baseline DIR] [--importtime]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fakes.openai_server import ScriptedOpenAI  # noqa: E402

PYTHON = sys.executable  # the venv's interpreter: the one the ``atc`` script runs on
SPEC = ROOT / "atc" / "examples" / "bookshop" / "openapi.json"
EXAMPLE = ROOT / "atc" / "examples" / "bookshop" / "program.py"
PROGRAM = 'print("hi")\n'
REPLY = "```python\nprint('the answer is 42')\n```"
QUERY = "What is the answer?"
GOALS_MS = {"run": 350.0, "solve": 600.0}
# The ``atc`` console script, run from a given source tree: the editable install's finder would
# otherwise import the installed tree whatever the path says.
ENTRY = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("
         "'__editable__')]; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'atc'; "
         "from atc.cli import entry; entry()")


def atc(tree: Path, *args: str) -> list[str]:
    return [PYTHON, "-c", ENTRY, str(tree), *args]


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Wall time of one process in ms; the process must succeed."""
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:2] + argv[3:])} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return elapsed


def measure(cases: dict[str, list[str]], env: dict[str, str], n: int) -> dict[str, list[float]]:
    """Each case ``n`` times, interleaved (a burst of load from other jobs hits every row alike),
    after one untimed run each (byte-code caches, the page cache)."""
    samples: dict[str, list[float]] = defaultdict(list)
    for argv in cases.values():
        timed(argv, env)
    for _ in range(n):
        for name, argv in cases.items():
            samples[name].append(timed(argv, env))
    return samples


def docker_ready(env: dict[str, str]) -> bool:
    done = subprocess.run(atc(ROOT, "sandbox", "status", "--json"), env=env, capture_output=True, text=True)
    try:
        return bool(json.loads(done.stdout).get("auto_backend") == "docker")
    except ValueError:
        return False


def container_floor(n: int) -> list[float]:
    """ms for one fresh container of the sandbox image running ``python3 -I -S -c pass``: create,
    start and wait through the engine API (the client is connected beforehand)."""
    from sandbox.docker.engine import DEFAULT_IMAGE, connect

    client = connect()
    samples = []
    try:
        for i in range(n + 1):
            started = time.perf_counter()
            cid = client.api.create_container(DEFAULT_IMAGE, ["python3", "-I", "-S", "-c", "pass"],
                                              network_disabled=True, labels={"atc.bench": "1"},
                                              host_config=client.api.create_host_config(network_mode="none"))["Id"]
            client.api.start(cid)
            client.api.wait(cid)
            if i:  # the first one warms the engine's caches
                samples.append((time.perf_counter() - started) * 1000)
            client.api.remove_container(cid, force=True)
    finally:
        client.close()
    return samples


#: Packages worth watching in an import profile: what each costs, and which command loads it.
WATCHED = ("openai", "pydantic", "httpx2", "jsonschema", "httpx", "httpcore", "asyncio", "docker", "requests",
           "http.cookiejar", "ssl", "yaml", "RestrictedPython", "genson", "protocols.store")


def imported(argv: list[str], env: dict[str, str]) -> tuple[float, set[str]]:
    """(ms of imports in all, the modules imported) of one atc command, by ``python -X
    importtime``. (With the sandbox prepared in a thread, two threads import at once and each
    one's times include waiting for the other: the total is what the process spent importing.)"""
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], env=env, capture_output=True, text=True)
    total, modules = 0.0, set()
    for line in done.stderr.splitlines():
        fields = line[len("import time:"):].split("|") if line.startswith("import time:") else []
        if len(fields) != 3 or not fields[0].strip().lstrip("-").isdigit():
            continue
        name = fields[2]
        modules.add(name.strip())
        if len(name) - len(name.lstrip(" ")) == 1:  # a top-level import: its cumulative time
            total += int(fields[1]) / 1000
    return total, modules


def standalone_ms(module: str, env: dict[str, str]) -> float:
    """What importing ``module`` alone costs in a fresh interpreter (cumulative ms)."""
    done = subprocess.run([PYTHON, "-X", "importtime", "-c", f"import {module}"], env=env, capture_output=True,
                          text=True)
    for line in reversed(done.stderr.splitlines()):
        fields = line[len("import time:"):].split("|") if line.startswith("import time:") else []
        if len(fields) == 3 and fields[2].strip() == module:
            return int(fields[1]) / 1000
    return float("nan")


def stats(values: list[float]) -> tuple[float, float]:
    values = sorted(values)
    return statistics.median(values), values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=7, help="runs per row (default 7)")
    ap.add_argument("--sandbox", default="local,docker,auto", help="sandboxes to measure (local,docker,auto)")
    ap.add_argument("--baseline", type=Path, help="another atc source tree to measure in the same run")
    ap.add_argument("--importtime", action="store_true", help="also print the import profile of run and solve")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="atc-bench-cli-"))
    program = work / "trivial.py"
    program.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATC_", "OPENAI_"))}
    env.update(ATC_HOME=str(work / "home"), ATC_MODEL="scripted")
    wanted = [s for s in args.sandbox.split(",") if s]
    if "docker" in wanted and not docker_ready(env):
        print("no Docker engine or no sandbox image: the docker rows are skipped", file=sys.stderr)
        wanted.remove("docker")
    trees = {"now": ROOT}
    if args.baseline:
        trees = {"before": args.baseline.resolve(), "now": ROOT}

    from atc.mock import MockServer
    from protocols import load_spec

    with ScriptedOpenAI(router=lambda body: REPLY) as model, MockServer(load_spec(SPEC)) as api:
        env["OPENAI_BASE_URL"] = model.base_url
        cases: dict[str, list[str]] = {"python -c pass": [PYTHON, "-c", "pass"],
                                       'python -c "import openai" (floor)': [PYTHON, "-c", "import openai"]}
        rows: list[tuple[str, str]] = []  # (row, kind)
        for label, tree in trees.items():
            cases[f"{label}: atc --help"] = atc(tree, "--help")
        rows.append(("atc --help", ""))
        for sandbox in wanted:
            flag = [] if sandbox == "auto" else ["--sandbox", sandbox]
            for label, tree in trees.items():
                cases[f"{label}: atc run ({sandbox})"] = atc(tree, "run", str(program), "--tools", str(SPEC), *flag)
            rows.append((f"atc run ({sandbox})", "run"))
            if sandbox == "local":
                for label, tree in trees.items():
                    cases[f"{label}: atc run bookshop program ({sandbox})"] = atc(
                        tree, "run", str(EXAMPLE), "--tools", str(SPEC), "--base-url", api.url, *flag)
                rows.append((f"atc run bookshop program ({sandbox})", ""))
            for label, tree in trees.items():
                cases[f"{label}: atc solve ({sandbox})"] = atc(tree, "solve", QUERY, "--tools", str(SPEC), *flag)
            rows.append((f"atc solve ({sandbox})", "solve"))
        samples = measure(cases, env, args.n)
        floor = container_floor(args.n) if "docker" in wanted else []
        profiles: dict[tuple[str, str], tuple[float, set[str]]] = {}
        costs: dict[str, float] = {}
        if args.importtime:
            for label, tree in trees.items():
                for command in ("run", "solve"):
                    argv = atc(tree, command, str(program) if command == "run" else QUERY, "--tools", str(SPEC),
                               "--sandbox", "local")
                    profiles[(label, command)] = imported(argv, env)
            costs = {m: statistics.median(standalone_ms(m, env) for _ in range(3)) for m in WATCHED}

    base, _ = stats(samples["python -c pass"])
    print(f"\n{args.n} runs per row, interleaved; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}\n")
    labels = list(trees)
    head = " | ".join(f"{label} p50 / p95 ms" for label in labels)
    print(f"| row | {head} |" + (" now / before |" if len(labels) == 2 else "") + " now - python -c pass | now x python -c pass | goal |")
    print("|---|" + "---|" * (len(labels) + (1 if len(labels) == 2 else 0) + 3))
    floors = [("python -c pass", samples["python -c pass"]),
              ('python -c "import openai" (floor)', samples['python -c "import openai" (floor)'])]
    if floor:
        floors.append(("one fresh container, python3 -c pass (floor)", floor))
    blank = " | ".join("" for _ in labels[1:])
    for name, values in floors:
        p50, p95 = stats(values)
        print(f"| {name} | {p50:.0f} / {p95:.0f} |" + (f" {blank} | |" if len(labels) == 2 else "")
              + f" {p50 - base:+.0f} | {p50 / base:.1f} | |")
    for row, kind in rows:
        cells = []
        for label in labels:
            p50, p95 = stats(samples[f"{label}: {row}"])
            cells.append(f"{p50:.0f} / {p95:.0f}")
        now, _ = stats(samples[f"now: {row}"])
        ratio = f" {now / stats(samples[f'before: {row}'])[0]:.2f} |" if len(labels) == 2 else ""
        goal = GOALS_MS.get(kind)
        verdict = "" if goal is None or "bookshop" in row else f"<= {goal:.0f}: {'met' if now <= goal else 'not met'}"
        print(f"| {row} | {' | '.join(cells)} |{ratio} {now - base:+.0f} | {now / base:.1f} | {verdict} |")
    if profiles:
        columns = list(profiles)
        print("\nimport profile (local sandbox): which packages each command loads, and what each costs alone\n")
        print("| | alone ms | " + " | ".join(f"{command} ({label})" for label, command in columns) + " |")
        print("|---|---|" + "---|" * len(columns))
        print("| all imports, ms | | " + " | ".join(f"{profiles[c][0]:.0f}" for c in columns) + " |")
        for module in WATCHED:
            marks = " | ".join("yes" if module in profiles[c][1] else "-" for c in columns)
            print(f"| `{module}` | {costs[module]:.0f} | {marks} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
