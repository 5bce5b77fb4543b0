"""History statistics at several time granularities (thesis section 2.2.1; the PanDA
slides' time-bucket aggregates).

Every counted event increments one bucket per resolution, in the same moment it happens
(right after the winning transition), so a query reads at most a few thousand small
bucket documents and never scans raw actions. Counters are flat fields (``failures:<reason>``)
so the upsert works on every MongoDB-compatible server.
"""

from __future__ import annotations

import math

from pymongo import UpdateOne

from shared.store.client import Store
from shared.store.records import COUNTERS as COUNTED
from shared.store.records import BucketRecord, Totals

RESOLUTIONS: dict[str, int] = {"1m": 60, "30m": 1800, "1d": 86_400, "10d": 864_000}
# What a bucket counts: the fields of its record (``records.Totals``), in their order.
COUNTERS = COUNTED
FAILURE_PREFIX = "failures:"
# The per-user key of work done while users were off (no workflow had an owner): counted
# per user like anyone's, so the users' figures always add up to the team's and every view
# of them (``pingo datasets --by-user``, the History page) reads the same buckets.
NO_USER = ""
# A query may span this many buckets (120 days of minutes is 172,800); beyond it, coarser.
MAX_BUCKETS = 250_000


def bucket_start(at: float, width: int) -> float:
    return float(math.floor(at / width) * width)


def bucket_of(at: float) -> float:
    """The start of the finest bucket holding ``at``: every coarser one holds that bucket
    whole, so what is counted at any instant of it may be counted at its start."""
    return bucket_start(at, min(RESOLUTIONS.values()))


def collection(store: Store):
    return store.db["history_buckets"]


def by_user(store: Store):
    """The same buckets per user (``owner``, NO_USER for none): who computed, reused and saved what."""
    return store.db["history_buckets_by_user"]


async def count(
    store: Store, at: float, failure: str | None = None, failures: int = 1, owner: str | None = None, **counters: float
) -> None:
    """Add ``counters`` (names from COUNTERS) and ``failures`` failures with one reason, at
    time ``at``, to the team's buckets and to ``owner``'s (None: NO_USER's)."""
    inc = {k: v for k, v in counters.items() if v}
    unknown = set(inc) - set(COUNTERS)
    if unknown:
        raise ValueError(f"unknown history counters: {sorted(unknown)}")
    if failure and failures:
        inc[FAILURE_PREFIX + failure] = failures
    if not inc:
        return
    owner = NO_USER if owner is None else owner
    ops, mine = [], []
    for res, width in RESOLUTIONS.items():
        start = bucket_start(at, width)
        ops.append(UpdateOne({"_id": f"{res}:{start:.0f}"},
                             {"$inc": inc, "$setOnInsert": {"res": res, "start": start}}, upsert=True))  # fmt: skip
        mine.append(UpdateOne({"_id": f"{owner}:{res}:{start:.0f}"},
                              {"$inc": inc, "$setOnInsert": {"owner": owner, "res": res, "start": start}},
                              upsert=True))  # fmt: skip
    await collection(store).bulk_write(ops, ordered=False)
    await by_user(store).bulk_write(mine, ordered=False)


async def query(
    store: Store, resolution: str, start: float, end: float, dense_limit: int = 10_000
) -> list[BucketRecord]:
    """Buckets overlapping [start, end), oldest first. Empty buckets are included (as
    zeros) when there are at most ``dense_limit`` of them, so a plot has no gaps."""
    width = RESOLUTIONS[resolution]
    first = bucket_start(start, width)
    cursor = collection(store).find({"res": resolution, "start": {"$gte": first, "$lt": end}}).sort("start", 1)
    found = {doc["start"]: BucketRecord.of(doc, width, FAILURE_PREFIX) async for doc in cursor}
    count = math.ceil((end - first) / width)
    if count > dense_limit:
        return list(found.values())
    out = []
    for i in range(count):
        s = first + i * width
        out.append(found.get(s) or BucketRecord.empty(s, width))
    return out


async def per_user(store: Store, resolution: str, start: float, end: float) -> dict[str, Totals]:
    """Each user's totals over the buckets overlapping [start, end), by name (NO_USER: work
    done while users were off)."""
    width = RESOLUTIONS[resolution]
    first = bucket_start(start, width)
    buckets: dict[str, list[BucketRecord]] = {}
    cursor = by_user(store).find({"res": resolution, "start": {"$gte": first, "$lt": end}})
    async for doc in cursor:
        buckets.setdefault(doc["owner"], []).append(BucketRecord.of(doc, width, FAILURE_PREFIX))
    return {owner: Totals.of_all(found) for owner, found in buckets.items()}
