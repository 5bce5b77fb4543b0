"""Ending an action: how a job's end, a failed submission, a failed parent or a kill
become FINISHED, FAILED or KILLED (thesis section 3.5; docs/state-machines.md, "Ending
an action").

One protocol for every writer that ends an action (``Outcomes.end``): free what the
action held, end the descendants that waited on it, then the guarded terminal move,
last, with its effects (``shared.lifecycle.effects``). The step a repair keys on comes
last: an action whose terminal move did not happen is still in a state the poller (a
job), the repair sweep (a kill) or the caller's retry applies again, and every step
before it is idempotent. A success commits the output and readies the children first,
the same way. The executor's word is always re-read before acting: a notification
alone never moves anything.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from shared.executors.base import Executor, JobState, JobStatus
from shared.lifecycle.moves import Mover
from shared.states import ActionState
from shared.storage import Storage
from shared.store import Store
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store import workflows as wfs
from shared.store.actions import ActionDoc

log = logging.getLogger(__name__)
A = ActionState
# Kill requests sent to the executor at once when a whole workflow is killed.
KILL_CONCURRENCY = 16
# States of an action that has no job: a kill or a failed parent ends them directly.
NO_JOB = [A.WAITING, A.READY, A.PROCESSING]


@dataclass
class Outcomes:
    store: Store
    storage: Storage
    mover: Mover
    executor: Executor
    by: str
    # How long one caller may take to finish an action before another may take over (a
    # crashed finisher's lease expires after this): PINGO_STALE_AFTER, like every lease.
    finish_lease: float = 60.0

    async def check(self, action: ActionDoc) -> None:
        """Ask the executor about one SUBMITTED/RUNNING action and act on its answer."""
        if action["state"] not in (A.SUBMITTED, A.RUNNING) or not action.get("job_id"):
            return
        status = await self.executor.status(action["job_id"])
        await self.apply(action, status)

    async def apply(self, action: ActionDoc, status: JobStatus) -> None:
        job = {"job_id": action["job_id"]}
        if status.state == JobState.RUNNING and action["state"] == A.SUBMITTED:
            await self.mover.action(
                action["_id"], A.RUNNING, by=self.by, sources=[A.SUBMITTED], where=job,
                set={"started_at": status.started_at or time.time()},
            )  # fmt: skip
        elif status.state in (JobState.SUCCEEDED, JobState.FAILED, JobState.KILLED):
            # Duplicated notifications and the poller may report the same end at once, from
            # any replica: one of them finishes the action, under a lease that a crash expires.
            token = uuid.uuid4().hex
            if not await acts.take_finish_lease(self.store, action, token, time.time(), self.finish_lease):
                return
            try:
                if status.state == JobState.SUCCEEDED:
                    await self.succeed(action, status)
                else:
                    killed = bool(action.get("kill_requested"))
                    reason = "killed" if killed else "action_failed"
                    await self.end(action, A.KILLED if killed else A.FAILED, reason, status.error or reason,
                                   sources=[A.SUBMITTED, A.RUNNING], where=job)  # fmt: skip
            finally:
                await acts.drop_finish_lease(self.store, action["_id"], token)

    async def succeed(self, action: ActionDoc, status: JobStatus) -> None:
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
            await self.end(action, A.FAILED, "output_missing", str(exc), sources=[A.SUBMITTED, A.RUNNING],
                           where={"job_id": action["job_id"]})  # fmt: skip
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
        # What it read is free; its own dataset was stored (record_output struck it from producers).
        await ds.release(self.store, {h: {action["_id"]} for h in action.get("claims", [])}, set(), self.by, "finished")
        await self.ready_children(action)
        await self.mover.action(
            action["_id"], A.FINISHED, by=self.by, sources=[A.SUBMITTED, A.RUNNING], where={"job_id": action["job_id"]},
            set={
                "finished_at": time.time(),
                "size": size,
                "seconds": seconds,
                "ended_at": status.ended_at,
                "started_at": status.started_at or action.get("started_at"),
            },
        )  # fmt: skip

    async def ready_children(self, action: ActionDoc) -> None:
        for child_id in action.get("children", []):
            child = await acts.parent_finished(self.store, child_id, action["_id"])
            if child is None or child["state"] != A.WAITING:
                continue
            await self.ready(child_id)

    async def ready(self, action_id: str) -> None:
        """WAITING -> READY once no computed parent is pending: after a parent finished, and
        from the repair sweep for a child a crash left behind."""
        await self.mover.action(
            action_id, A.READY, by=self.by, sources=[A.WAITING], where={"pending_parents": {"$size": 0}}
        )

    async def end(
        self, action: ActionDoc, target: ActionState, reason: str, error: str | None = None, *,
        sources: list[ActionState], where: dict[str, Any] | None = None, set: dict[str, Any] | None = None,
        note: str | None = None, cascade: bool = True, by: str | None = None,
    ) -> ActionDoc | None:  # fmt: skip
        """End ``action`` FAILED or KILLED: free what it held, end (KILLED) the descendants
        that waited on it, then the guarded terminal move from ``sources`` (narrowed by
        ``where``). Its workflow settles once, after the whole cascade."""
        async with self.mover.batch():
            await self.release(action, reason)
            if cascade:
                await self.end_descendants(action)
            return await self.mover.action(
                action["_id"], target, by=by or self.by, sources=sources, where=where, note=note or reason,
                set={**(set or {}), "finished_at": time.time(), "error": error or reason, "reason": reason},
            )  # fmt: skip

    async def release(self, action: ActionDoc, reason: str) -> None:
        if action.get("attempt_path"):
            await self.storage.discard(action["attempt_path"])
        held, produced = ds.held_by([action])
        await ds.release(self.store, held, produced, self.by, reason)

    async def end_descendants(self, action: ActionDoc, reason: str = "upstream_failed") -> None:
        """The computed descendants of an action that failed never start: each ends KILLED.
        All of them are WAITING (their pending parent never finished), and only a kill
        moves a WAITING action otherwise (to KILLED, releasing the same things), so each
        is released before its move, like every ending."""
        seen: set[str] = set()
        queue = deque(action.get("children", []))
        while queue:
            child_id = queue.popleft()
            if child_id in seen:
                continue
            seen.add(child_id)
            child = await acts.get(self.store, child_id)
            if child is None:
                continue
            if child["state"] == A.WAITING:
                await self.end(child, A.KILLED, reason, sources=[A.WAITING], cascade=False)
            queue.extend(child.get("children", []))

    async def kill_workflow(self, workflow_id: str) -> None:
        """Apply a workflow's kill request, in bulk and idempotently: the gateway runs it
        after answering, the repair sweep again (until ``kill_applied``) if the gateway
        died before it finished.

        Every action of the workflow is flagged first, in one write: a flagged action is
        never submitted (the submitter's guard), and the job of one submitted meanwhile
        is stopped by its submitter. Running jobs are asked to stop at once and the
        poller (due at once) ends them KILLED. The actions with no job end KILLED in one
        write per state; then what they held is released, then ``kill_applied`` (what
        the repair keys on) is set last."""
        store, now = self.store, time.time()
        async with self.mover.batch():
            await acts.flag_kill(store, workflow_id, now)
            await self.stop_jobs(workflow_id)

            async def release_killed(_: list[ActionDoc]) -> None:
                # Every KILLED action of the workflow, not only those just moved: a kill
                # applied again after a crash releases what the first attempt did not.
                killed = await acts.in_state(
                    store, A.KILLED, workflow_id=workflow_id, fields={"claims": 1, "managed": 1, "hash": 1}
                )
                held, produced = ds.held_by(killed)
                await ds.release(store, held, produced, self.by, "killed")

            await self.mover.actions_many(
                {"workflow_id": workflow_id}, A.KILLED, by=self.by, sources=NO_JOB, note="killed",
                set={"finished_at": now, "reason": "killed", "error": "killed"}, before_effects=release_killed,
            )  # fmt: skip
            await wfs.kill_applied(store, workflow_id)
            await self.mover.settle(workflow_id)

    async def stop_if_killed(self, action: ActionDoc | None, job_id: str) -> None:
        """Stop the job of an action whose workflow is being killed (flagged), or that is
        no longer SUBMITTED when its job id is recorded (``action`` None: killed meanwhile).
        The submitter calls it after recording a job, the poller before each check."""
        if action is None or action.get("kill_requested"):
            await self.executor.kill(job_id)

    async def stop_jobs(self, workflow_id: str) -> None:
        limit = asyncio.Semaphore(KILL_CONCURRENCY)

        async def stop(job_id: str) -> None:
            async with limit:
                try:
                    await self.executor.kill(job_id)
                except Exception:
                    log.warning("asking the executor to kill %s failed; the poller asks again", job_id, exc_info=True)

        jobs = [
            a["job_id"]
            for s in (A.SUBMITTED, A.RUNNING)
            for a in await acts.in_state(self.store, s, workflow_id=workflow_id, fields={"job_id": 1})
            if a.get("job_id")
        ]
        await asyncio.gather(*(stop(j) for j in jobs))
