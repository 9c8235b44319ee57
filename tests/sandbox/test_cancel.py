"""``sandbox.cancel``: a run stopped from another thread ends at once as ``Cancelled``, on every
backend, and its runner is killed like a timed-out one (what ``atc serve`` does when a client
cancels or goes away)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from protocols.model import Collection
from sandbox.api import ExecutionResult, Limits
from sandbox.cancel import Cancel, cancellable, current
from sandbox.docker.engine import docker_available
from sandbox.execute import run

SPIN = "n = 0\nwhile True:\n    n += 1\n"
BACKENDS = ["local", pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.skipif(
    not docker_available(), reason="no Docker engine or no atc-sandbox:latest image")])]


def _run_cancelled(sandbox: str, token: Cancel, after: float | None) -> tuple[ExecutionResult, float]:
    out: dict[str, ExecutionResult] = {}

    def work() -> None:
        with cancellable(token):
            out["result"] = run(SPIN, [Collection(name="none")], Limits(timeout=30), sandbox=sandbox)

    thread = threading.Thread(target=work)
    began = time.monotonic()
    thread.start()
    if after is not None:
        time.sleep(after)
        token.cancel("the client went away")
    thread.join(30)
    return out["result"], time.monotonic() - began


@pytest.mark.parametrize("sandbox", BACKENDS)
def test_a_cancelled_run_ends_at_once(sandbox: str) -> None:
    result, took = _run_cancelled(sandbox, Cancel(), after=1.5)
    assert result.error is not None and result.error.type == "Cancelled"
    assert result.error.message == "the client went away" and result.error.tool is None
    assert took < 10  # not the 30 s timeout


def test_a_token_cancelled_before_the_run_stops_it_when_it_starts() -> None:
    token = Cancel()
    token.cancel("too late")
    result, took = _run_cancelled("local", token, after=None)
    assert result.error is not None and result.error.type == "Cancelled" and took < 10


def test_the_token_belongs_to_its_thread_and_block() -> None:
    token = Cancel()
    assert current() is None
    with cancellable(token):
        assert current() is token
        seen: list[object] = []
        other = threading.Thread(target=lambda: seen.append(current()))
        other.start()
        other.join()
        assert seen == [None]
    assert current() is None
    a, b = socket.socketpair()
    with a, b:
        with token.watching(a):
            token.cancel("first")
            token.cancel("second")
            assert a.recv(1) == b""  # shut down: a blocked recv would wake
        assert token.reason == "first" and token.wait(0)


def test_cancelling_the_task_awaiting_arun_stops_the_program() -> None:
    import asyncio
    import os

    from sandbox.execute import arun
    from tests.support.procs import descendants
    from tests.support.serve import spinning, wait_gone

    cancelled_at: list[float] = []

    async def main() -> set[int]:
        task = asyncio.ensure_future(arun(SPIN, [Collection(name="none")], Limits(timeout=30), sandbox="local"))
        busy: set[int] = set()
        for _ in range(20):  # the program's jail burns CPU once it runs
            busy = await asyncio.to_thread(spinning, descendants(os.getpid()))
            if busy:
                break
        task.cancel()
        cancelled_at.append(time.monotonic())
        with pytest.raises(asyncio.CancelledError):
            await task
        return busy

    busy = asyncio.run(main())  # waits for the executor's threads: the run's too
    assert busy and wait_gone(busy, 5) == set(), "the program of the cancelled task still runs"
    assert time.monotonic() - cancelled_at[0] < 10, "the run went on after its task was cancelled"
