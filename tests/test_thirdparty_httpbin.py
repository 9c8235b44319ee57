"""A second real third-party server: httpbin (the HTTP test service) from PyPI, with the spec it
serves itself (``/spec.json``, written by flasgger), served on 127.0.0.1, exercised by programs
through the ``atc`` command line in a real sandbox.

Its spec is the kind issue #7 is about: Swagger 2.0 with ``type: int`` (flasgger writes it),
OpenAPI 3 parameters (``schema``, ``style: form``, ``explode``) inside the Swagger document, no
security scheme, and ``host: httpbin.org``: a public server the test must never reach, so every
run passes ``--base-url`` to the local one. The server does what real APIs do: redirects (same
origin, relative, absolute, and ``/redirect-to`` anywhere: an open redirect), gzip/deflate/brotli
bodies, binary bodies, echoes of the request headers, bearer tokens quoted back, response headers
chosen by the caller, cookies set on a redirect, slow answers.

Installed by scripts/install-test-servers.sh into .cache/servers; the tests skip, saying so, only
when it is not installed. It listens on 127.0.0.1 only (the last test checks its sockets).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from atc.cli import main

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".cache" / "servers" / "bin" / "python"
TOKEN = "hb-token-0a1b2c3d4e5f"


def _installed() -> bool:
    if not PYTHON.exists():
        return False
    return subprocess.run([str(PYTHON), "-c", "import httpbin, flasgger"], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def httpbin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    if not _installed():
        pytest.skip("httpbin is not installed (scripts/install-test-servers.sh installs it into .cache/servers)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = tmp_path_factory.mktemp("httpbin")
    log = open(base / "server.log", "wb")  # noqa: SIM115 - closed below
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(base)}
    proc = subprocess.Popen([str(PYTHON), "-m", "httpbin.core", "--host", "127.0.0.1", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=base)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"httpbin exited: {(base / 'server.log').read_text()[-2000:]}")
            try:
                if httpx.get(url + "/get", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("httpbin did not answer within 60 s")
            time.sleep(0.2)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture()
def imported(httpbin: tuple[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    url, _ = httpbin
    code = main(["tools", "import", f"{url}/spec.json", "--name", "httpbin", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    return doc


def _run(url: str, program: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, Any]:
    path = tmp_path / "program.py"
    path.write_text(program)
    code = main(["run", str(path), "--tools", "httpbin", "--base-url", url, "--sandbox", "local", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_its_flasgger_spec_imports_with_the_mistakes_repaired(imported: dict[str, Any]) -> None:
    assert imported["source_format"] == "swagger-2.0" and imported["tools"] > 60
    assert imported["servers"] == ["https://httpbin.org"]  # the spec names the public host
    warnings = {w["pointer"]: w["message"] for w in imported["warnings"]}
    assert warnings["/paths/~1bytes~1{n}/get/parameters/0/type"] == \
        "type 'int' is not a JSON Schema type; read as 'integer'"
    assert "written the OpenAPI 3 way" in warnings["/paths/~1response-headers/get/parameters/0/schema"]


def test_a_bearer_token_echoed_back_is_redacted_and_headers_chain(httpbin: tuple[str, Any], imported: dict[str, Any],
                                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = httpbin
    monkeypatch.setenv("HB_TOKEN", TOKEN)
    program = """
auth = get_bearer()
echo = get_headers()["headers"]
found = get_anything(extra_query={"token_seen": str(auth["authenticated"]), "tags": ["a", "b"]})
print(auth["authenticated"], auth["token"], echo["Authorization"], found["args"])
"""
    code, doc = _run(url, program, tmp_path, capsys, "--credential", "bearer=env:HB_TOKEN")
    assert code == 0, doc["error"]
    assert doc["answer"].strip() == "True [REDACTED] Bearer [REDACTED] {'tags': ['a', 'b'], 'token_seen': 'True'}"
    assert TOKEN not in json.dumps(doc) and doc["calls"][0]["redacted"] >= 1
    code, doc = _run(url, "print(get_bearer())\n", tmp_path, capsys)
    assert code == 1 and "HTTP 401" in doc["error"]["message"] and doc["error"]["tool"] == "get_bearer"


def test_redirects_are_followed_within_the_origin_only(httpbin: tuple[str, Any], imported: dict[str, Any],
                                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = httpbin
    program = """
print(get_redirect_n(n=3)["url"].rsplit("/", 1)[1])
print(get_relative_redirect_n(n=2)["url"].rsplit("/", 1)[1])
print(get_absolute_redirect_n(n=2)["url"].rsplit("/", 1)[1])
print(get_redirect_to(url="/anything/here", status_code=307)["url"].rsplit("/", 1)[1])
try:
    get_redirect_to(url="http://127.0.0.2:9/internal-admin")
except ToolError as e:
    print("refused", e.status)
"""
    code, doc = _run(url, program, tmp_path, capsys)
    assert code == 0, doc["error"]
    assert doc["answer"].strip().splitlines() == ["get", "get", "get", "here", "refused 302"]
    hops = [len(c["redirects"]) for c in doc["calls"]]
    assert hops == [3, 2, 2, 1, 1]
    last = doc["calls"][-1]
    assert last["failure"] == "redirect" and last["redirects"][0]["followed"] is False
    assert "another origin" in last["redirects"][0]["reason"]


def test_compressed_and_binary_bodies(httpbin: tuple[str, Any], imported: dict[str, Any], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = httpbin
    program = """
import base64
print(get_gzip()["gzipped"], get_deflate()["deflated"], get_brotli()["brotli"])
png = get_image_png()
raw = base64.b64decode(png["base64"])
print(png["content_type"], raw[:8] == b"\\x89PNG\\r\\n\\x1a\\n", png["size"] == len(raw))
blob = get_bytes_n(n=64)
print(blob["content_type"], blob["size"])
print("∮" in get_encoding_utf8())
"""
    code, doc = _run(url, program, tmp_path, capsys)
    assert code == 0, doc["error"]
    assert doc["answer"].strip().splitlines() == ["True True True", "image/png True True",
                                                  "application/octet-stream 64", "True"]


def test_response_headers_and_cookies_that_stay_out_of_other_calls(
        httpbin: tuple[str, Any], imported: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = httpbin
    program = """
r = get_response_headers(freeform={"X-Total-Count": "7", "Link": '<http://x/?page=2>; rel="next"'}, with_headers=True)
print(r.status, r.headers["x-total-count"], r.links["next"]["url"])
tagged = get_etag_etag(etag="v1", with_headers=True)
print(tagged.headers["ETag"])
print(get_cookies_set_name_value(name="session", value="s1"))
print(last_response().status)
"""
    code, doc = _run(url, program, tmp_path, capsys)
    assert code == 0, doc["error"]
    lines = doc["answer"].strip().splitlines()
    assert lines[:2] == ["200 7 http://x/?page=2", "v1"]
    # the spec declares no cookies: the cookie set on the redirect is not sent on, nor kept
    assert lines[2] == "{'cookies': {}}" and lines[3] == "200"


def test_a_slow_call_at_the_deadline_is_blamed_and_the_output_kept(
        httpbin: tuple[str, Any], imported: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = httpbin
    program = 'print("started", get_get()["url"].rsplit("/", 1)[1])\nget_delay_delay(delay=8)\nprint("never")\n'
    code, doc = _run(url, program, tmp_path, capsys, "--timeout", "2")
    assert code == 1
    assert doc["answer"] == "started get\n"
    assert doc["error"]["type"] == "Timeout" and doc["error"]["tool"] == "get_delay_delay" and doc["error"]["line"] == 2
    code, doc = _run(url, "get_status_codes(codes='418')\n", tmp_path, capsys)
    assert code == 1 and "HTTP 418" in doc["error"]["message"]


def test_the_server_holds_loopback_sockets_only(httpbin: tuple[str, Any]) -> None:
    _, proc = httpbin
    inodes = set()
    for fd in Path(f"/proc/{proc.pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    loopback = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}
    seen = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                seen += 1
                assert fields[1].split(":")[0] in loopback, f"beyond loopback: {line}"
                assert fields[2].split(":")[0] in loopback | {"00000000", "0" * 32}, f"beyond loopback: {line}"
    assert seen >= 1
