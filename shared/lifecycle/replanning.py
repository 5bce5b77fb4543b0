"""Re-planning inside a running workflow (docs/planning.md, "Re-planning").

An action that must compute now although the plan did not expect it to (a follower
taking over a computation, an action whose input vanished before it started) needs
every input available or on its way. Its parents are looked at again, the way the
planner would: one still running or followed is waited for; one whose output is
there is claimed; one whose dataset is being computed elsewhere follows that; any
other is computed again, its own inputs first. Ended parents are reopened for it
(FINISHED/REUSED/SKIPPED -> WAITING/READY/FOLLOWING), each by one guarded move.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from shared.errors import PingoError
from shared.lifecycle import reserving
from shared.lifecycle.claims import meaning, whole
from shared.lifecycle.moves import Mover
from shared.states import ACTION_LIVE, ACTION_REOPENABLE, ActionState
from shared.storage import Storage
from shared.store import Store
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store import workflows as wfs
from shared.store.actions import ActionDoc

log = logging.getLogger(__name__)
A = ActionState
# Concurrent re-planners of one parent: each guarded move either wins or sees the winner.
ATTEMPTS = 5


class CannotReplan(PingoError):
    """A parent ended FAILED or KILLED: what depends on it cannot run."""


class Replans(Protocol):
    """Re-planning as its users see it: following's takeover, and the start of an attempt
    whose input vanished (``inputs``, then ``recheck`` once the action WAITs)."""

    async def inputs(self, action: ActionDoc) -> tuple[list[str], list[str]]: ...

    async def recheck(self, action_id: str, pending: list[str]) -> None: ...


@dataclass
class Replanner:
    store: Store
    storage: Storage
    mover: Mover
    by: str
    ready: Callable[[str], Awaitable[None]]  # WAITING -> READY once no parent is pending
    abandon: Callable[[str, str], Awaitable[None]]  # a WAITING action whose parent failed ends

    async def recheck(self, action_id: str, pending: list[str]) -> None:
        """After an action was moved to WAIT for ``pending``: a parent that ended in
        between readied (or ended) nobody (the child was not WAITING yet), so do it now."""
        for parent in await acts.get_many(self.store, pending, {"state": 1}):
            if parent["state"] in (A.FINISHED, A.REUSED):
                await acts.parent_finished(self.store, action_id, parent["_id"])
            elif parent["state"] in (A.FAILED, A.KILLED):
                await self.abandon(action_id, parent["_id"])
                return
        await self.ready(action_id)

    async def inputs(self, action: ActionDoc) -> tuple[list[str], list[str]]:
        """Make every input of ``action`` available or on its way; returns its parents
        still to wait for and the datasets it reads (its claims)."""
        pending: list[str] = []
        claims: list[str] = []
        for parent in await acts.get_many(self.store, action.get("parents", [])):
            if parent.get("managed"):
                claims.append(parent["hash"])
            if await self.wait_for(parent, action["_id"]):
                pending.append(parent["_id"])
        return pending, claims

    async def wait_for(self, parent: ActionDoc, child_id: str) -> bool:
        """True if ``child_id`` must wait for ``parent`` (live, or sent back to work)."""
        for _ in range(ATTEMPTS):
            if parent["state"] in ACTION_LIVE:
                if await acts.add_child(self.store, parent["_id"], child_id):
                    if parent.get("managed"):
                        await ds.add_claims(self.store, parent["hash"], [child_id])
                    return True
            elif parent["state"] not in ACTION_REOPENABLE:
                raise CannotReplan(f"{parent['_id']} ended {parent['state']}")
            elif await self.available(parent, child_id):
                if parent["state"] == A.SKIPPED:  # it was not needed; now its output is read
                    await self.mover.action(
                        parent["_id"], A.REUSED, sources=[A.SKIPPED], note=f"replanned: read by {child_id}"
                    )
                return False
            elif await self.follow(parent, child_id) or await self.recompute(parent, child_id):
                return True
            fresh = await acts.get(self.store, parent["_id"])
            if fresh is None:
                raise CannotReplan(f"{parent['_id']} is gone")
            parent = fresh
        raise RuntimeError(f"{parent['_id']} kept changing while it was re-planned for {child_id}")

    async def available(self, parent: ActionDoc, child_id: str) -> bool:
        """The ended parent's output is there: claimed for the child."""
        if not parent.get("managed"):
            return await self.storage.exists(parent["output_path"])
        doc = await ds.get(self.store, parent["hash"])
        if doc is None or not meaning(doc).stored or not await self.present(doc):
            return False
        lineage = doc.get("lineage") or {}
        return await ds.try_reuse(self.store, parent["hash"], lineage, [child_id], bool(parent.get("leaf")), self.by)

    async def present(self, doc: dict) -> bool:
        """Its files are there with the size recorded at commit; a dataset found missing
        or changed is marked LOST, as the planner does. Re-planning is recovery from a
        lost input already, so it always checks the size, whatever PINGO_VERIFY_REUSE says."""
        verdict, _ = await whole(self.storage, doc, "size", self.mover)
        if not verdict.ok:
            log.warning("dataset %s: %s; marked lost", doc["_id"], verdict.describe(doc))
        return verdict.ok

    async def follow(self, parent: ActionDoc, child_id: str) -> bool:
        """The parent's dataset is being computed elsewhere: the parent follows it."""
        if not parent.get("managed"):
            return False
        doc = await ds.claim_in_flight(self.store, parent["hash"], [child_id], bool(parent.get("leaf")), self.by)
        for producer in (doc or {}).get("producers", []):
            if producer == parent["_id"] or not await acts.add_follower(self.store, producer, parent["_id"]):
                continue
            moved = await self.mover.action(
                parent["_id"], A.FOLLOWING, sources=[parent["state"]],
                set={"follows": producer, "decision": "reuse", "reason": "in_flight",
                     "kill_requested": await self.being_killed(parent)},
                add_to_set={"children": [child_id]}, note=f"replanned for {child_id}: follows {producer}",
            )  # fmt: skip
            return moved is not None
        return False

    async def recompute(self, parent: ActionDoc, child_id: str) -> bool:
        """Compute the parent again, its own inputs first."""
        pending, claims = await self.inputs(parent)
        budget: dict[str, Any] = {}
        if parent.get("managed"):
            doc = await ds.get(self.store, parent["hash"])
            if (doc or {}).get("size") is not None:  # what its start reserves now (reserving.expectation)
                budget["reserve_bytes"] = reserving.expectation(parent.get("expected_bytes"), doc["size"], None)
            await ds.prepare_compute(
                self.store, parent["hash"], (doc or {}).get("lineage") or {}, parent["output_path"], parent["_id"],
                bool(parent.get("leaf")), self.by, [child_id],
            )  # fmt: skip
        moved = await self.mover.action(
            parent["_id"], A.WAITING if pending else A.READY, sources=[parent["state"]],
            set={"pending_parents": pending, "claims": claims, "decision": "compute", "reason": "replanned",
                 "secret": secrets.token_urlsafe(18), "error": None, "successor": None, "job_handed_to": None,
                 "kill_requested": await self.being_killed(parent), **budget},
            add_to_set={"children": [child_id]}, note=f"replanned for {child_id}",
        )  # fmt: skip
        if moved is None:
            return False
        if pending:
            await self.recheck(parent["_id"], pending)
        log.info("%s: computed again for %s (its output is not available)", parent["_id"], child_id)
        return True

    async def being_killed(self, action: ActionDoc) -> bool:
        """A reopened action of a workflow being killed is flagged like the rest: never
        started, and ended by its producer's end if it follows one (the bulk kill may have
        passed it by)."""
        wf = await wfs.get(self.store, action["workflow_id"], {"kill_requested": 1})
        return bool((wf or {}).get("kill_requested"))
