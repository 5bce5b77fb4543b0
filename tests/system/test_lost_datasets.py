"""A missing dataset is a miss: files gone or changed behind Pingo's back are found before
a plan relies on them, marked LOST, and computed again (docs/planning.md, "Lost datasets")."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path

import pytest

from shared.storage.local import remove_tree
from shared.store.transitions import decode
from tests.support.submitters import hold_submitter
from tests.support.system import Api
from tests.support.workflows import decisions, shell_action


def pair(prefix: str, leaf: str) -> dict:
    return {"name": prefix, "actions": [shell_action(1, f"{prefix}-mid"), shell_action(2, leaf, [1])]}


async def test_a_stored_intermediate_deleted_behind_pingos_back_is_computed_again(system: Api) -> None:
    first = await system.run(pair("vanish", "vanish-a"))
    assert first["state"] == "SUCCEEDED"
    mid = first["actions"][0]["hash"]
    doc = await system.db.datasets.find_one({"_id": mid})
    assert doc["state"] == "STORED"
    shutil.rmtree(doc["path"])  # an admin's cleanup, a lost disk

    plan = await system.submit(pair("vanish", "vanish-b"))  # a changed child needs it
    assert decisions(plan) == {1: "compute", 2: "compute"}
    second = await system.wait(plan["id"])
    assert second["state"] == "SUCCEEDED", [(a["localId"], a["state"], a.get("error")) for a in second["actions"]]
    doc = decode(await system.db.datasets.find_one({"_id": mid}))
    assert doc["state"] == "STORED" and Path(doc["path"]).exists()
    states = [(h["state"], h.get("note")) for h in doc["history"]]
    assert ("LOST", "lost") in states, states
    # Later workflows reuse the recomputed dataset.
    third = await system.submit(pair("vanish", "vanish-c"))
    assert decisions(third)[1] == "reuse"


async def test_a_dataset_whose_size_changed_is_lost_and_its_leftover_replaced(system: Api) -> None:
    first = await system.run(pair("shrunk", "shrunk-a"))
    mid = first["actions"][0]["hash"]
    doc = await system.db.datasets.find_one({"_id": mid})
    victim = next(p for p in Path(doc["path"]).rglob("*") if p.is_file())
    victim.write_bytes(b"truncated")

    plan = await system.submit(pair("shrunk", "shrunk-b"))
    assert decisions(plan)[1] == "compute"
    assert (await system.wait(plan["id"]))["state"] == "SUCCEEDED"
    again = await system.db.datasets.find_one({"_id": mid})
    assert again["state"] == "STORED" and again["size"] == doc["size"]
    assert again["found_size"] != doc["size"]


async def test_an_input_removed_just_before_its_readers_job_is_made_is_produced_again_first(
    system: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inputs are checked in the worker thread that makes the job (docs/performance.md,
    "A chain's hop"): one gone there is re-planned, its reader waits for it, no job of the
    reader is made without it."""
    word = f"reader-{uuid.uuid4().hex[:6]}"
    held = hold_submitter(monkeypatch, system.ctx.executor, word)
    body = {"name": "gone", "actions": [shell_action(1, f"{word}-mid"), shell_action(2, word, [1])]}
    plan = await system.submit(body)
    await asyncio.wait_for(held.reached.wait(), 30)  # the reader's attempt claimed, its job not made
    mid = await system.db.actions.find_one({"_id": f"{plan['id']}.1"})
    remove_tree(Path(mid["output_path"]))  # an admin's cleanup, a lost disk
    held.release.set()
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED", [(a["localId"], a["state"], a.get("error")) for a in wf["actions"]]
    await held.until_done()
    assert held.job is None and held.refused == "InputsGone"  # the held submit made no job
    reader = decode(await system.db.actions.find_one({"_id": f"{plan['id']}.2"}))
    notes = [h.get("note") or "" for h in reader["history"] if h["state"] == "WAITING"]
    assert any("input gone" in n for n in notes), reader["history"]
    assert Path(mid["output_path"]).exists()
