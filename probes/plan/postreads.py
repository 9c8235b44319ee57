"""Reads by POST: which POSTs a probe may send as reads, and the evidence it shows for each.

Many APIs read by POST: Prefect's ``POST /flows/filter``, ``/count`` and ``/paginate`` take nested
filter bodies, search APIs take their query in a body. The runtime's rule (``protocols.writes``)
counts every POST as a write unless it is marked read-only (the spec's ``x-atc-read-only``, ``atc
tools import --read-only``, ``atc probe --read-only``). A marked POST is a read: probing sends it as
one, like a GET.

An unmarked POST can only be *recognised* as a read, from its name: ``looks_like_read`` gives the
evidence (the path ends in ``filter``/``search``/``count``..., or the operation name starts with a
reading verb). A name can be wrong, and a POST that writes is sent with values from the user's
data when it is probed as a read, so probing asks more before it believes one (``read_evidence``):

- no word of its name or path says it makes, changes, deletes or acts (the probe's own vocabulary,
  ``probes.plan.actions``), nor that it takes something (``mark``, ``claim``, ``ack``, ``poll``,
  ``lease``, ``heartbeat``...: ``POST /notifications/mark_read``);
- no literal segment of its path begins with a verb of a remote call (``get``, ``fetch``, ``read``,
  ``run``...): ``POST /work_queues/{id}/get_runs`` reads runs *and* records that the queue was
  polled, ``POST /messages/read`` marks messages read, ``POST /queue/fetch`` takes them off a queue;
- it declares no ``201``/``202`` answer (something made, or queued).

Even then it is a guess, so a recognised read is probed only with ``--allow-unsafe``, and the
scope guard (``probes.plan.guard``) sends it only when every value its path names is pinned or this
probe's: should the guess be wrong, the write lands in the scope.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from probes.plan.actions import ACTION_WORDS, CREATE_WORDS, DELETE_WORDS, UPDATE_WORDS
from protocols.errors import UsageError
from protocols.model import Collection, Tool
from protocols.writes import READ_METHODS, judge, looks_like_read, mark, name_words, unmatched
from sandbox.api import Toolset

__all__ = ["TAKING_WORDS", "CALL_VERBS", "read_evidence", "marked_post_read", "marked_toolset"]

#: Words that say a request takes or marks something: a read that is not only a read.
TAKING_WORDS = frozenset("mark claim ack acknowledge consume pop dequeue poll lease lock unlock acquire release "
                         "reserve increment decrement heartbeat touch ping vote like follow subscribe upsert ensure "
                         "apply commit submit trigger schedule dispatch enqueue checkout visit".split())
#: Verbs that begin a remote call's path segment (``/get_runs``, ``/fetch``): on a POST they may do more.
CALL_VERBS = frozenset("get fetch read retrieve pull receive next take run".split()) | ACTION_WORDS


def _words(tool: Tool) -> tuple[list[str], list[list[str]]]:
    """The operation name's words (without a trailing method, FastAPI's ``..._post``) and the words of
    each literal path segment."""
    name = name_words(tool.name)
    if name and name[-1] == tool.method.lower():
        name = name[:-1]
    segments = [name_words(s) for s in tool.path.split("/") if s and not s.startswith("{")]
    return name, [s for s in segments if s]


def read_evidence(tool: Tool, collection: Collection | None = None) -> str | None:
    """Why ``tool``, a write by the rule, may be probed as a read (see the module docstring), or None."""
    if not judge(tool, collection).write or tool.method.upper() in ("MCP", *READ_METHODS):
        return None
    evidence = looks_like_read(tool)
    if evidence is None:
        return None
    name, segments = _words(tool)
    said = set(name) | {w for seg in segments for w in seg}
    changing = sorted(said & (CREATE_WORDS | UPDATE_WORDS | DELETE_WORDS | TAKING_WORDS))
    if changing:
        return None
    if any(seg[0] in CALL_VERBS for seg in segments):
        return None
    if any(code in ("201", "202") for code in tool.status_codes):
        return None
    return evidence


def marked_post_read(tool: Tool, collection: Collection | None = None) -> str | None:
    """Evidence for a tool whose method may write but that is marked read-only: it is a read."""
    if tool.read_only is True and tool.method.upper() not in ("MCP", *READ_METHODS) and not judge(tool, collection).write:
        return f"{tool.method.upper()} {tool.path}: marked read-only"
    return None


def marked_toolset(toolset: Toolset, read_only: Sequence[str] = (), writes: Sequence[str] = ()) -> Toolset:
    """``atc probe --read-only PATTERN`` / ``--writes-op PATTERN``: ``toolset`` with copies of its
    tools, the matching ones marked (``protocols.writes.mark``: a name glob or ``METHOD /path``). A
    pattern that matches no tool is a usage error, before anything is sent (a typo would leave a
    read unprobed, or a write believed a read)."""
    if not read_only and not writes:
        return toolset
    collections = [replace(c, tools=[replace(t) for t in c.tools]) for c in toolset.collections]
    for pattern in [*read_only, *writes]:
        if all(unmatched(c, [pattern]) for c in collections):
            raise UsageError(f"--read-only/--writes-op {pattern!r} matches no tool",
                             hint="give a tool name or a glob ('*_filter_post'), or 'METHOD /path' "
                                  "('POST /work_pools/filter')")
    for c in collections:
        mark(c, list(read_only), list(writes))
    return replace(toolset, collections=collections)
