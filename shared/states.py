"""The state machines of Pingo's three entities, as data.

Every writer moves a document through ``transition()`` in ``shared.store.transitions``,
which refuses any move that is not in these tables. Terminal states have no exits.
"""

from __future__ import annotations

from enum import StrEnum

from shared.errors import PingoError


class ActionState(StrEnum):
    WAITING = "WAITING"
    READY = "READY"
    PROCESSING = "PROCESSING"
    SUBMITTED = "SUBMITTED"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"
    # Not computed in this workflow: its stored output was reused (REUSED), or it only
    # fed actions that reuse theirs (SKIPPED).
    REUSED = "REUSED"
    SKIPPED = "SKIPPED"
    # Its dataset is being computed by a live attempt elsewhere (``follows``): it ends
    # REUSED when that attempt commits, or takes the computation over if it cannot
    # (docs/state-machines.md, "Following a computation in flight").
    FOLLOWING = "FOLLOWING"
    # An attempt failed (or ran past its timeout) and retries remain: READY again at
    # ``retry_at`` (docs/state-machines.md, "Retries and timeouts").
    RETRYING = "RETRYING"


class DatasetState(StrEnum):
    TO_STORE = "TO_STORE"
    TO_LEAF = "TO_LEAF"
    STORED = "STORED"
    LEAF = "LEAF"
    STORED_TO_DELETE = "STORED_TO_DELETE"
    PROCESSING = "PROCESSING"
    DELETING = "DELETING"
    DELETED = "DELETED"
    # Its files were found missing or changed behind Pingo's back: computed again when needed.
    LOST = "LOST"
    # Withdrawn by a user (invalidated, deleted by hand, expired): never reused; computed
    # again when needed, its files deleted once nothing claims it (docs/state-machines.md,
    # "Datasets by hand").
    INVALIDATED = "INVALIDATED"


class WorkflowState(StrEnum):
    PLANNING = "PLANNING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"


A, D, W = ActionState, DatasetState, WorkflowState

# Re-planning inside a workflow (an input found lost, a computation taken over) may send
# an ended action that never ran or whose output is gone back to work.
_REPLANNED = frozenset({A.WAITING, A.READY, A.FOLLOWING})

ACTION_TRANSITIONS: dict[ActionState, frozenset[ActionState]] = {
    A.WAITING: frozenset({A.READY, A.KILLED}),
    # READY -> PROCESSING is the scraper's claim; PROCESSING -> PROCESSING retakes a stale one.
    # READY -> SUBMITTED: an action manager woken by the READY event claims the attempt
    # itself, in one write (docs/state-machines.md, "Action").
    # READY -> REUSED: cut off early, a parent's output being an earlier lineage's twin
    # (docs/planning.md, "Early cutoff").
    A.READY: frozenset({A.PROCESSING, A.SUBMITTED, A.REUSED, A.KILLED}),
    # PROCESSING -> WAITING: an input vanished before the start; its producer runs again first.
    A.PROCESSING: frozenset({A.PROCESSING, A.SUBMITTED, A.READY, A.WAITING, A.FAILED, A.KILLED}),
    # SUBMITTED -> READY is a submit error below the retry ceiling; FAILED above it.
    # -> RETRYING: the job failed or timed out and the action's retries allow another attempt.
    # -> WAITING: claimed from READY, an input was found gone before its job existed.
    A.SUBMITTED: frozenset({A.RUNNING, A.READY, A.WAITING, A.FINISHED, A.FAILED, A.KILLED, A.RETRYING}),
    A.RUNNING: frozenset({A.FINISHED, A.FAILED, A.KILLED, A.RETRYING}),
    # Its retry is due (READY), or its workflow is killed while it waits (KILLED).
    A.RETRYING: frozenset({A.READY, A.KILLED}),
    # FOLLOWING -> FOLLOWING follows the producer that took over; -> SUBMITTED/RUNNING
    # adopts the job of a producer whose workflow no longer needs it; -> WAITING/READY
    # computes it (takeover); -> FAILED when the computation itself failed too often.
    A.FOLLOWING: frozenset({A.REUSED, A.FOLLOWING, A.SUBMITTED, A.RUNNING, A.WAITING, A.READY, A.FAILED, A.KILLED}),
    A.FINISHED: _REPLANNED,
    A.FAILED: frozenset(),
    A.KILLED: frozenset(),
    A.REUSED: _REPLANNED,
    A.SKIPPED: _REPLANNED | {A.REUSED},
}
ACTION_INITIAL = frozenset({A.WAITING, A.READY, A.REUSED, A.SKIPPED, A.FOLLOWING})
# Ended: nothing moves them on their own. FINISHED, REUSED and SKIPPED are reopened only
# by re-planning for a live action of the same workflow that needs their output.
ACTION_TERMINAL = frozenset({A.FINISHED, A.FAILED, A.KILLED, A.REUSED, A.SKIPPED})
ACTION_LIVE = frozenset(s for s in ActionState if s not in ACTION_TERMINAL)
# Ended states with exits: only re-planning reopens them (FINISHED, REUSED, SKIPPED).
ACTION_REOPENABLE = frozenset(s for s, nxt in ACTION_TRANSITIONS.items() if s in ACTION_TERMINAL and nxt)
ACTION_IN_FLIGHT = frozenset({A.PROCESSING, A.SUBMITTED, A.RUNNING})
# States of an action that has no job: a kill or a failed parent ends them directly.
ACTION_NO_JOB = (A.WAITING, A.READY, A.PROCESSING, A.RETRYING)
# What a workflow's kill ends in bulk: no job, or only another's job to wait for.
ACTION_KILLED_IN_BULK = (*ACTION_NO_JOB, A.FOLLOWING)

DATASET_TRANSITIONS: dict[DatasetState, frozenset[DatasetState]] = {
    # A second workflow computing the same hash as a leaf promotes TO_STORE to TO_LEAF.
    D.TO_STORE: frozenset({D.TO_LEAF, D.STORED, D.LEAF, D.DELETED}),
    D.TO_LEAF: frozenset({D.LEAF, D.DELETED}),
    # STORED -> STORED re-records size/time after a forced recomputation.
    D.STORED: frozenset({D.STORED, D.LEAF, D.STORED_TO_DELETE, D.LOST, D.INVALIDATED}),
    # A leaf is never deleted by Pingo's own choice; its files may still be lost, a user
    # may withdraw it (INVALIDATED), and the retention policy, when on, makes an unused
    # one an ordinary STORED candidate (DATASET_BY_POLICY).
    D.LEAF: frozenset({D.LEAF, D.LOST, D.INVALIDATED, D.STORED}),
    # A marked dataset whose file is still whole can be taken back by a planner that
    # wants it (revive), instead of being deleted and computed again.
    D.STORED_TO_DELETE: frozenset({D.PROCESSING, D.STORED, D.LEAF, D.LOST, D.INVALIDATED}),
    D.PROCESSING: frozenset({D.PROCESSING, D.DELETING, D.STORED_TO_DELETE, D.STORED, D.LEAF}),
    # DELETING -> INVALIDATED: removing a withdrawn dataset's files failed; tried again later.
    D.DELETING: frozenset({D.DELETING, D.DELETED, D.STORED_TO_DELETE, D.INVALIDATED}),
    D.DELETED: frozenset({D.TO_STORE, D.TO_LEAF, D.STORED, D.LEAF}),
    D.LOST: frozenset({D.TO_STORE, D.TO_LEAF}),
    # Computed again by a planner (its commit replaces the old files), or, once nothing
    # claims it, taken straight to DELETING by a dataset manager: never through
    # STORED_TO_DELETE or PROCESSING, which a planner may revive.
    D.INVALIDATED: frozenset({D.TO_STORE, D.TO_LEAF, D.DELETING}),
}
# Moves only a user makes, through the API (owner or admin): withdrawing a dataset
# (invalidate, delete; an expiry date they set is applied by the dataset manager).
DATASET_BY_HAND = frozenset({(D.STORED, D.INVALIDATED), (D.LEAF, D.INVALIDATED), (D.STORED_TO_DELETE, D.INVALIDATED)})
# Moves of a policy that is off by default: the retention of final outputs
# (PINGO_LEAF_RETENTION_DAYS) makes a leaf unused for that long an ordinary STORED dataset.
DATASET_BY_POLICY = frozenset({(D.LEAF, D.STORED)})
# What a user may withdraw: its files are whole and no producer is writing them.
DATASET_WITHDRAWABLE = frozenset(s for s, t in DATASET_BY_HAND)
DATASET_INITIAL = frozenset({D.TO_STORE, D.TO_LEAF})
# Datasets whose file is whole and may be read by a new workflow.
DATASET_REUSABLE = frozenset({D.STORED, D.LEAF, D.STORED_TO_DELETE, D.PROCESSING})
# Being computed by a live attempt: a new claimant may follow the computation.
DATASET_IN_FLIGHT = frozenset({D.TO_STORE, D.TO_LEAF})
# What holds bytes in storage: committed and not deleted yet.
DATASET_HELD = (D.STORED, D.LEAF, D.STORED_TO_DELETE, D.PROCESSING, D.DELETING, D.INVALIDATED)
# Its files are being deleted right now: a new output is committed after they are gone.
DATASET_BEING_DELETED = frozenset({D.PROCESSING, D.DELETING})
# Already out of reuse: deleting or invalidating one by hand changes nothing.
DATASET_OUT_OF_REUSE = frozenset({D.INVALIDATED, D.DELETED, D.DELETING, D.LOST})

WORKFLOW_TRANSITIONS: dict[WorkflowState, frozenset[WorkflowState]] = {
    W.PLANNING: frozenset({W.RUNNING, W.SUCCEEDED, W.FAILED}),
    W.RUNNING: frozenset({W.SUCCEEDED, W.FAILED, W.KILLED}),
    W.SUCCEEDED: frozenset(),
    W.FAILED: frozenset(),
    W.KILLED: frozenset(),
}
WORKFLOW_TERMINAL = frozenset(s for s, nxt in WORKFLOW_TRANSITIONS.items() if not nxt)

TABLES = {"action": ACTION_TRANSITIONS, "dataset": DATASET_TRANSITIONS, "workflow": WORKFLOW_TRANSITIONS}


class IllegalTransition(PingoError, ValueError):
    pass


def sources_for(table: dict, target: str) -> list[str]:
    """Every state from which ``target`` may be reached in ``table``."""
    return sorted(str(s) for s, nxt in table.items() if target in nxt)


def check(table: dict, source: str, target: str) -> None:
    if target not in table.get(source, ()):
        raise IllegalTransition(f"{source} -> {target} is not an allowed transition")
