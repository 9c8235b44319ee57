"""Building the HTTP request of one validated call: path, query, headers, cookies and body.

Every parameter is written as its ``Binding`` says (``sandbox.gateway.http.styles``). What a program
passes is hostile, so this is also where the request is kept well-formed:

- a path value is percent-encoded piece by piece and can never add a segment, climb with ``..``
  or leave a ``//``; an EMPTY value is accepted only where the URL stays valid and means what the
  template says: a trailing ``{path}`` (``/api/contents/{path}`` -> ``/api/contents/``, how some
  APIs address their root), or a placeholder that shares its segment with other text;
- header, query and cookie values with CR, LF or NUL are refused (no header injection), and so
  are headers that frame the request on a shared connection (``Host``, ``Content-Length``...);
- ``extra_query`` (query parameters the spec does not list) goes through the same checks.

Bodies: JSON; ``application/x-www-form-urlencoded`` with each field in its style (arrays
repeated, objects as ``form``/``deepObject`` says, or JSON where the encoding asks for it);
``multipart/form-data`` with one part per field (a binary object ``{"base64", "content_type"?,
"filename"?}`` or a ``format: binary`` string becomes a file part, an object a JSON part, an array
one part per item); text and other media as the string or bytes given.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx

from protocols.errors import ToolError
from protocols.model import Binding, Tool
from sandbox.gateway.http.decoding import is_binary_object
from sandbox.gateway.http.styles import (
    cookie_pairs,
    encode_pairs,
    header_value,
    path_value,
    query_pairs,
    scalar_text,
)

__all__ = ["Prepared", "build", "check_text", "FRAMING_HEADERS", "add_query"]

_BAD_CHARS = ("\r", "\n", "\x00")
#: Headers that frame a request or steer its connection; never taken from a program's arguments.
FRAMING_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade",
                             "te", "trailer", "expect", "proxy-connection"})
_PLACEHOLDER = re.compile(r"\{([^{}/]+)\}")
_FORM = "application/x-www-form-urlencoded"
_MULTIPART = "multipart/form-data"


@dataclass
class Prepared:
    """A request ready to send. ``cookies`` are kept apart from ``headers`` so that each redirect
    hop can join them with the run's cookie jar afresh; ``query`` is already encoded."""

    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    cookies: list[tuple[str, str]] = field(default_factory=list)
    content: bytes | None = None

    def full_url(self, query: str = "") -> str:
        return self.url + (("&" if "?" in self.url else "?") + query if query else "")


def check_text(tool: Tool, param: str, value: str) -> str:
    if any(c in value for c in _BAD_CHARS):
        raise ToolError(f"{tool.name}: argument {param!r} must not contain CR, LF or NUL characters",
                        tool=tool.name, parameter=param)
    return value


def _check_values(tool: Tool, param: str, value: Any) -> None:
    """CR, LF or NUL anywhere in a value bound for the query: refused like in a header, although
    percent-encoding would make it harmless, because no real query value has them and an API
    that decodes and logs or forwards them could be led astray."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            check_text(tool, param, item)
        elif isinstance(item, dict):
            stack.extend(str(k) for k in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _refuse(tool: Tool, key: str, why: str) -> ToolError:
    return ToolError(f"{tool.name}: {why}", tool=tool.name, parameter=key)


def _fill_path(tool: Tool, values: dict[str, tuple[str, str]]) -> str:
    """The path with every placeholder replaced (values: wire name -> (argument, encoded text))."""
    template = tool.path
    segments = template.split("/")
    out: list[str] = []
    for i, segment in enumerate(segments):
        names = _PLACEHOLDER.findall(segment)
        filled = _PLACEHOLDER.sub(lambda m: values[m.group(1)][1] if m.group(1) in values else m.group(0), segment)
        if names and all(n in values for n in names):
            key = values[names[0]][0]
            if filled == "" and i != len(segments) - 1:
                # "/users/{id}/posts" with id="" would be "/users//posts", which servers read as
                # another route ("/users/posts"); only a trailing placeholder may be empty.
                raise _refuse(tool, key, f"path argument {key!r} must not be empty here (it would change the route)")
            if filled.strip(".") == "" and filled != "":
                filled = filled.replace(".", "%2E")  # a dot segment would be removed by clients/servers
        out.append(filled)
    path = "/".join(out)
    unfilled = _PLACEHOLDER.search(path)
    if unfilled:
        raise ToolError(f"{tool.name}: missing path argument {unfilled.group(1)!r}", tool=tool.name,
                        parameter=unfilled.group(1))
    return path


def _encode_binary(value: Any) -> tuple[bytes, str | None, str | None]:
    """(bytes, content type, filename) of a binary object, or of a string sent as a file."""
    if is_binary_object(value):
        try:
            data = base64.b64decode(value["base64"], validate=True)
        except ValueError as exc:
            raise ValueError(f"'base64' is not valid base64 ({exc})") from None
        return data, value.get("content_type"), value.get("filename")
    return scalar_text(value).encode("utf-8"), None, None


def _is_binary_schema(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("format") in ("binary", "byte") and \
        schema.get("type") in ("string", None)


def _multipart(tool: Tool, fields: list[tuple[str, Any, Binding]]) -> list[tuple[str, tuple[Any, ...]]]:
    parts: list[tuple[str, tuple[Any, ...]]] = []
    for key, value, binding in fields:
        schema = tool.properties.get(key, {})
        items = value if isinstance(value, list) else [value]
        item_schema = schema.get("items", {}) if isinstance(value, list) and isinstance(schema, dict) else schema
        for item in items:
            if is_binary_object(item) or _is_binary_schema(item_schema):
                data, ctype, filename = _encode_binary(item)
                parts.append((binding.name, (filename or binding.name, data,
                                             ctype or binding.content_type or "application/octet-stream")))
            elif isinstance(item, dict | list):
                parts.append((binding.name, (None, json.dumps(item, ensure_ascii=False).encode(),
                                             binding.content_type or "application/json")))
            elif binding.content_type:
                parts.append((binding.name, (None, scalar_text(item).encode(), binding.content_type)))
            else:
                parts.append((binding.name, (None, scalar_text(item).encode())))
    return parts


def _form(fields: list[tuple[str, Any, Binding]]) -> bytes:
    pairs: list[tuple[str, str]] = []
    for _key, value, binding in fields:
        if binding.content_type and "json" in binding.content_type and isinstance(value, dict | list):
            pairs += query_pairs(binding.name, json.dumps(value, ensure_ascii=False, separators=(",", ":")),
                                 Binding("body", binding.name))
        else:
            pairs += query_pairs(binding.name, value, binding)
    return encode_pairs(pairs).encode("ascii")


def _body(tool: Tool, fields: list[tuple[str, Any, Binding]], headers: dict[str, str]) -> bytes | None:
    media = (tool.body_media_type or "application/json").split(";")[0].strip().lower()
    whole_given = [v for _k, v, b in fields if b.name == ""]
    whole: Any = whole_given[0] if whole_given else None
    if whole_given and media in (_FORM, _MULTIPART) and isinstance(whole, dict):
        # a form body the spec describes as one opaque object: its keys are the fields
        fields, whole_given = [(str(k), v, Binding("body", str(k))) for k, v in whole.items()], []
    if media == _FORM and not whole_given:
        headers["Content-Type"] = _FORM
        return _form(fields)
    if media == _MULTIPART and not whole_given:
        request = httpx.Request("POST", "http://multipart.invalid/", files=_multipart(tool, fields))
        headers["Content-Type"] = request.headers["content-type"]
        return request.read()
    body: Any = whole if whole_given else {b.name: v for _k, v, b in fields}
    if "json" in media:
        headers["Content-Type"] = tool.body_media_type or "application/json"
        return json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
    headers["Content-Type"] = tool.body_media_type or "application/octet-stream"
    if isinstance(body, str | int | float | bool) or is_binary_object(body):
        data, ctype, _filename = _encode_binary(body)
        if ctype and media not in (_FORM, _MULTIPART) and media.endswith("octet-stream"):
            headers["Content-Type"] = ctype
        return data
    # structured data for a media type that is not JSON (XML, YAML...): the spec under-describes
    # the body; JSON text is the only faithful rendering the gateway has.
    headers["Content-Type"] = "application/json"
    return json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")


def build(tool: Tool, args: dict[str, Any], base: str, extra_query: dict[str, Any] | None = None) -> tuple[
        Prepared, list[tuple[str, str]]]:
    """The request of a call, and its query pairs still open for credentials (encoded)."""
    path_values: dict[str, tuple[str, str]] = {}
    query: list[tuple[str, str]] = []
    headers: dict[str, str] = {}
    cookies: list[tuple[str, str]] = []
    fields: list[tuple[str, Any, Binding]] = []
    for key, value in args.items():
        binding = tool.bindings.get(key)
        if binding is None:
            # An argument the spec does not list (validation "warn"/"off"): query for requests
            # without a body, a body field otherwise.
            binding = Binding("body" if tool.body_media_type else "query", key)
        location = binding.location
        if location == "path":
            path_values[binding.name] = (key, path_value(binding.name, value, binding))
        elif location == "query":
            _check_values(tool, key, value)
            query += query_pairs(binding.name, value, binding)
        elif location == "header":
            if binding.name.lower() in FRAMING_HEADERS:
                # These decide where a request ends on a shared keep-alive connection: a
                # program setting them could smuggle a second request past the gateway.
                raise _refuse(tool, key, f"argument {key!r} would set the {binding.name} header, which the "
                                         "gateway does not let programs set")
            headers[binding.name] = check_text(tool, key, header_value(value, binding))
        elif location == "cookie":
            for name, text in cookie_pairs(binding.name, value, binding):
                check_text(tool, key, text)
                if ";" in text or ";" in name or "=" in name:
                    raise _refuse(tool, key, f"cookie argument {key!r} must not contain ';'")
                cookies.append((name, text))
        else:
            fields.append((key, value, binding))
    add_query(tool, query, extra_query or {})
    path = _fill_path(tool, path_values)
    content = _body(tool, fields, headers) if fields else None
    return Prepared(method=tool.method.upper(), url=base + path, headers=headers, cookies=cookies,
                    content=content), query


def add_query(tool: Tool, query: list[tuple[str, str]], extra: dict[str, Any]) -> None:
    """``extra_query`` pairs (form style: a list repeats the name)."""
    # lists repeat the name (form), objects nest brackets (deepObject): what filter APIs expect
    plain = Binding("query", "", style="deepObject")
    for name, value in extra.items():
        _check_values(tool, "extra_query", [name, value])
        query += query_pairs(name, value, plain)
