"""The effects tables: every effect hangs on a move the state machines allow, and the
moves integrators rely on announce what docs/state-machines.md says."""

from __future__ import annotations

import pytest

from shared.events import EventType
from shared.lifecycle.effects import TABLES, effects_of
from shared.states import TABLES as TRANSITIONS
from shared.states import ActionState, DatasetState, WorkflowState, sources_for

A, D, W = ActionState, DatasetState, WorkflowState


@pytest.mark.parametrize("entity", sorted(TABLES))
def test_every_effect_hangs_on_an_allowed_move(entity: str) -> None:
    table = TRANSITIONS[entity]
    for target, effects in TABLES[entity].items():
        allowed = set(sources_for(table, target))
        assert allowed, f"{entity}: nothing moves to {target}"
        for effect in effects:
            if effect.after is not None:
                assert effect.after <= allowed, f"{entity} {sorted(effect.after)} -> {target} is not a move"


def events(entity: str, source: str | None, target: str) -> list[EventType]:
    return [t for e in effects_of(entity, source, target) for t, _ in e.events]


def test_each_end_of_an_action_is_announced_counted_and_settles_its_workflow() -> None:
    for target, event in ((A.FINISHED, EventType.ACTION_FINISHED), (A.FAILED, EventType.ACTION_FAILED),
                          (A.KILLED, EventType.ACTION_KILLED)):  # fmt: skip
        (effect,) = effects_of("action", A.RUNNING, target)
        assert event in [t for t, _ in effect.events]
        assert effect.settle
        assert effect.counters is not None or effect.failure


def test_a_managed_output_is_announced_stored_and_an_unmanaged_one_is_not() -> None:
    (effect,) = effects_of("action", A.RUNNING, A.FINISHED)
    payloads = {t: f for t, f in effect.events}
    assert payloads[EventType.DATASET_STORED]({"managed": True, "size": 5}) == {"size": 5}
    assert payloads[EventType.DATASET_STORED]({"managed": False, "size": 5}) is None


def test_a_planned_ready_action_wakes_the_action_managers_like_a_readied_one() -> None:
    assert events("action", None, A.READY) == events("action", A.WAITING, A.READY) == [EventType.ACTION_READY]


def test_only_a_real_deletion_is_announced_and_counted() -> None:
    assert events("dataset", D.DELETING, D.DELETED) == [EventType.DATASET_DELETED]
    # A dataset whose producer failed before it existed was never stored: nothing to announce.
    assert events("dataset", D.TO_STORE, D.DELETED) == []
    assert events("dataset", D.STORED, D.STORED_TO_DELETE) == [EventType.DATASET_MARKED]
    assert events("dataset", D.DELETING, D.STORED_TO_DELETE) == []
    # Files found gone behind Pingo's back are announced as lost, whatever state they were in.
    for state in (D.STORED, D.LEAF, D.STORED_TO_DELETE):
        assert events("dataset", state, D.LOST) == [EventType.DATASET_LOST]


def test_workflow_submission_and_end_events() -> None:
    assert events("workflow", W.PLANNING, W.RUNNING) == [EventType.WORKFLOW_SUBMITTED]
    assert events("workflow", W.PLANNING, W.SUCCEEDED) == [EventType.WORKFLOW_SUBMITTED, EventType.WORKFLOW_FINISHED]
    assert events("workflow", W.RUNNING, W.SUCCEEDED) == [EventType.WORKFLOW_FINISHED]
    assert events("workflow", W.RUNNING, W.KILLED) == [EventType.WORKFLOW_FINISHED]
    # An undone planning was never submitted as far as anyone outside can tell.
    assert events("workflow", W.PLANNING, W.FAILED) == []
