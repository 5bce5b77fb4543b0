"""A job can end, and notify, before its submitter has recorded the job's id (an executor
that makes its ids when it takes the job: Oozie): the notification must still finish the
action, not leave it to the poller."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from shared.config import Settings
from shared.store import actions as acts
from tests.support.system import Api, make_settings
from tests.support.workflows import shell_action


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str) -> Settings:
    # A poller this slow would make the workflow take minutes: only notifications finish it.
    return make_settings(tmp_path, mongo_url, poll_interval=120.0, poll_max_interval=120.0)


async def test_a_notification_before_the_job_id_is_recorded_finishes_the_action(
    system: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_job = acts.record_job
    recorded: list[str] = []

    async def slow_record_job(*args: Any, **kwargs: Any) -> Any:
        # The store answers the submitter's write late: every job has ended, and notified, by then.
        await asyncio.sleep(0.4)
        recorded.append(args[1])
        return await record_job(*args, **kwargs)

    monkeypatch.setattr(acts, "record_job", slow_record_job)
    # The local executor names a job before making it, and the claim records its id
    # (``Executor.job_id``): here it names none, as Oozie, whose ids come with the submit.
    monkeypatch.setattr(type(system.ctx.executor), "job_id", lambda self, external_id: None)
    body = {"name": "early", "actions": [shell_action(i, f"early-{i}", [i - 1] if i > 1 else []) for i in (1, 2, 3)]}
    wf = await system.run(body, timeout=60)
    assert wf["state"] == "SUCCEEDED"
    assert [a["state"] for a in wf["actions"]] == ["FINISHED"] * 3
    assert sorted(recorded) == sorted(a["id"] for a in wf["actions"])
    # No poll was needed (the first is due two minutes after each submission).
    assert all(a["attempts"] == 1 for a in wf["actions"])
