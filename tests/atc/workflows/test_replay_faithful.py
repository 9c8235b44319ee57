"""Replay is faithful (issue 21, item 4): a recorded batch in which tasks need a repair replays
with the model server stopped and the API silent, and every result line is the recorded one.

The API answers objects whose keys are NOT in sorted order (as real APIs do), the programs print
whole objects (so the key order shows in the answer, in the failure and in the repair prompt), and
the first program of every task fails, so that the repair prompt, which quotes the tool's
response, must be found again in the recording.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from atc.cli import main
from atc.workflows.replay import stable
from tests.support.apis.library import BOOKS, LibraryAPI
from tests.support.fakes.openai_server import ScriptedOpenAI

BOOK_IDS = sorted(BOOKS)


def _route(body: dict[str, Any]) -> str:
    """First ask: a program that prints the whole book and then reads a field that is not there.
    The repair (the request quotes the failure): the same print and the right field."""
    text = json.dumps(body["messages"])
    n = int(re.search(r"\[task (\d+)\]", text).group(1))  # type: ignore[union-attr]
    book = BOOK_IDS[n % len(BOOK_IDS)]
    repair = any(m.get("role") == "assistant" for m in body["messages"])
    field = "title" if repair else "isbn"
    return f"```python\nb = get_book(book_id={book})\nprint(b)\nprint('task {n}:', b['{field}'])\n```"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_a_batch_with_repairs_replays_line_for_line_with_the_model_stopped(
        tmp_path: Path, api: LibraryAPI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert list(BOOKS[10]) != sorted(BOOKS[10])  # the API's own key order is not the sorted one
    spec = api.write_spec(tmp_path / "lib.json")
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": n, "query": f"[task {n}] What is the title of book "
                                                       f"{BOOK_IDS[n % len(BOOK_IDS)]}?"}) + "\n" for n in range(3)))
    tape = tmp_path / "tape"
    with ScriptedOpenAI(router=_route) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("ATC_MODEL", "scripted")
        code = main(["batch", str(src), "--tools", str(spec), "--sandbox", "local", "--out",
                     str(tmp_path / "a.jsonl"), "--record", str(tape), "--json"])
        url = server.base_url
    assert code == 0, capsys.readouterr()
    recorded = json.loads(capsys.readouterr().out)
    assert recorded["solved"] == 3
    a = _lines(tmp_path / "a.jsonl")
    assert all(len(x["attempts"]) == 2 for x in a)  # every task needed a repair
    book = BOOKS[BOOK_IDS[0]]
    first = next(x for x in a if x["id"] == 0)
    assert first["answer"].startswith(repr(book))  # printed in the API's key order
    # The model server is gone (its port answers nothing) and the API is not asked.
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    api.reset()
    code = main(["batch", str(src), "--tools", str(spec), "--sandbox", "local", "--out", str(tmp_path / "b.jsonl"),
                 "--replay", str(tape), "--json", "--concurrency", "2"])
    replayed = json.loads(capsys.readouterr().out)
    assert code == 0 and replayed["unrecorded"] == 0 and api.requests == []
    b = {x["id"]: stable(x) for x in _lines(tmp_path / "b.jsonl")}
    for line in a:
        assert stable(line) == b[line["id"]]
    # the tape keeps the API's key order too
    assert json.dumps(book)[1:30] in (tape / "tools.jsonl").read_text().replace('":', '": ').replace(',"', ', "')


def test_a_replay_keeps_the_redaction_count_and_mcp_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recorded echo of a secret replays with the same ``redacted`` count (it was counted once,
    when recorded), and an MCP tool's answer (no HTTP status) replays at all."""
    from atc.workflows.replay import open_recording
    from protocols.loaders import load_data
    from sandbox.api import Limits, Toolset
    from sandbox.execute import run
    from sandbox.gateway.mcp.connections import close_servers
    from sandbox.gateway.mcp.sources import load_source
    from tests.support.apis.leaky import LeakyAPI
    from tests.support.mcp_servers import SHOP

    key = "k3y-Zq9x-77ab12cd"
    monkeypatch.setenv("LEAKY_KEY", key)
    program = "print(leaky_leak(how='cursor'))\nprint(leaky_leak(how='header-name', with_headers=True).headers)\n" \
              "print(get_item(item_id=2))\n"
    tape = tmp_path / "tape"
    try:
        with LeakyAPI() as api:
            shop = load_source(SHOP)[0]
            tools = Toolset([load_data(api.spec(), name="leaky"), shop], credentials={"HeaderKey": "env:LEAKY_KEY"})
            recording = open_recording(record=tape)
            assert recording is not None
            recorded = run(program, recording.wrap_toolset(tools), Limits(timeout=20), sandbox="local")
        assert recorded.ok, recorded.error
        replaying = open_recording(replay=tape)
        assert replaying is not None
        replayed = run(program, replaying.wrap_toolset(tools), Limits(timeout=20), sandbox="local")
    finally:
        close_servers()
    assert replayed.ok, replayed.error
    assert replayed.answer == recorded.answer and key not in recorded.answer
    assert [c.redacted for c in replayed.calls] == [c.redacted for c in recorded.calls] == [1, 1, 0]
    assert replaying.missing == []
