"""``atc eval`` as a user runs it: the built-in suite out of the box, the other public formats,
bad input, Ctrl-C and resuming, a judge that fails and a judge that votes, the win rate, and a
machine without matplotlib. Scripted models on real HTTP (tests/fakes), ``atc mock`` of the
specs, the local sandbox."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from atc.cli import main
from atc.evaluation import load_suite
from atc.evaluation.judge import Judge
from atc.evaluation.metrics import TaskScore
from atc.evaluation.scoring import VerdictCache, win_rate
from atc.evaluation.suite import EvalTask, Suite
from atc.model import OpenAIModel, make_client
from tests.apis.library import SECRET, LibraryAPI
from tests.fakes.gold_model import GoldModel, every_protocol, gold_tools
from tests.fakes.openai_server import Reply, ScriptedOpenAI

ATC = Path(sys.executable).parent / "atc"


def oracle_for(spec: str, *, tools: list[str] | None = None, limit: int | None = None) -> GoldModel:
    suite = load_suite(spec, tools=tools).head(limit)
    return GoldModel([t.query for t in suite.tasks], [gold_tools(t.solution, suite.collections) for t in suite.tasks])


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    code = main(["eval", *args, "--json", "--sandbox", "local"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


@pytest.fixture()
def model(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A scripted model server configured as the environment's model; tests set its router."""
    with ScriptedOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("ATC_MODEL", "scripted")
        yield server


# -- out of the box -----------------------------------------------------------------------------


def test_the_builtin_suite_runs_out_of_the_box(model: ScriptedOpenAI, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    model.router = oracle_for("examples")
    out = tmp_path / "out"
    assert main(["eval", "examples", "--out", str(out), "--sandbox", "local"]) == 0
    captured = capsys.readouterr()
    assert "| chain | 12 | n/a | 100.0 | 100.0 |" in captured.out  # no judge: Success% is n/a
    assert "results.jsonl" in captured.err
    for name in ("eval.json", "runs/chain.jsonl", "results.jsonl", "summary.json", "summary.md"):
        assert (out / name).is_file(), name
    pytest.importorskip("matplotlib")
    assert (out / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads((out / "summary.json").read_text())
    assert doc["strategies"]["chain"]["path"] == 1.0 and doc["strategies"]["chain"]["success"] is None
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows][:2] == ["bookshop-1", "bookshop-2"]
    assert rows[0]["calls"] == ["search_books", "get_book", "get_author", "get_book_stock"]
    # each task was shown the tools of its own API only (the suite's candidates)
    runs = {json.loads(x)["id"]: json.loads(x) for x in (out / "runs/chain.jsonl").read_text().splitlines()}
    assert runs["transit-1"]["tools"] == ["find_stops", "get_stop", "list_departures", "list_lines", "get_line",
                                          "list_line_stops", "list_line_alerts"]
    assert runs["transit-1"]["retriever"] == "candidates"


def test_a_tasks_file_with_tools_given_and_no_chart_without_matplotlib(
        model: ScriptedOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from atc import examples

    spec = str(examples.path("bookshop/openapi.json"))
    tasks = tmp_path / "mine.jsonl"
    tasks.write_text(json.dumps({"id": 1, "query": "Which shops are there?", "solution": ["GET /shops"]}) + "\n"
                     + json.dumps({"id": 2, "query": "Find books on gardens", "solution": ["search_books"]}) + "\n")
    model.router = oracle_for(str(tasks), tools=[spec])
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as on a machine without the [eval] extra
    code, doc, err = run([str(tasks), "--tools", spec, "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err
    assert doc["suite"] == "mine" and doc["strategies"]["chain"]["path"] == 1.0
    assert any("no chart" in n and "pip install 'atc[eval]'" in n for n in doc["notes"])
    assert not (tmp_path / "o/chart.png").exists() and (tmp_path / "o/summary.md").exists()


@pytest.mark.parametrize("spec", ["restbench-spotify", "toolflow-movie", "toolflow-food", "toolflow-weather",
                                  "toolbench:toolbench/stabletoolbench/solvable_queries/test_instruction/G1_tool.json"])
def test_the_public_formats_run_against_the_mock(spec: str, bench_data: Path, model: ScriptedOpenAI, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    name, _, rel = spec.partition(":")
    where = f"{name}:{bench_data / rel}" if rel else f"{name}:{bench_data}"
    model.router = oracle_for(where, limit=4)
    code, doc, err = run([where, "--limit", "4", "--top-k", "60", "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err
    chain = doc["strategies"]["chain"]
    assert chain["tasks"] == 4 and chain["path"] == 1.0 and chain["precision"] == 1.0, doc
    runs = [json.loads(x) for x in (tmp_path / "o/runs/chain.jsonl").read_text().splitlines()]
    # every call reached the mock and got an answer from it (no connection refused, no 404 route)
    assert all(c["status"] is not None for r in runs for c in r["calls"])
    if not name.startswith("restbench"):
        assert all(r["retriever"] == "candidates" for r in runs)


def test_the_real_api_with_base_url_and_credential(api: LibraryAPI, model: ScriptedOpenAI, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "library.json"
    spec.write_text(json.dumps(api.spec()))
    tasks = tmp_path / "library.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in [
        {"id": "a", "query": "Which books did the first author write?", "solution": ["GET /authors/{author_id}/books"]},
        {"id": "b", "query": "What do readers say about book 10?", "solution": ["get_book", "list_book_reviews"]}]))
    model.router = oracle_for(str(tasks), tools=[str(spec)])
    monkeypatch.setenv("LIB_KEY", SECRET)
    out = tmp_path / "o"
    code, doc, err = run([str(tasks), "--tools", str(spec), "--base-url", api.url, "--credential",
                          "api_key=env:LIB_KEY", "--out", str(out)], capsys)
    assert code == 0, err
    assert doc["strategies"]["chain"]["path"] == 1.0
    # the calls went to the real server, with the secret the gateway added
    seen = [(r.method, r.path) for r in api.requests]
    assert sorted(seen) == [("GET", "/authors/1/books"), ("GET", "/books/1"), ("GET", "/books/1/reviews")]
    assert all(r.headers.get("X-API-Key") == SECRET for r in api.requests)
    # and the secret is nowhere in what the evaluation wrote
    for path in out.rglob("*"):
        if path.is_file() and path.suffix != ".png":
            assert SECRET not in path.read_text(), path


STRATEGIES = ["chain", "chain-plain", "react", "codeact", "dfsdt"]


def test_every_strategy_side_by_side_with_a_judge_and_win_rates(
        model: ScriptedOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The oracle in each strategy's protocol (programs, function calls, snippets): every strategy
    finds every gold tool, at the cost its protocol implies; a judge that calls every pair a tie."""
    gold = oracle_for("examples")
    model.router = every_protocol(gold)
    sizes = [len(g) for g in gold.gold]

    def judging(body: dict[str, Any]) -> str:
        if "Two assistants" in body["messages"][-1]["content"]:
            return json.dumps({"preference": "tie", "reason": "both complete"})
        return json.dumps({"label": "solved", "reason": "complete"})

    with ScriptedOpenAI(router=judging) as judge:
        monkeypatch.setenv("ATC_JUDGE_BASE_URL", judge.base_url)
        code, doc, err = run(["examples", "--strategy", ",".join(STRATEGIES), "--judge-model", "j",
                              "--out", str(tmp_path / "o")], capsys)
        judged = len(judge.requests)
    assert code == 0, err
    assert list(doc["strategies"]) == STRATEGIES
    calls_per_task = {"chain": [1] * 12, "chain-plain": [1] * 12, "codeact": [2] * 12,
                      "react": [n + 1 for n in sizes], "dfsdt": [n + 1 for n in sizes]}  # a call per tool, then finish
    for name, s in doc["strategies"].items():
        assert (s["tasks"], s["path"], s["precision"], s["success"], s["failed"]) == (12, 1.0, 1.0, 1.0, 0), name
        assert s["api_calls"] == sum(sizes), name
        assert s["model_calls"] == sum(calls_per_task[name]) == s["steps"], name
    # ToolEval's win rate of each strategy against the first: all solved, so every task is compared
    assert [(w["strategy"], w["baseline"], w["tie"], w["win_rate"]) for w in doc["win_rates"]] == \
        [(name, "chain", 12, 0.5) for name in STRATEGIES[1:]]
    assert judged == 5 * 12 + 4 * 12  # a label per answer, a comparison per task and pair
    rows = [json.loads(x) for x in (tmp_path / "o/results.jsonl").read_text().splitlines()]
    assert [r["strategy"] for r in rows] == [name for name in STRATEGIES for _ in range(12)]
    for name in STRATEGIES:
        runs = [json.loads(x) for x in (tmp_path / f"o/runs/{name}.jsonl").read_text().splitlines()]
        assert {r["strategy"] for r in runs} == {name} and len(runs) == 12


def test_strategies_under_one_budget(model: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--max-model-calls 2``: a program needs one call, react a call per tool and one to finish,
    so react runs out on every task with more than one gold tool; that is measured, not an error."""
    gold = oracle_for("examples")
    model.router = every_protocol(gold)
    code, doc, err = run(["examples", "--strategy", "chain,react", "--max-model-calls", "2",
                          "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err
    chain, react = doc["strategies"]["chain"], doc["strategies"]["react"]
    assert chain["failed"] == 0 and chain["model_calls"] == 12
    over = sum(1 for g in gold.gold if len(g) + 1 > 2)
    assert react["failed"] == over and react["errors"] == 0
    assert react["failures"].get("model_budget") == over
    assert react["model_calls"] <= 2 * 12


def test_a_plain_json_list_of_tasks_with_tools_given(bench_data: Path, model: ScriptedOpenAI, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """RestBench's own file, as it is (no ids, a list in one JSON document), with its spec as --tools."""
    tasks = str(bench_data / "restbench/datasets/tmdb.json")
    spec = str(bench_data / "restbench/specs/tmdb_oas.json")
    model.router = oracle_for(tasks, tools=[spec], limit=3)
    code, doc, err = run([tasks, "--tools", spec, "--limit", "3", "--top-k", "60", "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err
    assert doc["suite"] == "tmdb" and doc["strategies"]["chain"]["path"] == 1.0
    rows = [json.loads(x) for x in (tmp_path / "o/results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["1", "2", "3"]


class OneCall:
    """A strategy of a user's own (registered as a plug-in is): the model names one tool, which is
    called once with no arguments, and its status is the answer."""

    name = "one-call"

    def __init__(self, **options: Any) -> None:
        pass

    def run(self, episode: Any) -> Any:
        from atc.strategies import Outcome

        reply = episode.ask([{"role": "user", "content": "Which tool first? " + episode.query}])
        outcome, called = episode.call_tool(reply.text.strip(), {})
        return Outcome(ok=True, answer=f"called {called.tool}: {'ok' if outcome.ok else 'refused'}", calls=[called],
                       steps=1)


def test_a_plugin_strategy_is_evaluated_like_the_builtins(model: ScriptedOpenAI, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from atc.strategies import registry

    monkeypatch.setitem(registry._FACTORIES, "one-call", OneCall)
    gold = oracle_for("examples")
    model.router = lambda body: gold.gold[gold.index_of(body)][0].name  # the task's first gold tool
    code, doc, err = run(["examples", "--strategy", "one-call", "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err
    mine = doc["strategies"]["one-call"]
    sizes = [len(g) for g in gold.gold]
    assert mine["path"] == pytest.approx(sum(1 / n for n in sizes) / 12, abs=1e-4)  # one gold tool of n
    assert (mine["precision"], mine["model_calls"], mine["api_calls"], mine["steps"]) == (1.0, 12, 12, 12)
    # a call without its required arguments was refused by the gateway, and still chosen
    assert mine["failures"].get("bad_arguments", 0) == sum(1 for g in gold.gold if g[0].required)


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (["nope.jsonl"], "no suite 'nope.jsonl'"),
    (["restbench-tmdb"], "where is the data"),
    (["examples", "--strategy", "chain,astrology"], "unknown strategy 'astrology'"),
    (["examples", "--strategy", "chain,chain"], "named twice"),
    (["examples", "--api", "mock", "--base-url", "http://127.0.0.1:9"], "does not go with --api mock"),
    (["examples", "--judge-votes", "0"], "--judge-votes must be at least 1"),
    (["examples", "--limit", "0"], "--limit must be at least 1"),
    (["examples", "--record", "a", "--replay", "b"], "not both"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", *args, "--json"]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err
    assert json.loads(captured.out)["ok"] is False


def test_a_bad_suite_file_and_a_foreign_out_dir_are_refused_before_anything_runs(
        model: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "query": "q", "solution": ["x"]}\n{"id": 1}\n')
    assert main(["eval", str(bad)]) == 2
    assert "line 2:" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    (other / "eval.json").write_text(json.dumps({"suite": "restbench-tmdb"}))
    assert main(["eval", "examples", "--out", str(other)]) == 2
    assert "holds an evaluation of suite 'restbench-tmdb'" in capsys.readouterr().err
    assert model.requests == []


# -- Ctrl-C, resume -----------------------------------------------------------------------------


def test_ctrl_c_keeps_what_finished_and_the_same_command_resumes(tmp_path: Path) -> None:
    gold = oracle_for("examples")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATC_", "OPENAI_"))}
    env.update(ATC_HOME=str(tmp_path / "home"), ATC_MODEL="scripted", ATC_SEARCH_SERVER="off")
    with ScriptedOpenAI(router=gold, delay=0.3) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        args = [str(ATC), "eval", "examples", "--out", str(out), "--sandbox", "local", "--concurrency", "2", "--json"]
        first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        runs = out / "runs/chain.jsonl"
        deadline = time.monotonic() + 60
        while (not runs.exists() or len(runs.read_text().splitlines()) < 3) and time.monotonic() < deadline:
            time.sleep(0.05)
        first.send_signal(signal.SIGINT)
        stdout, stderr = first.communicate(timeout=60)
        assert first.returncode == 130, stderr
        doc = json.loads(stdout)
        done = len(runs.read_text().splitlines())
        assert doc["interrupted"] and 3 <= done < 12
        assert doc["strategies"]["chain"]["tasks"] == done and doc["strategies"]["chain"]["not_run"] == 12 - done
        assert "run the same command again to resume" in stderr

        second = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout)["strategies"]["chain"]["path"] == 1.0
        asked = [gold.index_of(r) for r in server.requests]
    assert sorted(asked) == list(range(12))  # no task asked the model twice
    assert len(runs.read_text().splitlines()) == 12


def test_tasks_the_model_server_failed_are_not_scored_and_run_again(
        model: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gold = oracle_for("examples")
    down = {"transit": True}

    def flaky(body: dict[str, Any]) -> str | Reply:
        i = gold.index_of(body)
        if down["transit"] and i >= 8:  # the four transit tasks
            return Reply(400, "the model server is not well")
        return gold(body)

    model.router = flaky
    code, doc, err = run(["examples", "--out", str(tmp_path / "o")], capsys)
    chain = doc["strategies"]["chain"]
    assert code == 1 and "not complete" in err
    assert (chain["tasks"], chain["errors"], chain["failed"], chain["path"]) == (8, 4, 0, 1.0)
    assert any("model server failed" in n and "ModelError" in n for n in doc["notes"])
    down["transit"] = False
    before = len(model.requests)
    code, doc, err = run(["examples", "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err
    assert len(model.requests) - before == 4  # only the four that the server failed
    assert (doc["strategies"]["chain"]["tasks"], doc["strategies"]["chain"]["errors"]) == (12, 0)


# -- the judge ----------------------------------------------------------------------------------


def test_a_failing_judge_leaves_tasks_unjudged_exit_1_and_a_rerun_judges_only_those(
        model: ScriptedOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    model.router = oracle_for("examples")
    flaky = {"n": 0}

    def judging(body: dict[str, Any]) -> str | Reply:
        flaky["n"] += 1
        if "bookshop" in body["messages"][-1]["content"] or "shop" in body["messages"][-1]["content"]:
            return Reply(400, "the judge refuses")
        return json.dumps({"label": "solved", "reason": "ok"})

    with ScriptedOpenAI(router=judging) as judge:
        monkeypatch.setenv("ATC_JUDGE_BASE_URL", judge.base_url)
        code, doc, err = run(["examples", "--out", str(tmp_path / "o"), "--judge-model", "j"], capsys)
        assert code == 1 and "not complete" in err
        labels = doc["strategies"]["chain"]["labels"]
        assert labels["unjudged"] > 0 and labels["solved"] == 12 - labels["unjudged"]
        assert any("not judged" in n for n in doc["notes"])
        asked_first = len(judge.requests)
    with ScriptedOpenAI(router=lambda body: json.dumps({"label": "unsure", "reason": "hm"})) as judge:
        monkeypatch.setenv("ATC_JUDGE_BASE_URL", judge.base_url)
        code, doc, _ = run(["examples", "--out", str(tmp_path / "o"), "--judge-model", "j"], capsys)
        assert code == 0
        assert len(judge.requests) == labels["unjudged"] and asked_first == 12
    assert doc["strategies"]["chain"]["labels"] == {"solved": 12 - labels["unjudged"], "unsolved": 0,
                                                    "unsure": labels["unjudged"], "unjudged": 0}


def score(task_id: str, strategy: str, answer: str, label: str) -> TaskScore:
    return TaskScore(task_id, strategy, True, answer, ["a"], 1.0, 1.0, ["a"], [], [], success=label)


def test_votes_make_a_majority_and_the_win_rate_follows_tooleval() -> None:
    replies = ['{"label": "solved", "reason": "r1"}', '{"label": "unsolved", "reason": "r2"}',
               'Thinking... {"label": "solved", "reason": "r3"}',
               '{"label": "solved", "reason": "x"}', '{"label": "unsolved", "reason": "y"}', "no label here",
               "none", "none", "none"]
    task = EvalTask("t1", "Who directed Lost in Translation?", ("a",))
    with ScriptedOpenAI(replies) as server:
        judge = Judge(OpenAIModel("j", base_url=server.base_url, backoff=0.01), votes=3)
        verdict = judge.pass_label(task, score("t1", "chain", "Sofia Coppola", "x"))
        assert (verdict.label, verdict.reason, verdict.votes) == ("solved", "r1", ("solved", "unsolved", "solved"))
        tie = judge.pass_label(task, score("t1", "chain", "Sofia Coppola", "x"))
        assert tie.label == "unsure"  # one solved, one unsolved, one unreadable: no majority
        none = judge.pass_label(task, score("t1", "chain", "Sofia Coppola", "x"))
        assert none.label is None and "named no label" in none.reason  # never guessed
        assert judge.pass_label(task, score("t1", "chain", "  ", "x")).reason == "no answer"
        assert len(server.requests) == 9 and judge.usage["llm_calls"] == 9

    tasks = [EvalTask(f"t{i}", f"task {i}", ("a",)) for i in range(4)]
    suite = Suite("s", tasks)
    scores = {"chain": [score("t0", "chain", "A0", "solved"), score("t1", "chain", "A1", "unsolved"),
                        score("t2", "chain", "A2", "solved"), score("t3", "chain", "A3", "solved")],
              "react": [score("t0", "react", "B0", "unsolved"), score("t1", "react", "B1", "solved"),
                        score("t2", "react", "B2", "solved"), score("t3", "react", "B3", "solved")]}
    # t0 and t1 are decided by the labels alone; t2 (shown in order) and t3 (shown swapped) are asked
    with ScriptedOpenAI(['{"preference": "B", "reason": "richer"}', '{"preference": "A", "reason": "first"}']) as server:
        judge = Judge(make_client("j", base_url=server.base_url), votes=1)
        rate = win_rate(judge, VerdictCache(None), suite, "chain", "react", scores, 1, None)
        assert "B2" in server.request_text(0).split("## Assistant B")[1]
        assert "B3" in server.request_text(1).split("## Assistant A")[1].split("## Assistant B")[0]
    # t0 lose, t1 win, t2 win (B = react), t3 win (A shown = react, swapped back)
    assert (rate["win"], rate["tie"], rate["lose"], rate["compared"]) == (3, 0, 1, 4)
    assert rate["win_rate"] == 0.75 and rate["strategy"] == "react" and rate["baseline"] == "chain"


# -- the first hour (issue 30) ------------------------------------------------------------------


def test_no_model_makes_no_out_folder_and_a_rerun_says_what_it_reused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["eval", "examples", "--limit", "2", "--out", str(out), "--sandbox", "local"]) == 2
    assert "no model is configured" in capsys.readouterr().err
    assert not out.exists()  # nothing was written for an evaluation that could not run
    with ScriptedOpenAI(router=oracle_for("examples", limit=2)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("ATC_MODEL", "scripted")
        code, first, _ = run(["examples", "--limit", "2", "--out", str(out)], capsys)
        assert code == 0 and not any("reused" in n for n in first["notes"])
        asked = len(server.requests)
        code, again, _ = run(["examples", "--limit", "2", "--out", str(out)], capsys)
        assert code == 0 and len(server.requests) == asked  # nothing ran again...
        assert any(n.startswith("chain: reused 2 finished tasks of ") for n in again["notes"]), again["notes"]
    # ...and a finished evaluation is scored again without a model at all
    monkeypatch.delenv("OPENAI_BASE_URL")
    code, scored, err = run(["examples", "--limit", "2", "--out", str(out)], capsys)
    assert code == 0, err
    assert scored["strategies"]["chain"]["tasks"] == 2


def test_notes_speak_only_of_the_tasks_run(bench_data: Path) -> None:
    whole = load_suite(f"restbench-spotify:{bench_data}")
    assert any("q39" in n for n in whole.notes)  # a gold route the spec does not have, in task q39
    part = whole.head(3)
    assert not any("q39" in n or "gold step" in n for n in part.notes), part.notes
    assert whole.head(57).notes == whole.notes
