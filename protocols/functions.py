"""Python functions of the host as tools: their protocol, and the collection that holds them.

A pipeline's tools are often functions it already holds (a database lookup, an internal client,
a pandas transform). ``functions_collection`` makes them a ``FunctionCollection``: a
``Collection`` like any other for everything that reads protocols (prompts, search, validation,
``atc tools show``), whose tools have ``method`` ``"PYTHON"`` (``FUNCTION_METHOD``) and ``path``
the function's qualified name, and which carries the callables themselves in ``functions``
(tool name -> ``HostFunction``). The callables stay in the host process: they are never stored
(``Collection.to_dict`` does not know them) and never cross into the sandbox, where the program
sees the same stub as for an API; the gateway calls them (``sandbox.gateway.functions``).

A function's protocol comes from its signature and docstring (``function_tool``):

- the name is the function's (or ``atc.tool(name=...)``'s), made a valid identifier;
- the description is the docstring's first paragraph (or ``atc.tool(description=...)``);
- each parameter is a property of the JSON Schema (``protocols.pyschema.schema_of`` of its
  annotation; pydantic models, dataclasses, ``TypedDict``, enums, ``Optional``...), described by
  the docstring's note on it, with its default when the default is JSON data; parameters without
  a default are required; ``**kwargs`` allows further arguments, ``*args`` is not offered;
- the return annotation is the response schema, described by the docstring's ``Returns``;
- ``read_only`` is what ``atc.tool(read_only=...)`` said, else None: the write rule
  (``protocols.writes``) then counts the function as a write, since nothing says it only reads.

What the decorator records is a ``ToolOptions`` under ``TOOL_ATTRIBUTE`` on the function (the
function itself is returned unchanged, still callable as before), so that this layer reads it
without importing ``atc``. ``gather`` accepts what a user hands over: a function (sync or
async), a bound method, a ``functools.partial``, a LangChain tool (``protocols.langchain``), a
list or dict of those, or an object holding them (a module, or an instance: its public methods;
only the decorated ones when some are decorated).
"""

from __future__ import annotations

import builtins
import functools
import inspect
import keyword
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from protocols.docstrings import parse_docstring
from protocols.errors import UsageError
from protocols.langchain import adapt
from protocols.model import RESERVED_ARGUMENTS, Collection, Tool, python_identifier, snake_case
from protocols.pyschema import Converter, converter_of, json_default, schema_of, type_hints

__all__ = ["FUNCTION_METHOD", "TOOL_ATTRIBUTE", "ToolOptions", "HostFunction", "FunctionCollection",
           "function_tool", "functions_collection", "function_collections", "gather", "Given", "options_of", "collection_name_of", "is_function_source", "DEFAULT_COLLECTION"]

#: ``Tool.method`` of a Python function: the gateway sends its calls to the function transport.
FUNCTION_METHOD = "PYTHON"
#: The attribute ``atc.tool`` sets on a function (a ``ToolOptions``).
TOOL_ATTRIBUTE = "__atc_tool__"
#: The collection of functions given loose (``tools=[f, g]``).
DEFAULT_COLLECTION = "functions"


@dataclass(frozen=True)
class ToolOptions:
    """What ``atc.tool(...)`` said about a function: its tool name, description, and whether it
    only reads (True), writes (False), or is left to the rule (None)."""

    name: str | None = None
    description: str | None = None
    read_only: bool | None = None


@dataclass(frozen=True)
class HostFunction:
    """A callable of the host behind one tool, and how a call's JSON arguments reach it:
    ``converters`` turn a parameter's JSON value into its annotated type (only for parameters that
    need it), ``renamed`` maps a tool parameter to the function's own name (a parameter named like
    a reserved argument, ``with_headers``, is offered as ``with_headers_``), ``positional`` lists
    the positional-only parameters in order (with their defaults)."""

    fn: Callable[..., Any]
    is_async: bool = False
    converters: Mapping[str, Converter] = field(default_factory=dict)
    renamed: Mapping[str, str] = field(default_factory=dict)
    positional: tuple[tuple[str, Any], ...] = ()

    def arguments(self, args: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """``(positional, keyword)`` arguments of a call with the (validated) ``args``;
        a converter that refuses a value raises its own ``TypeError``/``ValueError``."""
        kwargs: dict[str, Any] = {}
        for key, value in args.items():
            name = self.renamed.get(key, key)
            convert = self.converters.get(name)
            kwargs[name] = convert(value) if convert is not None and value is not None else value
        if not self.positional:
            return [], kwargs
        given = [name for name, _ in self.positional if name in kwargs]
        if not given:
            return [], kwargs
        last = max(i for i, (name, _) in enumerate(self.positional) if name in kwargs)
        positional = []
        for name, default in self.positional[:last + 1]:
            positional.append(kwargs.pop(name) if name in kwargs else default)
        return positional, kwargs


@dataclass
class FunctionCollection(Collection):
    """A collection of host functions (see the module docstring). ``functions`` maps each tool's
    name to its ``HostFunction``; it is not part of the collection's JSON nor of comparisons."""

    functions: dict[str, HostFunction] = field(default_factory=dict, repr=False, compare=False)

    @property
    def kind(self) -> str:
        return "python"


_GLOBALS = frozenset(dir(builtins)) | {"ToolError", "final_answer", "last_response"}


def _reserved(name: str) -> bool:
    """A name a program's global function cannot have (a keyword, a builtin, atc's own globals)."""
    return keyword.iskeyword(name) or keyword.issoftkeyword(name) or name in _GLOBALS


def _underlying(fn: Any) -> Any:
    """The function whose hints and docstring describe ``fn`` (a partial's, a method's...)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def _is_async(fn: Any) -> bool:
    target = _underlying(fn)
    if inspect.iscoroutinefunction(target):
        return True
    if inspect.isroutine(target) or not callable(target):
        return False
    return inspect.iscoroutinefunction(type(target).__call__)


def _given_name(fn: Any) -> str:
    target = _underlying(fn)
    name = getattr(target, "__name__", None)
    if not isinstance(name, str):
        name = type(target).__name__
    return name


def _qualified(fn: Any) -> str:
    target = _underlying(fn)
    module = getattr(target, "__module__", None) or getattr(type(target), "__module__", "") or ""
    qual = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}.{qual}" if module else str(qual)


def options_of(fn: Any) -> ToolOptions:
    found = getattr(fn, TOOL_ATTRIBUTE, None)
    if not isinstance(found, ToolOptions):
        found = getattr(_underlying(fn), TOOL_ATTRIBUTE, None)
    return found if isinstance(found, ToolOptions) else ToolOptions()


def function_tool(fn: Callable[..., Any], collection: str, *, name: str | None = None,
                  description: str | None = None, read_only: bool | None = None,
                  parameters: dict[str, Any] | None = None,
                  response_schema: dict[str, Any] | None = None) -> tuple[Tool, HostFunction]:
    """The protocol of ``fn`` as a tool of ``collection``, and how to call it (see the module
    docstring). Keywords override what the function and ``atc.tool`` say; ``parameters`` replaces
    the schema read from the signature (a benchmark that ships its own function docs)."""
    if not callable(fn):
        raise UsageError(f"a tool function must be callable, not {type(fn).__name__}")
    options = options_of(fn)
    given = name or options.name or _given_name(fn)
    if given == "<lambda>":
        raise UsageError("a lambda has no name to call it by",
                         hint="give it one: atc.tool(name='...')(lambda ...), or define it with def")
    # A function keeps its own name (``getUser`` stays ``getUser``: the user knows it by that name)
    # unless a program could not call it by it.
    tool_name = given if given.isidentifier() and not _reserved(given) else python_identifier(given, fallback="function")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{given}: its signature cannot be read ({exc})",
                         hint="wrap it in a def with named, annotated parameters") from None
    target = _underlying(fn)
    hints = type_hints(target if inspect.isroutine(target) else type(target).__call__)
    doc = parse_docstring(inspect.getdoc(target))
    props: dict[str, Any] = {}
    required: list[str] = []
    converters: dict[str, Converter] = {}
    renamed: dict[str, str] = {}
    positional: list[tuple[str, Any]] = []
    more = False
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            continue  # a tool is called with keyword arguments only
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            more = True
            continue
        key = f"{param.name}_" if param.name in RESERVED_ARGUMENTS else param.name
        if key != param.name:
            renamed[key] = param.name
        annotation = hints.get(param.name, inspect.Parameter.empty)
        annotation = Any if annotation is inspect.Parameter.empty else annotation
        prop = schema_of(annotation)
        note = doc.params.get(param.name)
        if note:
            prop = {**prop, "description": note}
        if param.default is inspect.Parameter.empty:
            required.append(key)
        else:
            shown, value = json_default(param.default)
            if shown:
                prop = {**prop, "default": value}
        props[key] = prop
        convert = converter_of(annotation)
        if convert is not None:
            converters[param.name] = convert
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional.append((param.name, None if param.default is inspect.Parameter.empty else param.default))
    schema: dict[str, Any] = {"type": "object", "properties": props, "required": required,
                              "additionalProperties": more}
    if response_schema is None and "return" in hints:
        response_schema = schema_of(hints["return"]) or None
    if doc.returns:
        response_schema = {**(response_schema or {}), "description": doc.returns}
    tool = Tool(name=tool_name, collection=collection, method=FUNCTION_METHOD, path=_qualified(fn),
                description=description or options.description or doc.summary, group=collection,
                parameters=parameters if parameters is not None else schema, response_schema=response_schema,
                read_only=read_only if read_only is not None else options.read_only)
    return tool, HostFunction(fn, _is_async(fn), converters, renamed, tuple(positional))


# -- what a user hands over -----------------------------------------------------------------------


def _is_routine(obj: Any) -> bool:
    return inspect.isroutine(obj) or isinstance(obj, functools.partial)


def _decorated(obj: Any) -> bool:
    return isinstance(getattr(obj, TOOL_ATTRIBUTE, None), ToolOptions)


def _members(obj: Any) -> list[tuple[str, Any]]:
    """The public functions a module or an instance holds (an instance: the methods its classes
    define, found without reading its other attributes, which may be properties)."""
    if isinstance(obj, types.ModuleType):
        found = [(n, v) for n, v in vars(obj).items() if not n.startswith("_") and inspect.isfunction(v)
                 and getattr(v, "__module__", None) == obj.__name__]
    else:
        names: dict[str, None] = {}
        for klass in type(obj).__mro__:
            if klass is object:
                continue
            for n, v in vars(klass).items():
                if not n.startswith("_") and isinstance(v, types.FunctionType | staticmethod | classmethod):
                    names.setdefault(n, None)
        found = [(n, getattr(obj, n)) for n in names]
    marked = [(n, v) for n, v in found if _decorated(v)]
    return marked or found


def is_function_source(obj: Any) -> bool:
    """Is ``obj`` something ``gather`` reads (rather than a spec path, an MCP source or a
    ``Collection``)? Strings, paths and collections are not."""
    if isinstance(obj, str | bytes | PurePath | Collection | Tool | int | float) or obj is None:
        return False
    if isinstance(obj, list | tuple | set | frozenset):  # a list of functions, within a list of tools
        return bool(obj) and all(is_function_source(v) for v in obj)
    if isinstance(obj, Mapping):  # {name: function}, not a spec given as a dict
        return bool(obj) and all(is_function_source(v) for v in obj.values())
    return callable(obj) or isinstance(obj, types.ModuleType) or _is_langchain(obj) or hasattr(obj, "__dict__")


def _is_langchain(obj: Any) -> bool:
    return any(k.__name__ == "BaseTool" and k.__module__.startswith("langchain") for k in type(obj).__mro__)


@dataclass(frozen=True)
class Given:
    """One tool function as handed over: the callable, and what overrides its own account of
    itself (a dict key's name; a LangChain tool's name, description and argument schema)."""

    fn: Any
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


def gather(obj: Any, name: str | None = None) -> list[Given]:
    """Every tool function ``obj`` gives (see the module docstring)."""
    if _is_langchain(obj):
        fn, tool_name, description, parameters = adapt(obj)
        return [Given(fn, name or tool_name, description, parameters)]
    if isinstance(obj, type):
        raise UsageError(f"{obj.__name__} is a class: give an instance of it (its public methods become tools)")
    if isinstance(obj, str | bytes | int | float | Tool | Collection) or obj is None:
        raise UsageError(f"{str(obj)[:80]!r} is not a function, nor an object holding functions")
    if _is_routine(obj):
        return [Given(obj, name)]
    if isinstance(obj, Mapping):
        out: list[Given] = []
        for key, value in obj.items():
            out += gather(value, str(key) if _is_routine(value) or _is_langchain(value) else None)
        return out
    if isinstance(obj, list | tuple | set | frozenset):
        return [item for value in obj for item in gather(value)]
    members = _members(obj)
    if not members and callable(obj):
        return [Given(obj, name)]
    if not members:
        raise UsageError(f"{type(obj).__name__} holds no public function to use as a tool")
    return [Given(value, member) for member, value in members]


def collection_name_of(obj: Any) -> str:
    """A collection name for the functions of ``obj``: a module's last name, an instance's class."""
    if isinstance(obj, types.ModuleType):
        return snake_case(obj.__name__.rsplit(".", 1)[-1]) or DEFAULT_COLLECTION
    if _is_routine(obj) or isinstance(obj, list | tuple | set | frozenset | Mapping):
        return DEFAULT_COLLECTION
    return snake_case(type(obj).__name__) or DEFAULT_COLLECTION


def _loose(obj: Any) -> bool:
    """A function or a list of them (they share the ``functions`` collection), rather than an
    object holding functions (a collection of its own)."""
    if _is_routine(obj) or _is_langchain(obj):
        return True
    if isinstance(obj, list | tuple | set | frozenset):
        return all(_loose(v) for v in obj)
    return isinstance(obj, Mapping)


def function_collections(items: Iterable[Any]) -> list[FunctionCollection]:
    """The collections of tool functions given in a ``tools`` argument: every loose function
    (and list or dict of them) in one collection named ``functions``, each object holding
    functions (a module, an instance) in a collection of its own, named after it."""
    listed = list(items)
    loose = [i for i in listed if _loose(i)]
    out = [functions_collection(loose, name=DEFAULT_COLLECTION)] if loose else []
    return out + [functions_collection([o]) for o in listed if not _loose(o)]


def functions_collection(items: Iterable[Any], *, name: str | None = None, source: str = "",
                         description: str = "") -> FunctionCollection:
    """One collection of the tool functions ``items`` give (``gather`` each). Two functions with
    one tool name are refused (which one would a program call?)."""
    listed = list(items)
    cname = name or (collection_name_of(listed[0]) if len(listed) == 1 else DEFAULT_COLLECTION)
    collection = FunctionCollection(name=cname, description=description, source=source, source_format="python")
    for item in listed:
        for given in gather(item):
            tool, host = function_tool(given.fn, cname, name=given.name, description=given.description,
                                       parameters=given.parameters)
            if tool.name in collection.functions:
                first = collection.tool(tool.name)
                raise UsageError(f"two tool functions are named {tool.name!r} ({first.path if first else '?'} "
                                 f"and {tool.path})", hint="rename one: atc.tool(name='...')")
            collection.tools.append(tool)
            collection.functions[tool.name] = host
    if not collection.tools:
        raise UsageError("no tool functions were given")
    return collection

