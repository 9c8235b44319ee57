"""Python functions of the host as tools (issue 33, item 1): their protocols, and their calls
through the gateway on both backends, mixed with an HTTP API in one program.

The functions are in ``tests/support/fakes/functions.py``; the HTTP API is the library fixture API.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import atc
from protocols.functions import FUNCTION_METHOD, functions_collection
from protocols.loaders import load_spec
from protocols.render import render_compact, render_full
from protocols.writes import judge
from sandbox.api import Limits, Toolset
from tests.support.apis.library import SECRET, LibraryAPI
from tests.support.fakes import functions as fx

ATC = Path(sys.executable).with_name("atc")


def _docker_ready() -> bool:
    try:
        from sandbox.docker.engine import docker_available

        return bool(docker_available())
    except Exception:
        return False


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox(request: pytest.FixtureRequest) -> str:
    if request.param == "docker" and not _docker_ready():
        pytest.skip("no Docker engine or no sandbox image")
    return str(request.param)


@pytest.fixture(autouse=True)
def _fresh_stock() -> None:
    fx.MOVES.clear()
    fx.STOCK["A-1"].place = fx.Place("A", 2)


# -- protocols --------------------------------------------------------------------------------


def test_a_signature_and_docstring_become_the_protocol() -> None:
    c = functions_collection(fx.INVENTORY)
    assert c.name == "functions" and c.kind == "python"
    listed, got, moved, supplier = c.tools
    assert [t.method for t in c.tools] == [FUNCTION_METHOD] * 4
    assert moved.path == "tests.support.fakes.functions.move_item"
    # docstring: first paragraph is the description, per-parameter notes
    assert moved.description == "Move items to another place (a write)."
    props = moved.parameters["properties"]
    assert props["sku"] == {"type": "string", "description": "the item"}
    assert props["count"] == {"type": "integer", "description": "how many", "default": 1}
    # a dataclass, with its own docstring's notes
    assert props["to"]["type"] == "object" and props["to"]["required"] == ["aisle"]
    assert props["to"]["properties"]["shelf"] == {"type": "integer", "description": "the shelf's number, from the floor",
                                                   "default": 1}
    assert moved.required == ["sku", "to"] and moved.parameters["additionalProperties"] is False
    # Optional TypedDict, a default; a pydantic model with an enum and an Optional dataclass as the result
    assert listed.parameters["properties"]["filter"]["anyOf"][1] == {"type": "null"}
    typed = listed.parameters["properties"]["filter"]["anyOf"][0]
    assert typed["properties"] == {"min_count": {"type": "integer"}, "unit": {"type": "string"}}
    assert "required" not in typed  # total=False
    item = listed.response_schema["items"]  # type: ignore[index]
    assert item["properties"]["unit"]["enum"] == ["piece", "box"]
    assert item["properties"]["sku"]["description"] == "the stock-keeping unit"
    assert "$ref" not in json.dumps(item) and '"title"' not in json.dumps(item)
    # the decorator's description and marks; the async function is a tool like any
    assert got.description == "One item by its SKU." and got.read_only is True and listed.read_only is True
    assert supplier.description == "The supplier of an item (an async client)." and supplier.read_only is None
    # rendered like any other tool
    compact = render_compact(c.tools)
    assert "move_item(sku: str, to: {aisle: str, shelf?: int}, count: int = 1)" in compact
    assert "list_items(filter: {min_count: int, unit: str} = None, limit: int = 10) -> [{sku: str" in compact
    assert "    to: where they go" in compact
    assert "to: the place" not in render_full(moved) and "where they go" in render_full(moved)


def test_the_write_rule_reads_the_read_only_mark() -> None:
    c = functions_collection(fx.INVENTORY)
    verdicts = {t.name: judge(t, c) for t in c.tools}
    assert not verdicts["list_items"].write and verdicts["list_items"].marked
    assert verdicts["move_item"].write and "read_only=True" in verdicts["move_item"].reason
    assert verdicts["supplier_of"].write  # unmarked: a function may change anything
    @atc.tool(read_only=False)
    def rewrite(table: str) -> int:
        """Rewrite a table."""
        return 0

    marked = functions_collection([rewrite])
    assert judge(marked.tools[0], marked).write and judge(marked.tools[0], marked).marked


def test_what_is_handed_over_is_read_as_a_user_means_it() -> None:
    # an object: its public methods, in a collection named after its class
    obj = functions_collection([fx.WAREHOUSE])
    assert obj.name == "warehouse" and [t.name for t in obj.tools] == ["open_door"]
    # a dict's keys name the tools; a bound method marked by the decorator is wrapped, keeping its signature
    named = functions_collection([{"stock": fx.list_items}, atc.tool(name="knock")(fx.WAREHOUSE.open_door)])
    assert [t.name for t in named.tools] == ["stock", "knock"]
    assert list(named.tools[1].properties) == ["door"] and named.tools[1].path.endswith("Warehouse.open_door")
    with pytest.raises(atc.errors.UsageError, match="lambda"):
        functions_collection([lambda x: x])
    with pytest.raises(atc.errors.UsageError, match="give an instance"):
        functions_collection([fx.Warehouse])
    @atc.tool(name="audit")
    def second_audit() -> str:
        """Another audit."""
        return ""

    with pytest.raises(atc.errors.UsageError, match="two tool functions are named 'audit'"):
        functions_collection([fx.audit, second_audit])
    with pytest.raises(atc.errors.UsageError, match="not stored"):
        from protocols.store import Store

        Store(Path(os.environ["ATC_HOME"])).add(named)


# -- calls through the gateway, on both backends ----------------------------------------------


MIXED = """
low = list_items(filter={"min_count": 1}, limit=5)
item = get_item(sku=low[0]["sku"])
author = search_authors(name="lem")["results"][0]
books = list_author_books(author_id=author["id"])["books"]
moved = move_item(sku=item["sku"], to={"aisle": "Z", "shelf": 3}, count=len(books))
who = supplier_of(sku=item["sku"])
print(item["name"], item["place"], moved["to"], moved["unit"], who["supplier"], author["name"])
"""


def test_a_program_mixes_functions_with_an_http_api(sandbox: str, api: LibraryAPI, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIBRARY_KEY", SECRET)
    library = load_spec(api.write_spec(tmp_path / "library.json"))
    r = atc.run(MIXED, Toolset([library, functions_collection(fx.INVENTORY)],
                               credentials={"api_key": "env:LIBRARY_KEY"}), sandbox=sandbox)
    assert r.ok, r.error
    assert r.answer == ("teapot {'aisle': 'A', 'shelf': 2} {'aisle': 'Z', 'shelf': 3} piece acme "
                        "Stanislaw Lem\n")
    assert [(c.tool, c.method, c.status) for c in r.calls] == [
        ("list_items", "PYTHON", None), ("get_item", "PYTHON", None), ("search_authors", "GET", 200),
        ("list_author_books", "GET", 200), ("move_item", "PYTHON", None), ("supplier_of", "PYTHON", None)]
    # the dataclass argument reached the function as a Place; the call log keeps the JSON
    assert fx.MOVES == [("A-1", 2)] and fx.STOCK["A-1"].place == fx.Place("Z", 3)
    assert r.calls[4].args == {"sku": "A-1", "to": {"aisle": "Z", "shelf": 3}, "count": 2}
    assert r.calls[4].path == "tests.support.fakes.functions.move_item" and r.calls[4].line == 6


def test_arguments_are_validated_before_the_function_runs(sandbox: str) -> None:
    program = """
try:
    move_item(sku="A-1", to={"aisle": "Z", "shelf": "high"})
except ToolError as e:
    print(e)
move_item(sku="A-1", to={"aisle": "Z"}, colour="red")
"""
    r = atc.run(program, fx.INVENTORY, sandbox=sandbox)
    assert fx.MOVES == []  # neither call reached the function
    assert r.answer == "move_item: argument 'to.shelf': 'high' is not of type 'integer'\n"
    assert not r.ok and r.error is not None
    assert (r.error.type, r.error.tool, r.error.line) == ("ToolError", "move_item", 6)
    assert "colour" in r.error.message
    assert [c.failure for c in r.calls] == ["arguments", "arguments"]


def test_an_exception_is_the_tools_error_without_host_details(sandbox: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fx.SECRET_ENV, "wh-secret-31337")
    monkeypatch.setenv("ANY_KEY", "wh-secret-31337")
    tools = Toolset([functions_collection(fx.MISBEHAVING)], credentials={"header:X-Key": "env:ANY_KEY"})
    r = atc.run("print(token_echo(prefix='t='))\nledger = read_ledger(year=2024)\n", tools, sandbox=sandbox)
    assert not r.ok and r.error is not None
    assert (r.error.type, r.error.tool, r.error.line) == ("ToolError", "read_ledger", 2)
    assert r.error.message == "read_ledger: FileNotFoundError: [Errno 2] No such file or directory: '.../2024.csv'"
    everything = json.dumps(r.to_dict())
    assert "/tmp/warehouse" not in everything and "functions.py" not in everything  # no host path, no traceback
    assert "wh-secret-31337" not in everything and r.calls[0].redacted == 1  # the run's secret, taken out
    raised = atc.run("token_echo(prefix='raise')\n", tools, sandbox=sandbox)
    assert raised.error is not None and raised.error.tool == "token_echo"
    assert "wh-secret-31337" not in json.dumps(raised.to_dict()) and "PermissionError: token" in raised.error.message


def test_a_slow_function_is_stopped_by_the_runs_deadline(sandbox: str) -> None:
    started = time.monotonic()
    r = atc.run("print('before')\naudit(seconds=30)\n", fx.MISBEHAVING, Limits(timeout=1.5), sandbox=sandbox)
    took = time.monotonic() - started
    assert took < 6, took
    assert not r.ok and r.error is not None and r.error.type == "Timeout"
    assert r.error.tool == "audit" and r.error.line == 2 and "waiting for audit" in r.error.message
    assert r.answer == "before\n" and r.calls[0].failure == "timeout"


def test_a_result_that_is_not_json_is_a_clear_error(sandbox: str) -> None:
    r = atc.run("connection()\n", fx.MISBEHAVING, sandbox=sandbox)
    assert not r.ok and r.error is not None and r.error.tool == "connection"
    assert r.error.message == "connection: the function's result is not JSON data: $: a value of type lock is not JSON data"
    assert r.calls[0].failure == "response"


def test_extra_query_and_a_missing_function_are_refused() -> None:
    r = atc.run("get_item(sku='A-1', extra_query={'x': 1})\n", fx.INVENTORY, sandbox="local")
    assert r.error is not None and "extra_query is for HTTP tools" in r.error.message
    stored = atc.Collection.from_dict(functions_collection(fx.INVENTORY).to_dict())  # what a store would keep
    with pytest.raises(atc.errors.ConfigError, match="lists Python functions but holds none"):
        atc.run("get_item(sku='A-1')\n", [stored], sandbox="local")


def test_functions_are_called_concurrently_from_concurrent_runs() -> None:
    fx.ACTIVE.update(now=0, most=0)
    results: list[atc.ExecutionResult] = []

    def one() -> None:
        results.append(atc.run("print(busy(seconds=0.4))\n", [fx.busy], sandbox="local"))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.ok for r in results), [r.error for r in results]
    assert fx.ACTIVE["most"] >= 3  # the calls overlapped on the host


# -- the command line --------------------------------------------------------------------------


def test_py_sources_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "mytools.py").write_text(
        "def double(x: int) -> int:\n    '''Twice x.'''\n    return 2 * x\n\n"
        "class Counter:\n    def bump(self, by: int = 1) -> int:\n        '''Count up.'''\n        return by\n\n"
        "COUNTER = Counter()\n")
    (tmp_path / "prog.py").write_text("print(double(x=21), bump(by=2))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    done = subprocess.run([str(ATC), "run", "prog.py", "--tools", "py:mytools:double", "--tools", "py:mytools:COUNTER",
                           "--sandbox", "local", "--json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    doc = json.loads(done.stdout)
    assert done.returncode == 0 and doc["answer"] == "42 2\n", done.stderr
    assert [(c["tool"], c["method"], c["path"]) for c in doc["calls"]] == [
        ("double", "PYTHON", "mytools.double"), ("bump", "PYTHON", "mytools.Counter.bump")]
    for source, words in (("py:nosuch:f", "no module named 'nosuch'"), ("py:mytools:triple", "has no 'triple'"),
                          ("py:mytools:Counter", "is a class"), ("py:my tools", "not py:PACKAGE.MODULE:NAME")):
        bad = subprocess.run([str(ATC), "run", "prog.py", "--tools", source, "--sandbox", "local"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2 and words in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    imported = subprocess.run([str(ATC), "tools", "import", "py:mytools:double"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
    assert imported.returncode == 2 and "they are not imported" in imported.stderr


def test_a_langchain_tool_is_a_tool_function() -> None:
    from langchain_core.tools import tool as lc_tool

    @lc_tool
    def word_count(text: str, unique: bool = False) -> int:
        """Count the words of a text."""
        return len(set(text.split())) if unique else len(text.split())

    c = functions_collection([word_count, fx.get_item])
    counted = c.tools[0]
    assert (counted.name, counted.description) == ("word_count", "Count the words of a text.")
    assert counted.required == ["text"] and counted.properties["unique"]["type"] == "boolean"
    r = atc.run("print(word_count(text='a b a', unique=True), get_item(sku='B-7')['count'])\n", [word_count, fx.get_item],
                sandbox="local")
    assert r.ok and r.answer == "2 24\n", r.error
    refused = atc.run("word_count(txt='a')\n", [word_count], sandbox="local")
    assert refused.error is not None and refused.calls[0].failure == "arguments"  # validated before LangChain ran


# -- the write policy and ledger (issue 34) ------------------------------------------------------


def test_read_only_functions_run_under_writes_deny_and_the_others_are_refused(sandbox: str) -> None:
    program = ("print(len(list_items()))\nprint(get_item(sku='B-7')['name'])\n"
               "try:\n    move_item(sku='A-1', to={'aisle': 'Z'})\nexcept ToolError as e:\n    print('refused:', e)\n"
               "print(supplier_of(sku='A-1'))\n")
    r = atc.run(program, fx.INVENTORY, sandbox=sandbox, writes="deny")
    assert not r.ok and r.error is not None and r.error.tool == "supplier_of"  # unmarked: a write, refused
    assert r.answer.startswith("3\ncup\nrefused:") and "read-only" in r.answer
    assert [(c.tool, c.write, c.outcome) for c in r.calls] == [
        ("list_items", False, None), ("get_item", False, None), ("move_item", True, "refused"),
        ("supplier_of", True, "refused")]
    assert fx.MOVES == []  # the write never reached the function


def test_a_function_write_is_made_once_across_a_repair() -> None:
    from atc.llm.client import OpenAIModel
    from atc.loop.solving import solve
    from tests.support.fakes.openai_server import ScriptedOpenAI

    first = "```python\nmoved = move_item(sku='A-1', to={'aisle': 'Q', 'shelf': 2})\nprint(moved['missing'])\n```"
    second = "```python\nmoved = move_item(sku='A-1', to={'aisle': 'Q', 'shelf': 2})\nprint(moved['moved'])\n```"
    with ScriptedOpenAI([first, second]) as server:
        client = OpenAIModel("scripted", base_url=server.base_url, backoff=0.01)
        s = solve("Move A-1 to aisle Q shelf 2", fx.INVENTORY, client=client, sandbox="local")
    assert s.ok and s.answer == "1\n", s.error
    assert fx.MOVES == [("A-1", 1)]  # the repair's identical write was not made again
    assert [c.outcome for c in s.calls] == ["replayed"]


def test_writes_deny_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "p.py").write_text("print(get_item(sku='A-1')['name'])\nmove_item(sku='A-1', to={'aisle': 'Z'})\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    done = subprocess.run([str(ATC), "run", "p.py", "--tools", "py:tests.support.fakes.functions:INVENTORY", "--writes", "deny",
                           "--sandbox", "local", "--json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    doc = json.loads(done.stdout)
    assert done.returncode == 1 and doc["answer"] == "teapot\n" and doc["error"]["tool"] == "move_item"
    assert [(c["tool"], c["write"], c.get("outcome")) for c in doc["calls"]] == [
        ("get_item", False, None), ("move_item", True, "refused")]


def test_a_session_and_solve_many_take_functions() -> None:
    with atc.session([fx.get_item, fx.WAREHOUSE], sandbox="local") as s:
        s.run("item = get_item(sku='B-7')")
        assert s.run("print(item['count'], open_door(door=1))").answer == "24 1\n"
    from atc.llm.client import OpenAIModel
    from tests.support.fakes.openai_server import ScriptedOpenAI

    with ScriptedOpenAI(router=lambda body: "```python\nprint(get_item(sku='A-1')['name'])\n```") as server:
        client = OpenAIModel("scripted", base_url=server.base_url, backoff=0.01)
        done = atc.solve_many(["name of A-1", "again"], [fx.get_item], client=client, sandbox="local", concurrency=2)
    assert [s.answer for s in done] == ["teapot\n", "teapot\n"]
