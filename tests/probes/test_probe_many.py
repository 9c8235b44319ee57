"""``probe_many``: several collections probed as separate tasks, in threads and on a local Ray
cluster (127.0.0.1 only), against real APIs on 127.0.0.1; the reports match ``probe`` of each
collection alone and come back in the order of the targets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from atc import examples
from atc.mock import MockServer
from probes import probe, probe_many
from protocols import load_spec
from protocols.loaders import load_data
from tests.support.apis.library import LibraryAPI


@pytest.fixture()
def bookshop() -> Iterator[tuple[Any, str]]:
    shop = load_spec(examples.path("bookshop/openapi.json"))
    with MockServer(shop) as server:
        yield shop, server.url


def _summary(report: Any) -> list[tuple[str, str]]:
    return [(t.name, t.status) for t in report.tools]


@pytest.mark.parametrize("executor", ["local", pytest.param("ray", marks=pytest.mark.slow)])
def test_reports_in_order_and_as_probed_alone(executor: str, bookshop: tuple[Any, str], api: LibraryAPI,
                                               tmp_path: Path) -> None:
    shop, url = bookshop
    library = load_data(api.spec(), name="library")
    alone = [probe(shop, base_url=url, no_llm=True, cache=False, sandbox="local"),
             probe(library, no_llm=True, cache=False, sandbox="local")]
    seen: list[int] = []
    try:
        reports = probe_many([shop, library, tmp_path / "missing.json"], base_url={"bookshop": url}, no_llm=True,
                             cache=False, sandbox="local", executor=executor, concurrency=2,
                             out=tmp_path / "out", on_result=lambda i, r: seen.append(i))
    finally:
        if executor == "ray":
            import ray

            ray.shutdown()
    assert [r.collection for r in reports[:2]] == ["bookshop", "library"]
    assert [_summary(r) for r in reports[:2]] == [_summary(a) for a in alone]
    assert reports[0].count("documented") >= 5 and reports[1].count("documented") >= 3
    assert sorted(seen) == [0, 1, 2]
    assert not reports[2].ok and "not probed" in (reports[2].note or "")
    assert (tmp_path / "out" / "bookshop" / "openapi.json").exists()
    assert (tmp_path / "out" / "library" / "openapi.json").exists()
