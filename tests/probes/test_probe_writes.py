"""``atc probe --allow-unsafe`` against a store that holds data worth losing (tests/support/apis/store.py):
every assertion is read from the server's own request log and final state, never from the report.

The user's data: their account (the probe's login), a bucket they care about with a collection of
records and a group, another user's bucket. The probe may write only under ``--scope
bucket_id=throwaway``. Bulk deletes (``DELETE /accounts`` would delete the login, ``DELETE
/buckets`` every bucket) are never sent unless named with ``--allow-bulk``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probes import probe
from protocols import load_data
from tests.support.apis.store import PASSWORD, USER, StoreAPI
from tests.support.fakes.serving import QuietHandler, serving

ATC = Path(sys.executable).with_name("atc")
CRED = {"basicAuth": "env:STORE_AUTH"}
SCOPE = {"bucket_id": "throwaway"}


@pytest.fixture()
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[StoreAPI]:
    monkeypatch.setenv("STORE_AUTH", f"{USER}:{PASSWORD}")
    with StoreAPI() as api:
        yield api


def _probe(api: StoreAPI, said: list[str] | None = None, **kw: Any) -> Any:
    def hook(event: str, state: Any) -> None:
        if event == "unsafe" and said is not None:
            said.append(state.notice)

    kw.setdefault("credentials", CRED)
    return probe(load_data(api.spec(), source="store"), no_llm=True, on_event=hook, cache=False, **kw)


def _ids(path: str) -> list[str]:
    parts = path.strip("/").split("/")
    return parts[1::2]


def test_unsafe_probing_writes_only_under_the_scope_and_deletes_only_what_it_created(store: StoreAPI) -> None:
    before = store.snapshot()
    said: list[str] = []
    report = _probe(store, said, allow_unsafe=True, scope=SCOPE)
    writes = store.writes()
    assert writes, "the probe sent no write at all"
    # 1. Every write, as the server saw it, is in the pinned bucket (or is that bucket itself).
    assert all(w.path == "/buckets/throwaway" or w.path.startswith("/buckets/throwaway/") for w in writes), writes
    # 2. No bulk delete (a path that ends on a collection, not an id), no flush, no account touched.
    deletes = [w for w in writes if w.method == "DELETE"]
    assert deletes and all(len(w.path.strip("/").split("/")) % 2 == 0 for w in deletes)
    assert not any("/accounts" in w.path or "__flush__" in w.path for w in store.log if w.method != "GET")
    # 3. No made-up ids: every id in a write is the pinned one or one the server handed out to this probe.
    created = ["throwaway"] + [w.created for w in writes if w.created]
    assert all(i in created for w in writes for i in _ids(w.path)), [w.path for w in writes]
    # 4. Deletes only of what the probe created (the server answered 201 for it), newest first.
    deleted = [_ids(w.path)[-1] for w in deletes]
    made = [w.created for w in writes if w.created]
    assert sorted(deleted) == sorted(made) and deleted == [i for i in reversed(made) if i in deleted]
    # 5. Creates, then updates, then deletes.
    kinds = ["create" if w.created else "delete" if w.method == "DELETE" else "update" for w in writes]
    assert kinds == sorted(kinds, key=["create", "update", "delete"].index), kinds
    # 6. Each write was said before it was sent, in the same order, naming the request.
    assert len(said) == len(writes)
    for line, w in zip(said, writes, strict=True):
        assert f"{w.method} {w.path}" in line, (line, w)
    assert [x["says"] for x in report.writes if x["status"] in ("done", "failed")] == said
    # 7. Nothing outside the scope changed, and the probe cleaned up after itself.
    assert store.snapshot() == before
    assert report.left_behind == [] and report.stopped is None
    for name in ("delete_accounts", "delete_buckets", "delete_collections", "delete_records", "flush"):
        tool = report.tool(name)
        assert tool.status == "skipped" and tool.calls == 0, (name, tool.reason)
    assert "--allow-bulk delete_accounts" in report.tool("delete_accounts").reason


def test_unsafe_probing_documents_at_least_what_a_read_only_probe_does(store: StoreAPI) -> None:
    reads = _probe(store)
    assert not store.writes()
    with StoreAPI() as fresh:
        unsafe = _probe(fresh, allow_unsafe=True, scope=SCOPE)
    read_only = {t.name for t in reads.tools if t.status == "documented"}
    documented = {t.name for t in unsafe.tools if t.status == "documented"}
    assert read_only <= documented and len(documented) > len(read_only)
    assert {"create_collection", "patch_record", "delete_record", "delete_bucket"} <= documented
    # The example of a delete chains from the create that made its object.
    program = unsafe.tool("delete_collection").examples[0]["program"]
    assert "create_collection(" in program and "delete_collection(" in program


def test_a_pinned_object_that_existed_is_never_deleted(store: StoreAPI) -> None:
    store.state["children"]["buckets"]["throwaway"] = {
        "attrs": {"id": "throwaway", "title": "mine"},
        "children": {"collections": {"keep": {"attrs": {"id": "keep"}, "children": {"records": {}}}}}}
    before = store.snapshot()
    report = _probe(store, allow_unsafe=True, scope=SCOPE)
    methods = [(w.method, w.path, w.status) for w in store.writes()]
    # asked first (GET answered 200): the create is not sent at all, and the bucket is never deleted
    asked = [i for i, r in enumerate(store.log) if (r.method, r.path, r.status) == ("GET", "/buckets/throwaway", 200)]
    assert asked and asked[0] < store.log.index(store.writes()[0])
    assert not any(m == "PUT" and p == "/buckets/throwaway" for m, p, _ in methods)
    assert not any(m == "DELETE" and p == "/buckets/throwaway" for m, p, _ in methods)
    assert not any("/keep" in p for _, p, _ in methods)
    after = store.snapshot()
    assert after["children"]["buckets"]["throwaway"]["children"]["collections"] == \
        before["children"]["buckets"]["throwaway"]["children"]["collections"]
    assert {k: v for k, v in after["children"].items() if k != "buckets"} == \
        {k: v for k, v in before["children"].items() if k != "buckets"}
    assert after["children"]["buckets"]["main"] == before["children"]["buckets"]["main"]
    step = next(x for x in report.writes if x["tool"] == "delete_bucket")
    assert step["status"] == "not sent" and "existed before" in step["result"]
    assert report.left_behind == []  # the user's bucket is not something the probe left behind


def test_a_201_for_a_bucket_that_existed_does_not_get_it_deleted(store: StoreAPI) -> None:
    """A sloppy store answers ``PUT`` with 201 whether or not the bucket was there (and ignores
    ``If-None-Match``): the probe deletes only what it can show it created."""
    store.sloppy_puts = True
    store.state["children"]["buckets"]["throwaway"] = {"attrs": {"id": "throwaway", "title": "mine"}, "children": {}}
    _probe(store, allow_unsafe=True, scope=SCOPE)
    assert "throwaway" in store.snapshot()["children"]["buckets"]
    assert not any(w.method == "DELETE" and w.path == "/buckets/throwaway" for w in store.writes())
    # Without a read to ask first, the 201 is taken at its word for nothing: the bucket stays, and
    # the report says why.
    spec = store.spec()
    del spec["paths"]["/buckets/{bucket_id}"]["get"]
    with StoreAPI(sloppy_puts=True) as fresh:
        fresh.state["children"]["buckets"]["throwaway"] = {"attrs": {"id": "throwaway"}, "children": {}}
        report = probe(load_data({**spec, "host": fresh.url.split("//")[1]}, source="store"), no_llm=True,
                       credentials=CRED, cache=False, allow_unsafe=True, scope=SCOPE, on_event=lambda e, s: None)
        assert ("PUT", "/buckets/throwaway", 201) in [(w.method, w.path, w.status) for w in fresh.writes()]
        assert "throwaway" in fresh.snapshot()["children"]["buckets"]
        assert not any(w.method == "DELETE" and w.path == "/buckets/throwaway" for w in fresh.writes())
    said = [x for x in report.left_behind if "'throwaway'" in x]
    assert said and "nothing shows it did not exist before" in said[0]


def test_a_bulk_delete_is_sent_only_when_named(store: StoreAPI) -> None:
    before = store.snapshot()
    report = _probe(store, allow_unsafe=True, scope=SCOPE, allow_bulk=("delete_records",))
    bulk = [w for w in store.writes() if w.method == "DELETE" and w.path.endswith("/records")]
    assert len(bulk) == 1 and bulk[0].path.startswith("/buckets/throwaway/collections/")
    # ...inside the collection the probe created, before that collection is deleted
    order = [w.path for w in store.writes() if w.method == "DELETE"]
    collection = bulk[0].path.rsplit("/", 1)[0]
    assert order.index(bulk[0].path) < order.index(collection)
    assert store.snapshot()["children"]["buckets"]["main"] == before["children"]["buckets"]["main"]
    assert report.tool("delete_records").status == "documented"


def test_a_credential_that_stops_working_stops_the_probe(store: StoreAPI) -> None:
    with StoreAPI() as first:  # how many reads come before the first write
        _probe(first, allow_unsafe=True, scope=SCOPE)
        reads = first.log.index(first.writes()[0])
    assert reads >= 4
    store.expire_after = reads - 1  # the token expires before the first write (the read that asks first)
    report = _probe(store, allow_unsafe=True, scope=SCOPE)
    refused = [i for i, r in enumerate(store.log) if r.status == 401]
    assert refused
    # After the first refusal: the canary asked again (at most two), then nothing more.
    assert len(store.log) - refused[0] <= 3, [(r.method, r.path, r.status) for r in store.log]
    assert report.stopped and "credential that worked is refused now" in report.stopped
    assert report.note and "refused now" in report.note
    assert not store.writes()  # the writes come after the reads: none was sent with a dead credential
    pending = [t for t in report.tools if t.status == "skipped" and t.reason and "refused now" in t.reason]
    assert pending


def test_a_credential_lost_during_the_writes_stops_them_and_says_what_is_left(store: StoreAPI) -> None:
    def expire_soon(event: str, state: Any) -> None:
        if event == "unsafe" and store.expire_after is None:
            store.expire_after = len(store.log) + 2  # the login dies after the second write

    report = probe(load_data(store.spec(), source="store"), no_llm=True, credentials=CRED, cache=False,
                   allow_unsafe=True, scope=SCOPE, on_event=expire_soon)
    writes = store.writes()
    assert [w.status for w in writes][:2] == [201, 201] and all(w.status == 401 for w in writes[2:])
    assert len(writes) == 3 and store.log[-1].method == "GET"  # one refused write, then the canary, then nothing
    assert report.stopped and "step 3" in report.stopped and "refused now" in report.stopped
    assert len(report.left_behind) == 2 and "'throwaway'" in report.left_behind[0]
    unsent = [w for w in report.writes if w["status"] == "not sent"]
    assert unsent and all("the probe stopped first" in w["result"] for w in unsent)


def test_a_refusal_of_one_resource_does_not_stop_the_probe(store: StoreAPI) -> None:
    # another user's bucket comes first in the listing: reading it answers 403
    buckets = store.state["children"]["buckets"]
    store.state["children"]["buckets"] = {"vault": buckets["vault"], "main": buckets["main"]}
    report = _probe(store)
    assert any(r.status == 403 for r in store.log)
    assert report.stopped is None
    assert report.tool("get_bucket").status == "documented"
    assert report.count("documented") >= 8


def test_dry_run_prints_the_plan_and_sends_nothing(store: StoreAPI, tmp_path: Path) -> None:
    spec = store.write_spec(tmp_path / "store.json")
    env = {**os.environ, "STORE_AUTH": f"{USER}:{PASSWORD}"}
    args = [str(ATC), "probe", str(spec), "--allow-unsafe", "--scope", "bucket_id=throwaway", "--dry-run",
            "--credential", "basicAuth=env:STORE_AUTH", "--no-llm"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert store.log == []
    plan = done.stderr
    assert "nothing was sent" in plan and "Traceback" not in plan
    first = plan.index("PUT /buckets/throwaway")
    assert first < plan.index("POST /buckets/throwaway/collections") < plan.index("PATCH /buckets/throwaway") \
        < plan.index("DELETE /buckets/throwaway/collections/")
    assert "delete_accounts (DELETE /accounts): a bulk delete" in plan and "--allow-bulk delete_accounts" in plan
    assert "create_account (POST /accounts): outside the scope" in plan
    as_json = subprocess.run([*args, "--json"], capture_output=True, text=True, env=env, timeout=120)
    doc = json.loads(as_json.stdout)
    assert doc["dry_run"] is True and doc["calls"] == 0 and store.log == []
    assert doc["writes"] and all(w["status"] == "planned" for w in doc["writes"])
    assert doc["writes"][0]["args"]["bucket_id"].startswith("'throwaway'")


def test_the_cli_says_each_unsafe_call_before_sending_it(store: StoreAPI, tmp_path: Path) -> None:
    spec = store.write_spec(tmp_path / "store.json")
    env = {**os.environ, "STORE_AUTH": f"{USER}:{PASSWORD}"}
    done = subprocess.run([str(ATC), "probe", str(spec), "--allow-unsafe", "--scope", "bucket_id=throwaway",
                           "--credential", "basicAuth=env:STORE_AUTH", "--no-llm", "--json", "--no-cache"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("atc probe: step ")]
    assert len(said) == len(store.writes()) and json.loads(done.stdout)["left_behind"] == []
    sent = len(store.log)
    bad = subprocess.run([str(ATC), "probe", str(spec), "--scope", "nonsense", "--allow-unsafe"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "--scope" in bad.stderr and "Traceback" not in bad.stderr
    lone = subprocess.run([str(ATC), "probe", str(spec), "--scope", "bucket_id=x"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert lone.returncode == 2 and "--allow-unsafe" in lone.stderr
    assert len(store.log) == sent


def test_a_refusal_says_what_fits_what_was_given(store: StoreAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WRONG_AUTH", f"{USER}:not-the-password")
    given = _probe(store, credentials={"basicAuth": "env:WRONG_AUTH"})
    refused = [t.reason for t in given.tools if t.status == "failed"]
    assert refused and all("the credential given (basicAuth) was refused" in r for r in refused)
    assert not any("pass --credential" in (t.reason or "") for t in given.tools)
    assert given.stopped and "credential given" in given.stopped
    none = _probe(store, credentials=None)
    assert "pass --credential basicAuth=env:VAR" in (none.stopped or "")
    spec = store.spec()
    del spec["securityDefinitions"], spec["security"]
    bare = probe(load_data(spec, source="store"), no_llm=True, cache=False)
    assert "--credential header:Authorization=env:VAR" in (bare.stopped or "")
    assert "declares no security scheme" in bare.tool("get_buckets").reason


@pytest.mark.parametrize("budget", [11, 13, 16, 19, 22])
def test_a_small_budget_never_leaves_created_things_behind(store: StoreAPI, budget: int) -> None:
    before = store.snapshot()
    report = _probe(store, allow_unsafe=True, scope=SCOPE, max_calls=budget)
    assert len(store.log) <= budget
    assert store.snapshot() == before and report.left_behind == []  # a delete is kept for every create
    if budget >= 19:
        assert any(w.created for w in store.writes())  # it did create (and delete) what the budget allowed


def test_a_flat_rest_server_is_scoped_by_a_pinned_id() -> None:
    """A mock REST server with top-level resources only (tests/support/apis/jsonrest.py with writes): nothing
    to pin but the id of what the probe makes. ``--scope id=atc-scratch`` creates, changes and deletes
    that id in each resource and touches nothing else."""
    import copy as _copy

    from tests.support.apis.jsonrest import JsonRestAPI

    with JsonRestAPI(writes=True) as api:
        before = _copy.deepcopy(api.data)
        report = probe(load_data(api.spec(writes=True), source="rest"), no_llm=True, cache=False,
                       allow_unsafe=True, scope={"id": "atc-scratch"}, on_event=lambda e, s: None)
        writes = [(m, p, st) for m, p, st in api.log if m != "GET"]
        after = api.data
    assert writes and all(p.count("/") == 1 and m == "POST" or p.endswith("/atc-scratch") for m, p, _ in writes)
    created = [p for m, p, st in writes if m == "POST" and st == 201]
    deleted = [p.rsplit("/", 1)[0] for m, p, st in writes if m == "DELETE" and st == 200]
    assert created and deleted == list(reversed(created))
    assert after == before and report.left_behind == []


def test_a_created_thing_is_addressed_by_the_field_its_path_wants() -> None:
    """A forge: ``POST /repos/{owner}/{repo}/issues`` answers ``{"id": 7001, "number": 3}`` and the
    issue's path takes its ``number``. Scoped to one repo, the other repo's issues stay as they were."""
    repos: dict[str, dict[int, dict[str, Any]]] = {"ada/work": {1: {"id": 7000, "number": 1, "title": "keep me"}},
                                                    "ada/sandbox": {}}
    log: list[tuple[str, str, int]] = []

    class Forge(QuietHandler):
        def _send(self, status: int, obj: Any) -> None:
            log.append((self.command, self.path, status))
            self.send_json(status, obj)

        def _go(self) -> None:
            raw = self.body()
            body = json.loads(raw) if raw else {}
            p = self.path.strip("/").split("/")
            issues = repos.get(f"{p[1]}/{p[2]}") if len(p) >= 4 and p[0] == "repos" and p[3] == "issues" else None
            if issues is None:
                return self._send(404, {"message": "Not Found"})
            if len(p) == 4:
                if self.command == "POST":
                    number = max(issues, default=0) + 1
                    issues[number] = {"id": 7000 + number + 100, "number": number, "title": body.get("title", "")}
                    return self._send(201, issues[number])
                if self.command == "DELETE":
                    issues.clear()
                    return self._send(204, None)
                return self._send(200, list(issues.values()))
            found = issues.get(int(p[4])) if p[4].isdigit() else None
            if found is None:
                return self._send(404, {"message": "Not Found"})
            if self.command == "PATCH":
                found.update({k: v for k, v in body.items() if k == "title"})
            elif self.command == "DELETE":
                del issues[found["number"]]
                return self._send(204, None)
            self._send(200, found)

        do_GET = do_POST = do_PATCH = do_DELETE = _go

    path = [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in ("owner", "repo")]
    number = {"name": "issue_number", "in": "path", "required": True, "schema": {"type": "integer"}}
    body = {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "required": ["title"], "properties": {"title": {"type": "string"}}}}}}
    spec = {"openapi": "3.0.3", "info": {"title": "Forge", "version": "1"}, "paths": {
                "/repos/{owner}/{repo}/issues": {
                    "get": {"operationId": "listIssues", "parameters": path, "responses": {"200": {"description": "OK"}}},
                    "post": {"operationId": "createIssue", "parameters": path, "requestBody": body,
                             "responses": {"201": {"description": "Created"}}},
                    "delete": {"operationId": "deleteIssues", "parameters": path,
                               "responses": {"204": {"description": "Gone"}}}},
                "/repos/{owner}/{repo}/issues/{issue_number}": {
                    "get": {"operationId": "getIssue", "parameters": [*path, number],
                            "responses": {"200": {"description": "OK"}}},
                    "patch": {"operationId": "updateIssue", "parameters": [*path, number], "requestBody": body,
                              "responses": {"200": {"description": "OK"}}},
                    "delete": {"operationId": "deleteIssue", "parameters": [*path, number],
                               "responses": {"204": {"description": "Gone"}}}}}}
    with serving(Forge) as url:
        report = probe(load_data({**spec, "servers": [{"url": url}]}, source="forge"), no_llm=True, cache=False, allow_unsafe=True,
                       scope={"owner": "ada", "repo": "sandbox"}, on_event=lambda e, s: None)
    writes = [(m, p, s) for m, p, s in log if m != "GET"]
    assert writes == [("POST", "/repos/ada/sandbox/issues", 201), ("PATCH", "/repos/ada/sandbox/issues/1", 200),
                      ("DELETE", "/repos/ada/sandbox/issues/1", 204)]
    assert repos == {"ada/work": {1: {"id": 7000, "number": 1, "title": "keep me"}}, "ada/sandbox": {}}
    assert report.tool("get_issue").status == "documented" and report.left_behind == []
    assert report.tool("delete_issues").calls == 0


def test_the_last_line_says_plainly_what_was_left_behind(store: StoreAPI, tmp_path: Path) -> None:
    """Without a read to ask first, a bucket the store answered 201 for cannot be shown to be the
    probe's own: it stays, and the command's last lines say so; with the read, nothing is left."""
    env = {**os.environ, "STORE_AUTH": f"{USER}:{PASSWORD}"}
    spec = store.spec()
    args = ["--allow-unsafe", "--scope", "bucket_id=throwaway", "--credential", "basicAuth=env:STORE_AUTH",
            "--no-llm", "--no-cache"]
    whole = tmp_path / "whole.json"
    whole.write_text(json.dumps(spec))
    done = subprocess.run([str(ATC), "probe", str(whole), *args], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.rstrip().splitlines()[-1].startswith("nothing left behind")
    del spec["paths"]["/buckets/{bucket_id}"]["get"]
    blind = tmp_path / "blind.json"
    blind.write_text(json.dumps(spec))
    done = subprocess.run([str(ATC), "probe", str(blind), *args], capture_output=True, text=True, env=env, timeout=120)
    lines = done.stderr.rstrip().splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("LEFT BEHIND on the API: 1 thing"))
    assert lines[head + 1:] and all(line.startswith("  - ") for line in lines[head + 1:])
    assert "'throwaway'" in lines[head + 1] and "nothing shows it did not exist before" in lines[head + 1]
    assert "throwaway" in store.snapshot()["children"]["buckets"]
