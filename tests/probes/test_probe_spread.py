"""``atc probe --executor``: one collection's tools probed as tasks, one per group of tools linked
by the chain of probing, in threads and on a local Ray cluster (127.0.0.1 only), against the
catalog API on 127.0.0.1. The merged report equals an in-process probe's, tools in spec order;
the credential reaches the workers' gateways, never the task payloads."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from atc.cli import main
from probes import probe
from probes.groups import probe_groups
from protocols.loaders import load_data
from sandbox.api import Toolset
from tests.support.apis.catalog import SECRET, CatalogAPI, catalog_spec
from tests.support.apis.library import library_spec

#: What a probe is asked in these tests: no model, a short wait for the API's never-answering tool.
#: The wait is wide of both an ordinary answer and the slow tool's, so that a loaded 2-core CI machine
#: (the API serves from this process's threads) never turns an ordinary answer into a timeout.
WAIT = 1.0
OPTIONS = {"no_llm": True, "sandbox": "local", "request_timeout": WAIT, "credentials": {"key": "env:CATALOG_KEY"}}
#: Fields that say how long a run took: the only ones a spread run may differ in.
TIMING = ("duration_ms", "rounds")


@pytest.fixture()
def catalog(monkeypatch: pytest.MonkeyPatch) -> Iterator[CatalogAPI]:
    monkeypatch.setenv("CATALOG_KEY", SECRET)
    with CatalogAPI(slow=WAIT * 2.5) as api:
        yield api


def _same(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in TIMING}


def test_groups_keep_every_chain_whole_and_follow_the_spec() -> None:
    catalog = Toolset([load_data(catalog_spec("http://127.0.0.1:9"), name="catalog")])
    groups = probe_groups(catalog)
    # shelves -> shelf items -> item -> variant, maker (no spec says where a maker_ref comes from:
    # kept with the chain) and the search that finds items: one group
    assert groups[0] == ["list_shelves", "list_shelf_items", "get_item", "get_item_variant", "get_maker",
                         "get_item_history", "search_items"]
    assert all(len(g) == 1 for g in groups[1:]) and len(groups) == 10
    names = [t.name for c in catalog.collections for t in c.tools]
    assert sorted(n for g in groups for n in g) == sorted(names)
    assert [names.index(g[0]) for g in groups] == sorted(names.index(g[0]) for g in groups)
    # with --allow-unsafe the writers that take a sku join the item chain
    unsafe = probe_groups(catalog, allow_unsafe=True)
    assert {"delete_item", "delete_item_via_get"} <= set(unsafe[0])
    # a group whose every tool needs an id is fed from outside it: /network/{id} from a show's networks[]
    get = {"responses": {"200": {"description": "OK"}}}
    path_id = {"in": "path", "required": True, "schema": {"type": "integer"}}
    tv = load_data({"openapi": "3.0.3", "info": {"title": "tv", "version": "1"}, "servers": [{"url": "http://x"}],
                    "paths": {"/tv/popular": {"get": get},
                              "/tv/{tv_id}": {"get": {**get, "parameters": [{**path_id, "name": "tv_id"}]}},
                              "/network/{network_id}": {"get": {**get, "parameters": [{**path_id, "name": "network_id"}]}},
                              "/network/{network_id}/images": {"get": {**get, "parameters": [
                                  {**path_id, "name": "network_id"}]}},
                              "/genres": {"get": get}}}, name="tv")
    assert probe_groups(Toolset([tv])) == [["get_tv_popular", "get_tv_tv_id", "get_network_network_id",
                                            "get_network_network_id_images"], ["get_genres"]]
    library = Toolset([load_data(library_spec("http://127.0.0.1:9", responses=False), name="library")])
    assert probe_groups(library) == [["search_authors", "get_author", "list_author_books", "get_book",
                                      "list_book_reviews"], ["create_order"], ["get_stats"]]


def test_local_executor_equals_an_in_process_probe(catalog: CatalogAPI, tmp_path: Path) -> None:
    spec = load_data(catalog.spec(), name="catalog")
    alone = probe(spec, cache=False, **OPTIONS)  # type: ignore[arg-type]
    catalog.reset()
    spread = probe(spec, cache=False, executor="local", concurrency=3, out=tmp_path / "out",
                   **OPTIONS)  # type: ignore[arg-type]
    assert _same(spread.to_dict()) == {**_same(alone.to_dict()), "outputs": spread.outputs}
    assert spread.count("documented") == 7 and spread.calls == len(catalog.requests)
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [t["name"] for t in written["tools"]] == [t.name for t in alone.tools]


def test_max_calls_is_shared_out_between_the_groups(catalog: CatalogAPI) -> None:
    spec = load_data(catalog.spec(), name="catalog")
    report = probe(spec, cache=False, executor="local", max_calls=11, **OPTIONS)  # type: ignore[arg-type]
    assert report.budget == 11 and 0 < report.calls <= 11 and report.calls == len(catalog.requests)


def test_a_failed_task_costs_its_group_only(catalog: CatalogAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    import probes.spread as spread

    real = spread.probe_task

    def dying(job: Any, toolset: Toolset) -> Any:
        if "get_broken" in toolset.tools:
            raise RuntimeError("worker lost")
        return real(job, toolset)

    monkeypatch.setattr(spread, "probe_task", dying)
    report = probe(load_data(catalog.spec(), name="catalog"), cache=False, executor="local",
                   **OPTIONS)  # type: ignore[arg-type]
    broken = report.tool("get_broken")
    assert broken is not None and broken.status == "skipped"
    assert broken.reason == "not probed: the worker failed: RuntimeError: worker lost"
    assert report.count("documented") == 7 and "worker lost" in (report.note or "")
    assert not any(r.path == "/broken" for r in catalog.requests)


def test_cli_rejects_a_bad_executor_and_a_missing_ray(catalog: CatalogAPI, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    spec = catalog.write_spec(tmp_path / "catalog.json")
    assert main(["probe", str(spec), "--no-llm", "--executor", "threads"]) == 2
    err = capsys.readouterr().err
    assert "unknown executor 'threads'" in err and "--executor local or --executor ray" in err
    assert "Traceback" not in err
    assert main(["probe", str(spec), "--no-llm", "--executor", "threads", "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and "unknown executor" in doc["error"]["message"]
    assert main(["probe", str(spec), "--no-llm", "--concurrency", "2"]) == 2
    assert "--concurrency needs --executor" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["probe", str(spec), "--no-llm", "--executor", "ray"]) == 2
    err = capsys.readouterr().err
    assert "needs Ray, which is not installed" in err and "pip install 'atc[ray]'" in err
    assert catalog.requests == []  # nothing was sent for bad input


def test_ctrl_c_keeps_the_groups_done(catalog: CatalogAPI, tmp_path: Path) -> None:
    catalog.delay = 0.15  # every answer takes a while: the later groups are still to come
    spec = catalog.write_spec(tmp_path / "catalog.json")
    out = tmp_path / "out"
    atc = Path(sys.executable).with_name("atc")
    proc = subprocess.Popen([str(atc), "probe", str(spec), "--no-llm", "--executor", "local", "-c", "1", "--out",
                             str(out), "--request-timeout", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "CATALOG_KEY": SECRET})
    assert proc.stderr is not None
    first = proc.stderr.readline()  # the first group's tools come back together
    assert first.startswith("[1/16]"), first
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "no new group of tools" in stderr and "Traceback" not in stderr and stdout == ""
    report = json.loads((out / "report.json").read_text())
    assert report["interrupted"] is True and report["documented"] >= 6
    assert [t["name"] for t in report["tools"]][:3] == ["list_shelves", "list_shelf_items", "get_item"]
    left = [t["name"] for t in report["tools"] if t["reason"] == "not probed (the probe stopped first)"]
    assert "get_quota" in left and not any(r.path == "/quota" for r in catalog.requests)


@pytest.mark.slow
def test_ray_equals_the_local_executor(catalog: CatalogAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    import ray  # the ray extra is installed by scripts/test.sh: required, never skipped

    import probes.spread as spread

    shipped: list[bytes] = []
    run_each = spread.run_each

    def recording(fn: Any, items: Any, **kw: Any) -> int:
        shipped.append(pickle.dumps((fn, list(items), kw.get("shared"))))
        return run_each(fn, items, **kw)

    monkeypatch.setattr(spread, "run_each", recording)  # what spread calls: its own name for it
    spec = catalog.write_spec(tmp_path / "catalog.json")
    common = ["probe", str(spec), "--no-llm", "--request-timeout", str(WAIT), "--credential", "key=env:CATALOG_KEY",
              "--sandbox", "local", "--json"]
    try:
        assert main([*common, "--executor", "local", "--no-cache", "--out", str(tmp_path / "local")]) == 0
        local = json.loads(capsys.readouterr().out)
        local_requests = len(catalog.requests)
        catalog.reset()
        # the probe cache is empty still: the cluster sends every request, and records the answers
        assert main([*common, "--executor", "ray", "-c", "2", "--out", str(tmp_path / "ray")]) == 0
        remote = json.loads(capsys.readouterr().out)
        assert ray.is_initialized()
    finally:
        ray.shutdown()
    assert _same(remote) == {**_same(local), "outputs": remote["outputs"]}
    assert [t["name"] for t in remote["tools"]] == [t["name"] for t in local["tools"]]
    assert remote["documented"] == 7 and remote["calls"] == len(catalog.requests) == local_requests
    account = [r for r in catalog.requests if r.path == "/account"]
    assert account and {r.headers.get("X-Key") for r in account} == {SECRET}  # the workers' gateways had it
    assert len(shipped) == 2 and all(SECRET.encode() not in payload for payload in shipped)
    assert all(b"CATALOG_KEY" in payload for payload in shipped)  # the name travels (parsed: Credentials), never the value
    documented = [json.loads((tmp_path / where / "openapi.json").read_text()) for where in ("local", "ray")]
    for doc in documented:
        doc["x-atc-probe"].pop("date")
    assert documented[0] == documented[1] and documented[1]["x-atc-probe"]["documented"] == 7
    assert json.loads((tmp_path / "ray" / "report.json").read_text())["tools"] == remote["tools"]
    # what the cluster learnt is in this machine's probe cache: a plain probe asks the API again
    # only what is never recorded (server errors, timeouts, garbage: the failed tools)
    catalog.reset()
    again = probe(spec, **OPTIONS)  # type: ignore[arg-type]
    assert again.count("documented") == 7 and again.cached >= 7
    assert {t.name for t in again.tools if t.calls} == {t["name"] for t in remote["tools"] if t["status"] == "failed"}
    assert again.calls == len(catalog.requests) < local_requests
