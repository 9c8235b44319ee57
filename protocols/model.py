"""What a tool is: the protocol of one operation (HTTP, or an MCP server's tool), and the
collection it belongs to.

A ``Tool`` is everything a model needs to call an operation correctly and everything the
gateway needs to turn a Python call into an HTTP request:

- ``parameters`` is a JSON Schema object keyed by the *Python* names the program uses;
- ``bindings`` says, for each of those names, where the value goes on the wire (path, query,
  header, cookie, or body) and under which wire name. They are separate because wire names are
  often not identifiers (``api-key``, ``page[size]``, ``from``) and because the schema must stay
  plain JSON Schema for validation.

An MCP tool is a ``Tool`` too: ``method`` is ``"MCP"``, ``path`` the tool's name on its server,
``bindings`` map the Python names to the server's argument names, and ``annotations`` keep the
tool's MCP annotations (``readOnlyHint``...). Its ``Collection`` carries ``mcp_server``: how to
reach the server again (a command line atc starts, or a URL).

A ``Collection`` is what one import produces. It carries the category -> tool group -> API
hierarchy that retrieval uses (ToolBench: category, RapidAPI tool, API; OpenAPI: tag, title,
operation).
"""

from __future__ import annotations

import builtins
import keyword
import re
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = [
    "Location",
    "LOCATIONS",
    "Binding",
    "SecurityScheme",
    "McpServer",
    "MCP_TRANSPORTS",
    "Tool",
    "Collection",
    "SpecWarning",
    "python_identifier",
    "snake_case",
    "RESERVED_ARGUMENTS",
]

#: Keyword arguments every tool function accepts besides its parameters (``extra_query`` sends
#: query parameters the spec does not list; ``with_headers`` returns the status and headers too;
#: ``resend_unknown=True`` sends again a write whose earlier identical send got no answer,
#: ``sandbox.gateway.writes.gate``). No spec parameter gets these names: it is renamed with a trailing
#: ``_``, like a keyword. They belong to what a tool is, so they live here; ``protocols.building``
#: re-exports them for the loaders.
RESERVED_ARGUMENTS = frozenset({"extra_query", "with_headers", "resend_unknown"})

Location = Literal["path", "query", "header", "cookie", "body"]
LOCATIONS: tuple[str, ...] = ("path", "query", "header", "cookie", "body")

#: Wire name for a body binding that carries the whole request body (a non-object body).
WHOLE_BODY = ""


@dataclass(frozen=True)
class Binding:
    """Where one parameter goes on the wire. ``name`` is the wire name (``""`` with ``body``: the
    whole body is this parameter's value).

    ``style``/``explode``/``allow_reserved`` say how an array or object value is written (OpenAPI
    ``style``: ``form``, ``spaceDelimited``, ``pipeDelimited``, ``deepObject``, ``simple``, ``label``,
    ``matrix``; Swagger 2 ``collectionFormat`` maps onto them, ``tsv`` as ``tabDelimited``). None
    means the location's default (query/cookie ``form``, path/header ``simple``; explode only for
    ``form``). ``content_type`` is a multipart part's own media type (OpenAPI ``encoding``)."""

    location: str
    name: str
    style: str | None = None
    explode: bool | None = None
    allow_reserved: bool = False
    content_type: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"in": self.location, "name": self.name}
        # Only what differs from the defaults: stored collections stay small and older readers
        # (which know "in" and "name" only) keep reading them.
        if self.style is not None:
            d["style"] = self.style
        if self.explode is not None:
            d["explode"] = self.explode
        if self.allow_reserved:
            d["allowReserved"] = True
        if self.content_type:
            d["contentType"] = self.content_type
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Binding:
        style = d.get("style")
        explode = d.get("explode")
        ctype = d.get("contentType")
        return cls(location=str(d["in"]), name=str(d["name"]),
                   style=style if isinstance(style, str) and style else None,
                   explode=explode if isinstance(explode, bool) else None,
                   allow_reserved=d.get("allowReserved") is True,
                   content_type=ctype if isinstance(ctype, str) and ctype else None)

    def effective_style(self) -> str:
        """The style in force: the recorded one, else the location's default."""
        if self.style:
            return self.style
        return "simple" if self.location in ("path", "header") else "form"

    def effective_explode(self) -> bool:
        """``explode`` in force: the recorded one, else true for ``form`` (and ``deepObject``)."""
        if self.explode is not None:
            return self.explode
        return self.effective_style() in ("form", "deepObject")


@dataclass(frozen=True)
class SecurityScheme:
    """A credential the gateway adds on the host. ``type`` is ``apiKey`` or ``http``; for apiKey,
    ``location`` (header/query/cookie) and ``param`` name it; for http, ``scheme`` is bearer or basic."""

    name: str
    type: str
    location: str | None = None
    param: str | None = None
    scheme: str | None = None
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SecurityScheme:
        return cls(name=str(d["name"]), type=str(d["type"]), location=d.get("location"), param=d.get("param"),
                   scheme=d.get("scheme"), description=d.get("description") or "")


@dataclass(frozen=True)
class SpecWarning:
    """Something an import noticed in a spec: a well-known mistake it repaired, or a problem it
    could only work around (the tool then stays usable with less checking). ``pointer`` is the
    JSON pointer (RFC 6901) of the node in the source document."""

    message: str
    pointer: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"pointer": self.pointer, "message": self.message}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SpecWarning:
        return cls(message=str(d.get("message") or ""), pointer=str(d.get("pointer") or ""))

    def __str__(self) -> str:
        return f"{self.pointer or '/'}: {self.message}"


#: How atc reaches an MCP server: a child process on stdin/stdout, or a URL (streamable HTTP, SSE).
MCP_TRANSPORTS = ("stdio", "http", "sse")


@dataclass
class McpServer:
    """How to reach an MCP server: ``command`` + ``args`` (+ ``env``, ``cwd``) for a ``stdio``
    server that atc starts and stops, or ``url`` for an ``http`` (streamable HTTP) or ``sse`` one.

    ``env`` maps variable names to values. The values are host-side secrets: they go to the server
    process only, are taken out of every result (like credentials), and are never stored: the
    store keeps the names, and a stored server gets each value from the host environment when it
    starts (``None`` here: "read it from the environment")."""

    name: str
    transport: str = "stdio"
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str | None] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None

    def key(self) -> str:
        """The server's identity: two collections with the same key share one connection."""
        if self.transport == "stdio":
            env = sorted((k, v or "") for k, v in self.env.items())
            return repr(("stdio", self.command, tuple(self.args), tuple(env), self.cwd))
        return repr((self.transport, self.url))

    def describe(self) -> str:
        """The server as a user would write it (no environment values)."""
        if self.transport == "stdio":
            return shlex.join([self.command or "", *self.args])
        return str(self.url)

    def to_dict(self) -> dict[str, Any]:
        """The stored form: environment variable NAMES only, never their values."""
        d: dict[str, Any] = {"name": self.name, "transport": self.transport}
        if self.transport == "stdio":
            d.update(command=self.command, args=list(self.args), env=sorted(self.env))
            if self.cwd:
                d["cwd"] = self.cwd
        else:
            d["url"] = self.url
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> McpServer:
        env = d.get("env") or []
        names = list(env) if isinstance(env, (list, dict)) else []
        return cls(name=str(d.get("name") or "mcp"), transport=str(d.get("transport") or "stdio"),
                   command=d.get("command"), args=[str(a) for a in d.get("args") or []],
                   env={str(k): None for k in names}, cwd=d.get("cwd"), url=d.get("url"))


def _empty_params() -> dict[str, Any]:
    return {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


@dataclass
class Tool:
    """The protocol of one operation.

    ``examples`` items are ``{"args": {...}, "response": ..., "status": int | None}``.
    ``status_codes`` maps a status (``"200"``, ``"404"``, ``"default"``) to its description.
    ``security`` is a list of alternatives, each a list of scheme names that must all be sent.

    ``responses`` is every documented answer, for whoever must produce one (``atc mock``): status
    (``"200"``, ``"4XX"``, ``"default"``) -> ``{"content": {media type: schema | None},
    "headers": {name: {"schema": {...}, "required": bool}}}`` (and, for a Swagger 2 response
    without a schema, ``"produces": [media types]``: no body, but these types declared for it),
    schemas resolved like
    ``response_schema`` (which stays the one JSON schema a program gets back). ``request_body``
    says what the body is as a whole: ``{"media_types": [...], "required": bool, "schema": {...}}``,
    ``schema`` holding the body schema's own keywords (``additionalProperties``,
    ``minProperties``...) while its properties are the ``body`` parameters.
    """

    name: str
    collection: str
    method: str = "GET"
    path: str = "/"
    description: str = ""
    category: str = ""
    group: str = ""
    parameters: dict[str, Any] = field(default_factory=_empty_params)
    bindings: dict[str, Binding] = field(default_factory=dict)
    body_media_type: str | None = None
    response_schema: dict[str, Any] | None = None
    examples: list[dict[str, Any]] = field(default_factory=list)
    status_codes: dict[str, str] = field(default_factory=dict)
    servers: list[str] = field(default_factory=list)
    security: list[list[str]] = field(default_factory=list)
    deprecated: bool = False
    annotations: dict[str, Any] = field(default_factory=dict)
    responses: dict[str, dict[str, Any]] = field(default_factory=dict)
    request_body: dict[str, Any] | None = None
    #: A marking of what a call does, by the spec (``x-atc-read-only``) or the user (``atc tools
    #: import --read-only``): True reads only, False writes, None: the rule decides
    #: (``protocols.writes``: the method, MCP annotations, words that announce a change).
    read_only: bool | None = None

    @property
    def required(self) -> list[str]:
        return list(self.parameters.get("required") or [])

    @property
    def properties(self) -> dict[str, Any]:
        props = self.parameters.get("properties") or {}
        return props if isinstance(props, dict) else {}

    def wire_aliases(self) -> dict[str, str]:
        """Wire names a program may use for a parameter instead of its Python name (``userId`` for
        ``user_id``): every binding's wire name that is not itself a parameter's name, is not a
        reserved argument and belongs to one parameter only. Programs are told the snake_case
        names, but a model that read the API's own docs writes the wire names."""
        props = self.properties
        seen: dict[str, str | None] = {}
        for name, binding in self.bindings.items():
            wire = binding.name
            if not wire or wire == name or wire in props or wire in RESERVED_ARGUMENTS:
                continue
            seen[wire] = None if wire in seen else name
        return {wire: name for wire, name in seen.items() if name is not None}

    @property
    def summary(self) -> str:
        """The first sentence (or line) of the description: the one-line purpose."""
        text = " ".join(self.description.split())
        m = re.match(r"(.+?[.!?])(\s|$)", text)
        return (m.group(1) if m else text)[:200]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form. Also what ``atc tools show --json`` prints (interface.md fields first)."""
        d = {
            "name": self.name,
            "collection": self.collection,
            "category": self.category,
            "group": self.group,
            "description": self.description,
            "parameters": self.parameters,
            "response_schema": self.response_schema,
            "examples": self.examples,
            "method": self.method,
            "path": self.path,
            "bindings": {k: b.to_dict() for k, b in self.bindings.items()},
            "body_media_type": self.body_media_type,
            "status_codes": self.status_codes,
            "servers": self.servers,
            "security": self.security,
            "deprecated": self.deprecated,
        }
        if self.annotations:  # MCP tools only: HTTP tools' records stay as they were
            d["annotations"] = self.annotations
        if self.responses:
            d["responses"] = _pack_responses(self.responses, self.response_schema)
        if self.request_body is not None:
            d["request_body"] = self.request_body
        if self.read_only is not None:  # only a marked tool: older records stay as they were
            d["read_only"] = self.read_only
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Tool:
        return cls(
            name=d["name"],
            collection=d.get("collection", ""),
            method=d.get("method", "GET"),
            path=d.get("path", "/"),
            description=d.get("description") or "",
            category=d.get("category") or "",
            group=d.get("group") or "",
            parameters=d.get("parameters") or _empty_params(),
            bindings={k: Binding.from_dict(v) for k, v in (d.get("bindings") or {}).items()},
            body_media_type=d.get("body_media_type"),
            response_schema=d.get("response_schema"),
            examples=list(d.get("examples") or []),
            status_codes=dict(d.get("status_codes") or {}),
            servers=list(d.get("servers") or []),
            security=[list(x) for x in (d.get("security") or [])],
            deprecated=bool(d.get("deprecated", False)),
            annotations=dict(d.get("annotations") or {}) if isinstance(d.get("annotations"), dict) else {},
            responses=_unpack_responses(d.get("responses"), d.get("response_schema")),
            request_body=d["request_body"] if isinstance(d.get("request_body"), dict) else None,
            read_only=d["read_only"] if isinstance(d.get("read_only"), bool) else None,
        )


#: In a stored ``responses``, a schema that IS the tool's ``response_schema`` is written as this
#: reference (a JSON pointer into the tool's own record), so that a large schema is stored once.
_SAME_AS_RESPONSE_SCHEMA = {"$ref": "#/response_schema"}


def _pack_responses(responses: dict[str, dict[str, Any]], primary: Any) -> dict[str, dict[str, Any]]:
    if primary is None:
        return responses
    out: dict[str, dict[str, Any]] = {}
    for status, entry in responses.items():
        content = entry.get("content")
        if isinstance(content, dict) and any(schema == primary for schema in content.values()):
            entry = {**entry, "content": {media: _SAME_AS_RESPONSE_SCHEMA if schema == primary else schema
                                          for media, schema in content.items()}}
        out[status] = entry
    return out


def _unpack_responses(raw: Any, primary: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(raw, dict):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for status, entry in raw.items():
        if not isinstance(entry, dict):
            continue
        content = entry.get("content")
        if isinstance(content, dict):
            entry = {**entry, "content": {media: primary if schema == _SAME_AS_RESPONSE_SCHEMA else schema
                                          for media, schema in content.items()}}
        out[str(status)] = entry
    return out


@dataclass
class Collection:
    """One imported API collection. ``source_format`` is ``openapi-3.0``, ``openapi-3.1``,
    ``swagger-2.0``, ``toolbench`` or ``mcp``. ``mcp_server`` is set when the tools live on an MCP
    server (``kind`` ``"mcp"``): calls go there instead of to an HTTP API."""

    name: str
    tools: list[Tool] = field(default_factory=list)
    description: str = ""
    source: str = ""
    source_format: str = ""
    servers: list[str] = field(default_factory=list)
    security_schemes: dict[str, SecurityScheme] = field(default_factory=dict)
    version: str = ""
    warnings: list[SpecWarning] = field(default_factory=list)
    mcp_server: McpServer | None = None

    @property
    def kind(self) -> str:
        """Where calls go: ``"mcp"`` (an MCP server) or ``"http"`` (an HTTP API)."""
        return "mcp" if self.mcp_server is not None else "http"

    def tool(self, name: str) -> Tool | None:
        for t in self.tools:
            if t.name == name:
                return t
        return None

    def hierarchy(self) -> dict[str, dict[str, list[str]]]:
        """category -> group -> [tool names], the tree AnyTool-style retrieval walks."""
        tree: dict[str, dict[str, list[str]]] = {}
        for t in self.tools:
            tree.setdefault(t.category or "uncategorized", {}).setdefault(t.group or self.name, []).append(t.name)
        return tree

    def to_dict(self) -> dict[str, Any]:
        d = {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "source_format": self.source_format,
            "version": self.version,
            "servers": self.servers,
            "security_schemes": {k: s.to_dict() for k, s in self.security_schemes.items()},
            "warnings": [w.to_dict() for w in self.warnings],
            "tools": [t.to_dict() for t in self.tools],
        }
        if self.mcp_server is not None:  # older readers ignore the key; HTTP records are unchanged
            d["mcp_server"] = self.mcp_server.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Collection:
        server = d.get("mcp_server")
        return cls(
            name=d["name"],
            description=d.get("description") or "",
            source=d.get("source") or "",
            source_format=d.get("source_format") or "",
            version=d.get("version") or "",
            servers=list(d.get("servers") or []),
            security_schemes={k: SecurityScheme.from_dict(v) for k, v in (d.get("security_schemes") or {}).items()},
            warnings=[SpecWarning.from_dict(w) for w in d.get("warnings") or [] if isinstance(w, dict)],
            tools=[Tool.from_dict(t) for t in d.get("tools") or []],
            mcp_server=McpServer.from_dict(server) if isinstance(server, dict) else None,
        )


_RESERVED = frozenset(dir(builtins)) | {"ToolError", "last_response", "final_answer"}
_CAMEL_1 = re.compile(r"(.)([A-Z][a-z]+)")
_CAMEL_2 = re.compile(r"([a-z0-9])([A-Z])")
_NON_WORD = re.compile(r"[^0-9a-zA-Z]+")


def snake_case(text: str) -> str:
    """``getUserByID`` -> ``get_user_by_id``; ``GET_movie-movie_id`` -> ``get_movie_movie_id``."""
    s = _CAMEL_1.sub(r"\1_\2", text)
    s = _CAMEL_2.sub(r"\1_\2", s)
    s = _NON_WORD.sub("_", s).strip("_").lower()
    return re.sub(r"_+", "_", s)


def python_identifier(text: str, *, fallback: str = "tool") -> str:
    """A valid, non-keyword Python identifier derived from ``text`` (snake_case)."""
    s = snake_case(text) or fallback
    if s[0].isdigit():
        s = f"{fallback}_{s}"
    # A tool is a global of the program: it must not shadow a builtin the program relies on.
    if keyword.iskeyword(s) or keyword.issoftkeyword(s) or s in _RESERVED:
        s = f"{s}_"
    return s
