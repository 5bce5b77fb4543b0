"""The storage budget's reservations (docs/operations.md, "Storage budget").

Before an attempt starts, the bytes its output is expected to take are reserved; the
reservation is dropped when the attempt ends (at commit its dataset's real size is in the
catalogue by then). One document in the ``budget`` collection, ``_id`` ``"storage"``:

- ``reserved``: the sum of the reservations held, and ``holds.<key>``: each of them
  (``action``, ``bytes``, ``at``), added and removed in the same write as the sum;
- ``version``: raised by every release, so a reservation computed against a reading of
  the catalogue that a commit has since changed is tried again (see ``reserve``);
- ``wanted.<key>``: what actions held READY for want of room wait for (``bytes``,
  ``at``): the decision service frees for them too (evicts ahead).

A reservation is one guarded find-and-modify on this document: several action managers
reserve at once, and the guard (``reserved <= capacity - held - bytes``) keeps the sum of
what is held and reserved within capacity. The expected size of an action's output is
remembered per action name in documents ``_id`` ``"size:<name>"`` (``bytes``: the last one),
read once per planning for all its actions (``expected_by_names``).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass
from typing import Any

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from shared.states import DATASET_HELD as HELD
from shared.states import DatasetState
from shared.store.client import Store

D = DatasetState
BUDGET = "storage"
# Counted by the decision service: what is on storage and not already being deleted.
COUNTED = (D.STORED, D.LEAF)


@dataclass(frozen=True)
class Refused:
    """No room for a reservation: what it asked, and what was held and reserved then."""

    bytes: int
    held: int
    reserved: int
    capacity: int

    def message(self) -> str:
        return (
            f"waits for storage: its output is expected to take {self.bytes} B, and {self.held} B are stored "
            f"and {self.reserved} B reserved of a {self.capacity} B budget"
        )


def _key(text: str) -> str:
    # Action ids hold dots, which a field path cannot.
    return hashlib.sha1(text.encode()).hexdigest()[:20]


async def _sum(store: Store, states: tuple[D, ...]) -> int:
    total = 0
    for state in states:  # one equality on the indexed state each ($in scans on nx-27017)
        pipeline = [{"$match": {"state": str(state)}}, {"$group": {"_id": None, "bytes": {"$sum": "$size"}}}]
        rows = [r async for r in await store.datasets.aggregate(pipeline)]
        total += int(rows[0]["bytes"] or 0) if rows else 0
    return total


async def held_bytes(store: Store) -> int:
    """Every committed byte still on storage (marked for deletion and being deleted included)."""
    return await _sum(store, HELD)


async def counted_bytes(store: Store) -> int:
    """STORED and LEAF bytes: what the decision service counts as used (the rest is being freed)."""
    return await _sum(store, COUNTED)


async def document(store: Store) -> dict[str, Any]:
    """The budget's document, written by the first process that opens the store (so a
    service's timer never writes it later, in the middle of something else)."""
    doc = await store.budget.find_one({"_id": BUDGET})
    if doc is not None:
        return doc
    try:
        await store.budget.insert_one({"_id": BUDGET, "reserved": 0, "version": 0, "holds": {}, "wanted": {}})
    except DuplicateKeyError:
        pass
    return await store.budget.find_one({"_id": BUDGET}) or {}


async def reserve(store: Store, action_id: str, n: int, capacity: int) -> str | Refused:
    """Reserve ``n`` bytes for ``action_id``'s attempt: its key, or why not (no room).

    ``held`` is read before the guarded write; it can only have shrunk since (a deletion)
    unless an attempt committed and released its reservation meanwhile, which raised
    ``version``: the write is then refused and tried again on a fresh reading."""
    wanted = f"wanted.{_key(action_id)}"
    while True:
        doc = await document(store)
        version = int(doc.get("version") or 0)
        held = await held_bytes(store)
        key = uuid.uuid4().hex
        now = time.time()
        res = await store.budget.find_one_and_update(
            {"_id": BUDGET, "version": version, "reserved": {"$lte": capacity - held - n}},
            {
                "$inc": {"reserved": n},
                "$set": {f"holds.{key}": {"action": action_id, "bytes": n, "at": now}},
                "$unset": {wanted: ""},
            },
            return_document=ReturnDocument.AFTER,
        )
        if res is not None:
            return key
        now_doc = await document(store)
        if int(now_doc.get("version") or 0) != version:
            continue  # a release since: read again
        reserved = int(now_doc.get("reserved") or 0)
        if reserved + held + n <= capacity:
            continue  # a release and a new reservation cancelled out: read again
        await store.budget.update_one({"_id": BUDGET}, {"$set": {wanted: {"action": action_id, "bytes": n, "at": now}}})
        return Refused(n, held, reserved, capacity)


async def release(store: Store, key: str) -> bool:
    """Drop the reservation ``key``: True if it was held (idempotent)."""
    doc = await store.budget.find_one({"_id": BUDGET})  # small: the holds of the attempts in flight
    hold = ((doc or {}).get("holds") or {}).get(key)
    if not hold:
        return False
    n = int(hold.get("bytes") or 0)
    res = await store.budget.update_one(
        {"_id": BUDGET, f"holds.{key}.bytes": n},
        {"$inc": {"reserved": -n, "version": 1}, "$unset": {f"holds.{key}": ""}},
    )
    return res.modified_count == 1


async def pending(store: Store, fresh_after: float) -> tuple[int, int]:
    """What the decision service frees for besides what is stored: (bytes reserved, bytes
    wanted by actions held since ``fresh_after``; an older want is one nobody renewed)."""
    doc = await document(store)
    wanted = sum(int(w.get("bytes") or 0) for w in (doc.get("wanted") or {}).values() if w.get("at", 0) > fresh_after)
    return int(doc.get("reserved") or 0), wanted


async def holds(store: Store) -> dict[str, dict[str, Any]]:
    """Every reservation held, by key."""
    return (await document(store)).get("holds") or {}


async def expected_by_name(store: Store, name: str) -> int | None:
    doc = await store.budget.find_one({"_id": f"size:{name}"})
    return int(doc["bytes"]) if doc and doc.get("bytes") is not None else None


async def expected_by_names(store: Store, names: set[str], chunk: int = 1000) -> dict[str, int]:
    """The size remembered for each of ``names`` that has one, in few reads ($in on _id is
    index-served): what a planning reads once for all its computed actions."""
    out: dict[str, int] = {}
    ids = [f"size:{n}" for n in sorted(names)]
    for i in range(0, len(ids), chunk):
        async for d in store.budget.find({"_id": {"$in": ids[i : i + chunk]}}, {"bytes": 1}):
            if d.get("bytes") is not None:
                out[d["_id"][len("size:") :]] = int(d["bytes"])
    return out


async def remember_size(store: Store, name: str, size: int) -> None:
    """The size the last output of an action named ``name`` had: the next one's expectation."""
    await store.budget.update_one(
        {"_id": f"size:{name}"}, {"$set": {"bytes": int(size), "at": time.time()}}, upsert=True
    )
