"""Tasks on a Ray cluster started on this machine (127.0.0.1 only): the same results, in the same
order, as the local executor; credentials reach the workers' gateways through the runtime
environment and never the task payloads."""

from __future__ import annotations

import json
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from atc.cli import main
from atc.errors import ConfigError
from atc.llm.client import OpenAIModel
from atc.workflows.batch import run_batch
from atc.workflows.jobs import Job
from atc.workflows.many import solve_many
from atc.workflows.tasks import Task
from protocols.loaders import load_data
from sandbox.api import Limits, Toolset
from tests.atc.workflows.test_batch import BOOK_IDS, queries, route
from tests.support.apis.library import BOOKS, SECRET, LibraryAPI
from tests.support.fakes.openai_server import ScriptedOpenAI

LIMITS = Limits(timeout=30)


@pytest.fixture()
def ray_cluster() -> Iterator[Any]:
    import ray  # the ray extra is installed by scripts/test.sh: required, never skipped

    yield ray
    ray.shutdown()


def test_a_missing_ray_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, api: LibraryAPI) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    job = Job(Toolset([load_data(api.spec(), name="library")]), LIMITS, sandbox="local")
    with pytest.raises(ConfigError, match="needs Ray") as info:
        run_batch([Task(1, program="print(1)")], job, executor="ray")
    assert "pip install 'atc[ray]'" in (info.value.hint or "")


@pytest.mark.slow
def test_ray_matches_the_local_executor(ray_cluster: Any, api: LibraryAPI, monkeypatch: pytest.MonkeyPatch,
                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    library = load_data(api.spec(), name="library")
    monkeypatch.setenv("LIB_KEY", SECRET)
    qs = queries(6)
    with ScriptedOpenAI(router=route) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("ATC_MODEL", "scripted")
        local = solve_many(qs, library, client=OpenAIModel("scripted", base_url=server.base_url), sandbox="local",
                           limits=LIMITS, concurrency=3)
        # programs first: the cluster starts here (from the batch), with the credential in its runtime env
        orders = [Task(f"o{n}", program=f"print(create_order(book_id={BOOK_IDS[n % 5]}, quantity={n + 1})['total'])")
                  for n in range(4)] + [Task("fails", program="get_book(book_id=12345)")]
        job = Job(Toolset([library], credentials={"api_key": "env:LIB_KEY"}), LIMITS, sandbox="local")
        assert SECRET.encode() not in pickle.dumps(job.shippable())
        seen: dict[int, Any] = {}
        summary = run_batch(orders, job, executor="ray", concurrency=2, on_outcome=lambda i, o: seen.update({i: o}))
        assert ray_cluster.is_initialized()
        assert summary.ran == 5 and summary.solved == 4 and summary.failed == 1
        assert [seen[i].task.id for i in range(5)] == ["o0", "o1", "o2", "o3", "fails"]
        assert [seen[i].result.ok for i in range(5)] == [True, True, True, True, False]
        assert seen[4].result.error.tool == "get_book"  # type: ignore[union-attr]
        posted = [r for r in api.requests if r.method == "POST"]
        assert len(posted) == 4 and {r.headers.get("X-API-Key") for r in posted} == {SECRET}

        before = len(server.requests)
        remote = solve_many(qs, library, model="scripted", sandbox="local", limits=LIMITS, concurrency=3,
                            executor="ray")
        assert len(server.requests) - before == len(qs)
        # the command line on the same cluster: program tasks, results written as they come back
        src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
        src.write_text("".join(json.dumps({"id": n, "program": f"print(get_book(book_id={b})['title'])"}) + "\n"
                               for n, b in enumerate(BOOK_IDS)))
        spec = api.write_spec(tmp_path / "lib.json")
        code = main(["batch", str(src), "--tools", str(spec), "--sandbox", "local", "--executor", "ray",
                     "--out", str(out), "--json"])
        summary = json.loads(capsys.readouterr().out)
        assert code == 0 and summary["executor"] == "ray" and summary["solved"] == len(BOOK_IDS)
        rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
        assert [rows[n]["answer"] for n in range(len(BOOK_IDS))] == [BOOKS[b]["title"] + "\n" for b in BOOK_IDS]
    assert [s.answer for s in remote] == [s.answer for s in local]
    assert [s.query for s in remote] == qs
    assert all(s.ok and s.usage.llm_calls == 1 for s in remote)
    with pytest.raises(Exception, match="cannot be sent to remote workers"):
        solve_many(qs[:1], library, client=OpenAIModel("scripted", base_url="http://127.0.0.1:9/v1"),
                   sandbox="local", executor="ray")
