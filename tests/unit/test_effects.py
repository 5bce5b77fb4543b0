"""The effects tables: every effect hangs on a move the state machines allow, and the
moves integrators rely on announce what docs/state-machines.md says."""

from __future__ import annotations

import pytest

from shared.events import PAYLOADS, Event, EventType
from shared.lifecycle.effects import EFFECTS as TABLES
from shared.lifecycle.effects import PAYLOAD_OF, effects_of
from shared.lifecycle.misses import NEVER, Against, Miss
from shared.lineage_diff import PARENT, Change
from shared.states import ACTION_INITIAL, DATASET_INITIAL, ActionState, DatasetState, WorkflowState, sources_for
from shared.states import TABLES as TRANSITIONS

A, D, W = ActionState, DatasetState, WorkflowState
# States a document may be created in: their effects are those of arriving there.
INITIAL = {"action": ACTION_INITIAL, "dataset": DATASET_INITIAL, "workflow": frozenset({W.PLANNING})}


@pytest.mark.parametrize("entity", sorted(TABLES))
def test_every_effect_hangs_on_an_allowed_move(entity: str) -> None:
    table = TRANSITIONS[entity]
    for target, effects in TABLES[entity].items():
        allowed: set[str | None] = set(sources_for(table, target))
        if target in INITIAL[entity]:
            allowed.add(None)
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
    stored = payloads[EventType.DATASET_STORED]({"managed": True, "size": 5, "output_path": "/o/h", "name": "a"})
    assert stored == {"path": "/o/h", "size": 5, "seconds": None, "action": "a"}
    assert payloads[EventType.DATASET_STORED]({"managed": False, "size": 5}) is None


def test_a_planned_ready_action_wakes_the_action_managers_like_a_readied_one() -> None:
    assert events("action", None, A.READY) == events("action", A.WAITING, A.READY) == [EventType.ACTION_READY]


def test_a_ready_event_leaves_the_reservation_to_the_claim_exactly_when_early_cutoff_looks() -> None:
    ready = PAYLOAD_OF[EventType.ACTION_READY]
    earlier = Against("wf-0", "wf-0.b", "h1", "STORED")
    parent_changed = Miss("parent a", [Change(PARENT, "p1", "p2", parent="a")], earlier)
    own_change = Miss("command", [Change("command", "x", "y")], earlier)
    recomputed = Miss("same lineage", [], Against("wf-0", "wf-0.b", "h2", "LOST"))  # its output gone since
    for miss, looks in ((Miss(NEVER), False), (own_change, False), (parent_changed, True), (recomputed, True)):
        # Asked once, at planning (the planner records the answer on the action) ...
        assert miss.may_be_cut_off("h2") is looks
        action = {"managed": True, "hash": "h2", "reserve_bytes": 7, **({"cutoff_candidate": True} if looks else {})}
        # ... and the claim reads the action (reserve_bytes None) only when it will look for a cutoff.
        assert ready(action)["reserve_bytes"] == (None if looks else 7)


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


# A document as the moves hand it to the payload functions, with every field they read.
FULL = {
    "_id": "wf-1.a", "workflow_id": "wf-1", "local_id": "a", "name": "clean", "state": "FINISHED", "hash": "h",
    "output_path": "/data/h", "managed": True, "reason": "not_stored", "attempt": 1, "job_id": "j1",
    "executor": "local", "started_at": 10.0, "ended_at": 12.5, "finished_at": 12.6, "size": 4096, "seconds": 2.5,
    "error": None, "follows": None, "saved_seconds": 0.0, "failed_attempts": 0, "retry_at": None, "path": "/data/h",
    "found_size": None, "lost_reason": "missing", "marked_by": "lru", "created_at": 1.0, "action_count": 3,
    "mark": {"reason": "over_threshold", "rank": 1, "usage_bytes": 10, "capacity_bytes": 8, "to_free_bytes": 4},
    "counts": {"compute": 1, "reuse": 2, "follow": 0}, "outcome": {"finished": 1, "reused": 1, "skipped": 1},
    "planned": {"actions_reused": 1, "actions_skipped": 1, "saved_seconds": 3.0},
}  # fmt: skip


@pytest.mark.parametrize("event_type", list(EventType))
def test_every_payload_matches_the_model_integrators_are_served(event_type: EventType) -> None:
    assert set(PAYLOAD_OF) == set(PAYLOADS) == set(EventType)
    payload = PAYLOAD_OF[event_type](FULL)
    assert payload is not None
    # Exactly the model's fields, none missing, none extra, each of the declared type.
    model = PAYLOADS[event_type]
    assert set(payload) == set(model.model_fields)
    assert model.model_validate(payload).model_dump() == payload


def test_the_served_schema_narrows_the_payload_by_type() -> None:
    schema = Event.model_json_schema()
    assert {"id", "type", "time", "producer", "subject", "payload", "schema_version"} <= set(schema["properties"])
    narrowed = {
        c["if"]["properties"]["type"]["const"]: c["then"]["properties"]["payload"]["$ref"] for c in schema["allOf"]
    }
    assert set(narrowed) == {t.value for t in EventType}
    assert narrowed["action.finished"] == "#/$defs/ActionFinished"
    assert {"size", "seconds", "output_path", "name"} <= set(schema["$defs"]["ActionFinished"]["properties"])


def test_a_job_that_ended_unseen_announces_its_run_before_its_end() -> None:
    assert events("action", A.SUBMITTED, A.FINISHED) == [
        EventType.ACTION_RUNNING, EventType.ACTION_FINISHED, EventType.DATASET_STORED
    ]  # fmt: skip
    assert events("action", A.RUNNING, A.FINISHED) == [EventType.ACTION_FINISHED, EventType.DATASET_STORED]
    (running, _) = effects_of("action", A.SUBMITTED, A.FAILED)
    assert running.events[0][1]({**FULL, "started_at": None}) is None  # never started: it did not run
    # A second attempt that never started, after a first that did: its own record says so.
    retried = {
        **FULL,
        "attempt": 2,
        "attempt_log": [{"attempt": 1, "started_at": 5.0}, {"attempt": 2, "started_at": None}],
    }
    assert running.events[0][1](retried) is None
    assert running.events[0][1]({**retried, "attempt_log": [{"attempt": 2, "started_at": 7.0}]})["started_at"] == 7.0


def test_every_planned_outcome_is_announced() -> None:
    assert events("action", None, A.REUSED) == [EventType.ACTION_REUSED]
    assert events("action", None, A.SKIPPED) == [EventType.ACTION_SKIPPED]
    assert events("action", None, A.FOLLOWING) == [EventType.ACTION_FOLLOWING]
    assert events("action", A.SKIPPED, A.REUSED) == [EventType.ACTION_REUSED]
    # Planned REUSED actions are counted with their submission, not again here.
    assert all(e.counters is None for e in effects_of("action", None, A.REUSED))


def test_routing_keys_name_the_type_the_owner_slot_and_the_workflow() -> None:
    from shared.events import Subject

    ev = Event(type=EventType.ACTION_FINISHED, producer="t", subject=Subject(workflow_id="wf-1", action_id="wf-1.a"))
    assert ev.routing_key == "action.finished._.wf-1"
    assert Event(type=EventType.DATASET_MARKED, producer="t").routing_key == "dataset.marked._._"
