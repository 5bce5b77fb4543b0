"""The decision service (thesis section 3.7): keeps managed intermediate storage in budget.

Usage is the size of STORED datasets; datasets already marked (STORED_TO_DELETE,
PROCESSING, DELETING) count as freed, so a run never marks more while deletions are
pending. Past ``threshold x capacity`` the configured algorithm chooses among unclaimed
STORED datasets until usage would be under ``target x capacity``; each is marked by a
guarded write that also requires it to still be unclaimed. One replica decides at a
time (a lease in the ``locks`` collection).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid

from shared.events import Event, EventType
from shared.eviction import Candidate, Workload, get_algorithm
from shared.eviction.budget import bytes_to_free
from shared.lifecycle import reserving
from shared.metrics import ACTIONS, ACTIONS_CAP, CAPACITY_BYTES, DECISION_RUNS, THRESHOLD_BYTES, USED_BYTES
from shared.runtime import Context
from shared.states import DatasetState
from shared.store import actions as acts
from shared.store import budget, locks
from shared.store import datasets as ds
from shared.ticker import SUMMARY_COALESCE, Ticker, cancel_all, forever

log = logging.getLogger(__name__)
D = DatasetState


class DecisionService:
    name = "decision"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self.algorithm = get_algorithm(self.settings.algorithm)
        self.owner = f"{self.name}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.mover = ctx.mover(self.name)
        # A run reads the usage total however many stored datasets woke it (a chain stores one every few ms).
        self.ticker = Ticker(self.settings.decision_interval, coalesce=SUMMARY_COALESCE)
        self.tasks: list[asyncio.Task] = []
        self.counted_at = 0.0  # when the live actions were last counted for the gauge

    async def start(self) -> None:
        self.tasks.append(asyncio.create_task(forever("decision", self.run_once, self.ticker)))
        # Subscribed last: the loops run on their timers even while the broker is away
        # (events only wake them sooner).
        await self.ctx.bus.subscribe(
            f"{self.settings.exchange}.{self.name}", [EventType.DATASET_STORED.value], self.on_event
        )

    async def stop(self) -> None:
        await cancel_all(self.tasks)

    async def on_event(self, event: Event) -> None:
        self.ticker.poke()

    async def usage(self) -> int:
        """STORED and LEAF bytes, the reservations of attempts being written, and what
        actions held READY for want of room wait for: freeing for those evicts ahead of
        the writes (docs/operations.md, "Storage budget")."""
        if not self.settings.budget_reservations:
            return await ds.stored_bytes(self.ctx.store)  # the thesis's rule: STORED bytes alone
        # A want not renewed by a scrape for this long is an action that stopped waiting.
        fresh = time.time() - 3 * max(self.settings.scrape_interval, self.settings.decision_interval)
        reserved, wanted = await budget.pending(self.ctx.store, fresh)
        return await budget.counted_bytes(self.ctx.store) + reserved + wanted

    async def workload(self) -> Workload:
        """The rolling window of the last N actions, with the lineage, mean compute time and
        presence of their datasets: cost-aware algorithms charge a deleted dataset with the
        recomputation of its ancestors that are no longer stored either."""
        rows = await acts.recent(
            self.ctx.store, self.settings.history_window, {"workflow_id": 1, "hash": 1, "created_at": 1}
        )
        hashes = list({r["hash"] for r in rows})
        fields = {"state": 1, "lineage.parents": 1, "compute_seconds_total": 1, "compute_count": 1}
        docs = await ds.get_many(self.ctx.store, hashes, fields)
        return Workload.from_actions(rows).with_datasets(docs.values())

    async def run_once(self) -> bool:
        lease = max(self.settings.decision_lease, 3 * self.settings.decision_interval)
        if not await locks.take(self.ctx.store, "decision", self.owner, lease):
            return False
        capacity = self.settings.capacity_bytes
        # A reservation whose action manager died before its claim is dropped after stale_after.
        await reserving.sweep(self.ctx.store, time.time() - self.settings.stale_after)
        used = await self.usage()
        # Set by the lease holder only: a standby's gauges keep its last reading.
        USED_BYTES.set(used)
        CAPACITY_BYTES.set(capacity)
        THRESHOLD_BYTES.set(self.settings.threshold * capacity)
        if time.time() - self.counted_at >= self.settings.decision_interval:
            # A gauge is read at scrape intervals: counted on the timer's pace, not on
            # every stored dataset that wakes this run (a query per live state, issue 10).
            self.counted_at = time.time()
            for state, n in (await acts.live_counts(self.ctx.store, ACTIONS_CAP)).items():
                ACTIONS.labels(state).set(n)
        to_free = bytes_to_free(used, capacity, self.settings.threshold, self.settings.target)
        if not to_free:
            DECISION_RUNS.labels("under_threshold").inc()
            return False
        DECISION_RUNS.labels("over_threshold").inc()
        candidates = [
            Candidate(
                d["_id"],
                int(d.get("size") or 0),
                ds.mean_seconds(d) or 0.0,
                float(d.get("last_used_at") or 0.0),
            )
            for d in await ds.deletable(self.ctx.store)
        ]
        chosen = self.algorithm.select(await self.workload(), candidates, to_free)
        log.info(
            "usage %d B > %.0f%% of %d B: %s marks %d datasets to free %d B",
            used,
            100 * self.settings.threshold,
            capacity,
            self.algorithm.name,
            len(chosen),
            to_free,
        )
        for rank, h in enumerate(chosen, 1):
            # Why it was chosen, kept with it: its DATASET_MARKED event (which wakes the
            # dataset managers) says so to integrators.
            mark = {"reason": "over_threshold", "rank": rank, "usage_bytes": used, "capacity_bytes": capacity,
                    "to_free_bytes": to_free}  # fmt: skip
            await self.mover.dataset(
                h,
                D.STORED_TO_DELETE,
                by=self.name,
                sources=[D.STORED],
                where={"claims": {"$size": 0}, **ds.NOT_PINNED},  # pinned by a user since it was read
                set={"marked_by": self.algorithm.name, "mark": mark},
                note=self.algorithm.name,
            )
        return False
