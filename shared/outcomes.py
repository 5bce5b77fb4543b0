"""What happens when the executor says an action ended (thesis section 3.5; docs/state-machines.md, "Action").

Every step is idempotent and the action's own terminal transition comes last, so a
duplicated, reordered or late notification, or a crash half-way, is repaired by simply
applying the same status again (the poller does). The executor's word is always
re-read before acting: a notification alone never moves anything.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from shared.bus import Bus
from shared.events import Event, EventType, Subject
from shared.executors.base import Executor, JobState, JobStatus
from shared.states import ACTION_TRANSITIONS, DATASET_TRANSITIONS, ActionState, DatasetState
from shared.storage import Storage
from shared.store import Store, history
from shared.store import datasets as ds
from shared.store.transitions import transition, transition_many
from shared.store.workflows import settle

log = logging.getLogger(__name__)
A = ActionState
# Kill requests sent to the executor at once when a whole workflow is killed.
KILL_CONCURRENCY = 16
RELEASE_CHUNK = 500


@dataclass
class Outcomes:
    store: Store
    storage: Storage
    bus: Bus
    executor: Executor
    by: str
    # How long one caller may take to finish an action before another may take over (a
    # crashed finisher's lease expires after this): PINGO_STALE_AFTER, like every lease.
    finish_lease: float = 60.0

    async def publish(self, type_: EventType, action: dict[str, Any], **payload: Any) -> None:
        await self.bus.publish(
            Event(
                type=type_,
                producer=self.by,
                subject=Subject(
                    workflow_id=action.get("workflow_id"), action_id=action["_id"], dataset_hash=action.get("hash")
                ),
                payload=payload,
            )
        )

    async def check(self, action: dict[str, Any]) -> None:
        """Ask the executor about one SUBMITTED/RUNNING action and act on its answer."""
        if action["state"] not in (A.SUBMITTED, A.RUNNING) or not action.get("job_id"):
            return
        status = await self.executor.status(action["job_id"])
        await self.apply(action, status)

    async def apply(self, action: dict[str, Any], status: JobStatus) -> None:
        job = {"job_id": action["job_id"]}
        if status.state == JobState.RUNNING and action["state"] == A.SUBMITTED:
            res = await transition(
                self.store.actions,
                ACTION_TRANSITIONS,
                action["_id"],
                A.RUNNING,
                by=self.by,
                sources=[A.SUBMITTED],
                where=job,
                set={"started_at": status.started_at or time.time()},
            )
            if res:
                await self.publish(EventType.ACTION_RUNNING, res)
        elif status.state in (JobState.SUCCEEDED, JobState.FAILED, JobState.KILLED):
            # Duplicated notifications and the poller may report the same end at once, from
            # any replica: one of them finishes the action, under a lease that a crash expires.
            token = await self.lease(action)
            if token is None:
                return
            try:
                if status.state == JobState.SUCCEEDED:
                    await self.succeed(action, status)
                else:
                    killed = bool(action.get("kill_requested"))
                    reason = "killed" if killed else "action_failed"
                    await self.end(action, A.KILLED if killed else A.FAILED, status.error or reason, reason)
            finally:
                await self.store.actions.update_one({"_id": action["_id"], "finish_lease_by": token},
                                                    {"$set": {"finish_lease_at": 0.0}})  # fmt: skip

    async def lease(self, action: dict[str, Any]) -> str | None:
        """Take the right to finish this action; its token, or None if another caller has it."""
        now = time.time()
        token = uuid.uuid4().hex
        won = await self.store.actions.find_one_and_update(
            {"_id": action["_id"], "state": {"$in": [A.SUBMITTED, A.RUNNING]}, "job_id": action["job_id"],
             "finish_lease_at": {"$lt": now - self.finish_lease}},
            {"$set": {"finish_lease_at": now, "finish_lease_by": token}},
        )  # fmt: skip
        return token if won is not None else None

    async def succeed(self, action: dict[str, Any], status: JobStatus) -> None:
        final, attempt = action["output_path"], action["attempt_path"]
        if action.get("managed"):
            current = await ds.get(self.store, action["hash"])
            if current is not None and current["state"] in ds.BEING_DELETED:
                # Committing now would hand the new output to the deletor: wait until it is done.
                log.info("%s: dataset is being deleted; committing after it is gone", action["_id"])
                return
        try:
            await self.storage.commit(attempt, final, replace=bool(action.get("force")))
        except FileNotFoundError as exc:
            await self.end(action, A.FAILED, str(exc), "output_missing")
            return
        size = await self.storage.size(final)
        started = status.started_at or action.get("submitted_at") or time.time()
        seconds = max(0.0, (status.ended_at or time.time()) - started)
        if action.get("managed"):
            try:
                await ds.record_output(
                    self.store, action["hash"], action["_id"], size, seconds, bool(action.get("leaf")), self.by
                )
            except ds.Deferred:
                log.info("%s: dataset is being deleted; committing after it is gone", action["_id"])
                return
        await ds.release_claims(self.store, action.get("claims", []), action["_id"])
        await self.ready_children(action)
        res = await transition(
            self.store.actions,
            ACTION_TRANSITIONS,
            action["_id"],
            A.FINISHED,
            by=self.by,
            sources=[A.SUBMITTED, A.RUNNING],
            where={"job_id": action["job_id"]},
            set={
                "finished_at": time.time(),
                "size": size,
                "seconds": seconds,
                "ended_at": status.ended_at,
                "started_at": status.started_at or action.get("started_at"),
            },
        )
        if res is None:
            return
        await history.record(self.store, res["finished_at"], actions_computed=1, compute_seconds=seconds,
                             bytes_written=size or 0)  # fmt: skip
        await self.publish(EventType.ACTION_FINISHED, res, size=size, seconds=seconds)
        if action.get("managed"):
            await self.publish(EventType.DATASET_STORED, res, size=size)
        await self.settle(res["workflow_id"])

    async def ready_children(self, action: dict[str, Any]) -> None:
        for child_id in action.get("children", []):
            child = await self.store.actions.find_one_and_update(
                {"_id": child_id},
                {"$pull": {"pending_parents": action["_id"]}},
                projection={"pending_parents": 1, "state": 1},
            )
            if child is None or child["state"] != A.WAITING:
                continue
            res = await transition(
                self.store.actions,
                ACTION_TRANSITIONS,
                child_id,
                A.READY,
                by=self.by,
                sources=[A.WAITING],
                where={"pending_parents": {"$size": 0}},
            )
            if res:
                await self.publish(EventType.ACTION_READY, res)

    async def end(self, action: dict[str, Any], target: ActionState, error: str, reason: str) -> None:
        """FAILED or KILLED: free what it held, end what waited on it, then the action itself."""
        await self.release(action, reason)
        await self.end_descendants(action)
        res = await transition(
            self.store.actions,
            ACTION_TRANSITIONS,
            action["_id"],
            target,
            by=self.by,
            sources=[A.SUBMITTED, A.RUNNING],
            where={"job_id": action["job_id"]},
            set={"finished_at": time.time(), "error": error, "reason": reason},
            note=reason,
        )
        if res is None:
            return
        await history.record(self.store, res["finished_at"], failure=reason)
        event = EventType.ACTION_KILLED if target == A.KILLED else EventType.ACTION_FAILED
        await self.publish(event, res, error=error, reason=reason)
        await self.settle(res["workflow_id"])

    async def release(self, action: dict[str, Any], reason: str) -> None:
        if action.get("managed"):
            await ds.abandon(self.store, action["hash"], action["_id"], self.by, reason)
        if action.get("attempt_path"):
            await self.storage.discard(action["attempt_path"])
        await ds.release_claims(self.store, action.get("claims", []), action["_id"])

    async def end_descendants(self, action: dict[str, Any], reason: str = "upstream_failed") -> None:
        """Computed descendants that have not started end KILLED, releasing their claims."""
        seen: set[str] = set()
        queue = deque(action.get("children", []))
        while queue:
            child_id = queue.popleft()
            if child_id in seen:
                continue
            seen.add(child_id)
            res = await self.kill_pending(child_id, reason)
            doc = res or await self.store.actions.find_one({"_id": child_id}, {"children": 1})
            queue.extend((doc or {}).get("children", []))

    async def kill_pending(self, action_id: str, reason: str) -> dict[str, Any] | None:
        """End an action that has no job yet (WAITING, READY, PROCESSING) as KILLED."""
        res = await transition(
            self.store.actions,
            ACTION_TRANSITIONS,
            action_id,
            A.KILLED,
            by=self.by,
            sources=[A.WAITING, A.READY, A.PROCESSING],
            set={"finished_at": time.time(), "reason": reason, "error": reason},
            note=reason,
        )
        if res is not None:
            await history.record(self.store, res["finished_at"], failure=reason)
            await self.release(res, reason)
            await self.publish(EventType.ACTION_KILLED, res, reason=reason)
        return res

    async def kill_workflow(self, workflow_id: str) -> None:
        """Apply a workflow's kill request, in bulk and idempotently: the gateway runs it
        after answering, the repair sweep again if the gateway died before it finished.

        Actions with no job end KILLED in one write per state and release what they held;
        running jobs are asked to stop, and the poller (due at once) ends them KILLED."""
        store, now = self.store, time.time()
        batch = uuid.uuid4().hex

        async def end(states: list[ActionState]) -> int:
            return await transition_many(
                store.actions, ACTION_TRANSITIONS, {"workflow_id": workflow_id}, A.KILLED, by=self.by, sources=states,
                note="killed", set={"finished_at": now, "reason": "killed", "error": "killed", "kill_batch": batch},
            )  # fmt: skip

        limit = asyncio.Semaphore(KILL_CONCURRENCY)
        stopped: set[str] = set()

        async def stop(job_id: str) -> None:
            async with limit:
                try:
                    await self.executor.kill(job_id)
                except Exception:
                    log.warning("asking the executor to kill %s failed; the poller asks again", job_id, exc_info=True)

        async def flag_and_stop() -> None:
            # In-flight actions are flagged (a submitter will not submit a flagged action, and
            # kills the job of one flagged after it submitted); running jobs are asked to stop,
            # and the poller (due at once) ends them KILLED.
            for s in (A.PROCESSING, A.SUBMITTED, A.RUNNING):
                await store.actions.update_many(
                    {"workflow_id": workflow_id, "state": str(s)},
                    {"$set": {"kill_requested": True, "next_poll_at": now}},
                )
            jobs = [
                a["job_id"]
                for s in (A.SUBMITTED, A.RUNNING)
                async for a in store.actions.find({"workflow_id": workflow_id, "state": str(s)}, {"job_id": 1})
                if a.get("job_id") and a["job_id"] not in stopped
            ]
            stopped.update(jobs)
            await asyncio.gather(*(stop(j) for j in jobs))

        # Running jobs first: they are what costs while a kill is applied. Then WAITING and
        # READY, which can only move on to PROCESSING; then, once more, what reached
        # PROCESSING or beyond meanwhile; then PROCESSING. No action slips through.
        await flag_and_stop()
        moved = await end([A.WAITING, A.READY])
        await flag_and_stop()
        moved += await end([A.PROCESSING, A.READY])  # READY again: a submit error sends an action back there
        if moved:
            mine = {"workflow_id": workflow_id, "state": str(A.KILLED), "kill_batch": batch}
            killed = [a async for a in store.actions.find(mine)]
            await self.release_many(killed, "killed")
            await history.record(store, now, failure="killed", failures=len(killed))
            for a in killed:
                await self.publish(EventType.ACTION_KILLED, a, reason="killed")
        await store.workflows.update_one({"_id": workflow_id}, {"$set": {"kill_applied": True}})
        await self.settle(workflow_id)

    async def release_many(self, actions: list[dict[str, Any]], reason: str) -> None:
        """``release`` for many actions that have no job yet, in a few writes per thousand
        datasets (``$in`` on ``_id`` is index-served)."""
        held: dict[str, set[str]] = {}  # dataset -> the actions that claim or produce it
        for a in actions:
            for h in a.get("claims", []):
                held.setdefault(h, set()).add(a["_id"])
            if a.get("managed"):
                held.setdefault(a["hash"], set()).add(a["_id"])
        produced = sorted({a["hash"] for a in actions if a.get("managed")})
        hashes = sorted(held)
        for i in range(0, len(hashes), RELEASE_CHUNK):
            chunk = hashes[i : i + RELEASE_CHUNK]
            ids = sorted(set().union(*(held[h] for h in chunk)))
            await self.store.datasets.update_many(
                {"_id": {"$in": chunk}}, {"$pull": {"claims": {"$in": ids}, "producers": {"$in": ids}}}
            )
        for i in range(0, len(produced), RELEASE_CHUNK):
            # A dataset nobody produces any more never existed: DELETED (as ds.abandon does one by one).
            await transition_many(
                self.store.datasets, DATASET_TRANSITIONS,
                {"_id": {"$in": produced[i : i + RELEASE_CHUNK]}, "producers": {"$size": 0}}, DatasetState.DELETED,
                by=self.by, sources=[DatasetState.TO_STORE, DatasetState.TO_LEAF], note=reason,
            )  # fmt: skip

    async def settle(self, workflow_id: str) -> None:
        res = await settle(self.store, workflow_id, self.by)
        if res is not None:
            await self.bus.publish(
                Event(
                    type=EventType.WORKFLOW_FINISHED,
                    producer=self.by,
                    subject=Subject(workflow_id=workflow_id),
                    payload={"state": res["state"]},
                )
            )
