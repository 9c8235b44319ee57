"""ToolBench / RapidAPI tool descriptions -> a ``Collection``.

Three shapes are accepted:

- a single tool file: ``{"tool_name", "tool_description", "home_url"?, "api_list": [{"name", "url",
  "description", "method", "required_parameters", "optional_parameters", ...}]}``;
- a folder tree of such files (``<Category>/<tool>.json``; :func:`load_tree`);
- a query file (StableToolBench ``solvable_queries``): a list of queries whose ``api_list`` entries
  carry ``category_name``/``tool_name``/``api_name``; the collection is the union of distinct APIs.

ToolBench has no parameter locations: a parameter named in the URL template goes in the path,
the rest in the query string for GET and in the body otherwise. Tool names follow ToolBench's own
convention, ``<api>_for_<tool>``, made into a Python identifier.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from protocols.building import ParamSet, UniqueNames, clean_text, collection_slug
from protocols.errors import ProtocolError
from protocols.model import Collection, Tool, python_identifier, snake_case

__all__ = ["ToolBenchLoader", "load_tree", "template_schema", "TYPE_MAP"]

#: ToolBench parameter types -> JSON Schema.
TYPE_MAP: dict[str, dict[str, Any]] = {
    "STRING": {"type": "string"},
    "NUMBER": {"type": "number"},
    "INTEGER": {"type": "integer"},
    "INT": {"type": "integer"},
    "FLOAT": {"type": "number"},
    "BOOLEAN": {"type": "boolean"},
    "BOOL": {"type": "boolean"},
    "ENUM": {"type": "string"},
    "ARRAY": {"type": "array"},
    "LIST": {"type": "array"},
    "OBJECT": {"type": "object"},
    "DATE (YYYY-MM-DD)": {"type": "string", "format": "date"},
    "TIME (24-HOUR HH:MM)": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"},
    "GEOPOINT (LATITUDE, LONGITUDE)": {"type": "string"},
    "BINARY": {"type": "string", "format": "binary"},
    "FILE": {"type": "string", "format": "binary"},
    "CREDENTIALS": {"type": "string"},
}
_TEMPLATE_LEAVES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "nonetype": "null"}
_LIST_OF = re.compile(r"^list of (\w+)(?: with length \d+)?$", re.I)
_URL_PARAM = re.compile(r"\{([^{}/]+)\}")


def template_schema(template: Any, depth: int = 0) -> dict[str, Any] | None:
    """A JSON Schema from a ToolBench ``template_response`` type skeleton (``"str"`` -> string...)."""
    if depth > 24:
        return {}
    if isinstance(template, dict):
        return {"type": "object",
                "properties": {str(k): template_schema(v, depth + 1) or {} for k, v in template.items()}}
    if isinstance(template, list):
        items = template_schema(template[0], depth + 1) if template else None
        return {"type": "array", "items": items} if items else {"type": "array"}
    if isinstance(template, bool):
        return {"type": "boolean"}
    if isinstance(template, int):
        return {"type": "integer"}
    if isinstance(template, float):
        return {"type": "number"}
    if template is None:
        return {"type": "null"}
    text = str(template).strip()
    leaf = _TEMPLATE_LEAVES.get(text.lower())
    if leaf:
        return {"type": leaf}
    if text.lower() == "empty list":
        return {"type": "array"}
    m = _LIST_OF.match(text)
    if m:
        inner = _TEMPLATE_LEAVES.get(m.group(1).lower())
        return {"type": "array", "items": {"type": inner}} if inner else {"type": "array"}
    if text[:1] in "{[":
        try:
            return template_schema(json.loads(text), depth + 1)
        except ValueError:
            pass
    return {"type": "string"}


def _param_schema(p: dict[str, Any]) -> dict[str, Any]:
    if isinstance(p.get("schema"), dict):  # ToolFlow's variant carries OpenAPI-style schemas
        schema = dict(p["schema"])
    else:
        kind = str(p.get("type") or "STRING").strip().upper()
        schema = dict(TYPE_MAP.get(kind, {"type": "string"}))
    if "default" in p and p["default"] not in (None, ""):
        schema["default"] = p["default"]
    if isinstance(p.get("enum"), list):
        schema["enum"] = p["enum"]
    return schema


class ToolBenchLoader:
    """The built-in loader for ToolBench tool files and query files."""

    name = "toolbench"

    def detect(self, doc: Any, path: str | None = None) -> bool:
        if isinstance(doc, dict):
            return isinstance(doc.get("api_list"), list) and ("tool_name" in doc or "name" in doc)
        return (isinstance(doc, list) and bool(doc) and isinstance(doc[0], dict)
                and isinstance(doc[0].get("api_list"), list))

    def load(self, doc: Any, *, source: str, name: str | None = None) -> Collection:
        build = _Build(source)
        if isinstance(doc, dict):
            build.add_tool_file(doc, "", "")
            title = clean_text(doc.get("tool_name")) or clean_text(doc.get("name"))
            cname = name or collection_slug(title) or "toolbench"
            description = clean_text(doc.get("tool_description"))
        elif isinstance(doc, list):
            build.add_query_file(doc)
            cname = name or "toolbench"
            description = "ToolBench APIs"
        else:
            raise ProtocolError("a ToolBench document is a tool object or a list of queries", source=source, pointer="")
        return build.collection(cname, description)


class _Build:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tools: list[Tool] = []
        self.names = UniqueNames()
        self.seen: set[tuple[str, str, str]] = set()

    def err(self, message: str, pointer: str) -> ProtocolError:
        return ProtocolError(message, source=self.source, pointer=pointer)

    def collection(self, cname: str, description: str) -> Collection:
        if not self.tools:
            raise self.err("no operations: no API in any 'api_list'", "")
        for t in self.tools:
            t.collection = cname
        servers = sorted({s for t in self.tools for s in t.servers})
        return Collection(name=cname, tools=self.tools, description=description, source=self.source,
                          source_format="toolbench", servers=servers if len(servers) == 1 else [])

    def add_tool_file(self, doc: dict[str, Any], category: str, pointer: str) -> None:
        tool_name = clean_text(doc.get("tool_name")) or clean_text(doc.get("name"))
        if not tool_name:
            raise self.err("a ToolBench tool needs a 'tool_name'", f"{pointer}/tool_name")
        apis = doc.get("api_list")
        if not isinstance(apis, list):
            raise self.err("'api_list' must be a list", f"{pointer}/api_list")
        home = clean_text(doc.get("home_url"))
        category = clean_text(doc.get("category_name")) or category
        for i, api in enumerate(apis):
            at = f"{pointer}/api_list/{i}"
            if not isinstance(api, dict):
                raise self.err("an api_list entry must be an object", at)
            self.add_api(api, tool_name, category, at, home)

    def add_query_file(self, doc: list[Any]) -> None:
        for qi, query in enumerate(doc):
            if not isinstance(query, dict):
                raise self.err("a query must be an object", f"/{qi}")
            apis = query.get("api_list")
            if not isinstance(apis, list):
                raise self.err("a query needs an 'api_list' list", f"/{qi}/api_list")
            for ai, api in enumerate(apis):
                at = f"/{qi}/api_list/{ai}"
                if not isinstance(api, dict):
                    raise self.err("an api_list entry must be an object", at)
                tool_name = clean_text(api.get("tool_name"))
                if not tool_name:
                    raise self.err("an api_list entry needs a 'tool_name'", f"{at}/tool_name")
                self.add_api(api, tool_name, clean_text(api.get("category_name")), at, "")

    def add_api(self, api: dict[str, Any], tool_name: str, category: str, at: str, home: str) -> None:
        api_name = clean_text(api.get("api_name")) or clean_text(api.get("name"))
        if not api_name:
            raise self.err("an API needs a 'name' (or 'api_name')", f"{at}/name")
        key = (category, tool_name, api_name)
        if key in self.seen:
            return
        self.seen.add(key)
        method = (clean_text(api.get("method")) or "GET").upper()
        if not re.fullmatch(r"[A-Z]+", method):
            raise self.err(f"method {method!r} is not an HTTP method", f"{at}/method")
        url = clean_text(api.get("url"))
        parts = urlsplit(url) if url else None
        path = parts.path if parts and parts.path else "/" + (snake_case(api_name) or "api")
        if not path.startswith("/"):
            path = "/" + path
        server = f"{parts.scheme}://{parts.netloc}" if parts and parts.scheme and parts.netloc else home.rstrip("/")
        in_path = set(_URL_PARAM.findall(path))
        params = ParamSet()
        for field, required in (("required_parameters", True), ("optional_parameters", False)):
            plist = api.get(field) or []
            if not isinstance(plist, list):
                raise self.err(f"'{field}' must be a list", f"{at}/{field}")
            for pi, p in enumerate(plist):
                if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not p["name"]:
                    raise self.err("a parameter must be an object with a 'name'", f"{at}/{field}/{pi}")
                wire = p["name"]
                given = p.get("in")
                if wire in in_path:
                    location = "path"
                elif given in ("query", "header", "path", "cookie", "body"):
                    location = str(given)
                else:
                    location = "query" if method == "GET" else "body"
                params.add(wire, location, _param_schema(p), required=required or location == "path",
                           description=clean_text(p.get("description")))
        params.ensure_path_params(path)
        response = template_schema(api["template_response"]) if "template_response" in api else None
        if isinstance(api.get("schema"), dict) and api["schema"]:
            response = api["schema"]
        examples: list[dict[str, Any]] = []
        test = api.get("test_endpoint")
        if test not in (None, "", {}, []):
            examples.append({"args": {}, "response": test, "status": None})
        self.tools.append(Tool(
            name=self.names.take(python_identifier(f"{api_name}_for_{tool_name}")),
            collection="", method=method, path=path,
            description=clean_text(api.get("api_description")) or clean_text(api.get("description")),
            category=category, group=tool_name, parameters=params.schema(), bindings=params.bindings,
            body_media_type="application/json" if any(b.location == "body" for b in params.bindings.values())
            else None,
            response_schema=response, examples=examples, servers=[server] if server else [],
        ))


def load_tree(root: Path, *, source: str, name: str | None = None) -> Collection:
    """A folder of ToolBench tool files, ``<Category>/<tool>.json`` (any depth; the parent folder
    names the category). Files that are not tool files (response examples, notes) are skipped."""
    build = _Build(source)
    files = sorted(p for p in root.rglob("*.json") if p.is_file())
    for path in files:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ProtocolError(f"not a readable JSON tool file: {exc}", source=str(path)) from exc
        if not (isinstance(doc, dict) and isinstance(doc.get("api_list"), list) and "tool_name" in doc):
            continue
        category = path.parent.name if path.parent != root else ""
        build.source = str(path)
        build.add_tool_file(doc, category, "")
    build.source = source
    return build.collection(name or collection_slug(root.name) or "toolbench", f"ToolBench tools under {root.name}")
