"""A credential goes to the API it was given for, and nowhere else (issue 20, items 7 and 8).

Two APIs on two loopback ports (two origins) whose specs both call their scheme ``HeaderKey`` (such
names collide all the time): a bare ``--credential HeaderKey=...`` is refused naming both, and
``COLLECTION.HeaderKey`` sends the key to that API only. A spec fetched from a URL with a
credential is redirected to the other origin: the header must not follow. Each test asks the
servers themselves what they received.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import atc
from atc.cli import main
from protocols.errors import ConfigError
from protocols.loaders import load_data
from sandbox.api import Toolset
from sandbox.execute import check_toolset
from sandbox.gateway.core import Gateway
from tests.support.apis.leaky import LeakyAPI

KEY = "alpha-only-key-5f1e9d"


@pytest.fixture()
def two() -> Iterator[tuple[LeakyAPI, LeakyAPI]]:
    with LeakyAPI(prefix="alpha") as alpha, LeakyAPI(prefix="beta") as beta:
        yield alpha, beta


def _specs(tmp_path: Path, *apis: LeakyAPI) -> list[str]:
    out = []
    for api in apis:
        path = tmp_path / f"{api.prefix}.json"
        path.write_text(json.dumps(api.spec()))
        out.append(str(path))
    return out


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


PROGRAM = "print(alpha_whoami()['key_given'], beta_whoami()['key_given'])\n"


def _run_both(apis: tuple[LeakyAPI, LeakyAPI], tmp_path: Path, capsys: pytest.CaptureFixture[str],
              *flags: str) -> tuple[int, str, str]:
    """``atc run PROGRAM`` over both APIs' specs, with ``flags``."""
    program = tmp_path / "p.py"
    program.write_text(PROGRAM)
    a, b = _specs(tmp_path, *apis)
    return _cli(["run", str(program), "--tools", a, "--tools", b, "--sandbox", "local", *flags], capsys)


def test_a_bare_scheme_name_two_apis_declare_is_refused_naming_both(
        two: tuple[LeakyAPI, LeakyAPI], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    alpha, beta = two
    monkeypatch.setenv("ALPHA_KEY", KEY)
    code, out, err = _run_both(two, tmp_path, capsys, "--credential", "HeaderKey=env:ALPHA_KEY")
    assert code == 2 and "'alpha'" in err and "'beta'" in err and "HeaderKey" in err
    assert "alpha.HeaderKey=env:VAR" in err  # how to say which one
    assert "Traceback" not in err and alpha.requests == [] and beta.requests == []


def test_collection_dot_scheme_sends_the_key_to_that_api_only(
        two: tuple[LeakyAPI, LeakyAPI], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    alpha, beta = two
    monkeypatch.setenv("ALPHA_KEY", KEY)
    code, out, err = _run_both(two, tmp_path, capsys, "--credential", "alpha.HeaderKey=env:ALPHA_KEY", "--json")
    assert code == 0, err
    assert json.loads(out)["answer"] == "True False\n"
    assert alpha.keys_seen() == [KEY] and beta.keys_seen() == []


def test_the_python_api_takes_collection_dot_scheme(two: tuple[LeakyAPI, LeakyAPI],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    alpha, beta = two
    monkeypatch.setenv("ALPHA_KEY", KEY)
    tools = [load_data(alpha.spec(), name="alpha"), load_data(beta.spec(), name="beta")]
    with pytest.raises(ConfigError, match="collections 'alpha', 'beta' all declare"):
        atc.run(PROGRAM, tools, sandbox="local", credentials={"HeaderKey": "env:ALPHA_KEY"})
    result = atc.run(PROGRAM, tools, sandbox="local", credentials={"beta.HeaderKey": "env:ALPHA_KEY"})
    assert result.ok and result.answer == "False True\n"
    assert alpha.keys_seen() == [] and beta.keys_seen() == [KEY]


def test_a_gateway_never_guesses_even_without_the_check(two: tuple[LeakyAPI, LeakyAPI]) -> None:
    """A toolset that skipped ``check_toolset`` (a library caller): the ambiguous key goes nowhere,
    and the call says why; the scoped one reaches its API only."""
    alpha, beta = two
    tools = [load_data(alpha.spec(), name="alpha"), load_data(beta.spec(), name="beta")]
    gw = Gateway(Toolset(tools, credentials={"HeaderKey": "env:K"}), environ={"K": KEY})
    out = gw.call("beta_whoami", {})
    assert not out.ok and out.error is not None and out.error["failure"] == "config"
    assert "all declare a security scheme 'HeaderKey'" in out.error["message"]
    assert alpha.requests == [] and beta.requests == []
    with pytest.raises(ConfigError):
        check_toolset(Toolset(tools, credentials={"HeaderKey": "env:K"}))


@pytest.mark.parametrize(("key", "sent_to"), [("alpha:HeaderKey", "alpha"), ("beta.header:X-API-Key", "beta")])
def test_both_scoped_spellings_and_placements(two: tuple[LeakyAPI, LeakyAPI], key: str, sent_to: str) -> None:
    alpha, beta = two
    tools = [load_data(alpha.spec(), name="alpha"), load_data(beta.spec(), name="beta")]
    gw = Gateway(Toolset(tools, credentials={key: "env:K"}), environ={"K": KEY})
    assert gw.call("alpha_whoami", {}).ok and gw.call("beta_whoami", {}).ok
    seen = {"alpha": alpha.keys_seen(), "beta": beta.keys_seen()}
    assert seen == {n: [KEY] if n == sent_to else [] for n in seen}


def test_an_unknown_scheme_of_a_named_collection_is_refused(two: tuple[LeakyAPI, LeakyAPI]) -> None:
    alpha, beta = two
    tools = [load_data(alpha.spec(), name="alpha"), load_data(beta.spec(), name="beta")]
    with pytest.raises(ConfigError, match="collection 'alpha' has no security scheme 'api_key'"):
        check_toolset(Toolset(tools, credentials={"alpha.api_key": "env:K"}))


# -- item 8: the spec fetch follows redirects by the gateway's origin rule -----------------------


def _import(url: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    return _cli(["tools", "import", url, "--credential", "header:X-API-Key=env:SPEC_KEY", *extra], capsys)


def test_a_redirect_to_another_origin_does_not_carry_the_credential(
        two: tuple[LeakyAPI, LeakyAPI], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    alpha, beta = two
    monkeypatch.setenv("SPEC_KEY", KEY)
    code, out, err = _import(f"{alpha.url}/go?to={beta.url}/spec.json", capsys, "--name", "moved")
    assert code == 0, err  # followed, without the header: beta's spec is public
    assert alpha.keys_seen() == [KEY]  # the origin the user named got it
    assert beta.requests and beta.keys_seen() == []  # the other origin never did
    assert "imported moved" in out


def test_a_same_origin_redirect_keeps_it_and_a_cross_origin_401_says_why(
        two: tuple[LeakyAPI, LeakyAPI], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    alpha, beta = two
    alpha.private = beta.private = True
    monkeypatch.setenv("SPEC_KEY", KEY)
    code, out, err = _import(f"{alpha.url}/go?to=/spec.json&status=307", capsys)
    assert code == 0, err
    assert alpha.keys_seen() == [KEY, KEY]  # the redirect and the spec, both on the named origin
    code, out, err = _import(f"{alpha.url}/go?to={beta.url}/spec.json", capsys)
    assert code == 2 and "HTTP 401" in err and "another origin" in err and "not sent" in err
    assert beta.keys_seen() == []


def test_the_hop_back_to_the_named_origin_gets_it_again(two: tuple[LeakyAPI, LeakyAPI],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from protocols.remote import fetch_spec

    alpha, beta = two
    alpha.private = True
    back = f"{alpha.url}/spec.json"
    text, final = fetch_spec(f"{alpha.url}/go?to={beta.url}/go%3Fto%3D{back}", headers={"X-API-Key": KEY})
    assert json.loads(text)["info"]["title"] == "alpha" and final == back
    assert beta.keys_seen() == [] and alpha.keys_seen() == [KEY, KEY]


def test_a_request_outside_the_collections_origin_gets_no_credential(two: tuple[LeakyAPI, LeakyAPI]) -> None:
    """Defence in depth: the transport adds a collection's secrets only to a request for that
    collection's own origin (a request is built from its base URL, so this is the last check)."""
    import httpx

    from sandbox.api import Limits
    from sandbox.gateway.http.transport import HttpTransport

    alpha, beta = two
    toolset = Toolset([load_data(alpha.spec(), name="alpha")], credentials={"HeaderKey": "env:K"})
    transport = HttpTransport(toolset, Limits(), httpx.Client(), {"K": KEY}, None)
    tool = toolset.tools["alpha_whoami"]
    for url, expected in ((f"{alpha.url}/whoami", {"X-API-Key": KEY}), (f"{beta.url}/whoami", {})):
        headers: dict[str, str] = {}
        transport._add_credentials(tool, url, headers, [], [])
        assert headers == expected
