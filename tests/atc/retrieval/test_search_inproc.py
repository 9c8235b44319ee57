"""Search over tools held in the process (issue 33, item 4): ``atc.search(q, tools)`` takes
collections like every other ``tools=``, and a set of tools is indexed once per process (by its
objects, and by content), shared by concurrent requests.

The embedder is off (``ATC_EMBED_MODEL=none``: BM25F ranks) except in the hybrid test, which uses
the local model the package ships.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import atc
from atc.retrieval import inmemory
from atc.retrieval.lexical import LexicalIndex
from protocols.loaders import load_data
from protocols.model import Tool
from tests.support.apis.library import library_spec
from tests.support.fakes import functions as fx


@pytest.fixture(autouse=True)
def _bm25(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATC_EMBED_MODEL", "none")
    inmemory.clear()


@pytest.fixture()
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many lexical indexes were built (one per corpus)."""
    count: list[int] = []
    real = LexicalIndex.build.__func__  # type: ignore[attr-defined]

    def counted(cls: type[LexicalIndex], docs: object) -> LexicalIndex:
        count.append(1)
        return real(cls, docs)  # type: ignore[no-any-return]

    monkeypatch.setattr(LexicalIndex, "build", classmethod(counted))
    return count


def test_collections_and_everything_tools_takes_are_searched() -> None:
    library = load_data(library_spec("http://127.0.0.1:9"))
    assert atc.search("reader reviews of a book", [library], k=1).hits[0].name == "list_book_reviews"
    assert atc.search("reader reviews of a book", library, k=1).hits[0].name == "list_book_reviews"
    mixed = atc.search("move an item to another aisle", [library, fx.move_item, fx.get_item], k=1)
    assert (mixed.hits[0].collection, mixed.hits[0].name) == ("functions", "move_item")
    found = atc.search("supplier of an item", atc.Toolset([library]).collections + [fx.INVENTORY], k=1)
    assert found.hits[0].name == "supplier_of"


def test_a_set_of_tools_is_indexed_once(builds: list[int]) -> None:
    library = load_data(library_spec("http://127.0.0.1:9"))
    for query in ("reviews", "authors by name", "order copies"):
        atc.search(query, library.tools)
    assert len(builds) == 1
    again = load_data(library_spec("http://127.0.0.1:9"))  # other objects, the same content
    atc.search("reviews", again.tools)
    assert len(builds) == 1
    assert inmemory.shared_corpus(again.tools) is inmemory.shared_corpus(library.tools)
    changed = load_data(library_spec("http://127.0.0.1:9"))
    changed.tools[0].description = "Find the writers whose names contain these letters."
    assert atc.search("writers whose names contain", changed.tools, k=1).hits[0].name == changed.tools[0].name
    assert len(builds) == 2
    library.tools[1].description = "Dispatch a courier."  # changed in place: noticed by its text
    assert atc.search("dispatch a courier", library.tools, k=1).hits[0].name == library.tools[1].name
    assert len(builds) == 3


def test_concurrent_requests_share_one_build(builds: list[int]) -> None:
    tools = [Tool(name=f"op_{i}", collection="big", description=f"operation number {i} of the big api")
             for i in range(3000)]
    results: list[str] = []

    def one() -> None:
        results.append(atc.search("operation number 1234", tools, k=1).hits[0].name)

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["op_1234"] * 6 and len(builds) == 1


def test_solve_shares_the_corpus_of_its_tools(monkeypatch: pytest.MonkeyPatch, builds: list[int],
                                              tmp_path: Path) -> None:
    from atc.loop.solving import choose_tools
    from sandbox.api import Toolset

    tools = [Tool(name=f"op_{i}", collection="big", description=f"operation number {i}") for i in range(50)]
    toolset = Toolset([atc.Collection("big", tools=tools)])
    for _ in range(3):
        shown = choose_tools("operation number 7", toolset, top_k=5)
        assert shown[0].name == "op_7"
    assert len(builds) == 1
