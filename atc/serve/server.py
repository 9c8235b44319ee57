"""The MCP server: atc's tools, resources and prompt on the official SDK (``MCPServer``).

Tools: ``search_tools(query, k)``, ``describe_tools(names)``, ``run_program(program)`` and, with
``ServeSettings.proxy_tools``, one tool per served tool. Resources: ``atc://collections`` (what is
served), ``atc://collections/{name}`` (a collection's compact protocols), ``atc://guide`` (how
to write programs). Prompt: ``write_program(task)``. The texts a host's model reads are package
data (``atc/prompts/serve_*.md``).

A program runs in a worker thread (``anyio.to_thread``) under a process-wide limit of
``concurrency`` programs at once, while the handler sends a progress notification every
``progress_interval`` seconds (calls so far, the last tool, the time). When the SDK cancels the
handler -- the client sent ``notifications/cancelled``, closed a 2026-07-28 request's stream, or
its stdio connection ended -- the run's ``sandbox.cancel.Cancel`` stops the program and the
handler waits (shielded) until the sandbox is gone before it lets the cancellation go on. The
HTTP layer cancels through ``InFlight`` when a 2025-era client drops its request (``http.py``).

This module does not use ``from __future__ import annotations``: the SDK reads the tools'
signatures (``Annotated`` descriptions, the ``Context`` parameter, the output models) at run time.
"""

import dataclasses
import itertools
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError as McpToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from mcp_types import Tool as McpTool
from pydantic import Field, ValidationError

from atc import __version__, prompts
from atc.errors import AtcError, CallBudget
from atc.serve import proxy, runs
from atc.serve.approval import elicit_approver
from atc.serve.catalog import MAX_K, Catalog
from atc.serve.mcp_sessions import SCOPE_CLIENT, SCOPE_SESSION, Caps, InFlight, Sessions, SessionState
from atc.serve.result_models import DescribeResult, RunResult, SearchResult
from atc.serve.settings import TOOL_NAMES, ServeSettings
from sandbox.api import Backend, ExecutionResult
from sandbox.cancel import Cancel
from sandbox.gateway.writes.policy import WritePolicy, Writes

__all__ = ["AtcServer", "build_server"]

log = logging.getLogger("atc.serve")


class AtcServer(MCPServer):
    """atc's MCP server. ``backend`` is the sandbox the programs run in (made ready by the caller)."""

    def __init__(self, settings: ServeSettings, backend: Backend) -> None:
        self.options = settings
        self.backend = backend
        self.catalog = Catalog(settings.toolset, settings.retriever)
        self.sessions = Sessions(Caps(settings.session_max_calls, settings.session_max_runs),
                                 Caps(settings.token_max_calls, settings.token_max_runs),
                                 Caps(settings.server_max_calls, settings.server_max_runs))
        #: programs are numbered over the whole server, for the log (a JSON-RPC id repeats across sessions)
        self._numbers = itertools.count(1)
        self.inflight = InFlight()
        self.limiter = anyio.CapacityLimiter(settings.concurrency)
        super().__init__(name=settings.name, title="atc: chain-of-tools", version=__version__,
                         instructions=prompts.render("serve_instructions", summary=self.catalog.summary()),
                         log_level="WARNING")
        self._register()

    # -- registration ----------------------------------------------------------------------------

    def _limits_text(self) -> dict[str, str]:
        limits = self.options.limits
        return {"timeout": f"{limits.timeout:g}", "max_calls": str(limits.max_calls), "memory": str(limits.memory_mb)}

    def _register(self) -> None:
        catalog = self.catalog
        summary = catalog.summary()
        listing = catalog.listing()
        tools_text = ("Tools (name(parameters) -> response shape; describe_tools gives the full protocol):\n" + listing
                      if listing is not None else
                      f"Find the tools with search_tools ({summary}); describe_tools gives their parameters "
                      "and response fields.")
        read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
        self.add_tool(self.search_tools, name="search_tools", title="Find API tools for a task",
                      description=prompts.render("serve_search_tools", summary=summary), annotations=read_only)
        self.add_tool(self.describe_tools, name="describe_tools", title="Full protocols of API tools",
                      description=prompts.render("serve_describe_tools"), annotations=read_only)
        self.add_tool(self.run_program, name="run_program", title="Run one program that chains API calls",
                      description=prompts.render("serve_run_program", tools=tools_text, **self._limits_text()),
                      annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True))

        @self.resource("atc://collections", name="collections", title="Served collections", mime_type="text/markdown",
                       description="The API collections atc serves, with their number of tools.")
        def collections() -> str:
            return catalog.collections_text()

        @self.resource("atc://collections/{name}", name="collection", title="A collection's tools",
                       mime_type="text/markdown",
                       description="Compact protocols of every tool of one collection: name(parameters) -> response.")
        def collection(name: str) -> str:
            try:
                return catalog.collection_text(name)
            except AtcError as exc:
                raise ValueError(str(exc)) from None

        @self.resource("atc://guide", name="guide", title="How to solve a task with one atc program",
                       mime_type="text/markdown")
        def guide() -> str:
            return self._guide("")

        @self.prompt(name="write_program", title="Solve a task with one atc program",
                     description="Teaches how to find the tools, write ONE program that chains their calls, run it "
                                 "with run_program and repair it from the attributed error.")
        def write_program(task: Annotated[str, Field(description="the task to solve")] = "") -> str:
            return self._guide(task)

    def _guide(self, task: str) -> str:
        tail = f"\nThe task: {task.strip()}\n" if task.strip() else ""
        return prompts.render("serve_guide", summary=self.catalog.summary(), task=tail, **self._limits_text())

    # -- the tools -------------------------------------------------------------------------------

    async def search_tools(
        self,
        query: Annotated[str, Field(description="what the tools should do, in plain words")],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="how many tools to return")] = 8,
    ) -> Annotated[CallToolResult, SearchResult]:
        try:
            found = await anyio.to_thread.run_sync(self.catalog.search, query, k)
        except AtcError as exc:
            raise McpToolError(str(exc)) from None
        return CallToolResult(content=[TextContent(type="text", text=found.text())], structured_content=found.to_dict())

    async def describe_tools(
        self,
        names: Annotated[list[str], Field(description="tool names, as search_tools lists them", min_length=1,
                                          max_length=MAX_K)],
    ) -> Annotated[CallToolResult, DescribeResult]:
        try:
            described = self.catalog.describe(names)
        except AtcError as exc:
            raise McpToolError(str(exc)) from None
        return CallToolResult(content=[TextContent(type="text", text=described.text())],
                              structured_content=described.to_dict(), is_error=not described.tools)

    async def run_program(
        self,
        program: Annotated[str, Field(description="the complete Python program; its answer is what it prints")],
        ctx: Context,
    ) -> Annotated[CallToolResult, RunResult]:
        state = self.session_of(ctx)
        number = next(self._numbers)
        started = time.monotonic()
        answer = await self._run(program, state, number, ctx)
        error = answer.error or {}
        calls = len(answer.result.calls) if answer.result else 0
        log.info("run_program #%d: %s%s, %d call%s, %.0f ms (%s)", number,
                 "ok" if answer.ok else error.get("type"), f" blamed {error['tool']}" if error.get("tool") else "",
                 calls, "" if calls == 1 else "s", (time.monotonic() - started) * 1000, _who(state))
        return CallToolResult(content=[TextContent(type="text", text=answer.text())],
                              structured_content=answer.to_dict(), is_error=not answer.ok)

    def session_of(self, ctx: Context | None) -> SessionState:
        """The session a request belongs to: the one the HTTP guard found for it (an id the server
        issued to this client), a session of its own for a request without one, or the stdio
        session. Never what a header says: the guard checked that before anything ran."""
        try:
            request = ctx.request_context.request if ctx is not None else None
        except ValueError:  # a call from outside any request (a test calling the server directly)
            request = None
        scope = getattr(request, "scope", None)
        if not isinstance(scope, dict):
            return self.sessions.stdio()  # stdio, or a client in this process
        state = scope.get(SCOPE_SESSION)
        if isinstance(state, SessionState):
            return state
        client = scope.get(SCOPE_CLIENT)
        return self.sessions.alone(client if isinstance(client, str) else "http")

    async def _run(self, text: str, state: SessionState, number: int, ctx: Context) -> runs.RunAnswer:
        toolset = self.options.toolset
        program = runs.prepare(text, toolset.names())
        if program is None:
            return runs.refused("", "NoProgram", "run_program got no program: pass the complete Python source "
                                                 "as `program`")
        static = runs.static_check(program, toolset)
        if static is not None:
            return static
        limits = self.options.limits
        # Other programs hold calls they may not use: wait for them rather than refuse.
        patience = time.monotonic() + limits.timeout + limits.call_timeout
        while True:
            try:
                grant = self.sessions.begin_run(state, limits.max_calls)
                break
            except CallBudget as exc:
                if not self.sessions.pending(state) or time.monotonic() > patience:
                    return runs.refused(program, "CallBudget", exc.message, hint=exc.hint)
            await anyio.sleep(0.05)
        token, tap = Cancel(), runs.ProgressTap()
        result: ExecutionResult | None = None
        try:
            with self.inflight.track(state.key, str(ctx.request_id), token):
                result = await self._in_thread(
                    lambda: runs.execute(program, self._with_writes(state, ctx),
                                         dataclasses.replace(limits, max_calls=grant), self.backend, token, tap),
                    token, ctx, tap, number)
        except AtcError as exc:  # the sandbox could not run it at all (engine gone, a credential unset)
            log.warning("run_program #%d: %s: %s", number, type(exc).__name__, exc.message)
            return runs.refused(program, type(exc).__name__, str(exc), static=False)
        finally:
            # Only the calls that left the host are charged; one refused for its arguments costs nothing.
            sent = sum(1 for c in result.calls if c.sent) if result is not None else tap.status()[0]
            self.sessions.end_run(state, grant, sent)
        answer = runs.answer_for(program, result, toolset)
        if grant < limits.max_calls:
            answer.budget_left = self.sessions.left(state)
        return answer

    def _with_writes(self, state: SessionState, ctx: Context | None) -> Any:
        """The tools with the server's write policy and the session's ledger (``ask``: the client
        of this request is asked, through elicitation)."""
        mode = self.options.writes
        approve = elicit_approver(ctx) if mode == "ask" and ctx is not None else None
        return dataclasses.replace(self.options.toolset, writes=Writes(WritePolicy(mode, approve), state.ledger))

    async def _in_thread(self, work: Callable[[], ExecutionResult], token: Cancel, ctx: Context,
                         tap: runs.ProgressTap, number: int) -> ExecutionResult:
        """``work()`` in a worker thread, with progress notifications; cancelling the caller
        cancels ``token`` and waits (shielded) for the sandbox run to end."""
        started, done = threading.Event(), threading.Event()
        began = time.monotonic()
        failed: list[Exception] = []

        def body() -> ExecutionResult | None:
            started.set()
            try:
                return work()
            except Exception as exc:  # re-raised below, outside the task group (which would wrap it)
                failed.append(exc)
                return None
            finally:
                done.set()

        async def progress() -> None:
            limits = self.options.limits
            while True:
                await anyio.sleep(self.options.progress_interval)
                calls, last = tap.status()
                message = f"{calls} tool call{'' if calls == 1 else 's'}" + (f", last {last}" if last else "") + \
                    f", {time.monotonic() - began:.0f} s of {limits.timeout:g} s"
                try:
                    await ctx.report_progress(calls, None, message)
                except Exception:  # a client that stopped listening must not stop the run
                    return

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(progress)
                result = await anyio.to_thread.run_sync(body, abandon_on_cancel=True, limiter=self.limiter)
                group.cancel_scope.cancel()
            if failed:
                raise failed[0]
            assert result is not None
            return result
        except anyio.get_cancelled_exc_class():
            log.info("run_program #%d: cancelled by the client", number)
            token.cancel("the client cancelled the request or went away")
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.options.limits.call_timeout + 15):
                while started.is_set() and not done.is_set():
                    await anyio.sleep(0.02)
            raise

    # -- proxied tools ---------------------------------------------------------------------------

    async def list_tools(self) -> list[McpTool]:
        tools = await super().list_tools()
        if self.options.proxy_tools:
            tools += [McpTool(name=t.name, title=f"{t.name} (one API call)", description=proxy.description(t),
                              input_schema=proxy.input_schema(t),
                              annotations=ToolAnnotations(read_only_hint=proxy.read_only(t), open_world_hint=True))
                      for t in self.options.toolset.tools.values()]
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        if not (self.options.proxy_tools and name in self.options.toolset.tools):
            if name == "describe_tools" and isinstance((arguments or {}).get("names"), str):
                arguments = {**arguments, "names": _names(arguments["names"])}  # one name, a likely slip
            try:
                return await super().call_tool(name, arguments, context)
            except McpToolError as exc:
                if isinstance(exc.__cause__, ValidationError) and name in TOOL_NAMES:
                    raise McpToolError(_argument_error(name, exc.__cause__)) from None
                raise
        state = self.session_of(context)
        try:
            self.sessions.take_call(state)
        except CallBudget as exc:
            return CallToolResult(content=[TextContent(type="text", text=f"{exc.message}: {exc.hint}")],
                                  is_error=True)
        sent = True  # unless the gateway says it refused the call before sending
        try:
            reply = await anyio.to_thread.run_sync(proxy.call, state, self._with_writes(state, context),
                                                   self.options.limits, name, arguments)
            sent = reply.sent
        finally:
            self.sessions.end_call(state, sent)
        log.info("%s: %s (%s)", name, "ok" if reply.ok else "failed", _who(state))
        return CallToolResult(content=[TextContent(type="text", text=reply.text)], is_error=not reply.ok)


def _names(text: str) -> list[str]:
    """The tool names of a string given where a list was asked for: one name, or several
    separated by commas or spaces (a call form with its arguments, ``get_book(book_id=1)``, is one)."""
    if "(" in text:
        return [text.strip()]
    return [n for n in re.split(r"[,\s]+", text) if n]


def _argument_error(tool: str, error: ValidationError) -> str:
    """One line a model can act on, instead of pydantic's report with its links."""
    parts = []
    for item in error.errors(include_url=False)[:3]:
        where = ".".join(str(p) for p in item.get("loc", ())) or "arguments"
        given = item.get("input")
        if item.get("type") == "missing":
            parts.append(f"argument '{where}' is required")
        else:
            shown = repr(given) if len(repr(given)) <= 40 else repr(given)[:37] + "..."
            parts.append(f"argument '{where}': {item.get('msg', 'invalid')} (got {type(given).__name__} {shown})")
    return f"{tool}: " + "; ".join(parts)


def _who(state: SessionState) -> str:
    """The session and client of a log line (never a token, only its variable's name)."""
    if state.ephemeral:
        return f"no session, client {state.client}"
    if state.client == state.key:
        return f"session {state.label}"
    return f"session {state.label}, client {state.client}"


def build_server(settings: ServeSettings, backend: Backend) -> AtcServer:
    """The server for ``settings``, its retriever warming up in the background."""
    server = AtcServer(settings, backend)
    server.catalog.warm()
    return server
