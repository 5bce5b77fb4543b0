"""Dataset documents: one per lineage hash, cycling through thesis Table 3.2.

``claims`` lists the actions that will read the dataset (it is never deleted while any
remain); ``producers`` lists the actions computing it now.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from typing import Any

from pymongo import ReturnDocument
from pymongo.errors import BulkWriteError, DuplicateKeyError

from shared.errors import PingoError
from shared.states import (
    DATASET_BEING_DELETED,
    DATASET_HELD,
    DATASET_IN_FLIGHT,
    DATASET_REUSABLE,
    DATASET_TRANSITIONS,
    DatasetState,
    IllegalTransition,
    check,
)
from shared.store.client import INSERT_CHUNK, Store
from shared.store.paging import page_after
from shared.store.records import DatasetRecord
from shared.store.transitions import decode, history_entry, transition, transition_each, transition_many

log = logging.getLogger(__name__)
D = DatasetState


def lineage_matches(doc: dict[str, Any], lineage: dict[str, Any]) -> bool:
    """The thesis's second step: a hash match is only a reuse if the lineage is identical."""
    stored = doc.get("lineage")
    if stored is not None and stored != lineage:
        log.error("lineage hash collision on %s: stored %r, asked %r", doc["_id"], stored, lineage)
        return False
    return True


async def get(store: Store, h: str) -> dict[str, Any] | None:
    return decode(await store.datasets.find_one({"_id": h}))


async def histories(store: Store, hashes: list[str]) -> list[DatasetRecord]:
    """The histories of the datasets ``hashes`` that exist (a workflow's timeline)."""
    return [DatasetRecord.of(d) for d in (await get_many(store, hashes, {"history": 1})).values()]


async def record(store: Store, h: str) -> DatasetRecord | None:
    """The dataset as the API shows it, history and lineage included."""
    doc = await store.datasets.find_one({"_id": h})
    return DatasetRecord.of(doc) if doc is not None else None


async def try_reuse(
    store: Store,
    h: str,
    lineage: dict[str, Any],
    claimants: list[str],
    leaf: bool,
    by: str,
    seen: dict[str, Any] | None = None,
) -> bool:
    """Claim a stored dataset for ``claimants`` atomically; False means compute instead.

    A dataset marked for deletion whose file is still whole is taken back (revived)
    rather than deleted and computed again. A leaf that reuses a STORED dataset
    promotes it to LEAF so the decision algorithm can never choose it.
    ``seen``: the dataset as read earlier, to claim from without reading it again: the
    claim is guarded by the state it shows, and a state that changed since, or one that
    does not allow the claim, is read again.
    """
    for attempt in range(3):
        # A ``seen`` that is not reusable may be out of date: only the store says it is not.
        use_seen = attempt == 0 and seen is not None and seen["state"] in DATASET_REUSABLE
        doc = seen if use_seen else await get(store, h)
        if doc is None or doc["state"] not in DATASET_REUSABLE or not lineage_matches(doc, lineage):
            return False
        state = doc["state"]
        target = D.LEAF if (leaf or state == D.LEAF) else D.STORED
        now = time.time()
        extra = {"last_used_at": now}
        if state == target:
            res = await store.datasets.find_one_and_update(
                {"_id": h, "state": state},
                {"$addToSet": {"claims": {"$each": claimants}}, "$set": extra, "$inc": {"use_count": 1}},
                return_document=ReturnDocument.AFTER,
            )
        else:
            res = await transition(
                store.datasets,
                DATASET_TRANSITIONS,
                h,
                target,
                by=by,
                sources=[state],
                set=extra,
                add_to_set={"claims": claimants},
                inc={"use_count": 1},
                note="reused" if state in (D.STORED, D.LEAF) else "revived by a reuse",
            )
        if res is not None:
            return True
    return False


async def claim_in_flight(
    store: Store, h: str, claimants: list[str], leaf: bool, by: str, seen: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Claim a dataset being computed for ``claimants`` (the children of an action that
    will follow its computation); a leaf follower makes it a LEAF. The claims come
    before the follow, so the output is protected from the moment it is stored. The
    document back (None: it is no longer being computed). ``seen``: as in ``try_reuse``."""
    for attempt in range(3):
        use_seen = attempt == 0 and seen is not None and seen["state"] in DATASET_IN_FLIGHT and seen.get("producers")
        doc = seen if use_seen else await get(store, h)
        if doc is None or doc["state"] not in DATASET_IN_FLIGHT or not doc.get("producers"):
            return None
        state = doc["state"]
        if leaf and state == D.TO_STORE:
            res = await transition(
                store.datasets, DATASET_TRANSITIONS, h, D.TO_LEAF, by=by, sources=[state],
                add_to_set={"claims": claimants}, inc={"use_count": 1}, note="followed by a leaf",
            )  # fmt: skip
        else:
            res = await store.datasets.find_one_and_update(
                {"_id": h, "state": state},
                {"$addToSet": {"claims": {"$each": claimants}}, "$inc": {"use_count": 1}},
                return_document=ReturnDocument.AFTER,
            )
        if res is not None:
            return decode(res)
    return None


async def note_unlisted_follower(store: Store, h: str) -> None:
    """A follower of ``h``'s computation may be missing from its producer's ``followers``
    (registered while the producer was still being planned): the producer's success,
    which reads this dataset back, then looks its followers up by query
    (docs/performance.md, "A chain's hop")."""
    await store.datasets.update_one({"_id": h}, {"$set": {"unlisted_followers": True}})


async def set_twin(store: Store, h: str, twin: dict[str, Any]) -> None:
    """``h``'s action was cut off early: what stands for its output (docs/planning.md, "Early cutoff")."""
    await store.datasets.update_one({"_id": h}, {"$set": {"twin": twin}})


async def add_claims(store: Store, h: str, claimants: list[str]) -> None:
    """Protect a dataset for readers planned later (re-planning, an identical action)."""
    if claimants:
        await store.datasets.update_one({"_id": h}, {"$addToSet": {"claims": {"$each": claimants}}})


async def get_many(
    store: Store, hashes: list[str] | set[str], fields: dict[str, int] | None = None, chunk: int = 1000
) -> dict[str, dict[str, Any]]:
    """The documents of ``hashes`` that exist, in few reads ($in on _id is index-served)."""
    out: dict[str, dict[str, Any]] = {}
    unique = list(dict.fromkeys(hashes))
    for i in range(0, len(unique), chunk):
        async for d in store.datasets.find({"_id": {"$in": unique[i : i + chunk]}}, fields):
            out[d["_id"]] = decode(d)
    return out


async def stored_bytes(store: Store) -> int:
    """The size of every STORED dataset: what the decision service keeps within budget."""
    pipeline = [{"$match": {"state": str(D.STORED)}}, {"$group": {"_id": None, "bytes": {"$sum": "$size"}}}]
    rows = [r async for r in await store.datasets.aggregate(pipeline)]
    return int(rows[0]["bytes"] or 0) if rows else 0


# A guard that a user has not pinned the dataset (docs/api.md, "Datasets by hand").
NOT_PINNED = {"pinned": {"$ne": True}}


async def deletable(store: Store) -> list[dict[str, Any]]:
    """STORED datasets no action claims and no user pinned: what an eviction algorithm
    may choose from (pinned is read here, not queried: nx-27017 serves one equality)."""
    found = store.datasets.find({"state": str(D.STORED), "claims": {"$size": 0}}, {"history": 0})
    return [d async for d in found if not d.get("pinned")]


async def any_deletable(store: Store) -> bool:
    """Whether some dataset could be evicted now (``deletable`` is not empty)."""
    found = store.datasets.find({"state": str(D.STORED), "claims": {"$size": 0}}, {"pinned": 1})
    async for d in found:
        if not d.get("pinned"):
            return True
    return False


async def any_being_freed(store: Store) -> bool:
    """Whether some dataset's bytes are on their way out: marked for deletion (and claimed by
    nobody) or being deleted. One equality on the indexed state each ($in scans on nx-27017)."""
    for state in (D.STORED_TO_DELETE, D.INVALIDATED):
        if await store.datasets.find_one({"state": str(state), "claims": {"$size": 0}}, {"_id": 1}) is not None:
            return True
    for state in DATASET_BEING_DELETED:
        if await store.datasets.find_one({"state": str(state)}, {"_id": 1}) is not None:
            return True
    return False


async def annotate(
    store: Store, h: str, state: str, by: str, note: str, set: dict[str, Any] | None = None,
    unset: list[str] | None = None,
) -> dict[str, Any] | None:  # fmt: skip
    """Record a user's change that is no move (pinning, an expiry date) in the history,
    as an entry of the state it stays in, guarded by that state: None if it moved since."""
    now = time.time()
    update: dict[str, Any] = {
        "$set": {"updated_at": now, **(set or {})},
        "$push": {"history": history_entry(state, by, note, at=now)},
    }
    if unset:
        update["$unset"] = dict.fromkeys(unset, "")
    res = await store.datasets.find_one_and_update({"_id": h, "state": str(state)}, update,
                                                   return_document=ReturnDocument.AFTER)  # fmt: skip
    return decode(res)


async def withdrawn_unclaimed(store: Store, limit: int, fields: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """At most ``limit`` INVALIDATED datasets nothing claims or computes: their files go."""
    query = {"state": str(D.INVALIDATED), "claims": {"$size": 0}, "producers": {"$size": 0}}
    return [d async for d in store.datasets.find(query, fields).limit(limit)]


# Nothing claims or computes it: what a sweep may withdraw or hand to eviction.
IDLE = {"claims": {"$size": 0}, "producers": {"$size": 0}}


async def expired(store: Store, state: str, now: float, limit: int, after: str = "") -> list[dict[str, Any]]:
    """At most ``limit`` datasets in ``state`` whose expiry date has passed and that nothing
    needs, after the hash ``after`` in ``_id`` order: an equality on state and a range on
    ``expires_at``, as ``stale_leases``, paged by ``_id`` so that a sweep reaches them all."""
    query = {"state": str(state), "expires_at": {"$lt": now}, **IDLE}
    return await _page(store, query, limit, after)


async def unused_leaves(store: Store, before: float, limit: int, after: str = "") -> list[dict[str, Any]]:
    """At most ``limit`` LEAF datasets last used before ``before`` (the retention policy) that
    nothing needs, after the hash ``after`` in ``_id`` order: an equality on state and a
    range on ``last_used_at``, paged as ``expired``."""
    query = {"state": str(D.LEAF), "last_used_at": {"$lt": before}, **IDLE}
    return await _page(store, query, limit, after)


async def _page(store: Store, query: dict[str, Any], limit: int, after: str) -> list[dict[str, Any]]:
    """At most ``limit`` datasets ``query`` finds, after the hash ``after``, in hash order.
    The page after the first is cut here, not asked of the store: nx-27017 turns a range
    on ``_id`` beside the indexed equality and range into a scan of every dataset (2 s
    among 100 k, holding the store meanwhile; benchmarks/history.py)."""
    found = store.datasets.find(query, {"history": 0, "lineage": 0}).sort("_id", 1)
    if not after:
        return [d async for d in found.limit(limit)]
    return [d async for d in found if d["_id"] > after][:limit]


async def marked_unclaimed(store: Store, limit: int, fields: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """At most ``limit`` STORED_TO_DELETE datasets no action claims: what the dataset
    manager deletes."""
    query = {"state": str(D.STORED_TO_DELETE), "claims": {"$size": 0}}
    return [d async for d in store.datasets.find(query, fields).limit(limit)]


async def stale_leases(
    store: Store, state: DatasetState, before: float, limit: int, fields: dict[str, int] | None = None
) -> list[dict[str, Any]]:
    """At most ``limit`` datasets in ``state`` whose lease was taken before ``before`` (its
    holder died): one equality on state, index-served ($in is not on nx-27017)."""
    query = {"state": str(state), "lease_at": {"$lt": before}}
    return [d async for d in store.datasets.find(query, fields).limit(limit)]


async def hashes_in_state(store: Store, state: DatasetState) -> list[str]:
    """The hashes of every dataset in ``state`` (an equality on state: index-served)."""
    return [d["_id"] async for d in store.datasets.find({"state": str(state)}, {"_id": 1})]


async def live_among(store: Store, names: list[str]) -> set[str]:
    """Those of ``names`` that are datasets not DELETED: their files belong to them. Read
    by _id, so the cost follows the folders on disk, not the history of every dataset
    (a ``$ne`` on state scans the whole collection on nx-27017)."""
    found = await get_many(store, names, {"state": 1})
    return {h for h, d in found.items() if d["state"] != D.DELETED}


async def newest(
    store: Store, limit: int, state: str | None = None, after: tuple[float, str] | None = None
) -> list[DatasetRecord]:
    """Datasets most recently changed first (ties by hash), without history and lineage,
    after ``after`` (the change time and hash of the last one of the previous page)."""
    query: dict[str, Any] = {"state": state} if state else {}
    if after is not None:
        query["updated_at"] = {"$lte": after[0]}  # ties with the last one are dropped below
    cursor = store.datasets.find(query, {"history": 0, "lineage": 0}).sort([("updated_at", -1), ("_id", -1)])
    return [DatasetRecord.of(d) for d in await page_after(cursor, "updated_at", after, limit)]


async def bytes_by_state(store: Store) -> dict[str, int]:
    """The size of every dataset, per state: one aggregate per state, each an equality on
    the indexed ``state`` (one grouping of the whole collection is not index-served)."""

    async def of(state: D) -> int:
        pipeline = [{"$match": {"state": str(state)}}, {"$group": {"_id": None, "bytes": {"$sum": "$size"}}}]
        rows = [r async for r in await store.datasets.aggregate(pipeline)]
        return int(rows[0]["bytes"] or 0) if rows else 0

    sizes = await asyncio.gather(*(of(s) for s in D))
    return {str(s): n for s, n in zip(D, sizes, strict=True) if n}


async def held_by_owner(store: Store) -> dict[str | None, tuple[int, int]]:
    """Per owner (the user whose workflow committed it; None: no users then), the number
    and bytes of the datasets held in storage: one aggregate per state, each an equality
    on the indexed ``state``."""

    async def of(state: D) -> list[dict[str, Any]]:
        pipeline = [
            {"$match": {"state": str(state)}},
            {"$group": {"_id": "$owner", "bytes": {"$sum": "$size"}, "n": {"$sum": 1}}},
        ]
        return [r async for r in await store.datasets.aggregate(pipeline)]

    out: dict[str | None, tuple[int, int]] = {}
    for rows in await asyncio.gather(*(of(s) for s in DATASET_HELD)):
        for r in rows:
            n, size = out.get(r["_id"], (0, 0))
            out[r["_id"]] = (n + int(r["n"] or 0), size + int(r["bytes"] or 0))
    return out


def new_document(
    h: str, lineage: dict[str, Any], path: str, producer: str, leaf: bool, by: str, claimants: list[str], now: float
) -> dict[str, Any]:
    """A dataset seen for the first time, with ``producer`` computing it."""
    to = D.TO_LEAF if leaf else D.TO_STORE
    return {
        "_id": h,
        "hash": h,
        "state": str(to),
        "lineage": lineage,
        "path": path,
        "claims": claimants,
        "producers": [producer],
        "size": None,
        "compute_seconds_total": 0.0,
        "compute_count": 0,
        "use_count": 1,
        "created_at": now,
        "updated_at": now,
        "last_used_at": now,
        "history": [history_entry(to, by, at=now)],
    }


async def create_many(store: Store, docs: list[dict[str, Any]]) -> set[str]:
    """Insert new dataset documents in one batch; the hashes that existed already (a
    concurrent planner created them) come back, for the caller to prepare one by one."""
    existed: set[str] = set()
    # In several short commands (``INSERT_CHUNK``): others are answered between.
    for i in range(0, len(docs), INSERT_CHUNK):
        try:
            await store.datasets.insert_many(docs[i : i + INSERT_CHUNK], ordered=False)
        except BulkWriteError as exc:
            dup = {e["op"]["_id"] for e in exc.details.get("writeErrors", []) if e.get("code") == 11000}
            if len(dup) != len(exc.details.get("writeErrors", [])):
                raise
            existed |= dup
    return existed


async def prepare_compute(
    store: Store,
    h: str,
    lineage: dict[str, Any],
    path: str,
    producer: str,
    leaf: bool,
    by: str,
    claimants: list[str],
    used_at: float | None = None,
) -> None:
    """Record that ``producer`` will compute dataset ``h`` (creating the document if new),
    and that ``claimants`` (its computed children) will read it: the output is then
    protected from deletion from the moment it is stored until they have run.
    ``used_at`` is its new last use (default: now)."""
    to = D.TO_LEAF if leaf else D.TO_STORE
    for _ in range(10):
        doc = await get(store, h)
        now = used_at or time.time()
        if doc is None:
            try:
                await store.datasets.insert_one(new_document(h, lineage, path, producer, leaf, by, claimants, now))
                return
            except DuplicateKeyError:
                continue
        state = doc["state"]
        common = {"set": {"last_used_at": now}, "add_to_set": {"producers": [producer], "claims": claimants}, "by": by}
        if state in (D.DELETED, D.LOST, D.INVALIDATED):
            res = await transition(store.datasets, DATASET_TRANSITIONS, h, to, sources=[state], **common)
        elif state == D.TO_STORE and leaf:
            res = await transition(store.datasets, DATASET_TRANSITIONS, h, D.TO_LEAF, sources=[state], **common)
        elif state in (D.STORED_TO_DELETE, D.PROCESSING) or (state == D.STORED and leaf):
            # A forced recomputation of a dataset marked for deletion: take it back first,
            # so the deletor cannot remove the new output after it is committed.
            target = D.LEAF if leaf else D.STORED
            res = await transition(
                store.datasets, DATASET_TRANSITIONS, h, target, sources=[state], note="forced", **common
            )
        else:
            res = await store.datasets.find_one_and_update(
                {"_id": h, "state": state},
                {
                    "$addToSet": {"producers": producer, "claims": {"$each": claimants}},
                    "$set": {"last_used_at": now},
                    "$inc": {"use_count": 1},
                },
            )
        if res is not None:
            return
    raise RuntimeError(f"dataset {h} kept changing while preparing its computation")


class Deferred(PingoError):
    """The dataset is being deleted right now: commit the new output after it is gone."""


async def record_output(
    store: Store, h: str, producer: str, size: int | None, seconds: float, leaf: bool, by: str,
    *, files: int | None = None, checksum: str | None = None, owner: str | None = None,
    storage: str | None = None, seen: dict[str, Any] | None = None, input_changed: list | None = None,
    twin: dict[str, Any] | None = None,
) -> dict[str, Any] | None:  # fmt: skip
    """After a producer succeeded and its output was committed: STORED or LEAF, with stats
    and what its files were at commit (``size``, ``files``, ``checksum``: what a later
    verification compares against), and whose workflow made it (``owner``: its bytes are
    attributed to them, docs/users.md), and where it lives (``storage``: the committing
    storage's identity; the reconcile sweep judges only its own storage's datasets).

    ``seen``: the dataset as the producer read it before committing, which saves reading
    it again on a chain's hop (issue 10). The move is guarded by the state it was seen
    in; if that changed since, the dataset is read again and the move tried from there."""
    doc = seen if seen is not None else await get(store, h)
    if doc is None:
        return None
    state = doc["state"]
    if state in DATASET_BEING_DELETED:
        raise Deferred(h)
    counted = producer in doc.get("producers", [])
    committed = _committed(Output(h, producer, size, seconds, leaf, files, checksum, owner, storage, None,
                                  input_changed, twin))  # fmt: skip
    update: dict[str, Any] = {
        "set": committed,
        "unset": ["withdrawn"],  # what lies at the path now is this commit's, not the withdrawn one
        "pull": {"producers": [producer]},
        "inc": {"compute_seconds_total": seconds, "compute_count": 1} if counted else None,
    }
    if state == D.STORED_TO_DELETE:
        # Marked while a forced recomputation ran: its replacement is what lies at the path now.
        res = decode(
            await store.datasets.find_one_and_update(
                {"_id": h, "state": state},
                {"$pull": {"producers": producer}, "$set": committed},
                return_document=ReturnDocument.AFTER,
            )
        )
    else:
        target = D.LEAF if (leaf or state in (D.LEAF, D.TO_LEAF)) else D.STORED
        res = await transition(store.datasets, DATASET_TRANSITIONS, h, target, by=by, sources=[state], **update)
    if res is not None:
        return res
    if seen is not None:  # it moved since it was seen: from what it is now
        return await record_output(
            store, h, producer, size, seconds, leaf, by, files=files, checksum=checksum, owner=owner, storage=storage,
            input_changed=input_changed, twin=twin,
        )  # fmt: skip
    return await get(store, h)


@dataclass(frozen=True)
class Output:
    """One producer's committed output, as ``record_output`` records it (its arguments)."""

    h: str
    producer: str
    size: int | None
    seconds: float
    leaf: bool
    files: int | None = None
    checksum: str | None = None
    owner: str | None = None
    storage: str | None = None
    seen: dict[str, Any] | None = None
    input_changed: list | None = None
    twin: dict[str, Any] | None = None

    def record(self, store: Store, by: str) -> Awaitable[dict[str, Any] | None]:
        return record_output(
            store, self.h, self.producer, self.size, self.seconds, self.leaf, by, files=self.files,
            checksum=self.checksum, owner=self.owner, storage=self.storage, seen=self.seen,
            input_changed=self.input_changed, twin=self.twin,
        )  # fmt: skip


async def record_outputs(store: Store, outputs: list[Output], by: str) -> list[dict[str, Any] | Deferred | None]:
    """``record_output`` for the outputs of many producers that succeeded together, each
    as it would be recorded alone (the dataset as recorded, None, or ``Deferred``): the
    datasets seen in one state and moving to one state are moved in one write, each
    guarded by the state it was seen in (docs/performance.md, "Work in groups"). A write
    that moves them all needs no read: each is what it was seen as, with the commit;
    the note of a follower unlisted (what the producer's success reads back) is part of
    the guard. One not moved so (it changed since it was seen) is recorded alone, as is
    one that cannot be moved so (seen being deleted or marked, not seen, or twice)."""
    results: list[dict[str, Any] | Deferred | None] = [None] * len(outputs)
    alone: list[int] = []  # recorded alone, from what was seen
    again: list[int] = []  # not moved with their group: recorded alone, read again
    groups: dict[tuple[str, str], list[int]] = {}
    hashes = Counter(o.h for o in outputs)
    for i, o in enumerate(outputs):
        state = (o.seen or {}).get("state")
        target = _target(state, o.leaf) if state else None
        if len(outputs) == 1 or state is None or target is None or hashes[o.h] > 1:
            alone.append(i)
        else:
            groups.setdefault((state, target), []).append(i)
    token = uuid.uuid4().hex
    for (state, target), idx in groups.items():
        moves, more = [], {}
        for i in idx:
            o, seen = outputs[i], outputs[i].seen or {}
            # As the commit reads the note back: it must not appear unseen between the read and the write.
            moves.append((o.h, {} if seen.get("unlisted_followers") else {"unlisted_followers": {"$ne": True}},
                          _committed(o)))  # fmt: skip
            more[o.h] = {"$unset": {"withdrawn": ""}, "$pull": {"producers": {"$in": [o.producer]}}}
            if o.producer in seen.get("producers", []):
                more[o.h]["$inc"] = {"compute_seconds_total": o.seconds, "compute_count": 1}
        n = await transition_each(
            store.datasets, DATASET_TRANSITIONS, moves, target, by=by, source=state, token=token, more=more
        )
        if n == len(idx):
            moved = {outputs[i].h for i in idx}
        else:
            docs = await get_many(store, [outputs[i].h for i in idx], {"move_batch": 1})
            moved = {h for h, d in docs.items() if d.get("move_batch") == token}
        for i in idx:
            o = outputs[i]
            if o.h not in moved:
                again.append(i)
                continue
            producers = [p for p in (o.seen or {}).get("producers", []) if p != o.producer]
            results[i] = {**(o.seen or {}), **_committed(o), "state": target, "producers": producers}
    for i in sorted(alone + again):
        try:
            results[i] = await (replace(outputs[i], seen=None) if i in again else outputs[i]).record(store, by)
        except Deferred as exc:
            results[i] = exc
    return results


def _target(state: str, leaf: bool) -> str | None:
    """Where ``record_output`` moves a dataset seen in ``state`` (None: it is not moved by
    a transition there, or not at all)."""
    if state in DATASET_BEING_DELETED or state == D.STORED_TO_DELETE:
        return None
    target = D.LEAF if (leaf or state in (D.LEAF, D.TO_LEAF)) else D.STORED
    try:
        check(DATASET_TRANSITIONS, state, target)
    except IllegalTransition:
        return None
    return str(target)


def _committed(o: Output) -> dict[str, Any]:
    """What a commit records in its dataset."""
    return {
        "size": o.size, "files": o.files, "checksum": o.checksum, "committed_at": time.time(),
        "produced_by": o.producer, "owner": o.owner, "storage": o.storage, "input_changed": o.input_changed,
        "twin": o.twin,  # an earlier lineage's byte-identical output (docs/planning.md, "Early cutoff")
    }  # fmt: skip


async def flag_nondeterministic(store: Store, h: str, record: dict[str, Any]) -> None:
    """A recomputation of ``h`` made other bytes than its last commit (``record``: the
    checksums, docs/planning.md, "Determinism audit"): kept with the dataset, counted."""
    await store.datasets.update_one(
        {"_id": h}, {"$set": {"nondeterministic": {**record, "at": time.time()}}, "$inc": {"nondeterministic_count": 1}}
    )


RELEASE_CHUNK = 500


def mean_seconds(doc: dict[str, Any] | None) -> float | None:
    """The mean time one computation of a dataset took; None if it was never computed
    (the caller decides what an unknown cost means for it)."""
    count = int((doc or {}).get("compute_count") or 0)
    return float(doc.get("compute_seconds_total") or 0.0) / count if doc and count else None


async def release(store: Store, held: dict[str, set[str]], produced: set[str], by: str, reason: str) -> None:
    """Actions ended (or were never written): drop them from the claims and producers
    of the datasets they held (``held``: dataset -> action ids). A dataset in
    ``produced`` left with no producer before it was ever stored never existed: DELETED.
    Idempotent; a few writes per thousand datasets (``$in`` on ``_id`` is index-served).

    Each dataset is written once where it can be: one whose only producers are these
    actions (read first) is released and DELETED in the same guarded write, which a
    producer added since the read turns down (its count of producers changed); the
    others, and any so turned down, are released, then DELETED if no producer is left."""
    abandoned = await _abandoned(store, held, produced)
    expected = sum(len(hs) for hs in abandoned.values())
    moved = 0
    for (state, n), hashes in abandoned.items():
        for i in range(0, len(hashes), RELEASE_CHUNK):
            chunk = hashes[i : i + RELEASE_CHUNK]
            ids = sorted(set().union(*(held[h] for h in chunk)))
            moved += await transition_many(
                store.datasets, DATASET_TRANSITIONS, {"_id": {"$in": chunk}, "producers": {"$size": n}}, D.DELETED,
                by=by, sources=[state], pull={"claims": ids, "producers": ids}, note=reason,
            )  # fmt: skip
    done = {h for hs in abandoned.values() for h in hs} if moved == expected else set()
    rest = sorted(h for h in held if h not in done)
    for i in range(0, len(rest), RELEASE_CHUNK):
        chunk = rest[i : i + RELEASE_CHUNK]
        ids = sorted(set().union(*(held[h] for h in chunk)))
        await store.datasets.update_many(
            {"_id": {"$in": chunk}}, {"$pull": {"claims": {"$in": ids}, "producers": {"$in": ids}}}
        )
    gone = sorted(h for h in produced if h not in done)
    for i in range(0, len(gone), RELEASE_CHUNK):
        where = {"_id": {"$in": gone[i : i + RELEASE_CHUNK]}, "producers": {"$size": 0}}
        await transition_many(
            store.datasets, DATASET_TRANSITIONS, where, D.DELETED, by=by, sources=[D.TO_STORE, D.TO_LEAF], note=reason
        )


async def _abandoned(store: Store, held: dict[str, set[str]], produced: set[str]) -> dict[tuple[str, int], list[str]]:
    """The datasets of ``produced`` never stored whose every producer is among those that
    release them, by state and number of producers (what their guarded write checks)."""
    out: dict[tuple[str, int], list[str]] = {}
    docs = await get_many(store, sorted(produced), {"state": 1, "producers": 1})
    for h, d in sorted(docs.items()):
        producers = set(d.get("producers") or [])
        if d.get("state") in (D.TO_STORE, D.TO_LEAF) and producers and producers <= held.get(h, set()):
            out.setdefault((str(d["state"]), len(d.get("producers") or [])), []).append(h)
    return out


def held_by(actions: list[dict[str, Any]]) -> tuple[dict[str, set[str]], set[str]]:
    """What ``release`` needs from action documents: the datasets each claims or
    produces, and the datasets produced."""
    held: dict[str, set[str]] = {}
    produced: set[str] = set()
    for a in actions:
        for h in a.get("claims", []):
            held.setdefault(h, set()).add(a["_id"])
        if a.get("managed"):
            held.setdefault(a["hash"], set()).add(a["_id"])
            produced.add(a["hash"])
    return held, produced
