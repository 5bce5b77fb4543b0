"""Datasets by hand (docs/api.md, "Datasets by hand"): delete, invalidate, pin, unpin and
expire, against the five services in process; owner or admin only, each recorded with who
did it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from pingo.dev import all_services
from shared.lifecycle import curating
from shared.runtime import Context, running
from shared.store import datasets as ds
from tests.support.gates import Gate
from tests.support.system import Api, make_settings
from tests.support.workflows import decisions, shell_action
from tests.system.test_users import start_team

KB = 1024


def pair(prefix: str, seconds: float = 0.0, gate: Gate | None = None) -> dict[str, Any]:
    """``gate``: the leaf (the mid's reader) runs until the test opens it."""
    leaf = shell_action(
        2, f"{prefix}-leaf", [1], seconds=seconds, **({"configurationParameters": gate.conf} if gate else {})
    )
    return {"name": prefix, "actions": [shell_action(1, f"{prefix}-mid"), leaf]}


async def eventually(predicate: Callable[[], Awaitable[bool]], timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while not await predicate():
        assert time.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.2)


async def state_of(api: Api, h: str) -> str:
    return (await api.db.datasets.find_one({"_id": h}, {"state": 1}))["state"]


async def history(api: Api, h: str) -> list[dict[str, Any]]:
    status, body = await api.request("GET", f"/api/v1/datasets/{h}")
    assert status == 200, body
    return body["history"]


async def becomes(api: Api, h: str, state: str, timeout: float = 30.0) -> None:
    async def there() -> bool:
        return await state_of(api, h) == state

    await eventually(there, timeout)


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str):
    return make_settings(tmp_path, mongo_url, expiry_interval=0.3)


@pytest.fixture
async def team(tmp_path: Path, mongo_url: str):
    """The services with users alice, bob and the admin root: an Api for each."""
    settings = make_settings(tmp_path, mongo_url, auth_cache_seconds=0.5, output_roots=[tmp_path / "home" / "{user}"])
    ctx, tokens = await start_team(settings)
    async with running(ctx, all_services):
        apis = {name: Api(settings, token=token) for name, token in tokens.items()}
        for api in apis.values():
            await api.open()
        yield apis
        for api in apis.values():
            await api.close()


async def test_the_owner_deletes_a_final_output_others_get_404_and_the_timeline_names_who(team: dict) -> None:
    alice, bob, root = team["alice"], team["bob"], team["root"]
    wf = await alice.run(pair("del"))
    mid, leaf = (a["hash"] for a in wf["actions"])
    leaf_path = Path(wf["actions"][1]["outputPath"])
    assert await state_of(alice, leaf) == "LEAF" and leaf_path.is_dir()
    # bob may read the shared dataset but not change it: to him it does not exist.
    for method, path, kw in [
        ("DELETE", f"/api/v1/datasets/{leaf}", {}),
        ("POST", f"/api/v1/datasets/{leaf}/invalidate", {}),
        ("PATCH", f"/api/v1/datasets/{leaf}", {"json": {"pinned": True}}),
    ]:
        status, body = await bob.request(method, path, **kw)
        assert status == 404 and body["status"] == 404, (method, body)
        _, missing = await bob.request(method, path.replace(leaf, "0" * 64), **kw)
        assert body["detail"] == missing["detail"].replace("0" * 64, leaf)
    assert await state_of(alice, leaf) == "LEAF"
    for api, may in ((alice, True), (bob, False), (root, True)):
        status, shown = await api.request("GET", f"/api/v1/datasets/{leaf}")
        assert status == 200 and shown["canChange"] is may
    status, body = await alice.request("DELETE", f"/api/v1/datasets/{leaf}")
    assert status == 202 and body["state"] == "INVALIDATED" and body["withdrawnBy"] == "user alice", body
    await becomes(alice, leaf, "DELETED")
    assert not leaf_path.exists()
    # The admin may delete alice's intermediate too; the timeline says who did what.
    status, body = await root.request("DELETE", f"/api/v1/datasets/{mid}")
    assert status == 202, body
    await becomes(alice, mid, "DELETED")
    status, tl = await alice.request("GET", f"/api/v1/workflows/{wf['id']}/timeline")
    assert status == 200
    rows = {(r["id"], r["state"], r["by"]) for r in tl["transitions"] if r["kind"] == "dataset"}
    assert (leaf, "INVALIDATED", "user alice") in rows and (mid, "INVALIDATED", "user root") in rows
    status, detail = await alice.request("GET", f"/api/v1/datasets/{leaf}")
    assert [h["by"] for h in detail["history"] if h["state"] == "INVALIDATED"] == ["user alice"]
    # Deleting what is gone changes nothing; the next use computes it again.
    status, body = await alice.request("DELETE", f"/api/v1/datasets/{leaf}")
    assert status == 202 and body["state"] == "DELETED"
    again = await alice.submit(pair("del"))
    assert decisions(again) == {1: "compute", 2: "compute"}
    assert (await alice.wait(again["id"]))["state"] == "SUCCEEDED"


async def test_delete_is_refused_with_409_while_a_workflow_needs_the_dataset(system: Api) -> None:
    plan = await system.submit(pair("held", seconds=60))
    mid = plan["actions"][0]["hash"]
    await becomes(system, mid, "STORED")  # its reader (action 2) still runs: it claims it
    status, body = await system.request("DELETE", f"/api/v1/datasets/{mid}")
    assert status == 409 and body["type"] == "tag:pingo,2026:problems/dataset-needed", body
    assert "still needed" in body["detail"] and body["instance"] == f"/api/v1/datasets/{mid}"
    assert await state_of(system, mid) == "STORED"
    # Its reader's own output is being computed: neither deleted nor invalidated meanwhile.
    leaf = plan["actions"][1]["hash"]
    for method, path in (("DELETE", f"/api/v1/datasets/{leaf}"), ("POST", f"/api/v1/datasets/{leaf}/invalidate")):
        status, body = await system.request(method, path)
        assert status == 409 and "being computed" in body["detail"], body
    status, _ = await system.request("POST", f"/api/v1/workflows/{plan['id']}/kill")
    assert status == 202
    await system.wait(plan["id"])

    async def released() -> bool:
        return not (await system.db.datasets.find_one({"_id": mid}))["claims"]

    await eventually(released)
    status, body = await system.request("DELETE", f"/api/v1/datasets/{mid}")
    assert status == 202, body
    await becomes(system, mid, "DELETED")


async def test_invalidate_forces_a_recomputation_of_it_and_of_its_descendants(system: Api) -> None:
    wf = await system.run(pair("inv"))
    mid, leaf = (a["hash"] for a in wf["actions"])
    # Alone, the leaf: its next use computes it, and its old files are replaced.
    status, body = await system.request("POST", f"/api/v1/datasets/{leaf}/invalidate")
    assert status == 200 and body["invalidated"] == [leaf] and body["dataset"]["state"] == "INVALIDATED", body
    # The dry run says why it is not reused, and who withdrew it.
    status, dry = await system.request("POST", "/api/v1/workflows?dryRun=true", json=pair("inv"))
    assert status == 200, dry
    explained = {a["localId"]: a["explanation"] for a in dry["actions"]}
    assert explained[2] == "its dataset was invalidated by user", explained
    again = await system.submit(pair("inv"))
    assert decisions(again) == {1: "reuse", 2: "compute"}
    assert (await system.wait(again["id"]))["state"] == "SUCCEEDED"
    doc = await system.db.datasets.find_one({"_id": leaf})
    assert doc["state"] == "LEAF" and doc["compute_count"] == 2 and "withdrawn" not in doc
    assert (Path(doc["path"]) / "part-00000").is_file()
    # With its descendants: both are computed again, and nothing reuses them meanwhile.
    status, body = await system.request("POST", f"/api/v1/datasets/{mid}/invalidate?descendants=true")
    assert status == 200 and body["invalidated"] == [mid, leaf], body
    third = await system.submit(pair("inv"))
    assert decisions(third) == {1: "compute", 2: "compute"}
    assert (await system.wait(third["id"]))["state"] == "SUCCEEDED"
    assert (await system.db.datasets.find_one({"_id": mid}))["compute_count"] == 2
    assert (await system.db.datasets.find_one({"_id": leaf}))["compute_count"] == 3
    status, body = await system.request("POST", f"/api/v1/datasets/{mid}/invalidate?descendant=1")
    assert status == 400 and body["violations"][0]["loc"] == "descendant"


async def test_an_invalidated_dataset_keeps_its_files_while_claimed_then_they_go(system: Api, gate: Gate) -> None:
    plan = await system.submit(pair("drain", gate=gate))
    mid = plan["actions"][0]["hash"]
    await becomes(system, mid, "STORED")
    status, body = await system.request("POST", f"/api/v1/datasets/{mid}/invalidate")
    assert status == 200 and body["dataset"]["claims"], body
    path = Path(body["dataset"]["path"])
    assert path.is_dir()  # its reader still needs it
    gate.open()
    assert (await system.wait(plan["id"]))["state"] == "SUCCEEDED"
    await becomes(system, mid, "DELETED")
    assert not path.exists()


async def test_expired_datasets_are_deleted_once_nothing_needs_them(system: Api) -> None:
    wf = await system.run(pair("exp"))
    mid, leaf = (a["hash"] for a in wf["actions"])
    soon = time.time() + 1
    status, body = await system.request("PATCH", f"/api/v1/datasets/{leaf}", json={"expiresAt": soon})
    assert status == 200 and body["expiresAt"] == pytest.approx(soon), body
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    status, body = await system.request("PATCH", f"/api/v1/datasets/{mid}", json={"expiresAt": iso})
    assert status == 200 and body["expiresAt"] > time.time() + 3000
    await becomes(system, leaf, "DELETED")
    notes = [(h["state"], h["by"], h["note"] or "") for h in await history(system, leaf)]
    assert any(s == "INVALIDATED" and by == "dataset_manager" and n.startswith("expired") for s, by, n in notes)
    assert any(s == "LEAF" and by == "user" and n.startswith("expires at") for s, by, n in notes), notes
    assert await state_of(system, mid) == "STORED"  # not yet due
    status, body = await system.request("PATCH", f"/api/v1/datasets/{mid}", json={"expiresAt": None})
    assert status == 200 and body["expiresAt"] is None
    status, body = await system.request("PATCH", f"/api/v1/datasets/{mid}", json={"pinned": "yes", "size": 1})
    assert status == 422 and {v["loc"] for v in body["violations"]} == {"pinned", "size"}, body


async def test_a_pinned_dataset_is_never_evicted_under_pressure(tmp_path: Path, mongo_url: str) -> None:
    settings = make_settings(tmp_path, mongo_url, capacity_bytes=200 * KB, threshold=0.9, target=0.8)
    ctx = await Context.open(settings)
    async with running(ctx, all_services):
        api = Api(settings)
        await api.open()
        try:
            first = await api.run(chain("keep", 2, 64))
            kept = first["actions"][0]["hash"]
            status, body = await api.request("PATCH", f"/api/v1/datasets/{kept}", json={"pinned": True})
            assert status == 200 and body["pinned"] is True, body
            wf = await api.run(chain("press", 7, 64))  # six 64 KB intermediates: 448 KB with the pinned one
            assert wf["state"] == "SUCCEEDED"

            async def evicted() -> bool:
                stored = [d async for d in api.db.datasets.find({"state": "STORED"})]
                pending = await api.db.datasets.count_documents(
                    {"state": {"$in": ["STORED_TO_DELETE", "PROCESSING", "DELETING"]}}
                )
                return not pending and sum(d["size"] for d in stored) <= settings.threshold * settings.capacity_bytes

            await eventually(evicted)
            assert await api.db.datasets.count_documents({"state": "DELETED"}) >= 3
            doc = await api.db.datasets.find_one({"_id": kept})
            assert doc["state"] == "STORED" and doc["pinned"]
            assert [h["note"] for h in await history(api, kept) if h["note"] == "pinned"] == ["pinned"]
            status, body = await api.request("PATCH", f"/api/v1/datasets/{kept}", json={"pinned": False})
            assert status == 200 and body["pinned"] is False
            status, listing = await api.request("GET", "/api/v1/datasets")
            by_state = listing["bytesByState"]
            assert listing["usedBytes"] >= by_state.get("STORED", 0) + by_state.get("LEAF", 0) > by_state["STORED"]
        finally:
            await api.close()


def chain(prefix: str, n: int, size_kb: int) -> dict[str, Any]:
    return {
        "name": prefix,
        "actions": [shell_action(i, f"{prefix}-{i}", [i - 1] if i else [], size_kb=size_kb) for i in range(n)],
    }


async def test_retention_makes_an_unused_final_output_an_ordinary_candidate(tmp_path: Path, mongo_url: str) -> None:
    settings = make_settings(tmp_path, mongo_url, expiry_interval=0.3, leaf_retention_days=1 / 86_400)
    ctx = await Context.open(settings)
    async with running(ctx, all_services):
        api = Api(settings)
        await api.open()
        try:
            wf = await api.run(pair("ret"))
            leaf = wf["actions"][1]["hash"]
            await becomes(api, leaf, "STORED")
            assert (await history(api, leaf))[-1]["note"].startswith("retention: unused for")
        finally:
            await api.close()


async def test_a_sweep_batch_of_datasets_still_needed_does_not_starve_the_rest(
    tmp_path: Path, mongo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More expired datasets still claimed, and more unused pinned leaves, than a sweep's
    batch, all before the free ones in hash order: one sweep still reaches the free ones."""
    monkeypatch.setattr(curating, "SWEEP_BATCH", 3)
    ctx = await Context.open(make_settings(tmp_path, mongo_url))
    try:
        now, day = time.time(), 86_400.0

        def leaf(h: str, **fields: Any) -> dict[str, Any]:
            doc = ds.new_document(h, {"definition": "{}", "parents": []}, f"/x/{h}", "wf-old.1", True, "test", [], now)
            return {**doc, "state": "LEAF", "producers": [], "size": 1, "last_used_at": now - 3 * day, **fields}

        needed = [leaf(f"a{i}", expires_at=now - 60, claims=[f"wf-busy.{i}"]) for i in range(7)]
        pinned = [leaf(f"b{i}", pinned=True) for i in range(7)]
        free = [leaf("z-expired", expires_at=now - 60), leaf("z-unused")]
        await ctx.store.datasets.insert_many([*needed, *pinned, *free])
        moved = await curating.Curator(ctx.store, ctx.mover("dataset_manager")).sweep("dataset_manager", day, now)
        states = {d["_id"]: d["state"] async for d in ctx.store.datasets.find({}, {"state": 1})}
        assert moved == 2
        assert states["z-expired"] == "INVALIDATED" and states["z-unused"] == "STORED"
        assert {states[d["_id"]] for d in needed + pinned} == {"LEAF"}
    finally:
        await ctx.close()
