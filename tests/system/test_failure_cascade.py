"""A failed action's descendants never start: each ends KILLED (``upstream_failed``),
what they held is released, the workflow ends FAILED, and a branch that did not descend
from the failure runs on. Ended in bulk where nothing of the workflow may be followed,
one by one where something may (``Outcomes.end_descendants``)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from shared.config import Settings
from shared.executors.base import JobState, JobStatus
from shared.lifecycle import ending
from shared.store.client import Store
from tests.support.commands import counted_outcomes
from tests.support.system import Api
from tests.support.workflows import shell_action


async def test_a_failed_root_ends_a_chain_longer_than_one_write_and_a_diamond_below_it(
    system: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two writes' worth of moves, so that the cascade's chunks are crossed.
    monkeypatch.setattr(ending, "CASCADE_CHUNK", 7)
    root = shell_action(0, "cascade-root", configurationParameters=[{"key": "SYNTH_FAIL", "value": "always"}])
    chain = [shell_action(i, f"cascade-{i}", [i - 1]) for i in range(1, 11)]
    # A diamond under the chain's end: its foot is reached by two paths and ended once.
    diamond = [
        shell_action(11, "cascade-left", [10]),
        shell_action(12, "cascade-right", [10]),
        shell_action(13, "cascade-foot", [11, 12]),
    ]
    apart = shell_action(14, "cascade-apart", seconds=0.5)
    plan = await system.submit({"name": "cascade", "actions": [root, *chain, *diamond, apart]})
    wf = await system.wait(plan["id"], timeout=120)
    states = {a["localId"]: a["state"] for a in wf["actions"]}
    assert wf["state"] == "FAILED"
    assert states == {0: "FAILED", **dict.fromkeys(range(1, 14), "KILLED"), 14: "FINISHED"}, states
    assert {a["localId"]: a["error"] for a in wf["actions"] if a["state"] == "KILLED"} == dict.fromkeys(
        range(1, 14), "upstream_failed"
    )
    # The datasets they were to make were never made: nothing is left claiming or producing them.
    hashes = [a["hash"] for a in wf["actions"] if a["state"] == "KILLED"]
    async for d in system.db.datasets.find({"_id": {"$in": hashes}}):
        assert d["state"] == "DELETED" and d["producers"] == [] and d["claims"] == [], d


async def failed_fan(store: Store, n: int, followed: bool) -> str:
    """A workflow whose running root is about to fail, with ``n`` descendants WAITING for
    it: half its children, half their children. ``followed``: the workflow's mark that
    one of its actions may be followed."""
    wf_id, now = f"wf-{uuid.uuid4().hex[:8]}", time.time()
    await store.workflows.insert_one(
        {"_id": wf_id, "state": "RUNNING", "open_actions": n + 1, "created_at": now, "owner": "ada",
         "followed": followed}
    )  # fmt: skip
    root = f"{wf_id}.0"
    half = n // 2
    children = [f"{wf_id}.{i}" for i in range(1, half + 1)]
    grandchildren = {c: [f"{wf_id}.{half + i}"] for i, c in enumerate(children, start=1) if half + i <= n}
    common = {"workflow_id": wf_id, "owner": "ada", "managed": False, "created_at": now, "history": []}
    docs = [
        {**common, "_id": root, "name": "root", "state": "RUNNING", "job_id": f"{root}-job", "attempt": 1,
         "finish_lease_at": 0.0, "children": children, "parents": []},
        *({**common, "_id": c, "name": c, "state": "WAITING", "parents": [root], "pending_parents": [root],
           "children": grandchildren.get(c, [])} for c in children),
        *({**common, "_id": g, "name": g, "state": "WAITING", "parents": [c], "pending_parents": [c]}
          for c, gs in grandchildren.items() for g in gs),
    ]  # fmt: skip
    await store.actions.insert_many(docs)
    return wf_id


@pytest.mark.parametrize("followed", [False, True], ids=["in-bulk", "one-by-one"])
async def test_a_failed_root_ends_every_descendant_and_in_bulk_at_a_cost_they_do_not_change(
    settings: Settings, mongo_url: str, tmp_path: Path, followed: bool
) -> None:
    """One by one, each descendant read and ended, a failed root of a 10,000-action chain
    took minutes of store commands. In bulk the root's end costs the same writes whatever
    is below it (within one write's worth of moves); only its reads' further batches grow."""
    async with counted_outcomes(settings, mongo_url, "cascade") as c:
        store = c.store
        cost = {}
        for n in (10, 300):
            wf_id = await failed_fan(store, n, followed)
            root = await store.actions.find_one({"_id": f"{wf_id}.0"})
            before = c.commands.sent
            await c.outcomes.apply(root, JobStatus(state=JobState.FAILED, error="it broke"))
            cost[n] = c.commands.sent - before
            states = {d["_id"]: (d["state"], d.get("error")) async for d in store.actions.find({"workflow_id": wf_id})}
            assert states.pop(root["_id"])[0] == "FAILED"
            assert set(states.values()) == {("KILLED", "upstream_failed")} and len(states) == n
            assert (await store.workflows.find_one({"_id": wf_id}))["state"] == "FAILED"
        if followed:
            assert cost[300] > cost[10] + 290, cost  # each descendant read and moved on its own
        else:
            assert cost[300] - cost[10] < 10, cost
