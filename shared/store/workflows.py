"""Workflow documents: their state is derived from their actions' (settled by
``shared.lifecycle.moves.Mover.settle``).

A workflow's submitted body and its planning bookkeeping (every action id, every dataset
hash its planning may touch) live in a separate document of ``workflow_definitions``,
written once: the workflow document itself stays small, because on a document store
every state change rewrites the whole document.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pymongo import ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection

from shared.states import ACTION_TERMINAL, ActionState, WorkflowState
from shared.store.client import Store
from shared.store.paging import page_after
from shared.store.records import WorkflowBrief, WorkflowRecord
from shared.store.transitions import decode, history_entry

W = WorkflowState


def definitions(store: Store) -> AsyncCollection:
    """``{_id: workflow id, body, action_ids, dataset_hashes, created_at}``."""
    return store.db["workflow_definitions"]


def derive_counted(states: Mapping[str, int], kill_requested: bool) -> WorkflowState | None:
    """The workflow's final state once every action is terminal, else None, from how many
    actions are in each state (``actions.state_counts``). A workflow with no actions has not
    ended: its actions were never written (or were undone)."""
    present = {s for s, n in states.items() if n}
    if not present or any(s not in ACTION_TERMINAL for s in present):
        return None
    if kill_requested:
        return W.KILLED
    if present & {ActionState.FAILED, ActionState.KILLED}:
        return W.FAILED
    return W.SUCCEEDED


def new_document(
    wf_id: str, name: str, action_count: int, planner: str, now: float, by: str, owner: str | None = None,
    webhooks: list[str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A workflow accepted by validation, PLANNING under ``planner``'s lease. ``owner``: the
    user who submitted it (None while users are off: docs/users.md). ``webhooks``: its own
    webhook URLs, or [] when only the installation's are called: its end is then due to be
    told (``webhooks_due``, docs/webhooks.md); None: no webhook."""
    told = {} if webhooks is None else {"webhooks": webhooks, "webhooks_due": True}
    return {
        **told,
        "_id": wf_id,
        "name": name,
        "owner": owner,
        "state": str(W.PLANNING),
        "created_at": now,
        "updated_at": now,
        "history": [history_entry(W.PLANNING, by)],
        "kill_requested": False,
        # Whether any of its actions may be followed: its kill's hand-over reads them only then.
        "followed": False,
        "planner": planner,
        "planning_lease_at": now,
        "action_count": action_count,
    }


async def insert(store: Store, doc: dict[str, Any], definition: dict[str, Any]) -> None:
    """The definition first: a workflow document always has its definition."""
    await definitions(store).insert_one(definition)
    await store.workflows.insert_one(doc)


async def mark_followed(store: Store, workflow_id: str) -> None:
    """One of the workflow's actions is about to be followed (written before the follower
    is registered, so a kill that finds the mark unset saw no follower yet)."""
    await store.workflows.update_one({"_id": workflow_id}, {"$set": {"followed": True}})


async def may_be_followed(store: Store, workflow_id: str) -> bool:
    """Whether any of the workflow's actions may have followers: a big workflow's kill
    reads every action's followers only then (docs/performance.md, "A big workflow"). A
    workflow written before the mark existed may."""
    wf = await store.workflows.find_one({"_id": workflow_id}, {"followed": 1})
    return wf is not None and wf.get("followed") is not False


async def planning_of(store: Store, workflow_id: str) -> dict[str, Any] | None:
    """What a workflow's planning may have claimed or produced: ``action_ids`` and
    ``dataset_hashes`` of its definition (what an undo releases)."""
    return await definitions(store).find_one({"_id": workflow_id}, {"action_ids": 1, "dataset_hashes": 1})


async def webhooks_due(store: Store, fields: dict[str, int]) -> list[dict[str, Any]]:
    """Workflows whose end is still to be written to the webhook outbox, ended or not: one
    equality on an indexed field (the running ones among them are few)."""
    return [decode(w) or w async for w in store.workflows.find({"webhooks_due": True}, fields)]


async def webhooks_written(store: Store, workflow_id: str) -> None:
    """Its end's webhook deliveries are in the outbox (shared/store/webhooks.py)."""
    await store.workflows.update_one({"_id": workflow_id}, {"$unset": {"webhooks_due": ""}})


async def get(store: Store, workflow_id: str, fields: dict[str, int] | None = None) -> dict[str, Any] | None:
    return decode(await store.workflows.find_one({"_id": workflow_id}, fields))


async def record(store: Store, workflow_id: str, fields: dict[str, int] | None = None) -> WorkflowRecord | None:
    """The workflow as the API shows it (``fields``: a projection keeping ``state``)."""
    doc = await store.workflows.find_one({"_id": workflow_id}, fields if fields is not None else {"definition": 0})
    return WorkflowRecord.of(doc) if doc is not None else None


async def brief(store: Store, workflow_id: str) -> WorkflowBrief | None:
    """The workflow's name and owner (whether a caller may see it), if it exists."""
    doc = await store.workflows.find_one({"_id": workflow_id}, {"name": 1, "owner": 1})
    return WorkflowBrief.of(doc) if doc is not None else None


async def in_state(store: Store, state: WorkflowState, fields: dict[str, int], **where: Any) -> list[dict[str, Any]]:
    return [w async for w in store.workflows.find({"state": str(state), **where}, fields)]


async def renew_planning_lease(store: Store, workflow_id: str, planner: str, now: float) -> bool:
    won = await store.workflows.find_one_and_update(
        {"_id": workflow_id, "state": str(W.PLANNING), "planner": planner},
        {"$set": {"planning_lease_at": now}},
        projection={"_id": 1},
    )
    return won is not None


async def request_kill(store: Store, workflow_id: str, now: float, by: str | None = None) -> WorkflowRecord | None:
    """Record a kill request (and who asked: ``by``, a user name) on a PLANNING or RUNNING
    workflow; the document as it was before (so the caller knows whether this request was
    the first), or None if it has ended or does not exist. A repeated kill keeps the first
    asker."""
    live = {"_id": workflow_id, "state": {"$in": [str(W.PLANNING), str(W.RUNNING)]}}
    first = await store.workflows.find_one_and_update(
        {**live, "kill_requested": False},
        {"$set": {"kill_requested": True, "kill_applied": False, "kill_requested_at": now, "killed_by": by}},
        projection={"history": 0},
    )
    if first is None:
        first = await store.workflows.find_one(live, {"history": 0})  # asked before, or ended, or none
    return WorkflowRecord.of(first) if first is not None else None


# What settling a workflow reads of it (``Mover.settle``).
SETTLE_FIELDS = {
    "state": 1, "kill_requested": 1, "kill_applied": 1, "open_actions": 1, "last_move_at": 1, "held_stats_since": 1,
}  # fmt: skip
# Usage statistics held in a workflow's document until it settles (``count_open``), by the
# start of their minute bucket, then counter.
HELD = "held_stats"


async def count_open(
    store: Store, workflow_id: str, delta: int, now: float, held: dict[float, dict[str, float]] | None = None
) -> dict[str, Any] | None:
    """Its live actions changed by ``delta`` (actions ended, or reopened by re-planning):
    the workflow as settling reads it, after the change (so an action's end costs one
    write, not a write and a read). ``held``: usage statistics added to the workflow's
    held ones in the same write, by minute bucket (``take_held_stats`` hands them over)."""
    update: dict[str, Any] = {"$inc": {"open_actions": delta}, "$set": {"last_move_at": now}}
    for bucket, counters in (held or {}).items():
        update["$inc"].update({f"{HELD}.{bucket:.0f}.{k}": v for k, v in counters.items() if v})
        update["$min"] = {"held_stats_since": now}
    return await store.workflows.find_one_and_update(
        {"_id": workflow_id}, update, projection=SETTLE_FIELDS, return_document=ReturnDocument.AFTER
    )


async def take_held_stats(store: Store, workflow_id: str) -> tuple[str | None, dict[float, dict[str, float]]]:
    """The workflow's held usage statistics, taken (one write: whoever takes them counts
    them, once), with its owner."""
    doc = await store.workflows.find_one_and_update(
        {"_id": workflow_id}, {"$unset": {HELD: "", "held_stats_since": ""}}, projection={HELD: 1, "owner": 1}
    )
    held = (doc or {}).get(HELD) or {}
    return (doc or {}).get("owner"), {float(b): dict(c) for b, c in held.items() if isinstance(c, dict)}


async def recount_open(store: Store, workflow_id: str, live: int, seen_move_at: float | None) -> None:
    """Correct a count a crash left behind (a move whose count was never applied), unless
    an action moved since it was read."""
    await store.workflows.update_one(
        {"_id": workflow_id, "last_move_at": seen_move_at}, {"$set": {"open_actions": live}}
    )


async def kill_applied(store: Store, workflow_id: str) -> None:
    await store.workflows.update_one({"_id": workflow_id}, {"$set": {"kill_applied": True}})


async def take_kill_lease(store: Store, workflow_id: str, token: str, now: float, stale_before: float) -> bool | None:
    """Become the one applier of a workflow's kill: None if another holds a lease renewed
    since ``stale_before`` (it is applying it now), else whether this is the first
    application (no applier held it before: nothing of the kill was written yet)."""
    free = [{"kill_lease_at": {"$exists": False}}, {"kill_lease_at": {"$lt": stale_before}}]
    before = await store.workflows.find_one_and_update(
        {"_id": workflow_id, "kill_requested": True, "$or": free},
        {"$set": {"kill_lease_at": now, "kill_lease": token}},
        projection={"kill_lease_at": 1},
    )
    return None if before is None else "kill_lease_at" not in before


async def renew_kill_lease(store: Store, workflow_id: str, token: str, now: float) -> bool:
    won = await store.workflows.find_one_and_update(
        {"_id": workflow_id, "kill_lease": token}, {"$set": {"kill_lease_at": now}}, projection={"_id": 1}
    )
    return won is not None


async def drop_kill_lease(store: Store, workflow_id: str, token: str) -> None:
    """The applier is done (or failed): the next application need not wait for the lease."""
    await store.workflows.update_one({"_id": workflow_id, "kill_lease": token}, {"$set": {"kill_lease_at": 0.0}})


async def newest(
    store: Store, limit: int, *, state: str | None = None, name: str | None = None, before: float | None = None,
    after: tuple[float, str] | None = None, owner: str | None = None,
) -> list[WorkflowRecord]:  # fmt: skip
    """Workflows newest first (ties by id), without their histories, optionally of one
    owner, in one state, with one name, created before a time, and after ``after`` (the
    creation time and id of the last one of the previous page: a keyset, stable under
    inserts)."""
    query: dict[str, Any] = {}
    if owner is not None:
        query["owner"] = owner
    if state:
        query["state"] = state
    if name:
        query["name"] = name
    created: dict[str, float] = {}
    if before is not None:
        created["$lt"] = before
    if after is not None:
        # $lte, then the ties with the last one dropped here: an $or would not be index-served.
        created["$lte"] = after[0]
    if created:
        query["created_at"] = created
    cursor = store.workflows.find(query, {"history": 0}).sort([("created_at", -1), ("_id", -1)])
    return [WorkflowRecord.of(d) for d in await page_after(cursor, "created_at", after, limit)]


async def earlier(store: Store, name: str, owner: str | None, before: float, limit: int) -> list[str]:
    """The ids of the newest ``limit`` workflows named ``name`` (of ``owner``, if given)
    created before ``before``, newest first (ties by id): an equality on the indexed
    ``name``, and nothing read but the ids."""
    query: dict[str, Any] = {"name": name, "created_at": {"$lt": before}}
    if owner is not None:
        query["owner"] = owner
    cursor = store.workflows.find(query, {"_id": 1}).sort([("created_at", -1), ("_id", -1)]).limit(limit)
    return [d["_id"] async for d in cursor]


async def briefs(store: Store, workflow_ids: list[str] | set[str]) -> dict[str, WorkflowBrief]:
    """The name and owner of the workflows that exist among ``workflow_ids`` ($in on _id is index-served)."""
    ids = sorted(set(workflow_ids))
    return {
        w["_id"]: WorkflowBrief.of(w)
        async for w in store.workflows.find({"_id": {"$in": ids}}, {"name": 1, "owner": 1})
    }
