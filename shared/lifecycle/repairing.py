"""Repairing what a crash interrupted (docs/architecture.md, "The life of a workflow").

Every step of a workflow's life leaves, if its writer dies half-way, something one of
these sweeps finishes: a planning whose planner died (``PlanningSweep``, run by the
workflow manager), and children left WAITING, kills not fully applied, followers of an
ended producer and workflows whose actions all ended (``Repairs``, run by the callback
service). Each sweep is idempotent: replicas may run it at once.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

from shared.lifecycle.ending import Outcomes
from shared.lifecycle.moves import Mover
from shared.states import ActionState, WorkflowState
from shared.store import Store
from shared.store import actions as acts
from shared.store import workflows as wfs

log = logging.getLogger(__name__)
A, W = ActionState, WorkflowState


class Undoes(Protocol):
    """What the planning sweep needs of submitting (``shared.lifecycle.submitting.Submitter``)."""

    async def undo(self, wf_id: str, reason: str, where: dict[str, Any]) -> bool: ...


class Ends(Protocol):
    """What the repair needs of ending (``shared.lifecycle.ending.Outcomes``)."""

    async def ready(self, action_id: str) -> None: ...

    async def kill_workflow(self, workflow_id: str) -> None: ...


class SweepsFollowers(Protocol):
    """What the repair needs of following (``shared.lifecycle.following.Following``)."""

    async def sweep(self) -> None: ...


@dataclass
class PlanningSweep:
    """Undo workflows whose planner died mid-submission: their planning lease (renewed
    every ``stale_after``/4 while a planner lives) is older than ``stale_after``."""

    store: Store
    submitter: Undoes
    stale_after: float

    async def run(self) -> bool:
        cutoff = time.time() - self.stale_after
        fields = {"_id": 1, "planning_lease_at": 1, "created_at": 1}
        stale = [
            wf
            for wf in await wfs.in_state(self.store, W.PLANNING, fields)
            if float(wf.get("planning_lease_at") or wf.get("created_at") or 0) < cutoff
        ]
        for wf in stale:
            # Guarded by the lease value we judged: a planner that renewed since keeps its workflow.
            seen = {"planning_lease_at": wf.get("planning_lease_at")}
            if await self.submitter.undo(wf["_id"], "planning interrupted", where=seen):
                log.warning("workflow %s was left PLANNING by a dead planner; undone", wf["_id"])
        return False


@dataclass
class Repairs:
    """Finish what a crash interrupted in running workflows."""

    store: Store
    mover: Mover
    ends: Ends
    followers: SweepsFollowers
    settle_interval: float

    @classmethod
    def of(cls, outcomes: Outcomes, settle_interval: float) -> Repairs:
        """The repair of what ``outcomes`` (and its followers) end."""
        return cls(outcomes.store, outcomes.mover, outcomes, outcomes.following, settle_interval)

    async def run(self) -> bool:
        """Children left WAITING with no pending parent, kills not fully applied, followers
        of an ended producer, workflows whose actions all ended."""
        store = self.store
        for a in await acts.in_state(store, A.WAITING, {"pending_parents": {"$size": 0}}, {"_id": 1}):
            await self.ends.ready(a["_id"])
        # Kills whose applier (a gateway) died before it finished: applied again, idempotently.
        grace = time.time() - self.settle_interval
        for wf in await wfs.in_state(store, W.RUNNING, {"kill_requested_at": 1}, kill_applied=False):
            if float(wf.get("kill_requested_at") or 0) < grace:
                await self.ends.kill_workflow(wf["_id"])
        # Kills applied long ago whose workflow still runs: a defence for an ended action
        # re-planning reopened after the kill's bulk writes (it read the kill flag just
        # before the kill was requested). The kill is idempotent: applied again, it ends
        # what was reopened.
        long_ago = time.time() - 3 * self.settle_interval
        for wf in await wfs.in_state(store, W.RUNNING, {"kill_requested_at": 1}, kill_applied=True):
            if float(wf.get("kill_requested_at") or 0) < long_ago:
                await self.ends.kill_workflow(wf["_id"])
        # Followers whose producer ended without resolving them (a crash in between).
        await self.followers.sweep()
        # Cheap for a workflow whose count says actions are live; one quiet for a while is
        # read whole, which also corrects a count a crash left too high.
        quiet = time.time() - 3 * self.settle_interval
        for wf in await wfs.in_state(store, W.RUNNING, {"last_move_at": 1, "created_at": 1}):
            recount = float(wf.get("last_move_at") or wf.get("created_at") or 0) < quiet
            await self.mover.settle(wf["_id"], recount=recount)
        return False
