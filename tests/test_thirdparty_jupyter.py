"""A real third-party server: jupyter_server from PyPI, served on 127.0.0.1 with a token, its own
spec (Swagger 2.0, served at ``/api/spec.yaml`` behind the token) imported from its URL, and
programs that chain its operations in a real sandbox through the ``atc`` command line.

It is the kind of server issue #7 was written against: a spec with no server URL and no security
scheme (the token goes in ``Authorization: token ...``, given with a placement), a root addressed
as the empty path (``/api/contents/``), file paths with slashes in a path parameter, ``Location``
headers, a request field the spec calls a string where the server wants an object (a notebook's
``content``: the validation escape hatch), and a login redirect for anonymous callers.

The server is installed by scripts/install-test-servers.sh into .cache/servers (CI runs it); the
tests skip, saying so, only when it is not installed. Its configuration keeps it off the network:
it listens on 127.0.0.1 only, reads no user configuration, opens no browser, runs no kernels, and
the last test checks that every TCP socket it holds is a loopback one.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from atc.cli import main

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "jt-5e6f7a8b9c0d1e2f"


def _executable() -> str | None:
    local = ROOT / ".cache" / "servers" / "bin" / "jupyter-server"
    if local.exists():
        return str(local)
    return shutil.which("jupyter-server")


@dataclass
class Jupyter:
    url: str
    proc: subprocess.Popen[bytes]
    root: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def jupyter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jupyter]:
    exe = _executable()
    if exe is None:
        pytest.skip("jupyter_server is not installed (scripts/install-test-servers.sh installs it into .cache/servers)")
    base = tmp_path_factory.mktemp("jupyter")
    root = base / "root"
    root.mkdir()
    port = _free_port()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(base),
           "JUPYTER_CONFIG_DIR": str(base / "config"), "JUPYTER_DATA_DIR": str(base / "data"),
           "JUPYTER_RUNTIME_DIR": str(base / "runtime"), "JUPYTER_NO_CONFIG": "1",
           "JUPYTER_PLATFORM_DIRS": "1"}
    args = [exe, f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}", "--ServerApp.open_browser=False",
            "--ServerApp.allow_remote_access=False", "--ServerApp.use_redirect_file=False"]
    if os.geteuid() == 0:
        args.append("--allow-root")
    log = open(base / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=base)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter-server exited: {(base / 'server.log').read_text()[-2000:]}")
            try:
                if httpx.get(url + "/api/status", headers={"Authorization": f"token {TOKEN}"},
                             timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("jupyter-server did not answer within 60 s")
            time.sleep(0.2)
        yield Jupyter(url, proc, root)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture()
def imported(jupyter: Jupyter, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.setenv("JUPYTER_AUTH", f"token {TOKEN}")
    monkeypatch.setenv("JUPYTER_TOKEN", TOKEN)
    code = main(["tools", "import", f"{jupyter.url}/api/spec.yaml", "--name", "jupyter",
                 "--credential", "header:Authorization=env:JUPYTER_AUTH", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    return "jupyter"


def _run(program: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:
    path = tmp_path / "program.py"
    path.write_text(program)
    code = main(["run", str(path), "--tools", "jupyter", "--sandbox", "local", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


AUTH = ("--credential", "header:Authorization=env:JUPYTER_AUTH")


def test_its_own_spec_imports_from_its_url_behind_the_token(jupyter: Jupyter, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["tools", "import", f"{jupyter.url}/api/spec.yaml", "--name", "jupyter", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 2 and "HTML page" in out["error"]["message"]  # anonymous: sent to the login page
    monkeypatch.setenv("JUPYTER_AUTH", f"token {TOKEN}")
    code = main(["tools", "import", f"{jupyter.url}/api/spec.yaml", "--name", "jupyter",
                 "--credential", "header:Authorization=env:JUPYTER_AUTH", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["source_format"] == "swagger-2.0" and doc["tools"] >= 25
    assert doc["servers"] == [jupyter.url]  # "basePath: /" and no host: the spec's own origin
    assert doc["security_schemes"] == {}
    assert "get_api_contents_path" in doc["names"]
    code = main(["tools", "show", "jupyter"])
    shown = capsys.readouterr().out
    assert "auth: the spec declares no security scheme" in shown


def test_a_chain_of_file_operations_with_a_token(imported: str, jupyter: Jupyter, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    program = """
root = get_api_contents_path(path="")
folder = post_api_contents_path(path="", type="directory", with_headers=True)
name = folder.data["name"]
print("created", name, folder.status, folder.headers["location"])
saved = put_api_contents_path(path=name + "/notes.txt", type="file", format="text", content="hello atc")
print("saved", saved["path"], saved["size"])
renamed = patch_api_contents_path(path=saved["path"], path_2=name + "/renamed.txt")
point = post_api_contents_path_checkpoints(path=renamed["path"])
points = get_api_contents_path_checkpoints(path=renamed["path"])
back = get_api_contents_path(path=renamed["path"], content=1)
listing = get_api_contents_path(path=name)
print("read", back["content"], [e["name"] for e in listing["content"]], len(points), point["id"] == points[0]["id"])
delete_api_contents_path(path=renamed["path"])
print("left", len(get_api_contents_path(path=name)["content"]), root["type"])
"""
    code, doc = _run(program, tmp_path, capsys, *AUTH)
    assert code == 0, doc["error"]
    lines = doc["answer"].strip().splitlines()
    assert lines[0].startswith("created Untitled Folder") and " 201 /api/contents/Untitled%20Folder" in lines[0]
    assert lines[1].endswith("/notes.txt 9")
    assert lines[2] == "read hello atc ['renamed.txt'] 1 True"
    assert lines[3] == "left 0 directory"
    # the root was asked for as the empty path; the slash in "folder/notes.txt" stayed inside one segment
    paths = [c["path"] for c in doc["calls"]]
    assert paths[0] == "/api/contents/{path}" and doc["calls"][0]["args"] == {"path": ""}
    assert all(c["ok"] for c in doc["calls"])


def test_a_notebook_needs_the_validation_escape_hatch(imported: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    program = """
nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "# Title"},
                {"cell_type": "code", "metadata": {}, "source": "1 + 1", "outputs": [], "execution_count": None}],
      "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
put_api_contents_path(path="analysis.ipynb", type="notebook", format="json", content=nb)
got = get_api_contents_path(path="analysis.ipynb", content=1)
print(got["type"], len(got["content"]["cells"]), got["content"]["cells"][1]["source"])
"""
    code, doc = _run(program, tmp_path, capsys, *AUTH)
    # the spec types "content" as a string: strict validation refuses before sending
    assert code == 1 and "argument 'content'" in doc["error"]["message"] and doc["calls"][0]["status"] is None
    code, doc = _run(program, tmp_path, capsys, *AUTH, "--validation", "jupyter=warn")
    assert code == 0, doc["error"]
    assert doc["answer"].strip() == "notebook 2 1 + 1"
    assert any("argument 'content'" in w for w in doc["calls"][0]["warnings"])


def test_errors_and_a_missing_credential_are_attributed(imported: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    program = 'print(get_api_contents_path(path="no/such/file.txt")["name"])\n'
    code, doc = _run(program, tmp_path, capsys, *AUTH)
    assert code == 1 and doc["error"]["type"] == "ToolError" and doc["error"]["tool"] == "get_api_contents_path"
    assert "HTTP 404" in doc["error"]["message"] and "does not exist" in doc["error"]["message"]
    code, doc = _run(program, tmp_path, capsys)
    assert code == 1 and "HTTP 403" in doc["error"]["message"]


def test_config_sections_with_a_bearer_credential(imported: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    program = """
patch_api_config_section_name(section_name="atc_test", body={"theme": "dark", "size": 3})
print(get_api_config_section_name(section_name="atc_test"))
"""
    code, doc = _run(program, tmp_path, capsys, "--credential", "bearer=env:JUPYTER_TOKEN")
    assert code == 0, doc["error"]
    assert doc["answer"].strip() == "{'theme': 'dark', 'size': 3}"


def test_the_server_holds_loopback_sockets_only(jupyter: Jupyter) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc")
    inodes = set()
    for fd in Path(f"/proc/{jupyter.proc.pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    loopback = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}
    unset = {"00000000", "00000000000000000000000000000000"}
    seen = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] not in inodes:
                continue
            seen += 1
            local, remote = fields[1].split(":")[0], fields[2].split(":")[0]
            assert local in loopback, f"listens or connects beyond loopback: {line}"
            assert remote in loopback | unset, f"talks to a non-loopback address: {line}"
    assert seen >= 1
