"""The live actions' gauge counts (shared/store/actions.py, ``live_counts``): a state with
few actions is counted from their ids, a fuller one by the store, each up to the cap; ended
actions are never counted (docs/performance.md, "A long history")."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from shared.states import ACTION_LIVE
from shared.store import actions as acts
from shared.store.client import Store, connect


@pytest.fixture
async def store(mongo_url: str) -> AsyncIterator[Store]:
    store = await connect(mongo_url, f"live_{uuid.uuid4().hex[:8]}")
    yield store
    await store.client.drop_database(store.db.name)
    await store.close()


async def test_each_live_state_is_counted_few_or_many_up_to_the_cap(store: Store) -> None:
    many, cap = acts.COUNT_BY_IDS + 9, acts.COUNT_BY_IDS + 4
    made = {"WAITING": many, "RUNNING": 3, "READY": acts.COUNT_BY_IDS - 1, "FINISHED": 40}
    await store.actions.insert_many(
        [{"_id": f"wf-t.{state}.{i}", "state": state} for state, n in made.items() for i in range(n)]
    )
    counts = await acts.live_counts(store, cap)
    assert set(counts) == {str(s) for s in ACTION_LIVE}
    assert counts["WAITING"] == cap  # counted by the store, and capped
    assert counts["RUNNING"] == 3 and counts["READY"] == acts.COUNT_BY_IDS - 1
    assert sum(counts.values()) == cap + 3 + acts.COUNT_BY_IDS - 1  # FINISHED is not live
