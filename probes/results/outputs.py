"""What a probe leaves behind: the documented collection, an OpenAPI 3.1 document, a Markdown page
with the dependency graph, and the JSON report.

- ``learnt_collection`` copies a collection with what probing learnt written into its tools:
  response schema, examples (with the arguments and the example program), the status codes seen,
  the parameters the API proved required, and each parameter's working value as its ``example``.
  ``--update`` stores it; the OpenAPI writer starts from it.
- ``openapi_document`` writes the collection as OpenAPI 3.1 that ``atc tools import`` reads back
  into the same tools (names, parameters, response schemas, examples: tested). Per-operation
  probe details go in ``x-atc-probe``; an example's arguments in ``x-atc-args``.
- ``markdown_page`` is for people: one section per tool (what it does, parameters, an example call
  and a condensed response, what it depends on) and the dependency graph as a Mermaid diagram.
- ``mcp_tools_document`` writes a collection of an MCP server as a ``tools/list`` result with the
  learnt schemas and the server it came from (``mcpServer``: command, args, env names, or URL), which
  ``atc tools import`` reads back into tools that call that server again.
- ``write_outputs`` writes all three into a directory, each file atomically, so a reader (or an
  interrupted run) never sees half a file.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from atc.config import atc_home
from probes.results.components import factor
from probes.results.report import ProbeReport, ToolReport
from protocols.files import atomic_write
from protocols.model import Collection, Tool
from protocols.render import field_lines, purpose, type_label
from protocols.store import Store

__all__ = ["learnt_collection", "openapi_document", "mcp_tools_document", "markdown_page", "write_outputs",
           "mermaid_graph", "publish", "WRITE_EVERY"]

#: Seconds between two rewrites of the ``--out`` files while probing.
WRITE_EVERY = 1.0


def _learnt_tool(tool: Tool, report: ToolReport | None) -> Tool:
    learnt = copy.deepcopy(tool)
    if report is None or report.status != "documented":
        return learnt
    learnt.response_schema = report.response_schema
    learnt.examples = [{k: v for k, v in ex.items()} for ex in report.examples]
    for code in report.status_codes:
        learnt.status_codes.setdefault(code, "seen while probing")
    required = list(learnt.parameters.get("required") or [])
    required += [p for p in report.required_learned if p not in required]
    learnt.parameters["required"] = required
    if report.examples:
        props = learnt.parameters.get("properties") or {}
        for name, value in (report.examples[0].get("args") or {}).items():
            if isinstance(props.get(name), dict) and "example" not in props[name]:
                props[name]["example"] = value
    return learnt


def learnt_collection(collection: Collection, report: ProbeReport) -> Collection:
    """``collection`` with everything probing learnt written into its tools."""
    by_name = {t.name: t for t in report.tools}
    out = copy.copy(collection)
    out.tools = [_learnt_tool(t, by_name.get(t.name)) for t in collection.tools]
    return out


# -- OpenAPI 3.1 ------------------------------------------------------------------------------------


def _parameter(tool: Tool, pname: str, schema: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    binding = tool.bindings.get(pname)
    location = binding.location if binding else ("body" if tool.body_media_type else "query")
    wire = binding.name if binding else pname
    return location, wire, schema


def _operation(tool: Tool, report: ToolReport | None) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": tool.name}
    if tool.description:
        op["summary"] = purpose(tool, 200)
        op["description"] = tool.description
    if tool.category:
        op["tags"] = [tool.category]
    if tool.deprecated:
        op["deprecated"] = True
    required = set(tool.required)
    params: list[dict[str, Any]] = []
    body_props: dict[str, Any] = {}
    body_required: list[str] = []
    whole_body: dict[str, Any] | None = None
    for pname, raw in tool.properties.items():
        schema = dict(raw) if isinstance(raw, dict) else {}
        location, wire, _ = _parameter(tool, pname, schema)
        if location == "body":
            if wire == "":
                whole_body = schema
            else:
                body_props[wire] = schema
                if pname in required:
                    body_required.append(wire)
            continue
        description = schema.pop("description", None)
        example = schema.pop("example", None)
        param: dict[str, Any] = {"name": wire, "in": location, "required": pname in required or location == "path",
                                 "schema": schema}
        if isinstance(description, str) and description:
            param["description"] = description
        if example is not None:
            param["example"] = example
        params.append(param)
    if params:
        op["parameters"] = params
    if whole_body is not None or body_props:
        media = tool.body_media_type or "application/json"
        body_schema = whole_body if whole_body is not None else {
            "type": "object", "properties": body_props, **({"required": body_required} if body_required else {})}
        op["requestBody"] = {"required": bool(body_required) or (whole_body is not None and bool(required)),
                             "content": {media: {"schema": body_schema}}}
    op["responses"] = _responses(tool, report)
    if tool.security:
        op["security"] = [{name: [] for name in alt} for alt in tool.security]
    if report is not None:
        op["x-atc-probe"] = {"status": report.status, "reason": report.reason, "calls": report.calls,
                             "samples": report.samples,
                             "round": report.round, "depends_on": report.depends_on, "mapping": report.mapping,
                             "required_learned": report.required_learned, "status_codes": report.status_codes}
    return op


def _responses(tool: Tool, report: ToolReport | None) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    ok_code: str | None = None
    if tool.response_schema is not None or tool.examples:
        statuses = [ex.get("status") for ex in tool.examples if isinstance(ex.get("status"), int)]
        ok_code = str(statuses[0]) if statuses else next(
            (c for c in tool.status_codes if c.startswith("2")), "200")
        content: dict[str, Any] = {}
        if tool.response_schema is not None:
            content["schema"] = tool.response_schema
        examples: dict[str, Any] = {}
        for i, ex in enumerate(tool.examples[:5], 1):
            entry: dict[str, Any] = {"value": ex.get("response")}
            args = ex.get("args") or {}
            if args:
                entry["summary"] = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())[:200]
                entry["x-atc-args"] = args
            if ex.get("program"):
                entry["x-atc-program"] = ex["program"]
            if ex.get("question"):
                entry["x-atc-question"] = ex["question"]
            examples[f"example{i}"] = entry
        if examples:
            content["examples"] = examples
        description = tool.status_codes.get(ok_code) or "OK"
        responses[ok_code] = {"description": description, "content": {"application/json": content}}
    for code, description in tool.status_codes.items():
        if code not in responses:
            responses[code] = {"description": description or "(no description)"}
    if not responses:
        responses["default"] = {"description": "not documented"}
    return responses


def openapi_document(collection: Collection, report: ProbeReport | None = None) -> dict[str, Any]:
    """An OpenAPI 3.1 document of ``collection`` (pass the ``learnt_collection``)."""
    by_name = {t.name: t for t in report.tools} if report else {}
    servers = collection.servers or ([report.base_url] if report and report.base_url else [])
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": collection.name, "version": collection.version or "1.0",
                 "description": collection.description or f"{collection.name}, documented by atc probe"},
    }
    if servers:
        doc["servers"] = [{"url": s} for s in servers]
    paths: dict[str, dict[str, Any]] = {}
    for tool in collection.tools:
        item = paths.setdefault(tool.path if tool.path.startswith("/") else "/" + tool.path, {})
        method = tool.method.lower()
        if method in item:
            continue  # two tools on one method and path cannot both be expressed in OpenAPI
        item[method] = _operation(tool, by_name.get(tool.name))
    doc["paths"] = paths
    schemes: dict[str, Any] = {}
    for name, scheme in collection.security_schemes.items():
        if scheme.type == "apiKey":
            schemes[name] = {"type": "apiKey", "in": scheme.location or "header", "name": scheme.param or name}
        elif scheme.type == "http":
            schemes[name] = {"type": "http", "scheme": scheme.scheme or "bearer"}
        else:
            continue
        if scheme.description:
            schemes[name]["description"] = scheme.description
    if schemes:
        doc["components"] = {"securitySchemes": schemes}
    factor(doc)  # named schemas once, in components, as the spec had them
    if report is not None:
        doc["x-atc-probe"] = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "base_url": report.base_url,
                              "mode": report.mode, "calls": report.calls, "documented": report.count("documented"),
                              "failed": report.count("failed"), "skipped": report.count("skipped")}
    return doc


# -- Markdown ---------------------------------------------------------------------------------------


def mermaid_graph(report: ProbeReport) -> str:
    """The dependency graph of the tools that were probed (a request was sent for them; the ones
    that failed dashed), and an edge labelled with the parameter from each tool to the tools its
    arguments (and filters) came from. Tools never probed are not in it."""
    probed = [t for t in report.tools if t.status == "documented" or t.calls > 0 or t.cached > 0]
    lines = ["```mermaid", "graph LR"]
    lines += [f"  {tool.name}" for tool in probed]
    if not probed:
        lines.append("  nothing_probed[no tool was probed]")
    for tool in report.tools:
        if tool.status != "documented":
            continue
        for param, where in [*tool.mapping.items(), *tool.filters.items()]:
            source = where.get("tool") if isinstance(where, dict) else None
            if isinstance(source, str) and source != tool.name:
                lines.append(f"  {source} -->|{param}| {tool.name}")
    undone = [t.name for t in probed if t.status != "documented"]
    if undone:
        lines.append("  classDef notdone stroke-dasharray: 5 5,color:#888")
        lines.append(f"  class {','.join(undone)} notdone")
    lines.append("```")
    return "\n".join(lines)


def _json_block(value: Any, limit: int = 1500) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=1)
    if len(text) > limit:
        text = json.dumps(value, ensure_ascii=False)[:limit] + " ..."
    return f"```json\n{text}\n```"


def _md(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def markdown_page(collection: Collection, report: ProbeReport) -> str:
    """A page a person can read: summary, dependency graph, then one section per tool."""
    by_name = {t.name: t for t in report.tools}
    documented = report.count("documented")
    head = [f"# {collection.name}", "",
            f"Probed by `atc probe` ({report.mode}) at {report.base_url or ', '.join(collection.servers) or '?'}: "
            f"**{documented} of {len(report.tools)} tools documented** with {report.calls} requests "
            f"({report.cached} answers reused from the cache); {report.count('failed')} failed, "
            f"{report.count('skipped')} skipped.", ""]
    if collection.description:
        head += [collection.description, ""]
    head += ["## Dependencies", "", "Which tool's response supplies which argument of another.", "",
             mermaid_graph(report), ""]
    body: list[str] = []
    for tool in collection.tools:
        rep = by_name.get(tool.name)
        status = rep.status if rep else "skipped"
        if status != "documented":
            continue  # listed once, in "Not documented" below
        body += [f"## {tool.name}", "", f"`{tool.method.upper()} {tool.path}` — **{status}**"
                 + (f" (round {rep.round}, {rep.calls} request{'s' if rep.calls != 1 else ''})"
                    if rep and status == "documented" else ""), ""]
        if tool.description:
            body += [_md(tool.description), ""]
        if tool.properties:
            body += ["| parameter | in | type | required | example |", "|---|---|---|---|---|"]
            for pname, schema in tool.properties.items():
                schema = schema if isinstance(schema, dict) else {}
                binding = tool.bindings.get(pname)
                where = binding.location if binding else "query"
                example = schema.get("example")
                shown = _md(json.dumps(example, ensure_ascii=False))[:60] if example is not None else ""
                body.append(f"| `{pname}` | {where} | {_md(type_label(schema))} | "
                            f"{'yes' if pname in tool.required else ''} | {shown} |")
            body.append("")
        if rep and rep.depends_on:
            sources = [f"`{p}` <- `{w['tool']}` `{w.get('field')}`" for p, w in rep.mapping.items()
                       if isinstance(w, dict) and w.get("tool")]
            body += [f"Depends on: {', '.join(f'`{d}`' for d in rep.depends_on)} ({'; '.join(sources)})", ""]
        if rep and rep.required_learned:
            body += [f"The API requires {', '.join(f'`{p}`' for p in rep.required_learned)} "
                     "although the spec says optional.", ""]
        if tool.examples and status == "documented":
            ex = tool.examples[0]
            if ex.get("question"):
                body += [f"Question: {_md(ex['question'])}", ""]
            if ex.get("program"):
                body += ["Example:", "", f"```python\n{str(ex['program']).rstrip()}\n```", ""]
            body += ["Response (condensed):", "", _json_block(ex.get("response")), ""]
        if tool.response_schema and status == "documented":
            fields = field_lines(tool.response_schema)
            if fields:
                body += ["<details><summary>Response fields</summary>", "", "```"] + fields[:200] + \
                        ["```", "", "</details>", ""]
        if rep and rep.status_codes:
            body += ["Status codes seen: " + ", ".join(f"{c} ({n}x)" for c, n in rep.status_codes.items()), ""]
    return "\n".join(head + body + _undocumented(collection, by_name)).rstrip() + "\n"


def _undocumented(collection: Collection, by_name: dict[str, ToolReport]) -> list[str]:
    """The tools not documented, in one short list: one line per reason, naming its tools."""
    groups: dict[tuple[str, str], list[str]] = {}
    for tool in collection.tools:
        rep = by_name.get(tool.name)
        status = rep.status if rep else "skipped"
        if status == "documented":
            continue
        reason = _md(rep.reason if rep and rep.reason else "not probed")
        reason = reason if len(reason) <= 160 else reason[:157] + "..."
        groups.setdefault((status, reason), []).append(tool.name)
    if not groups:
        return []
    total = sum(len(v) for v in groups.values())
    lines = ["## Not documented", "", f"{total} tool{'s' if total != 1 else ''}, by what stopped them.", ""]
    for (status, reason), names in groups.items():
        shown = ", ".join(f"`{n}`" for n in names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        lines.append(f"- **{status}** ({len(names)}): {reason} -- {shown}")
    return [*lines, ""]


# -- files ------------------------------------------------------------------------------------------


def _dump(doc: Any) -> bytes:
    return (json.dumps(doc, ensure_ascii=False, indent=1, default=str) + "\n").encode()


def mcp_tools_document(collection: Collection, report: ProbeReport | None = None) -> dict[str, Any]:
    """An MCP collection as a ``tools/list`` result: each tool under its server-side name, its
    parameters under the server's argument names, the response schema as ``outputSchema`` (the
    declared one with what was learnt merged in; MCP wants an object there, any other shape goes
    in ``x-atc-response-schema``), its annotations, its examples with their programs
    (``x-atc-examples``), how probing went (``x-atc-probe``: a tool not documented says why), and
    ``mcpServer``: how to reach the server (never an environment value)."""
    by_name = {t.name: t for t in report.tools} if report is not None else {}
    tools = []
    for tool in collection.tools:
        wire = {k: (tool.bindings[k].name if k in tool.bindings else k) for k in tool.properties}
        schema = dict(tool.parameters)
        schema["properties"] = {wire[k]: v for k, v in tool.properties.items()}
        schema["required"] = [wire.get(k, k) for k in tool.required]
        schema.pop("additionalProperties", None)
        entry: dict[str, Any] = {"name": tool.path or tool.name, "description": tool.description, "inputSchema": schema}
        if isinstance(tool.response_schema, dict):
            key = "outputSchema" if tool.response_schema.get("type") == "object" else "x-atc-response-schema"
            entry[key] = tool.response_schema
        if tool.annotations:
            entry["annotations"] = tool.annotations
        if tool.examples:
            entry["x-atc-examples"] = [{k: ex[k] for k in ("args", "response", "program", "question") if k in ex}
                                       for ex in tool.examples]
        found = by_name.get(tool.name)
        if found is not None:
            entry["x-atc-probe"] = {"status": found.status, "reason": found.reason, "calls": found.calls,
                                    "depends_on": found.depends_on, "schema_notes": found.schema_notes}
        tools.append(entry)
    doc: dict[str, Any] = {"tools": tools}
    if collection.mcp_server is not None:
        doc["mcpServer"] = collection.mcp_server.to_dict()
    return doc


def write_outputs(out: Path | str, collections: list[Collection], report: ProbeReport) -> dict[str, str]:
    """Write ``openapi.json`` (``openapi-<name>.json`` per collection when there are several; for
    the collection of an MCP server ``tools.json``/``tools-<name>.json``), ``probe.md`` and
    ``report.json`` into ``out``; returns what was written, by kind."""
    folder = Path(out).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    pages: list[str] = []
    for collection in collections:
        learnt = learnt_collection(collection, report)
        kind = "mcp" if all(t.method == "MCP" for t in collection.tools) else "openapi"
        stem = "tools" if kind == "mcp" else "openapi"
        name = f"{stem}.json" if len(collections) == 1 else f"{stem}-{collection.name}.json"
        path = folder / name
        doc = mcp_tools_document(learnt, report) if kind == "mcp" else openapi_document(learnt, report)
        atomic_write(path, _dump(doc), mode=0o644)
        written[kind if len(collections) == 1 else f"{kind}:{collection.name}"] = str(path)
        own = {t.name for t in collection.tools}
        part = ProbeReport(tools=[t for t in report.tools if t.name in own], calls=report.calls,
                           collection=collection.name, mode=report.mode, base_url=report.base_url,
                           cached=report.cached)
        pages.append(markdown_page(learnt, part))
    markdown = folder / "probe.md"
    atomic_write(markdown, "\n".join(pages).encode(), mode=0o644)
    written["markdown"] = str(markdown)
    written["report"] = str(folder / "report.json")
    doc = report.to_dict()
    doc["outputs"] = written
    atomic_write(folder / "report.json", _dump(doc), mode=0o644)
    return written


def publish(report: ProbeReport, collections: list[Collection], out: str | Path | None, *,
            update: bool = False) -> ProbeReport:
    """``report`` with the ``--out`` files written from it and, with ``update``, what it learnt
    written into the store (``report.outputs`` says where)."""
    if out is not None:
        report.outputs = write_outputs(out, collections, report)
    if update:
        store = Store(atc_home())
        for collection in collections:
            store.add(learnt_collection(collection, report))
        report.outputs["store"] = ", ".join(c.name for c in collections)
    return report
