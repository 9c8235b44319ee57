"""A stdio MCP server, read under bounds: ``bounded_stdio_client``, the transport of stdio
connections in place of the SDK's ``stdio_client`` (issue 29).

The server is a child process in its own process group, its environment the SDK's safe defaults
with the server's own variables over them, its stderr kept where the caller says. Messages are
newline-delimited JSON-RPC. The SDK's reader joins the lines of its pipe as Python strings
(quadratic in a line's length: a 120 MB line never ends) and parses every line whole; this one
splits the bytes it reads at newlines, holds at most the reading limit of a line (``Ledger``), and
judges each line before the SDK's parser sees it (``sandbox.gateway.mcp.bounds``):

- a line that grows past its limit is refused at once (its request, known from its first bytes,
  or every waiting one, gets the error) and the rest of it is read and dropped;
- a whole line over its request's bounds in values is refused the same way, unparsed;
- a line the SDK cannot parse (not JSON, nested too deep) is an error for its request when its
  id shows, else goes to the session as the SDK would pass it (the connection's record of
  non-MCP output).

Shutting down follows the MCP specification's order, every wait bounded: stop reading for the
session, close the server's stdin, wait, then SIGTERM and SIGKILL to its process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator
from typing import IO, Any

from sandbox.gateway.mcp.bounds import (
    HEAD_BYTES,
    TOO_DEEP,
    Ledger,
    Pieces,
    error_json,
    message_id,
    parse_problem,
    refusal,
    too_large,
)

__all__ = ["bounded_stdio_client"]

#: Seconds the server has to exit once its stdin is closed, then once it got SIGTERM.
EXIT_GRACE = 2.0
_TAIL = 512


def _session_message(data: bytes) -> Any:
    # lazy: the optional MCP SDK
    from mcp.shared.message import SessionMessage
    from mcp.types import jsonrpc_message_adapter

    return SessionMessage(jsonrpc_message_adapter.validate_json(data, by_name=False))


def _as_text_error(line: bytes, exc: ValueError) -> ValueError:
    from mcp.types import jsonrpc_message_adapter  # lazy: the optional MCP SDK

    try:
        jsonrpc_message_adapter.validate_json(line.decode("utf-8", "replace"), by_name=False)
    except ValueError as text_exc:
        return text_exc
    return exc


async def _stop(process: Any) -> None:
    """Close the server's stdin; SIGTERM then SIGKILL to its group if it does not exit."""
    import anyio  # lazy: comes with the optional MCP SDK

    with contextlib.suppress(Exception):
        await process.stdin.aclose()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, sig)
        with anyio.move_on_after(EXIT_GRACE):
            while process.returncode is None:
                await anyio.sleep(0.01)
        if process.returncode is not None:
            break
    # Its pipes closed and its end awaited, the asyncio transport closes too (else it warns at
    # garbage collection, once the loop is gone). Bounded: a grandchild may hold the pipes open.
    with anyio.move_on_after(EXIT_GRACE, shield=True), contextlib.suppress(Exception):
        await process.aclose()


@contextlib.asynccontextmanager
async def bounded_stdio_client(command: str, args: list[str], env: dict[str, str] | None, cwd: str | None,
                               errlog: IO[bytes], ledger: Ledger) -> AsyncIterator[tuple[Any, Any]]:
    """Start the server and yield the session's (read, write) streams (see the module docstring)."""
    # lazy: the optional MCP SDK and its anyio
    import anyio
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process([command, *args], env=get_default_environment() | (env or {}),
                                       stderr=errlog, cwd=cwd, start_new_session=True)
    stdin, stdout = process.stdin, process.stdout
    assert stdin is not None and stdout is not None  # opened with pipes
    to_session, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    listening = True

    async def deliver(item: Any) -> None:
        nonlocal listening
        if listening:
            try:
                await to_session.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                listening = False  # the session is gone: the rest is read and dropped

    async def refuse(rid: Any, reason: str) -> None:
        for target in ledger.refuse(rid, reason):
            await deliver(_session_message(error_json(target, reason)))

    async def take(line: bytes) -> None:
        rid = message_id(line[:HEAD_BYTES], line[-_TAIL:])
        reason = refusal(line, ledger.bounds(rid))
        if reason is not None:
            await refuse(rid, reason)
            return
        try:
            message = _session_message(line)
        except ValueError as exc:  # pydantic's ValidationError included
            if ledger.state(rid) is not None or (rid is None and line.lstrip()[:1] == b"{" and
                                                 parse_problem(exc) == TOO_DEEP):
                await refuse(rid, parse_problem(exc))  # an answer (one naming none: every waiting call's)
            else:  # non-MCP output, quoted as text (as the SDK's reader would) for the connection's record
                await deliver(_as_text_error(line, exc))
            return
        if hasattr(message.message, "result") or hasattr(message.message, "error"):
            ledger.answered(message.message.id)
        await deliver(message)

    async def reader() -> None:
        def limit(head: bytes) -> tuple[Any, int]:
            rid = message_id(head)
            return rid, ledger.reading_limit(rid)

        lines = Pieces(b"\n", limit)
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream,
                                 ConnectionError, OSError):
            async for chunk in stdout:
                for event in lines.feed(chunk):
                    if event[0] == "whole":
                        await take(event[1])
                    else:
                        await refuse(event[1], too_large(ledger.bounds(event[1]), event[2]))
        with contextlib.suppress(Exception):
            await to_session.aclose()

    async def writer() -> None:
        try:
            async with from_session:
                async for item in from_session:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
                    await stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            with contextlib.suppress(Exception):
                await to_session.aclose()  # the session sees the connection end, not a hang

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        tasks.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                listening = False
                read_stream.close()
                write_stream.close()
                await _stop(process)
            tasks.cancel_scope.cancel()

