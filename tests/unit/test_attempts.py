"""An action's retry policy and attempt records (shared/lifecycle/attempts.py), and how the
terminal shows an action that was tried more than once."""

from __future__ import annotations

import time

from pingo.display import render_status, to_text
from shared.lifecycle import attempts
from shared.states import ACTION_IN_FLIGHT, ACTION_LIVE, ACTION_TRANSITIONS, ActionState, sources_for
from shared.states import ACTION_KILLED_IN_BULK as KILLED_IN_BULK

A = ActionState


def test_retries_allow_count_more_attempts_with_growing_delays() -> None:
    action = {"retries": {"count": 2, "delaySeconds": 0.5, "backoff": 3}, "failed_attempts": 0}
    assert attempts.next_retry(action) == (1, 0.5)
    assert attempts.next_retry({**action, "failed_attempts": 1}) == (2, 1.5)
    assert attempts.next_retry({**action, "failed_attempts": 2}) is None
    # Planned before retries existed, or with none: the first failure is the last.
    assert attempts.next_retry({}) is None


def test_only_an_attempt_in_flight_goes_to_retrying_and_it_leaves_only_to_run_again_or_be_killed() -> None:
    assert sources_for(ACTION_TRANSITIONS, A.RETRYING) == ["RUNNING", "SUBMITTED"]
    assert ACTION_TRANSITIONS[A.RETRYING] == {A.READY, A.KILLED}
    # Live (its workflow waits for it), with no job to stop: a kill ends it in bulk.
    assert A.RETRYING in ACTION_LIVE and A.RETRYING not in ACTION_IN_FLIGHT and A.RETRYING in KILLED_IN_BULK


def test_only_the_job_a_timeout_killed_counts_as_timed_out() -> None:
    assert attempts.timed_out({"job_id": "j1", "timed_out_job": "j1"})
    assert not attempts.timed_out({"job_id": "j2", "timed_out_job": "j1"})  # a later attempt's job
    assert not attempts.timed_out({"job_id": None, "timed_out_job": None})
    assert attempts.timeout_message(30) == "timed out after 30 s"
    assert attempts.timeout_message(1.5) == "timed out after 1.5 s"


def record(n: int, outcome: str, error: str | None) -> dict:
    return {"attempt": n, "jobId": f"job-{n}", "executor": "local", "submittedAt": 100.0 * n,
            "startedAt": 100.0 * n + 1, "endedAt": 100.0 * n + 3, "outcome": outcome, "error": error}  # fmt: skip


def test_status_shows_each_attempt_of_an_action_tried_more_than_once() -> None:
    base = {"localId": 1, "name": "flaky", "decision": "compute", "parents": [], "follows": None}
    finished = {**base, "state": "FINISHED", "attempts": 2, "error": None,
                "attemptLog": [record(1, "failed", "exit code 4"), record(2, "succeeded", None)]}  # fmt: skip
    waiting = {**base, "localId": 2, "name": "hangs", "state": "RETRYING", "attempts": 1,
               "retryAt": time.time() + 30, "error": "timed out after 1 s",
               "attemptLog": [record(1, "timed_out", "timed out after 1 s")]}  # fmt: skip
    text = to_text(render_status({"id": "wf-1", "name": "w", "state": "RUNNING", "actions": [finished, waiting]}))
    assert "2 attempts" in text
    assert "attempt 1: failed after 2.0s  job job-1  exit code 4" in text
    assert "attempt 2: succeeded after 2.0s  job job-2" in text
    assert "RETRYING" in text and "attempt 1 failed; retry in" in text
    assert "attempt 1: timed_out after 2.0s  job job-1  timed out after 1 s" in text
