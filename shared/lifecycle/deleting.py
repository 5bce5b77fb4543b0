"""Deleting a dataset: a marked dataset's way to DELETED (thesis section 3.6;
docs/architecture.md, "dataset_manager").

The decision service only marks (STORED -> STORED_TO_DELETE). A dataset manager claims a
marked dataset no workflow claims (-> PROCESSING, with a lease), moves it to DELETING
(again requiring no claim), removes its files and moves it to DELETED. A dataset with a
claim is never moved past STORED_TO_DELETE: both guarded writes require ``claims`` to be
empty, so a workflow that claims the dataset in between wins and the deletion is
dropped. A lease older than ``stale_after`` (its manager died) is taken again by any
manager; a stale DELETING is taken over as DELETING, since deleting again is harmless.

A dataset a user withdrew (INVALIDATED: invalidated, deleted by hand or expired,
``shared.lifecycle.curating``) goes straight to DELETING once nothing claims or computes
it, never through STORED_TO_DELETE or PROCESSING, which a planner may revive; a deletion
of it that fails hands it back to INVALIDATED.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from shared.lifecycle.moves import Mover
from shared.states import DatasetState
from shared.storage import Storage
from shared.store import Store
from shared.store import datasets as ds

log = logging.getLogger(__name__)
D = DatasetState
UNCLAIMED = {"claims": {"$size": 0}}


@dataclass
class Deleter:
    store: Store
    storage: Storage
    mover: Mover
    owner: str  # the lease owner: this manager
    stale_after: float  # PINGO_STALE_AFTER: a lease older than this is taken over
    stale_every: float  # how often stale leases are looked for (PINGO_SCRAPE_INTERVAL)
    # When stale PROCESSING and DELETING leases were last looked for (see claim).
    stale_looked_at: float = 0.0

    async def claim(self, limit: int) -> tuple[list[dict[str, Any]], int]:
        """Up to ``limit`` datasets taken to delete (marked and unclaimed, or with a stale
        lease), and how many were taken."""
        stale = time.time() - self.stale_after
        fields = {"state": 1, "lease_at": 1}
        found = await ds.marked_unclaimed(self.store, limit, fields)
        if len(found) < limit:
            found += await ds.withdrawn_unclaimed(self.store, limit - len(found), fields)
        # One equality on state per query: index-served on every store we run on ($in is not on nx-27017).
        # A lease turns stale only after stale_after: looked for once per scrape interval, not
        # on every finished action that wakes the scraper (docs/architecture.md, "Query forms").
        now = time.time()
        look = now - self.stale_looked_at >= self.stale_every
        if look:
            self.stale_looked_at = now
        for state in (D.PROCESSING, D.DELETING):
            if look and len(found) < limit:
                found += await ds.stale_leases(self.store, state, stale, limit - len(found), fields)
        taken = []
        lease = {"lease_owner": self.owner, "lease_at": time.time()}
        for d in found:
            state = d["state"]
            # A stale DELETING is taken over as DELETING: deleting again is harmless; a
            # withdrawn one is deleted at once (nothing may revive it).
            target = D.DELETING if state in (D.DELETING, D.INVALIDATED) else D.PROCESSING
            if state == D.STORED_TO_DELETE:
                where = UNCLAIMED
            elif state == D.INVALIDATED:
                where = {**UNCLAIMED, "producers": {"$size": 0}}
            else:
                where = {"lease_at": d["lease_at"]}
            res = await self.mover.dataset(
                d["_id"], target, by=self.owner, sources=[state], where=where, set=lease,
                note=None if state in (D.STORED_TO_DELETE, D.INVALIDATED) else "stale lease taken over",
            )  # fmt: skip
            if res is not None:
                taken.append(res)
        return taken, len(taken)

    async def delete(self, d: dict[str, Any]) -> None:
        """A dataset this manager took: DELETING (unless claimed meanwhile), its files
        removed, DELETED; back to STORED_TO_DELETE if the files could not be removed."""
        mine = {"lease_owner": self.owner, "lease_at": d["lease_at"]}
        if d["state"] == D.PROCESSING:
            moved = await self.mover.dataset(
                d["_id"], D.DELETING, by=self.owner, sources=[D.PROCESSING], where={**mine, **UNCLAIMED}
            )
            if moved is None:
                return  # claimed or revived meanwhile: it stays
            d = moved
        try:
            await self.storage.delete(d["path"])
        except Exception as exc:
            back = D.INVALIDATED if d.get("withdrawn") else D.STORED_TO_DELETE
            log.warning("could not delete %s: %s; back to %s", d["path"], exc, back)
            await self.mover.dataset(
                d["_id"], back, by=self.owner, sources=[D.DELETING], where={"lease_owner": self.owner},
                note=str(exc),
            )  # fmt: skip
            return
        # Its effects: the DATASET_DELETED event and the bytes-deleted statistic.
        await self.mover.dataset(
            d["_id"], D.DELETED, by=self.owner, sources=[D.DELETING], where={"lease_owner": self.owner},
            set={"deleted_at": time.time()}, unset=["lease_owner", "lease_at"],
        )  # fmt: skip
