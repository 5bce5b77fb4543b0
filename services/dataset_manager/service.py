"""The dataset manager (thesis section 3.6): scraper -> bounded queue -> deletors, and the
orphan sweep.

A dataset with a claim is never moved past STORED_TO_DELETE: the scraper's guarded
write and the deletor's both require ``claims`` to be empty, so a workflow that claims
a dataset in between wins and the deletion is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from shared.events import Event, EventType
from shared.runtime import Context
from shared.states import ACTION_IN_FLIGHT, DatasetState
from shared.storage.base import ATTEMPTS_DIR
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.ticker import Ticker, cancel_all, forever

log = logging.getLogger(__name__)
D = DatasetState
UNCLAIMED = {"claims": {"$size": 0}}


class DatasetManager:
    name = "dataset_manager"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(self.settings.queue_size)
        self.mover = ctx.mover(self.name)
        self.ticker = Ticker(self.settings.scrape_interval)
        self.sweep_ticker = Ticker(self.settings.orphan_sweep_interval)
        self.tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        self.tasks.append(asyncio.create_task(forever("dataset scraper", self.scrape, self.ticker)))
        self.tasks.append(asyncio.create_task(forever("orphan sweep", self.sweep, self.sweep_ticker)))
        for _ in range(self.settings.deletors):
            self.tasks.append(asyncio.create_task(self.deletor()))
        # Subscribed last: the loops run on their timers even while the broker is away
        # (events only wake them sooner).
        await self.ctx.bus.subscribe(
            f"{self.settings.exchange}.{self.name}",
            [EventType.DATASET_MARKED.value, EventType.ACTION_FINISHED.value],
            self.on_event,
        )

    async def stop(self) -> None:
        await cancel_all(self.tasks)

    async def on_event(self, event: Event) -> None:
        # A finished action may have released the last claim on a marked dataset.
        self.ticker.poke()

    async def scrape(self) -> bool:
        room = self.queue.maxsize - self.queue.qsize()
        if room <= 0:
            return False
        stale = time.time() - self.settings.stale_after
        datasets = self.ctx.store.datasets
        found = [d async for d in datasets.find({"state": D.STORED_TO_DELETE, **UNCLAIMED}).limit(room)]
        if len(found) < room:
            found += [
                d
                async for d in datasets.find(
                    {"state": {"$in": [D.PROCESSING, D.DELETING]}, "lease_at": {"$lt": stale}}
                ).limit(room - len(found))
            ]
        claimed = 0
        lease = {"lease_owner": self.owner, "lease_at": time.time()}
        for d in found:
            state = d["state"]
            # A stale DELETING is taken over as DELETING: deleting again is harmless.
            target = D.DELETING if state == D.DELETING else D.PROCESSING
            where = UNCLAIMED if state == D.STORED_TO_DELETE else {"lease_at": d["lease_at"]}
            res = await self.mover.dataset(
                d["_id"],
                target,
                by=self.owner,
                sources=[state],
                where=where,
                set=lease,
                note=None if state == D.STORED_TO_DELETE else "stale lease taken over",
            )
            if res is not None:
                claimed += 1
                await self.queue.put(res)
        return claimed >= room

    async def deletor(self) -> None:
        while True:
            d = await self.queue.get()
            try:
                await self.delete(d)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("deleting dataset %s failed", d["_id"])
            finally:
                self.queue.task_done()

    async def delete(self, d: dict[str, Any]) -> None:
        mine = {"lease_owner": self.owner, "lease_at": d["lease_at"]}
        if d["state"] == D.PROCESSING:
            d = await self.mover.dataset(
                d["_id"],
                D.DELETING,
                by=self.owner,
                sources=[D.PROCESSING],
                where={**mine, **UNCLAIMED},
            )
            if d is None:
                return  # claimed or revived meanwhile: it stays
        try:
            await self.ctx.storage.delete(d["path"])
        except Exception as exc:
            log.warning("could not delete %s: %s; back to STORED_TO_DELETE", d["path"], exc)
            await self.mover.dataset(
                d["_id"],
                D.STORED_TO_DELETE,
                by=self.owner,
                sources=[D.DELETING],
                where={"lease_owner": self.owner},
                note=str(exc),
            )
            return
        # Its effects: the DATASET_DELETED event and the bytes-deleted statistic.
        await self.mover.dataset(
            d["_id"],
            D.DELETED,
            by=self.owner,
            sources=[D.DELETING],
            where={"lease_owner": self.owner},
            set={"deleted_at": time.time()},
            unset=["lease_owner", "lease_at"],
        )

    async def sweep(self) -> bool:
        """Remove files under the managed root that no dataset or running attempt owns,
        if they are older than the oldest action in flight (so none is being written)."""
        store = self.ctx.store
        fields = {"submitted_at": 1, "updated_at": 1, "attempt_path": 1}
        in_flight = [a for s in sorted(ACTION_IN_FLIGHT) for a in await acts.in_state(store, s, fields=fields)]
        horizon = min(
            [float(a.get("submitted_at") or a["updated_at"]) for a in in_flight],
            default=time.time() - self.settings.stale_after,
        )
        live_attempts = {Path(a["attempt_path"]).name for a in in_flight if a.get("attempt_path")}
        live = await ds.live_hashes(store)
        removed = 0
        for entry in await self.ctx.storage.list_root():
            if entry.mtime >= horizon:
                continue
            if entry.name.startswith(f"{ATTEMPTS_DIR}/"):
                if entry.name.split("/", 1)[1] in live_attempts:
                    continue
            elif entry.name in live:
                continue
            await self.ctx.storage.delete(f"{self.ctx.storage.root}/{entry.name}")
            removed += 1
        if removed:
            log.info("orphan sweep removed %d entries", removed)
        return False
