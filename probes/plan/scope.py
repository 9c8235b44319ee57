"""The scope of unsafe probing: what ``--scope NAME=VALUE`` pins, and what lies under it.

A user who lets the prober write names the part of the API it may write in:
``--scope bucket_id=throwaway``. Each pin fixes a parameter: every unsafe call that has a
parameter of that name takes that value, and an unsafe call is sent only when what it writes is
*under* a pin (``probes.plan.send``). A pin matches a call's argument by

- the argument's own name, Python or wire (``bucket_id``, ``bucketId``);
- what the argument names, read from the path: ``{id}`` under ``/buckets/`` is a ``bucket_id``;
  for an MCP tool, ``entities[].name`` is an ``entity_name``;
- the bare kind of thing: ``--scope bucket=throwaway`` pins every argument naming a bucket.

A pinned value that is a filesystem path or a URI (``--scope path=/tmp/scratch``) is a *root*:
a path argument is under it when it is the root or lies inside it (after ``.`` and ``..`` are
resolved; a value that climbs out is outside). New files and folders the probe makes there are
named inside the root.

New things the probe names itself (where the API wants the client to name what it creates) get
``atc-probe-`` and random hex, so they can neither clash with nor replace anything that exists.
"""

from __future__ import annotations

import posixpath
import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from probes.arguments.naming import norm, singular
from probes.arguments.text import is_path_like
from probes.plan.actions import Target
from protocols.errors import UsageError
from protocols.model import Tool

__all__ = ["Scope", "parse_scope", "fresh_name", "outside_roots", "PREFIX"]

#: The prefix of every name the probe makes up for what it creates.
PREFIX = "atc-probe-"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def parse_scope(items: list[str] | tuple[str, ...] | None) -> tuple[tuple[str, str], ...]:
    """``NAME=VALUE`` strings -> pins; a malformed one is a usage error (exit 2)."""
    pins: list[tuple[str, str]] = []
    for item in items or ():
        name, sep, value = str(item).partition("=")
        name = name.strip()
        if not sep or not _NAME.match(name) or not value:
            raise UsageError(f"--scope {item!r} is not NAME=VALUE",
                             hint="example: --scope bucket_id=throwaway (a parameter and the value every unsafe "
                                  "call must stay under)")
        if any(norm(name) == norm(n) for n, _ in pins):
            raise UsageError(f"--scope {name} is given twice", hint="pin each parameter once")
        pins.append((name, value))
    return tuple(pins)


def _clean_path(value: str) -> str | None:
    """A path with ``.`` and doubled slashes resolved; None when it holds ``..`` (it may climb out)."""
    if value.startswith("file://"):
        value = value[7:]
    elif value.startswith("file:"):
        value = value[5:]
    text = value.replace("\\", "/")
    if not text or ".." in text.split("/"):
        return None
    return posixpath.normpath(text)


@dataclass(frozen=True)
class Scope:
    """The pins of one probe (empty: unsafe calls have nowhere to go)."""

    pins: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.pins)

    @property
    def roots(self) -> list[str]:
        """Pinned values that are paths: writes may go anywhere inside them."""
        return [v for _, v in self.pins if is_path_like(v)]

    def pin_for(self, tool: Tool, target: Target) -> tuple[str, str] | None:
        """(pin name, value) that fixes ``target`` of ``tool``, or None."""
        binding = tool.bindings.get(target.param)
        names = {norm(target.key), norm(target.param)}
        if target.field is None and binding is not None and binding.name:
            names.add(norm(binding.name))
        if target.field is not None:
            names.add(norm(target.field))
        for name, value in self.pins:
            wanted = norm(name)
            if wanted in names or (target.entity and wanted == singular(target.entity) and target.role != "new"):
                if target.attribute == "path" and not is_path_like(value):
                    continue
                return name, value
        return None

    def under_root(self, value: Any) -> bool:
        """Whether ``value`` is a path inside (or equal to) a pinned root."""
        if not is_path_like(value):
            return False
        path = _clean_path(str(value))
        if path is None:
            return False
        for root in self.roots:
            base = _clean_path(root)
            if base is not None and (path == base or path.startswith(base.rstrip("/") + "/")):
                return True
        return False

    def describe(self) -> str:
        return ", ".join(f"{n}={v}" for n, v in self.pins) or "(none)"


def fresh_name(schema: Any, *, root: str | None = None, entity: str | None = None) -> Any:
    """A new name for something the probe creates (see the module docstring); None when the
    parameter cannot take one (a number, an enum, a pattern it would not match)."""
    schema = schema if isinstance(schema, dict) else {}
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if schema.get("enum") or "const" in schema or kind not in (None, "string"):
        return None
    if schema.get("format") == "uuid":
        return str(uuid.uuid4())
    token = PREFIX + secrets.token_hex(4)
    if root is not None:
        suffix = ".txt" if entity in ("file", "document", "note") else ""
        return root.rstrip("/") + "/" + token + suffix
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            if not re.search(pattern, token):
                token = token.replace("-", "_")
                if not re.search(pattern, token):
                    return None
        except re.error:
            return None
    longest = schema.get("maxLength")
    if isinstance(longest, int) and len(token) > longest:
        return None
    return token


def outside_roots(scope: Scope, args: Any) -> str | None:
    """A path-like value among ``args`` (at any depth) that is not inside one of the scope's
    pinned roots; None when every one is, or when the scope pins no root."""
    if not scope.roots:
        return None
    values = args.values() if isinstance(args, dict) else args if isinstance(args, list) else [args]
    for value in values:
        if isinstance(value, dict | list):
            found = outside_roots(scope, value)
            if found is not None:
                return found
        elif is_path_like(value) and not scope.under_root(value):
            return str(value)
    return None
