"""Decision service + dataset manager: storage is kept in budget, and nothing claimed or
LEAF is ever deleted. The decision algorithms alone: tests/unit/test_storage_budget.py."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.support.system import Api, make_settings
from tests.support.workflows import shell_action

KB = 1024


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str):
    return make_settings(tmp_path, mongo_url, capacity_bytes=200 * KB, threshold=0.9, target=0.8)


def chain(prefix: str, n: int, size_kb: int, seconds: float = 0.0) -> dict:
    return {
        "name": prefix,
        "actions": [
            shell_action(i, f"{prefix}-{i}", [i - 1] if i else [], seconds=seconds, size_kb=size_kb) for i in range(n)
        ],
    }


async def stored_bytes(api: Api) -> int:
    return sum([int(d.get("size") or 0) async for d in api.db.datasets.find({"state": "STORED"})])


async def eventually(predicate, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while not await predicate():
        assert time.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.2)


async def test_usage_is_brought_under_threshold_and_leaves_survive(system: Api) -> None:
    s = system.settings
    wf = await system.run(chain("budget", 7, 64))  # six 64 KB intermediates, one leaf
    assert wf["state"] == "SUCCEEDED"

    async def under() -> bool:
        return (
            await stored_bytes(system) <= s.threshold * s.capacity_bytes
            and await system.db.datasets.count_documents(
                {"state": {"$in": ["STORED_TO_DELETE", "PROCESSING", "DELETING"]}}
            )
            == 0
        )

    await eventually(under)
    deleted = [d async for d in system.db.datasets.find({"state": "DELETED"})]
    assert len(deleted) >= 3  # 384 KB stored; at most 160 KB (the target) may remain
    for d in deleted:
        assert not Path(d["path"]).exists()
    # Each deletion was announced with who chose it and why, and where it was.
    events = {(e.type.value, e.subject.dataset_hash): e.payload for e in system.ctx.bus.published}
    for d in deleted:
        marked = events[("dataset.marked", d["_id"])]
        assert marked["algorithm"] == s.algorithm and marked["reason"] == "over_threshold"
        assert marked["rank"] >= 1 and marked["usage_bytes"] > s.threshold * s.capacity_bytes
        assert marked["path"] == d["path"] and marked["size"] == d["size"]
        assert events[("dataset.deleted", d["_id"])] == {"path": d["path"], "size": d["size"]}
    leaf = await system.db.datasets.find_one({"_id": wf["actions"][-1]["hash"]})
    assert leaf["state"] == "LEAF" and (Path(leaf["path"]) / "part-00000").is_file()
    for d in [d async for d in system.db.datasets.find({"state": "STORED"})]:
        assert (Path(d["path"]) / "part-00000").is_file()

    # What was deleted is computed again when asked for; what is stored is reused.
    again = await system.run(chain("budget", 7, 64))
    assert again["state"] == "SUCCEEDED"
    assert {a["decision"] for a in again["actions"]} == {"reuse"}
    leaf_only = chain("budget", 7, 64)
    leaf_only["actions"][-1]["forceComputation"] = True
    forced = await system.run(leaf_only)
    assert forced["state"] == "SUCCEEDED"


async def test_claimed_dataset_is_not_deleted_while_its_reader_waits(system: Api) -> None:
    seed = await system.run(
        {
            "name": "seed",
            "actions": [shell_action(1, "claim-r", size_kb=150), shell_action(2, "claim-leaf", [1], size_kb=1)],
        }
    )
    r_hash = seed["actions"][0]["hash"]
    # With 150 KB stored against a 180 KB threshold nothing happens yet; this workflow adds
    # a slow 150 KB action, and its child reads both that and the stored R (a claim).
    plan = await system.submit(
        {
            "name": "reader",
            "actions": [
                shell_action(1, "claim-slow", seconds=3.0, size_kb=150),
                shell_action(2, "claim-r", size_kb=150),
                shell_action(3, "claim-reader", [1, 2], size_kb=1),
            ],
        }
    )
    assert {a["localId"]: a["decision"] for a in plan["actions"]} == {1: "compute", 2: "reuse", 3: "compute"}
    r = await system.db.datasets.find_one({"_id": r_hash})
    assert r["claims"] == [f"{plan['id']}.3"]
    # Watch R while its reader waits for the slow parent: over budget all along, but claimed.
    seen = set()
    while (wf := await system.workflow(plan["id"]))["state"] == "RUNNING":
        r = await system.db.datasets.find_one({"_id": r_hash})
        seen.add(r["state"])
        assert (Path(r["path"]) / "part-00000").is_file()
        await asyncio.sleep(0.1)
    assert wf["state"] == "SUCCEEDED"
    assert seen == {"STORED"}
    left = [
        (d["_id"][:8], d["state"], d["claims"]) async for d in system.db.datasets.find({"claims.0": {"$exists": True}})
    ]
    assert left == []
    # Once no one claims them, the over-budget intermediates are deleted: the claim was the only protection.
    await eventually(lambda: _stored_under(system))


async def _stored_under(system: Api) -> bool:
    return await stored_bytes(system) <= system.settings.threshold * system.settings.capacity_bytes
