"""``atc.session`` and ``atc.asession``: a sandbox session from the Python API.

    import atc
    with atc.session(shop, base_url=api.url) as s:
        s.run("hits = search_books(query='garden')['results']")
        print(s.run("print(len(hits))").answer)   # the globals of the first snippet are there

    async with atc.asession(shop, base_url=api.url) as s:
        result = await s.run("print(get_stats())")

The session itself is ``sandbox.session.open.Session`` (its limits, its reaping, its teardown);
this layer adds what the Python API accepts as tools everywhere (``atc.toolsets``): a stored
collection's name besides Collections, spec paths, MCP sources and Toolsets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from atc.approval import task_writes
from atc.toolsets import ToolsArg, toolset_for
from protocols.errors import UsageError
from sandbox.api import Backend, ExecutionResult, Limits, SessionLimits
from sandbox.execute import WritesArg
from sandbox.gateway.writes.policy import Approver
from sandbox.session.open import Session, open_session

__all__ = ["session", "asession", "Session", "AsyncSession", "SessionLimits"]


def session(
    tools: ToolsArg,
    limits: Limits | None = None,
    *,
    sandbox: str | Backend | None = None,
    session_limits: SessionLimits | None = None,
    base_url: str | dict[str, str] | None = None,
    credentials: dict[str, str] | None = None,
    validation: str | dict[str, str] | None = None,
    writes: WritesArg = None,
    approve: Approver | None = None,
) -> Session:
    """Open a sandbox session: one isolated interpreter whose globals survive from one
    ``run(code)`` to the next, under ``limits`` (``timeout`` per snippet, the rest for the whole
    session) and ``session_limits``, torn down on ``close()`` or at the end of a ``with`` block.
    The session is one task: its snippets share one write ledger, so a snippet that repeats an
    earlier one's write gets the recorded answer instead of writing twice (``writes``/``approve``
    as for ``atc.solve``). The other arguments are ``atc.run``'s.

    Args:
        tools: as for ``atc.run``.
        limits: ``timeout`` per snippet, the rest for the whole session.
        session_limits: the session's own bounds (``SessionLimits``).
        **keywords: ``sandbox``, ``base_url``, ``credentials``, ``validation``, ``writes``,
            ``approve``: as for ``atc.run``.

    Returns:
        The open ``Session`` (a context manager).

    Raises:
        UsageError: a bad argument or tools form.
        NotFound: a word that names no file and no stored collection.
        ConfigError: a credential or server URL that cannot work.
        SandboxError: no interpreter could be started.
    """
    toolset = task_writes(toolset_for(tools, base_url, credentials, validation), writes, approve)
    return open_session(toolset, limits, sandbox=sandbox, session_limits=session_limits)


class AsyncSession:
    """A session for asyncio callers: ``await s.run(code)``. Opened by ``await`` or ``async with``
    (or the first ``run``); each snippet runs in a worker thread. A ``run`` that is cancelled
    ends the session (its snippet is stopped: what it did to the globals is unknown)."""

    def __init__(self, opener: Callable[[], Session]) -> None:
        self._opener = opener
        self._session: Session | None = None
        self._opening: asyncio.Lock | None = None

    async def open(self) -> AsyncSession:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._session is None:
                self._session = await asyncio.to_thread(self._opener)
        return self

    def __await__(self) -> Any:
        return self.open().__await__()

    async def __aenter__(self) -> AsyncSession:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def session(self) -> Session:
        """The underlying ``Session`` (once opened): ``alive``, ``ended``, ``calls``, ``exec_seconds``..."""
        if self._session is None:
            raise UsageError("this session is not open yet", hint="await it, or use `async with`")
        return self._session

    async def run(self, code: str) -> ExecutionResult:
        await self.open()
        current = self.session
        try:
            return await asyncio.to_thread(current.run, code)
        except asyncio.CancelledError:
            current.interpreter.close("a snippet was cancelled")
            raise

    async def close(self) -> None:
        if self._session is not None:
            await asyncio.to_thread(self._session.close)


def asession(
    tools: ToolsArg,
    limits: Limits | None = None,
    *,
    sandbox: str | Backend | None = None,
    session_limits: SessionLimits | None = None,
    base_url: str | dict[str, str] | None = None,
    credentials: dict[str, str] | None = None,
    validation: str | dict[str, str] | None = None,
    writes: WritesArg = None,
    approve: Approver | None = None,
) -> AsyncSession:
    """``session`` for asyncio callers: ``async with atc.asession(tools) as s`` or
    ``s = await atc.asession(tools)``. The tools are read now (bad input raises here); the sandbox
    opens in a worker thread.

    Args:
        tools: as for ``atc.run``; the other keywords are ``atc.session``'s.

    Returns:
        An ``AsyncSession``, opened by ``await`` or ``async with``.

    Raises:
        UsageError: a bad argument or tools form.
        NotFound: a word that names no file and no stored collection.
    """
    toolset = task_writes(toolset_for(tools, base_url, credentials, validation), writes, approve)
    return AsyncSession(lambda: open_session(toolset, limits, sandbox=sandbox, session_limits=session_limits))
