"""The storage budget on the Hadoop path (the emulator: Oozie executor, WebHDFS storage;
docs/operations.md, "Storage budget"): an attempt reserves room for its output before its
Oozie job is submitted, a first run reserves what its largest input weighs, and an action
with no room stays READY, saying why, until the decision service frees some. The local
path: tests/system/test_budget_reservations.py."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.gates import Gate
from tests.system.test_budget_reservations import KB, attempts_bytes
from tests.system.test_hadoop_system import Hadoop, hadoop, hdfs_action

__all__ = ["hadoop"]  # the fixture, used by name
BUDGET = {"capacity_bytes": 200 * KB, "threshold": 0.9, "target": 0.8}


async def usage(hadoop: Hadoop) -> int:
    """STORED + LEAF bytes in the catalogue, plus the bytes of the attempts being written on HDFS."""
    stored = sum(
        [int(d.get("size") or 0) async for d in hadoop.db.datasets.find({"state": {"$in": ["STORED", "LEAF"]}})]
    )
    writing = hadoop.hdfs_path(hadoop.settings.managed_path()) / ".pingo-attempts"
    return stored + await asyncio.to_thread(attempts_bytes, writing)


async def reserved(hadoop: Hadoop) -> int:
    return int((await hadoop.db.budget.find_one({"_id": "storage"}) or {}).get("reserved") or 0)


@pytest.mark.parametrize("hadoop", [BUDGET], indirect=True)
async def test_first_runs_on_hdfs_stay_within_the_budget(hadoop: Hadoop) -> None:
    seed = await hadoop.run(
        {
            "name": "hseed",
            "actions": [
                hdfs_action(1, "hseed-a", size_kb=70),
                hdfs_action(2, "hseed-b", [1], size_kb=70),
                hdfs_action(3, "hseed-leaf", [2], size_kb=1),
            ],
        }
    )
    assert seed["state"] == "SUCCEEDED", [(a["localId"], a["error"]) for a in seed["actions"]]
    # 141 KB stored; a 40 KB root, then three 40 KB children never run under their names.
    plan = await hadoop.submit(
        {
            "name": "hfresh",
            "actions": [
                hdfs_action(1, "hfresh-root", size_kb=40),
                *(hdfs_action(i, f"hfresh-{i}", [1], seconds=0.5, size_kb=40) for i in (2, 3, 4)),
                hdfs_action(5, "hfresh-leaf", [2, 3, 4], size_kb=1),
            ],
        }
    )
    peak = 0
    while (wf := await hadoop.workflow(plan["id"]))["state"] == "RUNNING":
        peak = max(peak, await usage(hadoop))
        await asyncio.sleep(0.02)
    assert wf["state"] == "SUCCEEDED", [(a["localId"], a["error"]) for a in wf["actions"]]
    assert 0 < peak <= hadoop.settings.capacity_bytes, peak
    root = await hadoop.db.datasets.find_one({"_id": wf["actions"][0]["hash"]})
    docs = {a["local_id"]: a async for a in hadoop.db.actions.find({"workflow_id": plan["id"]})}
    assert [docs[i]["reservation"]["bytes"] for i in (2, 3, 4)] == [root["size"]] * 3
    assert await reserved(hadoop) == 0


@pytest.mark.parametrize("hadoop", [BUDGET], indirect=True)
async def test_an_action_without_room_on_hdfs_is_held_ready_and_starts_once_room_frees(
    hadoop: Hadoop, gate: Gate
) -> None:
    # A 150 KB intermediate, claimed by a slow reader: nothing can be evicted while it reads
    # (it reads until the test has seen the other action held, at the gate).
    first = await hadoop.submit(
        {"name": "hclaimed", "actions": [
            hdfs_action(1, "hbig", size_kb=150),
            hdfs_action(2, "hslow-reader", [1], size_kb=1, configurationParameters=gate.conf)]}
    )  # fmt: skip
    while (await hadoop.db.actions.find_one({"_id": f"{first['id']}.2"}))["state"] != "RUNNING":
        await asyncio.sleep(0.1)
    second = await hadoop.submit(
        {"name": "hwaits", "actions": [hdfs_action(1, "hneeds-room", size_kb=100, expectedBytes="100KiB")]}
    )
    deadline = time.time() + 30
    while not (view := (await hadoop.workflow(second["id"]))["actions"][0]).get("held"):
        assert time.time() < deadline, view
        await asyncio.sleep(0.1)
    assert view["state"] == "READY" and "storage" in view["held"] and "102400 B" in view["held"]
    assert hadoop.submissions().get(f"{second['id']}.1#1") is None  # no Oozie job yet
    gate.open()
    reader = await hadoop.wait(first["id"])
    assert reader["state"] == "SUCCEEDED"
    done = await hadoop.wait(second["id"], timeout=90)
    assert done["state"] == "SUCCEEDED" and done["actions"][0].get("held") is None
    started = (await hadoop.db.actions.find_one({"_id": f"{second['id']}.1"}))["submitted_at"]
    assert started >= reader["actions"][1]["finishedAt"]
    assert await reserved(hadoop) == 0
