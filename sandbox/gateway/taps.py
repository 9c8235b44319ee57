"""Taps: wrappers around the one step of a tool call that talks to the API.

A ``Tap`` sits between the gateway and its transport (``Gateway._exchange``). It gets the call
as an ``Exchange`` -- the tool, its validated arguments, ``send()`` to make the real request, and
``redact(reply)`` / ``redact_text(text)`` to take the host's secrets out -- and returns the
``Reply`` (or raises the transport's ``SendFailure``). Everything around it (budget, validation,
redaction of what the program sees, the call log) stays the gateway's, so a tap can record
answers (after redaction: no secret is ever stored), answer from a recording without any network,
or time the call for tracing. Taps travel with the ``Toolset`` (``Toolset.taps``, outermost first),
so every backend's gateways use them; the sandbox package defines the seam and the upper layers
(``atc.workflows``) implement it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from protocols.model import Tool

if TYPE_CHECKING:
    from sandbox.gateway.http.transport import Reply

__all__ = ["Exchange", "Tap"]


@dataclass
class Exchange:
    """One validated tool call on its way to the API."""

    tool: Tool
    args: dict[str, Any]
    extra_query: dict[str, Any] | None
    send: Callable[[], Reply]
    redact: Callable[[Reply], Reply]
    redact_text: Callable[[str], str]


@runtime_checkable
class Tap(Protocol):
    def exchange(self, call: Exchange) -> Reply: ...
