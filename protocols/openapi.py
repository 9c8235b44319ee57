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

from protocols.building import ParamSet, UniqueNames, clean_text, collection_slug, tool_name_for
from protocols.errors import ProtocolError
from protocols.model import Collection, SecurityScheme, Tool
from protocols.refs import Resolver, escape, unshare

__all__ = ["OpenAPILoader", "METHODS"]

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
_JSON_MEDIA = re.compile(r"^application/([\w.+-]*\+)?json\b|^\*/\*$|^text/json\b", re.I)
_FORM = "application/x-www-form-urlencoded"
_MULTIPART = "multipart/form-data"
_SWAGGER_PARAM_KEYS = ("type", "format", "items", "enum", "default", "minimum", "maximum", "pattern",
                       "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "collectionFormat")


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
        self.refs = Resolver(doc, source)
        self.names = UniqueNames()

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
        return Collection(
            name=cname, tools=tools, description=clean_text(info.get("description")) or title,
            source=self.source, source_format=self.fmt, servers=servers, security_schemes=schemes,
            version=str(info["version"]) if isinstance(info.get("version"), (str, int, float)) else "",
        )

    def servers(self) -> list[str]:
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
            return [base.rstrip("/")] if base else []
        out: list[str] = []
        servers = self.doc.get("servers")
        if not isinstance(servers, list):
            return out
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
            params.add(wire, location, self.param_schema(param, ppointer), required=_flag(param.get("required")) or
                       location == "path", description=clean_text(param.get("description")))
        if form_params:
            body_media = _MULTIPART if consumes == _MULTIPART else _FORM
        if not self.swagger and op.get("requestBody") is not None:
            body_media = self.request_body(params, op["requestBody"], f"{pointer}/requestBody")
        params.ensure_path_params(path)
        response, examples, codes = self.responses(op.get("responses"), f"{pointer}/responses")
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
        )

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

    def param_schema(self, p: dict[str, Any], pointer: str) -> dict[str, Any]:
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
        self.body(params, entry.get("schema"), _flag(body.get("required")), clean_text(body.get("description")),
                  media, f"{pointer}/content/{escape(media)}/schema")
        return media

    def body(self, params: ParamSet, raw: Any, required: bool, description: str, media: str,
             pointer: str) -> None:
        """Object bodies in JSON or form encoding become one parameter per property; others one ``body``."""
        schema = self.refs.schema(raw, pointer) if raw is not None else {}
        schema = schema if isinstance(schema, dict) else {}
        props = schema.get("properties")
        structured = _JSON_MEDIA.match(media) or media in (_FORM, _MULTIPART)
        if structured and isinstance(props, dict) and props and schema.get("type", "object") == "object":
            needed_raw = schema.get("required")
            needed = needed_raw if isinstance(needed_raw, list) else []
            for prop, sub in props.items():
                params.add(str(prop), "body", sub, required=prop in needed)
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
