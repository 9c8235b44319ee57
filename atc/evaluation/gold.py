"""Gold solutions and the calls that match them: pure functions, no I/O.

A gold step is either a tool name (``search_books``) or an HTTP route, ``METHOD /path`` with the
path as a template (``GET /person/{person_id}/movie_credits``), or ``METHOD URL`` with the server
in front (``GET https://api.themoviedb.org/3/search/movie``: the call's path may then be the end
of the URL's, below the server's base path). A call (a ``ToolCall`` dict of a
result line: ``tool``, ``method``, ``path``...) matches a tool step when it is that tool, and a
route step when its method and path template are the step's. Templates are compared with their
parameter names blanked out (``/person/{movie_id}/x`` is ``/person/{}/x``), since a route is the
same route whatever its parameter is called in one document or another -- RestBench's TMDB gold
has exactly such a typo -- and with stray spaces and a trailing slash ignored.

Path% and Prec% (``atc.evaluation.metrics``) are built on ``match``: which gold steps some call
matched, and which distinct called tools and which calls (``Match.call_precision``, call by call)
match some gold step; RestGPT's correct-path rate on ``in_order``: the gold path as an ordered
subsequence of the calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["GoldStep", "parse_step", "route_key", "Match", "match", "in_order"]

_ROUTE = re.compile(r"^\s*([A-Za-z]+)\s+(/\S*)\s*$")
_URL_ROUTE = re.compile(r"^\s*([A-Za-z]+)\s+[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s]+(/\S*)?\s*$")
_PARAM = re.compile(r"\{[^{}]*\}")


def route_key(method: str, path: str) -> str:
    """``GET /person/{}/movie_credits``: a route with its parameter names blanked out, no query
    string, no trailing slash."""
    template = path.strip().split("?", 1)[0]
    template = _PARAM.sub("{}", template)
    if len(template) > 1:
        template = template.rstrip("/")
    return f"{method.strip().upper()} {template or '/'}"


@dataclass(frozen=True)
class GoldStep:
    """One step of a gold solution, as written (``text``) and as compared (``key``)."""

    text: str
    #: ``tool`` (a tool name), ``route`` (``METHOD /path``) or ``url`` (``METHOD https://host/path``)
    kind: str
    key: str

    def matches(self, call: Mapping[str, Any]) -> bool:
        if self.kind == "tool":
            return call.get("tool") == self.key
        method, path = call.get("method"), call.get("path")
        if not isinstance(method, str) or not isinstance(path, str):
            return False
        key = route_key(method, path)
        if key == self.key:
            return True
        # a full URL holds the server's base path (``/3`` of TMDB's) before the operation's path
        called_method, _, called_path = key.partition(" ")
        gold_method, _, gold_path = self.key.partition(" ")
        return self.kind == "url" and called_method == gold_method and called_path != "/" and \
            gold_path.endswith(called_path) and gold_path[: len(gold_path) - len(called_path)].startswith("/")


def parse_step(text: str) -> GoldStep:
    """A gold step from its text: ``METHOD /path`` is a route, anything else a tool name."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("a gold step is a non-empty string (a tool name or 'METHOD /path')")
    m = _ROUTE.match(text)
    if m:
        return GoldStep(text.strip(), "route", route_key(m.group(1), m.group(2)))
    m = _URL_ROUTE.match(text)
    if m:
        return GoldStep(text.strip(), "url", route_key(m.group(1), m.group(2) or "/"))
    return GoldStep(text.strip(), "tool", text.strip())


def _distinct(steps: Iterable[GoldStep]) -> list[GoldStep]:
    seen: set[tuple[str, str]] = set()
    out = []
    for step in steps:
        if (step.kind, step.key) not in seen:
            seen.add((step.kind, step.key))
            out.append(step)
    return out


@dataclass(frozen=True)
class Match:
    """How one task's calls meet its gold: the distinct gold steps some call matched (``found``)
    and did not (``missed``), the distinct tools called that match a gold step (``relevant``)
    and that do not (``extra``)."""

    found: tuple[str, ...]
    missed: tuple[str, ...]
    relevant: tuple[str, ...]
    extra: tuple[str, ...]
    #: calls, one by one, that match a gold step, and all the calls
    relevant_calls: int = 0
    calls: int = 0

    @property
    def path(self) -> float:
        """The share of the distinct gold steps that some call matched (1.0 when there is no gold)."""
        total = len(self.found) + len(self.missed)
        return len(self.found) / total if total else 1.0

    @property
    def precision(self) -> float:
        """The share of the distinct tools called that match a gold step; with no call at all,
        0.0 (1.0 when the gold is empty too: nothing was needed and nothing was done)."""
        total = len(self.relevant) + len(self.extra)
        if total:
            return len(self.relevant) / total
        return 1.0 if not self.missed and not self.found else 0.0

    @property
    def call_precision(self) -> float:
        """The share of the calls, call by call (a repeat counts again), that match a gold step;
        with no call at all, as ``precision``."""
        if self.calls:
            return self.relevant_calls / self.calls
        return 1.0 if not self.missed and not self.found else 0.0


def match(gold: Sequence[GoldStep | str], calls: Sequence[Mapping[str, Any]]) -> Match:
    """Match a task's calls (every call of its solution path, in order) against its gold steps.
    Repeated gold steps and repeated calls count once; order does not matter."""
    steps = _distinct(s if isinstance(s, GoldStep) else parse_step(s) for s in gold)
    found = [s.text for s in steps if any(s.matches(c) for c in calls)]
    missed = [s.text for s in steps if s.text not in found]
    first_call = {}
    for c in calls:
        name = c.get("tool")
        if name and name not in first_call:
            first_call[name] = c
    relevant = [t for t, c in first_call.items() if any(s.matches(c) for s in steps)]
    extra = [t for t in first_call if t not in relevant]
    hits = sum(1 for c in calls if any(s.matches(c) for s in steps))
    return Match(tuple(found), tuple(missed), tuple(relevant), tuple(extra), hits, len(calls))


def in_order(gold: Sequence[GoldStep | str], calls: Sequence[Mapping[str, Any]]) -> bool:
    """Is the gold path, as written (repeats kept), an ordered subsequence of the calls? RestGPT's
    correct path: other calls may come between and around the gold ones. An empty gold is."""
    steps = [s if isinstance(s, GoldStep) else parse_step(s) for s in gold]
    at = 0
    for c in calls:
        if at < len(steps) and steps[at].matches(c):
            at += 1
    return at == len(steps)
