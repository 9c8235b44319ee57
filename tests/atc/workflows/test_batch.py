"""``atc batch`` and ``solve_many`` as a data workflow: input checking, the resumable result file,
Ctrl-C, and record/replay -- against the real library API on 127.0.0.1, a scripted
OpenAI-compatible server over HTTP, and real local sandboxes."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atc.cli import main
from atc.errors import ModelError, UsageError
from atc.workflows.batch import run_batch
from atc.workflows.jobs import Job
from atc.workflows.many import solve_many
from atc.workflows.outfile import ResultLog
from atc.workflows.replay import open_recording, stable
from atc.workflows.tasks import Task, parse_tasks
from protocols.loaders import load_data
from sandbox.api import Limits, Toolset
from tests.support.apis.library import BOOKS, LibraryAPI
from tests.support.fakes.openai_server import ScriptedOpenAI

BOOK_IDS = sorted(BOOKS)
LIMITS = Limits(timeout=20)


def program_for(n: int) -> str:
    book = BOOK_IDS[n % len(BOOK_IDS)]
    return f"b = get_book(book_id={book})\nprint('task {n}:', b['title'])\n"


def route(body: dict[str, Any]) -> str:
    n = int(re.search(r"\[task (\d+)\]", json.dumps(body["messages"])).group(1))  # type: ignore[union-attr]
    return f"```python\n{program_for(n)}```"


def queries(count: int) -> list[str]:
    return [f"[task {n}] What is the title of book {BOOK_IDS[n % len(BOOK_IDS)]}?" for n in range(count)]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.fixture()
def library(api: LibraryAPI) -> Any:
    return load_data(api.spec(), name="library")


# -- input ------------------------------------------------------------------------------------


def test_every_bad_line_is_reported_with_its_number() -> None:
    tasks, bad = parse_tasks([
        '{"id": 1, "query": "a"}',
        "not json",
        "[1, 2]",
        '{"query": "no id"}',
        '{"id": 2, "query": "q", "program": "p"}',
        '{"id": 3}',
        '{"id": 4, "program": "  "}',
        "",
        '{"id": "1", "query": "same id as line 1"}',
        '{"id": true, "query": "a bool is no id"}',
        '{"id": "ok", "program": "print(1)"}',
    ])
    assert [(t.id, t.kind, t.line) for t in tasks] == [(1, "solve", 1), ("ok", "run", 11)]
    assert [b.line for b in bad] == [2, 3, 4, 5, 6, 7, 9, 10]
    assert "not JSON" in bad[0].reason and "duplicate id '1' (first on line 1)" in bad[6].reason


@given(st.lists(st.one_of(st.text(max_size=40), st.builds(json.dumps, st.dictionaries(
    st.sampled_from(["id", "query", "program", "x"]),
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10)), max_size=4))), max_size=8))
@settings(max_examples=200, deadline=None)
def test_any_input_gives_tasks_or_numbered_bad_lines(raw: list[str]) -> None:
    text_lines = "\n".join(raw).splitlines()
    tasks, bad = parse_tasks(text_lines)
    assert len(tasks) + len(bad) == sum(1 for x in text_lines if x.strip())
    assert len({t.key for t in tasks}) == len(tasks)
    assert all(1 <= b.line <= len(text_lines) and b.reason for b in bad)


def test_bad_input_exits_2_and_runs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            api: LibraryAPI) -> None:
    spec = api.write_spec(tmp_path / "lib.json")
    tasks = tmp_path / "in.jsonl"
    tasks.write_text('{"id": 1, "program": "print(get_stats())"}\n{"id": 1, "program": "print(2)"}\n{oops\n')
    out = tmp_path / "out.jsonl"
    code = main(["batch", str(tasks), "--tools", str(spec), "--sandbox", "local", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert "line 2: duplicate id 1" in err and "line 3: not JSON" in err and "Traceback" not in err
    assert not out.exists() and api.requests == []


# -- the result file --------------------------------------------------------------------------


def test_torn_last_line_is_cut_and_its_task_runs_again(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text('{"id": 1, "ok": true}\n{"id": 2, "ok": false}\n{"id": 3, "ok": tr')
    with ResultLog(out) as log:
        assert set(log.done) == {"1", "2"} and log.repaired and "torn" in log.repaired
        log.write({"id": 3, "ok": True})
    assert [x["id"] for x in lines(out)] == [1, 2, 3]
    out.write_text('{"id": 1}\ngarbage\n{"id": 2}\n')
    with pytest.raises(UsageError, match="line 2 is not a result line"):
        ResultLog(out)


def test_cli_batch_of_programs_writes_results_and_resumes(tmp_path: Path, api: LibraryAPI,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    spec = api.write_spec(tmp_path / "lib.json")
    src = tmp_path / "in.jsonl"
    rows = [{"id": f"p{n}", "program": program_for(n)} for n in range(6)]
    rows.append({"id": "bad", "program": "get_book(book_id=999)"})
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    # a first run that got through two tasks (as if killed), the second one torn mid-write
    first = [{"id": "p0", "ok": True, "answer": "earlier\n"}, {"id": "p1", "ok": True}]
    out.write_text(json.dumps(first[0]) + "\n" + json.dumps(first[1])[:10])
    argv = ["batch", str(src), "--tools", str(spec), "--sandbox", "local", "--out", str(out),
            "--concurrency", "3", "--json"]
    code = main(argv)
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert code == 1  # the task "bad" failed
    assert summary["skipped"] == 1 and summary["ran"] == 6 and summary["solved"] == 6 and summary["failed"] == 1
    assert summary["api_calls"] == 6 and summary["not_run"] == 0 and summary["repaired"]
    got = {x["id"]: x for x in lines(out)}
    assert sorted(got) == sorted(r["id"] for r in rows)
    assert got["p0"]["answer"] == "earlier\n"  # kept, not run again
    for n in range(1, 6):
        assert got[f"p{n}"]["ok"] and got[f"p{n}"]["answer"] == f"task {n}: {BOOKS[BOOK_IDS[n % 5]]['title']}\n"
        assert {"calls", "sandbox", "duration_ms", "error"} <= set(got[f"p{n}"])
    assert got["bad"]["error"]["type"] == "ToolError" and got["bad"]["error"]["tool"] == "get_book"
    # the API saw each task that ran exactly once
    assert sorted(r.path for r in api.requests) == sorted(f"/books/{BOOK_IDS[n % 5]}" for n in range(1, 6)) + ["/books/999"]
    api.reset()
    assert main(argv) == 1  # everything done: nothing runs, the failure still counts
    again = json.loads(capsys.readouterr().out)
    assert again["ran"] == 0 and again["skipped"] == 7 and again["failed"] == 1 and api.requests == []


def test_results_go_to_stdout_without_out(tmp_path: Path, api: LibraryAPI, capsys: pytest.CaptureFixture[str]) -> None:
    spec = api.write_spec(tmp_path / "lib.json")
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 7, "program": program_for(7)}) + "\n")
    assert main(["batch", str(src), "--tools", str(spec), "--sandbox", "local"]) == 0
    captured = capsys.readouterr()
    [row] = [json.loads(x) for x in captured.out.splitlines()]
    assert row["id"] == 7 and row["ok"] and "batch: 1 ok, 0 failed of 1 tasks" in captured.err


# -- solve_many ------------------------------------------------------------------------------


def test_solve_many_resumes_from_its_out_file(tmp_path: Path, library: Any) -> None:
    out = tmp_path / "out.jsonl"
    qs = queries(8)
    seen: list[int] = []
    with ScriptedOpenAI(router=route) as server:
        from atc.llm.client import OpenAIModel

        client = OpenAIModel("scripted", base_url=server.base_url)
        first = solve_many(qs[:3], library, client=client, sandbox="local", limits=LIMITS, out=out,
                           ids=[f"t{n}" for n in range(3)])
        assert [s.ok for s in first] == [True] * 3 and len(server.requests) == 3
        sols = solve_many(qs, library, client=client, sandbox="local", limits=LIMITS, out=out,
                          ids=[f"t{n}" for n in range(8)], concurrency=3,
                          on_result=lambda i, s: seen.append(i))
        assert len(server.requests) == 8  # only the five new tasks asked the model
    assert sorted(seen) == [3, 4, 5, 6, 7]
    assert [s.answer for s in sols] == [f"task {n}: {BOOKS[BOOK_IDS[n % 5]]['title']}\n" for n in range(8)]
    assert sols[0].usage.llm_calls == 1 and sols[0].calls[0].tool == "get_book"  # read back from the file
    assert sorted(x["id"] for x in lines(out)) == [f"t{n}" for n in range(8)]


def test_stop_takes_no_new_task_and_keeps_what_finished(tmp_path: Path, library: Any) -> None:
    stop = threading.Event()
    tasks = [Task(n, program=program_for(n)) for n in range(10)]
    job = Job(Toolset([library]), LIMITS, sandbox="local")
    done: list[int] = []

    def on_outcome(index: int, outcome: Any) -> None:
        done.append(index)
        if len(done) == 3:
            stop.set()

    with ResultLog(tmp_path / "out.jsonl") as log:
        summary = run_batch(tasks, job, log=log, concurrency=2, on_outcome=on_outcome, stop=stop)
    assert summary.interrupted and summary.ran == len(done) and summary.not_run == 10 - len(done)
    assert 3 <= len(done) <= 4  # the ones running when it was set still finished
    assert len(lines(tmp_path / "out.jsonl")) == len(done)


# -- record and replay -----------------------------------------------------------------------


def test_a_recorded_batch_replays_offline_line_for_line(tmp_path: Path, api: LibraryAPI,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = api.write_spec(tmp_path / "lib.json")
    src = tmp_path / "in.jsonl"
    rows = [{"id": n, "query": q} for n, q in enumerate(queries(5))] + [{"id": "prog", "program": program_for(9)}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tape = tmp_path / "tape"
    with ScriptedOpenAI(router=route) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("ATC_MODEL", "scripted")
        code = main(["batch", str(src), "--tools", str(spec), "--sandbox", "local", "--out", str(tmp_path / "a.jsonl"),
                     "--record", str(tape), "--json"])
    assert code == 0, capsys.readouterr()
    recorded = json.loads(capsys.readouterr().out)
    assert recorded["solved"] == 6 and len(api.requests) == 6
    # offline: no model configured, no model server, no API
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("ATC_MODEL")
    api.reset()
    code = main(["batch", str(src), "--tools", str(spec), "--sandbox", "local", "--out", str(tmp_path / "b.jsonl"),
                 "--replay", str(tape), "--json", "--concurrency", "2"])
    replayed = json.loads(capsys.readouterr().out)
    assert code == 0 and replayed["unrecorded"] == 0 and api.requests == []
    assert replayed["usage"] == recorded["usage"] and replayed["api_calls"] == recorded["api_calls"]
    a = {x["id"]: stable(x) for x in lines(tmp_path / "a.jsonl")}
    b = {x["id"]: stable(x) for x in lines(tmp_path / "b.jsonl")}
    assert a == b
    # the tape is small and diffable: one line per request
    assert len((tape / "model.jsonl").read_text().splitlines()) == 5
    assert len((tape / "tools.jsonl").read_text().splitlines()) == 6


def test_replay_names_what_was_not_recorded(tmp_path: Path, library: Any, api: LibraryAPI) -> None:
    tape = tmp_path / "tape"
    with ScriptedOpenAI(router=route) as server:
        from atc.llm.client import OpenAIModel

        client = OpenAIModel("scripted", base_url=server.base_url)
        solve_many(queries(2), library, client=client, sandbox="local", limits=LIMITS, record=tape)
    api.reset()
    # a task never recorded: the model has no answer for it
    [sol] = solve_many(queries(3)[2:], library, sandbox="local", limits=LIMITS, replay=tape)
    assert not sol.ok and sol.error is not None and sol.error["type"] == "ModelError"
    assert "no recorded model answer" in sol.error["message"]
    # a program calling something never recorded: a ToolError naming the call, counted
    recording = open_recording(replay=tape)
    assert recording is not None
    from sandbox.execute import run

    result = run("print(get_book(book_id=10)['title'])\nprint(get_book(book_id=21))", recording.wrap_toolset(
        Toolset([library])), LIMITS, sandbox="local")
    assert result.answer.startswith("A Wizard of Earthsea") and not result.ok
    assert result.error is not None and result.error.type == "ToolError"
    assert "no recorded answer for get_book(\"book_id\":21)" in result.error.message
    assert result.calls[-1].failure == "unrecorded" and recording.missing == ['tool call get_book("book_id":21)']
    assert api.requests == []


def test_repeated_requests_replay_in_recorded_order(tmp_path: Path) -> None:
    recording = open_recording(record=tmp_path / "tape")
    assert recording is not None
    with ScriptedOpenAI(["first", "second"]) as server:
        from atc.llm.client import OpenAIModel

        client = recording.wrap_client(OpenAIModel("m", base_url=server.base_url))
        asked = [{"role": "user", "content": "same question"}]
        assert [client.complete(asked).text, client.complete(asked).text] == ["first", "second"]
    replay = open_recording(replay=tmp_path / "tape")
    assert replay is not None
    model = replay.wrap_client(None)
    assert model.model == "m"  # the recording's model: no configuration needed
    assert [model.complete(asked).text, model.complete(asked).text] == ["first", "second"]
    with pytest.raises(ModelError, match="recorded 2 times, asked once more"):
        model.complete(asked)


class _EchoAPI:
    """An API that echoes the request headers into its body and a response header (a careless one)."""

    def __enter__(self) -> _EchoAPI:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = json.dumps({"headers": dict(self.headers)}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Echo-Key", self.headers.get("X-API-Key", ""))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spec(self) -> dict[str, Any]:
        return {"openapi": "3.0.3", "info": {"title": "echo", "version": "1"},
                "servers": [{"url": f"http://127.0.0.1:{self.server.server_address[1]}"}],
                "components": {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}},
                "security": [{"key": []}],
                "paths": {"/echo": {"get": {"operationId": "echo", "responses": {"200": {"description": "ok"}}}}}}


def test_secrets_never_reach_the_recording(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-token-0042-abcdef"
    monkeypatch.setenv("ECHO_KEY", secret)
    program = tmp_path / "p.py"
    program.write_text("r = echo()\nprint(r['headers'].get('X-API-Key') or r['headers'].get('X-Api-Key'))\n")
    with _EchoAPI() as api:
        spec = tmp_path / "echo.json"
        spec.write_text(json.dumps(api.spec()))
        code = main(["run", str(program), "--tools", str(spec), "--sandbox", "local", "--credential",
                     "key=env:ECHO_KEY", "--record", str(tmp_path / "tape"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and secret not in out["answer"]
    tape = (tmp_path / "tape" / "tools.jsonl").read_text()
    assert secret not in tape and '"x-echo-key":"[REDACTED]"' in tape  # the header is there, its value not
    assert secret[:8] not in tape
    # and the replay gives the program the same (redacted) answer, with no API
    monkeypatch.delenv("ECHO_KEY")
    code = main(["run", str(program), "--tools", str(spec), "--sandbox", "local", "--replay", str(tmp_path / "tape"),
                 "--json"])
    replayed = json.loads(capsys.readouterr().out)
    assert code == 0 and replayed["answer"] == out["answer"]
