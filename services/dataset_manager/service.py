"""The dataset manager (thesis section 3.6): its triggers. A scraper takes marked datasets
into a bounded queue that deletors empty (``shared.lifecycle.deleting``); the orphan
sweep and its mirror, the reconcile sweep, run on their timers
(``shared.lifecycle.reconciling``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from typing import Any

from shared.events import EventType
from shared.lifecycle.curating import Curator
from shared.lifecycle.deleting import Deleter
from shared.lifecycle.reconciling import reconcile, sweep_orphans
from shared.runtime import Context
from shared.storage.verification import Level
from shared.ticker import SUMMARY_COALESCE, Ticker, cancel_all, forever
from shared.work_queue import WorkQueue

log = logging.getLogger(__name__)


class DatasetManager:
    name = "dataset_manager"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self.owner = f"{self.name}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.mover = ctx.mover(self.name)
        self.deleter = Deleter(
            ctx.store, ctx.storage, self.mover, self.owner, self.settings.stale_after, self.settings.scrape_interval
        )
        self.work: WorkQueue[dict[str, Any]] = WorkQueue(
            "dataset scraper", size=self.settings.queue_size, workers=self.settings.deletors,
            # A scrape asks for every unclaimed marked dataset, however many finished actions woke it.
            ticker=Ticker(self.settings.scrape_interval, coalesce=SUMMARY_COALESCE),
            claim=self.deleter.claim, work=self.deleter.delete, failed="deleting dataset %s failed",
            key=lambda d: d["_id"],
        )  # fmt: skip
        self.sweep_ticker = Ticker(self.settings.orphan_sweep_interval)
        self.reconcile_ticker = Ticker(self.settings.reconcile_interval)
        self.curator = Curator(ctx.store, self.mover)
        self.expiry_ticker = Ticker(self.settings.expiry_interval)
        self.tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        self.tasks += self.work.start()
        self.tasks.append(asyncio.create_task(forever("orphan sweep", self.sweep, self.sweep_ticker)))
        self.tasks.append(asyncio.create_task(forever("reconcile sweep", self.reconcile, self.reconcile_ticker)))
        self.tasks.append(asyncio.create_task(forever("expiry sweep", self.expire, self.expiry_ticker)))
        # Subscribed last: the loops run on their timers even while the broker is away
        # (events only wake them sooner).
        # A finished action may have released the last claim on a marked dataset: a wake
        # only (the scrape reads what to delete), neither decoded nor acknowledged.
        await self.ctx.bus.wake(
            f"{self.settings.exchange}.{self.name}",
            [EventType.DATASET_MARKED.value, EventType.ACTION_FINISHED.value],
            self.work.poke,
        )

    async def stop(self) -> None:
        await cancel_all(self.tasks)

    async def sweep(self) -> bool:
        await sweep_orphans(self.ctx.store, self.ctx.storage, self.settings.stale_after)
        return False

    async def expire(self) -> bool:
        """Expiry dates and the retention of final outputs (``shared.lifecycle.curating``);
        what it withdraws the scraper deletes."""
        if await self.curator.sweep(self.name, self.settings.leaf_retention_days * 86_400):
            self.work.poke()
        return False

    async def reconcile(self) -> bool:
        """At the level of PINGO_VERIFY_REUSE, existence at least."""
        level: Level = "exists" if self.settings.verify_reuse == "none" else self.settings.verify_reuse
        await reconcile(self.ctx.store, self.ctx.storage, self.mover, level, self.settings.reconcile_interval)
        return False
