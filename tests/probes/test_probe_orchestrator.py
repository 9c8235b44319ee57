"""Probing a Prefect-like orchestrator (issue 30, items 2 and 3): a FastAPI-style server on 127.0.0.1
whose reads are POSTs with nested filter bodies, whose paths take names, whose POSTs upsert
(``tests/support/apis/orchestrator_fleet.py``). Every assertion is read from the server's own request log
and state, never from the report alone."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from probes import probe
from protocols import load_data
from tests.support.apis.orchestrator_fleet import FleetAPI
from tests.support.apis.redirecting import INITIAL, RedirectingStore

ATC = Path(sys.executable).with_name("atc")
SCOPE = {"work_pool_name": "atc-scratch", "key": "atc-scratch"}


def _probe(api: FleetAPI, **kw: Any) -> Any:
    return probe(load_data(api.spec(), source="orchestrator"), no_llm=True, cache=False,
                 on_event=lambda e, s: None, **kw)


def _writes(api: FleetAPI) -> list[tuple[str, str, Any]]:
    return [(m, p, b) for m, p, b in api.requests if m != "GET" and not p.endswith(("/filter", "/count"))]


def test_unsafe_probing_cleans_up_after_itself() -> None:
    with FleetAPI() as api:
        before = copy.deepcopy(api.data)
        report = _probe(api, allow_unsafe=True, scope=SCOPE)
        writes = _writes(api)
        after = copy.deepcopy(api.data)
        gets = [p for m, p, _ in api.requests if m == "GET"]
    # Nothing outside the scope changed and nothing the probe made is left: the state is as it was.
    assert after == before
    assert report.left_behind == [] and report.outside_scope == []
    # Every write is in the scope: the pinned pool (made first, deleted last), under it, or an artifact
    # of the pinned key, deleted by the id its 201 answer gave (not by the key).
    assert writes[0] == ("POST", "/api/work_pools/", {"name": "atc-scratch"})
    assert writes[-1][:2] == ("DELETE", "/api/work_pools/atc-scratch")
    created = [b for m, p, b in writes if m == "POST" and p == "/api/artifacts/"]
    assert created == [{"key": "atc-scratch"}]
    deleted_artifacts = [p for m, p, _ in writes if m == "DELETE" and p.startswith("/api/artifacts/")]
    assert len(deleted_artifacts) == 1 and deleted_artifacts[0] != "/api/artifacts/atc-scratch"
    for _, path, _ in writes:
        assert path.startswith(("/api/work_pools/atc-scratch", "/api/artifacts/")) or path == "/api/work_pools/", path
    # The queue is deleted by the name its path takes (not the uuid its create answered with); the
    # worker a heartbeat made is deleted too; both names are new and this run's own.
    queue = next(b["name"] for m, p, b in writes if p == "/api/work_pools/atc-scratch/queues")
    worker = next(b["name"] for m, p, b in writes if p.endswith("/workers/heartbeat"))
    assert queue.startswith("atc-probe-") and worker.startswith("atc-probe-") and queue != "atc-probe"
    assert ("DELETE", f"/api/work_pools/atc-scratch/queues/{queue}") in [(m, p) for m, p, _ in writes]
    assert ("DELETE", f"/api/work_pools/atc-scratch/workers/{worker}") in [(m, p) for m, p, _ in writes]
    # Pinned values are used for reads too: the pool is read by its pinned name once it exists
    # (the first GET is the probe asking whether it existed before creating it).
    assert gets.count("/api/work_pools/atc-scratch") >= 2
    assert report.tool("read_work_pool_work_pools_name_get").status == "documented"
    # Every step the plan made was sent and worked.
    assert report.writes and all(w["status"] == "done" for w in report.writes), report.writes


def test_a_second_identical_run_leaves_nothing_more_behind() -> None:
    with FleetAPI() as api:
        before = copy.deepcopy(api.data)
        first = _probe(api, allow_unsafe=True, scope=SCOPE)
        second = _probe(api, allow_unsafe=True, scope=SCOPE)
        after = copy.deepcopy(api.data)
        names = [b["name"] for m, p, b in api.requests if p.endswith(("/queues", "/heartbeat")) and m == "POST"]
    assert after == before and first.left_behind == [] and second.left_behind == []
    assert len(names) == 4 and len(set(names)) == 4  # a new name each run: no 409, no collision
    assert all(w["status"] == "done" for w in second.writes)


def test_what_an_upsert_made_is_listed_until_deleted() -> None:
    """Without a delete for workers, the worker a heartbeat registered stays: the report says so."""
    with FleetAPI() as api:
        spec = api.spec()
        del spec["paths"]["/work_pools/{work_pool_name}/workers/{name}"]
        report = probe(load_data(spec, source="orchestrator"), no_llm=True, cache=False, on_event=lambda e, s: None,
                       allow_unsafe=True, scope=SCOPE)
        workers = [w["name"] for w in api.data["workers"]]
        pools = [p["name"] for p in api.data["work_pools"]]
    made = [w for w in workers if w.startswith("atc-probe-")]
    # the pool holding it was the probe's own and is gone with it; the report lists the worker
    assert "atc-scratch" not in pools and len(made) <= 1
    said = [x for x in report.left_behind if "worker" in x]
    assert said and "atc-probe-" in said[0] and "nothing in the plan deletes it" in said[0]


def test_a_pinned_pool_that_exists_is_used_and_never_deleted() -> None:
    with FleetAPI() as api:
        api.data["work_pools"].append({**api.data["work_pools"][0], "name": "atc-scratch", "id": "pool-of-mine"})
        api.data["work_queues"].append({**api.data["work_queues"][0], "work_pool_name": "atc-scratch",
                                        "id": "queue-of-mine", "name": "keep-me"})
        before = copy.deepcopy(api.data)
        report = _probe(api, allow_unsafe=True, scope=SCOPE)
        writes = _writes(api)
        after = copy.deepcopy(api.data)
    assert ("POST", "/api/work_pools/", {"name": "atc-scratch"}) not in writes  # asked first: it exists
    assert not any(m == "DELETE" and p == "/api/work_pools/atc-scratch" for m, p, _ in writes)
    assert not any("keep-me" in p for _, p, _ in writes)
    assert {k: v for k, v in after.items() if k != "work_pools"} == \
        {k: v for k, v in before.items() if k != "work_pools"}  # its queue created and deleted again
    assert [p["name"] for p in after["work_pools"]] == [p["name"] for p in before["work_pools"]]
    assert report.left_behind == []


# -- reads by POST (item 3) -----------------------------------------------------------------------


def test_reads_by_post_wait_for_a_word_from_the_user() -> None:
    with FleetAPI() as api:
        report = _probe(api)
        posts = [p for m, p, _ in api.requests if m != "GET"]
    assert posts == []  # a read-only probe sends no POST: a name is not proof enough
    skipped = report.tool("read_flows_flows_filter_post")
    assert skipped.status == "skipped" and "looks like a read" in skipped.reason
    assert "--read-only read_flows_flows_filter_post" in skipped.reason and "--allow-unsafe" in skipped.reason


def test_reads_by_post_marked_read_only_are_probed_like_gets() -> None:
    with FleetAPI() as api:
        before = copy.deepcopy(api.data)
        report = _probe(api, read_only=("*_filter_post", "*_count_post"))
        posts = [p for m, p, _ in api.requests if m != "GET"]
        after = copy.deepcopy(api.data)
    assert posts and all(p.endswith(("/filter", "/count")) for p in posts)
    assert after == before
    for name in ("read_flows_flows_filter_post", "count_flow_runs_flow_runs_count_post",
                 "read_work_pools_work_pools_filter_post", "read_artifacts_artifacts_filter_post"):
        assert report.tool(name).status == "documented", (name, report.tool(name).reason)
    # what they answered feeds the reads by id and by name
    assert report.tool("read_flow_flows_id_get").status == "documented"
    assert report.tool("read_work_pool_work_pools_name_get").status == "documented"
    with pytest.raises(Exception, match="matches no tool"):
        _probe(api, read_only=("no_such_*",))


def test_recognised_reads_by_post_stay_in_the_scope() -> None:
    with FleetAPI() as api:
        report = _probe(api, allow_unsafe=True, scope=SCOPE)
        posts = [(p, b) for m, p, b in api.requests if m == "POST"]
        polled = [q["last_polled"] for q in api.data["work_queues"]]
    documented = {t.name for t in report.tools if t.status == "documented"}
    assert {"read_flows_flows_filter_post", "count_flows_flows_count_post", "read_flow_runs_flow_runs_filter_post",
            "read_work_queues_work_pools_work_pool_name_queues_filter_post",
            "read_workers_work_pools_work_pool_name_workers_filter_post"} <= documented
    # A read by POST whose path names a pool names the pinned one, never one of the user's.
    in_pools = [p for p, _ in posts if p.startswith("/api/work_pools/") and p.count("/") > 3]
    assert in_pools and all(p.startswith("/api/work_pools/atc-scratch/") for p in in_pools)
    # A POST named like a read that polls (get_runs records last_polled) is not taken for one.
    assert not any(p.endswith("/get_runs") for p, _ in posts) and polled == [None] * len(polled)
    assert "get_runs" not in json.dumps([t.name for t in report.tools if t.status == "documented"])


def test_the_dry_run_shows_the_evidence_of_each_read_by_post(tmp_path: Path) -> None:
    with FleetAPI() as api:
        spec = api.write_spec(tmp_path / "orchestrator.json")
        done = subprocess.run([str(ATC), "probe", str(spec), "--dry-run", "--no-llm"], capture_output=True, text=True,
                              timeout=120, env=os.environ)
        assert api.requests == []
    assert done.returncode == 0, done.stderr
    plan = done.stderr
    head = plan.index("reads by POST, probed as reads")
    lines = plan[head:].splitlines()[1:]
    listed = lines[: next(i for i, line in enumerate(lines) if not line.startswith("  "))]
    assert any("read_flows_flows_filter_post" in line and "the path ends in 'filter'" in line for line in listed)
    assert any("count_flows_flows_count_post" in line and "'count'" in line for line in listed)
    assert all("--allow-unsafe" in line for line in listed)
    assert not any("get_runs" in line for line in listed)


def test_a_read_by_post_never_follows_a_redirect_to_another_path() -> None:
    """A search by POST answers 307 towards the collection it searches: following it with the POST
    kept would create an item in the user's bucket."""
    def away(method: str, path: str) -> tuple[int, str] | None:
        if method == "POST" and path.endswith("/items/search"):
            return 307, "/buckets/prod/items"
        return None

    for kw in ({"allow_unsafe": True, "scope": {"bucket_id": "throwaway"}}, {"read_only": ("search_items",)}):
        with RedirectingStore(redirect=away) as api:
            report = probe(load_data(api.spec(), source="buckets"), no_llm=True, cache=False,
                           on_event=lambda e, s: None, **kw)
            posts = [p for m, p, _ in api.log if m == "POST"]
            data = copy.deepcopy(api.data)
        assert any(p.endswith("/items/search") for p in posts), (kw, posts)
        assert "/buckets/prod/items" not in posts and data["prod"] == INITIAL["prod"], (kw, posts)
        refused = [h for h in report.outside_scope if h["tool"] == "search_items"]
        assert refused and all(h["hop"] == 1 for h in refused)


# -- what a probe writes (item 4) ------------------------------------------------------------------


def test_the_written_document_keeps_refs_and_components_and_reads_back(tmp_path: Path) -> None:
    from probes.results.outputs import learnt_collection
    from protocols import load_spec

    with FleetAPI() as api:
        spec = api.spec()
        original = load_data(spec, source="orchestrator")
        report = probe(original, no_llm=True, cache=False, on_event=lambda e, s: None, out=tmp_path,
                       allow_unsafe=True, scope=SCOPE)
    written = (tmp_path / "openapi.json").read_text()
    doc = json.loads(written)
    served = len(json.dumps(spec, indent=1))
    assert len(written) < 2 * served, (len(written), served)  # with examples and what was learnt
    components = doc["components"]["schemas"]
    assert {"FlowRunFilter", "WorkPoolFilter", "FlowRunFilterState", "WorkPool", "FlowRun"} <= set(components)
    body = doc["paths"]["/flow_runs/filter"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"]["flow_runs"]["anyOf"][0] == {"$ref": "#/components/schemas/FlowRunFilter"}
    assert max(len(json.dumps(op)) for item in doc["paths"].values() for op in item.values()) < 8_000
    # atc tools import reads back the tools the probe documented, schemas and all
    again = load_spec(tmp_path / "openapi.json")
    learnt = learnt_collection(original, report)
    for before, after in zip(learnt.tools, again.tools, strict=True):
        assert (after.name, after.parameters, after.response_schema) == \
            (before.name, before.parameters, before.response_schema)


def test_the_page_lists_the_tools_not_documented_once_and_briefly(tmp_path: Path) -> None:
    with FleetAPI() as api:
        report = _probe(api, out=tmp_path, read_only=("*_count_post",))  # most tools are not probed
    page = (tmp_path / "probe.md").read_text()
    documented = [t.name for t in report.tools if t.status == "documented"]
    undone = [t.name for t in report.tools if t.status != "documented"]
    assert documented and len(undone) > len(documented)
    sections = [line[3:] for line in page.splitlines() if line.startswith("## ")]
    assert sections == ["Dependencies", *documented, "Not documented"]
    listing = page[page.index("## Not documented"):]
    assert all(listing.count(f"`{name}`") == 1 for name in undone)
    assert len(listing.splitlines()) < len(undone) and len(listing) < 150 * len(undone)


def test_an_upsert_that_answers_201_with_an_object_seen_before_is_not_deleted() -> None:
    """A sloppy artifact store answers a create with 201 and an artifact that already existed (one
    its search had shown): the probe cannot show it made it, so it deletes nothing of it."""
    class Sloppy(FleetAPI):
        def _create_artifact(self, args: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
            return 201, self.data["artifacts"][0]

    with Sloppy() as api:
        before = copy.deepcopy(api.data)
        report = _probe(api, allow_unsafe=True, scope=SCOPE)
        deleted = [p for m, p, _ in api.requests if m == "DELETE" and p.startswith("/api/artifacts/")]
        after = copy.deepcopy(api.data)
    assert deleted == [] and after["artifacts"] == before["artifacts"]
    said = [x for x in report.left_behind if "artifact" in x]
    assert said and "nothing shows it did not exist before" in said[0]
