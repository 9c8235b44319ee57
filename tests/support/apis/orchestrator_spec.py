"""The OpenAPI 3.1 document of the orchestrator test API (``tests/support/apis/orchestrator.py``), written
the way FastAPI and pydantic v2 write one (Prefect 3's server is such an application).

What makes such specs hard, all of it here on purpose:

- **nested filter bodies**: ``POST /work_pools/filter`` takes ``{"work_pools": WorkPoolFilter | None,
  "limit", "offset"}``; a ``WorkPoolFilter`` is ``{operator, id, name, type}``, each field an
  ``Optional`` of another model (``WorkPoolFilterName = {any_: [str] | None}``). Every model is a
  ``$ref``'d component, every optional field an ``anyOf: [{$ref}, {type: null}]``, every filter
  model ``additionalProperties: false`` and ``title``-d the pydantic way (``"Any "``);
- **reads that are POSTs** (``.../filter``, ``.../count``), and writes that are POSTs too;
- **names in paths**: ``/work_pools/{name}``, ``/flows/name/{name}``,
  ``/deployments/name/{flow_name}/{deployment_name}``;
- **upsert-like POSTs**: ``POST /flows/`` answers the existing flow (200) when the name is taken,
  a new one (201) otherwise; ``POST /flow_runs/`` the same for a flow and idempotency key;
- operation ids in FastAPI's generated style (``read_work_pools_work_pools_filter_post``) and
  ``422`` answers in its ``HTTPValidationError`` shape.

``orchestrator_spec(base_url)`` returns a fresh document each call (tests may edit it).
"""

from __future__ import annotations

from typing import Any

__all__ = ["orchestrator_spec", "STATE_TYPES", "FILTERS"]

STATE_TYPES = ["SCHEDULED", "PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "CRASHED", "PAUSED"]
#: filter model -> its fields -> the criteria model of each field (all of them in components)
FILTERS: dict[str, dict[str, str]] = {
    "WorkPoolFilter": {"id": "WorkPoolFilterId", "name": "WorkPoolFilterName", "type": "WorkPoolFilterType"},
    "FlowFilter": {"id": "FlowFilterId", "name": "FlowFilterName", "tags": "FlowFilterTags"},
    "DeploymentFilter": {"id": "DeploymentFilterId", "name": "DeploymentFilterName",
                         "tags": "DeploymentFilterTags"},
    "FlowRunFilter": {"id": "FlowRunFilterId", "name": "FlowRunFilterName", "tags": "FlowRunFilterTags",
                      "state": "FlowRunFilterState", "start_time": "FlowRunFilterStartTime",
                      "deployment_id": "FlowRunFilterDeploymentId"},
}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _optional(schema: dict[str, Any], title: str, description: str | None = None) -> dict[str, Any]:
    """pydantic v2's ``Optional[X] = None``: ``anyOf: [X, {type: null}]`` with the field's title."""
    out: dict[str, Any] = {"anyOf": [schema, {"type": "null"}], "title": title}
    if description:
        out["description"] = description
    return out


def _strings(fmt: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "string"}
    if fmt:
        item["format"] = fmt
    return {"type": "array", "items": item}


def _criteria(title: str, fields: dict[str, tuple[dict[str, Any], str]], doc: str) -> dict[str, Any]:
    props = {name: _optional(schema, name.replace("_", " ").title().rstrip() + " ", text)
             for name, (schema, text) in fields.items()}
    return {"properties": props, "additionalProperties": False, "type": "object", "title": title, "description": doc}


def _filter(title: str, of: str, doc: str) -> dict[str, Any]:
    props: dict[str, Any] = {"operator": {**_ref("Operator"), "description": "Operator for combining filter "
                                          "criteria. Defaults to 'and_'.", "default": "and_"}}
    for field, model in FILTERS[title].items():
        props[field] = _optional(_ref(model), field.title(), f"Filter criteria for `{of}.{field}`")
    return {"properties": props, "additionalProperties": False, "type": "object", "title": title, "description": doc}


def _schemas() -> dict[str, Any]:
    ids = ("A list of {} ids to include",)
    s: dict[str, Any] = {
        "Operator": {"type": "string", "enum": ["and_", "or_"], "title": "Operator",
                     "description": "Operators for combining filter criteria."},
        "StateType": {"type": "string", "enum": STATE_TYPES, "title": "StateType",
                      "description": "Enumeration of state types."},
        "WorkPoolFilterId": _criteria("WorkPoolFilterId", {"any_": (_strings("uuid"), ids[0].format("work pool"))},
                                      "Filter by `WorkPool.id`."),
        "WorkPoolFilterName": _criteria("WorkPoolFilterName", {
            "any_": (_strings(), "A list of work pool names to include")}, "Filter by `WorkPool.name`."),
        "WorkPoolFilterType": _criteria("WorkPoolFilterType", {
            "any_": (_strings(), "A list of work pool types to include")}, "Filter by `WorkPool.type`."),
        "FlowFilterId": _criteria("FlowFilterId", {"any_": (_strings("uuid"), ids[0].format("flow"))},
                                  "Filter by `Flow.id`."),
        "FlowFilterName": _criteria("FlowFilterName", {
            "any_": (_strings(), "A list of flow names to include"),
            "like_": ({"type": "string"}, "A case-insensitive partial match. For example, passing 'marvin' will "
                                          "match 'marvin', 'sad-Marvin', and 'marvin-robot'.")},
            "Filter by `Flow.name`."),
        "FlowFilterTags": _criteria("FlowFilterTags", {
            "all_": (_strings(), "A list of tags. Flows will be returned only if their tags are a superset of "
                                 "the list"),
            "is_null_": ({"type": "boolean"}, "If true, only include flows without tags")}, "Filter by `Flow.tags`."),
        "DeploymentFilterId": _criteria("DeploymentFilterId", {
            "any_": (_strings("uuid"), ids[0].format("deployment"))}, "Filter by `Deployment.id`."),
        "DeploymentFilterName": _criteria("DeploymentFilterName", {
            "any_": (_strings(), "A list of deployment names to include"),
            "like_": ({"type": "string"}, "A case-insensitive partial match.")}, "Filter by `Deployment.name`."),
        "DeploymentFilterTags": _criteria("DeploymentFilterTags", {
            "all_": (_strings(), "A list of tags. Deployments will be returned only if their tags are a "
                                 "superset of the list"),
            "is_null_": ({"type": "boolean"}, "If true, only include deployments without tags")},
            "Filter by `Deployment.tags`."),
        "FlowRunFilterId": _criteria("FlowRunFilterId", {
            "any_": (_strings("uuid"), ids[0].format("flow run")),
            "not_any_": (_strings("uuid"), "A list of flow run ids to exclude")}, "Filter by `FlowRun.id`."),
        "FlowRunFilterName": _criteria("FlowRunFilterName", {
            "any_": (_strings(), "A list of flow run names to include"),
            "like_": ({"type": "string"}, "A case-insensitive partial match.")}, "Filter by `FlowRun.name`."),
        "FlowRunFilterTags": _criteria("FlowRunFilterTags", {
            "all_": (_strings(), "A list of tags. Flow runs will be returned only if their tags are a superset "
                                 "of the list"),
            "is_null_": ({"type": "boolean"}, "If true, only include flow runs without tags")},
            "Filter by `FlowRun.tags`."),
        "FlowRunFilterStateType": _criteria("FlowRunFilterStateType", {
            "any_": ({"type": "array", "items": _ref("StateType")}, "A list of flow run state types to include"),
            "not_any_": ({"type": "array", "items": _ref("StateType")}, "A list of flow run state types to "
                                                                        "exclude")},
            "Filter by `FlowRun.state_type`."),
        "FlowRunFilterStateName": _criteria("FlowRunFilterStateName", {
            "any_": (_strings(), "A list of flow run state names to include")}, "Filter by `FlowRun.state_name`."),
        "FlowRunFilterState": {"properties": {
            "operator": {**_ref("Operator"), "default": "and_"},
            "type": _optional(_ref("FlowRunFilterStateType"), "Type", "Filter criteria for `FlowRun.state_type`"),
            "name": _optional(_ref("FlowRunFilterStateName"), "Name", "Filter criteria for `FlowRun.state_name`")},
            "additionalProperties": False, "type": "object", "title": "FlowRunFilterState",
            "description": "Filter by `FlowRun.state_type` and `FlowRun.state_name`."},
        "FlowRunFilterStartTime": _criteria("FlowRunFilterStartTime", {
            "before_": ({"type": "string", "format": "date-time"}, "Only include flow runs starting at or before "
                                                                   "this time"),
            "after_": ({"type": "string", "format": "date-time"}, "Only include flow runs starting at or after "
                                                                  "this time"),
            "is_null_": ({"type": "boolean"}, "If true, only return flow runs without a start time")},
            "Filter by `FlowRun.start_time`."),
        "FlowRunFilterDeploymentId": _criteria("FlowRunFilterDeploymentId", {
            "any_": (_strings("uuid"), "A list of flow run deployment ids to include"),
            "is_null_": ({"type": "boolean"}, "If true, only include flow runs without deployment ids")},
            "Filter by `FlowRun.deployment_id`."),
        "WorkPoolFilter": _filter("WorkPoolFilter", "WorkPool", "Filter work pools. Only work pools matching all "
                                  "criteria will be returned"),
        "FlowFilter": _filter("FlowFilter", "Flow", "Filter for flows. Only flows matching all criteria will be "
                              "returned."),
        "DeploymentFilter": _filter("DeploymentFilter", "Deployment", "Filter for deployments. Only deployments "
                                    "matching all criteria will be returned."),
        "FlowRunFilter": _filter("FlowRunFilter", "FlowRun", "Filter flow runs. Only flow runs matching all "
                                 "criteria will be returned"),
        "FlowSort": {"type": "string", "enum": ["CREATED_DESC", "NAME_ASC", "NAME_DESC"], "title": "FlowSort"},
        "FlowRunSort": {"type": "string", "enum": ["ID_DESC", "START_TIME_ASC", "START_TIME_DESC", "NAME_ASC",
                                                   "NAME_DESC"], "title": "FlowRunSort"},
    }
    uuid = {"type": "string", "format": "uuid", "title": "Id"}
    stamp = {"type": "string", "format": "date-time"}
    s["WorkPool"] = {"type": "object", "title": "WorkPool", "required": ["id", "name", "type"], "properties": {
        "id": uuid, "created": {**stamp, "title": "Created"},
        "name": {"type": "string", "title": "Name", "description": "The name of the work pool."},
        "description": _optional({"type": "string"}, "Description", "A description of the work pool."),
        "type": {"type": "string", "title": "Type", "description": "The work pool type."},
        "is_paused": {"type": "boolean", "title": "Is Paused", "default": False},
        "concurrency_limit": _optional({"type": "integer", "minimum": 0}, "Concurrency Limit")}}
    s["WorkPoolCreate"] = {"type": "object", "title": "WorkPoolCreate", "required": ["name"],
                           "additionalProperties": False, "properties": {
        "name": {"type": "string", "title": "Name", "description": "The name of the work pool."},
        "description": _optional({"type": "string"}, "Description", "The work pool description."),
        "type": {"type": "string", "title": "Type", "description": "The work pool type.", "default": "process"},
        "is_paused": {"type": "boolean", "title": "Is Paused", "default": False},
        "concurrency_limit": _optional({"type": "integer", "minimum": 0}, "Concurrency Limit")}}
    s["WorkPoolUpdate"] = {"type": "object", "title": "WorkPoolUpdate", "additionalProperties": False,
                           "properties": {
        "description": _optional({"type": "string"}, "Description"),
        "is_paused": _optional({"type": "boolean"}, "Is Paused"),
        "concurrency_limit": _optional({"type": "integer", "minimum": 0}, "Concurrency Limit")}}
    s["Flow"] = {"type": "object", "title": "Flow", "required": ["id", "name"], "properties": {
        "id": uuid, "created": {**stamp, "title": "Created"},
        "name": {"type": "string", "title": "Name", "description": "The name of the flow"},
        "tags": {"type": "array", "items": {"type": "string"}, "title": "Tags"}}}
    s["FlowCreate"] = {"type": "object", "title": "FlowCreate", "required": ["name"], "additionalProperties": False,
                       "properties": {"name": {"type": "string", "title": "Name", "description": "The name of the flow"},
                                      "tags": {"type": "array", "items": {"type": "string"}, "title": "Tags",
                                               "description": "A list of flow tags"}}}
    s["Deployment"] = {"type": "object", "title": "Deployment", "required": ["id", "name", "flow_id"], "properties": {
        "id": uuid, "name": {"type": "string", "title": "Name"}, "flow_id": {**uuid, "title": "Flow Id"},
        "work_pool_name": _optional({"type": "string"}, "Work Pool Name"),
        "tags": {"type": "array", "items": {"type": "string"}, "title": "Tags"},
        "parameters": {"type": "object", "additionalProperties": True, "title": "Parameters"}}}
    s["StateCreate"] = {"type": "object", "title": "StateCreate", "required": ["type"], "properties": {
        "type": _ref("StateType"), "name": _optional({"type": "string"}, "Name"),
        "message": _optional({"type": "string"}, "Message")}}
    s["FlowRun"] = {"type": "object", "title": "FlowRun", "required": ["id", "name", "flow_id"], "properties": {
        "id": uuid, "name": {"type": "string", "title": "Name"}, "flow_id": {**uuid, "title": "Flow Id"},
        "deployment_id": _optional({"type": "string", "format": "uuid"}, "Deployment Id"),
        "state_type": _optional(_ref("StateType"), "State Type"),
        "state_name": _optional({"type": "string"}, "State Name"),
        "tags": {"type": "array", "items": {"type": "string"}, "title": "Tags"},
        "idempotency_key": _optional({"type": "string"}, "Idempotency Key"),
        "parameters": {"type": "object", "additionalProperties": True, "title": "Parameters"},
        "start_time": _optional({"type": "string", "format": "date-time"}, "Start Time")}}
    s["FlowRunCreate"] = {"type": "object", "title": "FlowRunCreate", "required": ["flow_id"],
                          "additionalProperties": False, "properties": {
        "flow_id": {**uuid, "title": "Flow Id", "description": "The id of the flow being run."},
        "name": {"type": "string", "title": "Name", "description": "The name of the flow run. Defaults to a "
                                                                  "random slug if not specified."},
        "deployment_id": _optional({"type": "string", "format": "uuid"}, "Deployment Id"),
        "state": _optional(_ref("StateCreate"), "State", "The state of the flow run to create"),
        "parameters": {"type": "object", "additionalProperties": True, "title": "Parameters"},
        "tags": {"type": "array", "items": {"type": "string"}, "title": "Tags"},
        "idempotency_key": _optional({"type": "string"}, "Idempotency Key", "An optional idempotency key. If a "
                                     "flow run with the same idempotency key has already been created, the existing "
                                     "flow run will be returned.")}}
    s["DeploymentFlowRunCreate"] = {"type": "object", "title": "DeploymentFlowRunCreate",
                                    "additionalProperties": False, "properties": {
        k: v for k, v in s["FlowRunCreate"]["properties"].items() if k not in ("flow_id", "deployment_id")}}
    s["ValidationError"] = {"type": "object", "title": "ValidationError", "required": ["loc", "msg", "type"],
                            "properties": {"loc": {"type": "array", "items": {"anyOf": [{"type": "string"},
                                                                                        {"type": "integer"}]}},
                                           "msg": {"type": "string"}, "type": {"type": "string"}}}
    s["HTTPValidationError"] = {"type": "object", "title": "HTTPValidationError", "properties": {
        "detail": {"type": "array", "items": _ref("ValidationError"), "title": "Detail"}}}
    paging = {"limit": {"type": "integer", "title": "Limit", "description": "Defaults to "
                        "PREFECT_API_DEFAULT_LIMIT if not provided.", "maximum": 200},
              "offset": {"type": "integer", "minimum": 0, "title": "Offset", "default": 0}}
    related = {"flows": _optional(_ref("FlowFilter"), "Flows"), "flow_runs": _optional(_ref("FlowRunFilter"),
                                                                                     "Flow Runs"),
               "deployments": _optional(_ref("DeploymentFilter"), "Deployments"),
               "work_pools": _optional(_ref("WorkPoolFilter"), "Work Pools")}
    s["Body_read_work_pools_work_pools_filter_post"] = {
        "type": "object", "title": "Body_read_work_pools_work_pools_filter_post",
        "properties": {"work_pools": related["work_pools"], **paging}}
    s["Body_count_work_pools_work_pools_count_post"] = {
        "type": "object", "title": "Body_count_work_pools_work_pools_count_post",
        "properties": {"work_pools": related["work_pools"]}}
    for entity, sort in (("flows", "FlowSort"), ("flow_runs", "FlowRunSort"), ("deployments", None)):
        props = dict(related)
        if sort:
            props["sort"] = {**_ref(sort), "default": "NAME_ASC" if sort == "FlowSort" else "ID_DESC"}
        s[f"Body_read_{entity}_{entity}_filter_post"] = {"type": "object", "title": f"Body_read_{entity}_{entity}"
                                                         "_filter_post", "properties": {**props, **paging}}
        s[f"Body_count_{entity}_{entity}_count_post"] = {"type": "object", "title": f"Body_count_{entity}_{entity}"
                                                         "_count_post", "properties": dict(related)}
    return s


def _json(schema: dict[str, Any], description: str = "Successful Response") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_INVALID = {"422": _json(_ref("HTTPValidationError"), "Validation Error")}
_MISSING = {"404": {"description": "Not found", "content": {"application/json": {"schema": {
    "type": "object", "properties": {"detail": {"type": "string"}}}}}}}


def _op(op_id: str, summary: str, responses: dict[str, Any], *, body: str | None = None, required: bool = False,
        params: list[dict[str, Any]] | None = None, description: str = "", tag: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"tags": [tag] if tag else [], "summary": summary, "operationId": op_id,
                           "responses": {**responses, **_INVALID}}
    if description:
        out["description"] = description
    if params:
        out["parameters"] = params
    if body:
        out["requestBody"] = {"content": {"application/json": {"schema": _ref(body)}}, "required": required}
    return out


def _path(name: str, title: str, fmt: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "title": title}
    if fmt:
        schema["format"] = fmt
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": f"The {title.lower()}"}


def orchestrator_spec(base_url: str) -> dict[str, Any]:
    """The document, with ``servers`` at ``base_url`` + ``/api``."""
    many = {"type": "array", "title": "Response", "items": _ref("WorkPool")}
    count = _json({"type": "integer", "title": "Response"})
    pool = _path("name", "Work pool name")
    paths: dict[str, Any] = {
        "/work_pools/": {"post": _op(
            "create_work_pool_work_pools__post", "Create Work Pool", {
                "201": _json(_ref("WorkPool")), "409": {"description": "A work pool with this name already exists"}},
            body="WorkPoolCreate", required=True, tag="Work Pools",
            description="Creates a new work pool. If a work pool with the same name already exists, an error "
                        "will be raised.")},
        "/work_pools/{name}": {
            "get": _op("read_work_pool_work_pools__name__get", "Read Work Pool",
                       {"200": _json(_ref("WorkPool")), **_MISSING}, params=[pool], tag="Work Pools",
                       description="Read a work pool by name"),
            "patch": _op("update_work_pool_work_pools__name__patch", "Update Work Pool",
                         {"204": {"description": "Successful Response"}, **_MISSING}, params=[pool],
                         body="WorkPoolUpdate", required=True, tag="Work Pools", description="Update a work pool"),
            "delete": _op("delete_work_pool_work_pools__name__delete", "Delete Work Pool",
                          {"204": {"description": "Successful Response"}, **_MISSING}, params=[pool],
                          tag="Work Pools", description="Delete a work pool")},
        "/work_pools/filter": {"post": _op(
            "read_work_pools_work_pools_filter_post", "Read Work Pools", {"200": _json(many)},
            body="Body_read_work_pools_work_pools_filter_post", tag="Work Pools",
            description="Read multiple work pools")},
        "/work_pools/count": {"post": _op(
            "count_work_pools_work_pools_count_post", "Count Work Pools", {"200": count},
            body="Body_count_work_pools_work_pools_count_post", tag="Work Pools",
            description="Count work pools")},
        "/flows/": {"post": _op(
            "create_flow_flows__post", "Create Flow", {"200": _json(_ref("Flow"), "The existing flow"),
                                                       "201": _json(_ref("Flow"), "The new flow")},
            body="FlowCreate", required=True, tag="Flows",
            description="Creates a new flow from the provided schema. If a flow with the same name already "
                        "exists, the existing flow is returned.")},
        "/flows/{id}": {"get": _op("read_flow_flows__id__get", "Read Flow", {"200": _json(_ref("Flow")), **_MISSING},
                                   params=[_path("id", "Flow id", "uuid")], tag="Flows",
                                   description="Get a flow by id.")},
        "/flows/name/{name}": {"get": _op(
            "read_flow_by_name_flows_name__name__get", "Read Flow By Name", {"200": _json(_ref("Flow")), **_MISSING},
            params=[_path("name", "Flow name")], tag="Flows", description="Get a flow by name.")},
        "/flows/filter": {"post": _op(
            "read_flows_flows_filter_post", "Read Flows", {"200": _json({"type": "array", "items": _ref("Flow")})},
            body="Body_read_flows_flows_filter_post", tag="Flows", description="Query for flows.")},
        "/flows/count": {"post": _op(
            "count_flows_flows_count_post", "Count Flows", {"200": count}, body="Body_count_flows_flows_count_post",
            tag="Flows", description="Count flows.")},
        "/deployments/filter": {"post": _op(
            "read_deployments_deployments_filter_post", "Read Deployments",
            {"200": _json({"type": "array", "items": _ref("Deployment")})},
            body="Body_read_deployments_deployments_filter_post", tag="Deployments",
            description="Query for deployments.")},
        "/deployments/name/{flow_name}/{deployment_name}": {"get": _op(
            "read_deployment_by_name_deployments_name__flow_name___deployment_name__get", "Read Deployment By Name",
            {"200": _json(_ref("Deployment")), **_MISSING},
            params=[_path("flow_name", "Flow name"), _path("deployment_name", "Deployment name")],
            tag="Deployments", description="Get a deployment using the name of the flow and the deployment.")},
        "/deployments/{id}/create_flow_run": {"post": _op(
            "create_flow_run_from_deployment_deployments__id__create_flow_run_post",
            "Create Flow Run From Deployment", {"201": _json(_ref("FlowRun")), **_MISSING},
            params=[_path("id", "Deployment id", "uuid")], body="DeploymentFlowRunCreate", required=True,
            tag="Deployments", description="Create a flow run from a deployment.")},
        "/flow_runs/": {"post": _op(
            "create_flow_run_flow_runs__post", "Create Flow Run", {
                "200": _json(_ref("FlowRun"), "The existing flow run"), "201": _json(_ref("FlowRun"), "The new run")},
            body="FlowRunCreate", required=True, tag="Flow Runs",
            description="Create a flow run. If a flow run with the same flow_id and idempotency key already "
                        "exists, the existing flow run will be returned.")},
        "/flow_runs/{id}": {"get": _op(
            "read_flow_run_flow_runs__id__get", "Read Flow Run", {"200": _json(_ref("FlowRun")), **_MISSING},
            params=[_path("id", "Flow run id", "uuid")], tag="Flow Runs", description="Get a flow run by id.")},
        "/flow_runs/filter": {"post": _op(
            "read_flow_runs_flow_runs_filter_post", "Read Flow Runs",
            {"200": _json({"type": "array", "items": _ref("FlowRun")})},
            body="Body_read_flow_runs_flow_runs_filter_post", tag="Flow Runs", description="Query for flow runs.")},
        "/flow_runs/count": {"post": _op(
            "count_flow_runs_flow_runs_count_post", "Count Flow Runs", {"200": count},
            body="Body_count_flow_runs_flow_runs_count_post", tag="Flow Runs", description="Query for flow runs.")},
    }
    return {"openapi": "3.1.0", "info": {"title": "Orchestrator", "version": "3.0.0",
                                         "description": "A workflow orchestration API in the style of Prefect's."},
            "servers": [{"url": base_url.rstrip("/") + "/api"}], "paths": paths,
            "components": {"schemas": _schemas()}}
