"""OpenAPI 3.0 / 3.1 and Swagger 2.0 documents -> a ``Collection`` of tool protocols.

One operation (method + path) becomes one ``Tool``. Parameters from the path item and the
operation are merged (operation wins on the same name + location); a JSON object request body
contributes one parameter per property; anything else is one ``body`` parameter. The response
schema is the first 2xx JSON response (``default`` as a fallback), with every local ``$ref``
expanded, so that nothing downstream needs the original document.

Any malformed input ends in a ``ProtocolError`` carrying the JSON pointer of the problem.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urljoin

from protocols.building import ParamSet, UniqueNames, clean_text, collection_slug, tool_name_for
from protocols.errors import ProtocolError
from protocols.model import Collection, SecurityScheme, SpecWarning, Tool
from protocols.refs import Resolver, escape, unshare
from protocols.writes import READ_ONLY_EXTENSION

__all__ = ["OpenAPILoader", "METHODS"]

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
_JSON_MEDIA = re.compile(r"^application/([\w.+-]*\+)?json\b|^\*/\*$|^text/json\b", re.I)
_FORM = "application/x-www-form-urlencoded"
_MULTIPART = "multipart/form-data"
_SWAGGER_PARAM_KEYS = ("type", "format", "items", "enum", "default", "minimum", "maximum", "pattern",
                       "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "collectionFormat",
                       "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
#: Swagger 2 ``collectionFormat`` -> (OpenAPI style for query/cookie/form, explode). ``csv`` is the default.
_COLLECTION_FORMATS = {"csv": ("form", False), "ssv": ("spaceDelimited", False), "tsv": ("tabDelimited", False),
                       "pipes": ("pipeDelimited", False), "multi": ("form", True)}
_STYLES = {"form", "spaceDelimited", "pipeDelimited", "deepObject", "simple", "label", "matrix"}
#: Most warnings one import keeps (a generated spec can repeat one mistake thousands of times).
MAX_WARNINGS = 200


def _version(doc: dict[str, Any], source: str) -> str:
    """``openapi-3.0``, ``openapi-3.1`` or ``swagger-2.0``; anything else is a ProtocolError."""
    if "openapi" in doc:
        v = str(doc["openapi"])
        if re.match(r"^3\.0(\.\d+)?(-[\w.]+)?$", v):
            return "openapi-3.0"
        if re.match(r"^3\.1(\.\d+)?(-[\w.]+)?$", v):
            return "openapi-3.1"
        raise ProtocolError(f"unsupported OpenAPI version {v!r} (supported: 3.0, 3.1, Swagger 2.0)",
                            source=source, pointer="/openapi")
    v = str(doc.get("swagger"))
    if v in ("2.0", "2"):
        return "swagger-2.0"
    raise ProtocolError(f"unsupported Swagger version {v!r} (supported: 2.0, OpenAPI 3.0/3.1)",
                        source=source, pointer="/swagger")


class OpenAPILoader:
    """The built-in loader for OpenAPI 3.x and Swagger 2.0."""

    name = "openapi"

    def detect(self, doc: Any, path: str | None = None) -> bool:
        return isinstance(doc, dict) and ("openapi" in doc or "swagger" in doc)

    def load(self, doc: Any, *, source: str, name: str | None = None) -> Collection:
        return _Build(doc, source).collection(name)


class _Build:
    """State of one import: the document, its resolver, and the names handed out so far."""

    def __init__(self, doc: Any, source: str) -> None:
        if not isinstance(doc, dict):
            raise ProtocolError("an OpenAPI document must be a JSON/YAML object", source=source, pointer="")
        self.doc = doc
        self.source = source
        self.fmt = _version(doc, source)
        self.swagger = self.fmt == "swagger-2.0"
        self.refs = Resolver(doc, source, dialect={"openapi-3.1": "3.1", "swagger-2.0": "2.0"}.get(self.fmt, "3.0"))
        self.names = UniqueNames()
        self.notes: list[SpecWarning] = []

    def err(self, message: str, pointer: str) -> ProtocolError:
        return ProtocolError(message, source=self.source, pointer=pointer)

    def obj(self, node: Any, pointer: str, what: str) -> dict[str, Any]:
        """``node`` with references followed, required to be an object."""
        node, _ = self.refs.follow(node, pointer)
        if not isinstance(node, dict):
            raise self.err(f"{what} must be an object, not {type(node).__name__}", pointer)
        return node

    # -- collection ---------------------------------------------------------------------------

    def collection(self, name: str | None) -> Collection:
        info = self.doc.get("info")
        info = info if isinstance(info, dict) else {}
        title = clean_text(info.get("title"))
        paths = self.doc.get("paths")
        if paths is None and self.fmt == "openapi-3.1" and isinstance(self.doc.get("webhooks"), dict):
            paths = {}
        if not isinstance(paths, dict):
            raise self.err("'paths' must be an object of path -> operations", "/paths")
        servers = self.servers()
        schemes = self.security_schemes()
        tools: list[Tool] = []
        cname = name or collection_slug(title) or "api"
        for path, item in paths.items():
            pointer = f"/paths/{escape(str(path))}"
            if not isinstance(path, str) or not path.startswith("/"):
                if str(path).startswith("x-") or not (isinstance(item, dict) and any(
                        str(k).lower() in METHODS for k in item)):
                    continue  # an extension, or a misplaced section (seen in real specs): not an operation
                path = "/" + str(path)  # a missing leading slash (also seen in real specs)
            item = self.obj(item, pointer, "a path item")
            for key in item:  # document order: what the author listed first comes first
                if isinstance(key, str) and key.lower() in METHODS:
                    tools.append(self.tool(cname, title, path, item, key, servers, f"{pointer}/{escape(key)}"))
        if not tools:
            raise self.err("no operations: the spec defines no path with a method", "/paths")
        warnings = list(self.refs.warnings) + self.notes
        if not any(s for s in servers) and not all(t.servers for t in tools):
            pointer = "/host" if self.swagger else "/servers"
            warnings.insert(0, SpecWarning("the spec names no server URL: runs need --base-url URL", pointer))
        elif servers and not any(s.startswith(("http://", "https://")) for s in servers):
            pointer = "/basePath" if self.swagger else "/servers/0/url"
            warnings.insert(0, SpecWarning(f"the server URL {servers[0] or '/'!r} is relative: runs need --base-url "
                                           "URL (or import the spec from its URL)", pointer))
        if len(warnings) > MAX_WARNINGS:
            more = len(warnings) - MAX_WARNINGS + 1
            warnings = warnings[:MAX_WARNINGS - 1] + [SpecWarning(f"... and {more} more warnings", "")]
        return Collection(
            name=cname, tools=tools, description=clean_text(info.get("description")) or title,
            source=self.source, source_format=self.fmt, servers=servers, security_schemes=schemes,
            version=str(info["version"]) if isinstance(info.get("version"), (str, int, float)) else "",
            warnings=warnings,
        )

    def servers(self) -> list[str]:
        """The server URLs. A spec read from a URL resolves relative ones against that URL (and a
        missing server means the spec's own origin), as both OpenAPI versions define."""
        located = self.source.startswith(("http://", "https://"))
        if self.swagger:
            host = self.doc.get("host")
            base = self.doc.get("basePath")
            base = base if isinstance(base, str) else ""
            schemes = self.doc.get("schemes")
            scheme = "https"
            if isinstance(schemes, list) and schemes and isinstance(schemes[0], str):
                scheme = "https" if "https" in schemes else schemes[0]
            if isinstance(host, str) and host:
                return [f"{scheme}://{host}{base}".rstrip("/")]
            if located:
                return [urljoin(self.source, "/" + base.lstrip("/")).rstrip("/")]
            return [base.rstrip("/")] if base else []
        out: list[str] = []
        servers = self.doc.get("servers")
        if not isinstance(servers, list) or not servers:
            return [urljoin(self.source, "/").rstrip("/")] if located else out
        for i, server in enumerate(servers):
            if not isinstance(server, dict) or not isinstance(server.get("url"), str):
                raise self.err("a server must be an object with a 'url' string", f"/servers/{i}")
            url = server["url"]
            variables = server.get("variables")
            if isinstance(variables, dict):
                for var, spec in variables.items():
                    default = spec.get("default") if isinstance(spec, dict) else None
                    if default is not None:
                        url = url.replace("{" + str(var) + "}", str(default))
            if located and not url.startswith(("http://", "https://")):
                url = urljoin(self.source, url)
            out.append(url.rstrip("/") if url != "/" else "")
        return out

    def security_schemes(self) -> dict[str, SecurityScheme]:
        if self.swagger:
            raw, pointer = self.doc.get("securityDefinitions"), "/securityDefinitions"
        else:
            comps = self.doc.get("components")
            raw = comps.get("securitySchemes") if isinstance(comps, dict) else None
            pointer = "/components/securitySchemes"
        out: dict[str, SecurityScheme] = {}
        if not isinstance(raw, dict):
            return out
        for key, node in raw.items():
            spec = self.obj(node, f"{pointer}/{escape(str(key))}", "a security scheme")
            kind = str(spec.get("type") or "")
            desc = clean_text(spec.get("description"))
            if kind == "apiKey":
                out[str(key)] = SecurityScheme(name=str(key), type="apiKey", location=str(spec.get("in") or "header"),
                                               param=str(spec.get("name") or key), description=desc)
            elif kind == "http" or kind == "basic":
                scheme = "basic" if kind == "basic" else str(spec.get("scheme") or "bearer").lower()
                out[str(key)] = SecurityScheme(name=str(key), type="http", scheme=scheme, description=desc)
            else:
                # oauth2, openIdConnect, mutualTLS: kept so requirements stay meaningful, marked as such.
                note = f"({kind or 'unknown'} scheme: the gateway cannot obtain this credential itself)"
                out[str(key)] = SecurityScheme(name=str(key), type=kind or "unknown",
                                               description=f"{desc} {note}".strip())
        return out

    # -- one operation ------------------------------------------------------------------------

    def tool(self, cname: str, title: str, path: str, item: dict[str, Any], method: str,
             servers: list[str], pointer: str) -> Tool:
        op = self.obj(item[method], pointer, "an operation")
        method = method.lower()
        summary = clean_text(op.get("summary"))
        detail = clean_text(op.get("description"))
        if summary and detail and not detail.startswith(summary):
            description = f"{summary.rstrip('.')}. {detail}"
        else:
            description = detail or summary
        params = ParamSet()
        consumes = self._consumes(op)
        form_params: list[str] = []
        merged = self.parameters(item.get("parameters"), f"{pointer[:pointer.rindex('/')]}/parameters")
        merged.update(self.parameters(op.get("parameters"), f"{pointer}/parameters"))
        body_media: str | None = None
        for (location, wire), (param, ppointer) in merged.items():
            if location == "body":
                body_media = consumes or "application/json"
                self.body(params, param.get("schema"), _flag(param.get("required")),
                          clean_text(param.get("description")), body_media, f"{ppointer}/schema")
                continue
            if location == "formData":
                form_params.append(wire)
                location = "body"
            schema = self.param_schema(param, ppointer)
            raw_schema = param.get("schema")
            # "required: true" written inside the parameter's schema instead of on the parameter.
            in_schema = isinstance(raw_schema, dict) and _flag(raw_schema.get("required"))
            style, explode, reserved = self.param_style(param, location, schema, ppointer)
            params.add(wire, location, schema, required=_flag(param.get("required")) or in_schema or
                       location == "path", description=clean_text(param.get("description")),
                       style=style, explode=explode, allow_reserved=reserved)
        if form_params:
            body_media = _MULTIPART if consumes == _MULTIPART else _FORM
        if not self.swagger and op.get("requestBody") is not None:
            body_media = self.request_body(params, op["requestBody"], f"{pointer}/requestBody")
        params.ensure_path_params(path)
        response, examples, codes = self.responses(op.get("responses"), f"{pointer}/responses")
        documented = self.documented_responses(op, f"{pointer}/responses", response)
        request_body = self.request_body_info(op, params, body_media, f"{pointer}/requestBody")
        tags = op.get("tags")
        category = str(tags[0]) if isinstance(tags, list) and tags and isinstance(tags[0], (str, int)) else ""
        op_servers = self._op_servers(op, item) or servers
        return Tool(
            name=self.names.take(tool_name_for(op.get("operationId"), method, path)),
            collection=cname, method=method.upper(), path=path, description=description,
            category=category, group=title or cname, parameters=unshare(params.schema()), bindings=params.bindings,
            body_media_type=body_media, response_schema=unshare(response), examples=unshare(examples),
            status_codes=codes,
            servers=op_servers, security=self.security(op, pointer), deprecated=op.get("deprecated") is True,
            responses=documented, request_body=request_body, read_only=_read_only_mark(op),
        )

    # -- what a server answers, and the body as a whole (atc mock) ---------------------------

    def documented_responses(self, op: dict[str, Any], pointer: str,
                             primary: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
        """Every documented response: status -> {"content": {media: schema | None}, "headers"}.
        The schema that ``responses`` chose as the response schema is the same object here, so
        that the stored form can refer to it instead of repeating it."""
        node = op.get("responses")
        if not isinstance(node, dict):
            return {}
        produces = self._produces(op)
        out: dict[str, dict[str, Any]] = {}
        for code, raw in node.items():
            code = str(code)
            if code.startswith("x-"):
                continue
            rp = f"{pointer}/{escape(code)}"
            try:
                resp = self.obj(raw, rp, "a response")
            except ProtocolError as exc:
                self._skipped(exc)
                continue
            content: dict[str, Any] = {}
            bare: list[str] = []
            if self.swagger:
                if "schema" in resp:
                    schema = self._optional_schema(resp["schema"], f"{rp}/schema")
                    for media in produces:
                        content[media] = schema
                else:
                    # No body, but Swagger declares the operation's media types for every answer
                    # (``produces``): the answer still says which one (its Content-Type).
                    bare = list(produces)
            elif isinstance(resp.get("content"), dict):
                for media, entry in resp["content"].items():
                    entry = entry if isinstance(entry, dict) else {}
                    content[str(media)] = self._optional_schema(
                        entry["schema"], f"{rp}/content/{escape(str(media))}/schema") if "schema" in entry else None
            if primary is not None:
                # One shared object for the chosen schema (an equal copy would be stored twice).
                content = {m: primary if s == primary else s for m, s in content.items()}
            entry_out: dict[str, Any] = {"content": content}
            if bare:
                entry_out["produces"] = bare
            headers = self._response_headers(resp.get("headers"), f"{rp}/headers")
            if headers:
                entry_out["headers"] = headers
            out[code] = entry_out
        return out

    def _optional_schema(self, node: Any, pointer: str) -> dict[str, Any] | None:
        """A schema of a response no program reads (an error, another media type): a broken one
        is noted and left out rather than failing the whole import."""
        try:
            schema = self.refs.schema(node, pointer)
        except ProtocolError as exc:
            self._skipped(exc)
            return None
        return schema if isinstance(schema, dict) else None

    def _skipped(self, exc: ProtocolError) -> None:
        self.notes.append(SpecWarning(f"{exc.reason}: left out of the documented responses", exc.pointer or ""))

    def _produces(self, op: dict[str, Any]) -> list[str]:
        produces = op.get("produces", self.doc.get("produces"))
        if isinstance(produces, list) and produces and all(isinstance(m, str) for m in produces):
            return list(produces)
        return ["application/json"]

    def _response_headers(self, node: Any, pointer: str) -> dict[str, dict[str, Any]]:
        if not isinstance(node, dict):
            return {}
        out: dict[str, dict[str, Any]] = {}
        for name, raw in node.items():
            hp = f"{pointer}/{escape(str(name))}"
            try:
                header, _ = self.refs.follow(raw, hp)
            except ProtocolError as exc:
                self._skipped(exc)
                continue
            if not isinstance(header, dict):
                continue
            if self.swagger:
                schema: Any = self.refs.schema({k: header[k] for k in _SWAGGER_PARAM_KEYS
                                                if k in header and k != "collectionFormat"}, hp)
            elif "schema" in header:
                schema = self.refs.schema(header["schema"], f"{hp}/schema")
            elif isinstance(header.get("content"), dict) and header["content"]:
                first = next(iter(header["content"].values()))
                schema = self.refs.schema(first.get("schema") if isinstance(first, dict) else {}, f"{hp}/content")
            else:
                schema = {}
            out[str(name)] = {"schema": schema if isinstance(schema, dict) else {},
                              "required": _flag(header.get("required"))}
        return out

    def request_body_info(self, op: dict[str, Any], params: ParamSet, body_media: str | None,
                          pointer: str) -> dict[str, Any] | None:
        """The request body as a whole: its media types, whether it is required, and the body
        schema's own keywords (its properties are the tool's ``body`` parameters)."""
        if body_media is None:
            return None
        raw_schema: Any = None
        required = False
        if self.swagger:
            consumes = op.get("consumes", self.doc.get("consumes"))
            media = [m for m in consumes if isinstance(m, str)] if isinstance(consumes, list) else []
            if body_media not in media:
                media = [body_media, *media]
            form = False
            for param in self.parameters(op.get("parameters"), f"{pointer[:pointer.rindex('/')]}/parameters").values():
                if param[0].get("in") == "body":
                    raw_schema, required = param[0].get("schema"), _flag(param[0].get("required"))
                elif param[0].get("in") == "formData":
                    form = True
                    required = required or _flag(param[0].get("required"))
            if form and raw_schema is None:
                # The formData parameters are the whole form: a field they do not name is not part of it.
                raw_schema = {"type": "object", "additionalProperties": False}
        else:
            body = op.get("requestBody")
            body, _ = self.refs.follow(body, pointer)
            if not isinstance(body, dict) or not isinstance(body.get("content"), dict):
                return None
            media = [str(m) for m in body["content"]]
            required = _flag(body.get("required"))
            entry = body["content"].get(body_media)
            raw_schema = entry.get("schema") if isinstance(entry, dict) else None
        schema = self.refs.schema(raw_schema, f"{pointer}/schema") if raw_schema is not None else {}
        own: dict[str, Any] = {}
        if isinstance(schema, dict) and any(b.location == "body" and b.name for b in params.bindings.values()):
            own = {k: v for k, v in schema.items() if k not in ("properties", "required", "description", "example",
                                                                  "examples", "title")}
            raw_props = schema.get("properties")
            props: dict[str, Any] = raw_props if isinstance(raw_props, dict) else {}
            # A readOnly property is the server's to set: its "required" binds responses only.
            needed = [r for r in schema.get("required") or [] if isinstance(r, str)
                      and not (isinstance(props.get(r), dict) and props[r].get("readOnly") is True)]
            if needed:
                own["required"] = needed
        return {"media_types": media, "required": required, "schema": own}

    def _consumes(self, op: dict[str, Any]) -> str | None:
        consumes = op.get("consumes", self.doc.get("consumes"))
        if isinstance(consumes, list) and consumes and isinstance(consumes[0], str):
            return consumes[0]
        return None

    def _op_servers(self, op: dict[str, Any], item: dict[str, Any]) -> list[str]:
        for node in (op.get("servers"), item.get("servers")):
            if isinstance(node, list) and node and all(isinstance(s, dict) and isinstance(s.get("url"), str)
                                                       for s in node):
                return [s["url"].rstrip("/") for s in node]
        return []

    def parameters(self, node: Any, pointer: str) -> dict[tuple[str, str], tuple[dict[str, Any], str]]:
        """(in, name) -> (parameter object, its pointer), in document order."""
        out: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
        if node is None:
            return out
        if not isinstance(node, list):
            raise self.err("'parameters' must be a list", pointer)
        for i, raw in enumerate(node):
            p = self.obj(raw, f"{pointer}/{i}", "a parameter")
            name, location = p.get("name"), p.get("in")
            if not isinstance(name, str) or not isinstance(location, str):
                raise self.err("a parameter needs 'name' and 'in' strings", f"{pointer}/{i}")
            valid = ("path", "query", "header", "cookie", "body", "formData") if self.swagger else \
                ("path", "query", "header", "cookie")
            if location not in valid:
                raise self.err(f"parameter {name!r} has unknown location {location!r}", f"{pointer}/{i}/in")
            out[(location, name)] = (p, f"{pointer}/{i}")
        return out

    def param_style(self, p: dict[str, Any], location: str, schema: dict[str, Any],
                    pointer: str) -> tuple[str | None, bool | None, bool]:
        """How the parameter is serialised: (style, explode, allowReserved), None for the default."""
        if self.swagger and "collectionFormat" not in p and ("style" in p or "explode" in p):
            pass  # an OpenAPI 3 parameter in a Swagger 2 document: its style, read below
        elif self.swagger:
            fmt = p.get("collectionFormat")
            if fmt is None and schema.get("type") != "array":
                return None, None, False
            fmt = str(fmt or "csv").lower()
            if fmt not in _COLLECTION_FORMATS:
                self.notes.append(SpecWarning(f"unknown collectionFormat {fmt!r}: read as csv",
                                              f"{pointer}/collectionFormat"))
                fmt = "csv"
            if fmt == "multi" and location not in ("query", "body"):
                self.notes.append(SpecWarning("collectionFormat 'multi' is only for query and form parameters: "
                                              "read as csv", f"{pointer}/collectionFormat"))
                fmt = "csv"
            swagger_style, swagger_explode = _COLLECTION_FORMATS[fmt]
            if location in ("path", "header") and swagger_style == "form":
                swagger_style = "simple"
            return swagger_style, swagger_explode, False
        raw_style = p.get("style")
        style = raw_style if isinstance(raw_style, str) and raw_style in _STYLES else None
        if raw_style is not None and style is None:
            self.notes.append(SpecWarning(f"unknown parameter style {raw_style!r}: the location's default is used",
                                          f"{pointer}/style"))
        raw_explode = p.get("explode")
        explode = _flag(raw_explode) if isinstance(raw_explode, bool | str) else None
        return style, explode, _flag(p.get("allowReserved"))

    def param_schema(self, p: dict[str, Any], pointer: str) -> dict[str, Any]:
        if self.swagger and "type" not in p and isinstance(p.get("schema"), dict) and p.get("in") != "body":
            # An OpenAPI 3 parameter in a Swagger 2 document (generators mix them): read it as one.
            self.notes.append(SpecWarning("a Swagger 2 parameter written the OpenAPI 3 way ('schema'): read as "
                                          "OpenAPI 3", f"{pointer}/schema"))
            schema = self.refs.schema(p["schema"], f"{pointer}/schema")
            return dict(schema) if isinstance(schema, dict) else {}
        if self.swagger:
            schema = {k: p[k] for k in _SWAGGER_PARAM_KEYS if k in p and k != "collectionFormat"}
            if schema.get("type") == "file":
                schema = {"type": "string", "format": "binary"}
            schema = self.refs.schema(schema, pointer)
        elif "schema" in p:
            schema = self.refs.schema(p["schema"], f"{pointer}/schema")
        elif isinstance(p.get("content"), dict) and p["content"]:
            media = next(iter(p["content"].values()))
            schema = self.refs.schema(media.get("schema") if isinstance(media, dict) else {}, f"{pointer}/content")
        else:
            schema = {}
        schema = dict(schema) if isinstance(schema, dict) else {}
        if "example" in p and "example" not in schema:
            schema["example"] = p["example"]
        elif isinstance(p.get("examples"), dict) and "example" not in schema:
            values = [e["value"] for e in p["examples"].values() if isinstance(e, dict) and "value" in e]
            if values:
                schema["example"] = values[0]
        if p.get("deprecated") is True:
            schema["deprecated"] = True
        return schema

    def request_body(self, params: ParamSet, node: Any, pointer: str) -> str | None:
        body = self.obj(node, pointer, "a requestBody")
        content = body.get("content")
        if not isinstance(content, dict) or not content:
            return None
        media = _pick_media(list(content))
        entry = content[media]
        entry = entry if isinstance(entry, dict) else {}
        encoding = entry.get("encoding") if isinstance(entry.get("encoding"), dict) else {}
        self.body(params, entry.get("schema"), _flag(body.get("required")), clean_text(body.get("description")),
                  media, f"{pointer}/content/{escape(media)}/schema", encoding)
        return media

    def body(self, params: ParamSet, raw: Any, required: bool, description: str, media: str,
             pointer: str, encoding: dict[str, Any] | None = None) -> None:
        """Object bodies in JSON or form encoding become one parameter per property; others one ``body``.

        A property that is ``readOnly`` is the server's to set: a ``required`` on it binds
        responses only (OpenAPI), so the request does not require it."""
        schema = self.refs.schema(raw, pointer) if raw is not None else {}
        schema = schema if isinstance(schema, dict) else {}
        props = schema.get("properties")
        structured = _JSON_MEDIA.match(media) or media in (_FORM, _MULTIPART)
        if structured and isinstance(props, dict) and props and schema.get("type", "object") == "object":
            needed_raw = schema.get("required")
            needed = needed_raw if isinstance(needed_raw, list) else []
            for prop, sub in props.items():
                read_only = isinstance(sub, dict) and sub.get("readOnly") is True
                enc = (encoding or {}).get(prop)
                enc = enc if isinstance(enc, dict) else {}
                style = enc.get("style") if enc.get("style") in _STYLES else None
                explode = enc.get("explode") if isinstance(enc.get("explode"), bool) else None
                ctype = enc.get("contentType") if isinstance(enc.get("contentType"), str) else None
                params.add(str(prop), "body", sub, required=prop in needed and not read_only, style=style,
                           explode=explode, allow_reserved=enc.get("allowReserved") is True,
                           content_type=ctype)
            return
        params.add("", "body", schema, required=required, description=description)

    def responses(self, node: Any, pointer: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]], dict[str, str]]:
        if node is None:
            return None, [], {}
        responses = self.obj(node, pointer, "'responses'")
        codes: dict[str, str] = {}
        chosen: tuple[str, dict[str, Any], str] | None = None
        fallback: tuple[str, dict[str, Any], str] | None = None
        for code, raw in responses.items():
            rp = f"{pointer}/{escape(str(code))}"
            if str(code).startswith("x-"):
                continue
            resp = self.obj(raw, rp, "a response")
            codes[str(code)] = clean_text(resp.get("description"))
            if str(code).startswith("2") and chosen is None and self._has_json(resp):
                chosen = (str(code), resp, rp)
            elif str(code) == "default" and self._has_json(resp):
                fallback = (str(code), resp, rp)
        pick = chosen or fallback
        if pick is None:
            return None, [], codes
        code, resp, rp = pick
        status = int(code) if code.isdigit() else None
        if self.swagger:
            schema = self.refs.schema(resp.get("schema"), f"{rp}/schema") if "schema" in resp else None
            ex = resp.get("examples")
            found = [{"args": {}, "response": v, "status": status} for k, v in ex.items()
                     if isinstance(k, str) and "json" in k] if isinstance(ex, dict) else []
            return schema if isinstance(schema, dict) else None, found, codes
        content = resp["content"]
        media = _pick_media([m for m in content if isinstance(content[m], dict)])
        entry = content[media]
        schema = self.refs.schema(entry["schema"], f"{rp}/content/{escape(media)}/schema") \
            if "schema" in entry else None
        examples: list[dict[str, Any]] = []
        if "example" in entry:
            examples.append({"args": {}, "response": entry["example"], "status": status})
        if isinstance(entry.get("examples"), dict):
            for key, ex in entry["examples"].items():
                ex, _ = self.refs.follow(ex, f"{rp}/content/{escape(media)}/examples/{escape(str(key))}")
                if isinstance(ex, dict) and "value" in ex:
                    examples.append(_example(ex, status))
        if isinstance(schema, dict) and "example" in schema and not examples:
            examples.append({"args": {}, "response": schema["example"], "status": status})
        return schema if isinstance(schema, dict) else None, examples, codes

    def _has_json(self, resp: dict[str, Any]) -> bool:
        if self.swagger:
            return "schema" in resp
        content = resp.get("content")
        return isinstance(content, dict) and any(isinstance(v, dict) and _JSON_MEDIA.match(str(k))
                                                 for k, v in content.items())

    def security(self, op: dict[str, Any], pointer: str) -> list[list[str]]:
        node = op.get("security", self.doc.get("security"))
        if not isinstance(node, list):
            return []
        out: list[list[str]] = []
        for req in node:
            if isinstance(req, dict):
                out.append([str(k) for k in req])
        return [r for r in out if r]


def _example(ex: dict[str, Any], status: int | None) -> dict[str, Any]:
    """A Tool example from an OpenAPI Example Object. ``x-atc-args``, ``x-atc-program`` and
    ``x-atc-question`` (written by ``atc probe``) carry the call that produced the response."""
    args = ex.get("x-atc-args")
    out: dict[str, Any] = {"args": args if isinstance(args, dict) else {}, "response": ex["value"], "status": status}
    for key in ("program", "question"):
        if isinstance(ex.get(f"x-atc-{key}"), str) and ex[f"x-atc-{key}"]:
            out[key] = ex[f"x-atc-{key}"]
    return out


def _flag(value: Any) -> bool:
    """A boolean field, tolerating specs that write ``"true"``/``"false"`` as strings."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return value is True


def _pick_media(media_types: list[str]) -> str:
    """JSON first, then form encodings, then whatever comes first."""
    for m in media_types:
        if _JSON_MEDIA.match(m):
            return m
    for m in media_types:
        if m in (_FORM, _MULTIPART):
            return m
    return media_types[0]


def _read_only_mark(op: dict[str, Any]) -> bool | None:
    """The operation's own marking (``x-atc-read-only: true|false``, ``protocols.writes``)."""
    value = op.get(READ_ONLY_EXTENSION)
    return value if isinstance(value, bool) else None
