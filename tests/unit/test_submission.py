"""A workflow's state derived from its actions' (the planner and the planning sweep, with
the services: tests/system/test_submission.py)."""

from __future__ import annotations

from collections import Counter

from shared.store.workflows import derive_counted


def test_a_workflow_with_no_actions_has_not_ended() -> None:
    assert derive_counted(Counter(), kill_requested=False) is None
    assert derive_counted(Counter(), kill_requested=True) is None
    assert derive_counted(Counter(["FINISHED"]), kill_requested=False) == "SUCCEEDED"
