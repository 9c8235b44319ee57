"""The structured results of atc serve's MCP tools, as pydantic models (their ``outputSchema``).

``RunResult`` has the fields of ``ExecutionResult`` (``atc run --json``), the error extended by
``protocol`` (the blamed tool's full protocol) and ``response`` (what it really returned), and
``static`` (the program was refused before running). The SDK checks each structured result
against its model before it leaves, so the schema a client reads is the one it gets.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RunResult", "RunError", "RunCall", "SearchResult", "SearchHit", "DescribeResult", "Protocol"]


def _untitled(schema: dict[str, Any]) -> None:
    """No ``title`` keys: they repeat the field names, and every byte of a tool list may end up in
    a host's context."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)


class _Model(BaseModel):
    model_config = ConfigDict(json_schema_extra=_untitled)


class _Open(_Model):
    model_config = ConfigDict(extra="allow", json_schema_extra=_untitled)  # fields atc adds later pass through


class RunError(_Open):
    type: str = Field(description="Python exception class, or Timeout, MemoryLimit, CallBudget, OutputLimit, "
                                  "SandboxError, Cancelled, NoProgram")
    message: str
    line: int | None = Field(description="line of the program where it surfaced")
    tool: str | None = Field(description="the tool the failure is attributed to; null: the program's own logic")
    traceback: str = ""
    col: int | None = None
    code: str | None = Field(default=None, description="the source line")
    attribution: dict[str, Any] | None = Field(default=None, description="why the tool was blamed")
    protocol: str | None = Field(default=None, description="the blamed tool's full protocol")
    response: dict[str, Any] | None = Field(default=None, description="what the blamed tool really returned: "
                                                                      "{shape, excerpt}")
    static: bool = Field(default=False, description="found before running: nothing ran")


class RunCall(_Open):
    tool: str
    args: dict[str, Any]
    method: str
    path: str
    status: int | None
    ok: bool
    line: int | None
    duration_ms: float
    error: str | None = None
    write: bool = Field(default=False, description="the call may change data (docs/writes.md)")
    outcome: str | None = Field(default=None, description="for a write: done, failed, unknown (sent, no answer: "
                                                          "it may have been applied), replayed (an identical write "
                                                          "this session made: not sent again) or refused")


class RunResult(_Open):
    ok: bool
    answer: str = Field(description="what the program printed")
    sandbox: str = Field(description="docker or local; none when the program was refused before running")
    duration_ms: float
    error: RunError | None
    calls: list[RunCall]
    stderr: str = ""


class SearchHit(_Model):
    name: str
    collection: str
    score: float
    signature: str
    purpose: str


class SearchResult(_Model):
    query: str
    retriever: str
    tools: list[SearchHit]
    notes: list[str] = []


class Protocol(_Model):
    name: str
    collection: str
    protocol: str


class DescribeResult(_Model):
    tools: list[Protocol]
    unknown: list[str] = Field(description="names that are no tool")
