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
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from shared.executors.base import Executor, JobState, JobStatus
from shared.group_commit import GroupCommit
from shared.inputs import changed_since
from shared.lifecycle import attempts, cutoff, reserving
from shared.lifecycle.finishing import Lease, conclude_together, lease_together, reads_dataset
from shared.lifecycle.following import Following
from shared.lifecycle.moves import Mover
from shared.lifecycle.replanning import Replanner, Replans
from shared.states import ACTION_IN_FLIGHT, ACTION_KILLED_IN_BULK, ACTION_LIVE, DATASET_BEING_DELETED, ActionState
from shared.storage import Storage
from shared.storage.base import Integrity, StorageRefused
from shared.store import Store
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store import workflows as wfs
from shared.store.actions import ActionDoc
from shared.ticker import Heartbeat

log = logging.getLogger(__name__)
A = ActionState
# The states of a job that has ended.
ENDED = (JobState.SUCCEEDED, JobState.FAILED, JobState.KILLED)
# Kill requests sent to the executor at once when a whole workflow is killed.
KILL_CONCURRENCY = 16
# A failure's descendants ended in bulk: this many moves to a write, so that other
# commands are served between them (the embedded store serves one at a time).
CASCADE_CHUNK = 500
# What ``end_descendants`` reads of a workflow's actions to end a failure's descendants.
CASCADE_FIELDS = {"state": 1, "children": 1, "claims": 1, "managed": 1, "hash": 1, "attempt_path": 1, "owner": 1}
# The fields of an action a job's notification is checked against (its secret), then confirmed with.
NOTIFIED_FIELDS = {
    "secret": 1, "workflow_id": 1, "state": 1, "job_id": 1, "job_handed_to": 1, "timeout_seconds": 1,
    "managed": 1, "hash": 1,
}  # fmt: skip


def ran(status: JobStatus | None) -> dict[str, float | None]:
    """When the job of an attempt ran, as its executor reported it (for its ``attempt_log`` entry)."""
    return {"started_at": status.started_at, "ended_at": status.ended_at} if status else {}


def nondeterminism(before: dict[str, Any] | None, checksum: str | None) -> dict[str, Any] | None:
    """The determinism audit (docs/planning.md, "Determinism audit"): a lineage computed
    again (forced, invalidated, lost, deleted) whose output's checksum differs from the one
    recorded at its last commit (``before``: its dataset as read before this commit). What
    is recorded then; None when it is the same, or either checksum is unknown."""
    previous = (before or {}).get("checksum")
    if previous is None or checksum is None or previous == checksum:
        return None
    return {"previous_checksum": previous, "checksum": checksum, "previous_action": (before or {}).get("produced_by")}


def may_be_followed(done: ActionDoc, recorded: dict[str, Any] | None) -> bool:
    """Whether a FINISHED action may have followers to resolve. A follower registers in
    its producer's ``followers`` before its producer can end (the document the move
    returns lists it), unless it registered while the producer was still being planned:
    then it noted so on the dataset (``recorded``: as the commit left it). Most actions
    have none, and skip the query for them (docs/performance.md, "A chain's hop")."""
    if done.get("followers") or recorded is None:  # unrecorded: not looked at, asked
        return True
    return bool(recorded.get("unlisted_followers"))


def ready_beside(c: Committed, output: ds.Output) -> bool:
    """Whether a success's children may be readied while its dataset is recorded rather
    than after: unless their start reads what the record writes. A twin (an earlier
    lineage's identical output) is what their early cutoff reads; a reservation is
    settled with the record, before they reserve (``reserving.committed``); an input that
    changed is noted on them first. And a dataset seen being deleted (or not seen) may
    defer the record (``ds.Deferred``): its files may go, so its children wait for it. One
    seen otherwise cannot start being deleted meanwhile, since its producer and its
    children's claims hold it (docs/state-machines.md, "Ending an action")."""
    seen = output.seen
    return (
        output.twin is None
        and not c.action.get("reservation")
        and not c.changed
        and seen is not None
        and seen.get("state") not in DATASET_BEING_DELETED
    )


def _retrieved(asked: asyncio.Future[Any]) -> None:
    """A status asked beside a finish lease and not used (``Outcomes.finish_notified``):
    its failure, if any, is read here, so that asyncio does not report it as lost."""
    if not asked.cancelled():
        asked.exception()


@dataclass
class Committed:
    """A success whose output is committed and checked, on its way to FINISHED: what the
    steps after the commit read (``Outcomes.succeed``)."""

    action: ActionDoc  # as its finish lease found it
    status: JobStatus
    current: dict[str, Any] | None  # its dataset, as read before the commit
    found: Integrity | None  # what the storage saw of the committed output
    changed: list[str]  # the inputs that changed while it ran
    differs: dict[str, Any] | None  # the determinism audit's record, if its checksum differs
    seconds: float

    @property
    def size(self) -> int | None:
        return self.found.size if self.found else None


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
    # How often a computation that itself failed is taken over by one of its followers
    # before the others fail with it (PINGO_TAKEOVER_RETRIES).
    takeover_retries: int = 1
    # How external inputs are fingerprinted (PINGO_INPUT_FINGERPRINT, PINGO_INPUT_MAX_FILES):
    # a commit takes their fingerprints again (docs/planning.md, "External inputs").
    input_checksum: bool = False
    input_max_files: int = 10_000
    # Re-planning, as following's takeover and the start of an attempt need it.
    replanner: Replans = field(init=False)
    following: Following = field(init=False)
    # The ends of jobs that end together, taken and recorded in groups (docs/performance.md,
    # "Work in groups"): their finish leases, and the store work of their successes.
    leases: GroupCommit[tuple[ActionDoc, bool], Lease] = field(init=False, repr=False)
    concluding: GroupCommit[Committed, ActionDoc | BaseException | None] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Neither knows this class: re-planning is handed the two steps it calls back,
        # following the narrow ``Ends`` this class is.
        self.replanner = Replanner(self.store, self.storage, self.mover, self.by, self.ready, self.abandon)
        self.following = Following(self.store, self.mover, self.by, self, self.replanner, self.takeover_retries)
        self.leases = GroupCommit(lambda asked: lease_together(self, asked))
        self.concluding = GroupCommit(lambda group: conclude_together(self, group))

    async def notified(self, action_id: str) -> ActionDoc | None:
        """The action a job's notification names, as checking and confirming it needs it
        (``NOTIFIED_FIELDS``): finishing reads the rest under its finish lease (``apply``)."""
        return await acts.get(self.store, action_id, NOTIFIED_FIELDS)

    async def check(self, action: ActionDoc) -> None:
        """Ask the executor about one SUBMITTED/RUNNING action and act on its answer."""
        if action["state"] not in (A.SUBMITTED, A.RUNNING) or not action.get("job_id") or action.get("job_handed_to"):
            return  # nothing to ask; or its job is its successor's now
        status = await self.executor.status(action["job_id"])
        await self.apply(action, status)

    async def apply(self, action: ActionDoc, status: JobStatus) -> None:
        job = {"job_id": action["job_id"]}
        if status.state == JobState.RUNNING and action["state"] == A.SUBMITTED:
            started = status.started_at or time.time()
            timeout = action.get("timeout_seconds")
            await self.mover.action(
                action["_id"], A.RUNNING, by=self.by, sources=[A.SUBMITTED], where=job,
                set={"started_at": started, **({"timeout_at": started + float(timeout)} if timeout else {})},
            )  # fmt: skip
        elif status.state in ENDED:
            # Duplicated notifications and the poller may report the same end at once, from
            # any replica: one of them finishes the action, under a lease that a crash expires.
            leased, token, dataset = await self.lease(action, status.state == JobState.SUCCEEDED)
            if leased is not None:
                await self.finish(leased, status, token, dataset)

    async def lease(self, action: ActionDoc, succeeded: bool) -> Lease:
        """The finish lease of ``action``'s job (``_id``, ``job_id``), its token, and, for a
        success of a managed action, its dataset as read beside the lease rather than after
        it: a chain's hop waits for both (issue 10). The action None: not taken. Leases
        asked while others are being taken are taken together (``lease_together``)."""
        return await self.leases((action, succeeded))

    async def lease_alone(self, action: ActionDoc, succeeded: bool) -> Lease:
        """``lease`` for one end, in one write (and the dataset's read beside it)."""
        token = uuid.uuid4().hex
        lease = acts.take_finish_lease(self.store, action, token, time.time(), self.finish_lease)
        if reads_dataset(action, succeeded):
            leased, dataset = await asyncio.gather(lease, ds.get(self.store, action["hash"]))
            return leased, token, dataset
        return await lease, token, None

    async def finish_notified(self, action_id: str, job_id: str, dataset: str | None, succeeded: bool) -> bool:
        """The end of a job whose notification carried a valid token (``shared.callback_tokens``),
        finished without reading the action first: the finish lease, guarded by the job id
        the notification names, reads it, and the signed ``dataset`` is read beside it;
        the executor is asked meanwhile, and its answer counts once the lease is taken.
        False if it was not finished so (no lease: the job id is not recorded yet, or not
        this action's; its job was handed to a follower; the job has not ended): the
        caller reads the action and checks it as before."""
        claimed = ActionDoc(_id=action_id, job_id=job_id, managed=dataset is not None, hash=dataset)
        # Asked beside the lease rather than after it: a chain's hop waits for one file
        # read in a worker thread less (docs/performance.md, "A chain's hop").
        asked = asyncio.ensure_future(self.executor.status(job_id))
        asked.add_done_callback(_retrieved)
        status = None
        try:
            leased, token, current = await self.lease(claimed, succeeded)
            if leased is None:
                return False
            try:
                if not leased.get("job_handed_to") and (dataset is None or leased.get("hash") == dataset):
                    status = await asked
            finally:  # the executor away, or nothing to finish: the lease goes back at once
                if status is None or status.state not in ENDED:
                    await acts.drop_finish_lease(self.store, action_id, token)
        finally:
            asked.cancel()  # its answer unused (no lease, or not this job's to finish): not waited for
        if status is None or status.state not in ENDED:
            return False
        await self.finish(leased, status, token, current if leased.get("managed") else None)
        return True

    async def finish(self, action: ActionDoc, status: JobStatus, token: str, dataset: dict[str, Any] | None) -> None:
        """Finish ``action`` (as its finish lease, ``token``, found it) from its job's end."""
        job = {"job_id": action["job_id"]}
        moved = None
        try:
            if status.state == JobState.SUCCEEDED:
                moved = await self.succeed(action, status, dataset)
            elif action.get("kill_requested"):
                moved = await self.end(
                    action, A.KILLED, "killed", status.error or "killed", sources=[A.SUBMITTED, A.RUNNING],
                    where=job, record=acts.attempt_entry(action, attempts.KILLED, status.error, **ran(status)),
                )  # fmt: skip
            elif attempts.timed_out(action):
                message = attempts.timeout_message(float(action.get("timeout_seconds") or 0))
                moved = await self.fail_attempt(action, "timed_out", message, status, outcome=attempts.TIMED_OUT)
            elif status.state == JobState.FAILED:
                moved = await self.fail_attempt(action, "action_failed", status.error or "action_failed", status)
            else:
                # Killed outside Pingo (not by a kill or a timeout): someone meant it, no retry.
                moved = await self.end(
                    action, A.FAILED, "action_failed", status.error or "killed outside Pingo",
                    sources=[A.SUBMITTED, A.RUNNING], where=job,
                    record=acts.attempt_entry(action, attempts.KILLED, status.error, **ran(status)),
                )  # fmt: skip
        finally:
            # Once the action has left SUBMITTED/RUNNING no lease can be taken again: only
            # an action still there (deferred, lost a race, or an error) needs it back.
            if moved is None:
                await acts.drop_finish_lease(self.store, action["_id"], token)

    async def succeed(
        self, action: ActionDoc, status: JobStatus, dataset: dict[str, Any] | None = None
    ) -> ActionDoc | None:
        """Commit the output, record the dataset, ready the children, then FINISHED: the
        move's document back, or None if the action was left as it was (to finish later).
        ``dataset``: its dataset as just read, if it was (else it is read here). The same
        steps, for many successes at once: ``shared.lifecycle.finishing``."""
        committed = await self.commit_output(action, status, dataset)
        if not isinstance(committed, Committed):
            return committed
        # The store work of successes committed while others' is done is done together.
        done = await self.concluding(committed)
        if isinstance(done, BaseException):
            raise done
        return done

    async def conclude_alone(self, committed: Committed) -> ActionDoc | None:
        """A committed success's store work, alone: record its dataset, ready its children,
        release what it read, then FINISHED (``conclude_together``: many at once)."""
        action = committed.action
        recorded = None
        if action.get("managed"):
            output = await self.output_of(committed)
            try:
                if ready_beside(committed, output):
                    recorded = await self.record_and_ready(committed, output)
                else:
                    recorded = await self.record_output(committed, output)
                    await self.before_finished(committed)
            except ds.Deferred:
                log.info("%s: dataset is being deleted; committing after it is gone", action["_id"])
                return None
        else:
            await self.before_finished(committed)
        # What it read is free then (record_output struck it from producers).
        await ds.release(self.store, {h: {action["_id"]} for h in action.get("claims", [])}, set(), self.by, "finished")
        done = await self.move_finished(committed)
        if done is not None:
            await self.after_finished(committed, done, recorded)
        return done

    async def commit_output(
        self, action: ActionDoc, status: JobStatus, dataset: dict[str, Any] | None = None
    ) -> Committed | ActionDoc | None:
        """A success's first step: commit its attempt's output, and check it. What comes
        back: the output ``Committed``, or, if it was not (the action left as it was: None;
        or ended otherwise, the output missing or refused), the action's move."""
        final, attempt = action["output_path"], action["attempt_path"]
        current = None
        if action.get("managed"):
            current = dataset if dataset is not None else await ds.get(self.store, action["hash"])
            if current is not None and current["state"] in DATASET_BEING_DELETED:
                # Committing now would hand the new output to the deletor: wait until it is done.
                log.info("%s: dataset is being deleted; committing after it is gone", action["_id"])
                return None
        changed = await self.inputs_changed(action)
        try:
            # An unmanaged output is the user's latest result, never a kept dataset: always replaced;
            # so is one made from an input that changed while it was computed, and so are the
            # files of a dataset a user withdrew (invalidated) that were not deleted yet.
            replace = (
                bool(action.get("force"))
                or not action.get("managed")
                or bool((current or {}).get("input_changed"))
                or bool((current or {}).get("withdrawn"))
            )
            # A managed dataset's checksum is taken whatever PINGO_VERIFY_REUSE says: it is what
            # a later check at the checksum level compares against. An unmanaged output is never
            # reused. Committed and checked in one storage call (one worker thread locally).
            _, found = await self.storage.commit_checked(
                attempt, final, replace=replace, user=action.get("owner"), checksum=bool(action.get("managed"))
            )
        except FileNotFoundError as exc:
            return await self.fail_attempt(action, "output_missing", str(exc), status)
        except StorageRefused as exc:  # anything else: the poller asks again
            # The storage refuses who commits it (HDFS permissions changed since submission):
            # asking again, or another attempt, is refused the same way.
            return await self.end(
                action, A.FAILED, "commit_refused", f"its output could not be committed: {exc}",
                sources=[A.SUBMITTED, A.RUNNING], where={"job_id": action["job_id"]},
                record=acts.attempt_entry(action, attempts.FAILED, str(exc), **ran(status)),
            )  # fmt: skip
        differs = nondeterminism(current, found.checksum if found else None)
        started = status.started_at or action.get("submitted_at") or time.time()
        seconds = max(0.0, (status.ended_at or time.time()) - started)
        return Committed(action, status, current, found, changed, differs, seconds)

    async def before_finished(self, c: Committed) -> None:
        """A committed success's children learn of it (their input is stored), before its
        FINISHED move: readying them is what a chain's hop waits for."""
        action = c.action
        if c.changed and action.get("children"):  # before they may start: their outputs are tainted too
            await acts.note_input_changed(self.store, action["children"], c.changed)
        await self.ready_children(action, size=c.size)

    async def move_finished(self, c: Committed) -> ActionDoc | None:
        """A committed success's FINISHED move, alone (in flight: SUBMITTED or RUNNING)."""
        return await self.mover.action(
            c.action["_id"], A.FINISHED, by=self.by, sources=[A.SUBMITTED, A.RUNNING], **self.finished_move(c)
        )

    def finished_move(self, c: Committed) -> dict[str, Any]:
        """The guard and fields of a committed success's FINISHED move (``Mover.action``'s)."""
        action, status = c.action, c.status
        return {
            "where": {"job_id": action["job_id"]},
            "push": {"attempt_log": acts.attempt_entry(action, attempts.SUCCEEDED, None, **ran(status))},
            "set": {
                "error": None,  # an earlier attempt's, if it was retried
                "finished_at": time.time(),
                "size": c.size,
                "seconds": c.seconds,
                "ended_at": status.ended_at,
                "started_at": status.started_at or action.get("started_at"),
                "input_changed": c.changed or None,
                **({"nondeterministic": c.differs} if c.differs is not None else {}),
            },
        }

    async def after_finished(self, c: Committed, done: ActionDoc, recorded: dict[str, Any] | None) -> None:
        """After a success's FINISHED move (``done``): the children re-planning added while
        it committed (the list is final now), then its followers. As at an end, one indexed
        query finds them, and most actions have none to resolve."""
        await self.ready_children(done, skip=c.action.get("children"))
        if may_be_followed(done, recorded) and (followers := await acts.following(self.store, done["_id"])):
            await self.following.resolve(done, followers)

    async def inputs_changed(self, action: ActionDoc) -> list[str]:
        """The inputs (its own, and its parents' as they noted them) that changed while
        ``action``'s job ran: its output is kept (its readers in this workflow wait for it),
        but marked, and the next plan computes it again."""
        recorded = (action.get("definition") or {}).get("inputs") or []
        changed = await changed_since(
            self.storage, recorded, self.input_checksum, self.input_max_files, action.get("owner")
        ) if recorded else []  # fmt: skip
        # An input of its parents' that changed while they ran taints this output too.
        changed += [c for c in action.get("upstream_input_changed") or [] if c not in changed]
        if changed:
            log.warning("%s: made from input(s) that changed while it ran: %s", action["_id"], changed)
        return changed

    async def record_output(self, c: Committed, output: ds.Output) -> dict[str, Any] | None:
        """Record a managed action's committed ``output`` in its dataset, count its real
        size, and flag a lineage whose output differs; the dataset as recorded. Raises
        ``ds.Deferred`` while it is being deleted."""
        recorded = await output.record(self.store, self.by)
        await self.recorded(c)
        return recorded

    async def record_and_ready(self, c: Committed, output: ds.Output) -> dict[str, Any] | None:
        """``record_output`` and ``before_finished`` at once, where the children's start
        reads nothing the record writes (``ready_beside``): the two writes are sent
        together, and a chain's hop waits for one round trip less (docs/performance.md,
        "A chain's hop"). Both are done before either's failure is raised, as in turn.
        The children's READY is sent first: the store serves the two one after the
        other, and the hop waits for the READY alone."""
        readied, recorded = await asyncio.gather(
            self.before_finished(c), self.record_output(c, output), return_exceptions=True
        )
        for outcome in (recorded, readied):
            if isinstance(outcome, BaseException):
                raise outcome
        assert not isinstance(recorded, BaseException)
        return recorded

    async def output_of(self, c: Committed) -> ds.Output:
        """What a managed action's commit records in its dataset (``found``: what the
        storage saw of its output)."""
        action, found = c.action, c.found
        # Byte-identical to an earlier lineage's output: its children may be cut off early.
        twin = None
        if not c.changed and found is not None and action.get("miss"):  # an earlier lineage
            twin = await cutoff.twin_of(self.store, action, found.checksum)
        return ds.Output(
            action["hash"], action["_id"], c.size, c.seconds, bool(action.get("leaf")),
            files=found.files if found else None, checksum=found.checksum if found else None,
            owner=action.get("owner"), storage=self.storage.identity, seen=c.current, input_changed=c.changed or None,
            twin=twin,
        )  # fmt: skip

    async def recorded(self, c: Committed) -> None:
        """After a commit was recorded: its real size is counted now, and a lineage whose
        output differs is flagged."""
        await reserving.committed(self.store, c.action)
        if c.differs is not None:
            log.warning("%s: its output differs from its lineage's last one (%s)", c.action["_id"], c.action["hash"])
            await ds.flag_nondeterministic(self.store, c.action["hash"], c.differs)

    async def fail_attempt(
        self, action: ActionDoc, reason: str, error: str, status: JobStatus | None, outcome: str = attempts.FAILED
    ) -> ActionDoc | None:
        """A SUBMITTED/RUNNING action's job ended without success, timed out, or left no
        output. If its retries allow, it waits in RETRYING for its next attempt, keeping
        what it holds (claims, producer mark, followers: the computation goes on); else
        it ends FAILED. A kill requested meanwhile wins: it ends KILLED."""
        job = {"job_id": action["job_id"]}
        entry = acts.attempt_entry(action, outcome, error, **ran(status))
        retry = attempts.next_retry(action)
        if retry is None:
            failed = int(action.get("failed_attempts") or 0) + 1
            return await self.end(action, A.FAILED, reason, error, sources=[A.SUBMITTED, A.RUNNING], where=job,
                                  set={"failed_attempts": failed}, record=entry)  # fmt: skip
        failed, delay = retry
        if action.get("attempt_path"):
            await self.storage.discard(action["attempt_path"], user=action.get("owner"))
        retry_at = time.time() + delay
        moved = await self.mover.action(
            action["_id"], A.RETRYING, by=self.by, sources=[A.SUBMITTED, A.RUNNING],
            where={**job, "kill_requested": {"$ne": True}},
            set={"failed_attempts": failed, "retry_at": retry_at, "error": error, "reason": reason},
            push={"attempt_log": entry},
            note=f"attempt {entry['attempt']}: {error}; retry {failed}/{attempts.policy(action).count} in {delay:g} s",
        )  # fmt: skip
        if moved is not None:
            return moved
        fresh = await acts.get(self.store, action["_id"])
        if fresh and fresh.get("kill_requested") and fresh["state"] in (A.SUBMITTED, A.RUNNING):
            if fresh.get("job_id") == action["job_id"]:  # its workflow is being killed: no retry
                return await self.end(fresh, A.KILLED, "killed", error, sources=[A.SUBMITTED, A.RUNNING], where=job,
                                      record={**entry, "outcome": attempts.KILLED})  # fmt: skip
        return None

    async def retry_due(self, action: ActionDoc) -> ActionDoc | None:
        """RETRYING -> READY once ``retry_at`` has passed: one guarded move, so however many
        pollers see it due, the next attempt is made once. A flagged action is left to
        its workflow's kill."""
        return await self.mover.action(
            action["_id"], A.READY, by=self.by, sources=[A.RETRYING],
            where={"retry_at": action["retry_at"], "kill_requested": {"$ne": True}},
            note=f"retry {action.get('failed_attempts')} due",
        )  # fmt: skip

    async def enforce_timeout(self, action: ActionDoc) -> None:
        """A SUBMITTED/RUNNING action whose ``timeout_at`` has passed: if its job has run
        for longer than ``timeout_seconds``, record that it timed out, then kill it; its
        end (seen by the poller) is then a failed attempt with the timeout as reason.
        Otherwise move the deadline to where it really is (the clock starts when the job
        runs, not while it waits for a slot)."""
        timeout, job_id = action.get("timeout_seconds"), action.get("job_id")
        if not timeout or not job_id or action.get("job_handed_to"):
            return
        if attempts.timed_out(action):
            await self.executor.kill(job_id)  # asked before; the job has not ended yet
            return
        status = await self.executor.status(job_id)
        now = time.time()
        if status.state in (JobState.SUCCEEDED, JobState.FAILED, JobState.KILLED, JobState.UNKNOWN):
            return  # it ended in time: the poller finishes it
        if status.state == JobState.PREP:
            await acts.check_timeout_at(self.store, action, now + float(timeout))
            return
        started = status.started_at or action.get("started_at") or now
        if started + float(timeout) > now:
            await acts.check_timeout_at(self.store, action, started + float(timeout))
            return
        marked = await acts.mark_timed_out(self.store, action, now)
        if marked is None:
            return
        log.info("%s: %s; killing %s", action["_id"], attempts.timeout_message(float(timeout)), job_id)
        await self.executor.kill(job_id)

    async def ready_children(self, action: ActionDoc, skip: list[str] | None = None, size: int | None = None) -> None:
        """Strike ``action`` off its children's pending parents, readying those it was the
        last of. ``size``: its output's (else the action's recorded one), which raises each
        child's ``input_bytes``, what a first run's start reserves (shared.lifecycle.reserving)."""
        size = size if size is not None else action.get("size")
        raise_input = {"input_bytes": int(size)} if action.get("managed") and size is not None else None
        for child_id in action.get("children", []):
            if skip and child_id in skip:
                continue
            # The common case, a child waiting on this parent alone (a chain, a fan-out): one
            # guarded move strikes the parent off and readies the child, where striking off
            # and readying are two writes otherwise (a hop's round trips, issue 10).
            alone = await self.mover.action(
                child_id, A.READY, by=self.by, sources=[A.WAITING],
                # "Exactly [parent]" in a form nx-27017 also answers (an array literal it refuses).
                where={"pending_parents": {"$all": [action["_id"]], "$size": 1}}, set={"pending_parents": []},
                max=raise_input,
            )  # fmt: skip
            if alone is not None:
                continue
            child = await acts.parent_finished(self.store, child_id, action["_id"], raise_input)
            if child is None or child["state"] != A.WAITING:
                continue
            await self.ready(child_id)

    async def ready(self, action_id: str) -> None:
        """WAITING -> READY once no computed parent is pending: after a parent finished, and
        from the repair sweep for a child a crash left behind."""
        await self.mover.action(
            action_id, A.READY, by=self.by, sources=[A.WAITING], where={"pending_parents": {"$size": 0}}
        )

    async def abandon(self, action_id: str, parent_id: str) -> None:
        """A WAITING action whose parent ended FAILED or KILLED never starts (re-planning
        found it so after the parent's own end had passed the action by)."""
        action = await acts.get(self.store, action_id)
        if action is not None and action["state"] == A.WAITING:
            await self.end(action, A.KILLED, "upstream_failed", f"{parent_id} did not finish", sources=[A.WAITING])

    async def end(
        self, action: ActionDoc, target: ActionState, reason: str, error: str | None = None, *,
        sources: list[ActionState], where: dict[str, Any] | None = None, set: dict[str, Any] | None = None,
        note: str | None = None, cascade: bool = True, by: str | None = None, record: dict[str, Any] | None = None,
    ) -> ActionDoc | None:  # fmt: skip
        """End ``action`` FAILED or KILLED: hand its computation to a follower (if any),
        free what it held, end (KILLED) the descendants that waited on it, then the
        guarded terminal move from ``sources`` (narrowed by ``where``), then its other
        followers follow the successor. Its workflow settles once, after the cascade.
        An attempt in flight leaves its ``record`` (by default one named after ``target``).

        An action flagged by its workflow's kill has no cascade: the kill's bulk writes end
        every live action of that workflow (the repair sweep applies them again until
        ``kill_applied``). Walking its descendants, one read each, kept a killed fan's root
        RUNNING for over a minute on a loaded machine (docs/state-machines.md, "Ending an
        action")."""
        cascade = cascade and not action.get("kill_requested")
        if record is None and action.get("attempt") and {A.SUBMITTED, A.RUNNING} >= {*sources}:
            outcome = attempts.KILLED if target == A.KILLED else attempts.FAILED
            record = acts.attempt_entry(action, outcome, error or reason)
        async with self.mover.batch():
            # Most actions have no follower: one indexed query, and nothing more to do for them.
            followed = bool(await acts.following(self.store, action["_id"]))
            if followed:
                await self.following.elect(action["_id"], reason)
            handed = (await acts.get(self.store, action["_id"], {"job_handed_to": 1}) or {}).get("job_handed_to")
            await self.release(action, reason, keep_attempt=bool(handed))
            if cascade:
                await self.end_descendants(action)
            ended = await self.mover.action(
                action["_id"], target, by=by or self.by, sources=sources, where=where, note=note or reason,
                set={**(set or {}), "finished_at": time.time(), "error": error or reason, "reason": reason},
                push={"attempt_log": record} if record else None,
            )  # fmt: skip
            if ended is not None:
                new = [c for c in ended.get("children", []) if c not in action.get("children", [])]
                if cascade and new:  # children re-planning added meanwhile (the list is final now)
                    await self.end_descendants({**ended, "children": new})
                if followed or ended.get("followers"):  # or registered before its terminal move
                    await self.following.resolve(ended)
            return ended

    async def release(self, action: ActionDoc, reason: str, keep_attempt: bool = False) -> None:
        if action.get("attempt_path") and not keep_attempt:  # a successor's adopted job writes there
            await self.release_attempt(action)
        held, produced = ds.held_by([action])
        await ds.release(self.store, held, produced, self.by, reason)

    async def release_attempt(self, action: ActionDoc) -> None:
        """Remove an ending action's attempt folder, if the storage lets us."""
        try:
            await self.storage.discard(action["attempt_path"], user=action.get("owner"))
        except Exception as exc:
            # The ending must not wait on the storage that may be why it ends (a submit
            # that failed to prepare this folder): what is left is an orphan, and the
            # orphan sweep removes it.
            log.warning("%s: could not remove its attempt folder (%s); the orphan sweep will", action["_id"], exc)

    async def end_descendants(self, action: ActionDoc, reason: str = "upstream_failed") -> None:
        """The computed descendants of an action that failed never start: each ends KILLED.
        All of them are WAITING (their pending parent never finished), and only a kill
        moves a WAITING action otherwise (to KILLED, releasing the same things), so each
        is released before its move, like every ending.

        In bulk where nothing of the workflow may be followed (the mark a follower's
        registration writes first, as a kill reads it): the workflow's actions read once,
        the descendants found in memory, what they held released in one write, and their
        moves made ``CASCADE_CHUNK`` to a write. One by one, each read and ended, a failed
        root of a 10,000-action chain took minutes of store commands (docs/performance.md,
        "A big workflow"). A follower registered meanwhile is listed on its producer's
        move and resolved; one not listed yet, by the repair sweep (as after a kill)."""
        if not action.get("children"):
            return
        workflow_id = action.get("workflow_id") or action["_id"].split(".", 1)[0]
        if await wfs.may_be_followed(self.store, workflow_id):
            await self.end_descendants_one_by_one(action, reason)
            return
        docs = {d["_id"]: d for d in await acts.of_workflow(self.store, workflow_id, CASCADE_FIELDS)}
        victims: list[ActionDoc] = []
        seen: set[str] = set()
        queue = deque(action["children"])
        while queue:
            child_id = queue.popleft()
            if child_id in seen or (child := docs.get(child_id)) is None:
                continue
            seen.add(child_id)
            if child["state"] == A.WAITING:
                victims.append(child)
            queue.extend(child.get("children", []))
        for victim in victims:
            if victim.get("attempt_path"):  # one re-planned after an attempt (rare)
                await self.release_attempt(victim)
        held, produced = ds.held_by(victims)
        await ds.release(self.store, held, produced, self.by, reason)
        ended = {"error": reason, "reason": reason}
        for i in range(0, len(victims), CASCADE_CHUNK):
            moves = [(v["_id"], {}, {**ended, "finished_at": time.time()}) for v in victims[i : i + CASCADE_CHUNK]]
            for moved in await self.mover.actions_each(moves, A.KILLED, source=A.WAITING, by=self.by, note=reason):
                if moved.get("followers"):
                    await self.following.resolve(moved)

    async def end_descendants_one_by_one(self, action: ActionDoc, reason: str) -> None:
        """``end_descendants`` of a workflow others may follow: each descendant read and
        ended on its own (``end``), its followers looked up and elected."""
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
        died before it finished. One applier at a time: it holds the kill's lease while it
        works (a sweep does not apply it a second time meanwhile), and renews it.

        What other workflows follow is handed over first (``hand_over``). Then the actions
        with a job (few) are flagged and their jobs asked to stop at once; the poller (due
        at once) ends them KILLED. Then the actions with no job end KILLED, flagged, in one
        write per state: each action is written once (docs/performance.md, "A big
        workflow"). Then every action still live is flagged, in one write: a flagged action
        is never submitted (the submitter's guard), and the job of one submitted meanwhile
        is stopped by its submitter. Jobs started since the first stop are asked to stop,
        and the actions that slipped into a state with no job meanwhile end KILLED too. What
        the killed actions held is released before their moves are announced, then
        ``kill_applied`` (what the repair keys on) is set last."""
        store, now, token = self.store, time.time(), uuid.uuid4().hex
        first = await wfs.take_kill_lease(store, workflow_id, token, now, now - self.finish_lease)
        if first is None:
            return  # another applier holds it now

        async def renew() -> bool:
            return await wfs.renew_kill_lease(store, workflow_id, token, time.time())

        try:
            async with Heartbeat(renew, max(0.2, self.finish_lease / 4), f"the kill of {workflow_id}"):
                async with self.mover.batch():
                    await self.hand_over(workflow_id)
                    # The actions with a job (few) are flagged and their jobs stopped first, at once.
                    for s in ACTION_IN_FLIGHT:
                        await acts.flag_kill(store, workflow_id, now, state=s)
                    stopped = await self.stop_jobs(workflow_id)
                    # A kill applied again (its first applier died) releases what every KILLED
                    # action held, not only what it moves itself.
                    moved = await self.kill_unstarted(workflow_id, now, every_killed=not first)
                    await acts.flag_kill(store, workflow_id, now)
                    await self.stop_jobs(workflow_id, stopped)
                    moved += await self.kill_unstarted(workflow_id, now)
                    for d in moved:
                        if d.get("followers"):  # a follower not listed yet is resolved by the repair sweep
                            await self.following.resolve(d)
                    await wfs.kill_applied(store, workflow_id)
                    await self.mover.settle(workflow_id)
        finally:
            await wfs.drop_kill_lease(store, workflow_id, token)

    async def kill_unstarted(self, workflow_id: str, now: float, every_killed: bool = False) -> list[ActionDoc]:
        """End KILLED, flagged, every action of the workflow with no job (one write per
        state); what they held is released before the moves' effects. ``every_killed``:
        release what every KILLED action of the workflow held (a kill applied again)."""
        store = self.store

        async def release_killed(moved: list[ActionDoc]) -> None:
            killed = moved
            if every_killed:
                killed = await acts.in_state(
                    store, A.KILLED, workflow_id=workflow_id, fields={"claims": 1, "managed": 1, "hash": 1}
                )
            held, produced = ds.held_by(killed)
            await ds.release(store, held, produced, self.by, "killed")

        return await self.mover.actions_many(
            {"workflow_id": workflow_id}, A.KILLED, by=self.by, sources=list(ACTION_KILLED_IN_BULK), note="killed",
            set={"finished_at": now, "reason": "killed", "error": "killed", "kill_requested": True},
            before_effects=release_killed,
        )  # fmt: skip

    async def hand_over(self, workflow_id: str) -> None:
        """Kill means "this workflow no longer needs it": each computation of the workflow
        that others follow passes to one of them before anything is stopped. A running
        job is adopted as it runs; a computation not started yet (flagged first, so it
        never starts here) is computed by the successor. Children are handed over before
        their parents, so a successor re-planning its inputs follows this workflow's
        running parents, whose jobs are then adopted too."""
        if not await wfs.may_be_followed(self.store, workflow_id):
            return  # nothing to hand over, and its actions need not be read
        docs = await acts.of_workflow(self.store, workflow_id, {"state": 1, "followers": 1})
        # Only actions others follow, and the parents of those handed over (a successor's
        # re-planning may follow them), are read again: a large workflow's kill stays cheap.
        wanted = {d["_id"] for d in docs if d.get("followers") and d["state"] in ACTION_LIVE}
        if not wanted:
            return
        docs = await acts.of_workflow(self.store, workflow_id, {"parents": 1})
        graph = nx.DiGraph()
        graph.add_nodes_from(d["_id"] for d in docs)
        graph.add_edges_from((p, d["_id"]) for d in docs for p in d.get("parents", []))
        parents = {d["_id"]: d.get("parents", []) for d in docs}
        for aid in reversed(list(nx.topological_sort(graph))):  # children first
            if aid not in wanted:
                continue
            action = await acts.get(self.store, aid)
            if action is None or action["state"] not in ACTION_LIVE or not action.get("followers"):
                continue
            wanted.update(parents.get(aid, []))
            if action["state"] in (A.SUBMITTED, A.RUNNING) and action.get("job_id"):
                successor = await self.following.elect(aid, "killed", job_alive=True)
                fresh = await acts.get(self.store, aid)
                if successor and fresh and fresh.get("job_handed_to") == successor:
                    # Not flagged yet, but the kill's bulk writes that follow end its descendants.
                    await self.end(
                        fresh, A.KILLED, "killed", sources=[A.SUBMITTED, A.RUNNING], where={"job_id": fresh["job_id"]},
                        note=f"killed; its job goes on for {successor}", cascade=False,
                    )  # fmt: skip
            elif action["state"] != A.FOLLOWING:
                await acts.flag_kill(self.store, workflow_id, time.time(), action_id=aid)
                await self.following.elect(aid, "killed")

    async def stop_if_killed(self, action: ActionDoc | None, job_id: str) -> None:
        """Stop the job of an action whose workflow is being killed (flagged), or that is
        no longer SUBMITTED when its job id is recorded (``action`` None: killed meanwhile).
        The submitter calls it after recording a job, the poller before each check. A job
        a follower adopted runs on."""
        if action is not None and not action.get("kill_requested"):
            return
        if action is not None and (await acts.get(self.store, action["_id"], {"job_handed_to": 1}) or {}).get(
            "job_handed_to"
        ):
            return
        await self.executor.kill(job_id)

    async def stop_jobs(self, workflow_id: str, stopped: frozenset[str] = frozenset()) -> frozenset[str]:
        """Ask the executor to stop every job of the workflow (but those ``stopped`` already);
        the jobs asked come back."""
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
            for a in await acts.in_state(
                self.store, s, workflow_id=workflow_id, fields={"job_id": 1, "job_handed_to": 1}
            )
            if a.get("job_id")
            and not a.get("job_handed_to")  # an adopted job runs on for its successor
            and a["job_id"] not in stopped
        ]
        await asyncio.gather(*(stop(j) for j in jobs))
        return stopped | frozenset(jobs)
