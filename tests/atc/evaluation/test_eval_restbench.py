"""``atc eval`` on all 100 RestBench TMDB tasks, against ``atc mock`` of the TMDB spec, with
scripted models on real HTTP (tests/support/fakes): the real command, the real batch runner, the local
sandbox, the gateway's call log.

- A scripted oracle writes each task's gold chain as a program: Path% and Prec% are 100.
- A scripted model of known error rate (every tenth task adds a wrong tool, drops a gold one,
  repeats and reorders, first answers with no program, or never prints an answer) and a scripted
  judge (solved, unsolved or unsure by what the answer says): every metric equals the number
  computed here, independently, from the data and from what the servers saw.
- The evaluation is then scored again with no model at all (the same directory: nothing runs,
  the judge's verdicts are reused), replayed from its recording into a new directory, and
  re-judged there by another judge.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from atc.cli import main
from protocols.loaders import load_spec
from protocols.model import Collection, Tool
from tests.support.fakes.gold_model import GoldModel, gold_tools, program, router_for
from tests.support.fakes.openai_server import Reply, ScriptedOpenAI

# -- the scripted models ------------------------------------------------------------------------


class Tmdb:
    """The data, read the test's own way (tests/support/fakes/gold_model.py), and the oracle."""

    def __init__(self, root: Path) -> None:
        self.root = root
        data = json.loads((root / "restbench/datasets/tmdb.json").read_text())
        self.spec: Collection = load_spec(root / "restbench/specs/tmdb_oas.json")
        self.gold = [gold_tools(row["solution"], [self.spec]) for row in data]
        self.oracle = GoldModel([row["query"] for row in data], self.gold)

    def outsider(self, i: int) -> Tool:
        """A tool that is not gold for task i."""
        return next(t for t in self.spec.tools if t not in self.gold[i] and not t.required)


@pytest.fixture(scope="module")
def tmdb(bench_data: Path) -> Tmdb:
    return Tmdb(bench_data)


class Erring:
    """The known error rate, by task number i (the kind is i % 10):
    1 an extra, wrong tool; 2 the last gold tool left out (a wrong tool instead when there is only
    one); 3 the first gold call repeated and the order reversed; 4 a first reply with no program,
    the gold chain second; 5 the gold chain but nothing printed, every time; 6 an answer the judge
    is unsure about; anything else: the gold chain."""

    def __init__(self, tmdb: Tmdb) -> None:
        self.tmdb = tmdb
        self.sent: list[str] = []  # every reply, to count completion tokens the server's way

    def calls(self, i: int) -> list[Tool]:
        gold, kind = self.tmdb.gold[i], i % 10
        if kind == 1:
            return [*gold, self.tmdb.outsider(i)]
        if kind == 2:
            return gold[:-1] if len(gold) > 1 else [self.tmdb.outsider(i)]
        if kind == 3:
            return [gold[0], *reversed(gold)]
        return gold

    def __call__(self, body: dict[str, Any]) -> str:
        i = self.tmdb.oracle.index_of(body)
        kind = i % 10
        attempt = 1 + sum(1 for m in body["messages"] if m["role"] == "assistant")
        if kind == 4 and attempt == 1:
            text = "I would first search for the movie, then read its details."
        else:
            verdict = {2: "partial", 6: "unclear"}.get(kind, "complete")
            text = program(self.calls(i), None if kind == 5 else f"{verdict} answer to task {i}")
        self.sent.append(text)
        return text


def judge(body: dict[str, Any]) -> str:
    text = body["messages"][-1]["content"]
    answer = text.split("## The assistant's final answer", 1)[1]
    label = "unsolved" if "partial answer" in answer else "unsure" if "unclear answer" in answer else "solved"
    return json.dumps({"label": label, "reason": f"scripted: {label}"})


def tokens(text: str) -> int:  # the scripted server's own count (tests/support/fakes/openai_server.py)
    return max(1, len(text) // 4)


def run_eval(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["eval", *args, "--json", "--sandbox", "local", "--concurrency", "8"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


# -- the runs ---------------------------------------------------------------------------------


def test_oracle_chains_score_path_100(tmdb: Tmdb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedOpenAI(router=tmdb.oracle) as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
        monkeypatch.setenv("ATC_MODEL", "oracle")
        code, doc = run_eval([f"restbench-tmdb:{tmdb.root}", "--out", str(tmp_path / "out")], capsys)
    assert code == 0, doc
    chain = doc["strategies"]["chain"]
    assert doc["suite"] == "restbench-tmdb" and doc["tasks"] == 100 and chain["tasks"] == 100
    assert chain["path"] == 1.0 and chain["precision"] == 1.0
    assert chain["success"] is None  # no judge: n/a, never guessed
    assert chain["model_calls"] == 100 and chain["failed"] == 0
    assert chain["api_calls"] == sum(len(g) for g in tmdb.gold)
    lines = results(tmp_path / "out")
    assert len(lines) == 100
    for row in lines:
        i = int(row["id"][1:])
        assert row["strategy"] == "chain" and row["ok"] and row["path"] == 1.0 and row["precision"] == 1.0
        assert row["calls"] == [t.name for t in tmdb.gold[i]]
        assert row["answer"] == f"answer to task {i}\n"
    # the mock answered every call, and most that take an id went through with the id a search
    # returned (the oracle takes the first id it sees, which is not always the right entity's)
    runs = [json.loads(x) for x in (tmp_path / "out/runs/chain.jsonl").read_text().splitlines()]
    statuses = [c["status"] for r in runs for c in r["calls"]]
    assert None not in statuses and statuses.count(200) >= 0.8 * len(statuses)
    # each task was shown its 20 candidates (ToolFlow's lists), which hold its gold tools
    first = next(r for r in runs if r["id"] == "q0")
    assert len(first["tools"]) == 20 and {t.name for t in tmdb.gold[0]} <= set(first["tools"])


@pytest.mark.slow
def test_known_error_rate_gives_the_expected_numbers_then_rescoring_replay_and_rejudging(
        tmdb: Tmdb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    erring = Erring(tmdb)
    out, tape = tmp_path / "out", tmp_path / "tape"
    with ScriptedOpenAI(router=erring) as model, ScriptedOpenAI(router=judge) as judging:
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
        monkeypatch.setenv("ATC_MODEL", "erring")
        monkeypatch.setenv("ATC_JUDGE_BASE_URL", judging.base_url)
        code, doc = run_eval([f"restbench-tmdb:{tmdb.root}", "--out", str(out), "--judge-model", "judge-1",
                              "--max-reflections", "1", "--record", str(tape)], capsys)
        solver_requests, judge_requests = list(model.requests), list(judging.requests)
    assert code == 0, doc["notes"]
    chain = doc["strategies"]["chain"]

    # expected, from the data and the error rate alone
    kinds = [i % 10 for i in range(100)]
    g = [len(gold) for gold in tmdb.gold]
    path = [((g[i] - 1) / g[i] if g[i] > 1 else 0.0) if k == 2 else 1.0 for i, k in enumerate(kinds)]
    precision = [g[i] / (g[i] + 1) if k == 1 else (0.0 if g[i] == 1 else 1.0) if k == 2 else 1.0
                 for i, k in enumerate(kinds)]
    api_calls = [len(erring.calls(i)) * (2 if k == 5 else 1) for i, k in enumerate(kinds)]
    assert chain["path"] == pytest.approx(sum(path) / 100, abs=1e-4)
    assert chain["precision"] == pytest.approx(sum(precision) / 100, abs=1e-4)
    assert chain["api_calls"] == sum(api_calls)
    assert chain["model_calls"] == 100 + kinds.count(4) + kinds.count(5) == len(solver_requests)
    assert chain["steps"] == 100 + kinds.count(4) + kinds.count(5)
    assert chain["failed"] == kinds.count(5)
    # the failures the error rate makes, by the strategy's own kinds; the summary sums the lines'
    assert chain["failures"]["no_program"] == kinds.count(4)
    assert chain["failures"]["empty_answer"] == 2 * kinds.count(5)
    summed: dict[str, int] = {}
    for line in (out / "runs/chain.jsonl").read_text().splitlines():
        for kind, count in json.loads(line)["failures"].items():
            summed[kind] = summed.get(kind, 0) + count
    assert chain["failures"] == summed
    # tokens: what the model server saw and sent, counted the server's way
    prompts = ["\n".join(str(m.get("content") or "") for m in r["messages"]) for r in solver_requests]
    assert chain["prompt_tokens"] == sum(tokens(p) for p in prompts)
    assert chain["completion_tokens"] == sum(tokens(t) for t in erring.sent)
    # the judge: an empty answer is unsolved without asking; the rest as the scripted judge says
    solved = sum(1 for k in kinds if k not in (2, 5, 6))
    assert chain["labels"] == {"solved": solved, "unsolved": kinds.count(2) + kinds.count(5),
                               "unsure": kinds.count(6), "unjudged": 0}
    assert chain["success"] == pytest.approx((solved + kinds.count(6) / 2) / 100)
    # three votes each; unsure in phase 1 asks phase 2 (the calls), where it stays unsure
    assert len(judge_requests) == 3 * (100 - kinds.count(5)) + 3 * kinds.count(6)
    assert doc["judge"]["model"] == "judge-1" and doc["judge"]["usage"]["llm_calls"] == len(judge_requests)
    assert "path" in doc["definitions"] and "precision" in doc["definitions"]
    rows = {r["id"]: r for r in results(out)}
    assert rows["q12"]["path"] == pytest.approx(path[12], abs=1e-4) and rows["q16"]["success"] == "unsure"
    assert rows["q16"]["judge_reason"] == "scripted: unsure"
    assert rows["q11"]["extra"] == [tmdb.outsider(11).name]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["strategies"] == doc["strategies"]
    assert "| chain | 100 |" in (out / "summary.md").read_text()

    # scored again with no model and no judge server: nothing runs, the verdicts are reused
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("ATC_JUDGE_BASE_URL")
    code, again = run_eval([f"restbench-tmdb:{tmdb.root}", "--out", str(out), "--judge-model", "judge-1"], capsys)
    assert code == 0, again["notes"]
    assert again["strategies"] == doc["strategies"]

    # replayed from the recording into a new directory: the same numbers, no model at all
    code, replayed = run_eval([f"restbench-tmdb:{tmdb.root}", "--out", str(tmp_path / "replayed"),
                               "--replay", str(tape), "--max-reflections", "1"], capsys)
    assert code == 0, replayed["notes"]
    same = {k: v for k, v in replayed["strategies"]["chain"].items() if k not in ("wall_s", "per_task")}
    assert same == {k: v for k, v in chain.items() if k not in ("wall_s", "per_task")}
    assert replayed["judge"]["model"] == "judge-1"

    # re-judged by another judge, live, without running any task again
    with ScriptedOpenAI(router=lambda body: Reply(200, json.dumps({"label": "unsolved", "reason": "strict"}))) as strict:
        monkeypatch.setenv("ATC_JUDGE_BASE_URL", strict.base_url)
        code, rejudged = run_eval([f"restbench-tmdb:{tmdb.root}", "--out", str(tmp_path / "replayed"),
                                   "--replay", str(tape), "--max-reflections", "1", "--judge-model", "judge-2"], capsys)
        assert len(strict.requests) == 3 * (100 - kinds.count(5))
    assert code == 0
    assert rejudged["strategies"]["chain"]["success"] == 0.0
    assert rejudged["strategies"]["chain"]["path"] == chain["path"]


def test_react_with_a_known_error_rate_on_the_same_tasks(tmdb: Tmdb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The same measurement for a step-by-step strategy: react's function calls are scored from the
    same call log. Kind 1 (i % 10) calls a wrong tool before finishing, kind 2 finishes before
    its last gold tool (or, with one gold tool, calls a wrong one instead), the rest follow the gold."""
    def plan(i: int) -> list[Tool]:
        gold, kind = tmdb.gold[i], i % 10
        if kind == 1:
            return [*gold, tmdb.outsider(i)]
        if kind == 2:
            return gold[:-1] if len(gold) > 1 else [tmdb.outsider(i)]
        return gold

    erring = GoldModel(tmdb.oracle.queries, [plan(i) for i in range(100)])
    with ScriptedOpenAI(router=router_for("react", erring)) as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
        monkeypatch.setenv("ATC_MODEL", "erring")
        code, doc = run_eval([f"restbench-tmdb:{tmdb.root}", "--strategy", "react", "--out", str(tmp_path / "o")],
                                  capsys)
        requests = len(model.requests)
    assert code == 0, doc["notes"]
    react = doc["strategies"]["react"]
    g = [len(gold) for gold in tmdb.gold]
    path = [((g[i] - 1) / g[i] if g[i] > 1 else 0.0) if i % 10 == 2 else 1.0 for i in range(100)]
    precision = [g[i] / (g[i] + 1) if i % 10 == 1 else (0.0 if g[i] == 1 else 1.0) if i % 10 == 2 else 1.0
                 for i in range(100)]
    assert react["path"] == pytest.approx(sum(path) / 100, abs=1e-4)
    assert react["precision"] == pytest.approx(sum(precision) / 100, abs=1e-4)
    assert react["api_calls"] == sum(len(plan(i)) for i in range(100))
    assert react["model_calls"] == react["steps"] == requests == sum(len(plan(i)) + 1 for i in range(100))
    assert react["failed"] == 0 and react["success"] is None


def test_spotify_candidates_are_the_gold_tools_and_a_fixed_seeds_draw(bench_data: Path) -> None:
    """Spotify has no published candidate lists: each task gets its gold tools, then tools drawn at
    random up to 20 with a fixed seed, as ToolFlow's TMDB lists were built; the same in every run."""
    from atc.evaluation import load_suite
    from atc.evaluation.readers import sample_candidates

    first = load_suite(f"restbench-spotify:{bench_data}")
    again = load_suite(f"restbench-spotify:{bench_data}")
    spec = first.collections[0]
    assert [t.tools for t in first.tasks] == [t.tools for t in again.tasks]
    assert first.candidates is not None and "seed 0" in first.candidates
    for task in first.tasks:
        gold = gold_tools([s for s in task.solution if s.strip() != "GET /track/{id}"], [spec])  # not in the spec
        assert len(task.tools) == 20 == len(set(task.tools))
        assert list(task.tools[: len(gold)]) == [t.name for t in gold]
    # the draw differs from task to task, and with the seed
    assert len({t.tools[-5:] for t in first.tasks}) > 40
    other = sample_candidates(first.tasks[:5], spec, seed=1, salt="restbench-spotify")
    assert [t.tools for t in other] != [t.tools for t in first.tasks[:5]]
    assert any("none published" in n for n in first.notes)
