"""Polling: the executor asked about every job in flight, so a workflow completes even if
no notification ever arrives (thesis section 3.5; docs/architecture.md, "callback").

A notification is only a hint; the poller asks the executor about every SUBMITTED/RUNNING
action on a backoff schedule, and acts on the answer as a confirmed notification does
(``shared.lifecycle.ending.Outcomes.check``). Each poll is claimed by a guarded write of
``next_poll_at``, so replicas share the work instead of repeating it. Each round also
readies the retries that fell due, judges the timeouts that did, and takes back an
attempt whose submitter was lost before its job existed.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from shared import logs
from shared.executors.base import Executor, JobState, JobStatus
from shared.lifecycle import attempts
from shared.lifecycle.moves import Mover
from shared.metrics import POLL_LAG
from shared.states import ActionState
from shared.store import Store
from shared.store import actions as acts
from shared.store.actions import ActionDoc

log = logging.getLogger(__name__)
A = ActionState
# Actions polled (and retries or timeouts judged) per round; a full round runs again at once.
BATCH = 100


class Ends(Protocol):
    """What polling needs of ending (``shared.lifecycle.ending.Outcomes``)."""

    async def check(self, action: ActionDoc) -> None: ...

    async def apply(self, action: ActionDoc, status: JobStatus) -> None: ...

    async def stop_if_killed(self, action: ActionDoc | None, job_id: str) -> None: ...

    async def retry_due(self, action: ActionDoc) -> ActionDoc | None: ...

    async def enforce_timeout(self, action: ActionDoc) -> None: ...

    async def end(
        self, action: ActionDoc, target: ActionState, reason: str, error: str | None = None, *,
        sources: list[ActionState], where: dict[str, Any] | None = None, by: str | None = None,
    ) -> ActionDoc | None: ...  # fmt: skip


@dataclass
class Poller:
    store: Store
    executor: Executor
    mover: Mover
    ends: Ends
    by: str
    poll_interval: float
    poll_max_interval: float
    stale_after: float  # a SUBMITTED attempt with no job this old lost its submitter

    def backoff(self, polls: int) -> float:
        return min(self.poll_max_interval, self.poll_interval * (1.5**polls))

    async def poll(self) -> bool:
        """One round; True when it found a full batch (more may be due)."""
        await self.due_retries()
        await self.due_timeouts()
        now = time.time()
        store = self.store
        due = [
            a
            for s in (A.SUBMITTED, A.RUNNING)
            for a in await acts.in_state(store, s, {"next_poll_at": {"$lte": now}}, sort="next_poll_at", limit=BATCH)
        ]
        due.sort(key=lambda a: a["next_poll_at"])
        due = due[:BATCH]
        # Claimed together, in one guarded write and one read (a queue of submitted jobs
        # waiting for slots falls due at once; docs/performance.md, "Work in groups").
        taken = await acts.claim_polls(
            store, [(a, now + self.backoff(int(a.get("poll_count", 0)) + 1)) for a in due], uuid.uuid4().hex
        )
        for a in due:
            if a["_id"] not in taken:
                continue
            POLL_LAG.observe(max(0.0, now - a["next_poll_at"]))
            with logs.about(a.get("workflow_id"), a["_id"]):
                try:
                    await self.poll_one(a)
                except Exception:
                    log.exception("polling %s failed; will retry", a["_id"])
        return len(due) >= BATCH

    async def due_retries(self) -> None:
        """RETRYING actions whose ``retry_at`` has passed go back to READY (one guarded move
        each): the delay lives in the document, so it survives any restart."""
        due = await acts.in_state(
            self.store, A.RETRYING, {"retry_at": {"$lte": time.time()}},
            {"retry_at": 1, "failed_attempts": 1, "kill_requested": 1, "workflow_id": 1}, sort="retry_at", limit=BATCH,
        )  # fmt: skip
        for a in due:
            if a.get("kill_requested"):
                continue  # its workflow's kill ends it
            with logs.about(a.get("workflow_id"), a["_id"]):
                try:
                    await self.ends.retry_due(a)
                except Exception:
                    log.exception("readying %s for its retry failed; will retry", a["_id"])

    async def due_timeouts(self) -> None:
        """SUBMITTED/RUNNING actions whose ``timeout_at`` has passed: each check is claimed
        (the next one pushed ``KILL_AGAIN_AFTER`` on), then the job's run time is judged."""
        now, store = time.time(), self.store
        for s in (A.SUBMITTED, A.RUNNING):
            for a in await acts.in_state(store, s, {"timeout_at": {"$lte": now}}, sort="timeout_at", limit=BATCH):
                if not await acts.claim_timeout(store, a, now + attempts.KILL_AGAIN_AFTER):
                    continue
                with logs.about(a.get("workflow_id"), a["_id"]):
                    try:
                        await self.ends.enforce_timeout(a)
                    except Exception:
                        log.exception("checking %s for its timeout failed; will retry", a["_id"])

    async def poll_one(self, action: ActionDoc) -> None:
        """One claimed poll: the action's job asked about and its answer acted on."""
        job_id = action.get("job_id")
        if not job_id:
            await self.recover_unrecorded(action)
            return
        await self.ends.stop_if_killed(action, job_id)
        if action["state"] != A.SUBMITTED or action.get("job_handed_to") or not self.named(action):
            await self.ends.check(action)
            return
        # Named with the claim (``Executor.job_id``): no job by that id may mean none made yet.
        status = await self.executor.status(job_id)
        if status.state == JobState.UNKNOWN:
            await self.recover_unrecorded(action)
        else:
            await self.ends.apply(action, status)

    def named(self, action: ActionDoc) -> bool:
        """Whether the action's job id was named with its claim, before its job was made."""
        return self.executor.job_id(action["external_id"]) == action["job_id"]

    async def recover_unrecorded(self, action: ActionDoc) -> None:
        """SUBMITTED with no job: its submitter died between its claim and the job (the
        job id None, or named with the claim and no job has it), or between submitting
        and recording. Or it is only slow (a loaded machine): the external id is fenced
        before the attempt is taken back, so its job cannot start after the next attempt's
        does: two live attempts would compute the dataset twice (docs/state-machines.md,
        "Action"). One whose workflow is being killed is fenced at once: its job must not
        start anyway (a kill fences a named job not made yet: ``Executor.job_id``)."""
        named = action.get("job_id")
        young = time.time() - float(action.get("submitted_at", 0)) < self.stale_after
        if young and not (named and action.get("kill_requested")):
            return
        job_id = await self.executor.fence(action["external_id"])
        if job_id is not None:
            if not named:
                await acts.record_job(
                    self.store, action["_id"], action["external_id"], job_id, action.get("timeout_seconds")
                )
            return  # made just now: the next poll asks about it
        no_job = {"external_id": action["external_id"], "job_id": named}
        if action.get("kill_requested"):
            # Its workflow is being killed: no new attempt, it ends KILLED.
            await self.ends.end(action, A.KILLED, "killed", sources=[A.SUBMITTED], where=no_job, by=self.by)
            return
        lost = "submitter lost before the job existed"
        await self.mover.action(
            action["_id"], A.READY, by=self.by, sources=[A.SUBMITTED], where=no_job, note=lost,
            push={"attempt_log": acts.attempt_entry(action, attempts.LOST, lost)},
        )  # fmt: skip
