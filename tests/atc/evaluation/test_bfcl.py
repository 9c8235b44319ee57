"""BFCL's multi-turn suite offline (issue 33, item 3): its API classes as function tools holding a
task's state, one run of the strategy per user turn, scored by BFCL's own checker.

The model is an oracle (tests/support/fakes/bfcl_oracle.py) behind the scripted OpenAI-compatible server,
through the real ``openai`` client: it answers each turn with that turn's ground-truth calls, in
the protocol of the strategy asking. Every base task must pass BFCL's checker that way, and fail
it with one call changed. The data and classes are those of the installed ``bfcl-eval``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from atc.cli import main
from atc.evaluation import RunSettings, evaluate, load_suite
from atc.evaluation.bfcl.checker import call_string, check
from atc.evaluation.bfcl.data import load_tasks, package_data, to_json_schema
from atc.evaluation.bfcl.job import turn_query
from atc.evaluation.bfcl.reader import BfclSuite
from atc.evaluation.bfcl.state import TaskTools
from atc.llm.client import OpenAIModel
from sandbox.api import Limits
from tests.support.fakes.bfcl_oracle import BfclOracle
from tests.support.fakes.openai_server import ScriptedOpenAI

pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed by scripts/test.sh (pip install --no-deps)")


def _suite(name: str, limit: int | None = None) -> BfclSuite:
    suite = load_suite(name).head(limit)
    assert isinstance(suite, BfclSuite)
    return suite


@pytest.fixture()
def oracle_of() -> Iterator[object]:
    servers: list[ScriptedOpenAI] = []

    def make(suite: BfclSuite, changed: set[str] | None = None) -> OpenAIModel:
        server = ScriptedOpenAI(router=BfclOracle([suite.entries[t.id] for t in suite.tasks], changed or set()))
        server.__enter__()
        servers.append(server)
        return OpenAIModel("oracle", base_url=server.base_url, backoff=0.01)

    yield make
    for server in servers:
        server.__exit__(None, None, None)


def _run(suite: BfclSuite, client: OpenAIModel, strategy: str = "chain", out: Path | None = None) -> dict[str, str]:
    result = evaluate(suite, RunSettings(strategies=[strategy], client=client, sandbox="local", concurrency=2,
                                         limits=Limits(timeout=30)), out=out, chart=False)
    return {s.id: str(s.success) for s in result.scores[strategy]}


@pytest.mark.slow
def test_the_oracle_passes_every_base_task(oracle_of: object, tmp_path: Path) -> None:
    suite = _suite("bfcl-multi-turn-base")
    assert len(suite.tasks) == 200
    verdicts = _run(suite, oracle_of(suite), out=tmp_path)  # type: ignore[operator]
    failed = {k: v for k, v in verdicts.items() if v != "solved"}
    assert len(verdicts) == 200 and not failed, failed
    summary = json.loads((tmp_path / "summary.json").read_text())["strategies"]["chain"]
    assert summary["success"] == 1.0 and summary["path"] == 1.0 and summary["labels"]["solved"] == 200


def test_one_changed_call_fails_bfcls_checker(oracle_of: object, tmp_path: Path) -> None:
    suite = _suite("bfcl-multi-turn-base", 8)
    assert set(_run(suite, oracle_of(suite)).values()) == {"solved"}  # type: ignore[operator]
    changed = _run(suite, oracle_of(suite, {t.id for t in suite.tasks}), out=tmp_path)  # type: ignore[operator]
    assert set(changed.values()) == {"unsolved"}, changed
    lines = [json.loads(raw) for raw in (tmp_path / "runs" / "chain.jsonl").read_text().splitlines()]
    line = next(x for x in lines if x["id"] == "multi_turn_base_0")
    assert line["verdict"] == "unsolved" and line["ok"] is False and line["bfcl"]["valid"] is False
    assert line["bfcl"]["error_type"].startswith("multi_turn:") and line["error"]["type"] == "BfclMismatch"
    assert [len(t["calls"]) for t in line["trace"]["turns"]] == [3, 2, 1, 4]  # every turn's calls, as BFCL's strings


@pytest.mark.parametrize("strategy", ["react", "codeact", "dfsdt", "chain-plain"])
def test_every_strategy_runs_the_suite(strategy: str, oracle_of: object) -> None:
    suite = _suite("bfcl-multi-turn-base", 3)
    assert set(_run(suite, oracle_of(suite), strategy).values()) == {"solved"}  # type: ignore[operator]


def test_the_other_categories(oracle_of: object) -> None:
    for name in ("bfcl-multi-turn-miss-func", "bfcl-multi-turn-miss-param", "bfcl-multi-turn-long-context"):
        suite = _suite(name, 2)
        assert set(_run(suite, oracle_of(suite)).values()) == {"solved"}, name  # type: ignore[operator]


def test_held_out_functions_are_shown_at_their_turn(oracle_of: object) -> None:
    entry = next(t for t in load_tasks("miss_func") if t.id == "multi_turn_miss_func_0")
    assert entry.missed == {3: ["sort"]}
    tools = TaskTools(entry)
    shown = [[n for _, n in tools.shown(turn)] for turn in range(len(entry.turns))]
    assert "sort" not in shown[2] and "sort" in shown[3]
    assert "sort" in tools.toolset().tools  # still callable, as in BFCL's own execution
    suite = _suite("bfcl-multi-turn-miss-func", 1)
    assert _run(suite, oracle_of(suite)) == {"multi_turn_miss_func_0": "solved"}  # type: ignore[operator]


def test_state_lives_across_turns_and_queries_say_what_came_before() -> None:
    entry = next(t for t in load_tasks("base") if t.id == "multi_turn_base_0")
    tools = TaskTools(entry)
    fs = tools.instances["GorillaFileSystem"]
    assert [t.method for t in tools.toolset().tools.values()] == ["PYTHON"] * len(tools.toolset().tools)
    before = fs._current_dir.name
    from sandbox.execute import run

    r = run("print(cd(folder='document'))\nprint(mkdir(dir_name='temp'))\n", tools.toolset(), sandbox="local")
    assert r.ok, r.error
    assert fs._current_dir.name == "document" != before  # the task's own instance changed
    assert tools.recorder.take() == [("cd", {"folder": "document"}), ("mkdir", {"dir_name": "temp"})]
    query = turn_query(entry, 2, ["moved it", "found budget analysis on line 1"])
    assert query.startswith("Earlier in this conversation") and "Your answer: moved it" in query
    assert query.endswith(entry.turns[2][0]["content"])


def test_calls_are_bfcls_strings_and_bfcls_checker_decides() -> None:
    assert call_string("mv", {"source": "a'b.txt", "n": 2, "flag": True, "x": None, "l": [1.5]}) == \
        "mv(source=\"a'b.txt\", n=2, flag=True, x=None, l=[1.5])"
    entry = load_tasks("base")[0]
    assert check(entry, entry.ground_truth) == {"valid": True}
    short = check(entry, [entry.ground_truth[0], [], entry.ground_truth[2], entry.ground_truth[3]])
    assert short["valid"] is False and short["error_type"] == "multi_turn:empty_turn_model_response"
    assert to_json_schema({"type": "dict", "properties": {"x": {"type": "float"}, "y": {"type": "any"},
                                                          "z": {"type": "tuple", "items": {"type": "integer"}}}}) == \
        {"type": "object", "properties": {"x": {"type": "number"}, "y": {}, "z": {"type": "array",
                                                                                "items": {"type": "integer"}}}}


def test_atc_eval_runs_it_from_the_command_line(oracle_of: object, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    suite = _suite("bfcl-multi-turn-base", 2)
    client = oracle_of(suite)  # type: ignore[operator]
    monkeypatch.setenv("OPENAI_BASE_URL", client.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    code = main(["eval", "bfcl-multi-turn-base", "--limit", "2", "--strategy", "chain,react", "--model", "oracle",
                 "--sandbox", "local", "--out", str(tmp_path / "out"), "--no-chart", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    assert doc["suite"] == "bfcl-multi-turn-base" and doc["tasks"] == 2
    assert doc["strategies"]["chain"]["success"] == 1.0 and doc["strategies"]["react"]["success"] == 1.0
    # the data folder itself may be given as PATH
    again = load_suite(f"bfcl-multi-turn-base:{package_data()}").head(1)
    assert isinstance(again, BfclSuite) and again.tasks[0].id == "multi_turn_base_0"


def test_without_the_package_the_error_says_how_to_install_it() -> None:
    code = ("import sys; sys.modules['bfcl_eval'] = None\n"
            "from atc.cli import main\nraise SystemExit(main(['eval', 'bfcl-multi-turn-base', '--strategy', 'chain']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
                               "ATC_HOME": "/tmp/atc-no-bfcl"})
    assert done.returncode == 2 and "pip install --no-deps bfcl-eval" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
