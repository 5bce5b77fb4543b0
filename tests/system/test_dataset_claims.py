"""A planner claims datasets from what it read earlier (shared/store/datasets.py,
``try_reuse`` and ``claim_in_flight`` with ``seen``): the store's state at the claim
decides, however out of date that read is (docs/performance.md, "Submitting")."""

from __future__ import annotations

import uuid

from shared.store import datasets as ds
from shared.store.client import Store

LINEAGE = {"name": "step", "command": ["true"]}


async def in_flight(store: Store) -> dict:
    h = uuid.uuid4().hex
    await ds.prepare_compute(store, h, LINEAGE, f"/data/{h}", "wf-a.1", False, "test", ["wf-a.2"])
    doc = await ds.get(store, h)
    assert doc is not None and doc["state"] == "TO_STORE"
    return doc


async def stored(store: Store) -> tuple[dict, dict]:
    """A dataset as read while it was computed, and as it is once stored."""
    early = await in_flight(store)
    await ds.record_output(store, early["_id"], "wf-a.1", 10, 1.0, False, "test")
    now = await ds.get(store, early["_id"])
    assert now is not None and now["state"] == "STORED"
    return early, now


async def test_a_dataset_stored_since_it_was_read_is_reused(store: Store) -> None:
    early, _ = await stored(store)
    assert await ds.try_reuse(store, early["_id"], LINEAGE, ["wf-b.2"], False, "test", seen=early)
    assert "wf-b.2" in (await ds.get(store, early["_id"]))["claims"]
    # Followed, it no longer can be: it is not being computed any more.
    assert await ds.claim_in_flight(store, early["_id"], ["wf-c.2"], False, "test", seen=early) is None
    assert "wf-c.2" not in (await ds.get(store, early["_id"]))["claims"]


async def test_a_dataset_read_as_stored_but_deleted_since_is_not_reused(store: Store) -> None:
    _, now = await stored(store)
    await store.datasets.update_one({"_id": now["_id"]}, {"$set": {"state": "DELETED"}})
    assert not await ds.try_reuse(store, now["_id"], LINEAGE, ["wf-b.2"], False, "test", seen=now)
    assert "wf-b.2" not in (await ds.get(store, now["_id"]))["claims"]


async def test_a_dataset_still_being_computed_is_claimed_for_its_followers(store: Store) -> None:
    doc = await in_flight(store)
    claimed = await ds.claim_in_flight(store, doc["_id"], ["wf-b.2"], False, "test", seen=doc)
    assert claimed is not None and "wf-b.2" in claimed["claims"] and claimed["producers"] == ["wf-a.1"]
    # A leaf follower makes it a leaf, from the same document read before the first claim.
    claimed = await ds.claim_in_flight(store, doc["_id"], ["wf-c.2"], True, "test", seen=doc)
    assert claimed is not None and claimed["state"] == "TO_LEAF"
    assert {"wf-a.2", "wf-b.2", "wf-c.2"} <= set(claimed["claims"])
