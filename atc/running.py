"""``atc.run`` and ``atc.arun``: a given program against the tools, no model involved.

The sandbox runs it (``sandbox.execute.run``); this layer adds what the Python API accepts as
``tools`` everywhere (``atc.toolsets``: stored collection names, ``py:`` sources...) and the typed
answer: with ``answer=`` (``atc.loop.answers``) the value the program hands to ``final_answer`` is
checked against the schema, a mismatch (or no value) fails the run with an ``AnswerError``, and
``result.value`` is the typed value (an instance of the pydantic model or dataclass asked for).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from atc.loop.answers import AnswerSpec, judge_result
from atc.toolsets import ToolsArg, toolset_for
from sandbox.api import Backend, ExecutionResult, Limits, Toolset
from sandbox.execute import BaseUrl, Validation, WritesArg, pick_sandbox
from sandbox.execute import arun as arun_in_sandbox
from sandbox.execute import run as run_in_sandbox
from sandbox.gateway.writes.policy import Approver

__all__ = ["run", "arun"]


def run(
    program: str,
    tools: ToolsArg,
    limits: Limits | None = None,
    *,
    sandbox: str | Backend | None = None,
    base_url: BaseUrl = None,
    credentials: dict[str, str] | None = None,
    backend: str | Backend | None = None,
    validation: Validation = None,
    writes: WritesArg = None,
    approve: Approver | None = None,
    answer: Any = None,
) -> ExecutionResult:
    """Run ``program`` with ``tools`` in a sandbox (``sandbox.execute.run``: every outcome of the
    program is a result; bad input raises ``UsageError``/``ConfigError``; ``writes`` and
    ``approve`` are the write policy). ``answer``: the typed answer the program must hand to
    ``final_answer`` (see the module docstring).

    Args:
        program: Python source that calls the tools as functions.
        tools: what ``atc.toolsets`` reads: Collections, a Toolset, spec paths, stored names, MCP
            sources, Python functions.
        limits: the run's limits (default ``Limits()``).
        sandbox: ``"docker"``, ``"local"``, None (auto) or a ``Backend``; ``backend`` is its old name.
        base_url: one server URL for every collection, or ``{collection: URL}``.
        credentials: ``{scheme or placement: "env:VAR"}``.
        validation: ``strict``, ``warn``, ``off``, or ``{collection: mode}``.
        writes: ``allow``, ``deny``, ``ask`` or a ``Writes``; ``approve`` answers ``ask``.
        answer: the type or JSON Schema of the value handed to ``final_answer``.

    Returns:
        The ``ExecutionResult``: the program's failures are in it, never raised.

    Raises:
        UsageError: a bad argument or tools form.
        NotFound: a word that names no file and no stored collection.
        ConfigError: a credential or server URL that cannot work.
        SandboxError: the sandbox could not run at all.
    """
    spec = None
    if answer is not None:
        spec = AnswerSpec.of(answer)  # a bad schema is said before anything runs
    toolset = tools if isinstance(tools, Toolset) else toolset_for(tools)
    result = run_in_sandbox(program, toolset, limits, sandbox=pick_sandbox(sandbox, backend), base_url=base_url,
                            credentials=credentials, validation=validation, writes=writes, approve=approve)
    if spec is None:
        return result
    result, value = judge_result(result, spec)
    if result.ok:
        result.value = value
    return result


async def arun(
    program: str,
    tools: ToolsArg,
    limits: Limits | None = None,
    *,
    sandbox: str | Backend | None = None,
    base_url: BaseUrl = None,
    credentials: dict[str, str] | None = None,
    backend: str | Backend | None = None,
    validation: Validation = None,
    writes: WritesArg = None,
    approve: Approver | None = None,
    answer: Any = None,
) -> ExecutionResult:
    """``run`` for asyncio callers (``sandbox.execute.arun``: cancelling the awaiting task stops
    the program).

    Args:
        program: Python source that calls the tools as functions.
        tools: as for ``atc.run``; the other keywords are ``atc.run``'s too.

    Returns:
        The ``ExecutionResult``.

    Raises:
        UsageError, NotFound, ConfigError, SandboxError: as ``atc.run``.
    """
    spec = None
    if answer is not None:
        spec = AnswerSpec.of(answer)
    toolset = tools if isinstance(tools, Toolset) else await asyncio.to_thread(functools.partial(toolset_for, tools))
    result = await arun_in_sandbox(program, toolset, limits, sandbox=pick_sandbox(sandbox, backend),
                                   base_url=base_url, credentials=credentials, validation=validation, writes=writes,
                                   approve=approve)
    if spec is None:
        return result
    result, value = judge_result(result, spec)
    if result.ok:
        result.value = value
    return result
