"""The gateway's routes, one table: the router serves it (``service.py``, through
``definitions``) and the OpenAPI document tells it (``openapi.py``), so no route can be
served undocumented or documented unserved. Each route names its handler and what it
answers: the models of its bodies, its statuses, its parameters.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from pydantic import BaseModel

from services.workflow_manager import curation, dry_run, queries, views
from shared.runtime import health

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
REF = "#/components/schemas/{model}"
API = "/api/v1"


@dataclass(frozen=True)
class Route:
    """One route: what serves it and how the OpenAPI document tells it (``openapi.py``)."""

    method: str
    path: str
    # A method of the workflow manager, by name (bound to the running one by ``definitions``),
    # or a handler of its own.
    endpoint: str | Handler
    operation_id: str
    summary: str
    ok: dict[int, tuple[type[BaseModel] | dict[str, Any], str]]
    errors: dict[int, str] = field(default_factory=dict)
    query: type[queries.Query] | None = None
    path_params: tuple[tuple[str, str], ...] = ()
    # True: a workflow (WorkflowDefinition); a model: a body of that model.
    body: bool | type[BaseModel] = False
    headers: dict[int, dict[str, str]] = field(default_factory=dict)
    media_type: str = "application/json"
    header_params: tuple[tuple[str, str, dict[str, Any]], ...] = ()  # name, description, schema


WF_ID = (("id", "The workflow's id (wf-...)"),)
HASH = (("hash", "The dataset's lineage hash"),)
EVENT_SCHEMA = {"type": "object", "description": "A JSON Schema (draft 2020-12) of the event envelope"}
# An action's log: text/plain, the bytes as its job wrote them (not necessarily UTF-8).
ACTION_LOG = {
    "type": "string",
    "description": "The log's bytes as the job wrote them, in order (text/plain; "
    "charset=utf-8, though a job may write bytes that are not UTF-8)",
}

# Every route the gateway serves, in the order of the router and of the document.
ROUTES: tuple[Route, ...] = (
    Route(
        "post", f"{API}/workflows", "post_workflow", "submitWorkflow", "Submit a workflow (thesis or generator format)",
        ok={201: (views.Plan, "Accepted, with the plan of every action"),
            200: (dry_run.DryRun, "dryRun=true: the plan a submission would make now; nothing written")},
        errors={400: "Malformed JSON, or nested too deeply, or bad query parameters, or a malformed Idempotency-Key",
                409: "A submission with this Idempotency-Key is still being planned: retry after Retry-After",
                422: "The workflow breaks rules (every violation listed), or its Idempotency-Key was used for "
                     "another body",
                503: "Planning was abandoned (submit again), or the store is unavailable"},
        body=True, query=dry_run.SubmitQuery,
        headers={201: {"Location": "The new workflow's URL",
                       "Idempotent-Replayed": "true when this answers a retry: the workflow its key made before"}},
        header_params=((
            "Idempotency-Key",
            "Makes a retry safe: a submission repeated with the same key, by the same user and with the same body, "
            "within PINGO_IDEMPOTENCY_SECONDS (a day by default), answers the workflow the first one made (201, "
            "same body) and makes no other. A string of 1 to 255 printable ASCII characters, quoted or not; a "
            "UUID per submission. Ignored by a dry run.",
            {"type": "string", "minLength": 1, "maxLength": 257},
        ),),
    ),
    Route(
        "get", f"{API}/workflows", "list_workflows", "listWorkflows", "List workflows, newest first",
        ok={200: (views.WorkflowList, "One page of workflows")},
        errors={400: "Bad query parameters; every one listed"}, query=queries.WorkflowQuery,
    ),
    Route(
        "get", f"{API}/workflows/{{id}}", "get_workflow", "getWorkflow", "A workflow with every action",
        ok={200: (views.WorkflowDetail, "The workflow")}, errors={404: "No such workflow"}, path_params=WF_ID,
    ),
    Route(
        "post", f"{API}/workflows/{{id}}/kill", "kill_workflow", "killWorkflow", "Kill a workflow",
        ok={202: (views.Workflow, "Kill recorded; it is applied in the background")},
        errors={404: "No such workflow", 409: "The workflow has already ended"}, path_params=WF_ID,
    ),
    Route(
        "get", f"{API}/workflows/{{id}}/timeline", "get_timeline", "getWorkflowTimeline",
        "Every transition of a workflow, its actions and their datasets, in time order",
        ok={200: (views.Timeline, "One page of the timeline")},
        errors={400: "Bad query parameters; every one listed", 404: "No such workflow"},
        query=queries.TimelineQuery, path_params=WF_ID,
    ),
    Route(
        "get", f"{API}/actions/{{id}}/logs", "get_action_logs", "getActionLogs",
        "An attempt's standard output or error, streamed (with follow=true, until the attempt ends)",
        ok={200: ({"$ref": REF.format(model="ActionLog")}, "The log")},
        errors={400: "Bad query parameters; every one listed",
                404: "No such action, no such attempt, or the action never ran (REUSED, SKIPPED, WAITING)",
                403: "The attempt's job was started by another user's action and adopted by a takeover "
                     "(a shared computation, docs/users.md): its logs are theirs",
                410: "The attempt's logs were removed (job retention, or purged by Oozie)",
                502: "The executor (Oozie) could not be asked for the logs"},
        query=queries.LogQuery, path_params=(("id", "The action's id (actions[].id of a workflow)"),),
        media_type="text/plain",  # sent with charset=utf-8
    ),
    Route(
        "get", f"{API}/datasets", "list_datasets", "listDatasets",
        "Storage usage and datasets, most recently changed first",
        ok={200: (views.DatasetList, "Usage, and one page of datasets")},
        errors={400: "Bad query parameters; every one listed"}, query=queries.DatasetQuery,
    ),
    Route(
        "get", f"{API}/datasets/{{hash}}", "get_dataset", "getDataset",
        "A dataset with its lineage, producer, consumers and history",
        ok={200: (views.DatasetDetail, "The dataset")}, errors={404: "No such dataset"},
        path_params=HASH,
    ),
    Route(
        "delete", f"{API}/datasets/{{hash}}", "delete_dataset", "deleteDataset",
        "Delete a dataset (a final output too): it is never reused again and its files go at once",
        ok={202: (views.Dataset, "Withdrawn (INVALIDATED); a dataset manager deletes its files")},
        errors={404: "No such dataset, or not yours (owner or admin only)",
                409: "A workflow still needs it (it claims or computes it): delete it once they end"},
        path_params=HASH,
    ),
    Route(
        "post", f"{API}/datasets/{{hash}}/invalidate", "invalidate_dataset", "invalidateDataset",
        "Invalidate a dataset: its next use computes it again; its files go once nothing needs them",
        ok={200: (curation.Invalidation, "Withdrawn from reuse")},
        errors={400: "Bad query parameters; every one listed",
                404: "No such dataset, or not yours (owner or admin only)",
                409: "It is being computed: invalidate it once it is stored"},
        query=curation.InvalidateQuery, path_params=HASH,
    ),
    Route(
        "patch", f"{API}/datasets/{{hash}}", "patch_dataset", "patchDataset",
        "Pin or unpin a dataset, or set or remove its expiry date",
        ok={200: (views.Dataset, "The dataset as changed")},
        errors={400: "Malformed JSON", 404: "No such dataset, or not yours (owner or admin only)",
                422: "A field that is not pinned or expiresAt, or a value of the wrong type"},
        path_params=HASH, body=curation.DatasetPatch,
    ),
    Route(
        "get", f"{API}/history/stats", "history_stats", "getHistoryStats", "Usage statistics per time bucket",
        ok={200: (views.HistoryStats, "Buckets and totals")},
        errors={400: "Bad query parameters; every one listed"}, query=queries.StatsQuery,
    ),
    Route(
        "get", f"{API}/openapi.json", "get_openapi", "getOpenApi", "This document",
        ok={200: ({"type": "object", "description": "OpenAPI 3.1"}, "The OpenAPI document")},
    ),
    Route(
        "get", f"{API}/events/schema", "get_event_schema", "getEventSchema", "The JSON Schema of the event envelope",
        ok={200: (EVENT_SCHEMA, "The schema")},
    ),
    Route(
        "get", "/healthz", health, "health", "Liveness (answers any Host)", ok={200: (views.Health, "Alive")},
    ),
)  # fmt: skip


def definitions(gateway: object) -> list[web.RouteDef]:
    """The routes as aiohttp serves them, each named endpoint a method of ``gateway``; a
    GET answers HEAD too."""
    out = []
    for route in ROUTES:
        handler = getattr(gateway, route.endpoint) if isinstance(route.endpoint, str) else route.endpoint
        if route.method == "get":
            out.append(web.get(route.path, handler))
        else:
            out.append(web.route(route.method.upper(), route.path, handler))
    return out
