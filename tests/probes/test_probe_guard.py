"""The scope guard of unsafe probing (issue 29, item 1): a write the scope allows never follows a
redirect out of the scope. Against a real store on 127.0.0.1 (tests/support/apis/redirecting.py) whose
in-scope writes answer 301/302/307/308 with a ``Location`` elsewhere; every assertion is read from
the server's own log and state."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from probes import probe
from probes.plan.guard import ScopeGuard
from probes.plan.scope import Scope
from protocols import load_data
from protocols.model import Binding, Tool
from sandbox.gateway.writes.policy import WriteRequest
from tests.support.apis.redirecting import INITIAL, RedirectingStore

SCOPE = {"bucket_id": "throwaway"}


def _probe(api: RedirectingStore, **kw: Any) -> Any:
    kw.setdefault("allow_unsafe", True)
    kw.setdefault("scope", SCOPE)
    return probe(load_data(api.spec(), source="buckets"), no_llm=True, cache=False, on_event=lambda e, s: None, **kw)


def _outside(api: RedirectingStore) -> list[tuple[str, str, int]]:
    """Writes the server saw anywhere but in the pinned bucket."""
    return [w for w in api.writes() if not (w[1].rstrip("/") == "/buckets/throwaway"
                                              or w[1].startswith("/buckets/throwaway/"))]


def _to_prod(status: int) -> Any:
    """Every write in the scope answers ``status`` towards the user's bucket (item after item)."""
    counter = iter(range(1, 1000))

    def redirect(method: str, path: str) -> tuple[int, str] | None:
        if method in ("PATCH", "DELETE") and path.startswith("/buckets/throwaway"):
            return status, f"/buckets/prod/items/p{next(counter) % 10 + 1}"
        if method in ("PATCH", "DELETE") and path.startswith("/buckets/prod/items/"):
            return status, f"/buckets/prod/items/p{next(counter) % 10 + 1}"  # a chain of ten hops
        return None

    return redirect


@pytest.mark.parametrize("status", [307, 308, 301, 302])
def test_an_in_scope_write_never_follows_a_redirect_out_of_the_scope(status: int) -> None:
    with RedirectingStore(redirect=_to_prod(status)) as api:
        report = _probe(api)
        outside = _outside(api)
        data = copy.deepcopy(api.data)
        sent = [(m, p) for m, p, _ in api.writes()]
    assert any(m == "PATCH" for m, _ in sent) and any(m == "DELETE" for m, _ in sent), sent
    assert outside == [], outside  # zero requests reached an object outside the scope
    assert data["prod"] == INITIAL["prod"] and data["archive"] == INITIAL["archive"]
    hops = report.outside_scope
    assert hops and all(h["hop"] >= 1 and "/buckets/prod/" in h["url"] for h in hops)
    refused = [w for w in report.writes if w["status"] == "failed" and "not followed" in (w["result"] or "")]
    assert refused and all("outside the scope" in w["result"] or "only to the object it deletes" in w["result"]
                           for w in refused)


def test_a_redirect_inside_the_scope_is_followed_and_the_probe_cleans_up() -> None:
    def slash(method: str, path: str) -> tuple[int, str] | None:
        if method in ("PATCH", "DELETE") and path.startswith("/buckets/throwaway/") and not path.endswith("/"):
            return 308, path + "/"
        return None

    with RedirectingStore(redirect=slash) as api:
        report = _probe(api)
        data = copy.deepcopy(api.data)
        writes = api.writes()
    assert any(m == "PATCH" and p.endswith("/") and s == 200 for m, p, s in writes)
    assert any(m == "DELETE" and p.endswith("/") and s == 200 for m, p, s in writes)
    assert report.outside_scope == [] and report.left_behind == []
    assert "throwaway" not in data and data["prod"] == INITIAL["prod"]
    assert report.tool("patch_item").status == "documented"


@pytest.mark.parametrize("location", ["/buckets/throwaway%2F..%2Fprod/items/p1", "/buckets/throwaway/%2e%2e/prod",
                                      "/buckets/prod/items/p1/", "http://localhost:{port}/buckets/prod/items/p1"])
def test_a_redirect_that_climbs_out_or_changes_host_is_refused(location: str) -> None:
    api = RedirectingStore()

    def sneaky(method: str, path: str) -> tuple[int, str] | None:
        if method in ("PATCH", "DELETE") and path.startswith("/buckets/throwaway/items/"):
            return 307, location.format(port=api.port)
        return None

    api.redirect = sneaky
    with api:
        report = _probe(api)
        outside = _outside(api)
        data = copy.deepcopy(api.data)
    assert outside == [] and data["prod"] == INITIAL["prod"]
    assert any(w["tool"] == "patch_item" and w["status"] == "failed" for w in report.writes)


def _tool() -> Tool:
    return Tool(name="patch_item", collection="b", method="PATCH", path="/buckets/{bucket_id}/items/{id}",
                parameters={"type": "object", "properties": {"bucket_id": {"type": "string"},
                                                             "id": {"type": "string"}, "title": {"type": "string"}},
                            "required": ["bucket_id", "id"]},
                bindings={"bucket_id": Binding("path", "bucket_id"), "id": Binding("path", "id"),
                          "title": Binding("body", "title")})


def _request(args: dict[str, Any], url: str, hop: int = 0) -> WriteRequest:
    return WriteRequest(tool="patch_item", collection="b", method="PATCH", path="/buckets/{bucket_id}/items/{id}",
                        url=url, args=args, hop=hop)


def test_the_guard_lets_through_only_the_step_being_sent() -> None:
    tool = _tool()
    guard = ScopeGuard(Scope((("bucket_id", "throwaway"),)), {"patch_item": tool}, lambda name: "http://h:1/api")
    args = {"bucket_id": "throwaway", "id": "c1", "title": "x"}
    url = "http://h:1/api/buckets/throwaway/items/c1"
    assert guard(_request(args, url)) is not None  # nothing is being sent: no write goes
    guard.know("c1")
    with guard.sending(tool, args):
        assert guard(_request(args, url)) is None
        assert guard(_request({**args, "title": "y"}, url)) is not None  # other arguments
        assert guard(_request(args, "http://h:1/api/buckets/throwaway/items/c2")) is not None  # another path
        assert guard(_request(args, url + "/", hop=1)) is None  # the same object
        assert guard(_request(args, "http://h:1/api/buckets/throwaway/items/c9", hop=1)) is None  # in the bucket
        assert guard(_request(args, "http://h:1/api/buckets/prod/items/c1", hop=1)) is not None
        assert guard(_request(args, "http://h:1/api/buckets/throwaway/items/%2E%2E/x", hop=2)) is not None
        assert guard(_request(args, "http://h:1/other/buckets/throwaway/items/c1", hop=1)) is not None
        assert guard(_request(args, "http://evil:1/api/buckets/throwaway/items/c1", hop=1)) is not None
    with guard.sending(tool, args, delete=True):
        assert guard(_request(args, url + "/", hop=1)) is None
        assert guard(_request(args, "http://h:1/api/buckets/throwaway/items/c9", hop=1)) is not None
    assert guard(_request(args, url)) is not None  # the step is over
    assert len(guard.refusals) == 9 and all(r["reason"] for r in guard.refusals)


def test_the_guard_keeps_path_arguments_inside_the_pinned_folder() -> None:
    tool = Tool(name="write_file", collection="fs", method="MCP", path="write_file",
                parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
    guard = ScopeGuard(Scope((("path", "/tmp/scratch"),)), {"write_file": tool}, lambda name: None)
    inside, outside = {"path": "/tmp/scratch/atc-probe-1"}, {"path": "/tmp/scratch/../etc/passwd"}

    def request(args: dict[str, Any]) -> WriteRequest:
        return WriteRequest(tool="write_file", collection="fs", method="MCP", path="write_file",
                            url="mcp://fs/write_file", args=args)

    with guard.sending(tool, inside):
        assert guard(request(inside)) is None
    with guard.sending(tool, outside):
        assert "outside the scope" in (guard(request(outside)) or "")


def test_a_write_that_names_things_in_its_query_follows_no_redirect() -> None:
    """The guard sees a hop's path, not its query: ``DELETE /items?id=mine`` redirected to
    ``/items?id=yours`` has the same path."""
    tool = Tool(name="delete_item", collection="b", method="DELETE", path="/items",
                parameters={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
                bindings={"id": Binding("query", "id")})
    guard = ScopeGuard(Scope((("id", "mine"),)), {"delete_item": tool}, lambda name: "http://h:1")
    args = {"id": "mine"}

    def request(hop: int) -> WriteRequest:
        return WriteRequest(tool="delete_item", collection="b", method="DELETE", path="/items",
                            url="http://h:1/items", args=args, hop=hop)

    with guard.sending(tool, args, delete=True):
        assert guard(request(0)) is None
        assert "query" in (guard(request(1)) or "")
