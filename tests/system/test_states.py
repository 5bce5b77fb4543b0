"""The state machines (docs/state-machines.md): the one guarded write that uses the tables,
against the real store. The tables themselves are tested in tests/unit/test_states.py."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from shared.states import ACTION_TRANSITIONS, DATASET_TRANSITIONS, ActionState, DatasetState, IllegalTransition
from shared.store import connect
from shared.store.transitions import decode, transition

A, D = ActionState, DatasetState


# --- transition() against the real store ---------------------------------------------------------


@pytest.fixture
async def coll(settings):
    store = await connect(settings.mongo_url, settings.mongo_db)
    yield store.actions
    await store.db.drop_collection("actions")
    await store.close()


async def insert(coll, doc_id: str, state: str, **extra: Any) -> dict[str, Any]:
    doc = {"_id": doc_id, "state": str(state), "updated_at": 1.0, "history": [], "marker": "untouched", **extra}
    await coll.insert_one(doc)
    return await read(coll, doc_id)


async def read(coll, doc_id: str) -> dict[str, Any]:
    return decode(await coll.find_one({"_id": doc_id}))


async def test_illegal_transition_is_refused_before_writing(coll):
    before = await insert(coll, "a1", A.FAILED)
    with pytest.raises(IllegalTransition):
        await transition(
            coll, ACTION_TRANSITIONS, "a1", A.READY, by="test", sources=[A.FAILED], set={"marker": "written"}
        )
    # A mixed list is refused as a whole, even though one of its moves is legal.
    with pytest.raises(IllegalTransition):
        await transition(
            coll,
            ACTION_TRANSITIONS,
            "a1",
            A.READY,
            by="test",
            sources=[A.WAITING, A.FAILED],
            set={"marker": "written"},
        )
    assert await read(coll, "a1") == before


async def test_illegal_transition_of_a_document_in_a_legal_source_is_refused(coll):
    before = await insert(coll, "a2", A.RUNNING)
    with pytest.raises(IllegalTransition):
        await transition(coll, ACTION_TRANSITIONS, "a2", A.WAITING, by="test", sources=[A.RUNNING])
    assert await read(coll, "a2") == before


@pytest.mark.parametrize("target", ["NOT_A_STATE"])
async def test_target_that_nothing_may_reach_is_refused(coll, target):
    before = await insert(coll, "a3", A.READY)
    with pytest.raises(IllegalTransition):
        await transition(coll, ACTION_TRANSITIONS, "a3", target, by="test")
    assert await read(coll, "a3") == before


async def test_guard_mismatch_returns_none_and_changes_nothing(coll):
    before = await insert(coll, "a4", A.READY)
    # A legal move, but the document is not in the state the caller expects.
    assert (
        await transition(
            coll, ACTION_TRANSITIONS, "a4", A.SUBMITTED, by="test", sources=[A.PROCESSING], set={"marker": "written"}
        )
        is None
    )
    # Without explicit sources the table's own are the guard: RUNNING is only entered from SUBMITTED.
    assert await transition(coll, ACTION_TRANSITIONS, "a4", A.RUNNING, by="test", set={"marker": "written"}) is None
    # An extra condition that does not hold is a mismatch too.
    assert (
        await transition(
            coll,
            ACTION_TRANSITIONS,
            "a4",
            A.PROCESSING,
            by="test",
            where={"marker": "other"},
            set={"marker": "written"},
        )
        is None
    )
    # A document that does not exist.
    assert await transition(coll, ACTION_TRANSITIONS, "missing", A.PROCESSING, by="test") is None
    assert await read(coll, "a4") == before
    assert await coll.count_documents({}) == 1


async def test_success_sets_state_and_appends_history(coll):
    await insert(coll, "a5", A.WAITING, history=[{"state": "WAITING", "at": 1.0, "by": "planner"}])
    t0 = time.time()
    doc = await transition(coll, ACTION_TRANSITIONS, "a5", A.READY, by="svc-one", set={"marker": "moved"})
    t1 = time.time()
    assert doc is not None and doc["state"] == "READY" and doc["marker"] == "moved"
    assert doc["history"][0] == {"state": "WAITING", "at": 1.0, "by": "planner"}
    entry = doc["history"][1]
    assert set(entry) == {"state", "at", "by"}
    assert entry["state"] == "READY" and entry["by"] == "svc-one" and t0 <= entry["at"] <= t1
    assert t0 <= doc["updated_at"] <= t1

    doc = await transition(
        coll,
        ACTION_TRANSITIONS,
        "a5",
        A.PROCESSING,
        by="svc-two",
        sources=[A.READY],
        note="claimed",
        inc={"attempt": 1},
        unset=["marker"],
    )
    assert doc["state"] == "PROCESSING" and doc["attempt"] == 1 and "marker" not in doc
    assert [(h["state"], h["by"]) for h in doc["history"]] == [
        ("WAITING", "planner"),
        ("READY", "svc-one"),
        ("PROCESSING", "svc-two"),
    ]
    assert doc["history"][2]["note"] == "claimed"
    assert doc["history"][1]["at"] <= doc["history"][2]["at"]
    # What came back is what is stored.
    assert await read(coll, "a5") == doc


async def test_exactly_one_of_twenty_racing_coroutines_wins(coll):
    await insert(coll, "a6", A.READY)

    async def claim(i: int) -> dict[str, Any] | None:
        return await transition(
            coll,
            ACTION_TRANSITIONS,
            "a6",
            A.PROCESSING,
            by=f"scraper-{i}",
            sources=[A.READY],
            set={"claimed_by": i},
            inc={"attempt": 1},
        )

    results = await asyncio.gather(*(claim(i) for i in range(20)))
    winners = [r for r in results if r is not None]
    assert len(winners) == 1, [r and r["claimed_by"] for r in results]
    doc = await read(coll, "a6")
    assert doc["state"] == "PROCESSING" and doc["attempt"] == 1
    assert doc["claimed_by"] == winners[0]["claimed_by"]
    assert [(h["state"], h["by"]) for h in doc["history"]] == [("PROCESSING", f"scraper-{doc['claimed_by']}")]


async def test_dataset_table_is_enforced_by_transition(coll):
    before = await insert(coll, "h1", D.LEAF)
    with pytest.raises(IllegalTransition):
        await transition(coll, DATASET_TRANSITIONS, "h1", D.STORED_TO_DELETE, by="decision", sources=[D.LEAF])
    # Without explicit sources the guard is the states that may move there; LEAF is not one.
    assert await transition(coll, DATASET_TRANSITIONS, "h1", D.STORED_TO_DELETE, by="decision") is None
    assert await read(coll, "h1") == before
    await insert(coll, "h2", D.STORED)
    doc = await transition(coll, DATASET_TRANSITIONS, "h2", D.STORED_TO_DELETE, by="decision")
    assert doc is not None and doc["state"] == "STORED_TO_DELETE"
