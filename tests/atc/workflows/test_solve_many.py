"""``solve_many``: 50 tasks, 8 at a time, real local sandboxes, one scripted model server.

The server picks each reply by the task marker in the request, so every task gets its own
program calling its own arguments; some tasks fail first and are repaired, concurrently with
the others. The test checks order, that no call log holds another task's calls, and that no
process outlives the backend.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

from atc.llm.client import OpenAIModel
from atc.workflows.many import solve_many
from protocols.loaders import load_data
from sandbox.api import Limits
from tests.support.apis.library import BOOKS, REVIEWS, LibraryAPI
from tests.support.fakes.openai_server import ScriptedOpenAI
from tests.support.procs import descendants

TASKS = 50
BOOK_IDS = sorted(BOOKS)


def program_for(n: int, *, broken: bool) -> str:
    book = BOOK_IDS[n % len(BOOK_IDS)]
    key = "reviewz" if broken else "reviews"
    return (f"book = get_book(book_id={book})\n"
            f"reviews = list_book_reviews(book_id=book['id'], limit={n})\n"
            f"result = {{'reviews': reviews}}\n"
            f"print('task {n}:', book['title'], len(result['{key}']))\n")


def route(body: dict[str, Any]) -> str:
    text = json.dumps(body["messages"])
    n = int(re.search(r"\[task (\d+)\]", text).group(1))  # type: ignore[union-attr]
    repairing = any(m["role"] == "assistant" for m in body["messages"])
    return f"```python\n{program_for(n, broken=n % 10 == 0 and not repairing)}```"


def test_fifty_tasks_eight_at_a_time(api: LibraryAPI) -> None:
    from sandbox.execute import close_backends
    from sandbox.local.backend import LocalBackend

    close_backends()  # warm pools of earlier tests would blur the process count
    before = descendants(os.getpid())
    library = load_data(api.spec(), name="library")
    queries = [f"[task {n}] How many reviews (at most {n}) does book {BOOK_IDS[n % len(BOOK_IDS)]} have?"
               for n in range(1, TASKS + 1)]
    with ScriptedOpenAI(router=route) as server:
        client = OpenAIModel("scripted-model", base_url=server.base_url, backoff=0.01)
        with LocalBackend() as backend:
            started = time.perf_counter()
            solutions = solve_many(queries, library, concurrency=8, client=client, sandbox=backend,
                                   limits=Limits(timeout=30))
            elapsed = time.perf_counter() - started
            # the scan does see sandbox processes: a warmed pool shows up as descendants
            backend.warm_up(Limits(timeout=30))
            deadline = time.monotonic() + 10
            while not descendants(os.getpid()) - before and time.monotonic() < deadline:
                time.sleep(0.05)
            assert descendants(os.getpid()) - before
        assert len(server.requests) == TASKS + TASKS // 10

    assert len(solutions) == TASKS
    for n, sol in enumerate(solutions, 1):
        book = BOOK_IDS[n % len(BOOK_IDS)]
        assert sol.ok, (n, sol.error)
        assert sol.query == queries[n - 1]
        assert sol.answer == f"task {n}: {BOOKS[book]['title']} {len(REVIEWS[book][:n])}\n"
        assert [(c.tool, c.args) for c in sol.calls] == [
            ("get_book", {"book_id": book}), ("list_book_reviews", {"book_id": book, "limit": n})]
        assert len(sol.attempts) == (2 if n % 10 == 0 else 1)
        assert sol.usage.llm_calls == len(sol.attempts)
        if n % 10 == 0:
            assert sol.attempts[0].error["type"] == "KeyError"  # type: ignore[index]
            assert [c.args.get("limit") for c in sol.attempts[0].result.calls] == [None, n]  # type: ignore[union-attr]
    # the API saw exactly the calls of the runs, each task's limit once per run
    limits = sorted(int(r.query["limit"]) for r in api.requests if "limit" in r.query)
    assert limits == sorted(list(range(1, TASKS + 1)) + list(range(10, TASKS + 1, 10)))
    assert elapsed < 120

    deadline = time.monotonic() + 10
    while descendants(os.getpid()) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert descendants(os.getpid()) - before == set()
