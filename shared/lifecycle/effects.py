"""What each state move causes, as data: one table per entity (docs/state-machines.md,
"Effects of a move").

The transition tables in ``shared.states`` say which moves exist; these say what follows
a move that won its guarded write: the event integrators and the other services see,
the counters of the usage statistics, and whether the action's workflow may have ended
(settle). ``shared.lifecycle.moves.Mover`` is the only code that applies them, so no
writer can forget one. A document created in a state (the planner's READY actions)
has the effects of arriving in it.

Each target state lists its effects; an effect applies after a move from any state,
unless ``after`` narrows it to the states the document was moved from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.events import EventType
from shared.states import ACTION_REOPENABLE, ActionState, DatasetState, WorkflowState

A, D, W = ActionState, DatasetState, WorkflowState
Doc = dict[str, Any]


def _none(_: Doc) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Effect:
    # Events published, each with its payload read from the moved document; an event
    # whose payload function answers None is not published (DATASET_STORED for an
    # unmanaged output).
    events: tuple[tuple[EventType, Callable[[Doc], dict[str, Any] | None]], ...] = ()
    # Usage-statistics counters added at the document's ``at`` time; ``failure`` counts
    # one failure with the document's reason.
    counters: Callable[[Doc], dict[str, float]] | None = None
    failure: bool = False
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


def _ended(d: Doc) -> dict[str, Any]:
    return {"error": d.get("error"), "reason": d.get("reason")}


_REOPEN = Effect(open_delta=1, after=ACTION_REOPENABLE)


def _computed(d: Doc) -> dict[str, float]:
    return {"actions_computed": 1, "compute_seconds": d.get("seconds") or 0.0, "bytes_written": d.get("size") or 0}


ACTION_EFFECTS: dict[ActionState, tuple[Effect, ...]] = {
    A.READY: (Effect(events=((EventType.ACTION_READY, _none),)), _REOPEN),
    A.WAITING: (_REOPEN,),
    A.RUNNING: (Effect(events=((EventType.ACTION_RUNNING, _none),)),),
    A.FINISHED: (
        Effect(
            events=(
                (EventType.ACTION_FINISHED, lambda d: {"size": d.get("size"), "seconds": d.get("seconds")}),
                (EventType.DATASET_STORED, lambda d: {"size": d.get("size")} if d.get("managed") else None),
            ),
            counters=_computed,
            at="finished_at",
            settle=True,
            open_delta=-1,
        ),
    ),
    A.FAILED: (
        Effect(events=((EventType.ACTION_FAILED, _ended),), failure=True, at="finished_at", settle=True, open_delta=-1),
    ),
    A.KILLED: (
        Effect(events=((EventType.ACTION_KILLED, _ended),), failure=True, at="finished_at", settle=True, open_delta=-1),
    ),
    # Planned or re-planned to follow a computation in flight, or moved to the successor.
    A.FOLLOWING: (Effect(events=((EventType.ACTION_FOLLOWING, lambda d: {"follows": d.get("follows")}),)), _REOPEN),
    # The computation it followed committed: reused, counted as such, and its workflow
    # may have ended. (Planned REUSED actions are counted with their submission.)
    A.REUSED: (
        Effect(
            events=((EventType.ACTION_REUSED, lambda d: {"follows": d.get("follows"), "size": d.get("size")}),),
            counters=lambda d: {"actions_reused": 1, "saved_seconds": d.get("saved_seconds") or 0.0},
            at="finished_at",
            settle=True,
            after=frozenset({A.FOLLOWING}),
            open_delta=-1,
        ),
    ),
}

DATASET_EFFECTS: dict[DatasetState, tuple[Effect, ...]] = {
    # Marked by the decision service (not taken back after a deletion that failed).
    D.STORED_TO_DELETE: (
        Effect(events=((EventType.DATASET_MARKED, lambda d: {"size": d.get("size")}),), after=frozenset({D.STORED})),
    ),
    # Deleted from storage (not abandoned by its last producer before it ever existed).
    D.DELETED: (
        Effect(
            events=((EventType.DATASET_DELETED, lambda d: {"size": d.get("size"), "path": d.get("path")}),),
            counters=lambda d: {"bytes_deleted": int(d.get("size") or 0)},
            after=frozenset({D.DELETING}),
        ),
    ),
    # Its files were found missing or changed: it will be computed again.
    D.LOST: (
        Effect(
            events=(
                (
                    EventType.DATASET_LOST,
                    lambda d: {
                        "path": d.get("path"),
                        "size": d.get("size"),
                        "found_size": d.get("found_size"),
                        "reason": d.get("lost_reason"),
                    },
                ),
            ),
        ),
    ),
}


def _submitted(d: Doc) -> dict[str, float]:
    planned = d.get("planned") or {}
    return {
        "workflows_submitted": 1,
        **{k: planned.get(k, 0) for k in ("actions_reused", "actions_skipped", "saved_seconds")},
    }


_SUBMITTED = (EventType.WORKFLOW_SUBMITTED, lambda d: d.get("counts") or {})
_FINISHED = (EventType.WORKFLOW_FINISHED, lambda d: {"state": d["state"]})
_PLANNED = frozenset({W.PLANNING})
_RAN = frozenset({W.RUNNING})

WORKFLOW_EFFECTS: dict[WorkflowState, tuple[Effect, ...]] = {
    # Planned, with actions to compute. A planning undone (PLANNING -> FAILED) was never
    # submitted as far as anyone outside can tell: no effect.
    W.RUNNING: (Effect(events=(_SUBMITTED,), counters=_submitted, at="created_at", after=_PLANNED),),
    W.SUCCEEDED: (
        # Planned with everything reused: submitted and finished at once.
        Effect(events=(_SUBMITTED, _FINISHED), counters=_submitted, at="created_at", after=_PLANNED),
        Effect(events=(_FINISHED,), after=_RAN),
    ),
    W.FAILED: (Effect(events=(_FINISHED,), after=_RAN),),
    W.KILLED: (Effect(events=(_FINISHED,), after=_RAN),),
}

TABLES: dict[str, dict[Any, tuple[Effect, ...]]] = {
    "action": ACTION_EFFECTS,
    "dataset": DATASET_EFFECTS,
    "workflow": WORKFLOW_EFFECTS,
}


def effects_of(entity: str, source: str | None, target: str) -> list[Effect]:
    """The effects of moving an ``entity`` from ``source`` (None: created) to ``target``."""
    return [e for e in TABLES[entity].get(target, ()) if e.applies(source)]  # type: ignore[call-overload]
