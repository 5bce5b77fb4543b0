"""The OpenAPI 3.1 document served at ``/api/v1/openapi.json``, generated from the route
table the gateway serves (``routes.py``, as starlette's schemas read its routes) and the
models the handlers answer with (``views.py``), parse queries with (``queries.py``) and report
errors with (``problems.py``): what is documented is what is sent.

Every schema is a component (pydantic's ``$defs`` hoisted into ``components.schemas``);
every operation has an ``operationId`` and lists each status it can answer, the guard's
refusals included (``guard.py``: 400 for a host not allowed, 403 cross-origin, 408 slow
body, 413 too large, 415 not JSON, 503 store unavailable, 500).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from pydantic import BaseModel, Field
from pydantic.json_schema import models_json_schema

from services.workflow_manager.routes import ACTION_LOG, REF, ROUTES, Route
from shared.events import Event, payload_models, payload_narrowing
from shared.problems import PROBLEM_JSON, Problem
from shared.workflow_parameters import ParameterDeclaration
from shared.workflow_spec import ExecutionDefaults, _RawAction

UNAUTHENTICATED_TEXT = "Credentials missing, malformed, unknown, revoked or expired (users on: docs/users.md)"
# What any route may answer: the guard's refusals and the failures nobody planned for.
COMMON_ERRORS = {
    400: "The Host is not allowed (PINGO_ALLOWED_HOSTS)",
    403: "A cross-origin request from an origin not in PINGO_CORS_ORIGINS",
    408: "The request body did not arrive in time",
    413: "The request body is larger than the limit",
    415: "The request body is not UTF-8 application/json",
    500: "An unexpected failure (logged with the reference given)",
    503: "The store is unavailable or too slow; try again after Retry-After",
}


class SubmittedAction(_RawAction):
    """One action as submitted, in either format (the parser's own model, under a public name)."""


class WorkflowDefinition(BaseModel):
    """What a submission's body holds; each action as the parser reads it (either format)."""

    name: str | None = None
    startActionId: int | str | None = None
    endActionId: int | str | None = None
    defaults: ExecutionDefaults | None = None
    parameters: dict[str, ParameterDeclaration] | None = Field(
        None, description="Declared parameters, referenced as {{name}} in string values (docs/planning.md)"
    )
    parameterValues: dict[str, str | int | float | bool] | None = Field(
        None, description="This submission's values, filled in before hashing; a declared default otherwise"
    )
    webhooks: list[str] | None = Field(
        None,
        description="Up to 5 http(s) URLs called when the workflow ends, on hosts the operator allows "
        "(PINGO_WEBHOOK_HOSTS); not part of any lineage hash (docs/webhooks.md)",
    )
    actions: list[SubmittedAction]


def _components() -> tuple[dict[tuple[type[BaseModel], str], dict[str, Any]], dict[str, Any]]:
    models: list[type[BaseModel]] = [
        op.ok[s][0] for op in ROUTES for s in op.ok if isinstance(op.ok[s][0], type)
    ]  # fmt: skip
    pairs = [(m, "serialization") for m in dict.fromkeys([*models, Problem, Event, *payload_models()])]
    pairs.append((WorkflowDefinition, "validation"))
    pairs += [(op.body, "validation") for op in ROUTES if isinstance(op.body, type)]
    refs, top = models_json_schema(pairs, ref_template=REF)  # type: ignore[arg-type]
    schemas = top.get("$defs", {})
    schemas["Event"]["allOf"] = payload_narrowing(REF)  # each type's payload (shared/events.py)
    return refs, schemas


def _parameters(op: Route, schemas: dict[str, Any]) -> list[dict[str, Any]]:
    out = [
        {"name": name, "in": "path", "required": True, "description": text, "schema": {"type": "string"}}
        for name, text in op.path_params
    ]
    out += [
        {"name": name, "in": "header", "required": False, "description": text, "schema": schema}
        for name, text, schema in op.header_params
    ]
    if op.query is None:
        return out
    whole = op.query.model_json_schema(ref_template=REF)
    for name, f in op.query.model_fields.items():
        public = f.alias or name
        # A parameter parsed from text (a time, a cursor) is documented as the text it is.
        extra = f.json_schema_extra if isinstance(f.json_schema_extra, dict) else None
        schema = dict(extra) if extra else _not_null(whole["properties"][public])
        description = schema.pop("description", None)
        schema.pop("title", None)
        param: dict[str, Any] = {"name": public, "in": "query", "required": False, "schema": schema}
        # Only the definitions a parameter refers to (an enum of states; not a cursor's insides).
        text = json.dumps(schema)
        schemas.update({k: v for k, v in whole.get("$defs", {}).items() if REF.format(model=k) in text})
        if description:
            param["description"] = description
        out.append(param)
    return out


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter is absent or a value, never null."""
    options = [o for o in schema.get("anyOf", []) if o != {"type": "null"}]
    if len(options) == 1:
        rest = {k: v for k, v in schema.items() if k != "anyOf" and not (k == "default" and v is None)}
        said = [t for t in (rest.get("description"), options[0].get("description")) if t]
        return {**options[0], **rest, **({"description": "; ".join(said)} if said else {})}
    return dict(schema)


def _problem(description: str, status: int, retry_after: bool = False) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description, "content": {PROBLEM_JSON: {"schema": _ref("Problem")}}}
    if status == 503 or retry_after:
        response["headers"] = {"Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}}}
    return response


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


@cache
def document() -> dict[str, Any]:
    refs, schemas = _components()
    schemas["ActionLog"] = ACTION_LOG
    paths: dict[str, dict[str, Any]] = {}
    for op in ROUTES:
        responses: dict[str, Any] = {}
        for status, (model, description) in op.ok.items():
            schema = refs[(model, "serialization")] if isinstance(model, type) else model
            response: dict[str, Any] = {"description": description, "content": {op.media_type: {"schema": schema}}}
            if status in op.headers:
                named = op.headers[status].items()
                response["headers"] = {n: {"description": text, "schema": {"type": "string"}} for n, text in named}
            responses[str(status)] = response
        guarded = op.path != "/healthz"
        for status in sorted({*COMMON_ERRORS, *op.errors, *([401] if guarded else [])}):
            if not guarded and status == 400:
                continue  # /healthz answers any Host
            if status == 401:
                responses["401"] = _problem(UNAUTHENTICATED_TEXT, 401)
                continue
            text = "; or ".join(t for t in (op.errors.get(status), COMMON_ERRORS.get(status)) if t)
            # A submission's 409 (its Idempotency-Key in flight) says when to retry.
            responses[str(status)] = _problem(text, status, retry_after=status == 409 and bool(op.header_params))
        operation: dict[str, Any] = {"operationId": op.operation_id, "summary": op.summary, "responses": responses}
        if not guarded:
            operation["security"] = []  # probes call it without credentials
        if params := _parameters(op, schemas):
            operation["parameters"] = params
        if op.body:
            body_schema = refs[(op.body if isinstance(op.body, type) else WorkflowDefinition, "validation")]
            operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body_schema}}}
        paths.setdefault(op.path, {})[op.method] = operation
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Pingo",
            "version": "1",
            "description": "Workflows computed once, outputs reused. Errors are RFC 9457 problem documents "
            "(application/problem+json); lists are paged with the opaque cursor in next.",
        },
        "paths": paths,
        # With users on (docs/users.md): an API token (pingo_...) or the identity provider's JWT.
        "security": [{"bearer": []}],
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "Needed once users exist"}
            },
        },
    }


def event_schema() -> dict[str, Any]:
    """The event envelope's JSON Schema, standalone (its own ``$defs``)."""
    return Event.model_json_schema()
