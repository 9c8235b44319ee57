"""A workflow orchestrator on 127.0.0.1 in the image of Prefect 3's REST API: work pools, flows,
deployments and flow runs, with the spec of ``tests/support/apis/orchestrator_spec.py`` (FastAPI-style
OpenAPI 3.1: ``$ref``'d filter models wrapped in ``anyOf: [X, null]``).

What it does the way such a server does, for tests of rendering, validation and probing:

- **reads are POSTs with nested filter bodies**: ``POST /api/flow_runs/filter`` with
  ``{"flow_runs": {"state": {"type": {"any_": ["FAILED"]}}}, "work_pools": {"name": {"any_":
  ["precious-pool"]}}, "sort": "START_TIME_DESC", "limit": 5}`` filters runs by their own fields
  and by the flow, deployment and work pool they belong to (``operator`` ``and_``/``or_``,
  criteria ``any_``, ``not_any_``, ``like_``, ``all_``, ``is_null_``, ``before_``/``after_``);
  ``.../count`` counts the same way;
- **every body is validated against the spec** (jsonschema over the document's own components):
  a wrong shape is a ``422`` in FastAPI's ``{"detail": [{"loc": ["body", ...], "msg", "type"}]}``
  form, unknown fields included (the filter models forbid them);
- **names in paths**: ``/api/work_pools/{name}``, ``/api/flows/name/{name}``,
  ``/api/deployments/name/{flow_name}/{deployment_name}``;
- **upsert-like POSTs**: ``POST /api/flows/`` returns the existing flow with 200 when the name is
  taken, else creates it (201); ``POST /api/flow_runs/`` and ``.../create_flow_run`` return the run
  that has the same flow and ``idempotency_key``; ``POST /api/work_pools/`` refuses a taken name
  (409); ``PATCH``/``DELETE /api/work_pools/{name}`` answer 204.

Use::

    with OrchestratorAPI() as api:
        collection = load_data(api.spec())          # or load_spec(api.write_spec(tmp_path / "o.json"))
        ...                                          # api.requests: (method, path, body) of each request

``data`` is the state (deep copies of ``WORK_POOLS``, ``FLOWS``, ``DEPLOYMENTS``, ``FLOW_RUNS``); ids
are fixed uuids (``ident(kind, name)``), so tests can name them.
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from tests.support.apis.orchestrator_spec import orchestrator_spec
from tests.support.fakes.serving import LoopbackServer, QuietHandler

__all__ = ["OrchestratorAPI", "ident", "WORK_POOLS", "FLOWS", "DEPLOYMENTS", "FLOW_RUNS"]


def ident(kind: str, name: str) -> str:
    """The fixed id of a seeded (or created) object: a uuid derived from its kind and name."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"orchestrator/{kind}/{name}"))


def _pool(name: str, kind: str, paused: bool = False, limit: int | None = None) -> dict[str, Any]:
    return {"id": ident("work_pool", name), "created": "2026-01-02T09:00:00Z", "name": name,
            "description": f"The {name}.", "type": kind, "is_paused": paused, "concurrency_limit": limit}


def _flow(name: str, tags: list[str]) -> dict[str, Any]:
    return {"id": ident("flow", name), "created": "2026-01-03T09:00:00Z", "name": name, "tags": tags}


def _deployment(flow: str, name: str, pool: str, tags: list[str]) -> dict[str, Any]:
    return {"id": ident("deployment", f"{flow}/{name}"), "name": name, "flow_id": ident("flow", flow),
            "work_pool_name": pool, "tags": tags, "parameters": {}}


def _run(name: str, flow: str, deployment: str | None, state: str, start: str | None,
         tags: list[str]) -> dict[str, Any]:
    return {"id": ident("flow_run", name), "name": name, "flow_id": ident("flow", flow),
            "deployment_id": ident("deployment", f"{flow}/{deployment}") if deployment else None,
            "state_type": state, "state_name": state.title(), "tags": tags, "idempotency_key": None,
            "parameters": {}, "start_time": start}


WORK_POOLS = [_pool("default-pool", "process"), _pool("precious-pool", "docker", limit=2),
              _pool("gpu-pool", "kubernetes", paused=True)]
FLOWS = [_flow("etl", ["nightly", "data"]), _flow("report", ["weekly"]), _flow("backup", ["nightly", "ops"]),
         _flow("adhoc", [])]
DEPLOYMENTS = [_deployment("etl", "nightly-etl", "default-pool", ["nightly"]),
               _deployment("report", "weekly-report", "precious-pool", ["weekly"]),
               _deployment("backup", "nightly-backup", "precious-pool", ["nightly", "ops"]),
               _deployment("etl", "gpu-etl", "gpu-pool", [])]
FLOW_RUNS = [
    _run("brave-otter", "etl", "nightly-etl", "COMPLETED", "2026-02-01T01:00:00Z", ["nightly"]),
    _run("calm-heron", "etl", "nightly-etl", "FAILED", "2026-02-02T01:00:00Z", ["nightly"]),
    _run("eager-lynx", "report", "weekly-report", "COMPLETED", "2026-02-03T06:00:00Z", ["weekly"]),
    _run("quiet-badger", "report", "weekly-report", "FAILED", "2026-02-10T06:00:00Z", ["weekly", "retry"]),
    _run("swift-crane", "backup", "nightly-backup", "RUNNING", "2026-02-11T02:00:00Z", ["nightly"]),
    _run("gentle-moose", "backup", "nightly-backup", "FAILED", "2026-02-12T02:00:00Z", []),
    _run("rapid-ibis", "etl", "gpu-etl", "SCHEDULED", None, []),
    _run("tiny-gecko", "adhoc", None, "CRASHED", "2026-02-05T12:00:00Z", ["manual"]),
]

#: filter model field -> the record attribute it looks at, per entity (``state`` is a nested filter)
_FIELDS = {"work_pools": {"id": "id", "name": "name", "type": "type"},
           "flows": {"id": "id", "name": "name", "tags": "tags"},
           "deployments": {"id": "id", "name": "name", "tags": "tags"},
           "flow_runs": {"id": "id", "name": "name", "tags": "tags", "start_time": "start_time",
                         "deployment_id": "deployment_id"}}
_STATE_FIELDS = {"type": "state_type", "name": "state_name"}
_SORTS = {"NAME_ASC": ("name", False), "NAME_DESC": ("name", True), "CREATED_DESC": ("created", True),
          "ID_DESC": ("id", True), "START_TIME_ASC": ("start_time", False), "START_TIME_DESC": ("start_time", True)}
DEFAULT_LIMIT = 200


def _criterion(value: Any, op: str, arg: Any) -> bool:
    if op == "any_":
        return value in arg
    if op == "not_any_":
        return value not in arg
    if op == "like_":
        return isinstance(value, str) and arg.lower() in value.lower()
    if op == "all_":
        return set(arg) <= set(value or [])
    if op == "is_null_":
        return (value is None or value == []) == bool(arg)
    if op == "before_":
        return value is not None and value <= arg
    if op == "after_":
        return value is not None and value >= arg
    return True


def _matches(record: dict[str, Any], flt: dict[str, Any] | None, fields: dict[str, str]) -> bool:
    """Whether ``record`` passes a filter model (None and empty criteria pass everything)."""
    if not flt:
        return True
    results = []
    for name, crit in flt.items():
        if name == "operator" or crit is None:
            continue
        if name == "state":
            results.append(_matches(record, crit, _STATE_FIELDS))
            continue
        value = record.get(fields[name])
        results.extend(_criterion(value, op, arg) for op, arg in crit.items() if arg is not None and op != "operator")
    if not results:
        return True
    return any(results) if flt.get("operator") == "or_" else all(results)


@dataclass
class OrchestratorAPI(LoopbackServer):
    port: int = 0
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    data: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {
        "work_pools": copy.deepcopy(WORK_POOLS), "flows": copy.deepcopy(FLOWS),
        "deployments": copy.deepcopy(DEPLOYMENTS), "flow_runs": copy.deepcopy(FLOW_RUNS)})
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _validators: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def spec(self) -> dict[str, Any]:
        return orchestrator_spec(self.url)

    def write_spec(self, path: Path) -> Path:
        path.write_text(json.dumps(self.spec(), indent=1))
        return path

    # -- the HTTP side -------------------------------------------------------------------------

    def start(self) -> OrchestratorAPI:
        api = self

        class Handler(QuietHandler):
            def _serve(self) -> None:
                split = urlsplit(self.path)
                raw = self.body()
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    self.send_json(422, {"detail": [{"loc": ["body"], "msg": "JSON decode error",
                                                     "type": "json_invalid"}]})
                    return
                with api._lock:
                    api.requests.append((self.command, split.path, body))
                    status, answer = api.answer(self.command, unquote(split.path), body)
                if status == 204:
                    self.send_response(204)
                    self.end_headers()
                else:
                    self.send_json(status, answer)

            do_GET = do_POST = do_PATCH = do_DELETE = _serve

        self._serve(Handler, self.port)
        assert self._server is not None
        self.port = self._server.server_address[1]
        return self

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        """Status and body for one request (called under the lock)."""
        parts = [p for p in path.split("/") if p]
        if parts[:1] != ["api"]:
            return 404, {"detail": "Not Found"}
        route = (method, *parts[1:])
        for pattern, handler, model in self._routes():
            if len(pattern) != len(route) or any(p != r and not p.startswith("{") for p, r in zip(pattern, route, strict=True)):
                continue
            args = {p[1:-1]: r for p, r in zip(pattern, route, strict=True) if p.startswith("{")}
            if model is not None:
                problems = self._invalid(model, body if body is not None else {})
                if problems:
                    return 422, {"detail": problems}
            return handler(args, body if body is not None else {})
        return 404, {"detail": "Not Found"}

    def _routes(self) -> list[tuple[tuple[str, ...], Any, str | None]]:
        return [
            (("POST", "work_pools"), self._create_pool, "WorkPoolCreate"),
            (("POST", "work_pools", "filter"), lambda a, b: self._read("work_pools", b),
             "Body_read_work_pools_work_pools_filter_post"),
            (("POST", "work_pools", "count"), lambda a, b: self._count("work_pools", b),
             "Body_count_work_pools_work_pools_count_post"),
            (("GET", "work_pools", "{name}"), lambda a, b: self._one("work_pools", "name", a["name"]), None),
            (("PATCH", "work_pools", "{name}"), self._update_pool, "WorkPoolUpdate"),
            (("DELETE", "work_pools", "{name}"), self._delete_pool, None),
            (("POST", "flows"), self._create_flow, "FlowCreate"),
            (("POST", "flows", "filter"), lambda a, b: self._read("flows", b), "Body_read_flows_flows_filter_post"),
            (("POST", "flows", "count"), lambda a, b: self._count("flows", b), "Body_count_flows_flows_count_post"),
            (("GET", "flows", "name", "{name}"), lambda a, b: self._one("flows", "name", a["name"]), None),
            (("GET", "flows", "{id}"), lambda a, b: self._one("flows", "id", a["id"]), None),
            (("POST", "deployments", "filter"), lambda a, b: self._read("deployments", b),
             "Body_read_deployments_deployments_filter_post"),
            (("GET", "deployments", "name", "{flow}", "{name}"), self._deployment_by_name, None),
            (("POST", "deployments", "{id}", "create_flow_run"), self._run_deployment, "DeploymentFlowRunCreate"),
            (("POST", "flow_runs"), lambda a, b: self._create_run(b), "FlowRunCreate"),
            (("POST", "flow_runs", "filter"), lambda a, b: self._read("flow_runs", b),
             "Body_read_flow_runs_flow_runs_filter_post"),
            (("POST", "flow_runs", "count"), lambda a, b: self._count("flow_runs", b),
             "Body_count_flow_runs_flow_runs_count_post"),
            (("GET", "flow_runs", "{id}"), lambda a, b: self._one("flow_runs", "id", a["id"]), None),
        ]

    def _invalid(self, model: str, body: Any) -> list[dict[str, Any]]:
        """FastAPI's 422 details for a body that does not validate against component ``model``."""
        validator = self._validators.get(model)
        if validator is None:
            import jsonschema

            doc = {"$ref": f"#/components/schemas/{model}", "components": self.spec()["components"]}
            validator = self._validators[model] = jsonschema.Draft202012Validator(doc)
        return [{"loc": ["body", *e.absolute_path], "msg": e.message, "type": str(e.validator)}
                for e in validator.iter_errors(body)][:10]

    # -- reads ---------------------------------------------------------------------------------

    def _related(self, entity: str, record: dict[str, Any], other: str) -> list[dict[str, Any]]:
        """The records of ``other`` that ``record`` (of ``entity``) belongs to or owns."""
        d = self.data
        deployments = {x["id"]: x for x in d["deployments"]}
        if entity == "flow_runs":
            dep = deployments.get(record.get("deployment_id") or "")
            if other == "flows":
                return [f for f in d["flows"] if f["id"] == record["flow_id"]]
            if other == "deployments":
                return [dep] if dep else []
            return [p for p in d["work_pools"] if dep and p["name"] == dep["work_pool_name"]]
        if entity == "deployments":
            if other == "flows":
                return [f for f in d["flows"] if f["id"] == record["flow_id"]]
            if other == "flow_runs":
                return [r for r in d["flow_runs"] if r["deployment_id"] == record["id"]]
            return [p for p in d["work_pools"] if p["name"] == record["work_pool_name"]]
        if entity == "flows":
            if other == "flow_runs":
                return [r for r in d["flow_runs"] if r["flow_id"] == record["id"]]
            deps = [x for x in d["deployments"] if x["flow_id"] == record["id"]]
            if other == "deployments":
                return deps
            return [p for p in d["work_pools"] if any(p["name"] == x["work_pool_name"] for x in deps)]
        return []

    def _selected(self, entity: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for record in self.data[entity]:
            if not _matches(record, body.get(entity), _FIELDS[entity]):
                continue
            if all(not body.get(other) or any(_matches(r, body[other], _FIELDS[other])
                                               for r in self._related(entity, record, other))
                   for other in _FIELDS if other != entity and other in body):
                out.append(record)
        return out

    def _read(self, entity: str, body: dict[str, Any]) -> tuple[int, Any]:
        found = self._selected(entity, body)
        key, reverse = _SORTS.get(body.get("sort") or ("NAME_ASC" if entity != "flow_runs" else "ID_DESC"),
                                  ("name", False))
        found.sort(key=lambda r: (r.get(key) is None, r.get(key) or ""), reverse=reverse)
        offset = body.get("offset") or 0
        limit = body.get("limit") or DEFAULT_LIMIT
        return 200, found[offset:offset + limit]

    def _count(self, entity: str, body: dict[str, Any]) -> tuple[int, Any]:
        return 200, len(self._selected(entity, body))

    def _one(self, entity: str, key: str, value: str) -> tuple[int, Any]:
        found = next((r for r in self.data[entity] if r[key] == value), None)
        noun = entity[:-1].replace("_", " ").capitalize()
        return (200, found) if found else (404, {"detail": f"{noun} not found."})

    def _deployment_by_name(self, args: dict[str, str], body: Any) -> tuple[int, Any]:
        flow = next((f for f in self.data["flows"] if f["name"] == args["flow"]), None)
        found = next((x for x in self.data["deployments"]
                      if flow and x["flow_id"] == flow["id"] and x["name"] == args["name"]), None)
        return (200, found) if found else (404, {"detail": "Deployment not found."})

    # -- writes --------------------------------------------------------------------------------

    def _create_pool(self, args: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        if any(p["name"] == body["name"] for p in self.data["work_pools"]):
            return 409, {"detail": "A work pool with this name already exists."}
        pool = {**_pool(body["name"], body.get("type") or "process"), "created": "2026-03-01T00:00:00Z",
                **{k: v for k, v in body.items() if k != "name"}}
        self.data["work_pools"].append(pool)
        return 201, pool

    def _update_pool(self, args: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        pool = next((p for p in self.data["work_pools"] if p["name"] == args["name"]), None)
        if pool is None:
            return 404, {"detail": "Work pool not found."}
        pool.update({k: v for k, v in body.items() if v is not None})
        return 204, None

    def _delete_pool(self, args: dict[str, str], body: Any) -> tuple[int, Any]:
        pools = self.data["work_pools"]
        pool = next((p for p in pools if p["name"] == args["name"]), None)
        if pool is None:
            return 404, {"detail": "Work pool not found."}
        pools.remove(pool)
        return 204, None

    def _create_flow(self, args: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        found = next((f for f in self.data["flows"] if f["name"] == body["name"]), None)
        if found is not None:
            return 200, found
        flow = {**_flow(body["name"], body.get("tags") or []), "created": "2026-03-01T00:00:00Z"}
        self.data["flows"].append(flow)
        return 201, flow

    def _run_deployment(self, args: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        dep = next((x for x in self.data["deployments"] if x["id"] == args["id"]), None)
        if dep is None:
            return 404, {"detail": "Deployment not found."}
        return self._create_run({**body, "flow_id": dep["flow_id"], "deployment_id": dep["id"],
                                 "tags": body.get("tags") or dep["tags"]})

    def _create_run(self, body: dict[str, Any]) -> tuple[int, Any]:
        runs = self.data["flow_runs"]
        if not any(f["id"] == body["flow_id"] for f in self.data["flows"]):
            return 404, {"detail": "Flow not found."}
        key = body.get("idempotency_key")
        if key is not None:
            found = next((r for r in runs if r["flow_id"] == body["flow_id"] and r["idempotency_key"] == key), None)
            if found is not None:
                return 200, found
        name = body.get("name") or f"run-{len(runs) + 1}"
        state = (body.get("state") or {}).get("type") or "PENDING"
        run = {**_run(name, "", None, state, None, body.get("tags") or []), "flow_id": body["flow_id"],
               "deployment_id": body.get("deployment_id"), "idempotency_key": key,
               "parameters": body.get("parameters") or {}, "id": ident("flow_run", f"{name}#{len(runs)}")}
        run["state_name"] = (body.get("state") or {}).get("name") or state.title()
        runs.append(run)
        return 201, run
