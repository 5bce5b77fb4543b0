"""The live actions' gauge counts (shared/store/actions.py, ``live_counts``): each live
state counted by the store up to the cap, ended actions never (docs/performance.md, "A
long history")."""

from __future__ import annotations

from shared.states import ACTION_LIVE
from shared.store import actions as acts
from shared.store.client import Store


async def test_each_live_state_is_counted_up_to_the_cap(store: Store) -> None:
    made = {"WAITING": 25, "RUNNING": 3, "READY": 15, "FINISHED": 40}
    cap = 20
    await store.actions.insert_many(
        [{"_id": f"wf-t.{state}.{i}", "state": state} for state, n in made.items() for i in range(n)]
    )
    counts = await acts.live_counts(store, cap)
    assert set(counts) == {str(s) for s in ACTION_LIVE}
    assert counts["WAITING"] == cap  # capped
    assert counts["RUNNING"] == 3 and counts["READY"] == 15
    assert sum(counts.values()) == cap + 3 + 15  # FINISHED is not live
