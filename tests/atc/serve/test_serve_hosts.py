"""``atc serve --transport http`` checks ``Host`` and ``Origin`` for every bind address (issue 29,
item 5): a real server on the loopback address 127.0.0.2 -- one of the addresses the SDK does
not check by itself -- with one extra name allowed, raw HTTP requests and the official SDK's
client with the headers of a DNS-rebinding page; and the refusals before serving."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from atc.cli import main
from atc.serve.hosts import HostCheck
from tests.support.serve import STATELESS, TOKEN, Apis, HttpServe, http_client, serve_args, serve_env
from tests.support.serve import apis as apis

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def server(apis: Apis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServe]:
    folder = tmp_path_factory.mktemp("serve-hosts")
    running = HttpServe.start(serve_args(apis, "--sandbox", "local", "--host", "127.0.0.2", "--allow-host", "atc.test",
                                         shop=False), serve_env(folder / "home"), folder / "stderr.log")
    try:
        yield running
    finally:
        assert running.stop() == 0


def post(server: HttpServe, **headers: str) -> httpx.Response:
    return httpx.post(server.url, json=INIT, headers={**HEADERS, **headers}, timeout=10)


@pytest.mark.slow
def test_a_foreign_host_or_origin_is_refused_on_any_loopback_address(server: HttpServe) -> None:
    port = server.url.split(":")[2].split("/")[0]
    assert server.url.startswith("http://127.0.0.2:")
    assert post(server, Host="evil.example").status_code == 421
    assert post(server, Host=f"evil.example:{port}", Origin="http://evil.example").status_code == 421
    for origin in ("http://evil.example", "null", f"http://evil.example:{port}", "file://", "http://127.0.0.2.evil"):
        assert post(server, Host=f"127.0.0.2:{port}", Origin=origin).status_code == 403, origin
    # no token and a foreign host: refused at the Host already
    refused = httpx.post(server.url, json=INIT, headers={"Host": "evil.example"}, timeout=10)
    assert refused.status_code == 421 and "--allow-host" in refused.json()["error"]
    # what the server is: its own address, the loopback names, and the name it was given
    for host, origin in ((f"127.0.0.2:{port}", None), ("localhost:9999", "http://localhost:5173"),
                         ("ATC.test", "https://atc.test"), (f"atc.test:{port}", f"http://atc.test:{port}"),
                         (f"[::1]:{port}", "http://[::1]:3000")):
        answer = post(server, Host=host, **({"Origin": origin} if origin else {}))
        assert answer.status_code == 200, (host, origin, answer.text)


@pytest.mark.slow
def test_a_rebinding_page_runs_no_program_even_with_the_token(server: HttpServe) -> None:
    """The attack as seen: a page's request names its own site as Host and Origin."""
    async def run(headers: dict[str, str], mode: str) -> Any:
        async with http_client(server.url, mode=mode, headers=headers) as client:
            return await client.call_tool("run_program", {"program": "print('ran for', 6 * 7)"})

    foreign = {"Host": "rebind.evil.example", "Origin": "http://rebind.evil.example"}
    for mode in ("legacy", STATELESS):
        try:
            anyio.run(run, foreign, mode)
        except BaseException as exc:  # the SDK's error for a refused request, inside task groups
            assert any(type(e).__name__ == "MCPError" for e in leaves(exc)), exc
        else:
            raise AssertionError(f"{mode}: the request was served")
    assert "run_program #" not in server.stderr()
    assert "refused a request for host 'rebind.evil.example'" in server.stderr()
    ran = anyio.run(run, {"Host": "atc.test"}, STATELESS)
    assert ran.structured_content["answer"] == "ran for 42\n"


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def test_another_address_than_loopback_needs_its_names(apis: Apis, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATC_SERVE_TOKEN", TOKEN)
    tools = ["serve", "--tools", str(apis.specs[0]), "--transport", "http", "--port", "0", "--sandbox", "local"]
    assert main([*tools, "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "--host 0.0.0.0 is not a loopback address" in err and "--allow-host NAME" in err
    assert main([*tools, "--allow-host", "mcp.example.com:8765"]) == 2
    assert "without a port" in capsys.readouterr().err
    assert main([*tools, "--allow-host", "http://mcp.example.com/"]) == 2
    assert "give a host name" in capsys.readouterr().err
    assert main(["serve", "--tools", str(apis.specs[0]), "--allow-host", "a.test"]) == 2
    assert "--allow-host is for --transport http" in capsys.readouterr().err


def test_the_host_rule() -> None:
    check = HostCheck.for_bind("0.0.0.0", ["MCP.Example.com.", "2001:db8::7"])
    assert check.names == {"localhost", "127.0.0.1", "::1", "mcp.example.com", "2001:db8::7"}
    assert check.refusal("mcp.example.com", "https://mcp.example.com:8443") is None
    assert check.refusal("[2001:db8::7]:8765", None) is None
    assert check.refusal("0.0.0.0:8765", None) is not None  # the wildcard is no name of the server
    assert check.refusal("mcp.example.com:80:80", None) is not None and check.refusal("", None) is not None
    assert check.refusal(None, None) is not None
    assert check.refusal("mcp.example.com", "http://mcp.example.com:notaport") == (
        403, "requests from this Origin are refused (a web page of another site)")
    assert HostCheck.for_bind("127.0.0.5").refusal("127.0.0.5:1", None) is None
