"""Running workflows on the real system one after another, with the decision service
deciding only between workflows: the protocol the simulator replays.

The decision service wakes each time a dataset is stored, so left alone it would also
decide in the middle of a workflow (with that workflow's inputs claimed, and its later
outputs not yet there). The runner holds the decision lease (``locks``: one replica
decides at a time) while a workflow runs, as another replica would, releases it once
the workflow has ended, and waits for the decision and the deletions to settle.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pymongo.errors import DuplicateKeyError

from tests.support.system import Api

OWNER = "test-sequencer"
PENDING = ["STORED_TO_DELETE", "PROCESSING", "DELETING"]


async def hold_decisions(api: Api) -> None:
    for _ in range(5):
        try:
            await api.db.locks.update_one(
                {"_id": "decision"}, {"$set": {"owner": OWNER, "until": time.time() + 3600}}, upsert=True
            )
            return
        except DuplicateKeyError:  # the service inserted it at the same moment: take it over
            continue
    raise AssertionError("could not take the decision lease")


async def release_decisions(api: Api) -> None:
    await api.db.locks.update_one({"_id": "decision", "owner": OWNER}, {"$set": {"until": 0.0}})


async def settled(api: Api) -> bool:
    s = api.settings
    if await api.db.datasets.count_documents({"state": {"$in": PENDING}}):
        return False
    stored = sum([int(d.get("size") or 0) async for d in api.db.datasets.find({"state": "STORED"}, {"size": 1})])
    return stored <= s.threshold * s.capacity_bytes


async def wait_settled(api: Api, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while not await settled(api):
        assert time.time() < deadline, "decision service and dataset manager did not settle"
        await asyncio.sleep(0.1)


async def run_sequentially(api: Api, bodies: list[dict[str, Any]], timeout: float = 90.0) -> list[dict[str, Any]]:
    """Each workflow to its end, then the decision between it and the next, settled."""
    await hold_decisions(api)
    done = []
    for body in bodies:
        wf = await api.run(body, timeout)
        assert wf["state"] == "SUCCEEDED", wf
        done.append(wf)
        await release_decisions(api)
        # A decision run that began just before the lease is taken back still marks its
        # whole choice: hold, give it time to finish, and settle again if it did.
        while True:
            await asyncio.sleep(2 * api.settings.decision_interval)
            await wait_settled(api)
            await hold_decisions(api)
            await asyncio.sleep(0.3)
            if await settled(api):
                break
            await release_decisions(api)
    return done


def computed_ids(wf: dict[str, Any]) -> set[Any]:
    return {a["localId"] for a in wf["actions"] if a["decision"] == "compute"}


def budget_between_quanta(wanted: int, quantum: int, factors: tuple[float, ...]) -> int:
    """A capacity near ``wanted`` bytes such that ``factor x capacity`` (threshold, target)
    falls mid-way between multiples of ``quantum``: sizes that are multiples of it, plus a
    few hundred bytes of synth's ``_lineage`` each, then compare with the budget as the
    simulator's exact multiples do."""
    for delta in range(0, wanted, 256):
        for cap in (wanted + delta, wanted - delta):
            if all(quantum / 4 <= (f * cap) % quantum <= 3 * quantum / 4 for f in factors):
                return cap
    raise AssertionError("no such capacity")
