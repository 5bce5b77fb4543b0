"""The state machines (docs/state-machines.md): the tables, and the one guarded write that uses them."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from typing import Any

import pytest

from shared.states import (
    ACTION_IN_FLIGHT,
    ACTION_INITIAL,
    ACTION_TERMINAL,
    ACTION_TRANSITIONS,
    DATASET_INITIAL,
    DATASET_TRANSITIONS,
    TABLES,
    WORKFLOW_TERMINAL,
    WORKFLOW_TRANSITIONS,
    ActionState,
    DatasetState,
    IllegalTransition,
    WorkflowState,
    check,
)
from shared.store import connect
from shared.store.transitions import decode, transition

A, D, W = ActionState, DatasetState, WorkflowState


def reachable(table: dict, starts) -> set:
    seen = set(starts)
    todo = deque(starts)
    while todo:
        for nxt in table[todo.popleft()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


# --- the tables -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "enum"),
    [(ACTION_TRANSITIONS, A), (DATASET_TRANSITIONS, D), (WORKFLOW_TRANSITIONS, W)],
    ids=["action", "dataset", "workflow"],
)
def test_every_state_has_a_row_and_every_target_is_a_state(table, enum):
    assert set(table) == set(enum)
    for targets in table.values():
        assert set(targets) <= set(enum)


def test_terminal_states_have_no_exits():
    assert ACTION_TERMINAL == {A.FINISHED, A.FAILED, A.KILLED, A.REUSED, A.SKIPPED}
    assert WORKFLOW_TERMINAL == {W.SUCCEEDED, W.FAILED, W.KILLED}
    cases = ((ACTION_TRANSITIONS, ACTION_TERMINAL, A), (WORKFLOW_TRANSITIONS, WORKFLOW_TERMINAL, W))
    for table, terminal, enum in cases:
        for s in terminal:
            assert not table[s], s
            for target in enum:
                with pytest.raises(IllegalTransition):
                    check(table, s, target)


def test_every_action_state_is_reachable_from_an_initial_state():
    assert reachable(ACTION_TRANSITIONS, ACTION_INITIAL) == set(A)


def test_every_action_state_can_end():
    """Every action reaches a terminal state: none is a trap it cannot leave."""
    for s in A:
        assert reachable(ACTION_TRANSITIONS, [s]) & ACTION_TERMINAL, s


def test_action_lifecycle_of_the_design_is_allowed():
    path = [A.WAITING, A.READY, A.PROCESSING, A.SUBMITTED, A.RUNNING, A.FINISHED]
    for src, dst in itertools.pairwise(path):
        check(ACTION_TRANSITIONS, src, dst)
    for src in (A.PROCESSING, A.SUBMITTED):  # a submit error puts the action back
        check(ACTION_TRANSITIONS, src, A.READY)
    check(ACTION_TRANSITIONS, A.PROCESSING, A.PROCESSING)  # a stale claim is taken again
    for src in (A.WAITING, A.READY, A.PROCESSING, A.SUBMITTED, A.RUNNING):  # kill / upstream_failed
        check(ACTION_TRANSITIONS, src, A.KILLED)


def test_in_flight_actions_cannot_go_back_to_waiting():
    for src in ACTION_IN_FLIGHT:
        with pytest.raises(IllegalTransition):
            check(ACTION_TRANSITIONS, src, A.WAITING)


def test_every_dataset_state_is_reachable_from_an_initial_state():
    assert reachable(DATASET_TRANSITIONS, DATASET_INITIAL) == set(D)


def test_leaf_never_reaches_deletion():
    """LEAF outputs are never deleted automatically: no path from LEAF leads towards deletion."""
    after_leaf = reachable(DATASET_TRANSITIONS, [D.LEAF])
    assert after_leaf == {D.LEAF}
    assert not after_leaf & {D.STORED_TO_DELETE, D.PROCESSING, D.DELETING, D.DELETED}


def test_only_stored_datasets_enter_deletion():
    """Only STORED is ever chosen for deletion. Inside the deletion pipeline a deletor may
    hand a dataset back to STORED_TO_DELETE, but from outside it the one way in is STORED."""
    pipeline = {D.STORED_TO_DELETE, D.PROCESSING, D.DELETING}
    entries = {
        (s, t) for s, targets in DATASET_TRANSITIONS.items() if s not in pipeline for t in targets if t in pipeline
    }
    assert entries == {(D.STORED, D.STORED_TO_DELETE)}
    # PROCESSING and DELETING are only reached from inside the pipeline, through STORED_TO_DELETE.
    into_processing = {s for s, targets in DATASET_TRANSITIONS.items() if D.PROCESSING in targets}
    into_deleting = {s for s, targets in DATASET_TRANSITIONS.items() if D.DELETING in targets}
    assert into_processing == {D.STORED_TO_DELETE, D.PROCESSING}
    assert into_deleting == {D.PROCESSING, D.DELETING}
    # ...and a file is only deleted (DELETING -> DELETED) after that road.
    for s in set(D) - {D.DELETING, D.TO_STORE, D.TO_LEAF}:
        assert D.DELETED not in DATASET_TRANSITIONS[s], s


def test_workflow_runs_then_ends():
    assert WORKFLOW_TRANSITIONS[W.RUNNING] == {W.SUCCEEDED, W.FAILED, W.KILLED}
    assert reachable(WORKFLOW_TRANSITIONS, [W.PLANNING]) == set(W)


def test_tables_are_registered_by_entity():
    assert TABLES == {"action": ACTION_TRANSITIONS, "dataset": DATASET_TRANSITIONS, "workflow": WORKFLOW_TRANSITIONS}


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
    before = await insert(coll, "a1", A.FINISHED)
    with pytest.raises(IllegalTransition):
        await transition(
            coll, ACTION_TRANSITIONS, "a1", A.READY, by="test", sources=[A.FINISHED], set={"marker": "written"}
        )
    # A mixed list is refused as a whole, even though one of its moves is legal.
    with pytest.raises(IllegalTransition):
        await transition(
            coll,
            ACTION_TRANSITIONS,
            "a1",
            A.READY,
            by="test",
            sources=[A.WAITING, A.FINISHED],
            set={"marker": "written"},
        )
    assert await read(coll, "a1") == before


async def test_illegal_transition_of_a_document_in_a_legal_source_is_refused(coll):
    before = await insert(coll, "a2", A.RUNNING)
    with pytest.raises(IllegalTransition):
        await transition(coll, ACTION_TRANSITIONS, "a2", A.WAITING, by="test", sources=[A.RUNNING])
    assert await read(coll, "a2") == before


@pytest.mark.parametrize("target", [A.WAITING, "NOT_A_STATE"])
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
