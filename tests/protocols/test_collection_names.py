"""What a user meets first with real servers (issue 21, items 10, 11 and 13), against an API on
127.0.0.1 that behaves that way:

- a folder named like a stored collection no longer hides it: atc says both exist and which one it
  took (``./NAME`` picks the folder);
- ``atc run`` that gets a 401 says what to do, fitted to the spec: the scheme to pass, or the
  placement syntax when the spec declares none, or that the credential given was refused;
- a program may use the API's own parameter names (``userId``) for atc's (``user_id``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from atc.cli import main
from atc.loop.checks import check_program
from protocols.loaders import load_data
from sandbox.api import Toolset
from sandbox.gateway.core import Gateway
from tests.support.apis.leaky import LeakyAPI


@pytest.fixture()
def leaky() -> Iterator[LeakyAPI]:
    with LeakyAPI(prefix="kinto") as api:
        yield api


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _write(path: Path, doc: object) -> str:
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return str(path)


# -- item 10 --------------------------------------------------------------------------------------


def test_a_folder_named_like_a_stored_collection_does_not_hide_it(
        leaky: LeakyAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _write(tmp_path / "spec.json", leaky.spec())
    assert _cli(["tools", "import", spec, "--name", "kinto"], capsys)[0] == 0
    work = tmp_path / "work"
    (work / "kinto").mkdir(parents=True)  # e.g. a checkout of the server's source
    (work / "kinto" / "README.md").write_text("the kinto server")
    monkeypatch.chdir(work)
    program = _write(work / "p.py", "print(kinto_whoami())\n")
    code, out, err = _cli(["run", program, "--tools", "kinto", "--sandbox", "local"], capsys)
    assert code == 0, err
    assert "'kinto' is both a stored collection and a folder here; using the stored collection" in err
    assert "./kinto" in err and "key_given" in out
    code, out, err = _cli(["run", program, "--tools", "./kinto", "--sandbox", "local"], capsys)
    assert code == 2 and "stored collection" not in err  # the path, as written: it holds no API


def test_a_word_that_is_only_a_path_is_the_path(leaky: LeakyAPI, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "kinto.json", leaky.spec())
    program = _write(tmp_path / "p.py", "print(kinto_whoami()['key_given'])\n")
    code, out, err = _cli(["run", program, "--tools", "kinto.json", "--sandbox", "local"], capsys)
    assert code == 0 and out == "False\n" and "note" not in err


# -- item 11 --------------------------------------------------------------------------------------


PRIVATE = "print(kinto_private())\n"


def test_a_401_without_a_credential_names_the_spec_scheme(leaky: LeakyAPI, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    spec = _write(tmp_path / "spec.json", leaky.spec())
    code, out, err = _cli(["run", _write(tmp_path / "p.py", PRIVATE), "--tools", spec, "--sandbox", "local"], capsys)
    assert code == 1 and "HTTP 401" in err
    assert "hint: kinto_private got HTTP 401 and no credential was given for 'kinto'" in err
    assert "HeaderKey (header X-API-Key)" in err and "--credential HeaderKey=env:VAR" in err


def test_a_401_from_a_spec_without_schemes_gives_the_placement_syntax(
        leaky: LeakyAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _write(tmp_path / "spec.json", leaky.spec(declare_scheme=False))
    program = _write(tmp_path / "p.py", PRIVATE)
    code, out, err = _cli(["run", program, "--tools", spec, "--sandbox", "local", "--json"], capsys)
    hint = json.loads(out)["hint"]
    assert code == 1 and "declares no security scheme" in hint
    assert "--credential header:Authorization=env:VAR" in hint and "query:NAME" in hint
    # following the hint works
    monkeypatch.setenv("KINTO_KEY", "k-123456")
    code, out, err = _cli(["run", program, "--tools", spec, "--sandbox", "local",
                           "--credential", "header:X-API-Key=env:KINTO_KEY"], capsys)
    assert code == 0 and "secret_stuff" in out and "hint" not in err


def test_a_401_with_a_credential_says_it_was_refused(leaky: LeakyAPI, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _write(tmp_path / "spec.json", leaky.spec(declare_scheme=False))
    monkeypatch.setenv("KINTO_KEY", "k-123456")
    code, out, err = _cli(["run", _write(tmp_path / "p.py", PRIVATE), "--tools", spec, "--sandbox", "local",
                           "--credential", "query:api_key=env:KINTO_KEY"], capsys)  # the wrong place
    assert code == 1 and "although --credential query:api_key was given for 'kinto'" in err
    assert "the API refused it" in err and "declares no security scheme" not in err


# -- item 13 --------------------------------------------------------------------------------------


def test_the_apis_own_parameter_names_are_accepted(leaky: LeakyAPI) -> None:
    collection = load_data(leaky.spec(), name="kinto")
    tool = collection.tool("kinto_posts")
    assert tool is not None and sorted(tool.properties) == ["page_size", "user_id"]
    assert tool.wire_aliases() == {"userId": "user_id", "pageSize": "page_size"}
    gw = Gateway(Toolset([collection]), environ={})
    out = gw.call("kinto_posts", {"userId": 7, "pageSize": 5})
    assert out.ok and out.data == {"userId": "7", "pageSize": "5"}
    assert leaky.requests[-1].target == "/users/7/posts?pageSize=5"  # what the server really got
    # validated like the snake_case name: the spec's maximum holds
    bad = gw.call("kinto_posts", {"userId": 7, "pageSize": 500})
    assert not bad.ok and "argument 'page_size'" in bad.error["message"] and len(leaky.requests) == 1
    both = gw.call("kinto_posts", {"userId": 7, "user_id": 8})
    assert not both.ok and "'userId' and 'user_id' are the same argument" in both.error["message"]
    unknown = gw.call("kinto_posts", {"user": 7})
    assert not unknown.ok and "unknown argument 'user'" in unknown.error["message"]


def test_a_program_using_wire_names_runs_and_passes_the_static_check(
        leaky: LeakyAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = "print(kinto_posts(userId=3, pageSize=2)['userId'])\n"
    collection = load_data(leaky.spec(), name="kinto")
    assert check_program(program, {t.name: t for t in collection.tools}) is None
    spec = _write(tmp_path / "spec.json", leaky.spec())
    code, out, err = _cli(["run", _write(tmp_path / "p.py", program), "--tools", spec, "--sandbox", "local"], capsys)
    assert code == 0 and out == "3\n", err
