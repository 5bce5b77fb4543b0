"""The attempts of an action: the names of how one ended (the ``outcome`` of the entry
each leaves in the action's ``attempt_log``: ``shared.store.actions.attempt_entry``), and
the action's execution settings that decide what follows a failed one
(docs/state-machines.md, "Retries and timeouts").

Retries and timeouts are execution settings, stored on the action document when it is
planned (``retries``, ``timeout_seconds``) and never part of its lineage hash: changing
them does not change what the action computes, so its stored output is still reused.
"""

from __future__ import annotations

from typing import Any

from shared.workflow_spec import RetryPolicy

# How an attempt ended: the outcome its entry in ``attempt_log`` names.
SUCCEEDED, FAILED, TIMED_OUT, KILLED, SUBMIT_FAILED, LOST = (
    "succeeded", "failed", "timed_out", "killed", "submit_failed", "lost",
)  # fmt: skip
# How long after killing a timed-out job its kill is asked for again, if the job has not ended.
KILL_AGAIN_AFTER = 5.0


def policy(action: dict[str, Any]) -> RetryPolicy:
    """The action's retry policy (none for an action planned before retries existed)."""
    return RetryPolicy(**(action.get("retries") or {}))


def next_retry(action: dict[str, Any]) -> tuple[int, float] | None:
    """After one more failed attempt of ``action``: the count of failed attempts and the
    delay before the next one, or None if its retries are used up."""
    failed = int(action.get("failed_attempts") or 0) + 1
    rules = policy(action)
    if failed > rules.count:
        return None
    return failed, rules.delay(failed)


def timeout_message(seconds: float) -> str:
    return f"timed out after {seconds:g} s"


def timed_out(action: dict[str, Any]) -> bool:
    """Its current job was killed by Pingo for running past its timeout."""
    return bool(action.get("job_id")) and action.get("timed_out_job") == action.get("job_id")
