"""Python functions as tools, from the user's side: the ``atc.tool`` decorator and ``py:`` sources.

Any function with type hints and a docstring is a tool as it is (``tools=[lookup_user]``); the
decorator only adds what the function cannot say itself::

    @atc.tool(read_only=True)                      # reads only: allowed under --writes deny
    def lookup_user(user_id: int) -> User:
        '''The user with this id.'''

    @atc.tool(name="rows", description="The rows of a table, as records.")
    def read_table(table: str, limit: int = 100) -> list[dict]: ...

It returns the function itself, unchanged and callable as before (a bound method or a builtin,
which take no attributes, is wrapped with ``functools.wraps``). How a function becomes a tool is
``protocols.functions``; how it is called, on the host and through the gateway, is
``sandbox.gateway.functions``.

On the command line, ``--tools py:PACKAGE.MODULE:NAME`` names a function, a list or dict of
functions, or an object holding them (an instance: its public methods), and
``py:PACKAGE.MODULE`` a module's public functions (``load_python``). The current directory is
searched first, as ``python -m`` would, so ``py:mytools:lookup`` finds ``./mytools.py``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar, overload

from atc.errors import UsageError
from protocols.functions import TOOL_ATTRIBUTE, FunctionCollection, ToolOptions, functions_collection
from protocols.model import snake_case

__all__ = ["tool", "load_python", "is_python_source", "PY_PREFIX"]

#: The prefix of a ``--tools`` value that names Python functions.
PY_PREFIX = "py:"

F = TypeVar("F", bound=Callable[..., Any])


@overload
def tool(fn: F, /) -> F: ...


@overload
def tool(*, name: str | None = None, description: str | None = None,
         read_only: bool | None = None) -> Callable[[F], F]: ...


def tool(fn: Any = None, /, *, name: str | None = None, description: str | None = None,
         read_only: bool | None = None) -> Any:
    """Mark a function as a tool: ``@atc.tool`` or ``@atc.tool(name=..., description=...,
    read_only=...)``. ``name`` is what the program calls it (default: the function's name),
    ``description`` replaces the docstring's first paragraph, ``read_only=True`` says it only
    reads (a function is otherwise counted as a write: ``--writes deny`` refuses it).

    Args:
        fn: the function (``@atc.tool`` without parentheses).
        name: what the program calls it.
        description: replaces the docstring's first paragraph.
        read_only: True when it only reads.

    Returns:
        The function, marked (or, with keywords only, the decorator that marks it).
    """
    if read_only is not None and not isinstance(read_only, bool):
        raise UsageError(f"atc.tool(read_only=...) takes True, False or None, not {read_only!r}")
    options = ToolOptions(name=name, description=description, read_only=read_only)

    def mark(target: Any) -> Any:
        if not callable(target) or isinstance(target, type):
            raise UsageError(f"atc.tool marks a function, not {type(target).__name__}")
        try:
            setattr(target, TOOL_ATTRIBUTE, options)
            return target
        except (AttributeError, TypeError):
            return _wrapped(target, options)

    return mark(fn) if fn is not None else mark


def _wrapped(target: Any, options: ToolOptions) -> Any:
    """A function that calls ``target`` (a bound method, a builtin) and carries the options."""
    if inspect.iscoroutinefunction(target):
        @functools.wraps(target)
        async def call_async(*args: Any, **kwargs: Any) -> Any:
            return await target(*args, **kwargs)

        wrapper: Any = call_async
    else:
        @functools.wraps(target)
        def call(*args: Any, **kwargs: Any) -> Any:
            return target(*args, **kwargs)

        wrapper = call
    setattr(wrapper, TOOL_ATTRIBUTE, options)
    return wrapper


def is_python_source(item: Any) -> bool:
    return isinstance(item, str) and item.startswith(PY_PREFIX)


def load_python(source: str) -> FunctionCollection:
    """The functions ``py:PACKAGE.MODULE[:NAME]`` names (see the module docstring), as one
    collection named after NAME (or the module). A bad source is a ``UsageError`` (exit 2)."""
    spec = source[len(PY_PREFIX):].strip()
    module_name, _, attribute = spec.partition(":")
    example = "--tools py:mytools:lookup_user (a function lookup_user in ./mytools.py)"
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise UsageError(f"{source}: not py:PACKAGE.MODULE:NAME", hint=example)
    if attribute and not all(part.isidentifier() for part in attribute.split(".")):
        raise UsageError(f"{source}: {attribute!r} is not a Python name", hint=example)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise UsageError(f"{source}: no module named {exc.name!r} here or on the Python path",
                             hint=f"run from the folder that holds it, or set PYTHONPATH; {example}") from None
        raise UsageError(f"{source}: importing {module_name} failed: {exc}") from None
    except Exception as exc:
        raise UsageError(f"{source}: importing {module_name} failed: {type(exc).__name__}: {exc}") from None
    found: Any = module
    for part in attribute.split(".") if attribute else []:
        if not hasattr(found, part):
            raise UsageError(f"{source}: {module_name} has no {attribute!r}",
                             hint="name a function, a list of functions, or an object holding them")
        found = getattr(found, part)
    if isinstance(found, type):
        raise UsageError(f"{source}: {attribute} is a class", hint="name an instance of it, or a function")
    name = snake_case(attribute.rsplit(".", 1)[-1] if attribute else module_name.rsplit(".", 1)[-1]) or "functions"
    return functions_collection([found], name=name, source=source)
