"""Datasets in mid-deletion meet new workflows; unowned files are swept."""

from __future__ import annotations

import os
import time
from pathlib import Path

from services.dataset_manager.service import DatasetManager
from tests.support.system import Api
from tests.support.workflows import decisions, shell_action


def pair(prefix: str) -> dict:
    return {"name": prefix, "actions": [shell_action(1, f"{prefix}-mid"), shell_action(2, f"{prefix}-leaf", [1])]}


async def test_marked_dataset_with_whole_file_is_taken_back_not_recomputed(system: Api) -> None:
    wf = await system.run(pair("revive"))
    mid = wf["actions"][0]["hash"]
    # Marked, with deletion parked: a claim (an action of another workflow, still to read
    # it) keeps the dataset manager's 0.5 s scrape from taking it before the submission.
    await system.db.datasets.update_one(
        {"_id": mid}, {"$set": {"state": "STORED_TO_DELETE"}, "$addToSet": {"claims": "wf-parked.1"}}
    )
    other = {"name": "reader", "actions": [shell_action(1, "revive-mid"), shell_action(2, "revive-new", [1])]}
    plan = await system.submit(other)
    assert decisions(plan) == {1: "reuse", 2: "compute"}
    doc = await system.db.datasets.find_one({"_id": mid})
    assert doc["state"] == "STORED" and f"{plan['id']}.2" in doc["claims"]
    assert (await system.wait(plan["id"]))["state"] == "SUCCEEDED"


async def test_dataset_being_deleted_is_computed_again(system: Api) -> None:
    wf = await system.run(pair("gone"))
    mid = wf["actions"][0]["hash"]
    await system.db.datasets.update_one(
        {"_id": mid}, {"$set": {"state": "DELETING", "lease_at": 0.0, "lease_owner": "someone-dead"}}
    )
    plan = await system.submit(
        {"name": "again", "actions": [shell_action(1, "gone-mid"), shell_action(2, "gone-other", [1])]}
    )
    assert decisions(plan) == {1: "compute", 2: "compute"}
    done = await system.wait(plan["id"])
    assert done["state"] == "SUCCEEDED", [(a["localId"], a["state"], a["error"]) for a in done["actions"]]
    doc = await system.db.datasets.find_one({"_id": mid})
    # The stale deletion was finished first, then the new output committed and stored.
    assert doc["state"] == "STORED" and (Path(doc["path"]) / "part-00000").is_file()


async def test_orphan_sweep_removes_only_unowned_old_files(system: Api) -> None:
    wf = await system.run(pair("sweep"))
    root = system.settings.managed_dir
    orphan = root / ("f" * 64)
    orphan.mkdir()
    (orphan / "part-00000").write_text("nobody owns me")
    leftover = root / ".pingo-attempts" / f"{'e' * 64}.wf-x.1.1"
    leftover.mkdir(parents=True)
    fresh = root / ("a" * 64)
    fresh.mkdir()
    old = time.time() - 3600
    for p in (orphan, leftover):
        os.utime(p, (old, old))
    manager = next(s for s in [DatasetManager(system.ctx)])
    await manager.sweep()
    assert not orphan.exists() and not leftover.exists()
    assert fresh.exists(), "a file newer than the oldest action in flight may still be being written"
    for a in wf["actions"]:
        assert (Path(a["outputPath"]) / "part-00000").is_file()
