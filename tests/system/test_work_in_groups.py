"""Work done in groups when many actions move at once (a submission readies hundreds;
docs/performance.md, "Work in groups"): their claims in one guarded write
(``Mover.actions_each``), the effects of their ends together (``Mover.grouped``), the
poller's claims of due polls in one write (``acts.claim_polls``), the ends notified
together (``shared.lifecycle.finishing``). Each move and claim is
still guarded and made once, each end announced once and counted once, and the
workflow ends once, after the last."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable

import pytest

from shared.bus.memory import MemoryBus
from shared.events import EventType
from shared.executors.base import JobState
from shared.lifecycle.moves import Mover
from shared.states import ActionState
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store import stats
from shared.store.client import Store
from shared.store.transitions import decode
from tests.support.net import free_port
from tests.support.system import Api
from tests.support.workflows import shell_action

A = ActionState
N = 40


async def running_workflow(store: Store, n: int, state: str = "RUNNING") -> str:
    wf_id = f"wf-{uuid.uuid4().hex[:8]}"
    now = time.time()
    await store.workflows.insert_one(
        {"_id": wf_id, "state": "RUNNING", "open_actions": n, "kill_requested": False, "created_at": now,
         "owner": "ada"}
    )  # fmt: skip
    docs = [
        {"_id": f"{wf_id}.{i}", "workflow_id": wf_id, "owner": "ada", "name": f"a{i}", "state": state,
         "managed": False, "created_at": now, "history": []}
        for i in range(n)
    ]  # fmt: skip
    await store.actions.insert_many(docs)
    return wf_id


async def test_ends_at_once_are_each_announced_and_counted_once_and_the_workflow_ends_once(store: Store) -> None:
    bus = MemoryBus()
    mover = Mover(store, bus, "test")
    wf_id = await running_workflow(store, N)
    now = time.time()

    async def finish(i: int) -> dict | None:
        return await mover.action(
            f"{wf_id}.{i}", A.FINISHED, sources=[A.RUNNING], set={"finished_at": now, "seconds": 2.0, "size": 0}
        )

    ended = await asyncio.gather(*(finish(i) for i in range(N)))
    # Every move won, and again none does: a repeated end has no effect.
    assert all(d is not None and d["state"] == A.FINISHED for d in ended)
    assert await asyncio.gather(*(finish(i) for i in range(N))) == [None] * N

    finished = [e.subject.action_id for e in bus.published if e.type == EventType.ACTION_FINISHED]
    assert sorted(finished) == sorted(f"{wf_id}.{i}" for i in range(N))
    assert [e.subject.workflow_id for e in bus.published if e.type == EventType.WORKFLOW_FINISHED] == [wf_id]
    wf = await store.workflows.find_one({"_id": wf_id})
    assert wf["state"] == "SUCCEEDED" and wf["open_actions"] == 0
    for resolution in stats.RESOLUTIONS:
        (bucket,) = [b for b in await stats.query(store, resolution, now - 1, now + 1) if b.actions_computed]
        assert bucket.actions_computed == N and bucket.compute_seconds == 2.0 * N
    assert (await stats.per_user(store, "1d", now - 1, now + 1))["ada"].actions_computed == N


async def test_an_end_alone_has_its_effects_applied_before_its_move_returns(store: Store) -> None:
    bus = MemoryBus()
    mover = Mover(store, bus, "test")
    wf_id = await running_workflow(store, 2)
    await mover.action(f"{wf_id}.0", A.FINISHED, sources=[A.RUNNING], set={"finished_at": time.time()})
    assert [e.type for e in bus.published] == [EventType.ACTION_FINISHED]
    assert (await store.workflows.find_one({"_id": wf_id}))["open_actions"] == 1


async def test_a_group_of_claims_moves_only_the_actions_its_guards_match(store: Store) -> None:
    bus = MemoryBus()
    mover = Mover(store, bus, "test")
    wf_id = await running_workflow(store, 4, state="READY")
    await store.actions.update_many({"workflow_id": wf_id}, {"$set": {"attempt": 0}})
    await store.actions.update_one({"_id": f"{wf_id}.1"}, {"$set": {"kill_requested": True}})  # being killed
    await store.actions.update_one({"_id": f"{wf_id}.2"}, {"$set": {"attempt": 1}})  # readied again since
    guard = {"attempt": 0, "kill_requested": {"$ne": True}}
    moves = [(f"{wf_id}.{i}", guard, {"attempt": 1, "lease_owner": "me"}) for i in range(4)]

    moved = await mover.actions_each(moves, A.SUBMITTED, source=A.READY, by="me")
    assert [d["_id"] for d in moved] == [f"{wf_id}.0", f"{wf_id}.3"]
    assert all(d["state"] == A.SUBMITTED and d["lease_owner"] == "me" for d in moved)
    assert [h["state"] for h in moved[0]["history"]] == [A.SUBMITTED]
    states = [d["state"] async for d in store.actions.find({"workflow_id": wf_id}).sort("_id", 1)]
    assert states == ["SUBMITTED", "READY", "READY", "SUBMITTED"]
    # The same claims again win nothing: each attempt is claimed once.
    assert await mover.actions_each(moves, A.SUBMITTED, source=A.READY, by="me") == []


async def test_a_wide_workflow_runs_each_action_once(system: Api) -> None:
    n = 40
    plan = await system.submit({"name": "wide-groups", "actions": [shell_action(i, f"wide-{i}") for i in range(n)]})
    wf = await system.wait(plan["id"], timeout=120)
    assert wf["state"] == "SUCCEEDED"
    assert all(a["state"] == "FINISHED" and a["attempts"] == 1 for a in wf["actions"])
    async for doc in system.db.actions.find({"workflow_id": plan["id"]}):
        assert [h["state"] for h in decode(doc)["history"]].count("SUBMITTED") == 1


async def test_two_pollers_claiming_the_same_due_polls_share_them(store: Store) -> None:
    wf_id = await running_workflow(store, 30, state="SUBMITTED")
    await store.actions.update_many({"workflow_id": wf_id}, {"$set": {"next_poll_at": 1.0, "poll_count": 0}})
    due = [a async for a in store.actions.find({"workflow_id": wf_id})]

    def polls() -> list[tuple[dict, float]]:
        return [(a, 10.0) for a in due]

    mine, theirs = await asyncio.gather(
        acts.claim_polls(store, polls(), "mine"), acts.claim_polls(store, polls(), "theirs")
    )
    assert not mine & theirs and mine | theirs == {a["_id"] for a in due}
    # Taken once: the same polls claimed again find them taken.
    assert await acts.claim_polls(store, polls(), "late") == set()


async def test_a_group_of_commits_records_each_once_and_rereads_one_changed_since_it_was_read(store: Store) -> None:
    now = time.time()
    docs = [ds.new_document(f"h{i}", {"i": i}, f"/out/{i}", f"p{i}", False, "test", [], now) for i in range(4)]
    await store.datasets.insert_many(docs)
    seen = {d["_id"]: await ds.get(store, d["_id"]) for d in docs}
    # Since they were read: a follower registered while h1's producer was planned noted
    # itself (what the success reads back), and h2 was taken as a leaf.
    await ds.note_unlisted_follower(store, "h1")
    await store.datasets.update_one({"_id": "h2"}, {"$set": {"state": "TO_LEAF"}})
    outputs = [ds.Output(f"h{i}", f"p{i}", 10 + i, 1.5, False, checksum=f"c{i}", seen=seen[f"h{i}"]) for i in range(4)]

    recorded = await ds.record_outputs(store, outputs, "test")
    assert [r["state"] for r in recorded] == ["STORED", "STORED", "LEAF", "STORED"]
    assert [bool(r.get("unlisted_followers")) for r in recorded] == [False, True, False, False]
    for i in range(4):
        d = await ds.get(store, f"h{i}")
        assert (d["size"], d["checksum"], d["producers"], d["compute_count"]) == (10 + i, f"c{i}", [], 1)
        assert [h["state"] for h in d["history"]].count(d["state"]) == 1
    # Recorded again (a repeated success), nothing is counted twice: no producer is left to strike off.
    await ds.record_outputs(store, outputs, "test")
    assert [(await ds.get(store, f"h{i}"))["compute_count"] for i in range(4)] == [1, 1, 1, 1]


@pytest.mark.settings(poll_interval=30.0, poll_max_interval=60.0, callback_base_url=f"http://127.0.0.1:{free_port()}")
async def test_ends_notified_together_finish_each_action_once_repeated_or_stale(system: Api) -> None:
    # The jobs' own notifications go nowhere and the poller is too slow to matter: the
    # notifications below, at once, are all there is (docs/performance.md, "Work in groups").
    n = 6
    plan = await system.submit({"name": "ends-together", "actions": [shell_action(i, f"et-{i}") for i in range(n)]})
    ids = [a["id"] for a in plan["actions"]]
    outcomes = system.ctx.outcomes("test")
    jobs: dict[str, dict] = {}
    deadline = time.monotonic() + 60
    while len(jobs) < n and time.monotonic() < deadline:
        for a in [d async for d in system.db.actions.find({"workflow_id": plan["id"], "job_id": {"$exists": True}})]:
            if (await system.ctx.executor.status(a["job_id"])).state == JobState.SUCCEEDED:
                jobs[a["_id"]] = a
        await asyncio.sleep(0.1)
    assert len(jobs) == n

    def notified(aid: str, job_id: str | None = None) -> Awaitable[bool]:
        return outcomes.finish_notified(aid, job_id or jobs[aid]["job_id"], jobs[aid]["hash"], True)

    # Each end twice (a repeated notification), and one naming a job that is not its action's,
    # all arriving while another group's leases are taken, and the successes committed
    # while another group's are recorded: each step makes one group of them all.
    calls = [notified(aid) for aid in ids] + [notified(aid) for aid in reversed(ids)] + [notified(ids[0], "stale")]
    async with outcomes.leases.committing, outcomes.concluding.committing:
        finishing = asyncio.gather(*calls)
        while len(outcomes.leases.waiting) < len(calls):
            await asyncio.sleep(0.01)
        outcomes.leases.committing.release()
        while len(outcomes.concluding.waiting) < n:
            await asyncio.sleep(0.01)
        await outcomes.leases.committing.acquire()  # as the block expects to leave it
        # One moved on since its lease was taken (the poller saw its job run): the group's
        # guarded write passes it by, and it is moved alone, from where it is now.
        await system.db.actions.update_one({"_id": ids[1]}, {"$set": {"state": "RUNNING"}})
    results = await finishing
    assert results[-1] is False
    assert [results[i] + results[2 * n - 1 - i] for i in range(n)] == [1] * n  # each finished by one call

    wf = await system.wait(plan["id"], timeout=30)
    assert wf["state"] == "SUCCEEDED"
    async for doc in system.db.actions.find({"workflow_id": plan["id"]}):
        doc = decode(doc)
        assert [h["state"] for h in doc["history"]].count("FINISHED") == 1
        assert [e["outcome"] for e in doc["attempt_log"]] == ["succeeded"]
    datasets = [decode(d) async for d in system.db.datasets.find({"_id": {"$in": [jobs[a]["hash"] for a in ids]}})]
    assert [(d["state"], d["producers"], d["compute_count"]) for d in datasets] == [("LEAF", [], 1)] * n
    # They were recorded and moved together (what tags a group's write), not one by one.
    assert len({d.get("move_batch") for d in datasets}) == 1 and datasets[0].get("move_batch")
    batches = {a["_id"]: a["move_batch"] async for a in system.db.actions.find({"workflow_id": plan["id"]})}
    assert len({batches[aid] for aid in ids if aid != ids[1]}) == 1 and batches[ids[1]] != batches[ids[0]]
