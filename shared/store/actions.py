"""Action documents: their shape, and every read and write of the ``actions`` collection.

One document per action of a submitted workflow, ``_id`` = ``<workflow id>.<local id>``.
State moves go through ``shared.lifecycle.moves`` (the guarded writer and its effects);
the other writes here touch only bookkeeping fields (leases, poll schedule, job id),
each guarded by the state it expects. Every query is an equality on an indexed field
(``state``, ``workflow_id``, ``_id``), served from the indexes in ``client.py`` on every
store we run on.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, TypedDict

from pymongo import ReturnDocument, UpdateOne

from shared.states import ACTION_LIVE, ACTION_TERMINAL, ActionState, WorkflowState
from shared.store import workflows
from shared.store.client import INSERT_CHUNK, Store
from shared.store.records import ActionRecord
from shared.store.transitions import decode
from shared.workflow_spec import ActionId, id_order

A = ActionState


class ActionDoc(TypedDict, total=False):
    """The stored action (docs/state-machines.md, "Action"). Written by the planner;
    later writers only add the fields of their step."""

    _id: str
    workflow_id: str
    owner: str | None  # its workflow's (events carry it)
    local_id: ActionId
    name: str
    type: str
    # The submitted action as hashed (ActionSpec.definition()), without what the document
    # holds already or what is None or empty (stored_definition): read it with definition_of.
    definition: dict[str, Any]
    hash: str  # lineage hash: the dataset it produces
    managed: bool  # its output is a managed dataset
    force: bool  # forceComputation: computed even if stored
    leaf: bool  # no computed child reads it: kept as LEAF
    decision: str  # the plan's word: "compute" or "reuse"
    reason: str | None  # why (planner: stored, in_flight, takeover, replanned...), or why it ended
    # Computed: what changed since it was last computed (shared.lifecycle.misses.Miss.stored);
    # null: never computed before; absent: planned before misses were explained.
    miss: dict[str, Any] | None
    # Early cutoff looks at its start (misses.Miss.may_be_cut_off, asked at planning); absent: it does not.
    cutoff_candidate: bool
    # Following a computation in flight (docs/state-machines.md, "Following"):
    follows: str  # FOLLOWING: the action computing its dataset
    followers: list[str]  # the actions following this one's computation
    successor: str  # the follower elected to carry on when this one ended unfinished
    job_handed_to: str  # its running job was adopted by that follower: never kill it
    takeover_of: str  # the action whose computation it took over
    takeover_failures: int  # failed computations of its dataset along the takeover chain
    output_path: str
    parents: list[str]
    parent_local_ids: list[ActionId]
    input_paths: list[str]
    children: list[str]  # computed children, made READY when it finishes
    pending_parents: list[str]  # computed parents not finished yet
    claims: list[str]  # datasets it will read, protected until it ends
    state: str
    history: list[dict[str, Any]]  # transitions, appended by the guarded writer
    created_at: float
    updated_at: float
    attempt: int
    submit_errors: int
    # Execution settings (not in the lineage hash) and what they caused (docs/state-machines.md,
    # "Retries and timeouts"): the retry policy as RetryPolicy's fields, the timeout of one
    # attempt, failed attempts so far, when a RETRYING action is READY again, when the
    # attempt in flight is checked for its timeout, the job a timeout killed.
    retries: dict[str, float]
    timeout_seconds: float | None
    # The storage budget (docs/operations.md, "Storage budget"): the declared size of its
    # output (expectedBytes), what its start reserves and what its name's remembered size
    # was, both worked out at planning (shared.lifecycle.reserving), the attempt's
    # reservation ({key, bytes}), and why a READY action is not started yet ({reason,
    # message, bytes, at}).
    expected_bytes: int | None
    reserve_bytes: int | None
    named_bytes: int | None
    input_bytes: int | None  # its largest input's size so far: a first run's reservation
    reservation: dict[str, Any] | None
    held: dict[str, Any] | None
    failed_attempts: int
    retry_at: float
    timeout_at: float
    timed_out_job: str
    attempt_log: list[dict[str, Any]]  # one entry per attempt that ended (attempt_entry)
    secret: str | None  # the callback secret; None for actions never run
    saved_seconds: float  # for REUSED/SKIPPED: the mean compute time it saved
    action_folder_path: str
    # Action manager: the PROCESSING lease, then the attempt submitted.
    lease_owner: str
    lease_at: float
    external_id: str  # "<action id>#<attempt>": how an executor finds a job again
    attempt_path: str  # where this attempt writes; committed to output_path on success
    submitted_at: float
    executor: str
    job_id: str | None
    # Callback service: the poll schedule and the finish lease.
    next_poll_at: float
    poll_count: int
    finish_lease_at: float
    finish_lease_by: str
    kill_requested: bool
    move_batch: str  # the token of the bulk move that moved it last
    # The end.
    started_at: float | None
    ended_at: float | None
    finished_at: float
    seconds: float
    size: int | None
    error: str
    # External inputs that changed while it, or an ancestor, ran ({path, changes}): its
    # output is kept but not reused (docs/planning.md, "External inputs").
    input_changed: list[dict[str, Any]] | None
    upstream_input_changed: list[dict[str, Any]]
    # Its output differs from its lineage's last commit: the checksums (ending.nondeterminism).
    nondeterministic: dict[str, Any]


def stored_definition(definition: dict[str, Any]) -> dict[str, Any]:
    """What an action document keeps of its definition (``ActionSpec.definition()``): not its
    ``type`` and ``name`` (the document's own fields), nor a key holding None or an empty
    list. Read back whole with ``definition_of`` (docs/performance.md, "A big workflow")."""
    return {k: v for k, v in definition.items() if k not in _OWN and v is not None and v != []}


def definition_of(action: ActionDoc) -> dict[str, Any]:
    """An action's definition from its document (``stored_definition``): a key left out
    reads as absent (None or [] through ``.get``); a document written whole reads as it is."""
    return {"type": action["type"], "name": action["name"], **action["definition"]}


# The definition's keys its action document holds already as its own fields.
_OWN = frozenset({"type", "name"})


def attempt_entry(
    action: ActionDoc, outcome: str, error: str | None = None, *, started_at: float | None = None,
    ended_at: float | None = None,
) -> dict[str, Any]:  # fmt: skip
    """What ``attempt_log`` keeps of the attempt ``action`` records, once it ended with
    ``outcome`` (the names in ``shared.lifecycle.attempts``): shown by the API and the CLI,
    read back as ``records.AttemptRecord``. ``started_at``, ``ended_at``: its job's, as
    the executor reported them, if it did."""
    return {
        "attempt": int(action.get("attempt") or 0),
        "job_id": action.get("job_id"),
        "executor": action.get("executor"),
        "submitted_at": action.get("submitted_at"),
        "started_at": started_at or action.get("started_at"),
        "ended_at": ended_at or time.time(),
        "outcome": outcome,
        "error": error,
    }


async def insert_many(store: Store, docs: list[ActionDoc]) -> None:
    for i in range(0, len(docs), INSERT_CHUNK):
        await store.actions.insert_many(docs[i : i + INSERT_CHUNK])


async def delete_workflow(store: Store, workflow_id: str) -> None:
    """Remove the actions of a workflow whose planning was undone."""
    await store.actions.delete_many({"workflow_id": workflow_id})


async def get(store: Store, action_id: str, fields: dict[str, int] | None = None) -> ActionDoc | None:
    return decode(await store.actions.find_one({"_id": action_id}, fields))


async def of_workflow(store: Store, workflow_id: str, fields: dict[str, int] | None = None) -> list[ActionDoc]:
    return [decode(a) async for a in store.actions.find({"workflow_id": workflow_id}, fields)]


async def in_state(
    store: Store, state: ActionState, where: dict[str, Any] | None = None, fields: dict[str, int] | None = None,
    *, workflow_id: str | None = None, sort: str | None = None, limit: int = 0,
) -> list[ActionDoc]:  # fmt: skip
    """Actions in one state (one equality: index-served), optionally of one workflow,
    oldest ``sort`` first, at most ``limit`` (0: all)."""
    query = {"state": str(state), **({"workflow_id": workflow_id} if workflow_id else {}), **(where or {})}
    cursor = store.actions.find(query, fields)
    if sort:
        cursor = cursor.sort(sort, 1)
    if limit:
        cursor = cursor.limit(limit)
    return [decode(a) async for a in cursor]


async def stale_leases(
    store: Store, state: ActionState, before: float, fields: dict[str, int] | None = None, limit: int = 0
) -> list[ActionDoc]:
    """Actions in ``state`` whose lease was taken before ``before`` (their holder died),
    at most ``limit`` (0: all)."""
    return await in_state(store, state, {"lease_at": {"$lt": before}}, fields, limit=limit)


async def live_counts(store: Store, cap: int) -> dict[str, int]:
    """How many actions are in each live state, each counted up to ``cap``: one equality
    on the state per state (index-served), counted by the store, never a scan of ended
    actions. (Reading their ids cost nx-27017 a second with 10,000 actions WAITING.)"""
    counts = {}
    for state in sorted(ACTION_LIVE):
        pipeline = [{"$match": {"state": str(state)}}, {"$limit": cap}, {"$count": "n"}]
        counts[str(state)] = sum([d["n"] async for d in await store.actions.aggregate(pipeline)])
    return counts


async def state_counts(store: Store, workflow_id: str) -> dict[str, int]:
    """How many of a workflow's actions are in each state: one equality on the indexed
    ``workflow_id``, counted by the store (nx-27017 groups in SQL: milliseconds for
    10,000 actions, against 0.6 s to read their states)."""
    pipeline = [{"$match": {"workflow_id": workflow_id}}, {"$group": {"_id": "$state", "n": {"$sum": 1}}}]
    return {d["_id"]: d["n"] async for d in await store.actions.aggregate(pipeline)}


async def recent(store: Store, limit: int, fields: dict[str, int]) -> list[ActionDoc]:
    """The last ``limit`` actions written, newest first."""
    return [a async for a in store.actions.find({}, fields).sort("created_at", -1).limit(limit)]


async def of_workflows(store: Store, workflow_ids: list[str], fields: dict[str, int]) -> AsyncIterator[ActionDoc]:
    async for a in store.actions.find({"workflow_id": {"$in": workflow_ids}}, fields):
        yield a


def first_timeout_check(now: float, timeout_seconds: float | None) -> float | None:
    """When an attempt submitted ``now`` is first checked for its timeout (pushed back to
    the job's real start once it runs, ``Outcomes.enforce_timeout``); None: it has none."""
    return now + float(timeout_seconds) if timeout_seconds else None


async def record_job(
    store: Store, action_id: str, external_id: str, job_id: str, timeout_seconds: float | None = None
) -> ActionDoc | None:
    """The job id of a submitted attempt whose executor makes it (Oozie; others name it
    with the claim: ``Executor.job_id``), and the first check of its timeout; None if the
    attempt is no longer SUBMITTED (killed)."""
    at = first_timeout_check(time.time(), timeout_seconds)
    timeout = {"timeout_at": at} if at is not None else {}
    return await store.actions.find_one_and_update(
        {"_id": action_id, "state": str(A.SUBMITTED), "external_id": external_id},
        {"$set": {"job_id": job_id, **timeout}},
    )


async def claim_timeout(store: Store, action: ActionDoc, next_check: float) -> bool:
    """Take one due timeout check of ``action`` (guarded like ``claim_poll``)."""
    claimed = await store.actions.find_one_and_update(
        {"_id": action["_id"], "state": action["state"], "timeout_at": action["timeout_at"]},
        {"$set": {"timeout_at": next_check}},
        projection={"_id": 1},
    )
    return claimed is not None


async def check_timeout_at(store: Store, action: ActionDoc, at: float) -> None:
    """The attempt's deadline as now known (it started running, or waits for a slot)."""
    await store.actions.update_one(
        {"_id": action["_id"], "state": {"$in": [str(A.SUBMITTED), str(A.RUNNING)]}, "job_id": action["job_id"]},
        {"$set": {"timeout_at": at}},
    )


async def mark_timed_out(store: Store, action: ActionDoc, now: float) -> ActionDoc | None:
    """Record that ``action``'s job ran past its timeout, before it is killed: its end is
    then a failed attempt, not a kill. Due for a poll at once. None if the job is no
    longer the action's."""
    return await store.actions.find_one_and_update(
        {"_id": action["_id"], "state": {"$in": [str(A.SUBMITTED), str(A.RUNNING)]}, "job_id": action["job_id"]},
        {"$set": {"timed_out_job": action["job_id"], "next_poll_at": now}},
        return_document=ReturnDocument.AFTER,
    )


async def claim_poll(store: Store, action: ActionDoc, next_poll_at: float) -> bool:
    """Take one due poll of ``action``: replicas share the poller's work instead of repeating it."""
    claimed = await store.actions.find_one_and_update(
        {"_id": action["_id"], "state": action["state"], "next_poll_at": action["next_poll_at"]},
        {"$set": {"next_poll_at": next_poll_at}, "$inc": {"poll_count": 1}},
        projection={"_id": 1},
    )
    return claimed is not None


async def claim_polls(store: Store, due: list[tuple[ActionDoc, float]], token: str) -> set[str]:
    """``claim_poll`` for many actions (``due``: each with its next poll time) in one write,
    each guarded as ``claim_poll``'s is and tagged with ``token``, then one read by ``_id``:
    the ids of those this caller took."""
    if len(due) <= 1:  # one write, no read
        return {a["_id"] for a, at in due if await claim_poll(store, a, at)}
    ops = [
        UpdateOne(
            {"_id": a["_id"], "state": a["state"], "next_poll_at": a["next_poll_at"]},
            {"$set": {"next_poll_at": at, "poll_token": token}, "$inc": {"poll_count": 1}},
        )
        for a, at in due
    ]
    if not (await store.actions.bulk_write(ops, ordered=False)).modified_count:
        return set()
    return {
        a["_id"]
        for a in await get_many(store, [a["_id"] for a, _ in due], {"poll_token": 1})
        if a.get("poll_token") == token
    }


def _finish_lease(
    action_id: str, job_id: str, token: str, now: float, lease: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The filter and update that take a finish lease: the job must still be the action's,
    in flight, and no other lease younger than ``lease``."""
    return (
        {"_id": action_id, "state": {"$in": [str(A.SUBMITTED), str(A.RUNNING)]}, "job_id": job_id,
         "finish_lease_at": {"$lt": now - lease}},
        {"$set": {"finish_lease_at": now, "finish_lease_by": token}},
    )  # fmt: skip


async def take_finish_lease(store: Store, action: ActionDoc, token: str, now: float, lease: float) -> ActionDoc | None:
    """The right to finish a job's action (docs/state-machines.md, "Ending an action"):
    the action as it is now, to finish it from (its history left out: finishing never
    reads it), or None if another caller holds the lease or the job is no longer its."""
    return decode(
        await store.actions.find_one_and_update(
            *_finish_lease(action["_id"], action["job_id"], token, now, lease),
            projection={"history": 0},
            return_document=ReturnDocument.AFTER,
        )
    )


async def take_finish_leases(
    store: Store, claims: list[tuple[str, str, str]], now: float, lease: float
) -> list[ActionDoc | None]:
    """``take_finish_lease`` for many jobs that ended together (``claims``: action id, job
    id, token), in one guarded write and one read by ``_id``: each action as it is now
    where its lease was taken with its token, else None (docs/performance.md, "Work in
    groups"). An action named twice (a repeated notification) is leased to one of its claims."""
    ops = [UpdateOne(*_finish_lease(aid, job_id, token, now, lease)) for aid, job_id, token in claims]
    if not ops or not (await store.actions.bulk_write(ops, ordered=False)).modified_count:
        return [None] * len(claims)
    found = {d["_id"]: d for d in await get_many(store, list(dict.fromkeys(c[0] for c in claims)), {"history": 0})}
    return [d if (d := found.get(aid)) is not None and d.get("finish_lease_by") == token else None
            for aid, _, token in claims]  # fmt: skip


async def drop_finish_lease(store: Store, action_id: str, token: str) -> None:
    await store.actions.update_one({"_id": action_id, "finish_lease_by": token}, {"$set": {"finish_lease_at": 0.0}})


async def parent_finished(
    store: Store, child_id: str, parent_id: str, raise_to: dict[str, int] | None = None
) -> ActionDoc | None:
    """Strike ``parent_id`` off the child's pending parents (and raise the fields of
    ``raise_to`` to at least its values); the child as it was before."""
    update: dict[str, Any] = {"$pull": {"pending_parents": parent_id}}
    if raise_to:
        update["$max"] = raise_to
    return await store.actions.find_one_and_update(
        {"_id": child_id}, update, projection={"pending_parents": 1, "state": 1}
    )


async def flag_kill(
    store: Store, workflow_id: str, now: float, action_id: str | None = None, state: ActionState | None = None
) -> None:
    """Mark every live action of a workflow (or one of them, or those in one ``state``) as
    to be killed (a flagged action is never submitted), and due for a poll at once."""
    # One write for every state: an action moving between states while a kill is applied
    # (SUBMITTED back to READY after a submit error) cannot slip between two writes.
    one = {"_id": action_id} if action_id else {}
    # In one state: its equality alone. nx-27017 runs an update's equality with ``$ne`` beside
    # it in SQL, where ``$ne`` misses a document without the field (every action not flagged).
    states = (
        {"state": str(state)}
        if state
        else {"state": {"$nin": sorted(ACTION_TERMINAL)}, "kill_requested": {"$ne": True}}
    )
    await store.actions.update_many(
        {**one, "workflow_id": workflow_id, **states}, {"$set": {"kill_requested": True, "next_poll_at": now}}
    )


async def being_planned(store: Store, action_id: str) -> bool:
    """Not written yet, its workflow still PLANNING: its planner writes it soon (or the
    planning is undone). Action ids are ``<workflow id>.<local id>``; workflow ids hold no dot.

    The workflow is read first: a planner writes its actions before its workflow leaves
    PLANNING, so an action absent after its workflow was seen PLANNING was not written
    then. (Read the other way round, a plan written between the two reads looked like
    neither: not written, and no longer planned.) False does not mean the action does not
    exist: it may have been written since the caller last looked."""
    wf = await workflows.get(store, action_id.split(".", 1)[0], {"state": 1})
    if wf is None or wf["state"] != WorkflowState.PLANNING:
        return False
    return await store.actions.find_one({"_id": action_id}, {"_id": 1}) is None


async def add_follower(store: Store, producer_id: str, follower_id: str) -> bool:
    """Register ``follower_id`` on a producer that has not ended: the producer's end
    reads its followers from the document its terminal move returns, so a follower is
    either registered before that move (and resolved by it) or refused."""
    await workflows.mark_followed(store, producer_id.split(".", 1)[0])
    won = await store.actions.find_one_and_update(
        {"_id": producer_id, "state": {"$in": sorted(ACTION_LIVE)}},
        {"$addToSet": {"followers": follower_id}},
        projection={"_id": 1},
    )
    return won is not None


async def elect_successor(store: Store, producer_id: str, follower_id: str) -> bool:
    """Elect the one follower that carries on an ended producer's computation; True if
    this call did (the first election wins, later callers read the winner)."""
    won = await store.actions.find_one_and_update(
        {"_id": producer_id, "successor": None}, {"$set": {"successor": follower_id}}, projection={"_id": 1}
    )
    return won is not None


async def clear_successor(store: Store, producer_id: str, follower_id: str) -> None:
    """The elected follower ended without taking over: a new election may be held."""
    await store.actions.update_one({"_id": producer_id, "successor": follower_id}, {"$set": {"successor": None}})


async def following(store: Store, producer_id: str) -> list[ActionDoc]:
    """The actions FOLLOWING ``producer_id`` (equality on the indexed ``follows``), also
    those not in its ``followers`` (registered while it was still being planned)."""
    return [decode(a) async for a in store.actions.find({"follows": producer_id, "state": str(A.FOLLOWING)})]


async def hand_job_to(store: Store, producer: ActionDoc, follower_id: str) -> ActionDoc | None:
    """Mark a producer's running job as adopted by ``follower_id`` before the follower
    takes it: from then on nobody kills it on the producer's behalf. The producer as it
    is now (None: its job ended or changed meanwhile)."""
    return await store.actions.find_one_and_update(
        {"_id": producer["_id"], "state": {"$in": [str(A.SUBMITTED), str(A.RUNNING)]}, "job_id": producer["job_id"]},
        {"$set": {"job_handed_to": follower_id}},
        return_document=ReturnDocument.AFTER,
    )


async def take_job_back(store: Store, producer_id: str, follower_id: str) -> None:
    """The adoption did not happen: the job is the producer's again."""
    await store.actions.update_one(
        {"_id": producer_id, "job_handed_to": follower_id}, {"$set": {"job_handed_to": None}}
    )


async def add_child(store: Store, parent_id: str, child_id: str) -> bool:
    """Re-planning: ``child_id`` waits for a parent that has not ended (refused if it has)."""
    won = await store.actions.find_one_and_update(
        {"_id": parent_id, "state": {"$in": sorted(ACTION_LIVE)}},
        {"$addToSet": {"children": child_id}},
        projection={"_id": 1},
    )
    return won is not None


async def note_input_changed(store: Store, action_ids: list[str], changed: list[dict[str, Any]]) -> None:
    """Its input was made from external inputs that changed while it was computed: so is
    its output (docs/planning.md, "External inputs"). One write per action, by ``_id``: rare.
    Set, not added to: one tainted parent is enough to taint it, whichever it names."""
    for action_id in action_ids:
        await store.actions.update_one({"_id": action_id}, {"$set": {"upstream_input_changed": changed}})


async def get_many(store: Store, action_ids: list[str], fields: dict[str, int] | None = None) -> list[ActionDoc]:
    """The documents of ``action_ids`` that exist ($in on _id is index-served)."""
    if not action_ids:
        return []
    return [decode(a) async for a in store.actions.find({"_id": {"$in": list(action_ids)}}, fields)]


async def with_hash(store: Store, h: str, fields: dict[str, int], limit: int) -> list[ActionRecord]:
    """The newest ``limit`` actions whose output is dataset ``h`` (computed, reused,
    followed or skipped), newest first: an equality on the indexed ``hash``."""
    cursor = store.actions.find({"hash": h}, fields).sort("created_at", -1).limit(limit)
    return [ActionRecord.of(a) async for a in cursor]


async def children_of(store: Store, workflow_id: str, parent_id: str, fields: dict[str, int]) -> list[ActionRecord]:
    """The actions of a workflow that read ``parent_id``'s output. Found among the
    workflow's actions (equality on ``workflow_id``): an index on the ``parents`` array
    would not be served by nx-27017."""
    found = store.actions.find({"workflow_id": workflow_id, "parents": parent_id}, fields)
    return [ActionRecord.of(a) async for a in found]


async def records(store: Store, action_ids: list[str], fields: dict[str, int]) -> list[ActionRecord]:
    """The actions of ``action_ids`` that exist, as the API shows them."""
    if not action_ids:
        return []
    return [ActionRecord.of(a) async for a in store.actions.find({"_id": {"$in": list(action_ids)}}, fields)]


async def records_of_workflow(store: Store, workflow_id: str) -> list[ActionRecord]:
    """A workflow's actions as the API shows them (without their callback secret), in id order."""
    found = [ActionRecord.of(a) async for a in store.actions.find({"workflow_id": workflow_id}, {"secret": 0})]
    return sorted(found, key=lambda a: id_order(a.local_id))  # type: ignore[arg-type]


async def hold(store: Store, action_id: str, held: dict[str, Any]) -> None:
    """Say why a READY action is not started yet (``held``: reason, message; shown in its
    view). Not a move: it stays READY, in its place in the scrape's order."""
    await store.actions.update_one({"_id": action_id, "state": str(A.READY)}, {"$set": {"held": held}})


async def any_in_flight(store: Store) -> bool:
    """Whether some attempt is being started or runs (one equality on the indexed state each)."""
    for state in (A.RUNNING, A.SUBMITTED, A.PROCESSING):
        if await store.actions.find_one({"state": str(state)}, {"_id": 1}) is not None:
            return True
    return False


async def redirect_input(store: Store, child_id: str, old: str, new: str, claim: str) -> None:
    """A parent cut off early reuses a twin dataset at ``new``: its WAITING child reads
    that instead of ``old`` and claims it (docs/planning.md, "Early cutoff")."""
    child = await get(store, child_id, {"input_paths": 1, "state": 1})
    if child is None or child["state"] != "WAITING":
        return
    paths = [new if p == old else p for p in child.get("input_paths", [])]
    await store.actions.update_one(
        {"_id": child_id, "state": "WAITING"}, {"$set": {"input_paths": paths}, "$addToSet": {"claims": claim}}
    )
