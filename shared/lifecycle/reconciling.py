"""Reconciling the catalogue with its storage, both ways (docs/architecture.md,
"dataset_manager"; docs/planning.md, "Lost datasets").

The orphan sweep removes files under the managed root that no dataset or running
attempt owns; its mirror, the reconcile sweep, moves datasets whose files are gone or
changed to LOST, removing nothing, and holds back when so many are at once that the
storage looks unmounted or wrong (docs/planning.md, "The safety stop").
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from shared.lifecycle.lost import mark_lost
from shared.lifecycle.moves import Mover
from shared.metrics import RECONCILE_HELD, RECONCILE_HOLDS
from shared.states import ACTION_IN_FLIGHT, DatasetState
from shared.storage import Storage
from shared.storage.base import ATTEMPTS_DIR
from shared.storage.outage import SweepFindings, outage
from shared.storage.verification import Level, Verdict, verify
from shared.store import Store
from shared.store import actions as acts
from shared.store import datasets as ds

log = logging.getLogger(__name__)
D = DatasetState
# Datasets the reconcile sweep reads and checks per batch, and what it reads of each.
RECONCILE_CHUNK = 200
RECONCILE_FIELDS = {
    "state": 1, "path": 1, "size": 1, "files": 1, "checksum": 1, "producers": 1, "updated_at": 1, "storage": 1,
}  # fmt: skip
Failed = list[tuple[dict[str, Any], Verdict]]


async def sweep_orphans(store: Store, storage: Storage, stale_after: float) -> int:
    """Remove files under the managed root that no dataset or running attempt owns, if
    they are older than the oldest action in flight (so none is being written); how many."""
    fields = {"submitted_at": 1, "updated_at": 1, "attempt_path": 1}
    in_flight = [a for s in sorted(ACTION_IN_FLIGHT) for a in await acts.in_state(store, s, fields=fields)]
    horizon = min(
        [float(a.get("submitted_at") or a["updated_at"]) for a in in_flight], default=time.time() - stale_after
    )
    live_attempts = {Path(a["attempt_path"]).name for a in in_flight if a.get("attempt_path")}
    old = [e for e in await storage.list_root() if e.mtime < horizon]
    live = await ds.live_among(store, [e.name for e in old if not e.name.startswith(f"{ATTEMPTS_DIR}/")])
    removed = 0
    for entry in old:
        if entry.name.startswith(f"{ATTEMPTS_DIR}/"):
            if entry.name.split("/", 1)[1] in live_attempts:
                continue
        elif entry.name in live:
            continue
        await storage.delete(f"{storage.root}/{entry.name}")
        removed += 1
    if removed:
        log.info("orphan sweep removed %d entries", removed)
    return removed


async def reconcile(store: Store, storage: Storage, mover: Mover, level: Level, retry_in: float) -> None:
    """The mirror of the orphan sweep: STORED and LEAF datasets of this storage whose
    files are gone or changed, checked at ``level``, move to LOST, unless so many are at
    once that the storage looks unmounted or wrong: then none does (the safety stop,
    ``shared.storage.outage``; tried again in ``retry_in`` seconds). Their files are left
    alone: a reader may be on them, and the planner removes a leftover before the
    dataset is computed again."""
    started = time.monotonic()
    checked, failed = await check_stored(store, storage, level)
    if failed and (why := outage(await findings(storage, checked, failed))):
        RECONCILE_HELD.set(1)
        RECONCILE_HOLDS.inc()
        log.error(
            "reconcile sweep held back: %s on %s, which looks like an outage (storage unmounted, wrong root or "
            "NameNode) rather than lost data; nothing was marked LOST, trying again in %.0f s "
            "(docs/planning.md, \"The safety stop\")", why, storage.identity, retry_in,
        )  # fmt: skip
        return
    RECONCILE_HELD.set(0)
    lost = 0
    for d, verdict in failed:
        # Guarded by its last move (and no producer): a change since it was read wins.
        if await mark_lost(mover, d, verdict, {"updated_at": d.get("updated_at")}) is not None:
            lost += 1
            log.warning("reconcile sweep: dataset %s %s; marked lost", d["_id"], verdict.describe(d))
    log.info("reconcile sweep (%s): %d datasets checked, %d lost, %.1f s", level, checked, lost,
             time.monotonic() - started)  # fmt: skip


async def check_stored(store: Store, storage: Storage, level: Level) -> tuple[int, Failed]:
    """Check the files of this storage's STORED and LEAF datasets: how many were checked,
    and those that failed with their verdict."""
    checked = other = 0
    failed: Failed = []
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
    return checked, failed


async def findings(storage: Storage, checked: int, failed: Failed) -> SweepFindings:
    under_root = sum(1 for d, _ in failed if storage.inside(d["path"], [storage.root]))
    return SweepFindings(checked, len(failed), under_root, not await storage.exists(storage.root))
