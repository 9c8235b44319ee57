"""What AnyTool's agents see and do: the category -> tool -> API catalogue, the candidate pool,
and the functions each kind of agent may call (AnyTool paper, Table 8), as OpenAI function
schemas plus the host-side code that answers them.

Every answer is text for the model. A call the model got wrong (an unknown category, an API that
is not in the agent's tools, a full pool) is answered with what went wrong and what exists, so
that the agent can correct itself; nothing here raises on the model's input.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from protocols.model import Tool

__all__ = ["Catalog", "Pool", "FUNCTIONS", "schemas", "UNCATEGORIZED"]

UNCATEGORIZED = "uncategorized"
#: Longest listing one function answer gives (names); the rest is summarised by a count.
MAX_LISTED = 200
#: API details one get_API_detail call returns.
MAX_DETAILS = 5
#: APIs of one tool (above this, the tool is split; see ``Catalog``).
MAX_GROUP = 40
_VERSION = re.compile(r"^(v\d+(\.\d+)*|api|rest)$", re.I)


class Catalog:
    """The corpus as a tree: category -> tool (``Tool.group``; the collection when empty) -> APIs.
    Names are matched exactly first, then case-insensitively. A tool with more than
    ``MAX_GROUP`` APIs (a large OpenAPI document has hundreds under one title) is split by the
    first word of its paths, then in parts, so that no tool agent is handed an unreadable list."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.tree: dict[str, dict[str, list[Tool]]] = {}
        for t in tools:
            self.tree.setdefault(t.category or UNCATEGORIZED, {}).setdefault(t.group or t.collection, []).append(t)
        for category, groups in self.tree.items():
            if any(len(apis) > MAX_GROUP for apis in groups.values()):
                self.tree[category] = {name: apis for group, items in groups.items()
                                       for name, apis in _split(group, items).items()}

    def categories(self) -> list[str]:
        return list(self.tree)

    def category(self, name: str) -> str | None:
        return _match(name, self.tree)

    def group(self, category: str, name: str) -> str | None:
        return _match(name, self.tree.get(category, {}))

    def describe_group(self, category: str, group: str) -> str:
        apis = self.tree[category][group]
        parts = [f"{t.name}: {t.summary}" if t.summary else t.name for t in apis[:4]]
        more = f"; ... ({len(apis)} APIs in all)" if len(apis) > 4 else ""
        return f"{len(apis)} API(s): " + "; ".join(parts) + more

    def listing(self) -> str:
        """The categories with their sizes (the meta-agent's prompt)."""
        lines = [f"- {c} ({len(g)} tools)" for c, g in list(self.tree.items())[:MAX_LISTED]]
        if len(self.tree) > MAX_LISTED:
            lines.append(f"- ... and {len(self.tree) - MAX_LISTED} more categories")
        return "\n".join(lines)


def _split(group: str, tools: list[Tool]) -> dict[str, list[Tool]]:
    if len(tools) <= MAX_GROUP:
        return {group: tools}
    by_word: dict[str, list[Tool]] = {}
    for t in tools:
        words = [w for w in t.path.split("/") if w and not w.startswith("{") and not _VERSION.match(w)]
        by_word.setdefault(f"{group} /{words[0]}" if words else group, []).append(t)
    out: dict[str, list[Tool]] = {}
    for name, items in by_word.items():
        for i in range(0, len(items), MAX_GROUP):
            out[name if i == 0 else f"{name} ({i // MAX_GROUP + 1})"] = items[i:i + MAX_GROUP]
    return out


def _match(name: str, options: dict[str, Any]) -> str | None:
    if name in options:
        return name
    low = name.strip().lower()
    return next((k for k in options if k.lower() == low), None)


@dataclass
class Pool:
    """The global candidate pool: tools in the order agents added them, at most ``cap``. Tools
    ``dropped`` after a failed solve cannot come back. Thread-safe: agents add concurrently."""

    cap: int = 64
    tools: list[Tool] = field(default_factory=list)
    dropped: dict[tuple[str, str], str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, tools: Sequence[Tool]) -> tuple[list[str], list[str]]:
        """(added names, refusals as text)."""
        added: list[str] = []
        refused: list[str] = []
        with self._lock:
            keys = {(t.collection, t.name) for t in self.tools}
            for t in tools:
                key = (t.collection, t.name)
                if key in keys:
                    continue
                if key in self.dropped:
                    refused.append(f"{t.name} was removed after it failed the solve ({self.dropped[key]})")
                elif len(self.tools) >= self.cap:
                    refused.append(f"{t.name} not added: the pool is full ({self.cap} APIs)")
                else:
                    self.tools.append(t)
                    keys.add(key)
                    added.append(t.name)
        return added, refused

    def drop(self, name: str, why: str) -> Tool | None:
        with self._lock:
            for i, t in enumerate(self.tools):
                if t.name == name:
                    del self.tools[i]
                    self.dropped[(t.collection, t.name)] = why
                    return t
        return None

    def snapshot(self) -> list[Tool]:
        with self._lock:
            return list(self.tools)


def _fn(name: str, description: str, properties: dict[str, Any] | None = None,
        required: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties or {}, "required": list(required)}}}


_NAMES = {"type": "array", "items": {"type": "string"}}
_SPECS: dict[str, dict[str, Any]] = {
    "get_tools_in_category": _fn("get_tools_in_category", "The names of the tools of a category.",
                                 {"category": {"type": "string"}}, ["category"]),
    "get_tool_descriptions": _fn("get_tool_descriptions", "What each of the given tools of a category does.",
                                 {"category": {"type": "string"}, "tools": _NAMES}, ["category", "tools"]),
    "create_agent_category_level": _fn("create_agent_category_level",
                                       "Hand one category to a new category agent.",
                                       {"category": {"type": "string"}}, ["category"]),
    "create_agent_tool_level": _fn("create_agent_tool_level",
                                   "Hand some tools of your category (at most 5) to a new tool agent.",
                                   {"tools": _NAMES}, ["tools"]),
    "get_APIs_in_tool": _fn("get_APIs_in_tool", "The APIs of one of your tools, with one line each.",
                            {"tool": {"type": "string"}}, ["tool"]),
    "get_API_detail": _fn("get_API_detail", "Parameters and responses of some of your APIs (at most 5).",
                          {"apis": _NAMES}, ["apis"]),
    "add_API_into_API_pool": _fn("add_API_into_API_pool", "Add some of your APIs to the candidate pool.",
                                 {"apis": _NAMES}, ["apis"]),
    "check_if_request_solvable": _fn("check_if_request_solvable",
                                     "Ask whether the candidate pool is now enough to answer the query."),
    "finish_search": _fn("finish_search", "Say that you have explored everything you were given."),
}

#: The functions of each kind of agent (the paper's Table 8).
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "meta": ("get_tools_in_category", "get_tool_descriptions", "create_agent_category_level", "finish_search"),
    "category": ("get_tools_in_category", "get_tool_descriptions", "create_agent_tool_level", "finish_search"),
    "tool": ("get_APIs_in_tool", "get_API_detail", "add_API_into_API_pool", "check_if_request_solvable",
             "finish_search"),
}


def schemas(level: str) -> list[dict[str, Any]]:
    return [_SPECS[name] for name in FUNCTIONS[level]]


def names_arg(args: dict[str, Any], key: str) -> list[str] | str:
    """A list-of-names argument, or the text of what is wrong with it (a lone string is accepted)."""
    value = args.get(key)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return f"error: '{key}' must be a list of names"
    return value


def list_tools(catalog: Catalog, category_arg: Any) -> str:
    category = catalog.category(str(category_arg or ""))
    if category is None:
        return f"error: no category {category_arg!r}; categories: {', '.join(catalog.categories()[:MAX_LISTED])}"
    groups = list(catalog.tree[category])
    more = f"\n... and {len(groups) - MAX_LISTED} more" if len(groups) > MAX_LISTED else ""
    return "\n".join(groups[:MAX_LISTED]) + more


def describe_tools(catalog: Catalog, category_arg: Any, names: list[str]) -> str:
    category = catalog.category(str(category_arg or ""))
    if category is None:
        return f"error: no category {category_arg!r}"
    out = []
    for name in names[:MAX_LISTED]:
        group = catalog.group(category, name)
        out.append(f"{name}: {catalog.describe_group(category, group)}" if group
                   else f"{name}: error: no such tool in {category}")
    return "\n".join(out)
