"""Typed answers (issue 33, item 2): ``final_answer(value)`` in the sandbox, checked on the host
against the schema asked for; a mismatch is a failed attempt that the repair loop fixes, shown
the validation error; the solution carries the typed value, and ``solve_many`` results become a
DataFrame.

The model is the scripted OpenAI-compatible server through the real ``openai`` client; the tools
are Python functions (tests/support/fakes/functions.py) run through the real local sandbox.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

import atc
from atc.cli import main
from atc.llm.client import OpenAIModel
from atc.loop.answers import AnswerSpec
from atc.loop.solving import solve
from atc.workflows.many import solve_many
from tests.support.fakes import functions as fx
from tests.support.fakes.openai_server import ScriptedOpenAI, call
from tests.support.strategies import client as client
from tests.support.strategies import library as library
from tests.support.strategies import server as server

ATC = Path(sys.executable).with_name("atc")


class Stock(BaseModel):
    sku: str
    count: int


class Report(BaseModel):
    items: list[Stock]
    total: int


@dataclasses.dataclass
class Low:
    sku: str
    count: int


def fence(code: str) -> str:
    return f"```python\n{code.strip()}\n```\n"


WRONG = """
items = list_items(limit=2)
final_answer({"items": [{"sku": i["sku"], "count": str(i["count"])} for i in items], "total": len(items)})
"""
RIGHT = """
items = list_items(limit=2)
print("notes are fine")
final_answer({"items": [{"sku": i["sku"], "count": i["count"]} for i in items], "total": sum(i["count"] for i in items)})
"""


def test_a_mismatch_is_repaired_with_the_validation_error(server: ScriptedOpenAI, client: OpenAIModel) -> None:
    server.push(fence(WRONG), fence(RIGHT))
    s = solve("The two items with the fewest units, and their total", fx.INVENTORY, client=client, answer=Report,
              sandbox="local")
    assert s.ok, s.error
    assert s.value == Report(items=[Stock(sku="C-2", count=0), Stock(sku="A-1", count=3)], total=3)
    assert isinstance(s.value, Report) and s.steps == 2 and s.failures == {"bad_answer": 1}
    first = s.attempts[0]
    assert first.error is not None and first.error["type"] == "AnswerError" and first.error["line"] == 2
    # the first prompt told the model about final_answer and the schema
    opening = server.request_text(0)
    assert "final_answer(value)" in opening and '"total"' in opening and "items: [{sku: str, count: int}]" in opening
    # the repair prompt shows the validation error with where it is, at the final_answer line
    repair = server.request_text(1)
    assert "AnswerError" in repair and "at $.items[1].count: '3' is not of type 'integer'" in repair
    assert "Line 2: final_answer(" in repair and "does not match Report" in repair
    doc = s.to_dict()
    assert doc["value"] == {"items": [{"sku": "C-2", "count": 0}, {"sku": "A-1", "count": 3}], "total": 3}
    assert doc["answer"] == "notes are fine\n"
    json.dumps(doc)


def test_no_final_answer_is_a_failed_attempt(server: ScriptedOpenAI, client: OpenAIModel) -> None:
    server.push(fence("print(list_items(limit=1))"), fence("final_answer([{'sku': 'C-2', 'count': 0}])"))
    s = solve("the item with the fewest units", fx.INVENTORY, client=client, answer=list[Low], sandbox="local")
    assert s.ok and s.value == [Low("C-2", 0)]
    assert s.attempts[0].error["message"] == "the program did not hand its result to final_answer(value)"  # type: ignore[index]
    assert s.answer == '[{"sku": "C-2", "count": 0}]'  # nothing printed: the value in words


def test_react_finishes_with_a_typed_value(server: ScriptedOpenAI, client: OpenAIModel) -> None:
    from tests.support.fakes.openai_server import Reply

    server.push(Reply(tool_calls=(call("list_items", {"limit": 1}),)),
                Reply(tool_calls=(call("finish", {"value": {"sku": "C-2", "count": "zero"}}),)),
                Reply(tool_calls=(call("finish", {"value": {"sku": "C-2", "count": 0}}),)))
    s = solve("the item with the fewest units", fx.INVENTORY, client=client, answer=Stock, strategy="react",
              sandbox="local")
    assert s.ok and s.value == Stock(sku="C-2", count=0), s.error
    finish = next(t for t in server.requests[0]["tools"] if t["function"]["name"] == "finish")
    assert finish["function"]["parameters"]["required"] == ["value"]
    assert "'zero' is not of type 'integer'" in server.request_text(2)
    assert s.failures.get("bad_answer") == 1


def test_codeact_ends_with_the_snippet_that_hands_a_value(server: ScriptedOpenAI, client: OpenAIModel) -> None:
    server.push(fence("low = list_items(limit=1)\nprint(low)"), "Final answer: C-2",
                fence("final_answer({'sku': low[0]['sku'], 'count': low[0]['count']})"))
    s = solve("the item with the fewest units", fx.INVENTORY, client=client, answer=Stock, strategy="codeact",
              sandbox="local")
    assert s.ok and s.value == Stock(sku="C-2", count=0), s.error
    assert s.steps == 3  # a text answer does not end it when a value was asked for


def test_run_and_solve_many_with_a_json_schema(server: ScriptedOpenAI, client: OpenAIModel, tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"sku": {"type": "string"}, "count": {"type": "integer"}},
              "required": ["sku", "count"], "additionalProperties": False}
    ran = atc.run("final_answer({'sku': 'B-7', 'count': get_item(sku='B-7')['count']})\n", fx.INVENTORY,
                  answer=schema, sandbox="local")
    assert ran.ok and ran.value == {"sku": "B-7", "count": 24}
    bad = atc.run("final_answer({'sku': 'B-7'})\n", fx.INVENTORY, answer=schema, sandbox="local")
    assert not bad.ok and bad.error is not None and bad.error.type == "AnswerError" and bad.error.line == 1
    assert "'count' is a required property" in bad.error.message

    def route(body: dict[str, object]) -> str:
        text = json.dumps(body["messages"])
        sku = "A-1" if "teapot" in text else "B-7"
        return fence(f"final_answer({{'sku': '{sku}', 'count': get_item(sku='{sku}')['count']}})")

    server.router = route
    solutions = solve_many(["how many teapots", "how many cups"], fx.INVENTORY, client=client, answer=Stock,
                           ids=["tea", "cup"], sandbox="local", concurrency=2)
    assert [s.value for s in solutions] == [Stock(sku="A-1", count=3), Stock(sku="B-7", count=24)]
    frame = solutions.to_pandas()
    assert list(frame.index) == ["tea", "cup"] and list(frame["count"]) == [3, 24]
    assert list(frame.columns[:3]) == ["sku", "count", "ok"] and frame["ok"].all()


def test_answer_schemas_that_are_none_are_refused(tmp_path: Path) -> None:
    with pytest.raises(atc.errors.UsageError, match="not a valid JSON Schema"):
        AnswerSpec.of({"type": "objekt"})
    with pytest.raises(atc.errors.UsageError, match="says nothing"):
        AnswerSpec.of(object)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    prog = tmp_path / "p.py"
    prog.write_text("final_answer(1)\n")
    assert main(["run", str(prog), "--tools", "py:tests.support.fakes.functions:INVENTORY", "--answer-schema", str(bad),
                 "--sandbox", "local"]) == 2


def test_the_cli_takes_an_answer_schema(server: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    schema = tmp_path / "stock.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"sku": {"type": "string"},
                                                                   "count": {"type": "integer"}},
                                  "required": ["sku", "count"]}))
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    server.push(fence("print('looking'); final_answer({'sku': 'B-7', 'count': 24})"))
    code = main(["solve", "how many cups", "--tools", "py:tests.support.fakes.functions:INVENTORY", "--answer-schema",
                 str(schema), "--model", "scripted-model", "--sandbox", "local", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["value"] == {"sku": "B-7", "count": 24} and doc["answer"] == "looking\n"
    server.push(fence("final_answer({'sku': 'B-7', 'count': 24})"))
    code = main(["solve", "how many cups", "--tools", "py:tests.support.fakes.functions:INVENTORY", "--answer-schema",
                 str(schema), "--model", "scripted-model", "--sandbox", "local"])
    assert code == 0 and json.loads(capsys.readouterr().out) == {"sku": "B-7", "count": 24}
    prog = tmp_path / "p.py"
    prog.write_text("final_answer({'sku': 'B-7', 'count': 'many'})\n")
    code = main(["run", str(prog), "--tools", "py:tests.support.fakes.functions:INVENTORY", "--answer-schema", str(schema),
                 "--sandbox", "local", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["error"]["type"] == "AnswerError" and doc["value"] == {"sku": "B-7", "count": "many"}
