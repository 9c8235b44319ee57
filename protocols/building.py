"""Small pieces every loader shares: unique names, parameter sets, collection slugs.

Loaders differ in how they read a format; they must agree on how names are made, so that
``GET /books/{book_id}`` gives the same tool and parameter names whichever format described it.
"""

from __future__ import annotations

import keyword
import re
from typing import Any

from protocols.model import RESERVED_ARGUMENTS, Binding, python_identifier, snake_case

__all__ = ["UniqueNames", "ParamSet", "param_identifier", "collection_slug", "tool_name_for", "clean_text"]


class UniqueNames:
    """Hands out names, suffixing ``_2``, ``_3``... to repeats (the first one keeps the plain name)."""

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self.renamed: list[tuple[str, str]] = []

    def take(self, base: str) -> str:
        name = base
        n = 2
        while name in self._taken:
            name = f"{base}_{n}"
            n += 1
        self._taken.add(name)
        if name != base:
            self.renamed.append((base, name))
        return name


def param_identifier(wire: str) -> str:
    """The Python keyword-argument name for a wire name: ``api-key`` -> ``api_key``, ``from`` -> ``from_``.

    Unlike tool names, parameter names may equal a builtin (``id``, ``type``): a keyword argument
    cannot shadow anything in the program, and ``get_track(id=...)`` is what a model writes."""
    s = snake_case(str(wire)) or "param"
    if s[0].isdigit():
        s = f"param_{s}"
    if keyword.iskeyword(s) or keyword.issoftkeyword(s) or s in RESERVED_ARGUMENTS:
        s = f"{s}_"
    return s


def tool_name_for(operation_id: Any, method: str, path: str) -> str:
    """``operationId`` in snake_case when there is one, else from method and path."""
    if isinstance(operation_id, str) and snake_case(operation_id):
        return python_identifier(operation_id)
    return python_identifier(f"{method.lower()}_{path}")


def collection_slug(text: str) -> str:
    """An identifier-like collection name: ``Spotify Web API`` -> ``spotify_web_api``."""
    return snake_case(text)[:64].strip("_")


def clean_text(value: Any) -> str:
    """A string field of a spec, or ``""`` when it is missing or not text."""
    return value.strip() if isinstance(value, str) else ""


class ParamSet:
    """Accumulates the parameters of one tool: the JSON Schema object and the wire bindings."""

    def __init__(self) -> None:
        self.properties: dict[str, Any] = {}
        self.required: list[str] = []
        self.bindings: dict[str, Binding] = {}
        self._names = UniqueNames()
        self._wire: dict[tuple[str, str], str] = {}

    def add(self, wire: str, location: str, schema: Any, *, required: bool = False,
            description: str = "", style: str | None = None, explode: bool | None = None,
            allow_reserved: bool = False, content_type: str | None = None) -> str:
        """Add one parameter; returns its Python name. Adding the same wire name and location again
        replaces the earlier one (operation-level parameters override path-level ones). ``style``
        and the rest say how the value is serialised (see ``Binding``)."""
        key = (location, wire)
        prop = _normalise(dict(schema) if isinstance(schema, dict) else {})
        if description and not prop.get("description"):
            prop["description"] = description
        if key in self._wire:
            name = self._wire[key]
        else:
            name = self._names.take(param_identifier(wire) if wire else "body")
            self._wire[key] = name
        self.properties[name] = prop
        self.bindings[name] = Binding(location, wire, style=style, explode=explode, allow_reserved=allow_reserved,
                                      content_type=content_type)
        if required and name not in self.required:
            self.required.append(name)
        elif not required and name in self.required:
            self.required.remove(name)
        return name

    def ensure_path_params(self, path: str) -> None:
        """Declare every ``{placeholder}`` of the path template that the spec forgot to declare
        (a required string): without it the gateway could never fill the path."""
        declared = {b.name for b in self.bindings.values() if b.location == "path"}
        for wire in _PLACEHOLDER.findall(path):
            if wire not in declared:
                self.add(wire, "path", {"type": "string"}, required=True,
                         description="(undeclared in the spec; taken from the path template)")
                declared.add(wire)

    def schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": self.properties, "required": list(self.required),
                "additionalProperties": False}


def _normalise(prop: dict[str, Any]) -> dict[str, Any]:
    """Small repairs that make a parameter schema right for validation and for a model to read:
    a numeric or boolean default written as a string (``"20"`` for an integer) becomes the number,
    and OpenAPI 3.0's ``nullable: true`` becomes JSON Schema's ``"type": [T, "null"]``."""
    kind = prop.get("type")
    default = prop.get("default")
    if isinstance(default, str) and kind in ("integer", "number", "boolean"):
        text = default.strip()
        if kind == "integer" and re.fullmatch(r"-?\d+", text):
            prop["default"] = int(text)
        elif kind == "number" and re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", text):
            prop["default"] = float(text) if any(c in text for c in ".eE") else int(text)
        elif kind == "boolean" and text.lower() in ("true", "false"):
            prop["default"] = text.lower() == "true"
    if prop.get("nullable") is True and isinstance(kind, str) and kind != "null":
        prop["type"] = [kind, "null"]
        del prop["nullable"]
    return prop


_WS = re.compile(r"\s+")
_PLACEHOLDER = re.compile(r"\{([^{}/]+)\}")


def one_line(text: str, limit: int = 200) -> str:
    """Collapse whitespace; cut at ``limit`` characters with an ellipsis."""
    s = _WS.sub(" ", text).strip()
    return s if len(s) <= limit else s[: limit - 3].rstrip() + "..."
