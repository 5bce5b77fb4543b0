"""The gateway's read side over real HTTP: listing with filters and cursors, storage usage
over every dataset, a dataset's provenance, the event schema."""

from __future__ import annotations

from typing import Any

from tests.support.system import Api
from tests.support.workflows import shell_action

WORKFLOWS = "/api/v1/workflows"
DATASETS = "/api/v1/datasets"


async def pages(api: Api, path: str, key: str, **params: str) -> list[list[dict[str, Any]]]:
    """Every page of a list, following ``next``."""
    out: list[list[dict[str, Any]]] = []
    cursor = None
    while True:
        status, body = await api.request("GET", path, params={**params, **({"cursor": cursor} if cursor else {})})
        assert status == 200, body
        out.append(body[key])
        cursor = body["next"]
        if cursor is None:
            return out
        assert len(out) < 50, "the cursor never ends"


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
    status, body = await system.request("GET", WORKFLOWS)
    assert status == 200 and [w["id"] for w in body["workflows"]] == [bad["id"], ok["id"]]
    assert body["next"] is None and body["workflows"][0]["href"] == f"{WORKFLOWS}/{bad['id']}"
    _, body = await system.request("GET", WORKFLOWS, params={"state": "FAILED"})
    assert [w["id"] for w in body["workflows"]] == [bad["id"]]
    _, body = await system.request("GET", WORKFLOWS, params={"name": "alpha"})
    assert [w["id"] for w in body["workflows"]] == [ok["id"]]
    _, body = await system.request("GET", WORKFLOWS, params={"limit": "1"})
    assert [w["id"] for w in body["workflows"]] == [bad["id"]] and body["next"]
    newest = body["workflows"][0]["createdAt"]
    _, body = await system.request("GET", WORKFLOWS, params={"limit": "1", "before": str(newest)})
    assert [w["id"] for w in body["workflows"]] == [ok["id"]]
    status, body = await system.request("GET", WORKFLOWS, params={"state": "DONE", "limit": "0"})
    assert status == 400 and [v["loc"] for v in body["violations"]] == ["state", "limit"], body
    assert "state must be one of PLANNING, RUNNING" in body["detail"]
    assert "limit must be an integer from 1 to 1000" in body["detail"]
    status, body = await system.request("GET", f"{WORKFLOWS}/wf-missing")
    assert status == 404 and body["detail"] == "no workflow 'wf-missing'" and body["status"] == 404


async def test_the_workflow_cursor_is_stable_under_inserts(system: Api) -> None:
    """Following ``next`` lists each workflow exactly once, even as new ones arrive: the
    cursor is a keyset (creation time, id), not an offset."""
    ids = [(await system.submit({"name": f"w{i}", "actions": [shell_action(1, f"page-{i}")]}))["id"] for i in range(5)]
    status, first = await system.request("GET", WORKFLOWS, params={"limit": "2"})
    assert status == 200 and [w["id"] for w in first["workflows"]] == ids[:-3:-1]
    late = (await system.submit({"name": "late", "actions": [shell_action(1, "page-late")]}))["id"]
    rest = await pages(system, WORKFLOWS, "workflows", limit="2", cursor=first["next"])
    seen = [w["id"] for w in first["workflows"]] + [w["id"] for page in rest for w in page]
    assert seen == ids[::-1] and late not in seen
    everything = await pages(system, WORKFLOWS, "workflows", limit="4")
    assert [w["id"] for page in everything for w in page] == [late, *ids[::-1]]
    assert [len(p) for p in everything] == [4, 2]


async def test_dataset_list_pages_and_counts_bytes_over_every_dataset(system: Api) -> None:
    wf = await system.run(
        {
            "name": "sizes",
            "actions": [
                shell_action(1, "bytes-a", size_kb=4),
                shell_action(2, "bytes-b", [1], size_kb=8),
                shell_action(3, "bytes-c", [1], size_kb=12),
            ],
        }
    )
    assert wf["state"] == "SUCCEEDED"
    stored = {d["_id"]: d async for d in system.db.datasets.find({})}
    expected: dict[str, int] = {}
    for d in stored.values():
        expected[d["state"]] = expected.get(d["state"], 0) + int(d.get("size") or 0)
    status, body = await system.request("GET", DATASETS, params={"limit": "1"})
    assert status == 200 and len(body["datasets"]) == 1 and body["next"]
    assert body["bytesByState"] == expected and sum(expected.values()) >= (4 + 8 + 12) * 1024
    listed = await pages(system, DATASETS, "datasets", limit="2")
    hashes = [d["hash"] for page in listed for d in page]
    assert sorted(hashes) == sorted(stored) and len(hashes) == len(set(hashes)) == 3
    for d in (d for page in listed for d in page):
        assert d["workflow"] == {"id": wf["id"], "name": "sizes", "href": f"{WORKFLOWS}/{wf['id']}"}, d
        assert d["producedBy"].startswith(wf["id"] + ".") and d["href"] == f"{DATASETS}/{d['hash']}"
    _, leaves = await system.request("GET", DATASETS, params={"state": "LEAF"})
    assert {d["hash"] for d in leaves["datasets"]} == {h for h, d in stored.items() if d["state"] == "LEAF"}
    assert leaves["bytesByState"] == expected  # usage is of the whole store, whatever the filter


async def test_a_dataset_shows_its_lineage_producer_consumers_and_history(system: Api) -> None:
    first = await system.run({"name": "maker", "actions": [shell_action(1, "prov-a"), shell_action(2, "prov-b", [1])]})
    second = await system.run({"name": "user", "actions": [shell_action(1, "prov-a"), shell_action(7, "prov-c", [1])]})
    assert first["state"] == second["state"] == "SUCCEEDED"
    by_local = {a["localId"]: a for a in second["actions"]}
    assert by_local[1]["decision"] == "reuse" and by_local[7]["decision"] == "compute"
    a_hash, b_hash = first["actions"][0]["hash"], first["actions"][1]["hash"]
    assert by_local[1]["hash"] == a_hash

    status, a = await system.request("GET", f"{DATASETS}/{a_hash}")
    assert status == 200, a
    assert a["hash"] == a_hash and a["state"] == "STORED" and a["parents"] == []
    assert a["lineage"]["parents"] == [] and a["lineage"]["definition"]
    maker = {"id": first["id"], "name": "maker", "href": f"{WORKFLOWS}/{first['id']}"}
    assert a["producer"]["id"] == f"{first['id']}.1" and a["producer"]["workflow"] == maker
    assert a["workflow"] == maker and [c["id"] for c in a["computations"]] == [f"{first['id']}.1"]
    relations = {(c["id"], c["relation"], c["workflow"]["name"]) for c in a["consumers"]}
    assert relations == {
        (f"{first['id']}.2", "read", "maker"),
        (f"{second['id']}.1", "reused", "user"),
        (f"{second['id']}.7", "read", "user"),
    }
    states = [h["state"] for h in a["history"]]
    assert states[:2] == ["TO_STORE", "STORED"] and all(h["at"] > 0 for h in a["history"])

    status, b = await system.request("GET", f"{DATASETS}/{b_hash}")
    assert status == 200 and b["parents"] == [a_hash] and b["state"] == "LEAF" and b["consumers"] == []
    assert b["producer"]["id"] == f"{first['id']}.2"

    status, missing = await system.request("GET", f"{DATASETS}/no-such-hash")
    assert status == 404 and missing["detail"] == "no dataset 'no-such-hash'"


async def test_event_schema_is_served(system: Api) -> None:
    status, schema = await system.request("GET", "/api/v1/events/schema")
    assert status == 200
    assert {"id", "type", "time", "producer", "subject", "payload", "schema_version"} <= set(schema["properties"])
