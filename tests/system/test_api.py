"""The gateway's read side: listing with filters, the OpenAPI document, the event schema."""

from __future__ import annotations

from tests.support.system import Api
from tests.support.workflows import shell_action


async def test_list_workflows_with_filters_and_paging(system: Api) -> None:
    ok = await system.run({"name": "alpha", "actions": [shell_action(1, "list-a")]})
    bad = await system.run(
        {
            "name": "beta",
            "actions": [
                {
                    "id": 1,
                    "name": "boom",
                    "type": "SHELL",
                    "actionFolder": "examples/jobs",
                    "command": ["python3", "fail.py"],
                }
            ],
        }
    )
    status, body = await system.request("GET", "/api/v1/workflows")
    assert status == 200 and [w["id"] for w in body["workflows"]] == [bad["id"], ok["id"]]
    _, body = await system.request("GET", "/api/v1/workflows", params={"state": "FAILED"})
    assert [w["id"] for w in body["workflows"]] == [bad["id"]]
    _, body = await system.request("GET", "/api/v1/workflows", params={"name": "alpha"})
    assert [w["id"] for w in body["workflows"]] == [ok["id"]]
    _, body = await system.request("GET", "/api/v1/workflows", params={"limit": "1"})
    assert [w["id"] for w in body["workflows"]] == [bad["id"]]
    newest = body["workflows"][0]["createdAt"]
    _, body = await system.request("GET", "/api/v1/workflows", params={"limit": "1", "before": str(newest)})
    assert [w["id"] for w in body["workflows"]] == [ok["id"]]
    status, body = await system.request("GET", "/api/v1/workflows", params={"state": "DONE", "limit": "0"})
    assert status == 400
    assert "state must be one of" in body["error"] and "limit must be an integer from 1 to 1000" in body["error"]
    status, body = await system.request("GET", "/api/v1/workflows/wf-missing")
    assert status == 404 and body == {"error": "no workflow 'wf-missing'"}


async def test_openapi_and_event_schema_are_served(system: Api) -> None:
    status, doc = await system.request("GET", "/api/v1/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.")
    assert {"/api/v1/workflows", "/api/v1/workflows/{id}", "/api/v1/workflows/{id}/kill"} <= set(doc["paths"])
    assert set(doc["paths"]["/api/v1/workflows"]["post"]["responses"]) >= {"201", "400", "413", "422"}
    status, schema = await system.request("GET", "/api/v1/events/schema")
    assert status == 200
    assert {"id", "type", "time", "producer", "subject", "payload", "schema_version"} <= set(schema["properties"])
