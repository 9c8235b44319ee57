"""Issue #25, round 2: the speed of the two-stage hybrid against the code before it, in one run.

``bench_retrieval.py --no-quality --stages-speed [--before TREE] -n N``. ``TREE``: the code before
(``git archive 01d36ad atc protocols sandbox probes | tar -x -C TREE``), run from the same
interpreter (tree_run.py, retrieval_inproc.py); without it only the rows of this code are printed.

Stores (the issue's size, 17,353 tools):

* **copies**: the ToolBench pool (2,479 tools) imported 7 times, as the earlier sections measured:
  every tool has 6 copies, shown once; the two-stage code ranks one row per group (2,479 rows),
  the code before ranked all 17,353 documents;
* **distinct**: the pool 7 times with each copy's group renamed (``Weather (mirror 3)``), so
  17,353 tools with texts of their own and no copies: what a catalogue of that size costs.

Rows: import of the pool (2,479 tools) into an empty store per 1,000 tools (and the background
filler's rate), in-process latency (the whole search, the request's embedding, the ranking),
``atc tools search`` wall times, cold and with the warm server, the first searches after an
import while the full vectors are still missing, and the warm server's memory, each against
``python -c pass`` and the code before, interleaved in the same run.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from retrieval_sets import DATA, all_sets

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _pct(samples: list[float]) -> str:
    s = sorted(samples)
    return f"p50 {statistics.median(s):.1f} ms, p95 {s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]:.1f} ms"


def _p50(samples: list[float]) -> float:
    return float(statistics.median(samples))


def _pool_spec(folder: Path) -> tuple[Path, int]:
    """The ToolBench pool as one query file (``atc tools import`` reads it)."""
    source = DATA / "toolbench" / "stabletoolbench" / "solvable_queries" / "test_instruction"
    apis: dict[tuple[str, str], Any] = {}
    for path in sorted(source.glob("*.json")):
        for q in json.loads(path.read_text()):
            for api in q["api_list"]:
                apis.setdefault((api["tool_name"], api["api_name"]), api)
    spec = folder / "toolbench-pool.json"
    spec.write_text(json.dumps([{"api_list": list(apis.values())}]))
    return spec, len(apis)


def _stores(root: Path, cache: Path) -> dict[str, Path]:
    """The copies and distinct stores, their indexes built by this code (vectors of the copies
    store from the bench's vector cache; those of the distinct store by the background filler,
    kept in the bench's cache for the next run)."""
    from atc.retrieval.embedders import make_embedder
    from atc.retrieval.fill import fill
    from atc.retrieval.index import update_index
    from protocols.model import Collection
    from protocols.store import Store

    tb = next(s for s in all_sets(10, held_out=False) if s.name == "ToolBench")
    out: dict[str, Path] = {}
    for kind in ("copies", "distinct"):
        home = root / kind
        store = Store(home)
        for c in range(7):
            tools = [replace(t, collection=f"tb{c}") if kind == "copies" or c == 0 else
                     replace(t, collection=f"tb{c}", group=f"{t.group} (mirror {c})") for t in tb.tools]
            store.add(Collection(name=f"tb{c}", tools=tools, source="bench", source_format="toolbench"))
        if (cache / "embeddings").is_dir():
            shutil.copytree(cache / "embeddings", home / "embeddings")
        embedder = make_embedder()
        index = update_index(home, store=store, embedder=embedder)
        missing = int(index.meta["rows"]) - int(index.meta["exact"])
        if missing:
            started = time.perf_counter()
            fill(home, nice=0)
            seconds = time.perf_counter() - started
            print(f"<!-- {kind}: the filler computed {missing} tools in {seconds:.0f} s "
                  f"({missing / seconds:.0f} tools/s) -->", flush=True)
            (cache / "embeddings").mkdir(parents=True, exist_ok=True)
            shutil.copy2(home / "embeddings" / "all-MiniLM-L6-v2.vec", cache / "embeddings" / "all-MiniLM-L6-v2.vec")
        out[kind] = home
    return out


def _before_home(root: Path, copies: Path, before: Path, env: dict[str, str]) -> Path:
    """The copies store for the code before: its collections, its vector cache (the .npy of
    before, written from this code's cache) and its index, built by it."""
    import numpy as np

    from atc.retrieval.vectorstore import VectorCache

    home = root / "before"
    shutil.copytree(copies / "collections", home / "collections")
    cache = VectorCache(copies, "all-MiniLM-L6-v2")
    keys, records, dim = cache._records()
    if records is not None:
        rows = np.zeros(len(keys), dtype=np.dtype([("h", "S16"), ("v", np.float32, (dim,))]))
        order = sorted(keys.values())
        rows["h"] = [bytes(records["h"][i]) for i in order]
        rows["v"] = records["v"][order]
        (home / "embeddings").mkdir(parents=True)
        np.save(home / "embeddings" / "all-MiniLM-L6-v2.npy", rows)
    code = ("from pathlib import Path; from atc.retrieval.index import update_index; "
            "from atc.retrieval.embedders import make_embedder; "
            f"update_index(Path({str(home)!r}), embedder=make_embedder())")
    subprocess.run([sys.executable, "-c", f"import sys; sys.meta_path[:] = [f for f in sys.meta_path if not "
                    f"type(f).__name__.startswith('_Editable')]; sys.path.insert(0, {str(before)!r}); {code}"],
                   env=env, check=True)
    return home


def _inproc(tree: Path, home: Path, queries: list[str], env: dict[str, str], resident: bool) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(queries, f)
    try:
        args = [sys.executable, str(HERE / "retrieval_inproc.py"), str(tree), str(home), f.name]
        out = subprocess.run(args + (["--resident"] if resident else []), env=env, check=True, capture_output=True,
                             text=True)
    finally:
        os.unlink(f.name)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _wait_filled(home: Path, timeout: float = 900.0) -> float:
    """Seconds until every row of the live index of ``home`` has its full vector."""
    import numpy as np

    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        live = (home / "retrieval" / "CURRENT").read_text().strip()
        flags = np.fromfile(home / "retrieval" / live / "exact.u8", dtype=np.uint8)
        if len(flags) and flags.all():
            return time.perf_counter() - started
        time.sleep(0.2)
    return float("nan")


def run(cache: Path, before: Path | None, runs: int) -> None:
    import compileall

    from atc.config import models_dir

    for tree in [ROOT, *([before] if before else [])]:  # as installed packages are: compiled once
        for package in ("atc", "protocols", "sandbox", "probes"):
            compileall.compile_dir(str(tree / package), quiet=1)
    root = Path(tempfile.mkdtemp(prefix="atc-bench-stages-"))
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("ATC_")}
    base_env.update(OPENBLAS_NUM_THREADS="1", ATC_MODELS_DIR=str(models_dir()), ATC_SEARCH_SERVER="off")
    try:
        stores = _stores(root, cache)
        sets = {s.name: s for s in all_sets(10, held_out=False)}
        long = [q.text for q in sets["ToolBench"].queries[:40]]
        short = [q.text for q in [*sets["TMDB"].queries, *sets["Spotify"].queries][:40]]
        old_home = _before_home(root, stores["copies"], before, base_env) if before else None
        _inprocess_rows(stores, old_home, before, long, short, base_env)
        _import_rows(root, before, base_env)
        _command_rows(stores, old_home, before, long, short, base_env, runs)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _inprocess_rows(stores: dict[str, Path], old_home: Path | None, before: Path | None, long: list[str],
                    short: list[str], env: dict[str, str]) -> None:
    print("\n## in process, index open (ms; a child process per row, one after the other)\n")
    print("| code, store, requests | queries | whole search | the request's embedding | the ranking alone |")
    print("|---|---|---|---|---|")
    cases: list[tuple[str, Path, Path, bool]] = []
    if before and old_home:
        cases.append(("before, copies, numpy", before, old_home, False))
        cases.append(("before, copies, numpy resident", before, old_home, True))
    cases += [("after, copies, a program's loop", ROOT, stores["copies"], False),
              ("after, copies, as the server (resident)", ROOT, stores["copies"], True),
              ("after, distinct, a program's loop", ROOT, stores["distinct"], False),
              ("after, distinct, as the server (resident)", ROOT, stores["distinct"], True)]
    for label, tree, home, resident in cases:
        for name, queries in (("ToolBench", long), ("one-line", short)):
            got = _inproc(tree, home, queries, env, resident)
            t = got["times"]
            print(f"| {label}, requests on {got['requests']} | {name} | {_pct(t['search'])} | {_pct(t['embed'])} | {_pct(t['ranking'])} |", flush=True)


def _import_rows(root: Path, before: Path | None, env: dict[str, str]) -> None:
    spec, count = _pool_spec(root)
    print(f"\n## import of the ToolBench pool ({count} tools) into an empty store\n")
    print("| code | wall | per 1,000 tools | then in the background |\n|---|---|---|---|")
    trees = [("after", ROOT), *([("before", before)] if before else [])]
    for label, tree in trees:
        for attempt in ("first", "again"):
            home = root / f"import-{label}-{attempt}"
            e = {**env, "ATC_HOME": str(home), "ATC_EMBED_BACKGROUND": "auto"}
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, str(HERE / "tree_run.py"), str(tree), "cli", "tools", "import",
                                  str(spec), "--name", "toolbench", "--json"], env=e, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if out.returncode != 0:
                print(f"| {label} | failed: {out.stderr.strip()[-200:]} | | |")
                continue
            later = ""
            if label == "after":
                seconds = _wait_filled(home)
                later = f"full vectors of {count} tools in {seconds:.0f} s ({count / seconds:.0f} tools/s)"
            print(f"| {label} ({attempt}) | {wall:.2f} s | {wall / count * 1000:.2f} s | {later} |", flush=True)
            if label == "before":
                break  # about 30 s a run here: once
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    print(f"| python -c pass | {time.perf_counter() - t0:.2f} s | | |")
    _lazy_rows(root, spec, env)


def _lazy_rows(root: Path, spec: Path, env: dict[str, str], count: int = 10) -> None:
    """The first searches after an import of the pool without the background filler: each
    computes the full vectors of the short-listed tools it lacks (onnxruntime int8 loaded in
    the command); then the same searches once the filler has run."""
    from atc.retrieval.fill import fill

    home = root / "lazy"
    e = {**env, "ATC_HOME": str(home), "ATC_EMBED_BACKGROUND": "off"}
    atc = str(Path(sys.executable).parent / "atc")
    subprocess.run([atc, "tools", "import", str(spec), "--name", "toolbench"], env=e, check=True, capture_output=True)
    tb = next(s for s in all_sets(10, held_out=False) if s.name == "ToolBench")
    queries = [q.text for q in tb.queries[100:100 + count]]

    def walls() -> list[float]:
        out = []
        for q in queries:
            t0 = time.perf_counter()
            subprocess.run([atc, "tools", "search", q, "--json"], env=e, check=True, capture_output=True)
            out.append((time.perf_counter() - t0) * 1000)
        return out

    first = walls()
    again = walls()
    started = time.perf_counter()
    filled = fill(home, nice=0)
    seconds = time.perf_counter() - started
    fresh = [q.text for q in tb.queries[200:200 + count]]
    queries[:] = fresh
    after = walls()
    print(f"\n## the first searches after an import without the background filler ({count} ToolBench requests, "
          "cold commands, in order)\n")
    print("| searches | wall |\n|---|---|")
    print(f"| first time, full vectors computed as short-listed | {', '.join(f'{w:.0f}' for w in first)} ms |")
    print(f"| the same again (their vectors kept) | {_pct(again)} |")
    print(f"| {count} new requests after the filler ran ({filled} tools in {seconds:.0f} s) | {_pct(after)} |")


def _command_rows(stores: dict[str, Path], old_home: Path | None, before: Path | None, long: list[str],
                  short: list[str], env: dict[str, str], runs: int) -> None:
    """``atc tools search`` wall times, interleaved: cold (``ATC_SEARCH_SERVER=off``) and warm."""
    atc = str(Path(sys.executable).parent / "atc")

    def plain(home: Path, *flags: str) -> Callable[[str], tuple[list[str], dict[str, str]]]:
        return lambda q: ([atc, "tools", "search", q, *flags, "--json"], {**env, "ATC_HOME": str(home)})

    def tree(code: Path, home: Path, warm: bool = False) -> Callable[[str], tuple[list[str], dict[str, str]]]:
        e = {**env, "ATC_HOME": str(home), "ATC_SEARCH_SERVER": "auto" if warm else "off"}
        return lambda q: ([sys.executable, str(HERE / "tree_run.py"), str(code), "cli", "tools", "search", q,
                           "--json"], e)

    rows: dict[str, tuple[Callable[[str], tuple[list[str], dict[str, str]]], list[str]]] = {
        "python -c pass": (lambda q: ([sys.executable, "-c", "pass"], env), long),
        "after, copies, hybrid, cold, ToolBench requests": (plain(stores["copies"]), long),
        "after, copies, hybrid, cold, one-line requests": (plain(stores["copies"]), short),
        "after, distinct, hybrid, cold, ToolBench requests": (plain(stores["distinct"]), long),
        "after, distinct, hybrid, cold, one-line requests": (plain(stores["distinct"]), short),
        "after, distinct, bm25, cold": (plain(stores["distinct"], "--retriever", "bm25"), short),
        "after (tree_run), copies, hybrid, cold, one-line requests": (tree(ROOT, stores["copies"]), short),
    }
    servers: list[tuple[Path, Path]] = [(ROOT, stores["copies"]), (ROOT, stores["distinct"])]
    rows["after, copies, hybrid, warm server, ToolBench requests"] = (tree(ROOT, stores["copies"], True), long)
    rows["after, copies, hybrid, warm server, one-line requests"] = (tree(ROOT, stores["copies"], True), short)
    rows["after, distinct, hybrid, warm server, ToolBench requests"] = (tree(ROOT, stores["distinct"], True), long)
    rows["after, distinct, hybrid, warm server, one-line requests"] = (tree(ROOT, stores["distinct"], True), short)
    if before and old_home:
        rows["before (tree_run), copies, hybrid, cold, ToolBench requests"] = (tree(before, old_home), long)
        rows["before (tree_run), copies, hybrid, cold, one-line requests"] = (tree(before, old_home), short)
        rows["before, copies, hybrid, warm server, ToolBench requests"] = (tree(before, old_home, True), long)
        rows["before, copies, hybrid, warm server, one-line requests"] = (tree(before, old_home, True), short)
        servers.append((before, old_home))
    started = [_start_server(code, home, env) for code, home in servers]
    walls: dict[str, list[float]] = {label: [] for label in rows}
    try:
        for i in range(runs * 3):
            for label, (make, queries) in rows.items():  # interleaved: every row sees the same load
                args, e = make(queries[i % len(queries)])
                t0 = time.perf_counter()
                subprocess.run(args, env=e, check=True, capture_output=True)
                walls[label].append((time.perf_counter() - t0) * 1000)
        memory = [(code, _rss(pid)) for (code, _), pid in zip(servers, started, strict=True)]
    finally:
        for proc in started:
            proc.terminate()
            proc.wait(timeout=30)
    base = _p50(walls["python -c pass"])
    print(f"\n## atc tools search, wall ({runs * 3} runs a row, interleaved)\n")
    print("| command | wall | p50 / python -c pass |\n|---|---|---|")
    for label, samples in walls.items():
        print(f"| {label} | {_pct(samples)} | {_p50(samples) / base:.1f} |")
    for (code, home), (_, rss) in zip(servers, memory, strict=True):
        store = "copies" if home.name in {"copies", "before"} else home.name
        print(f"| warm server's resident memory ({'before' if code != ROOT else 'after'}, {store}) | {rss} | |")


def _start_server(code: Path, home: Path, env: dict[str, str]) -> Any:
    e = {**env, "ATC_HOME": str(home), "ATC_SEARCH_SERVER": "auto"}
    proc = subprocess.Popen([sys.executable, str(HERE / "tree_run.py"), str(code), "module", "atc.retrieval.server",
                             str(home)], env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out = subprocess.run([sys.executable, str(HERE / "tree_run.py"), str(code), "cli", "tools", "server",
                              "status", "--json"], env=e, capture_output=True, text=True)
        if out.returncode == 0 and json.loads(out.stdout).get("running"):
            break
        time.sleep(0.2)
    # the first search loads the model and pages the index in: not a row
    subprocess.run([sys.executable, str(HERE / "tree_run.py"), str(code), "cli", "tools", "search", "warm up"], env=e,
                   capture_output=True)
    return proc


def _rss(pid: Any) -> str:
    try:
        for line in Path(f"/proc/{pid.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS"):
                return f"{int(line.split()[1]) / 1024:.0f} MB"
    except OSError:
        pass
    return "?"
