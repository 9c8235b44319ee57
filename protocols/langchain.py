"""LangChain tools (``BaseTool``) as tool functions, for pipelines that already hold them so.

``adapt(tool)`` gives what ``protocols.functions`` needs: a callable taking the tool's arguments
as keywords (it calls ``tool.invoke(arguments)``, LangChain's own entry point, so the tool's
validation, callbacks and error handling run as they would in LangChain), its name, its
description and the JSON Schema of its arguments (from ``args_schema``: a pydantic model, read
by ``protocols.pyschema``, or a JSON Schema dict; else from ``tool.args``). Nothing here imports
LangChain: a tool is recognised by its class (``protocols.functions.gather``), and the package
is only needed by whoever made the tool.
"""

from __future__ import annotations

from typing import Any

from protocols.pyschema import is_pydantic_model, schema_of

__all__ = ["adapt"]


def _arguments_schema(tool: Any) -> dict[str, Any]:
    given = getattr(tool, "args_schema", None)
    if is_pydantic_model(given):
        schema = schema_of(given)
    elif isinstance(given, dict):
        schema = dict(given)
    else:
        props = getattr(tool, "args", None)
        schema = {"type": "object", "properties": dict(props) if isinstance(props, dict) else {}}
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    schema.pop("description", None)  # the tool's own description says it
    return schema


def adapt(tool: Any) -> tuple[Any, str, str, dict[str, Any]]:
    """``(callable, name, description, parameters)`` of a LangChain tool."""

    def call(**arguments: Any) -> Any:
        return tool.invoke(arguments)

    name = str(getattr(tool, "name", "") or type(tool).__name__)
    call.__name__ = call.__qualname__ = name
    call.__module__ = type(tool).__module__
    return call, name, str(getattr(tool, "description", "") or ""), _arguments_schema(tool)
