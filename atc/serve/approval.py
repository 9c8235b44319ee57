"""``atc serve --writes ask``: each write of a program or a proxied call is confirmed by the person
behind the MCP client, through MCP elicitation.

The gateway asks from the worker thread that runs the program; the question goes to the client on
the server's event loop (``anyio.from_thread``), tied to the ``run_program`` request that made the
write. A client that did not declare the elicitation capability cannot be asked: the write is
refused, saying so (``NoApprover``). The answer is a form with one boolean, ``send``; a decline, a
cancel or an answer that does not say yes refuses. Time spent waiting for the person does not
count against the program's deadline (``sandbox.gateway.writes.policy``).
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.types import ClientCapabilities, ElicitationCapability
from pydantic import BaseModel, Field

from sandbox.gateway.writes.policy import Approver, NoApprover, WriteRequest

__all__ = ["elicit_approver", "Confirm"]


class Confirm(BaseModel):
    """The form a client shows: send the write, or not."""

    send: bool = Field(default=False, description="Send this write to the API?")


def _can_elicit(ctx: Any) -> bool:
    try:
        session = ctx.request_context.session
        return bool(session.check_client_capability(ClientCapabilities(elicitation=ElicitationCapability())))
    except Exception:  # no session to ask through (a request without one)
        return False


def elicit_approver(ctx: Any) -> Approver:
    """An approver that asks the client of request ``ctx`` (called from a worker thread)."""

    async def ask(request: WriteRequest) -> bool:
        if not _can_elicit(ctx):
            raise NoApprover("--writes ask, and this MCP client cannot be asked (it does not support elicitation)")
        why = f" ({request.reason})" if request.reason else ""
        answer = await ctx.elicit(f"A program wants to send a write{why}:\n{request.describe()}\nSend it?",
                                  schema=Confirm)
        return getattr(answer, "action", None) == "accept" and bool(getattr(answer.data, "send", False))

    def approve(request: WriteRequest) -> bool:
        return bool(anyio.from_thread.run(ask, request))

    return approve
