"""The parts of ``atc serve`` that need no server: session budgets, session keys, finding the
program in what a host sent, naming tools, the settings' refusals, and what a host's model reads
for a refused program."""

from __future__ import annotations

import pytest

from atc.errors import CallBudget, UsageError
from atc.serve import runs
from atc.serve.catalog import Catalog
from atc.serve.mcp_sessions import STDIO, Caps, InFlight, Sessions
from atc.serve.settings import ServeSettings
from protocols.loaders import load_spec
from sandbox.api import Toolset
from sandbox.cancel import Cancel
from tests.support.apis.library import library_spec


@pytest.fixture()
def toolset(tmp_path: object) -> Toolset:
    import json
    from pathlib import Path

    spec = Path(str(tmp_path)) / "library.json"
    spec.write_text(json.dumps(library_spec("http://127.0.0.1:9")))
    return Toolset([load_spec(spec)])


def test_a_session_budget_is_shared_by_its_programs_and_proxied_calls() -> None:
    sessions = Sessions(Caps(max_calls=10, max_runs=3))
    state = sessions.issue("http:a", "ATC_SERVE_TOKEN")
    first = sessions.begin_run(state, 8)
    assert first == 8 and sessions.left(state) == 2
    second = sessions.begin_run(state, 8)  # runs at once with the first: gets what is left
    assert second == 2 and sessions.left(state) == 0
    with pytest.raises(CallBudget):
        sessions.take_call(state)
    assert sessions.pending(state)  # the running programs may hand calls back
    sessions.end_run(state, first, 3)
    sessions.end_run(state, second, 2)
    assert state.budget.calls == 5 and sessions.left(state) == 5 and not sessions.pending(state)
    sessions.take_call(state)
    sessions.end_call(state, sent=True)
    sessions.take_call(state)
    sessions.end_call(state, sent=False)  # refused before sending: costs nothing
    assert sessions.left(state) == 4
    assert sessions.begin_run(state, 100) == 4
    with pytest.raises(CallBudget, match="its 3 programs"):
        sessions.begin_run(state, 1)
    other = sessions.issue("http:b", "ATC_SERVE_TOKEN")  # another session starts with the whole budget
    assert sessions.begin_run(other, 100) == 10


def test_a_program_is_charged_to_its_session_its_token_and_the_server() -> None:
    sessions = Sessions(Caps(max_calls=10, max_runs=5), token=Caps(max_calls=12, max_runs=3),
                        server=Caps(max_calls=15))
    a = sessions.issue("http:a", "A")
    alone = sessions.alone("A")  # a request without a session: a budget of its own, the token's all the same
    assert alone.ephemeral and alone.key.startswith("request:") and len(sessions) == 1
    sessions.end_run(a, sessions.begin_run(a, 100), 8)
    assert sessions.begin_run(alone, 100) == 4  # the token has 12 - 8 left
    with pytest.raises(CallBudget, match=r"the token \$A has used its 12 tool calls .*--token-max-calls"):
        sessions.begin_run(sessions.alone("A"), 1)
    b = sessions.alone("B")
    assert sessions.begin_run(b, 100) == 15 - 8 - 4  # the server's, over both tokens
    sessions.end_run(alone, 4, 0)
    sessions.end_run(b, 3, 3)
    third = sessions.alone("A")
    assert sessions.begin_run(third, 100) == 4  # 12 - 8: what the one run made, not what it was granted
    with pytest.raises(CallBudget, match=r"the token \$A has run its 3 programs"):
        sessions.begin_run(sessions.alone("A"), 1)
    assert sessions.pending(third) is False  # out of programs: a new one would wait for nothing
    assert sessions.token("A").calls == 8 and sessions.server.calls == 11 and sessions.server.runs == 4


def test_a_program_that_used_more_than_its_grant_is_charged_its_grant() -> None:
    sessions = Sessions(Caps(max_calls=5, max_runs=10))
    state = sessions.stdio()
    grant = sessions.begin_run(state, 5)
    sessions.end_run(state, grant, 6)  # the refused sixth call is in the log, not in the budget
    assert state.budget.calls == 5 and state.budget.reserved == 0
    with pytest.raises(CallBudget, match="used its 5 tool calls"):
        sessions.begin_run(state, 1)


def test_sessions_are_issued_bound_to_their_client_and_forgotten_when_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = Sessions(Caps(max_calls=10, max_runs=10))
    assert sessions.stdio() is sessions.stdio() and sessions.stdio().key == STDIO
    state = sessions.issue("http:abc", "A")
    assert sessions.find("http:abc", "A") is state
    assert sessions.find("http:abc", "B") is None and sessions.find("http:made-up", "A") is None
    assert sessions.issue("http:abc", "A") is state  # issuing again keeps its state
    sessions.take_call(state)
    sessions.end_call(state, True)
    monkeypatch.setattr("atc.serve.mcp_sessions.IDLE_SECONDS", -1.0)
    assert sessions.find("http:abc", "A") is None  # an idle session was forgotten
    sessions.drop("http:abc")


def test_in_flight_runs_are_cancelled_by_request_or_by_session() -> None:
    inflight = InFlight()
    a, b, c = Cancel(), Cancel(), Cancel()
    with inflight.track("http:s1", "1", a), inflight.track("http:s1", "2", b), inflight.track("http:s2", "1", c):
        assert not inflight.cancel_request("http:s1", "9", "gone")
        assert inflight.cancel_request("http:s1", "1", "gone") and a.cancelled and a.reason == "gone"
        assert inflight.cancel_session("http:s1", "deleted") == 2 and b.cancelled and not c.cancelled
    assert len(inflight) == 0


def test_the_program_in_what_a_host_sent() -> None:
    assert runs.prepare("print(1)", []) == "print(1)"
    assert runs.prepare("Here:\n```python\nprint(2)\n```\nDone.", []) == "print(2)\n"
    assert runs.prepare("  \n", []) is None and runs.prepare("", []) is None


def test_describe_finds_tools_by_any_name_a_model_uses(toolset: Toolset) -> None:
    catalog = Catalog(toolset, "bm25")
    found = catalog.describe(["library.get_book", "getBook", "list_author_books(author_id=1)", "get_boks", "nothing"])
    assert [t.name for t in found.tools] == ["get_book", "list_author_books"]
    assert found.unknown == {"get_boks": ["get_book"], "nothing": []}
    assert "Did you mean get_book?" in found.text() and "Use search_tools" in found.text()
    with pytest.raises(UsageError):
        catalog.describe([])
    with pytest.raises(UsageError):
        catalog.search("  ")
    assert [t.name for t in catalog.search("reviews of a book", k=1).tools] == ["list_book_reviews"]
    assert len(catalog.search("book", k=500).tools) <= 50


def test_what_a_host_reads_for_a_program_that_did_not_run(toolset: Toolset) -> None:
    static = runs.static_check("print(get_book(bookid=1))", toolset)
    assert static is not None and static.error is not None and static.error["tool"] == "get_book"
    assert static.to_dict()["sandbox"] == "none" and static.to_dict()["calls"] == []
    shown = static.text()
    assert "nothing was run" in shown and "get_book(book_id: int)" in shown and "call run_program again" in shown
    budget = runs.refused("print(1)", "CallBudget", "this session has used its 5 tool calls",
                          hint="start a new session")
    assert budget.text().splitlines()[:3] == ["The program was not run.", "",
                                              "Error: CallBudget: this session has used its 5 tool calls"]
    assert budget.text().splitlines()[-1] == "No program can run here any more: start a new session."
    assert runs.static_check("print(get_book(book_id=1)['title'])", toolset) is None


def test_settings_refuse_what_cannot_be_served(toolset: Toolset) -> None:
    with pytest.raises(UsageError, match="has no model"):
        ServeSettings(toolset, retriever="reinvoke")
    with pytest.raises(UsageError, match="at least 1"):
        ServeSettings(toolset, concurrency=0)
    renamed = Toolset([toolset.collections[0]])
    renamed.collections[0].tools[0].name = "run_program"
    with pytest.raises(UsageError, match="one of atc serve's own tools"):
        ServeSettings(Toolset(renamed.collections), proxy_tools=True)


def test_a_sandbox_that_cannot_run_the_program_is_an_error_result_not_a_crash(toolset: Toolset) -> None:
    """A backend that raises (the Docker engine went away) answers the host with the reason."""
    import anyio
    from mcp import Client

    from atc.errors import SandboxError
    from atc.serve.server import build_server
    from sandbox.api import ExecutionResult, Limits

    class Gone:
        name = "docker"

        def run(self, program: str, tools: Toolset, limits: Limits) -> ExecutionResult:
            raise SandboxError("the Docker engine does not answer", hint="start it, or serve with --sandbox local")

        def close(self) -> None:
            pass

        def __enter__(self) -> Gone:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    server = build_server(ServeSettings(toolset, retriever="bm25"), Gone())  # type: ignore[arg-type]

    async def go() -> object:
        async with Client(server, mode="legacy") as client:
            return await client.call_tool("run_program", {"program": "print(get_stats())"})

    result = anyio.run(go)
    assert result.is_error and result.structured_content["error"]["type"] == "SandboxError"  # type: ignore[attr-defined]
    assert "does not answer" in result.content[0].text and "--sandbox local" in result.content[0].text  # type: ignore[attr-defined]
