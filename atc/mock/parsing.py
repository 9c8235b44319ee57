"""Reading a request the way the spec describes it: parameters from the path, query, headers and
cookies, and the body as JSON, a form, multipart parts or plain bytes; then checking every value.

Values from the path, query, headers, cookies and forms are text: they are turned into their
schema's type first (``"3"`` -> 3 for an integer, ``a,b`` -> a list for a ``form`` array,
``filter[genre]=x`` -> an object for ``deepObject``), then checked against the full schema
(:mod:`atc.mock.request_checks`). A problem raises :class:`BadRequest` naming the parameter and where it
was, so the answer can say exactly what to fix.
"""

from __future__ import annotations

import json
import re
from email.message import Message
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qs

from atc.mock.entities import as_dict, schema_type
from atc.mock.request_checks import first_error
from protocols.model import Tool

__all__ = ["BadRequest", "Upload", "NO_BODY", "read_body", "read_cookies", "arguments", "media_matches"]

#: The body of a request that has none (JSON ``null`` is a body: a value of the wrong type).
NO_BODY: Any = type("NoBody", (), {"__repr__": lambda self: "NO_BODY", "__bool__": lambda self: False})()


class BadRequest(Exception):
    """A request the spec does not allow. ``kind`` is ``invalid`` (a value or a missing one) or
    ``unsupported_media`` (a body in a media type the operation does not take)."""

    def __init__(self, wire: str, location: str, message: str, kind: str = "invalid") -> None:
        super().__init__(message)
        self.wire, self.location, self.message, self.kind = wire, location, message, kind


class Upload(str):
    """A file part of a multipart body: its bytes as text (latin-1, one character a byte), so that
    a ``format: binary`` string schema accepts it; never echoed back into a response."""

    filename: str | None = None
    content_type: str | None = None


def media_matches(declared: str, actual: str) -> bool:
    """Whether an ``actual`` Content-Type is one of ``declared`` (wildcards and ``+json`` allowed)."""
    d = declared.split(";")[0].strip().lower()
    a = actual.split(";")[0].strip().lower()
    if d in ("*/*", "") or d == a:
        return True
    d_main, _, d_sub = d.partition("/")
    a_main, _, a_sub = a.partition("/")
    if d_sub == "*" and d_main == a_main:
        return True
    return d_main == a_main and d_sub.endswith("+json") and a_sub == "json"


def read_cookies(headers: dict[str, str]) -> dict[str, str]:
    return dict(part.strip().split("=", 1) for part in headers.get("cookie", "").split(";") if "=" in part)


def read_body(tool: Tool, headers: dict[str, str], body: bytes) -> tuple[Any, bool]:
    """The parsed body (``NO_BODY`` when there is none) and whether its values are text (a form or
    multipart) rather than JSON."""
    if not body:
        return NO_BODY, False
    ctype = headers.get("content-type", "")
    declared = (tool.request_body or {}).get("media_types") or ([tool.body_media_type] if tool.body_media_type else [])
    if declared and ctype and not any(media_matches(m, ctype) for m in declared):
        raise BadRequest("Content-Type", "header", f"this operation takes a body of {', '.join(declared)}, "
                         f"not {ctype.split(';')[0]}", kind="unsupported_media")
    main = ctype.split(";")[0].strip().lower()
    if main == "application/x-www-form-urlencoded":
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        return {k: v[0] if len(v) == 1 else v for k, v in form.items()}, True
    if main.startswith("multipart/"):
        return _multipart(ctype, body), True
    if main and not ("json" in main or main == "*/*") and main.startswith(("text/", "application/octet-stream",
                                                                             "image/", "audio/", "video/")):
        return body.decode("utf-8" if main.startswith("text/") else "latin-1", "replace"), False
    try:
        return json.loads(body), False
    except (ValueError, RecursionError):
        if "json" in main or not main:
            raise BadRequest("body", "body", "the request body is not valid JSON") from None
        return body.decode("utf-8", "replace"), False


def _multipart(ctype: str, body: bytes) -> dict[str, Any]:
    head = f"Content-Type: {ctype}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1", "replace")
    message = BytesParser(policy=HTTP).parsebytes(head + body)
    if not message.is_multipart():
        raise BadRequest("body", "body", "the multipart body has no parts (is the boundary right?)")
    out: dict[str, Any] = {}
    for part in message.iter_parts():
        assert isinstance(part, Message)
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or not name:
            continue
        data = part.get_payload(decode=True)
        data = data if isinstance(data, bytes) else b""
        filename = part.get_param("filename", header="content-disposition")
        part_type = part.get_content_type()
        value: Any
        if isinstance(filename, str) or not part_type.startswith(("text/", "application/json")):
            value = Upload(data.decode("latin-1"))
            value.filename = filename if isinstance(filename, str) else None
            value.content_type = part_type
        elif part_type == "application/json":
            try:
                value = json.loads(data)
            except ValueError:
                raise BadRequest(name, "body", f"part '{name}' is not valid JSON") from None
        else:
            value = data.decode(part.get_content_charset() or "utf-8", "replace")
        if name in out:
            out[name] = (out[name] if isinstance(out[name], list) else [out[name]]) + [value]
        else:
            out[name] = value
    return out


def _to_type(raw: str, schema: dict[str, Any]) -> Any:
    """One text value as its schema type (left as text when it is not of that type: the schema
    check then says why)."""
    t = schema_type(schema)
    declared = schema.get("type")
    types = declared if isinstance(declared, list) else [t]
    text = raw.strip()
    if "null" in types and text in ("null", ""):
        return None
    if t == "integer" and re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    if t == "number" and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        number = float(text)
        return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
    if t == "boolean" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if t in ("object", "array") and text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            return raw
    return raw


_SEPARATORS = {"form": ",", "simple": ",", "spaceDelimited": " ", "pipeDelimited": "|", "tabDelimited": "\t"}


def _text_value(raw: Any, schema: dict[str, Any], style: str, explode: bool) -> Any:
    t = schema_type(schema)
    items = as_dict(schema.get("items"))
    values = raw if isinstance(raw, list) else [raw]
    if t == "array":
        parts: list[str] = []
        for v in values:
            sep = _SEPARATORS.get(style, ",")
            parts.extend(v.split(sep) if (not explode or style != "form") and sep in v else [v])
        return [_to_type(p, items) for p in parts]
    return _to_type(values[-1] if values else "", schema)


def _object_from_query(query: dict[str, list[str]], wire: str, schema: dict[str, Any], style: str) -> Any:
    """``deepObject`` (``filter[genre]=x``) or exploded ``form`` objects (each property a parameter)."""
    props = as_dict(schema.get("properties"))
    out: dict[str, Any] = {}
    if style == "deepObject":
        prefix = f"{wire}["
        for key, values in query.items():
            if key.startswith(prefix) and key.endswith("]"):
                name = key[len(prefix):-1]
                out[name] = _to_type(values[-1], props.get(name) or {})
    else:
        for name, sub in props.items():
            if name in query:
                out[name] = _to_type(query[name][-1], sub if isinstance(sub, dict) else {})
    return out or None


def arguments(tool: Tool, path_args: dict[str, str], query: dict[str, list[str]], headers: dict[str, str],
              cookies: dict[str, str], payload: Any, form: bool) -> dict[tuple[str, str], Any]:
    """The call's arguments keyed by (location, wire name), typed and checked. ``readOnly`` body
    properties a client sent are dropped: they are the server's to set."""
    required = set(tool.required)
    out: dict[tuple[str, str], Any] = {}
    body_props: dict[str, Any] = {}
    body_required: list[str] = []
    read_only: set[str] = set()
    for pname, schema in tool.properties.items():
        schema = schema if isinstance(schema, dict) else {}
        binding = tool.bindings.get(pname)
        loc, wire = (binding.location, binding.name) if binding else ("query", pname)
        style = binding.effective_style() if binding else "form"
        explode = binding.effective_explode() if binding else True
        raw: Any
        if loc == "path":
            raw = path_args.get(wire)
        elif loc == "query":
            raw = query.get(wire)
            if raw is None and schema_type(schema) == "object":
                raw = _object_from_query(query, wire, schema, style)
        elif loc == "header":
            raw = headers.get(wire.lower())
        elif loc == "cookie":
            raw = cookies.get(wire)
        elif wire == "":
            raw = payload if payload is not NO_BODY else None
            if payload is None:  # JSON null sent as the body: check it like any value
                problem = first_error(schema, None)
                if problem is not None:
                    raise BadRequest("body", "body", f"the request body: {problem}")
        else:
            raw = payload.get(wire) if isinstance(payload, dict) else None
            if schema.get("readOnly") is True:
                read_only.add(wire)
                continue
            body_props[wire] = schema
            if pname in required:
                body_required.append(wire)
        if raw is None:
            if pname in required and loc != "body":
                raise BadRequest(wire or pname, loc, f"missing required parameter '{wire or pname}' ({loc})")
            continue
        text = (loc != "body" or form) and not isinstance(raw, (dict, Upload)) and \
            (isinstance(raw, str) or (isinstance(raw, list) and all(isinstance(v, str) for v in raw)))
        value = _text_value(raw, schema, style, explode) if text else raw
        problem = first_error(schema, value)
        if problem is not None:
            shown = json.dumps(raw if not isinstance(raw, list) or len(raw) != 1 else raw[0], default=str)[:80]
            raise BadRequest(wire or pname, loc, f"parameter '{wire or pname}' ({loc}): {problem} (got {shown})")
        out[(loc, wire)] = value
    _check_body(tool, payload, form, body_props, body_required, out)
    if isinstance(payload, dict):
        for key, value in payload.items():
            if key not in read_only:
                out.setdefault(("body", key), value)
    return out


def _check_body(tool: Tool, payload: Any, form: bool, props: dict[str, Any], required: list[str],
                out: dict[tuple[str, str], Any]) -> None:
    """The body as a whole: present when required, its required properties there, and its own
    keywords (``additionalProperties: false``, ``minProperties``...) met."""
    info = tool.request_body or {}
    if payload is NO_BODY:
        if info.get("required") or required:
            missing = f" (it needs {', '.join(repr(r) for r in required)})" if required else ""
            raise BadRequest("body", "body", f"the request body is required{missing}")
        return
    if not props:
        return
    if not isinstance(payload, dict):
        raise BadRequest("body", "body", f"the request body must be an object, not {type(payload).__name__}")
    for wire in required:
        if wire not in payload:
            raise BadRequest(wire, "body", f"missing required parameter '{wire}' (body)")
    own = as_dict(info.get("schema"))
    if own:
        whole = {**own, "type": "object", "properties": props}
        problem = first_error(whole, {k: out.get(("body", k), v) for k, v in payload.items()})
        if problem is not None:
            raise BadRequest("body", "body", f"the request body: {problem}")
