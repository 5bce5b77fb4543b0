"""The state machines (docs/state-machines.md): the tables. The one guarded write that
uses them, against the real store, is tested in tests/system/test_states.py."""

from __future__ import annotations

import itertools
from collections import deque

import pytest

from shared.states import (
    ACTION_IN_FLIGHT,
    ACTION_INITIAL,
    ACTION_TERMINAL,
    ACTION_TRANSITIONS,
    DATASET_BY_HAND,
    DATASET_BY_POLICY,
    DATASET_INITIAL,
    DATASET_REUSABLE,
    DATASET_TRANSITIONS,
    TABLES,
    WORKFLOW_TERMINAL,
    WORKFLOW_TRANSITIONS,
    ActionState,
    DatasetState,
    IllegalTransition,
    WorkflowState,
    check,
)

A, D, W = ActionState, DatasetState, WorkflowState


def reachable(table: dict, starts) -> set:
    seen = set(starts)
    todo = deque(starts)
    while todo:
        for nxt in table[todo.popleft()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


# --- the tables -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "enum"),
    [(ACTION_TRANSITIONS, A), (DATASET_TRANSITIONS, D), (WORKFLOW_TRANSITIONS, W)],
    ids=["action", "dataset", "workflow"],
)
def test_every_state_has_a_row_and_every_target_is_a_state(table, enum):
    assert set(table) == set(enum)
    for targets in table.values():
        assert set(targets) <= set(enum)


def test_terminal_states_have_no_exits_but_replanning():
    """FAILED and KILLED are final; FINISHED, REUSED and SKIPPED are reopened only by
    re-planning for a live action that needs their output (back to work or following)."""
    assert ACTION_TERMINAL == {A.FINISHED, A.FAILED, A.KILLED, A.REUSED, A.SKIPPED}
    assert WORKFLOW_TERMINAL == {W.SUCCEEDED, W.FAILED, W.KILLED}
    replanned = {A.WAITING, A.READY, A.FOLLOWING}
    for s in ACTION_TERMINAL:
        allowed = {A.FAILED: set(), A.KILLED: set(), A.SKIPPED: replanned | {A.REUSED}}.get(s, replanned)
        assert set(ACTION_TRANSITIONS[s]) == allowed, s
    for s in WORKFLOW_TERMINAL:
        assert not WORKFLOW_TRANSITIONS[s], s
        for target in W:
            with pytest.raises(IllegalTransition):
                check(WORKFLOW_TRANSITIONS, s, target)


def test_every_action_state_is_reachable_from_an_initial_state():
    assert reachable(ACTION_TRANSITIONS, ACTION_INITIAL) == set(A)


def test_every_action_state_can_end():
    """Every action reaches a terminal state: none is a trap it cannot leave."""
    for s in A:
        assert reachable(ACTION_TRANSITIONS, [s]) & ACTION_TERMINAL, s


def test_action_lifecycle_of_the_design_is_allowed():
    path = [A.WAITING, A.READY, A.PROCESSING, A.SUBMITTED, A.RUNNING, A.FINISHED]
    for src, dst in itertools.pairwise(path):
        check(ACTION_TRANSITIONS, src, dst)
    for src in (A.PROCESSING, A.SUBMITTED):  # a submit error puts the action back
        check(ACTION_TRANSITIONS, src, A.READY)
    check(ACTION_TRANSITIONS, A.PROCESSING, A.PROCESSING)  # a stale claim is taken again
    check(ACTION_TRANSITIONS, A.READY, A.SUBMITTED)  # claimed on its READY event, in one write
    for src in (A.WAITING, A.READY, A.PROCESSING, A.SUBMITTED, A.RUNNING):  # kill / upstream_failed
        check(ACTION_TRANSITIONS, src, A.KILLED)


def test_actions_with_a_job_cannot_go_back_to_waiting():
    """Only an action not yet submitted (PROCESSING, or SUBMITTED before its job exists:
    its inputs are checked just before the start, and that writer guards on an empty job
    id) goes back to wait for a parent computed again. A running job's action never does."""
    check(ACTION_TRANSITIONS, A.PROCESSING, A.WAITING)
    check(ACTION_TRANSITIONS, A.SUBMITTED, A.WAITING)
    for src in ACTION_IN_FLIGHT - {A.PROCESSING, A.SUBMITTED}:
        with pytest.raises(IllegalTransition):
            check(ACTION_TRANSITIONS, src, A.WAITING)


def test_every_dataset_state_is_reachable_from_an_initial_state():
    assert reachable(DATASET_TRANSITIONS, DATASET_INITIAL) == set(D)


def pingo_alone() -> dict:
    """The dataset table without what users do (DATASET_BY_HAND, and the INVALIDATED
    state only they lead into) and without the retention policy, off by default
    (DATASET_BY_POLICY): what Pingo does of its own accord."""
    hand = DATASET_BY_HAND | DATASET_BY_POLICY
    return {
        s: frozenset(t for t in targets if (s, t) not in hand and t != D.INVALIDATED)
        for s, targets in DATASET_TRANSITIONS.items()
        if s != D.INVALIDATED
    }


def test_leaf_never_reaches_deletion():
    """LEAF outputs are never deleted automatically: no path from LEAF leads towards
    deletion. Its files may only be found lost (gone behind Pingo's back); what is computed
    again after that is a new dataset life, which starts at TO_STORE/TO_LEAF."""
    table = pingo_alone()
    assert table[D.LEAF] == {D.LEAF, D.LOST}
    assert table[D.LOST] == {D.TO_STORE, D.TO_LEAF}
    assert not table[D.LEAF] & {D.STORED_TO_DELETE, D.PROCESSING, D.DELETING, D.DELETED}


def test_only_stored_datasets_enter_deletion():
    """Only STORED is ever chosen for deletion. Inside the deletion pipeline a deletor may
    hand a dataset back to STORED_TO_DELETE, but from outside it the one way in is STORED."""
    table = pingo_alone()
    pipeline = {D.STORED_TO_DELETE, D.PROCESSING, D.DELETING}
    entries = {(s, t) for s, targets in table.items() if s not in pipeline for t in targets if t in pipeline}
    assert entries == {(D.STORED, D.STORED_TO_DELETE)}
    # PROCESSING and DELETING are only reached from inside the pipeline, through STORED_TO_DELETE.
    into_processing = {s for s, targets in table.items() if D.PROCESSING in targets}
    into_deleting = {s for s, targets in table.items() if D.DELETING in targets}
    assert into_processing == {D.STORED_TO_DELETE, D.PROCESSING}
    assert into_deleting == {D.PROCESSING, D.DELETING}
    # ...and a file is only deleted (DELETING -> DELETED) after that road.
    for s in set(table) - {D.DELETING, D.TO_STORE, D.TO_LEAF}:
        assert D.DELETED not in table[s], s


def test_only_a_user_withdraws_a_dataset_and_a_withdrawn_one_is_never_revived():
    """INVALIDATED is entered by a user's move (or a failed deletion of a withdrawn
    dataset handed back), and leaves only to be computed again or deleted: never through
    STORED_TO_DELETE or PROCESSING, from which a planner revives a dataset for reuse."""
    into = {(s, D.INVALIDATED) for s, targets in DATASET_TRANSITIONS.items() if D.INVALIDATED in targets}
    assert into == DATASET_BY_HAND | {(D.DELETING, D.INVALIDATED)}
    assert DATASET_TRANSITIONS[D.INVALIDATED] == {D.TO_STORE, D.TO_LEAF, D.DELETING}
    assert D.INVALIDATED not in DATASET_REUSABLE
    for move in DATASET_BY_HAND | DATASET_BY_POLICY:
        check(DATASET_TRANSITIONS, *move)


def test_workflow_runs_then_ends():
    assert WORKFLOW_TRANSITIONS[W.RUNNING] == {W.SUCCEEDED, W.FAILED, W.KILLED}
    assert reachable(WORKFLOW_TRANSITIONS, [W.PLANNING]) == set(W)


def test_tables_are_registered_by_entity():
    assert TABLES == {"action": ACTION_TRANSITIONS, "dataset": DATASET_TRANSITIONS, "workflow": WORKFLOW_TRANSITIONS}
