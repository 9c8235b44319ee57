"""``atc probe`` as a user runs it: real subprocesses, the catalog API on 127.0.0.1.

End to end: ``atc probe`` writes the documented collection, ``atc tools import`` reads it back,
``atc run`` executes a program that uses fields only probing learnt (and the example program
probing wrote). Also: ``--json`` purity, progress on stderr, exit codes, ``--update``, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.apis.catalog import SECRET, CatalogAPI

ATC = Path(sys.executable).with_name("atc")


@pytest.fixture()
def catalog() -> Iterator[CatalogAPI]:
    with CatalogAPI(slow=2.5) as api:
        yield api


def atc(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ATC), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_probe_then_import_then_run_a_program_using_learnt_fields(catalog: CatalogAPI, tmp_path: Path) -> None:
    spec = catalog.write_spec(tmp_path / "catalog.json")
    out = tmp_path / "out"
    done = atc("probe", str(spec), "--no-llm", "--out", str(out), "--request-timeout", "1.0",
               "--credential", "key=env:CATALOG_KEY", "--json", env={"CATALOG_KEY": SECRET})
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)  # exactly one JSON document
    assert done.stderr == ""  # no progress lines with --json
    assert set(doc) >= {"tools", "calls"} and doc["documented"] == 7
    assert doc["calls"] == len(catalog.requests)
    assert {p.name for p in out.iterdir()} == {"openapi.json", "probe.md", "report.json"}
    assert json.loads((out / "report.json").read_text())["documented"] == 7

    imported = atc("tools", "import", str(out / "openapi.json"), "--name", "catalog", "--json")
    assert imported.returncode == 0, imported.stderr
    shown = json.loads(atc("tools", "show", "get_maker", "--json").stdout)
    protocol = shown[0] if isinstance(shown, list) else shown.get("tools", [shown])[0]
    assert protocol["response_schema"]["properties"]["country"]["type"] == "string"
    example = protocol["examples"][0]
    assert example["args"]["maker_ref"].startswith("mk-") and "get_maker(maker_ref=" in example["program"]

    # A program that needs fields the spec never described (maker.maker_ref, country).
    program = tmp_path / "uses_learnt.py"
    program.write_text(
        "item = get_item(sku=list_shelf_items(shelf_id=list_shelves()['shelves'][0]['shelf_id'])['items'][0]['sku'])\n"
        "print(get_maker(maker_ref=item['maker']['maker_ref'])['country'])\n")
    ran = atc("run", str(program), "--tools", "catalog", "--base-url", catalog.url, "--sandbox", "local", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads(ran.stdout)["answer"].strip() == "NG"
    # And the example program probing wrote runs as it is.
    (tmp_path / "example.py").write_text(example["program"])
    ran = atc("run", str(tmp_path / "example.py"), "--tools", "catalog", "--base-url", catalog.url,
              "--sandbox", "local")
    assert ran.returncode == 0 and ran.stdout.strip() in ("Okafor and Sons", "Lindqvist Works"), ran.stderr


def test_human_output_progress_and_markdown(catalog: CatalogAPI, tmp_path: Path) -> None:
    spec = catalog.write_spec(tmp_path / "catalog.json", only=("/shelves", "/shelves/{shelf_id}/items", "/items"))
    done = atc("probe", str(spec), "--no-llm", "--out", str(tmp_path / "out"))
    assert done.returncode == 0 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[0].startswith("[1/3] skipped") and "create_item" in lines[0]
    assert any("documented list_shelf_items" in line and "<- list_shelves" in line for line in lines)
    assert "documented 2 of 3 tools with 2 requests" in done.stderr
    page = (tmp_path / "out" / "probe.md").read_text()
    assert "```mermaid" in page and "list_shelves -->|shelf_id| list_shelf_items" in page
    assert "## list_shelf_items" in page and "## Not documented" in page and "POST may change data" in page
    assert "Traceback" not in done.stderr


def test_exit_codes(catalog: CatalogAPI, tmp_path: Path) -> None:
    broken = catalog.write_spec(tmp_path / "broken.json", only=("/broken", "/garbage"))
    done = atc("probe", str(broken), "--no-llm", "--json")
    assert done.returncode == 1 and json.loads(done.stdout)["documented"] == 0  # it documented nothing
    missing = atc("probe", str(tmp_path / "nope.json"), "--json")
    assert missing.returncode == 2 and json.loads(missing.stdout)["ok"] is False and "Traceback" not in missing.stderr
    bad = atc("probe", str(broken), "--per-tool", "0")
    assert bad.returncode == 2 and "--per-tool" in bad.stderr
    spec = catalog.write_spec(tmp_path / "catalog.json")
    unset = atc("probe", str(spec), "--credential", "key=env:NOT_SET_ANYWHERE", "--no-llm")
    assert unset.returncode == 2 and "NOT_SET_ANYWHERE" in unset.stderr


def test_update_writes_learnt_schemas_into_the_store(catalog: CatalogAPI, tmp_path: Path) -> None:
    spec = catalog.write_spec(tmp_path / "catalog.json", only=("/shelves", "/shelves/{shelf_id}/items"))
    assert atc("tools", "import", str(spec), "--name", "cat").returncode == 0
    before = json.loads(atc("tools", "show", "cat", "--json").stdout)
    assert [t["response_schema"] for t in before["tools"]] == [None, None]
    done = atc("probe", "cat", "--no-llm", "--update")
    assert done.returncode == 0, done.stderr
    after = json.loads(atc("tools", "show", "cat", "--json").stdout)
    learnt = {t["name"]: t for t in after["tools"]}
    items = learnt["list_shelf_items"]["response_schema"]["properties"]["items"]
    assert items["items"]["properties"]["sku"]["type"] == "string"
    assert learnt["list_shelf_items"]["examples"][0]["args"]["shelf_id"].startswith("sh-")
    assert learnt["list_shelf_items"]["parameters"]["properties"]["shelf_id"]["example"].startswith("sh-")


def test_ctrl_c_writes_what_was_learnt(catalog: CatalogAPI, tmp_path: Path) -> None:
    catalog.delay = 0.4  # every answer takes a while, so the probe is still running when interrupted
    spec = catalog.write_spec(tmp_path / "catalog.json")
    out = tmp_path / "out"
    proc = subprocess.Popen([str(ATC), "probe", str(spec), "--no-llm", "--out", str(out), "--json",
                             "--request-timeout", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(catalog.requests) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    doc = json.loads(stdout)
    assert doc["interrupted"] is True and doc["documented"] >= 1
    on_disk = json.loads((out / "report.json").read_text())
    assert on_disk["interrupted"] is True and on_disk["documented"] == doc["documented"]
    # A re-run does not ask again what the interrupted one learnt.
    catalog.delay = 0.0
    sent = len(catalog.requests)
    catalog.reset()
    again = atc("probe", str(spec), "--no-llm", "--json", "--request-timeout", "1.0")
    assert json.loads(again.stdout)["cached"] >= doc["documented"]
    assert len(catalog.requests) < sent + 20


def test_model_mode_from_the_environment(catalog: CatalogAPI, tmp_path: Path) -> None:
    from tests.support.fakes.openai_server import ScriptedOpenAI

    spec = catalog.write_spec(tmp_path / "catalog.json", only=("/shelves",))
    reply = "Question: Which shelves are there?\n```python\nprint(list_shelves()['count'])\n```"
    with ScriptedOpenAI(router=lambda body: reply) as model:
        done = atc("probe", str(spec), "--sandbox", "local", "--json",
                   env={"OPENAI_BASE_URL": model.base_url, "ATC_MODEL": "scripted"})
        asked = len(model.requests)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["mode"] == "model" and doc["model"] == "scripted" and doc["usage"]["llm_calls"] == asked == 1
    shelves = doc["tools"][0]
    assert shelves["source"] == "model" and shelves["examples"][0]["question"] == "Which shelves are there?"
    assert "list_shelves()['count']" in shelves["examples"][0]["program"]
