"""The public retrieval sets of benchmarks/bench_retrieval.py, read from ../shared/bench-data.

Each set is a tool pool (``Tool`` objects, keyed by ``(collection, name)``) and queries with
their gold tools. The dev split (used to choose the fusion settings) is every query whose
blake2b hash of the text is 0 modulo 5 (about 20%); the rest is the test split.
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from protocols.loaders import load_spec
from protocols.model import Tool
from protocols.toolbench import ToolBenchLoader

DATA = Path(__file__).resolve().parent.parent / ".." / "shared" / "bench-data"


@dataclass
class Query:
    text: str
    gold: set[tuple[str, str]]

    @property
    def dev(self) -> bool:
        return hashlib.blake2b(self.text.encode(), digest_size=4).digest()[0] % 5 == 0


@dataclass
class RetrievalSet:
    name: str
    tools: list[Tool]
    queries: list[Query]


def _sample(queries: list[Query], limit: int | None) -> list[Query]:
    """A fixed subset by hash of the text (the same on every run), when ``limit`` is given."""
    if limit is None or len(queries) <= limit:
        return queries
    return sorted(queries, key=lambda q: hashlib.blake2b(q.text.encode(), digest_size=8).digest())[:limit]


def toole(limit: int | None = None) -> tuple[RetrievalSet, RetrievalSet]:
    root = DATA / "toole"
    described = json.loads((root / "plugin_des.json").read_text())
    tools = [Tool(name=name, collection="toole", description=desc) for name, desc in described.items()]
    single: list[Query] = []
    seen: set[str] = set()
    with open(root / "data" / "all_clean_data.csv", newline="") as f:
        for row in csv.DictReader(f):
            text, tool = row["Query"].strip(), row["Tool"].strip()
            if text in seen or tool not in described:  # repeated strings: the first label counts
                continue
            seen.add(text)
            single.append(Query(text, {("toole", tool)}))
    multi = [Query(q["query"], {("toole", t) for t in q["tool"]})
             for q in json.loads((root / "data" / "multi_tool_query_golden.json").read_text())]
    return RetrievalSet("ToolE single", tools, _sample(single, limit)), RetrievalSet("ToolE multi", tools, multi)


def toolbench() -> RetrievalSet:
    folder = DATA / "toolbench" / "stabletoolbench" / "solvable_queries" / "test_instruction"
    apis: dict[tuple[str, str], dict[str, object]] = {}
    raw: list[tuple[str, list[tuple[str, str]]]] = []
    for path in sorted(folder.glob("*.json")):
        for q in json.loads(path.read_text()):
            for api in q["api_list"]:
                apis.setdefault((api["tool_name"], api["api_name"]), api)
            raw.append((q["query"], [(t, a) for t, a in q["relevant APIs"]]))
    keys = list(apis)
    # The loader keeps first-seen order and skips repeats of (category, tool, api): one tool per key.
    collection = ToolBenchLoader().load([{"api_list": [apis[k] for k in keys]}], source="bench", name="toolbench")
    by_key = {k: ("toolbench", t.name) for k, t in zip(keys, collection.tools, strict=True)}
    queries = [Query(text, {by_key[g] for g in gold if g in by_key}) for text, gold in raw]
    return RetrievalSet("ToolBench", collection.tools, [q for q in queries if q.gold])


def restbench(which: str) -> RetrievalSet:
    root = DATA / "restbench"
    collection = load_spec(root / "specs" / f"{which}_oas.json", name=which)
    by_op = {(t.method.upper(), t.path): (which, t.name) for t in collection.tools}
    fixes = {"/person/{movie_id}/movie_credits": "/person/{person_id}/movie_credits", "/track/{id}": "/tracks/{id}"}
    queries = []
    for q in json.loads((root / "datasets" / f"{which}.json").read_text()):
        gold = set()
        for step in q["solution"]:
            method, _, path = step.strip().partition(" ")
            path = fixes.get(path.strip(), path.strip())
            if (method.upper(), path) in by_op:
                gold.add(by_op[(method.upper(), path)])
        if gold:
            queries.append(Query(q["query"], gold))
    label = {"tmdb": "TMDB", "spotify": "Spotify"}[which]
    return RetrievalSet(label, collection.tools, queries)


def toolalpaca() -> RetrievalSet:
    """ToolAlpaca's evaluation APIs (11 real, 10 simulated) as one pool of their functions, and
    their 214 instructions with the golden actions as gold. Held out: never used to choose a
    setting (it was added after every choice in benchmarks/RESULTS.md was made)."""
    import tempfile

    root = DATA / "toolalpaca" / "data"
    tools: list[Tool] = []
    queries: list[Query] = []
    with tempfile.TemporaryDirectory() as tmp:
        for part in ("eval_real", "eval_simulated"):
            for n, api in enumerate(json.loads((root / f"{part}.json").read_text())):
                spec = Path(tmp) / f"{part}-{n}.json"
                spec.write_text(api["Documentation"])
                try:
                    collection = load_spec(spec, name=f"{part.split('_')[1]}{n}")
                except Exception:  # a spec our importer refuses: its API leaves the set
                    continue
                by_op = {(t.method.upper(), t.path): (t.collection, t.name) for t in collection.tools}
                names = {fn: by_op.get((method.upper(), path)) for fn, (path, method) in api["Function_Projection"].items()}
                tools.extend(collection.tools)
                for text, answer in zip(api["Instructions"], api["Golden_Answers"], strict=False):
                    gold = {names[a["Action"]] for a in answer if names.get(a["Action"])}
                    if gold:
                        queries.append(Query(text, {g for g in gold if g is not None}))
    return RetrievalSet("ToolAlpaca (held out)", tools, queries)


def all_sets(toole_limit: int | None = None, *, held_out: bool = True) -> list[RetrievalSet]:
    single, multi = toole(toole_limit)
    sets = [single, multi, toolbench(), restbench("tmdb"), restbench("spotify")]
    return sets + [toolalpaca()] if held_out else sets


def stripped_and_probed(which: str) -> tuple[RetrievalSet, RetrievalSet, int]:
    """RestBench ``which`` twice more, with the same requests and gold: its spec with every
    response schema and example removed, and that copy after ``atc probe --no-llm`` against
    ``atc mock`` serving the original (what probing learnt about the responses, as ``--update``
    stores it); and how many tools probing documented."""
    import json as _json
    import os
    import tempfile

    from atc.mock import MockServer
    from probes import probe
    from probes.results.outputs import learnt_collection
    from protocols import load_data

    original = restbench(which)
    doc = _json.loads((DATA / "restbench" / "specs" / f"{which}_oas.json").read_text())
    responses = [r for item in doc["paths"].values() for op in item.values()
                 if isinstance(op, dict) and isinstance(op.get("responses"), dict) for r in op["responses"].values()]
    responses += list(((doc.get("components") or {}).get("responses") or {}).values())
    for response in responses:
        if isinstance(response, dict):
            for key in ("content", "schema", "examples"):
                response.pop(key, None)
    blind = load_data(doc, source=f"{which}-stripped", name=which)
    assert all(t.response_schema is None and not t.examples for t in blind.tools)
    truth = load_spec(DATA / "restbench" / "specs" / f"{which}_oas.json", name=which)
    home = os.environ.get("ATC_HOME")
    os.environ["ATC_HOME"] = tempfile.mkdtemp(prefix="atc-bench-probe-")  # the probe's cache: a fresh one
    try:
        with MockServer(truth, keep_requests=100_000, auth=False) as mock:
            report = probe(blind, base_url=mock.url, no_llm=True)
    finally:
        if home is None:
            os.environ.pop("ATC_HOME", None)
        else:
            os.environ["ATC_HOME"] = home
    probed = learnt_collection(blind, report)
    label = original.name
    documented = sum(1 for t in report.tools if t.status == "documented")
    return (RetrievalSet(f"{label} stripped", blind.tools, original.queries),
            RetrievalSet(f"{label} probed", probed.tools, original.queries), documented)
