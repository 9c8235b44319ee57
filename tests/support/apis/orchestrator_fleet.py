"""The orchestrator test API (``tests/support/apis/orchestrator.py``) with the rest of a Prefect-like server
that probing must clean up after: work queues and workers inside work pools, artifacts, and the
deletes of flows and flow runs. For the tests of unsafe probing (issue 30, item 2).

What it adds, the way such a server does it:

- **names in paths**: ``/work_pools/{work_pool_name}/queues/{name}`` (read, delete by the queue's
  *name*; its create answers ``{"id": <uuid>, "name": ...}``), ``.../workers/{name}``;
- **409 on a taken name**: a second queue of the same name in a pool;
- **an upsert-like POST**: ``POST /work_pools/{work_pool_name}/workers/heartbeat {"name"}`` answers
  204 and creates the worker when it is new (updates its heartbeat otherwise);
- **ids the server assigns where the client gives a key**: ``POST /artifacts/ {"key"}`` answers 201
  with a new ``id``; keys are not unique (a second artifact of a key is a new version), and the
  artifact is read and deleted by ``/artifacts/{id}``;
- **reads by POST** with a path: ``.../queues/filter``, ``.../workers/filter``, ``/artifacts/filter``;
- **a POST that looks like a read and writes**: ``POST /work_queues/{id}/get_runs`` returns the
  queue's runs and records that the queue was polled (``last_polled``), as Prefect's does;
- creating a work pool makes its ``default`` queue; deleting a pool deletes its queues and workers.

``data`` gains ``work_queues``, ``workers`` and ``artifacts`` (each record names its pool).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from tests.support.apis.orchestrator import OrchestratorAPI, ident
from tests.support.apis.orchestrator_spec import orchestrator_spec

__all__ = ["FleetAPI", "WORK_QUEUES", "WORKERS", "ARTIFACTS", "fleet_spec"]

NOW = "2026-03-01T00:00:00Z"


def _queue(pool: str, name: str, priority: int = 1) -> dict[str, Any]:
    return {"id": ident("work_queue", f"{pool}/{name}"), "name": name, "work_pool_name": pool,
            "description": "", "is_paused": False, "priority": priority, "last_polled": None}


WORK_QUEUES = [_queue("default-pool", "default"), _queue("precious-pool", "default"),
               _queue("precious-pool", "critical", 2), _queue("gpu-pool", "default")]
WORKERS = [{"id": ident("worker", "precious-pool/box-1"), "name": "box-1", "work_pool_name": "precious-pool",
            "last_heartbeat_time": "2026-02-12T02:00:00Z"}]
ARTIFACTS = [{"id": ident("artifact", f"nightly-report/{i}"), "key": "nightly-report", "type": "markdown",
              "data": f"# Night {i}", "created": f"2026-02-0{i}T03:00:00Z"} for i in (1, 2)]


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str = "Successful Response") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _param(name: str, title: str, fmt: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "title": title, **({"format": fmt} if fmt else {})}
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": f"The {title.lower()}"}


def _op(op_id: str, summary: str, responses: dict[str, Any], params: list[dict[str, Any]] | None = None,
        body: str | None = None, required: bool = False) -> dict[str, Any]:
    invalid = {"422": _json(_ref("HTTPValidationError"), "Validation Error")}
    out: dict[str, Any] = {"summary": summary, "operationId": op_id, "responses": {**responses, **invalid}}
    if params:
        out["parameters"] = params
    if body:
        out["requestBody"] = {"content": {"application/json": {"schema": _ref(body)}}, "required": required}
    return out


def _components() -> dict[str, Any]:
    uuid = {"type": "string", "format": "uuid", "title": "Id"}
    optional = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    paging = {"limit": {"type": "integer", "title": "Limit", "maximum": 200},
              "offset": {"type": "integer", "minimum": 0, "title": "Offset", "default": 0}}
    return {
        "WorkQueue": {"type": "object", "title": "WorkQueue", "required": ["id", "name"], "properties": {
            "id": uuid, "name": {"type": "string", "title": "Name"}, "work_pool_name": {**optional, "title": "Pool"},
            "description": {**optional, "title": "Description"}, "is_paused": {"type": "boolean"},
            "priority": {"type": "integer", "minimum": 1}, "last_polled": {**optional, "title": "Last Polled"}}},
        "WorkQueueCreate": {"type": "object", "title": "WorkQueueCreate", "required": ["name"],
                            "additionalProperties": False, "properties": {
            "name": {"type": "string", "title": "Name", "description": "The name of the work queue."},
            "description": {**optional, "title": "Description"},
            "priority": {"type": "integer", "minimum": 1, "title": "Priority"}}},
        "Worker": {"type": "object", "title": "Worker", "required": ["id", "name"], "properties": {
            "id": uuid, "name": {"type": "string", "title": "Name"}, "work_pool_name": {"type": "string"},
            "last_heartbeat_time": {**optional, "title": "Last Heartbeat Time"}}},
        "Body_worker_heartbeat_work_pools__work_pool_name__workers_heartbeat_post": {
            "type": "object", "title": "Body_worker_heartbeat", "required": ["name"], "properties": {
                "name": {"type": "string", "title": "Name", "description": "The worker process name"},
                "heartbeat_interval_seconds": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}},
        "Artifact": {"type": "object", "title": "Artifact", "required": ["id"], "properties": {
            "id": uuid, "key": {**optional, "title": "Key"}, "type": {**optional, "title": "Type"},
            "data": {"title": "Data"}, "created": {"type": "string", "format": "date-time"}}},
        "ArtifactCreate": {"type": "object", "title": "ArtifactCreate", "additionalProperties": False,
                           "properties": {
            "key": {**optional, "title": "Key", "description": "An optional unique reference key for this "
                                                               "artifact."},
            "type": {**optional, "title": "Type"}, "description": {**optional, "title": "Description"},
            "data": {"title": "Data", "description": "Data associated with the artifact"}}},
        "ArtifactFilterKey": {"type": "object", "title": "ArtifactFilterKey", "additionalProperties": False,
                              "properties": {"any_": {"anyOf": [{"type": "array", "items": {"type": "string"}},
                                                                {"type": "null"}], "title": "Any "}}},
        "ArtifactFilter": {"type": "object", "title": "ArtifactFilter", "additionalProperties": False,
                           "properties": {"key": {"anyOf": [_ref("ArtifactFilterKey"), {"type": "null"}]}}},
        "Body_read_artifacts_artifacts_filter_post": {"type": "object", "title": "Body_read_artifacts", "properties": {
            "artifacts": {"anyOf": [_ref("ArtifactFilter"), {"type": "null"}]}, **paging}},
        "Body_read_work_queues": {"type": "object", "title": "Body_read_work_queues", "properties": dict(paging)},
        "Body_read_workers": {"type": "object", "title": "Body_read_workers", "properties": dict(paging)},
        "Body_read_work_queue_runs": {"type": "object", "title": "Body_read_work_queue_runs",
                                      "properties": {"limit": paging["limit"]}},
    }


def fleet_spec(base_url: str) -> dict[str, Any]:
    """The orchestrator's document with the paths and components of this module."""
    doc = orchestrator_spec(base_url)
    doc["components"]["schemas"].update(_components())
    pool = _param("work_pool_name", "Work pool name")
    gone = {"204": {"description": "Successful Response"}, "404": {"description": "Not found"}}
    queue, worker = _param("name", "Work queue name"), _param("name", "Worker name")
    doc["paths"].update({
        "/work_pools/{work_pool_name}/queues": {"post": _op(
            "create_work_queue_work_pools__work_pool_name__queues_post", "Create Work Queue",
            {"201": _json(_ref("WorkQueue")), "409": {"description": "A queue with this name exists"}},
            [pool], "WorkQueueCreate", True)},
        "/work_pools/{work_pool_name}/queues/filter": {"post": _op(
            "read_work_queues_work_pools__work_pool_name__queues_filter_post", "Read Work Queues",
            {"200": _json({"type": "array", "items": _ref("WorkQueue")})}, [pool], "Body_read_work_queues")},
        "/work_pools/{work_pool_name}/queues/{name}": {
            "get": _op("read_work_queue_work_pools__work_pool_name__queues__name__get", "Read Work Queue",
                       {"200": _json(_ref("WorkQueue"))}, [pool, queue]),
            "delete": _op("delete_work_queue_work_pools__work_pool_name__queues__name__delete", "Delete Work Queue",
                          gone, [pool, queue])},
        "/work_pools/{work_pool_name}/workers/heartbeat": {"post": _op(
            "worker_heartbeat_work_pools__work_pool_name__workers_heartbeat_post", "Worker Heartbeat",
            {"204": {"description": "Successful Response"}}, [pool],
            "Body_worker_heartbeat_work_pools__work_pool_name__workers_heartbeat_post", True)},
        "/work_pools/{work_pool_name}/workers/filter": {"post": _op(
            "read_workers_work_pools__work_pool_name__workers_filter_post", "Read Workers",
            {"200": _json({"type": "array", "items": _ref("Worker")})}, [pool], "Body_read_workers")},
        "/work_pools/{work_pool_name}/workers/{name}": {"delete": _op(
            "delete_worker_work_pools__work_pool_name__workers__name__delete", "Delete Worker", gone,
            [pool, worker])},
        "/work_queues/{id}/get_runs": {"post": _op(
            "read_work_queue_runs_work_queues__id__get_runs_post", "Read Work Queue Runs",
            {"200": _json({"type": "array", "items": _ref("FlowRun")})}, [_param("id", "Work queue id", "uuid")],
            "Body_read_work_queue_runs")},
        "/artifacts/": {"post": _op("create_artifact_artifacts__post", "Create Artifact",
                                    {"201": _json(_ref("Artifact"))}, None, "ArtifactCreate", True)},
        "/artifacts/filter": {"post": _op(
            "read_artifacts_artifacts_filter_post", "Read Artifacts",
            {"200": _json({"type": "array", "items": _ref("Artifact")})}, None,
            "Body_read_artifacts_artifacts_filter_post")},
        "/artifacts/{id}": {
            "get": _op("read_artifact_artifacts__id__get", "Read Artifact", {"200": _json(_ref("Artifact"))},
                       [_param("id", "Artifact id", "uuid")]),
            "delete": _op("delete_artifact_artifacts__id__delete", "Delete Artifact", gone,
                          [_param("id", "Artifact id", "uuid")])},
    })
    doc["paths"]["/flows/{id}"]["delete"] = _op("delete_flow_flows__id__delete", "Delete Flow", gone,
                                                [_param("id", "Flow id", "uuid")])
    doc["paths"]["/flow_runs/{id}"]["delete"] = _op("delete_flow_run_flow_runs__id__delete", "Delete Flow Run",
                                                    gone, [_param("id", "Flow run id", "uuid")])
    return doc


@dataclass
class FleetAPI(OrchestratorAPI):
    """The orchestrator with queues, workers and artifacts (see the module docstring)."""

    def __post_init__(self) -> None:
        self.data.setdefault("work_queues", copy.deepcopy(WORK_QUEUES))
        self.data.setdefault("workers", copy.deepcopy(WORKERS))
        self.data.setdefault("artifacts", copy.deepcopy(ARTIFACTS))

    def spec(self) -> dict[str, Any]:
        return fleet_spec(self.url)

    def _routes(self) -> list[tuple[tuple[str, ...], Any, str | None]]:
        pool = ("work_pools", "{pool}")
        return [
            (("POST", *pool, "queues"), self._create_queue, "WorkQueueCreate"),
            (("POST", *pool, "queues", "filter"), lambda a, b: self._in_pool("work_queues", a, b),
             "Body_read_work_queues"),
            (("GET", *pool, "queues", "{name}"), lambda a, b: self._named("work_queues", a), None),
            (("DELETE", *pool, "queues", "{name}"), lambda a, b: self._drop_named("work_queues", a), None),
            (("POST", *pool, "workers", "heartbeat"), self._heartbeat,
             "Body_worker_heartbeat_work_pools__work_pool_name__workers_heartbeat_post"),
            (("POST", *pool, "workers", "filter"), lambda a, b: self._in_pool("workers", a, b), "Body_read_workers"),
            (("DELETE", *pool, "workers", "{name}"), lambda a, b: self._drop_named("workers", a), None),
            (("POST", "work_queues", "{id}", "get_runs"), self._queue_runs, "Body_read_work_queue_runs"),
            (("POST", "artifacts"), self._create_artifact, "ArtifactCreate"),
            (("POST", "artifacts", "filter"), self._read_artifacts, "Body_read_artifacts_artifacts_filter_post"),
            (("GET", "artifacts", "{id}"), lambda a, b: self._one("artifacts", "id", a["id"]), None),
            (("DELETE", "artifacts", "{id}"), lambda a, b: self._drop_id("artifacts", a["id"]), None),
            (("DELETE", "flows", "{id}"), lambda a, b: self._drop_id("flows", a["id"]), None),
            (("DELETE", "flow_runs", "{id}"), lambda a, b: self._drop_id("flow_runs", a["id"]), None),
            *super()._routes(),
        ]

    # -- handlers (called under the lock) ----------------------------------------------------------

    def _pool_exists(self, name: str) -> bool:
        return any(p["name"] == name for p in self.data["work_pools"])

    def _create_pool(self, args: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        status, answer = super()._create_pool(args, body)
        if status == 201:
            self.data["work_queues"].append({**_queue(body["name"], "default"), "id": ident(
                "work_queue", f"{body['name']}/default#{len(self.requests)}")})
        return status, answer

    def _delete_pool(self, args: dict[str, str], body: Any) -> tuple[int, Any]:
        status, answer = super()._delete_pool(args, body)
        if status == 204:
            for kind in ("work_queues", "workers"):
                self.data[kind] = [x for x in self.data[kind] if x["work_pool_name"] != args["name"]]
        return status, answer

    def _create_queue(self, args: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        if not self._pool_exists(args["pool"]):
            return 404, {"detail": "Work pool not found."}
        queues = self.data["work_queues"]
        if any(q["work_pool_name"] == args["pool"] and q["name"] == body["name"] for q in queues):
            return 409, {"detail": "A work queue with this name already exists."}
        queue = {**_queue(args["pool"], body["name"], int(body.get("priority") or 1)),
                 "id": ident("work_queue", f"{args['pool']}/{body['name']}#{len(self.requests)}"),
                 "description": body.get("description") or ""}
        queues.append(queue)
        return 201, queue

    def _in_pool(self, kind: str, args: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        if not self._pool_exists(args["pool"]):
            return 404, {"detail": "Work pool not found."}
        found = [x for x in self.data[kind] if x["work_pool_name"] == args["pool"]]
        offset = body.get("offset") or 0
        return 200, found[offset:offset + (body.get("limit") or 200)]

    def _named(self, kind: str, args: dict[str, str]) -> tuple[int, Any]:
        found = next((x for x in self.data[kind] if x["work_pool_name"] == args["pool"]
                      and x["name"] == args["name"]), None)
        return (200, found) if found else (404, {"detail": "Not found."})

    def _drop_named(self, kind: str, args: dict[str, str]) -> tuple[int, Any]:
        status, found = self._named(kind, args)
        if status != 200:
            return status, found
        self.data[kind].remove(found)
        return 204, None

    def _drop_id(self, kind: str, ident_: str) -> tuple[int, Any]:
        found = next((x for x in self.data[kind] if x["id"] == ident_), None)
        if found is None:
            return 404, {"detail": "Not found."}
        self.data[kind].remove(found)
        return 204, None

    def _heartbeat(self, args: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        if not self._pool_exists(args["pool"]):
            return 404, {"detail": "Work pool not found."}
        worker = next((w for w in self.data["workers"] if w["work_pool_name"] == args["pool"]
                       and w["name"] == body["name"]), None)
        if worker is None:
            self.data["workers"].append({"id": ident("worker", f"{args['pool']}/{body['name']}#{len(self.requests)}"),
                                         "name": body["name"], "work_pool_name": args["pool"],
                                         "last_heartbeat_time": NOW})
        else:
            worker["last_heartbeat_time"] = NOW
        return 204, None

    def _queue_runs(self, args: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        queue = next((q for q in self.data["work_queues"] if q["id"] == args["id"]), None)
        if queue is None:
            return 404, {"detail": "Work queue not found."}
        queue["last_polled"] = NOW  # the read that writes: the queue now says it was polled
        pools = {d["id"] for d in self.data["deployments"] if d["work_pool_name"] == queue["work_pool_name"]}
        return 200, [r for r in self.data["flow_runs"] if r.get("deployment_id") in pools][: body.get("limit") or 200]

    def _create_artifact(self, args: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        artifact = {"id": ident("artifact", f"{body.get('key')}/{len(self.requests)}"), "key": body.get("key"),
                    "type": body.get("type"), "data": body.get("data"), "created": NOW}
        self.data["artifacts"].append(artifact)
        return 201, artifact

    def _read_artifacts(self, args: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        keys = ((body.get("artifacts") or {}).get("key") or {}).get("any_")
        found = [a for a in self.data["artifacts"] if keys is None or a["key"] in keys]
        offset = body.get("offset") or 0
        return 200, found[offset:offset + (body.get("limit") or 200)]
