"""How well and how cheaply does ``atc probe --no-llm`` document an API it knows nothing about?

The RestBench specs (TMDB: 54 tools, Spotify: 40) are served by ``atc mock`` from the original
spec; the prober gets a copy with every response schema and example removed. ``atc mock`` answers
404 for ids no response contained, so most tools are reachable only through chains.

Measured against a baseline run in the same process, the paper's probing without its model: every
tool called on its own N times with arguments made from its schema (enum, default, example,
format, type; the i-th call takes each parameter's i-th made value), no chaining, and the
successful responses merged with genson the same way.

Rows: tools documented, requests sent, requests per documented tool, leaf-path recall of the
inferred response schemas against the original ones (over every tool with a true schema, and over
the documented ones), wall time; ``atc probe`` with one sample per tool (no gap-driven extra
samples, no cache) and with the defaults; then a second default run on the same cache.

Two more servers, written for the tests (issue 21), each against the same naive baseline:

- ``rest``: a JSON REST server whose relations are optional filters (``/comments?postId=``,
  tests/support/apis/jsonrest.py); the extra column counts the relations found out of the 6 it has, with
  and without trying the filters;
- ``mcp-text``: an MCP file server whose every answer is text (tests/support/mcp_servers/files.py, a real
  process over stdio): documented read-only tools, requests, and how many paths the server was
  sent that it never handed out (made up).

And two for unsafe probing (issues 29, 30):

- ``orchestrator``: the Prefect-like API of the tests (tests/support/apis/orchestrator_fleet.py: reads by
  POST with nested filter bodies, names in paths, upserts): tools documented read-only (no POST
  read sent), with its POST reads marked ``--read-only``, and with ``--allow-unsafe --scope``
  twice on the same server (what was left behind, and whether the server's state is as before);
  then the size of ``openapi.json`` against the served spec, with the named schemas in
  ``components`` and, as the baseline in the same run, written inline (what the probe wrote
  before), and of ``probe.md``;
- ``redirects``: a store whose in-scope PATCH/DELETE answer 307/308 towards the user's bucket
  (tests/support/apis/redirecting.py): requests that reached an object outside the scope, with the scope
  guard and, as the baseline, with the probe's toolset ungarded.

Usage: .venv/bin/python benchmarks/bench_probe.py [--n 3]
    [--spec tmdb|spotify|rest|mcp-text|orchestrator|redirects|all]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["ATC_HOME"] = tempfile.mkdtemp(prefix="atc-bench-probe-")

from atc.mock import MockServer  # noqa: E402
from probes import probe  # noqa: E402
from probes.arguments.naming import param_role  # noqa: E402
from probes.arguments.values import schema_values  # noqa: E402
from probes.calls import classify_body  # noqa: E402
from probes.plan.safety import call_safety  # noqa: E402
from probes.results.document import leaf_paths, merge_schema  # noqa: E402
from protocols import load_data, load_spec  # noqa: E402
from protocols.model import Collection  # noqa: E402
from sandbox.api import Limits, Toolset  # noqa: E402
from sandbox.gateway.core import Gateway  # noqa: E402

SPECS = {"tmdb": ROOT.parent / "shared" / "bench-data" / "restbench" / "specs" / "tmdb_oas.json",
         "spotify": ROOT.parent / "shared" / "bench-data" / "restbench" / "specs" / "spotify_oas.json"}


def blind_copy(path: Path) -> Collection:
    """The spec with nothing left that says what a response looks like."""
    doc = json.loads(path.read_text())

    def strip(response: Any) -> None:
        if isinstance(response, dict):
            for key in ("content", "schema", "examples"):
                response.pop(key, None)

    for item in doc["paths"].values():
        for op in item.values():
            if isinstance(op, dict) and isinstance(op.get("responses"), dict):
                for response in op["responses"].values():
                    strip(response)
    for response in ((doc.get("components") or {}).get("responses") or {}).values():
        strip(response)
    collection = load_data(doc, source=f"{path.stem}-blind")
    assert all(t.response_schema is None and not t.examples for t in collection.tools)
    return collection


@dataclass
class Row:
    method: str
    tools: int
    documented: int
    requests: int
    recall_all: float
    recall_documented: float
    seconds: float

    @property
    def per_tool(self) -> float:
        return self.requests / self.documented if self.documented else float("inf")


def recall(truth: Collection, schemas: dict[str, dict[str, Any] | None], safe: list[str]) -> tuple[float, float]:
    """(recall over every safe tool with a true schema, recall over the documented ones)."""
    total = found = total_doc = found_doc = 0
    for name in safe:
        expected = leaf_paths(truth.tool(name).response_schema)  # type: ignore[union-attr]
        if not expected:
            continue
        got = leaf_paths(schemas.get(name)) if schemas.get(name) else set()
        hit = len(expected & got)
        total += len(expected)
        found += hit
        if schemas.get(name):
            total_doc += len(expected)
            found_doc += hit
    return found / max(1, total), found_doc / max(1, total_doc)


def naive(blind: Collection, truth: Collection, url: str, n: int) -> Row:
    """The paper's probing without a model: each tool alone, N times, schema-made arguments."""
    safe = [t for t in blind.tools if call_safety(t, blind).safe]
    gateway = Gateway(Toolset([blind], base_url=url), Limits(max_calls=10**6, call_timeout=10))
    started = time.perf_counter()
    schemas: dict[str, dict[str, Any] | None] = {}
    for tool in safe:
        made = {p: schema_values(tool.properties.get(p), param_role(tool, p)) for p in tool.required}
        samples = []
        for i in range(n):
            args = {p: values[min(i, len(values) - 1)].value for p, values in made.items() if values}
            outcome = gateway.call(tool.name, args)
            if outcome.ok and classify_body(outcome.data) == "ok":
                samples.append(outcome.data)
        schemas[tool.name] = merge_schema(samples)
    seconds = time.perf_counter() - started
    names = [t.name for t in safe]
    all_, doc = recall(truth, schemas, names)
    return Row(f"naive (each tool alone, N={n})", len(safe), sum(1 for s in schemas.values() if s),
               len(gateway.calls), all_, doc, seconds)


def atc_probe(blind: Collection, truth: Collection, url: str, label: str, **options: Any) -> Row:
    started = time.perf_counter()
    report = probe(blind, base_url=url, no_llm=True, **options)
    seconds = time.perf_counter() - started
    safe = [t.name for t in blind.tools if call_safety(t, blind).safe]
    schemas = {t.name: t.response_schema for t in report.tools if t.status == "documented"}
    all_, doc = recall(truth, schemas, safe)
    return Row(label, len(safe), report.count("documented"), report.calls, all_, doc, seconds)


def _naive_calls(toolset: Toolset, n: int) -> tuple[int, int, int]:
    """(documented, requests, tools) of the naive baseline over a toolset (safe tools only)."""
    tools = [(t, c) for c in toolset.collections for t in c.tools if call_safety(t, c).safe]
    gateway = Gateway(toolset, Limits(max_calls=10**6, call_timeout=10))
    documented = 0
    for tool, _ in tools:
        made = {p: schema_values(tool.properties.get(p), param_role(tool, p)) for p in tool.required}
        worked = False
        for i in range(n):
            args = {p: values[min(i, len(values) - 1)].value for p, values in made.items() if values}
            outcome = gateway.call(tool.name, args)
            worked = worked or (outcome.ok and classify_body(outcome.data) == "ok")
        documented += worked
    return documented, len(gateway.calls), len(tools)


RELATIONS = {("list_users", "list_posts"), ("list_posts", "list_comments"), ("list_users", "list_albums"),
             ("list_albums", "list_photos"), ("list_users", "list_todos"), ("list_users", "list_repos")}


def rest_rows(n: int) -> None:
    """The JSON REST server whose relations are optional filters."""
    import probes.rounds
    from tests.support.apis.jsonrest import JsonRestAPI

    def links(report: Any) -> int:
        found = {(f["tool"], t.name) for t in report.tools for f in t.filters.values()}
        return len(found & RELATIONS)

    with JsonRestAPI() as api:
        collection = load_data(api.spec(), source="rest")
        started = time.perf_counter()
        base_doc, base_calls, safe = _naive_calls(Toolset([collection], base_url=api.url), n)
        base_s = time.perf_counter() - started
        keep = probes.rounds.probe_filters
        probes.rounds.probe_filters = lambda session, round_: None  # the probe before issue 21
        try:
            started = time.perf_counter()
            before = probe(collection, no_llm=True, cache=False)
            before_s = time.perf_counter() - started
        finally:
            probes.rounds.probe_filters = keep
        started = time.perf_counter()
        ours = probe(collection, no_llm=True, cache=False)
        ours_s = time.perf_counter() - started
    print(f"\nJSON REST with optional foreign-key filters ({safe} tools, {len(RELATIONS)} relations), 127.0.0.1")
    print("| method | documented | requests | requests / documented tool | relations found | wall s |")
    print("|---|---|---|---|---|---|")
    print(f"| naive (each tool alone, N={n}) | {base_doc}/{safe} | {base_calls} | {base_calls / max(1, base_doc):.2f} "
          f"| 0/{len(RELATIONS)} | {base_s:.2f} |")
    for label, rep, secs in (("atc probe --no-llm, filters not tried", before, before_s),
                             ("atc probe --no-llm", ours, ours_s)):
        doc = rep.count("documented")
        print(f"| {label} | {doc}/{safe} | {rep.calls} | {rep.calls / max(1, doc):.2f} | "
              f"{links(rep)}/{len(RELATIONS)} | {secs:.2f} |")
    print(f"ratios atc/naive: requests per documented tool x{ours.calls / max(1, ours.count('documented')) / (base_calls / max(1, base_doc)):.3f}; "
          f"filters cost {ours.calls - before.calls} requests for {links(ours) - links(before)} relations")


def mcp_text_rows(n: int) -> None:
    """The MCP file server whose every answer is text."""
    from probes.single import resolve_toolset
    from sandbox.gateway.mcp.connections import close_servers

    root = Path(tempfile.mkdtemp(prefix="atc-bench-files-"))
    (root / "docs").mkdir()
    (root / "notes.txt").write_text("hello\n")
    (root / "docs" / "plan.md").write_text("# plan\n")
    log = root.parent / f"{root.name}.log"
    config = root.parent / f"{root.name}-servers.json"
    config.write_text(json.dumps({"mcpServers": {"files": {
        "command": sys.executable, "args": ["-m", "tests.support.mcp_servers.files", str(root)], "cwd": str(ROOT),
        "env": {"FILES_LOG": str(log)}}}}))
    try:
        toolset = resolve_toolset(str(config))
        started = time.perf_counter()
        base_doc, base_calls, safe = _naive_calls(toolset, n)
        base_s = time.perf_counter() - started
        base_made = _made_up(log, root)
        log.unlink(missing_ok=True)
        started = time.perf_counter()
        ours = probe(toolset, no_llm=True, cache=False)
        ours_s = time.perf_counter() - started
        ours_made = _made_up(log, root)
    finally:
        close_servers()
    doc = ours.count("documented")
    print(f"\nMCP file server, text answers ({safe} read-only tools), stdio")
    print("| method | documented | requests | requests / documented tool | paths made up | wall s |")
    print("|---|---|---|---|---|---|")
    print(f"| naive (each tool alone, N={n}) | {base_doc}/{safe} | {base_calls} | {base_calls / max(1, base_doc):.2f} "
          f"| {base_made} | {base_s:.2f} |")
    print(f"| atc probe --no-llm | {doc}/{safe} | {ours.calls} | {ours.calls / max(1, doc):.2f} | {ours_made} | "
          f"{ours_s:.2f} |")
    print(f"ratios atc/naive: documented x{doc / max(1, base_doc):.2f}, requests per documented tool "
          f"x{ours.calls / max(1, doc) / (base_calls / max(1, base_doc)):.3f}")


def _made_up(log: Path, root: Path) -> int:
    """Paths the file server was sent that do not lie under its root (made up, like ``test``)."""
    if not log.exists():
        return 0
    count = 0
    for line in log.read_text().splitlines():
        args = json.loads(line)["args"]
        for key in ("path", "paths"):
            for value in (args.get(key) if isinstance(args.get(key), list) else [args.get(key)]):
                if isinstance(value, str) and not value.startswith(str(root)):
                    count += 1
    return count


def orchestrator_rows() -> None:
    """The Prefect-like API: reads by POST, clean-up, output size."""
    import copy

    import probes.results.outputs
    from tests.support.apis.orchestrator_fleet import FleetAPI

    scope = {"work_pool_name": "atc-scratch", "key": "atc-scratch"}
    rows: list[tuple[str, Any, float, str]] = []
    with FleetAPI() as api:
        before = copy.deepcopy(api.data)
        collection = load_data(api.spec(), source="orchestrator")
        served = len(json.dumps(api.spec(), indent=1))
        for label, options in (("read-only (no POST read sent)", {}),
                               ("--read-only '*_filter_post' '*_count_post'",
                                {"read_only": ("*_filter_post", "*_count_post")}),
                               ("--allow-unsafe --scope work_pool_name=... --scope key=...",
                                {"allow_unsafe": True, "scope": scope}),
                               ("the same, a second run", {"allow_unsafe": True, "scope": scope})):
            started = time.perf_counter()
            out = Path(tempfile.mkdtemp(prefix="atc-bench-orch-"))
            report = probe(collection, no_llm=True, cache=False, on_event=lambda e, s: None, out=out, **options)
            same = "yes" if api.data == before else "NO"
            rows.append((label, report, time.perf_counter() - started, same))
        written = (out / "openapi.json").stat().st_size
        page = (out / "probe.md").stat().st_size
        keep = probes.results.outputs.factor
        probes.results.outputs.factor = lambda doc: doc  # the document as the probe wrote it before (issue 30 item 4)
        try:
            inline = len(json.dumps(probes.results.outputs.openapi_document(
                probes.results.outputs.learnt_collection(collection, report), report), indent=1, ensure_ascii=False))
        finally:
            probes.results.outputs.factor = keep
        largest = max(len(json.dumps(op)) for item in json.loads((out / "openapi.json").read_text())["paths"].values()
                      for op in item.values())
    total = len(collection.tools)
    print(f"\nPrefect-like orchestrator ({total} tools, {sum(1 for t in collection.tools if t.method == 'POST')} POST), "
          "127.0.0.1")
    print("| probe | documented | requests | left behind | outside the scope refused | state as before | wall s |")
    print("|---|---|---|---|---|---|---|")
    for label, report, secs, same in rows:
        print(f"| {label} | {report.count('documented')}/{total} | {report.calls} | {len(report.left_behind)} | "
              f"{len(report.outside_scope)} | {same} | {secs:.2f} |")
    undocumented = sum(1 for t in rows[-1][1].tools if t.status != "documented")
    print(f"openapi.json: {written} bytes (served spec {served}: x{written / served:.2f}); inline, as before: {inline} "
          f"bytes (x{inline / served:.2f}); ratio new/inline x{written / inline:.3f}; largest operation {largest} bytes; "
          f"probe.md {page} bytes ({undocumented} tools not documented, in one list)")


def redirect_rows() -> None:
    """In-scope writes that answer 307/308 out of the scope: requests that reached the user's objects."""
    import probes.probing
    from tests.support.apis.redirecting import RedirectingStore

    def away(method: str, path: str) -> tuple[int, str] | None:
        if method in ("PATCH", "DELETE") and path.startswith(("/buckets/throwaway/", "/buckets/prod/")):
            return (307 if method == "PATCH" else 308), "/buckets/prod/items/p1"
        return None

    print("\nRedirects out of the scope (PATCH 307, DELETE 308 towards /buckets/prod/...), 127.0.0.1")
    print("| probe | writes sent | reached objects outside the scope | left behind | wall s |")
    print("|---|---|---|---|---|")
    keep = probes.probing.guarded_toolset
    for label, guarded in (("this probe without its scope guard", False), ("with the scope guard", True)):
        if not guarded:
            probes.probing.guarded_toolset = lambda toolset, guard: toolset  # type: ignore[assignment]
        try:
            with RedirectingStore(redirect=away) as api:
                started = time.perf_counter()
                report = probe(load_data(api.spec(), source="buckets"), no_llm=True, cache=False,
                               on_event=lambda e, s: None, allow_unsafe=True, scope={"bucket_id": "throwaway"})
                secs = time.perf_counter() - started
                outside = [w for w in api.writes() if w[1].startswith("/buckets/prod")]
                print(f"| {label} | {len(api.writes())} | {len(outside)} | {len(report.left_behind)} | {secs:.2f} |")
        finally:
            probes.probing.guarded_toolset = keep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3, help="calls per tool of the naive baseline (the paper's N)")
    parser.add_argument("--spec", choices=[*SPECS, "rest", "mcp-text", "orchestrator", "redirects", "all"],
                        default="all")
    args = parser.parse_args()
    if args.spec in ("orchestrator", "all"):
        orchestrator_rows()
    if args.spec in ("redirects", "all"):
        redirect_rows()
    if args.spec in ("rest", "all"):
        rest_rows(args.n)
    if args.spec in ("mcp-text", "all"):
        mcp_text_rows(args.n)
    names = list(SPECS) if args.spec == "all" else [args.spec] if args.spec in SPECS else []
    for name in names:
        if not SPECS[name].exists():
            print(f"\n{name.upper()}: skipped (no RestBench data at {SPECS[name]})")
            continue
        truth = load_spec(SPECS[name])
        blind = blind_copy(SPECS[name])
        with MockServer(truth, keep_requests=100_000, auth=False) as mock:
            base = naive(blind, truth, mock.url, args.n)
            single = atc_probe(blind, truth, mock.url, "atc probe --no-llm --samples 1 (no extra samples)",
                               samples=1, cache=False)
            ours = atc_probe(blind, truth, mock.url, "atc probe --no-llm")
            again = atc_probe(blind, truth, mock.url, "atc probe --no-llm, again (cache)")
            assert len(mock.requests) == base.requests + single.requests + ours.requests + again.requests
        print(f"\n{name.upper()} ({len(blind.tools)} tools, {base.tools} safe to probe), atc mock on 127.0.0.1")
        print("| method | documented | requests | requests / documented tool | leaf-path recall (all) "
              "| recall (documented) | wall s |")
        print("|---|---|---|---|---|---|---|")
        for row in (base, single, ours, again):
            print(f"| {row.method} | {row.documented}/{row.tools} | {row.requests} | {row.per_tool:.2f} | "
                  f"{row.recall_all:.3f} | {row.recall_documented:.3f} | {row.seconds:.2f} |")
        print(f"ratios atc/naive: documented x{ours.documented / max(1, base.documented):.2f}, "
              f"requests per documented tool x{ours.per_tool / base.per_tool:.3f}, "
              f"recall (all) {ours.recall_all - base.recall_all:+.3f}")


if __name__ == "__main__":
    main()
