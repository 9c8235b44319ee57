"""Named schemas written once: the ``components`` of the OpenAPI document a probe writes.

An imported spec's ``$ref``s are expanded into each tool's schemas (the gateway validates against
them, a protocol shows them), and the expansion keeps each component's name under
``protocols.allof.NAME_KEY`` (``x-atc-ref``). Written back inline, a FastAPI spec of filter bodies
grows eightfold: every operation repeats ``FlowRunFilter`` and everything under it. ``factor``
turns every named subschema back into ``{"$ref": "#/components/schemas/<name>"}`` with the schema
itself in ``components.schemas``, once:

- the same name with the same schema is one component;
- a use that only adds annotations (``description``, ``title``, ``default``, examples) is the
  ``$ref`` with those siblings (OpenAPI 3.1 lets them stand beside a ``$ref``; the importer lets
  them win, as they did before);
- a use that differs otherwise (a schema the importer cut short, a recursion) stays inline.

``atc tools import`` of the document reads the same tools back: the resolver expands each
``$ref`` and names it again.
"""

from __future__ import annotations

from typing import Any

from protocols.allof import NAME_KEY

__all__ = ["factor", "ANNOTATIONS"]

#: Keywords that annotate a schema without changing what it accepts.
ANNOTATIONS = frozenset({"description", "title", "default", "example", "examples", "deprecated", "readOnly",
                         "writeOnly", "$comment"})
_MAX_DEPTH = 64
#: Keywords whose values are data, and keywords whose values map names to schemas.
_VALUES = frozenset({"enum", "const", "example", "examples", "default", "required", "type", "format", "pattern",
                     "discriminator", "xml", "externalDocs"})
_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


class _Factor:
    def __init__(self, components: dict[str, Any]) -> None:
        self.components = components

    def schema(self, node: Any, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            return node
        if isinstance(node, list):
            return [self.schema(x, depth + 1) for x in node]
        if not isinstance(node, dict):
            return node
        name = node.get(NAME_KEY)
        inner: dict[str, Any] = {}
        for key, value in node.items():
            if key == NAME_KEY:
                continue
            if key in _VALUES or key.startswith("x-"):
                inner[key] = value  # values, not schemas
            elif key in _MAPS and isinstance(value, dict):
                inner[key] = {k: self.schema(v, depth + 1) for k, v in value.items()}
            else:
                inner[key] = self.schema(value, depth + 1)
        if not isinstance(name, str) or not name:
            return inner
        known = self.components.get(name)
        if known is None:
            self.components[name] = inner
            return {"$ref": _pointer(name)}
        if known == inner:
            return {"$ref": _pointer(name)}
        if set(known) <= set(inner):
            extras = {k: v for k, v in inner.items() if known.get(k) != v or k not in known}
            if set(extras) <= ANNOTATIONS:
                return {"$ref": _pointer(name), **extras}
        return {**inner, NAME_KEY: name}  # not the component as it was named: kept as it is, named


def _pointer(name: str) -> str:
    return "#/components/schemas/" + name.replace("~", "~0").replace("/", "~1")


def factor(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (an OpenAPI 3.1 document) with every named subschema of its operations written once
    in ``components.schemas`` and referred to with ``$ref``."""
    components: dict[str, Any] = dict((doc.get("components") or {}).get("schemas") or {})
    f = _Factor(components)
    for item in (doc.get("paths") or {}).values():
        for op in item.values():
            if not isinstance(op, dict):
                continue
            for param in op.get("parameters") or []:
                if isinstance(param, dict) and "schema" in param:
                    param["schema"] = f.schema(param["schema"])
            for holder in [op.get("requestBody") or {}, *(op.get("responses") or {}).values()]:
                for media in (holder.get("content") or {}).values() if isinstance(holder, dict) else ():
                    if isinstance(media, dict) and "schema" in media:
                        media["schema"] = f.schema(media["schema"])
    if components:
        doc.setdefault("components", {})["schemas"] = components
    return doc
