"""``atc eval`` as a user runs it: the built-in suite out of the box, the other public formats,
bad input, Ctrl-C and resuming, a judge that fails and a judge that votes, the win rate, and a
machine without matplotlib. Scripted models on real HTTP (tests/support/fakes), ``atc mock`` of the
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
from tests.support.apis.library import SECRET, LibraryAPI
from tests.support.fakes.gold_model import GoldModel, every_protocol, gold_tools, program, protocol_of
from tests.support.fakes.openai_server import Reply, ScriptedOpenAI

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
    assert "| chain | 12 | n/a |  | 100.0 | 100.0 | 100.0 |" in captured.out  # no judge: Success% is n/a
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


@pytest.mark.parametrize("spec", ["restbench-spotify", "toolflow-examples", "toolflow-movie", "toolflow-examples-food",
                                  "toolflow-weather",
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
    assert all(r["retriever"] == "candidates" for r in runs)  # Spotify's too: drawn with a fixed seed
    if name.startswith("toolflow"):  # called what they are: the published examples, not the paper's 224
        assert doc["suite"].startswith("toolflow-examples") and any("not the paper's 224" in n for n in doc["notes"])


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
            return json.dumps({"better": "B", "reason": "B is richer"})
        return json.dumps({"label": "solved", "reason": "complete"})

    with ScriptedOpenAI(router=judging) as judge:
        monkeypatch.setenv("ATC_JUDGE_BASE_URL", judge.base_url)
        code, doc, err = run(["examples", "--strategy", ",".join(STRATEGIES), "--judge-model", "j",
                              "--out", str(tmp_path / "o")], capsys)
        compared = sum(1 for r in judge.requests if "Two assistants" in r["messages"][-1]["content"])
        judged = len(judge.requests) - compared
    assert code == 0, err
    assert list(doc["strategies"]) == STRATEGIES
    calls_per_task = {"chain": [1] * 12, "chain-plain": [1] * 12, "codeact": [2] * 12,
                      "react": [n + 1 for n in sizes], "dfsdt": [n + 1 for n in sizes]}  # a call per tool, then finish
    for name, s in doc["strategies"].items():
        assert (s["tasks"], s["path"], s["precision"], s["success"], s["failed"]) == (12, 1.0, 1.0, 1.0, 0), name
        assert s["api_calls"] == sum(sizes), name
        assert s["model_calls"] == sum(calls_per_task[name]) == s["steps"], name
    # ToolEval's win rate of each strategy against the first: all solved, so every task is compared:
    # identical answers and calls tie without asking, the others are asked (3 votes each), no tie
    assert [(w["strategy"], w["baseline"], w["compared"]) for w in doc["win_rates"]] == \
        [(name, "chain", 12) for name in STRATEGIES[1:]]
    assert all(w["win"] + w["tie"] + w["lose"] == 12 for w in doc["win_rates"])
    assert compared == 3 * sum(12 - w["tie"] for w in doc["win_rates"])
    assert judged == 5 * 12 * 3  # a label per answer and vote: one phase, every answer solved
    assert doc["judge"]["votes"] == 3 and doc["judge"]["structured"] == "function"
    assert all(s["success_std"] == 0.0 and s["unjudged"] == 0 for s in doc["strategies"].values())
    rows = [json.loads(x) for x in (tmp_path / "o/results.jsonl").read_text().splitlines()]
    assert [r["strategy"] for r in rows] == [name for name in STRATEGIES for _ in range(12)]
    for name in STRATEGIES:
        runs = [json.loads(x) for x in (tmp_path / f"o/runs/{name}.jsonl").read_text().splitlines()]
        assert {r["strategy"] for r in runs} == {name} and len(runs) == 12


def test_the_paper_preset_is_one_command_and_names_every_setting(
        model: ScriptedOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``--preset paper`` with no --strategy runs Table 1's rows on the paper's settings, and
    ``summary.json`` says exactly which ran."""
    gold = oracle_for("examples")
    model.router = every_protocol(gold)
    with ScriptedOpenAI(router=lambda body: json.dumps({"label": "solved", "reason": "ok"})
                        if "Two assistants" not in body["messages"][-1]["content"]
                        else json.dumps({"better": "A", "reason": "first"})) as judge:
        monkeypatch.setenv("ATC_JUDGE_BASE_URL", judge.base_url)
        code, doc, err = run(["examples", "--preset", "paper", "--judge-model", "j", "--judge-votes", "1",
                              "--limit", "3", "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err
    rows = ["react", "react@3", "codeact", "dfsdt", "dfsdt@3", "chain"]
    assert list(doc["strategies"]) == rows and doc["settings"]["preset"] == "paper"
    named = doc["settings"]["strategies"]
    assert named["chain"]["settings"] == {"max_attempts": 3, "profile": "paper"}
    assert named["dfsdt@3"]["runs"] == 3 and named["dfsdt@3"]["until"] == "answer"
    assert named["dfsdt"]["settings"]["max_nodes"] == 200 and named["react"]["settings"]["max_levels"] == 12
    assert named["codeact"]["settings"]["max_turns"] == 10
    for name in rows:
        s = doc["strategies"][name]
        assert (s["path"], s["precision"], s["correct_path"], s["success"]) == (1.0, 1.0, 1.0, 1.0), name
        assert s["settings"]["strategy"] == name.split("@")[0], name
    # the oracle answers on its first run: @3 costs what the method costs
    assert doc["strategies"]["react@3"]["model_calls"] == doc["strategies"]["react"]["model_calls"]
    assert [w["baseline"] for w in doc["win_rates"]] == ["react"] * 5  # ToolEval compares with ReAct
    table = (tmp_path / "o/summary.md").read_text()
    assert "Settings (preset paper)" in table and "rerun up to 3 times until it answers" in table
    assert "path_answer" in table and json.loads((tmp_path / "o/summary.json").read_text())["variants"]


def test_set_changes_one_setting_and_a_text_react_is_evaluated(model: ScriptedOpenAI, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    gold = oracle_for("examples")
    model.router = every_protocol(gold)
    code, doc, err = run(["examples", "--strategy", "react-text,dfsdt", "--set", "dfsdt=atc",
                          "--set", "dfsdt.max_nodes=9", "--limit", "4", "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err
    dfsdt = doc["settings"]["strategies"]["dfsdt"]["settings"]
    assert (dfsdt["profile"], dfsdt["max_nodes"], dfsdt["depth_unit"]) == ("atc", 9, "turns")
    text = doc["strategies"]["react-text"]
    assert (text["path"], text["precision"], text["failed"]) == (1.0, 1.0, 0)
    assert text["settings"]["settings"]["format"] == "text"
    assert all("tools" not in r for r in model.requests if protocol_of(r) == "react-text")


@pytest.mark.parametrize("args, message", [
    (["--set", "dfsdt.max_nodes"], "give STRATEGY.KEY=VALUE"),
    (["--strategy", "dfsdt", "--set", "dfsdt.max_nodez=3"], "has no setting max_nodez"),
    (["--strategy", "chain", "--set", "dfsdt.max_nodes=3"], "not among the strategies run"),
    (["--strategy", "react@x"], "after @ comes the number of runs"),
    (["--strategy", "dfsdt", "--set", "dfsdt=quick"], "no DfsdtSettings profile 'quick'"),
])
def test_bad_settings_are_refused_before_anything_runs(args: list[str], message: str, model: ScriptedOpenAI,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "examples", *args, "--json"]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err and model.requests == []


def test_every_requested_call_counts_a_made_up_tool_of_a_stopped_program_included(
        model: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A first program calls a made-up tool (the static check stops it: nothing is sent), the
    repair is the gold chain: Path% and Prec% count the made-up tool; the answer's variant not."""
    gold = oracle_for("examples", limit=3)

    def erring(body: dict[str, Any]) -> str:
        i = gold.index_of(body)
        if not any(m["role"] == "assistant" for m in body["messages"]):
            return program(gold.gold[i], None).replace("last = None", "last = find_everything(query='x')")
        return gold(body)

    model.router = erring
    code, doc, err = run(["examples", "--limit", "3", "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err
    chain = doc["strategies"]["chain"]
    sizes = [len(g) for g in gold.gold]
    assert chain["path"] == 1.0 and chain["precision"] == pytest.approx(sum(n / (n + 1) for n in sizes) / 3, abs=1e-4)
    assert chain["variants"]["precision_answer"] == 1.0 and chain["variants"]["path_answer"] == 1.0
    assert chain["requested_calls"] == sum(1 + 2 * n for n in sizes) and chain["api_calls"] == sum(sizes)
    assert chain["failures"].get("unknown_tool") == 3
    rows = [json.loads(x) for x in (tmp_path / "o/results.jsonl").read_text().splitlines()]
    assert rows[0]["calls"][0] == "find_everything" and rows[0]["answer_calls"] == [t.name for t in gold.gold[0]]


def test_model_turns_and_http_requests_are_reported_apart(model: ScriptedOpenAI, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    gold = oracle_for("examples")
    first: set[int] = set()

    def flaky(body: dict[str, Any]) -> str | Reply:
        i = gold.index_of(body)
        if i not in first:  # each task's first request is rate limited once
            first.add(i)
            return Reply(429, "slow down", {"retry-after-ms": "5"})
        return gold(body)

    model.router = flaky
    code, doc, err = run(["examples", "--limit", "3", "--concurrency", "1"], capsys)
    assert code == 0, err
    chain = doc["strategies"]["chain"]
    assert (chain["model_calls"], chain["http_requests"]) == (3, 6) == (3, len(model.requests))


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
        from atc.loop.strategies import Outcome

        reply = episode.ask([{"role": "user", "content": "Which tool first? " + episode.query}])
        outcome, called = episode.call_tool(reply.text.strip(), {})
        return Outcome(ok=True, answer=f"called {called.tool}: {'ok' if outcome.ok else 'refused'}", calls=[called],
                       steps=1)


def test_a_plugin_strategy_is_evaluated_like_the_builtins(model: ScriptedOpenAI, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from atc.loop.strategies import registry

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
        chain = doc["strategies"]["chain"]
        labels = chain["labels"]
        assert labels["unjudged"] > 0 and labels["solved"] == 12 - labels["unjudged"]
        # never a rate over fewer tasks than ran: n/a, with the count of unjudged
        assert chain["success"] is None and chain["unjudged"] == labels["unjudged"]
        assert chain["variants"]["success_over_judged"] == 1.0
        assert any("not judged" in n for n in doc["notes"])
        assert f"n/a, {labels['unjudged']} unjudged" in (tmp_path / "o/summary.md").read_text()
        asked_first = len(judge.requests)
    # a refused request with a forced function is asked once more without one, then given up
    assert asked_first == 2 * labels["unjudged"] + 3 * (12 - labels["unjudged"])
    with ScriptedOpenAI(router=lambda body: json.dumps({"label": "unsure", "reason": "hm"})) as judge:
        monkeypatch.setenv("ATC_JUDGE_BASE_URL", judge.base_url)
        code, doc, _ = run(["examples", "--out", str(tmp_path / "o"), "--judge-model", "j"], capsys)
        assert code == 0
        # only the unjudged are asked: 3 votes, each unsure in phase 1, so phase 2 too
        assert len(judge.requests) == labels["unjudged"] * 3 * 2
    assert doc["strategies"]["chain"]["labels"] == {"solved": 12 - labels["unjudged"], "unsolved": 0,
                                                    "unsure": labels["unjudged"], "unjudged": 0}
    assert doc["strategies"]["chain"]["success"] == pytest.approx((12 - labels["unjudged"] / 2) / 12, abs=1e-4)


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
