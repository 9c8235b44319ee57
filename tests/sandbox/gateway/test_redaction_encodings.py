"""Redaction of encoded echoes (issue 20, item 6): an API that gives the caller's key back as a
JSON number, inside a base64 or base64url cursor (nested too), as a response header's NAME, as
hex, upper-cased, percent-encoded, as HTML character references or JSON escapes. In each case a
hostile program reads what came back and sends it on as an ordinary argument to another tool:
the test asks the receiving server (not atc) whether the key ever arrived, in any encoding it
can undo, and checks that every hit was counted.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
from collections.abc import Iterator
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from protocols.loaders import load_data
from sandbox.api import Limits, Toolset
from sandbox.execute import run
from sandbox.gateway.core import Gateway
from sandbox.gateway.redact import MASK, Redactor
from sandbox.local.backend import LocalBackend
from tests.support.apis.leaky import LEAKS, LeakyAPI

KEY = "k3y-Zq9x-77ab12cd"
NUMERIC_KEY = "804123456719"


def _unescape_json(text: str) -> str:
    return re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)


def reveals(text: str, key: str, depth: int = 0) -> bool:
    """Does ``text`` give ``key`` away under any decoding a program could apply (the test's own
    decoder, written independently of atc's)?"""
    if key.lower() in text.lower():
        return True
    if depth > 2:
        return False
    views = {unquote(text), html.unescape(text), _unescape_json(text)} - {text}
    for run_ in re.findall(r"[A-Za-z0-9+/_=-]{8,}", text):
        for start in range(4):
            chunk = run_[start:].rstrip("=")
            chunk = chunk[: len(chunk) - len(chunk) % 4] if len(chunk) % 4 == 1 else chunk
            for alphabet in (None, b"-_"):
                try:
                    views.add(base64.b64decode(chunk + "=" * (-len(chunk) % 4), altchars=alphabet).decode("latin-1"))
                except (binascii.Error, ValueError):
                    pass
    for hex_run in re.findall(r"(?:[0-9a-fA-F]{2}){4,}", text):
        views.add(bytes.fromhex(hex_run).decode("latin-1"))
    return any(reveals(v, key, depth + 1) for v in views)


@pytest.fixture(scope="module")
def leaky() -> Iterator[LeakyAPI]:
    with LeakyAPI() as api:
        yield api


@pytest.fixture(scope="module")
def local_backend() -> Iterator[LocalBackend]:
    with LocalBackend(pool_size=2) as backend:
        yield backend


@pytest.mark.parametrize("how", LEAKS)
def test_the_api_really_leaks_the_key_without_redaction(leaky: LeakyAPI, how: str) -> None:
    """The fixture is hostile for real: with no credential known to the gateway, each leak gives
    the key away (so the next test can fail)."""
    key = NUMERIC_KEY if how == "number" else KEY
    toolset = Toolset([load_data(leaky.spec(), name="leaky")])
    gw = Gateway(toolset, environ={})
    import httpx

    response = httpx.get(f"{leaky.url}/leak/{how}", headers={"X-API-Key": key})
    assert reveals(response.text + json.dumps(dict(response.headers)), key)
    assert gw.redactor().text("nothing")[1] == 0


@pytest.mark.parametrize("how", LEAKS)
def test_an_encoded_echo_never_reaches_another_tool(leaky: LeakyAPI, local_backend: LocalBackend, how: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    key = NUMERIC_KEY if how == "number" else KEY
    monkeypatch.setenv("LEAKY_KEY", key)
    program = (
        f"r = leaky_leak(how={how!r}, with_headers=True)\n"
        "seen = repr(r.data) + ' ' + repr(sorted(dict(r.headers).items()))\n"
        "leaky_sink(v=seen)\n"
        "print(seen)\n"
    )
    before = len(leaky.requests)
    result = run(program, Toolset([load_data(leaky.spec(), name="leaky")], credentials={"HeaderKey": "env:LEAKY_KEY"}),
                 Limits(timeout=20), sandbox=local_backend)
    assert result.ok, result.error
    sent = [s for s in leaky.requests[before:] if s.target.startswith("/sink")]
    assert len(sent) == 1
    received = parse_qs(urlsplit(sent[0].target).query)["v"][0]
    assert MASK.lower() in received.lower() and not reveals(received, key)  # header names arrive lower-cased
    assert not reveals(result.answer, key)
    assert result.calls[0].redacted >= 1 and result.calls[1].redacted == 0
    assert leaky.requests[before].headers["X-API-Key"] == key  # the API did get the key


def test_every_hit_is_counted() -> None:
    r = Redactor([KEY])
    cursor = base64.b64encode(json.dumps({"a": KEY, "b": KEY.upper()}).encode()).decode()
    data, n = r.data({"x": [KEY, KEY.encode().hex()], KEY: cursor, "n": 5})
    assert n == 4 and data == {"x": [MASK, MASK], MASK: MASK, "n": 5}
    headers, m = r.headers({f"x-{KEY}": KEY, "plain": "fine"})
    assert m == 2 and headers == {f"x-{MASK}": MASK, "plain": "fine"}


def test_numbers_are_compared_with_numeric_secrets() -> None:
    r = Redactor(["00" + NUMERIC_KEY])  # a JSON number loses leading zeros: still found
    data, n = r.data({"id": int(NUMERIC_KEY), "f": float(NUMERIC_KEY), "inside": int("9" + NUMERIC_KEY), "n": 42})
    assert n == 3 and data == {"id": MASK, "f": MASK, "inside": MASK, "n": 42}
    assert r.may_hold(json.dumps({"id": int(NUMERIC_KEY)}).encode())
    short, count = Redactor(["123"]).data({"k": 123, "other": 1234})  # a short secret: whole values only
    assert short == {"k": MASK, "other": 1234} and count == 1


def test_plain_bodies_are_not_walked_and_ordinary_data_survives() -> None:
    r = Redactor([KEY])
    body = json.dumps({"items": [{"id": i, "img": base64.b64encode(bytes((i + j) % 256 for j in range(60))).decode(),
                                  "url": f"/x?page={i}&amp;q=%20"} for i in range(200)]}).encode()
    assert r.plan(body) is None  # escapes, percent signs and entities, but no secret: no walk
    data = json.loads(body)
    assert r.scrub(data, body) == (json.loads(body), 0)
    with_key = body.replace(b'"items"', b'"' + KEY.encode() + b'"')
    assert r.plan(with_key) == frozenset()  # a plain hit needs no decoding on the walk
    escaped = body.replace(b'"items"', b'"%6B3y-Zq9x-77ab12cd"')
    assert r.plan(escaped) == frozenset({"%"})
