"""The dataset manager (thesis section 3.6): scraper -> bounded queue -> deletors, the
orphan sweep (files no dataset owns) and its mirror, the reconcile sweep (datasets whose
files are gone or changed; it holds back when so many are at once that the storage
looks unmounted or wrong, docs/planning.md, "The safety stop").

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
from shared.lifecycle.lost import mark_lost
from shared.metrics import RECONCILE_HELD, RECONCILE_HOLDS
from shared.runtime import Context
from shared.states import ACTION_IN_FLIGHT, DatasetState
from shared.storage.base import ATTEMPTS_DIR
from shared.storage.outage import SweepFindings, outage
from shared.storage.verification import Level, Verdict, verify
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.ticker import SUMMARY_COALESCE, Ticker, cancel_all, forever

log = logging.getLogger(__name__)
D = DatasetState
UNCLAIMED = {"claims": {"$size": 0}}
# Datasets the reconcile sweep reads and checks per batch, and what it reads of each.
RECONCILE_CHUNK = 200
RECONCILE_FIELDS = {
    "state": 1, "path": 1, "size": 1, "files": 1, "checksum": 1, "producers": 1, "updated_at": 1, "storage": 1,
}  # fmt: skip


class DatasetManager:
    name = "dataset_manager"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self.owner = f"{self.name}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(self.settings.queue_size)
        self.mover = ctx.mover(self.name)
        # A scrape asks for every unclaimed marked dataset, however many finished actions woke it.
        self.ticker = Ticker(self.settings.scrape_interval, coalesce=SUMMARY_COALESCE)
        self.sweep_ticker = Ticker(self.settings.orphan_sweep_interval)
        self.reconcile_ticker = Ticker(self.settings.reconcile_interval)
        self.tasks: list[asyncio.Task] = []
        # When stale PROCESSING and DELETING leases were last looked for (see scrape).
        self.stale_looked_at = 0.0

    async def start(self) -> None:
        self.tasks.append(asyncio.create_task(forever("dataset scraper", self.scrape, self.ticker)))
        self.tasks.append(asyncio.create_task(forever("orphan sweep", self.sweep, self.sweep_ticker)))
        self.tasks.append(asyncio.create_task(forever("reconcile sweep", self.reconcile, self.reconcile_ticker)))
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
        store, fields = self.ctx.store, {"state": 1, "lease_at": 1}
        found = await ds.marked_unclaimed(store, room, fields)
        # One equality on state per query: index-served on every store we run on ($in is not on nx-27017).
        # A lease turns stale only after stale_after: looked for once per scrape interval, not
        # on every finished action that wakes the scraper (docs/architecture.md, "Query forms").
        now = time.time()
        look = now - self.stale_looked_at >= self.settings.scrape_interval
        if look:
            self.stale_looked_at = now
        for state in (D.PROCESSING, D.DELETING):
            if look and len(found) < room:
                found += await ds.stale_leases(store, state, stale, room - len(found), fields)
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
        old = [e for e in await self.ctx.storage.list_root() if e.mtime < horizon]
        live = await ds.live_among(store, [e.name for e in old if not e.name.startswith(f"{ATTEMPTS_DIR}/")])
        removed = 0
        for entry in old:
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

    async def reconcile(self) -> bool:
        """The mirror of the orphan sweep: STORED and LEAF datasets of this storage whose
        files are gone or changed, checked at the level of PINGO_VERIFY_REUSE (existence at
        least), move to LOST, unless so many are at once that the storage looks unmounted
        or wrong: then none does (the safety stop, ``shared.storage.outage``). Their files
        are left alone: a reader may be on them, and the planner removes a leftover before
        the dataset is computed again."""
        level: Level = "exists" if self.settings.verify_reuse == "none" else self.settings.verify_reuse
        store, storage, started = self.ctx.store, self.ctx.storage, time.monotonic()
        checked = other = 0
        failed: list[tuple[dict[str, Any], Verdict]] = []
        for state in (D.STORED, D.LEAF):
            # Hashes first (equality on state: index-served), then the documents a chunk at a
            # time ($in on _id: index-served), fresh, so a dataset that moved meanwhile is skipped.
            hashes = await ds.hashes_in_state(store, state)
            for i in range(0, len(hashes), RECONCILE_CHUNK):
                docs = await ds.get_many(store, hashes[i : i + RECONCILE_CHUNK], RECONCILE_FIELDS)
                for d in docs.values():
                    if d["state"] != state or d.get("producers"):
                        continue  # moved, or being recomputed (forced): its commit records it again
                    # Only this storage's: one committed before datasets recorded it is the
                    # catalogue's, and so this storage's (the catalogue's is checked at start).
                    if d.get("storage") not in (None, storage.identity):
                        other += 1
                        continue
                    checked += 1
                    verdict = await verify(storage, d, level)
                    if not verdict.ok:
                        failed.append((d, verdict))
                if len(hashes) > RECONCILE_CHUNK:
                    done = min(i + RECONCILE_CHUNK, len(hashes))
                    log.info("reconcile sweep: %s %d/%d checked", state, done, len(hashes))
        if other:
            log.info("reconcile sweep: %d datasets of another storage left alone", other)
        if failed and (why := outage(await self.findings(checked, failed))):
            RECONCILE_HELD.set(1)
            RECONCILE_HOLDS.inc()
            log.error(
                "reconcile sweep held back: %s on %s, which looks like an outage (storage unmounted, wrong root or "
                "NameNode) rather than lost data; nothing was marked LOST, trying again in %.0f s "
                "(docs/planning.md, \"The safety stop\")", why, storage.identity, self.settings.reconcile_interval,
            )  # fmt: skip
            return False
        RECONCILE_HELD.set(0)
        lost = 0
        for d, verdict in failed:
            # Guarded by its last move (and no producer): a change since it was read wins.
            if await mark_lost(self.mover, d, verdict, {"updated_at": d.get("updated_at")}) is not None:
                lost += 1
                log.warning("reconcile sweep: dataset %s %s; marked lost", d["_id"], verdict.describe(d))
        log.info("reconcile sweep (%s): %d datasets checked, %d lost, %.1f s", level, checked, lost,
                 time.monotonic() - started)  # fmt: skip
        return False

    async def findings(self, checked: int, failed: list[tuple[dict[str, Any], Verdict]]) -> SweepFindings:
        storage = self.ctx.storage
        under_root = sum(1 for d, _ in failed if storage.inside(d["path"], [storage.root]))
        return SweepFindings(checked, len(failed), under_root, not await storage.exists(storage.root))
