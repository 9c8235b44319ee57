"""The Python-function side of one gateway call: a validated call -> the host function -> a ``Reply``.

``FunctionTransport.send(tool, args)`` sits next to the HTTP and MCP transports behind the
gateway's ``_exchange`` (tools whose ``method`` is ``protocols.functions.FUNCTION_METHOD``): the
gateway has counted the call against the budget and validated the arguments against the tool's
schema, and will redact and log what comes back, as for any tool. Here:

1. the function is found in the tool's ``FunctionCollection`` (the callables never left the host);
2. its arguments are converted to the types it declares (``HostFunction.arguments``: a pydantic
   model, a dataclass, an enum, a date...); a value the conversion refuses fails the call with
   ``failure`` ``arguments``;
3. it runs on a worker thread of the host (``Workers``: one call per thread, a new thread when
   none is idle, so that concurrent runs of a batch call functions at once and a function still
   running past its deadline holds up nobody); an ``async`` function (or one returning an
   awaitable) runs on one event loop thread of the process. The call waits at most the per-call
   timeout cut at the program's deadline: past it the call fails with ``failure`` ``timeout`` (the
   session then ends the run as a ``Timeout`` blamed on this call). A coroutine is cancelled; a
   thread cannot be stopped in Python, so a sync function finishes in the background and its
   result is dropped;
4. an exception the function raised fails the call (``failure`` ``tool``) with its class and
   message only (``results.error_text``: no traceback, host paths shortened);
5. the result is made JSON data (``results.jsonable``), refused when it cannot be (``response``),
   and bounded like an API's body: at most ``Limits.max_response_bytes`` as JSON.

The call log records ``method`` ``"PYTHON"``, ``path`` the function's qualified name, ``status``
``None``.
"""

from __future__ import annotations

import _thread
import asyncio
import inspect
import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from protocols.functions import FunctionCollection, HostFunction
from protocols.model import Tool
from sandbox.api import Limits, Toolset
from sandbox.gateway.functions.results import MAX_DEPTH, NotJson, error_text, jsonable
from sandbox.gateway.http.transport import Reply, SendFailure
from sandbox.hostbounds import HostBounds
from sandbox.jsonbounds import max_depth

__all__ = ["FunctionTransport", "Workers", "workers", "MAX_IDLE_WORKERS"]

#: Idle worker threads kept for the next calls (more than this end when their call is done).
MAX_IDLE_WORKERS = 16


class _Job:
    """One call handed to a worker. ``done`` is a bare lock taken at birth and let go by the
    worker when the call is over: the caller's ``wait`` is one C-level acquire (an ``Event`` costs
    a ``Condition``, its waiter lock and their Python frames, a tenth of a function call's whole
    host cost)."""

    __slots__ = ("fn", "args", "kwargs", "done", "value", "error")

    def __init__(self, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.done = _thread.allocate_lock()
        self.done.acquire()
        self.value: Any = None
        self.error: BaseException | None = None

    def wait(self, timeout: float) -> bool:
        """True once the call is over, False if it was not by ``timeout`` seconds."""
        return self.done.acquire(True, timeout)


class Workers:
    """Threads that run host functions (see the module docstring)."""

    def __init__(self, max_idle: int = MAX_IDLE_WORKERS) -> None:
        self.max_idle = max_idle
        self._idle: list[queue.SimpleQueue[_Job]] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.started = 0

    def submit(self, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> _Job:
        job = _Job(fn, args, kwargs)
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            thread = threading.Thread(target=self._serve, args=(inbox,), name="atc-function", daemon=True)
            self.started += 1
            thread.start()
        inbox.put(job)
        return job

    def _serve(self, inbox: queue.SimpleQueue[_Job]) -> None:
        while True:
            job = inbox.get()
            try:
                job.value = job.fn(*job.args, **job.kwargs)
            except BaseException as exc:  # the function's own failure, reported to its caller
                job.error = exc
            finally:
                job.done.release()
            with self._lock:
                if len(self._idle) >= self.max_idle:
                    return
                self._idle.append(inbox)

    def loop(self) -> asyncio.AbstractEventLoop:
        """The process's event loop for async functions (a daemon thread runs it forever)."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="atc-function-loop", daemon=True).start()
                self._loop = loop
            return self._loop


_WORKERS: list[Workers] = []
_WORKERS_LOCK = threading.Lock()


def workers() -> Workers:
    """The process-wide ``Workers``."""
    with _WORKERS_LOCK:
        if not _WORKERS:
            _WORKERS.append(Workers())
        return _WORKERS[0]


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


#: Most values of a plain result read straight off a small one (a record, a short list of rows).
_PLAIN_ITEMS = 256
#: The largest such result taken as it is (its values are then surely fewer than any run's bound).
_PLAIN_BYTES = 1 << 16
_SCALARS = (str, int, float, bool, type(None))


def _plain_json(value: Any, max_bytes: int) -> bytes | None:
    """``value`` as JSON text when it is small plain JSON data that ``jsonable`` would keep as it
    is (dicts with text keys, lists, text, finite numbers, bools, None; at most ``max_bytes`` and
    ``MAX_DEPTH`` levels), else None: the rest (dataclasses, dates, NaN, tuples, big or deep
    results, ...) takes ``jsonable``'s bounded walk. Only the top level and its direct children
    are looked at before encoding (a result that is wide there is left to the walk); ``json.dumps``
    refuses anything deeper that is not JSON."""
    kind = type(value)
    if kind is dict:
        if len(value) > _PLAIN_ITEMS or not all(type(k) is str for k in value):
            return None
        children: Any = value.values()
    elif kind is list:
        if len(value) > _PLAIN_ITEMS:
            return None
        children = value
    else:
        return None
    for child in children:
        ck = type(child)
        if ck is dict or ck is list:
            if len(child) > _PLAIN_ITEMS:
                return None
        elif ck not in _SCALARS:
            return None
    try:
        raw = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8", "replace")
    except (TypeError, ValueError, RecursionError):
        return None
    if len(raw) > min(max_bytes, _PLAIN_BYTES):
        return None
    # nested no deeper than the walk allows (the bracket count settles most results in C)
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and max_depth(raw) > MAX_DEPTH:
        return None
    return raw


class FunctionTransport:
    """Calls the host functions of ONE run (see the module docstring). ``deadline`` gives the
    run's current deadline (a ``time.monotonic()`` value, or None): a session's gateway moves it
    from one snippet to the next."""

    def __init__(self, toolset: Toolset, limits: Limits, deadline: Callable[[], float | None]) -> None:
        self.toolset = toolset
        self.limits = limits
        self.deadline = deadline
        self.values = HostBounds.of(limits).frame_values

    def _host(self, tool: Tool) -> HostFunction:
        collection = self.toolset.collection_of(tool.name)
        found = collection.functions.get(tool.name) if isinstance(collection, FunctionCollection) else None
        if found is None:
            raise SendFailure(f"{tool.name}: no Python function is behind this tool in this process", tool=tool.name,
                              failure="config", hint="give the function itself (tools=[f] or --tools py:MODULE:NAME); "
                                                     "functions are never stored")
        return found

    def _timeout(self, tool: Tool) -> float:
        timeout = self.limits.call_timeout
        deadline = self.deadline()
        if deadline is not None:
            timeout = min(timeout, deadline - time.monotonic())
        if timeout <= 0:
            raise SendFailure(f"{tool.name}: the program's time ran out before the call", tool=tool.name,
                              failure="timeout")
        return timeout

    def send(self, tool: Tool, args: dict[str, Any], extra_query: dict[str, Any] | None = None) -> Reply:
        if extra_query is not None:
            raise SendFailure(f"{tool.name}: extra_query is for HTTP tools; a Python function takes its own "
                              "arguments only", tool=tool.name, failure="arguments", parameter="extra_query")
        host = self._host(tool)
        try:
            positional, keywords = host.arguments(args)
        except Exception as exc:
            raise SendFailure(f"{tool.name}: the arguments could not be converted: {error_text(exc)}",
                              tool=tool.name, failure="arguments") from None
        value = self._call(tool, host, positional, keywords, self._timeout(tool))
        raw = _plain_json(value, self.limits.max_response_bytes)
        if raw is not None:  # plain JSON already: encoded and read back in C, as an HTTP body is
            return Reply(status=None, headers={}, data=json.loads(raw), raw=raw)
        try:
            data = jsonable(value, self.values)
        except NotJson as exc:
            raise SendFailure(f"{tool.name}: the function's result is not JSON data: {exc}", tool=tool.name,
                              failure="response") from None
        raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")
        if len(raw) > self.limits.max_response_bytes:
            raise SendFailure(f"{tool.name}: the function's result is {len(raw)} bytes as JSON, more than "
                              f"--max-response-bytes {self.limits.max_response_bytes}", tool=tool.name,
                              failure="response")
        return Reply(status=None, headers={}, data=data, raw=raw)

    def _call(self, tool: Tool, host: HostFunction, positional: list[Any], keywords: dict[str, Any],
              timeout: float) -> Any:
        pool = workers()
        started = time.monotonic()
        if host.is_async:
            try:
                coroutine = host.fn(*positional, **keywords)
            except Exception as exc:
                raise SendFailure(f"{tool.name}: {error_text(exc)}", tool=tool.name, failure="tool") from None
            return self._await(tool, pool, coroutine, timeout)
        job = pool.submit(host.fn, positional, keywords)
        if not job.wait(timeout):
            raise SendFailure(f"{tool.name}: the function did not return within {timeout:.3g} s", tool=tool.name,
                              failure="timeout")
        if job.error is not None:
            if isinstance(job.error, Exception):
                raise SendFailure(f"{tool.name}: {error_text(job.error)}", tool=tool.name, failure="tool")
            raise SendFailure(f"{tool.name}: the function stopped with {type(job.error).__name__}", tool=tool.name,
                              failure="tool")
        if inspect.isawaitable(job.value):  # a sync function that handed back a coroutine
            return self._await(tool, pool, job.value, max(0.001, timeout - (time.monotonic() - started)))
        return job.value

    def _await(self, tool: Tool, pool: Workers, awaitable: Any, timeout: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(_awaited(awaitable), pool.loop())
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise SendFailure(f"{tool.name}: the function did not return within {timeout:.3g} s", tool=tool.name,
                              failure="timeout") from None
        except Exception as exc:
            raise SendFailure(f"{tool.name}: {error_text(exc)}", tool=tool.name, failure="tool") from None
