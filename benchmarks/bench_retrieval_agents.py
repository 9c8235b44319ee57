"""What the model-backed retrievers cost, on the StableToolBench pool (2,490 APIs, 814 tools, 49
categories; the largest real pool we have).

No real model is available here, so the model is the scripted OpenAI-compatible server of the
tests, on 127.0.0.1, and what is measured is cost and mechanics, not quality:

1. AnyTool with an ORACLE model: the meta-agent creates the gold categories, each category agent
   the gold tools, each tool agent adds the gold APIs and asks ``check_if_request_solvable``
   (answered yes). This is the cheapest run the hierarchy allows for a query: model requests and
   tokens (the scripted server counts characters / 4) per query, host time per query, and the
   recall of the pool (1.0 says the mechanics carried every gold API through). Baseline in the
   same run: BM25 over the same pool (time per query and recall@5, @20).
2. Re-Invoke: the index cost (requests and tokens to write 5 queries for every API, 8 APIs per
   request) and search time per query with the views in place, against BM25 in the same run.
   The scripted model writes "oracle-free" queries (made of the API's own name and description)
   and returns the request as its only intent, so the ranking adds nothing over BM25 here:
   quality needs a real model.

    .venv/bin/python benchmarks/bench_retrieval_agents.py [--queries N]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from atc.llm.openai_http import HttpChatModel  # noqa: E402
from atc.retrieval.anytool import AnyTool  # noqa: E402
from atc.retrieval.corpus import MemoryCorpus  # noqa: E402
from atc.retrieval.hybrid import Bm25Retriever  # noqa: E402
from atc.retrieval.queries import QueryStore, generate  # noqa: E402
from atc.retrieval.reinvoke import ReInvoke  # noqa: E402
from protocols.loaders import load_spec  # noqa: E402
from protocols.model import Tool, python_identifier  # noqa: E402
from tests.support.fakes.openai_server import Reply, ScriptedOpenAI, call  # noqa: E402

DATA = ROOT.parent / "shared" / "bench-data" / "toolbench" / "stabletoolbench" / "solvable_queries" / "test_instruction"
FILES = ["G1_instruction", "G1_category", "G1_tool", "G2_instruction", "G2_category", "G3_instruction"]


def pool() -> tuple[list[Tool], list[dict[str, Any]]]:
    tools: dict[tuple[str, str, str], Tool] = {}
    queries: list[dict[str, Any]] = []
    for name in FILES:
        path = DATA / f"{name}.json"
        for t in load_spec(path, name="stb").tools:
            tools.setdefault((t.category, t.group, t.name), t)
        queries += json.loads(path.read_text())
    return list(tools.values()), queries


def gold(query: dict[str, Any], by_group: dict[str, list[Tool]]) -> list[Tool]:
    out = []
    for tool_name, api_name in query.get("relevant APIs") or []:
        want = python_identifier(f"{api_name}_for_{tool_name}")
        found = [t for t in by_group.get(tool_name, []) if t.name == want or t.name.startswith(want)]
        if found:
            out.append(found[0])
    return out


def kind(body: dict[str, Any]) -> str:
    first = str(body["messages"][0].get("content") or "")
    for marker, label in (("meta-agent", "meta"), ("category agent", "category"), ("tool agent", "tool"),
                          ("Can the query be fully answered", "judge")):
        if marker in first:
            return label
    return "other"


def oracle(golds: dict[str, list[Tool]]) -> Any:
    """The cheapest scripted agent run: gold categories, gold tools, gold APIs, then done."""
    def route(body: dict[str, Any]) -> Reply | str:
        who = kind(body)
        if who == "judge":
            return "yes"
        query = next(m["content"][len("Query: "):] for m in body["messages"] if m["role"] == "user")
        want = golds[query]
        turn = 1 + sum(1 for m in body["messages"] if m["role"] == "assistant")
        first = str(body["messages"][0]["content"])
        if who == "meta":
            if turn > 1:
                return Reply(tool_calls=(call("finish_search"),))
            cats = sorted({t.category for t in want})
            return Reply(tool_calls=tuple(call("create_agent_category_level", {"category": c}) for c in cats))
        if who == "category":
            if turn > 1:
                return Reply(tool_calls=(call("finish_search"),))
            cat = re.search(r'category is\s+"([^"]+)"', first).group(1)  # type: ignore[union-attr]
            groups = sorted({t.group for t in want if t.category == cat})
            return Reply(tool_calls=tuple(call("create_agent_tool_level", {"tools": groups[i:i + 5]})
                                          for i in range(0, len(groups), 5)))
        groups = re.search(r"look after the tools\s+(.+?) of the category", first, re.S).group(1).split(", ")  # type: ignore[union-attr]
        if turn == 1:
            return Reply(tool_calls=(call("add_API_into_API_pool",
                                          {"apis": [t.name for t in want if t.group in groups]}),))
        if turn == 2:
            return Reply(tool_calls=(call("check_if_request_solvable"),))
        return Reply(tool_calls=(call("finish_search"),))
    return route


def generic_queries(body: dict[str, Any]) -> Reply | str:
    text = str(body["messages"][-1]["content"])
    if "Extract the underlying intents" in text:
        return text.rsplit("Request: ", 1)[1].split("\nIntents:")[0]
    out = []
    for number, doc in re.findall(r"### (\d+)\n(.+?)(?=\n### |\n\nAnswer with)", text, re.S):
        words = " ".join(doc.split())[:160]
        out += [f"{number}: {words}"] * 5
    return "\n".join(out)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=60)
    args = ap.parse_args()
    tools, queries = pool()
    by_group: dict[str, list[Tool]] = {}
    for t in tools:
        by_group.setdefault(t.group, []).append(t)
    sample = [q for q in queries[:: max(1, len(queries) // args.queries)] if gold(q, by_group)][: args.queries]
    golds = {q["query"]: gold(q, by_group) for q in sample}
    print(f"pool: {len(tools)} APIs, {len(by_group)} tools, {len({t.category for t in tools})} categories; "
          f"{len(sample)} queries, {statistics.mean(len(g) for g in golds.values()):.2f} gold APIs each")

    # BM25 baseline (atc's BM25F with chain-aware expansion), same pool, same queries
    index = Bm25Retriever(MemoryCorpus(tools))
    index.search(sample[0]["query"], 20)  # the lexical index is built on first use: not timed
    by_key = {(t.collection, t.name): t for t in tools}
    bm25_ms, r5, r20 = [], [], []
    for q in sample:
        started = time.perf_counter()
        top = [by_key[(h.collection, h.name)] for h in index.search(q["query"], 20).hits]
        bm25_ms.append((time.perf_counter() - started) * 1000)
        g = {(t.group, t.name) for t in golds[q["query"]]}
        r5.append(len(g & {(t.group, t.name) for t in top[:5]}) / len(g))
        r20.append(len(g & {(t.group, t.name) for t in top}) / len(g))
    print(f"BM25: p50 {statistics.median(bm25_ms):.2f} ms/query, recall@5 {statistics.mean(r5):.3f}, "
          f"recall@20 {statistics.mean(r20):.3f}")

    # AnyTool, oracle model
    with ScriptedOpenAI(router=oracle(golds)) as server:
        client = HttpChatModel("scripted", base_url=server.base_url, max_retries=0)
        calls_, prompt, completion, wall, recall, agents = [], [], [], [], [], []
        for q in sample:
            retriever = AnyTool(tools, client)
            started = time.perf_counter()
            result = retriever.search(q["query"])
            wall.append((time.perf_counter() - started) * 1000)
            calls_.append(result.usage["llm_calls"])
            prompt.append(result.usage["prompt_tokens"])
            completion.append(result.usage["completion_tokens"])
            agents.append(len(retriever.agents))
            g = {(t.group, t.name) for t in golds[q["query"]]}
            recall.append(len(g & {(h.collection and t.group, h.name) for h in result.hits
                                   for t in tools if t.name == h.name and t.collection == h.collection}) / len(g))
        client.close()
    print(f"AnyTool (oracle model): {statistics.mean(calls_):.1f} requests/query (max {max(calls_)}), "
          f"{statistics.mean(agents):.1f} agents, {statistics.mean(prompt):.0f} prompt + "
          f"{statistics.mean(completion):.0f} completion tokens/query (chars/4), pool recall "
          f"{statistics.mean(recall):.3f}; host+loopback p50 {statistics.median(wall):.1f} ms, p95 "
          f"{pct(wall, 0.95):.1f} ms/query = {statistics.median(wall) / statistics.median(bm25_ms):.1f}x BM25")

    # Re-Invoke: index cost, then search time
    with tempfile.TemporaryDirectory() as home, ScriptedOpenAI(router=generic_queries) as server:
        client = HttpChatModel("scripted", base_url=server.base_url, max_retries=0)
        started = time.perf_counter()
        report = generate(tools, client, QueryStore(home), per_tool=5, batch=8, concurrency=4)
        gen_s = time.perf_counter() - started
        print(f"Re-Invoke index: {report.tools} APIs, {report.usage['llm_calls']} requests "
              f"(ceil({report.tools}/8) = {math.ceil(report.tools / 8)}), {report.usage['prompt_tokens']} prompt + "
              f"{report.usage['completion_tokens']} completion tokens ({report.usage['prompt_tokens'] / report.tools:.0f}"
              f" prompt tokens per API), {gen_s:.1f} s host+loopback; failed {report.failed}")
        started = time.perf_counter()
        again = generate(tools, client, QueryStore(home), per_tool=5)
        print(f"Re-Invoke index, second run: {again.cached} cached, {again.usage['llm_calls']} requests, "
              f"{(time.perf_counter() - started) * 1000:.0f} ms")
        retriever = ReInvoke(tools, client=client, home=home, generate_missing=0)
        started = time.perf_counter()
        retriever.search("warm up", k=5)
        build_ms = (time.perf_counter() - started) * 1000
        ms, rr5 = [], []
        for q in sample:
            started = time.perf_counter()
            result = retriever.search(q["query"], k=5)
            ms.append((time.perf_counter() - started) * 1000)
            g = {t.name for t in golds[q["query"]]}
            rr5.append(len(g & {h.name for h in result.hits}) / len(g))
        client.close()
    print(f"Re-Invoke search (BM25 views, {len(tools) * 6} views): first search {build_ms:.0f} ms (reads the "
          f"stored queries), then p50 {statistics.median(ms):.1f} ms/query incl. one loopback request = "
          f"{statistics.median(ms) / statistics.median(bm25_ms):.1f}x BM25; recall@5 {statistics.mean(rr5):.3f} "
          "(oracle-free model: not a quality number)")


if __name__ == "__main__":
    main()
