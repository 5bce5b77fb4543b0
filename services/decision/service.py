"""The decision service (thesis section 3.7): the timer and the lease of eviction.

One replica decides at a time (a lease in the ``locks`` collection); the lease holder
keeps managed intermediate storage in budget (``shared.lifecycle.evicting.Evictor``) and
sets the gauges of live actions. A stored dataset wakes it sooner.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid

from shared.events import EventType
from shared.lifecycle.evicting import Evictor
from shared.metrics import ACTIONS, ACTIONS_CAP
from shared.runtime import Context
from shared.store import actions as acts
from shared.store import locks
from shared.ticker import SUMMARY_COALESCE, Ticker, cancel_all, forever


class DecisionService:
    name = "decision"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self.owner = f"{self.name}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.evictor = Evictor(ctx.store, ctx.mover(self.name), self.settings, self.name)
        # A run reads the usage total however many stored datasets woke it (a chain stores one every few ms).
        self.ticker = Ticker(self.settings.decision_interval, coalesce=SUMMARY_COALESCE)
        self.tasks: list[asyncio.Task] = []
        self.counted_at = 0.0  # when the live actions were last counted for the gauge

    async def start(self) -> None:
        self.tasks.append(asyncio.create_task(forever("decision", self.run_once, self.ticker)))
        # Subscribed last: the loops run on their timers even while the broker is away
        # (events only wake them sooner).
        # A wake only (the run reads the usage total), neither decoded nor acknowledged.
        await self.ctx.bus.wake(
            f"{self.settings.exchange}.{self.name}", [EventType.DATASET_STORED.value], self.ticker.poke
        )

    async def stop(self) -> None:
        await cancel_all(self.tasks)

    async def run_once(self) -> bool:
        lease = max(self.settings.decision_lease, 3 * self.settings.decision_interval)
        if not await locks.take(self.ctx.store, "decision", self.owner, lease):
            return False
        if time.time() - self.counted_at >= self.settings.decision_interval:
            # A gauge is read at scrape intervals: counted on the timer's pace, not on
            # every stored dataset that wakes this run (a query per live state, issue 10).
            self.counted_at = time.time()
            for state, n in (await acts.live_counts(self.ctx.store, ACTIONS_CAP)).items():
                ACTIONS.labels(state).set(n)
        await self.evictor.decide()
        return False
