"""A workflow's state derived from its actions' (the planner and the planning sweep, with
the services: tests/system/test_submission.py)."""

from __future__ import annotations

from shared.store.workflows import derive


def test_a_workflow_with_no_actions_has_not_ended() -> None:
    assert derive([], kill_requested=False) is None
    assert derive([], kill_requested=True) is None
    assert derive([{"state": "FINISHED"}], kill_requested=False) == "SUCCEEDED"
