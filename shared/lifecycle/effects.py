"""What each state move causes, as data: one table per entity (docs/state-machines.md,
"Effects of a move").

The transition tables in ``shared.states`` say which moves exist; these say what follows
a move that won its guarded write: the event integrators and the other services see,
the counters of the usage statistics, and whether the action's workflow may have ended
(settle). ``shared.lifecycle.moves.Mover`` is the only code that applies them, so no
writer can forget one. A document created in a state (the planner's READY actions)
has the effects of arriving in it.

Each target state lists its effects; an effect applies after a move from any state,
unless ``after`` narrows it to the states the document was moved from (None: created).

Each event type has one payload function, reading the moved document only (no store
read on the way): ``PAYLOAD_OF``; its shape is the type's model in ``shared.events``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.events import EventType
from shared.lifecycle import reserving
from shared.states import ACTION_REOPENABLE, DATASET_WITHDRAWABLE, ActionState, DatasetState, WorkflowState

A, D, W = ActionState, DatasetState, WorkflowState
Doc = dict[str, Any]


@dataclass(frozen=True)
class Effect:
    # Events published, each with its payload read from the moved document; an event
    # whose payload function answers None is not published (DATASET_STORED for an
    # unmanaged output).
    events: tuple[tuple[EventType, Callable[[Doc], dict[str, Any] | None]], ...] = ()
    # Applied after the documents created with the move (a workflow's planned actions)
    # had the effects of arriving: a workflow planned with nothing to compute announces
    # its end after every action's outcome.
    after_arrivals: bool = False
    # Usage-statistics counters added at the document's ``at`` time; ``failure`` counts
    # one failure with the document's reason.
    counters: Callable[[Doc], dict[str, float]] | None = None
    failure: bool = False
    # The counters are held in the workflow's document, written with its count of live
    # actions (one write), and added to the statistics when it settles: an action's end
    # on a chain pays no statistics write (docs/performance.md, "A chain's hop").
    held: bool = False
    at: str = "updated_at"
    # The action's workflow may have ended: settle it.
    settle: bool = False
    after: frozenset[str] | None = None
    # How the move changes its workflow's count of live actions (``open_actions``): -1
    # when an action ends, +1 when re-planning reopens one. Settling reads the count, so
    # an action's end costs O(1), not a read of the whole workflow.
    open_delta: int = 0

    def applies(self, source: str | None) -> bool:
        return self.after is None or source in self.after


# -- payloads (their models: shared.events.PAYLOADS) ------------------------------------


def _action(d: Doc) -> dict[str, Any]:
    """What every action event says about the action."""
    return {
        "name": d.get("name"), "local_id": d.get("local_id"), "state": d.get("state"),
        "output_path": d.get("output_path"), "managed": d.get("managed"), "reason": d.get("reason"),
        "attempt": d.get("attempt"),
    }  # fmt: skip


def _ready_action(d: Doc) -> dict[str, Any]:
    # What its start reserves, worked out at planning, so the claim on this event reads
    # nothing (None: not worked out, the claim reads the action; shared.lifecycle.reserving).
    # One that may be cut off early (its planning recorded it: misses.Miss.may_be_cut_off) says
    # None too: its claim reads it to look (shared.lifecycle.cutoff),
    # and so does one whose planning knew no size (a first run: its start works it out),
    # and one with a timeout, whose claim records its first check (starting.attempt_fields).
    if d.get("timeout_seconds"):
        return {**_action(d), "reserve_bytes": None}
    if not d.get("managed"):
        return {**_action(d), "reserve_bytes": 0}
    reserve = reserving.start_bytes(d)
    if reserve is None or d.get("cutoff_candidate"):
        return {**_action(d), "reserve_bytes": None}
    return {**_action(d), "reserve_bytes": reserve}


def _submitted_action(d: Doc) -> dict[str, Any]:
    return {**_action(d), "job_id": d.get("job_id"), "executor": d.get("executor")}


def _started_at(d: Doc) -> float | None:
    """When the current attempt's job started: its entry in ``attempt_log`` once it ended
    (``started_at`` may be an earlier attempt's), else ``started_at``."""
    log = d.get("attempt_log") or []
    last = log[-1] if log and isinstance(log[-1], dict) else {}
    if last and last.get("attempt") == d.get("attempt"):
        return last.get("started_at")
    return d.get("started_at")


def _running(d: Doc) -> dict[str, Any]:
    return {**_action(d), "started_at": _started_at(d)}


def _ran_unseen(d: Doc) -> dict[str, Any] | None:
    """A job that ended before a poll or a notification saw it running still ran: its
    end announces the start too (with its time), unless it never started."""
    return _running(d) if _started_at(d) is not None else None


def _retrying(d: Doc) -> dict[str, Any]:
    return {
        **_action(d), "failed_attempts": d.get("failed_attempts"), "retry_at": d.get("retry_at"),
        "error": d.get("error"),
    }  # fmt: skip


def _finished(d: Doc) -> dict[str, Any]:
    return {
        **_action(d), "size": d.get("size"), "seconds": d.get("seconds"), "started_at": d.get("started_at"),
        "ended_at": d.get("ended_at"),
    }  # fmt: skip


def _ended(d: Doc) -> dict[str, Any]:
    return {**_action(d), "error": d.get("error")}


def _following(d: Doc) -> dict[str, Any]:
    return {**_action(d), "follows": d.get("follows")}


def _reused(d: Doc) -> dict[str, Any]:
    return {**_action(d), "follows": d.get("follows"), "size": d.get("size"), "saved_seconds": d.get("saved_seconds")}


def _skipped(d: Doc) -> dict[str, Any]:
    return {**_action(d), "saved_seconds": d.get("saved_seconds")}


def _stored(d: Doc) -> dict[str, Any] | None:
    """From the action that computed it; an unmanaged output is no dataset."""
    if not d.get("managed"):
        return None
    return {"path": d.get("output_path"), "size": d.get("size"), "seconds": d.get("seconds"), "action": d.get("name")}


def _marked(d: Doc) -> dict[str, Any]:
    mark = d.get("mark") or {}
    return {
        "path": d.get("path"), "size": d.get("size"), "algorithm": d.get("marked_by"),
        "reason": mark.get("reason") or "over_threshold", "rank": mark.get("rank"),
        "usage_bytes": mark.get("usage_bytes"), "capacity_bytes": mark.get("capacity_bytes"),
        "to_free_bytes": mark.get("to_free_bytes"),
    }  # fmt: skip


def _withdrawn(d: Doc) -> dict[str, Any]:
    """A user withdrew it (docs/api.md, "Datasets by hand"): marked for deletion by hand."""
    return {
        "path": d.get("path"), "size": d.get("size"), "algorithm": None,
        "reason": (d.get("withdrawn") or {}).get("reason") or "invalidated", "rank": None, "usage_bytes": None,
        "capacity_bytes": None, "to_free_bytes": None,
    }  # fmt: skip


def _deleted(d: Doc) -> dict[str, Any]:
    return {"path": d.get("path"), "size": d.get("size")}


def _lost(d: Doc) -> dict[str, Any]:
    return {
        "path": d.get("path"),
        "size": d.get("size"),
        "found_size": d.get("found_size"),
        "reason": d.get("lost_reason"),
    }


def _workflow_submitted(d: Doc) -> dict[str, Any]:
    counts, planned = d.get("counts") or {}, d.get("planned") or {}
    return {
        "name": d.get("name"), "state": d["state"], "actions": int(d.get("action_count") or 0),
        **{k: int(counts.get(k) or 0) for k in ("compute", "reuse", "follow")},
        "reused": int(planned.get("actions_reused") or 0), "skipped": int(planned.get("actions_skipped") or 0),
        "saved_seconds": float(planned.get("saved_seconds") or 0.0),
    }  # fmt: skip


def _workflow_finished(d: Doc) -> dict[str, Any]:
    """Its end, with how its actions ended (``outcome``, written with the move)."""
    outcome = d.get("outcome") or {}
    start, end = d.get("created_at"), d.get("finished_at")
    return {
        "name": d.get("name"), "state": d["state"],
        "seconds": max(0.0, end - start) if start is not None and end is not None else None,
        **{k: int(outcome.get(k) or 0) for k in ("finished", "reused", "skipped", "failed", "killed")},
    }  # fmt: skip


PAYLOAD_OF: dict[EventType, Callable[[Doc], dict[str, Any] | None]] = {
    EventType.WORKFLOW_SUBMITTED: _workflow_submitted,
    EventType.ACTION_READY: _ready_action,
    EventType.ACTION_SUBMITTED: _submitted_action,
    EventType.ACTION_RUNNING: _running,
    EventType.ACTION_RETRYING: _retrying,
    EventType.ACTION_FINISHED: _finished,
    EventType.ACTION_FAILED: _ended,
    EventType.ACTION_KILLED: _ended,
    EventType.ACTION_FOLLOWING: _following,
    EventType.ACTION_REUSED: _reused,
    EventType.ACTION_SKIPPED: _skipped,
    EventType.DATASET_STORED: _stored,
    EventType.DATASET_MARKED: _marked,
    EventType.DATASET_DELETED: _deleted,
    EventType.DATASET_LOST: _lost,
    EventType.WORKFLOW_FINISHED: _workflow_finished,
}


def _events(*types: EventType) -> tuple[tuple[EventType, Callable[[Doc], dict[str, Any] | None]], ...]:
    return tuple((t, PAYLOAD_OF[t]) for t in types)


# The job ended before anyone saw it running: announced with its end, first.
_RAN_UNSEEN = Effect(events=((EventType.ACTION_RUNNING, _ran_unseen),), after=frozenset({ActionState.SUBMITTED}))


_REOPEN = Effect(open_delta=1, after=ACTION_REOPENABLE)


def _computed(d: Doc) -> dict[str, float]:
    return {
        "actions_computed": 1, "compute_seconds": d.get("seconds") or 0.0, "bytes_written": d.get("size") or 0,
        # A recomputation whose output differs from its lineage's last (docs/planning.md, "Determinism audit").
        "actions_nondeterministic": 1 if d.get("nondeterministic") else 0,
    }  # fmt: skip


def _cut_off(d: Doc) -> dict[str, float]:
    """A reuse found at its start (docs/planning.md, "Early cutoff"), counted as one too."""
    return {"actions_reused": 1, "actions_cut_off": 1, "saved_seconds": d.get("saved_seconds") or 0.0}


ACTION_EFFECTS: dict[ActionState, tuple[Effect, ...]] = {
    A.READY: (Effect(events=_events(EventType.ACTION_READY)), _REOPEN),
    A.WAITING: (_REOPEN,),
    A.RUNNING: (Effect(events=_events(EventType.ACTION_RUNNING)),),
    # An attempt failed and another is due at ``retry_at``: not an end, nothing counted.
    A.RETRYING: (_RAN_UNSEEN, Effect(events=_events(EventType.ACTION_RETRYING))),
    A.FINISHED: (
        _RAN_UNSEEN,
        Effect(
            events=_events(EventType.ACTION_FINISHED, EventType.DATASET_STORED),
            counters=_computed,
            at="finished_at",
            settle=True,
            open_delta=-1,
            held=True,
        ),
    ),
    A.FAILED: (
        _RAN_UNSEEN,
        Effect(events=_events(EventType.ACTION_FAILED), failure=True, at="finished_at", settle=True, open_delta=-1),
    ),
    A.KILLED: (
        _RAN_UNSEEN,
        Effect(events=_events(EventType.ACTION_KILLED), failure=True, at="finished_at", settle=True, open_delta=-1),
    ),
    # Planned or re-planned to follow a computation in flight, or moved to the successor.
    A.FOLLOWING: (Effect(events=_events(EventType.ACTION_FOLLOWING)), _REOPEN),
    # Every way to REUSED is announced: planned so (its stored output), re-planned from
    # SKIPPED (its output is read after all), the computation it followed committed, or cut
    # off early at its start. The last two are counted here and may end its workflow;
    # planned REUSED actions are counted with their submission.
    A.REUSED: (
        Effect(events=_events(EventType.ACTION_REUSED)),
        Effect(
            counters=lambda d: {"actions_reused": 1, "saved_seconds": d.get("saved_seconds") or 0.0},
            at="finished_at",
            settle=True,
            after=frozenset({A.FOLLOWING}),
            open_delta=-1,
        ),
        # docs/planning.md, "Early cutoff": READY -> REUSED is only ever a cutoff.
        Effect(
            counters=_cut_off,
            at="finished_at",
            settle=True,
            after=frozenset({A.READY}),
            open_delta=-1,
        ),
    ),
    # Only ever planned so (it fed only actions that reuse their outputs).
    A.SKIPPED: (Effect(events=_events(EventType.ACTION_SKIPPED)),),
}

DATASET_EFFECTS: dict[DatasetState, tuple[Effect, ...]] = {
    # Marked by the decision service (not taken back after a deletion that failed).
    D.STORED_TO_DELETE: (Effect(events=_events(EventType.DATASET_MARKED), after=frozenset({D.STORED})),),
    # Deleted from storage (not abandoned by its last producer before it ever existed).
    D.DELETED: (
        Effect(
            events=_events(EventType.DATASET_DELETED),
            counters=lambda d: {"bytes_deleted": int(d.get("size") or 0)},
            after=frozenset({D.DELETING}),
        ),
    ),
    # Its files were found missing or changed: it will be computed again.
    D.LOST: (Effect(events=_events(EventType.DATASET_LOST)),),
    # Withdrawn by a user (invalidated, deleted by hand, expired): announced as marked, with
    # its reason, which also wakes the dataset managers that delete it once unclaimed (not
    # announced again when a failed deletion hands it back).
    D.INVALIDATED: (Effect(events=((EventType.DATASET_MARKED, _withdrawn),), after=DATASET_WITHDRAWABLE),),
}


PLANNED_COUNTERS = ("actions_reused", "actions_skipped", "saved_seconds", "saved_others_seconds")


def _submitted(d: Doc) -> dict[str, float]:
    planned = d.get("planned") or {}
    return {
        "workflows_submitted": 1,
        **{k: planned.get(k, 0) for k in PLANNED_COUNTERS},
    }


_PLANNED = frozenset({W.PLANNING})
_RAN = frozenset({W.RUNNING})
_ENDED = Effect(events=_events(EventType.WORKFLOW_FINISHED), after=_PLANNED | _RAN, after_arrivals=True)

WORKFLOW_EFFECTS: dict[WorkflowState, tuple[Effect, ...]] = {
    # Planned, with actions to compute. A planning undone (PLANNING -> FAILED) was never
    # submitted as far as anyone outside can tell: no effect.
    W.RUNNING: (
        Effect(events=_events(EventType.WORKFLOW_SUBMITTED), counters=_submitted, at="created_at", after=_PLANNED),
    ),
    W.SUCCEEDED: (
        # Planned with everything reused: submitted, its actions' outcomes, then its end.
        Effect(events=_events(EventType.WORKFLOW_SUBMITTED), counters=_submitted, at="created_at", after=_PLANNED),
        _ENDED,
    ),
    W.FAILED: (Effect(events=_events(EventType.WORKFLOW_FINISHED), after=_RAN),),
    W.KILLED: (Effect(events=_events(EventType.WORKFLOW_FINISHED), after=_RAN),),
}

EFFECTS: dict[str, dict[Any, tuple[Effect, ...]]] = {
    "action": ACTION_EFFECTS,
    "dataset": DATASET_EFFECTS,
    "workflow": WORKFLOW_EFFECTS,
}


def effects_of(entity: str, source: str | None, target: str) -> list[Effect]:
    """The effects of moving an ``entity`` from ``source`` (None: created) to ``target``."""
    return [e for e in EFFECTS[entity].get(target, ()) if e.applies(source)]  # type: ignore[call-overload]
