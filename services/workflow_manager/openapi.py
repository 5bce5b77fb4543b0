"""The OpenAPI document served at ``/api/v1/openapi.json``."""

from __future__ import annotations

from typing import Any

from shared.events import Event
from shared.workflow_spec import Violation


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def document() -> dict[str, Any]:
    errors = {
        "400": _json(_ref("Error"), "Malformed JSON"),
        "413": _json(_ref("Error"), "Body larger than the configured limit"),
        "422": _json(_ref("Rejection"), "The workflow breaks rules; every violation listed"),
    }
    wf_id = [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]
    return {
        "openapi": "3.1.0",
        "info": {"title": "Pingo", "version": "1", "description": "Workflows computed once, outputs reused."},
        "paths": {
            "/api/v1/workflows": {
                "post": {
                    "summary": "Submit a workflow (thesis or generator format)",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": _ref("WorkflowDefinition")}},
                    },
                    "responses": {"201": _json(_ref("Plan"), "Accepted, with the plan"), **errors},
                },
                "get": {
                    "summary": "List workflows",
                    "parameters": [
                        {"name": "state", "in": "query", "schema": {"type": "string"}},
                        {"name": "name", "in": "query", "schema": {"type": "string"}},
                        {"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 1000}},
                        {
                            "name": "before",
                            "in": "query",
                            "schema": {"type": "number"},
                            "description": "Only workflows created before this Unix time (paging)",
                        },
                    ],
                    "responses": {"200": _json({"type": "object"}, "Workflows, newest first")},
                },
            },
            "/api/v1/workflows/{id}": {
                "get": {
                    "summary": "A workflow with every action",
                    "parameters": wf_id,
                    "responses": {
                        "200": _json({"type": "object"}, "The workflow"),
                        "404": _json(_ref("Error"), "No such workflow"),
                    },
                }
            },
            "/api/v1/workflows/{id}/kill": {
                "post": {
                    "summary": "Kill a workflow",
                    "parameters": wf_id,
                    "responses": {
                        "202": _json({"type": "object"}, "Kill under way"),
                        "404": _json(_ref("Error"), "No such workflow"),
                        "409": _json(_ref("Error"), "Already ended"),
                    },
                }
            },
            "/api/v1/workflows/{id}/timeline": {
                "get": {
                    "summary": "Every transition, in time order",
                    "parameters": wf_id,
                    "responses": {"200": _json({"type": "object"}, "Timeline")},
                }
            },
            "/api/v1/datasets": {
                "get": {
                    "summary": "Datasets",
                    "parameters": [{"name": "state", "in": "query", "schema": {"type": "string"}}],
                    "responses": {
                        "200": _json(
                            {"type": "object"},
                            "Storage usage (capacityBytes, threshold, managedRootBytes, bytesByState) and datasets, "
                            "most recently changed first: hash, state, path, size, files and checksum (as recorded "
                            "at commit), committedAt, computeSeconds, computeCount, useCount, claims, producers",
                        )
                    },
                }
            },
            "/api/v1/history/stats": {
                "get": {
                    "summary": "History statistics per time bucket (kept as transitions happen)",
                    "parameters": [
                        {"name": "resolution", "in": "query", "schema": {"enum": ["1m", "30m", "1d", "10d"]}},
                        {
                            "name": "from",
                            "in": "query",
                            "schema": {"type": "string"},
                            "description": "ISO 8601 or Unix seconds; default: a day before to",
                        },
                        {"name": "to", "in": "query", "schema": {"type": "string"}, "description": "default: now"},
                    ],
                    "responses": {
                        "200": _json(
                            {"type": "object"},
                            "buckets (start, end, workflows_submitted, actions_computed, "
                            "actions_reused, actions_skipped, compute_seconds, saved_seconds, bytes_written, "
                            "bytes_deleted, failures by reason) and totals",
                        ),
                        "400": _json(_ref("Error"), "Bad parameters, every problem listed"),
                    },
                }
            },
            "/api/v1/events/schema": {
                "get": {
                    "summary": "JSON Schema of the event envelope",
                    "responses": {"200": _json({"type": "object"}, "Schema")},
                }
            },
        },
        "components": {
            "schemas": {
                "Error": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]},
                "Violation": Violation.model_json_schema(),
                "Rejection": {
                    "type": "object",
                    "properties": {
                        "error": {"type": "string"},
                        "violations": {"type": "array", "items": _ref("Violation")},
                    },
                },
                "WorkflowDefinition": {
                    "type": "object",
                    "required": ["actions"],
                    "properties": {
                        "name": {"type": "string"},
                        "startActionId": {},
                        "endActionId": {},
                        "actions": {"type": "array", "items": {"type": "object"}},
                    },
                },
                "Plan": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "state": {"type": "string"},
                        "actions": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "id": {"type": "string"},
                                    "localId": {},
                                    "name": {"type": "string"},
                                    "hash": {"type": "string"},
                                    "decision": {"enum": ["compute", "reuse"]},
                                    "reason": {
                                        "type": "string",
                                        "description": "stored, in_flight (follows another computation), "
                                        "feeds_only_reused, not_stored, forced, unmanaged; later takeover, "
                                        "replanned, or why it ended",
                                    },
                                    "follows": {
                                        "type": "string",
                                        "description": "FOLLOWING: the action whose computation it waits for",
                                    },
                                    "outputPath": {"type": "string"},
                                },
                            },
                        },
                    },
                },
                "Event": Event.model_json_schema(),
            }
        },
    }
