"""Evicting: managed intermediate storage kept in budget (thesis section 3.7;
docs/operations.md, "Storage budget").

Usage is the size of STORED datasets (with budget reservations on: also LEAF ones, the
reservations of attempts being written and what actions held READY wait for); datasets
already marked (STORED_TO_DELETE, PROCESSING, DELETING) count as freed, so a decision
never marks more while deletions are pending. Past ``threshold x capacity`` the
configured algorithm (``shared.eviction``) chooses among unclaimed STORED datasets until
usage would be under ``target x capacity``; each is marked by a guarded write that also
requires it to still be unclaimed and unpinned, and the dataset managers delete it
(``shared.lifecycle.deleting``). One replica decides at a time: its caller holds the lease.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from shared.config import Settings
from shared.eviction import Algorithm, Candidate, Workload, get_algorithm
from shared.eviction.budget import bytes_to_free
from shared.lifecycle import reserving
from shared.lifecycle.moves import Mover
from shared.metrics import CAPACITY_BYTES, DECISION_RUNS, THRESHOLD_BYTES, USED_BYTES
from shared.states import DatasetState
from shared.store import Store, budget
from shared.store import actions as acts
from shared.store import datasets as ds

log = logging.getLogger(__name__)
D = DatasetState


@dataclass
class Evictor:
    store: Store
    mover: Mover
    settings: Settings
    by: str
    algorithm: Algorithm = field(init=False)

    def __post_init__(self) -> None:
        # One instance for every decision: an algorithm may learn across them (Adaptive).
        self.algorithm = get_algorithm(self.settings.algorithm)

    async def usage(self) -> int:
        """STORED and LEAF bytes, the reservations of attempts being written, and what
        actions held READY for want of room wait for: freeing for those evicts ahead of
        the writes (docs/operations.md, "Storage budget")."""
        if not self.settings.budget_reservations:
            return await ds.stored_bytes(self.store)  # the thesis's rule: STORED bytes alone
        # A want not renewed by a scrape for this long is an action that stopped waiting.
        fresh = time.time() - 3 * max(self.settings.scrape_interval, self.settings.decision_interval)
        reserved, wanted = await budget.pending(self.store, fresh)
        return await budget.counted_bytes(self.store) + reserved + wanted

    async def workload(self) -> Workload:
        """The rolling window of the last N actions, with the lineage, mean compute time and
        presence of their datasets: cost-aware algorithms charge a deleted dataset with the
        recomputation of its ancestors that are no longer stored either."""
        rows = await acts.recent(
            self.store, self.settings.history_window, {"workflow_id": 1, "hash": 1, "created_at": 1}
        )
        hashes = list({r["hash"] for r in rows})
        fields = {"state": 1, "lineage.parents": 1, "compute_seconds_total": 1, "compute_count": 1}
        docs = await ds.get_many(self.store, hashes, fields)
        return Workload.from_actions(rows).with_datasets(docs.values())

    async def decide(self) -> None:
        """One decision: over the threshold, mark what the algorithm chooses to free."""
        capacity = self.settings.capacity_bytes
        # A reservation whose action manager died before its claim is dropped after stale_after.
        await reserving.sweep(self.store, time.time() - self.settings.stale_after)
        used = await self.usage()
        # Set by the lease holder only: a standby's gauges keep its last reading.
        USED_BYTES.set(used)
        CAPACITY_BYTES.set(capacity)
        THRESHOLD_BYTES.set(self.settings.threshold * capacity)
        to_free = bytes_to_free(used, capacity, self.settings.threshold, self.settings.target)
        if not to_free:
            DECISION_RUNS.labels("under_threshold").inc()
            return
        DECISION_RUNS.labels("over_threshold").inc()
        candidates = [
            Candidate(d["_id"], int(d.get("size") or 0), ds.mean_seconds(d) or 0.0, float(d.get("last_used_at") or 0.0))
            for d in await ds.deletable(self.store)
        ]
        chosen = self.algorithm.select(await self.workload(), candidates, to_free)
        log.info(
            "usage %d B > %.0f%% of %d B: %s marks %d datasets to free %d B",
            used, 100 * self.settings.threshold, capacity, self.algorithm.name, len(chosen), to_free,
        )  # fmt: skip
        for rank, h in enumerate(chosen, 1):
            # Why it was chosen, kept with it: its DATASET_MARKED event (which wakes the
            # dataset managers) says so to integrators.
            mark = {"reason": "over_threshold", "rank": rank, "usage_bytes": used, "capacity_bytes": capacity,
                    "to_free_bytes": to_free}  # fmt: skip
            await self.mover.dataset(
                h, D.STORED_TO_DELETE, by=self.by, sources=[D.STORED],
                where={"claims": {"$size": 0}, **ds.NOT_PINNED},  # pinned by a user since it was read
                set={"marked_by": self.algorithm.name, "mark": mark}, note=self.algorithm.name,
            )  # fmt: skip
