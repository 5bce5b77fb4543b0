"""Datasets by hand: what a user (the owner of the workflow that committed a dataset, or an
admin) may do to one, and the dataset manager's sweep that applies their expiry dates and
the retention policy of final outputs (docs/api.md, "Datasets by hand";
docs/state-machines.md, "Datasets by hand").

Deleting and invalidating are one move, to INVALIDATED (``DATASET_BY_HAND``): the dataset
is never reused from then on, the next action that needs it computes it again (its commit
replaces the old files), and a dataset manager deletes its files once nothing claims it
(``shared.lifecycle.deleting``). A delete is refused while a workflow still needs the
dataset; an invalidation is not (what is planned reads the old files, then they go).
Pinning and the expiry date are fields, recorded in the history without a move.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from shared.errors import PingoError
from shared.lifecycle.moves import Mover
from shared.states import DATASET_IN_FLIGHT, DATASET_OUT_OF_REUSE, DATASET_WITHDRAWABLE, DatasetState
from shared.store import Store
from shared.store import actions as acts
from shared.store import datasets as ds

D = DatasetState
IDLE = ds.IDLE
NOT_COMPUTED = {"producers": {"$size": 0}}
# How far an invalidation with descendants looks (actions per dataset searched for readers).
DESCENDANT_ACTIONS = 100
SWEEP_BATCH = 500


class StillNeeded(PingoError):
    """A workflow still needs the dataset (it claims or computes it): answered 409."""


def actor(user: str | None) -> str:
    """How a user's move is recorded in a history (as a kill is: ``user <name>``)."""
    return f"user {user}" if user else "user"


def when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class Withdrawn:
    """What an invalidation did: the hashes moved to INVALIDATED, and those left as they
    were, with why (already out of reuse, or being computed)."""

    invalidated: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    dataset: dict[str, Any] | None = None  # the one asked for, as the move (or a read) left it


@dataclass
class Curator:
    store: Store
    mover: Mover

    async def _withdraw(
        self, d: dict[str, Any], by: str, note: str, where: dict[str, Any], reason: str
    ) -> dict[str, Any] | None:
        # What a user kept it for ends with it: a later computation is a new dataset life.
        return await self.mover.dataset(
            d["_id"], D.INVALIDATED, by=by, sources=[d["state"]], where=where, note=note,
            set={"withdrawn": {"by": by, "at": time.time(), "reason": reason}}, unset=["pinned", "expires_at"],
        )  # fmt: skip

    async def delete(self, h: str, user: str | None) -> dict[str, Any]:
        """Withdraw ``h`` for deletion (LEAF included); refused while a workflow needs it."""
        for _ in range(3):
            d = await ds.get(self.store, h)
            if d is None or d["state"] in DATASET_OUT_OF_REUSE or d["state"] == D.PROCESSING:
                return d or {}
            if d["state"] not in DATASET_WITHDRAWABLE or d.get("claims") or d.get("producers"):
                raise StillNeeded(needs(d))
            moved = await self._withdraw(d, actor(user), "deleted by hand", IDLE, "deleted")
            if moved is not None:
                return moved
        raise StillNeeded(f"dataset {h} kept changing; try again")

    async def invalidate(self, h: str, user: str | None, descendants: bool = False) -> Withdrawn:
        """Withdraw ``h`` from reuse (and, with ``descendants``, every dataset computed from
        it, as far as recorded actions tell): the next use computes it again."""
        out = Withdrawn()
        hashes = [h, *(await self.descendants(h) if descendants else [])]
        for i, one in enumerate(hashes):
            note = "invalidated" if i == 0 else f"invalidated with its ancestor {h}"
            why, doc = await self._invalidate_one(one, actor(user), note)
            if i == 0:
                out.dataset = doc
            if why is None:
                out.invalidated.append(one)
            elif i == 0 and why.startswith("being computed"):
                raise StillNeeded(f"dataset {h} is {why}: invalidate it once it is stored")
            else:
                out.skipped[one] = why
        return out

    async def _invalidate_one(self, h: str, by: str, note: str) -> tuple[str | None, dict[str, Any] | None]:
        """(None, the moved document) when it moved; else why not, and the document as read."""
        d = None
        for _ in range(3):
            d = await ds.get(self.store, h)
            if d is None:
                return "no such dataset", None
            if d["state"] in DATASET_OUT_OF_REUSE or d["state"] == D.PROCESSING:
                return f"already {d['state']}", d
            if d["state"] not in DATASET_WITHDRAWABLE or d.get("producers"):
                return f"being computed ({d['state']})", d
            if (moved := await self._withdraw(d, by, note, NOT_COMPUTED, "invalidated")) is not None:
                return None, moved
        return "kept changing", d

    async def descendants(self, h: str) -> list[str]:
        """The datasets computed from ``h``, breadth first: the outputs of the actions that
        read an action whose output is ``h``, in the workflows that recorded them."""
        seen, queue, out = {h}, [h], []
        fields = {"_id": 1, "workflow_id": 1, "hash": 1, "managed": 1}
        while queue:
            parent = queue.pop(0)
            for a in await acts.with_hash(self.store, parent, fields, DESCENDANT_ACTIONS):
                for child in await acts.children_of(self.store, a.workflow_id, a.id, fields):
                    if child.managed and child.hash is not None and child.hash not in seen:
                        seen.add(child.hash)
                        out.append(child.hash)
                        queue.append(child.hash)
        return out

    async def pin(self, h: str, user: str | None, pinned: bool) -> dict[str, Any] | None:
        """Pin (never chosen for eviction) or unpin ``h``; None if it does not exist."""
        note = "pinned" if pinned else "unpinned"
        return await self._annotate(h, user, note, {"pinned": True} if pinned else None, [] if pinned else ["pinned"])

    async def expire(self, h: str, user: str | None, at: float | None) -> dict[str, Any] | None:
        """Set (or, with None, remove) the date after which ``h`` is deleted once nothing needs it."""
        if at is None:
            return await self._annotate(h, user, "expiry removed", None, ["expires_at"])
        return await self._annotate(h, user, f"expires at {when(at)}", {"expires_at": at}, [])

    async def _annotate(
        self, h: str, user: str | None, note: str, set: dict[str, Any] | None, unset: list[str]
    ) -> dict[str, Any] | None:
        for _ in range(5):
            d = await ds.get(self.store, h)
            if d is None:
                return None
            res = await ds.annotate(self.store, h, d["state"], actor(user), note, set, unset)
            if res is not None:
                return res
        raise StillNeeded(f"dataset {h} kept changing; try again")

    async def sweep(self, by: str, retention_seconds: float, now: float | None = None) -> int:
        """The dataset manager's timer: expired datasets nothing needs are withdrawn (their
        files then go), and, with the retention policy on, leaves unused for
        ``retention_seconds`` become ordinary STORED datasets the decision service may
        evict. The number of datasets moved comes back.

        Each is read in batches of ``SWEEP_BATCH`` paged by hash, until a batch comes back
        short: a batch whose datasets all stay (pinned, or claimed since it was read) never
        hides those after it."""
        now = time.time() if now is None else now
        moved = 0
        for state in sorted(DATASET_WITHDRAWABLE):
            async for d in _pages(lambda after, s=state: ds.expired(self.store, s, now, SWEEP_BATCH, after)):
                note = f"expired at {when(float(d['expires_at']))}"
                moved += await self._withdraw(d, by, note, IDLE, "expired") is not None
        if retention_seconds > 0:
            before = now - retention_seconds
            async for d in _pages(lambda after: ds.unused_leaves(self.store, before, SWEEP_BATCH, after)):
                if d.get("pinned"):  # read here, not queried: nx-27017 serves one equality
                    continue
                res = await self.mover.dataset(
                    d["_id"], D.STORED, by=by, sources=[D.LEAF], where={**IDLE, **ds.NOT_PINNED},
                    note=f"retention: unused for {retention_seconds / 86400:g} days",
                )  # fmt: skip
                moved += res is not None
        return moved


async def _pages(fetch: Callable[[str], Awaitable[list[dict[str, Any]]]]) -> AsyncIterator[dict[str, Any]]:
    """Every document of a query read in batches, each after the last hash of the one before."""
    after = ""
    while True:
        batch = await fetch(after)
        for d in batch:
            yield d
        if len(batch) < SWEEP_BATCH:
            return
        after = batch[-1]["_id"]


def needs(d: dict[str, Any]) -> str:
    """Why a dataset cannot be deleted now, for a person."""
    if d.get("producers") or d["state"] in DATASET_IN_FLIGHT:
        return f"dataset {d['_id']} is being computed ({d['state']}); delete it once it is stored"
    n = len(d.get("claims") or [])
    return f"dataset {d['_id']} is still needed by {n} action(s) of running workflows; delete it once they end"
