"""A job that has started reads RUNNING, with its real start time, before it ends."""

from __future__ import annotations

import asyncio
import time

import pytest

from shared.config import Settings
from tests.support.dev import pingo, user_env
from tests.support.gates import Gate
from tests.support.system import Api
from tests.support.workflows import shell_action


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # The poller looks late (as a user's default backoff may): only the runner's start
    # notification can show the job RUNNING while it runs.
    return settings.model_copy(update={"poll_interval": 30.0, "poll_max_interval": 30.0})


async def test_a_started_local_job_reads_running_with_its_start_time(system: Api, gate: Gate) -> None:
    # It runs until the test has seen it RUNNING and asked `pingo status` about it.
    slow = shell_action(1, "run-4s", configurationParameters=gate.conf)
    plan = await system.submit({"name": "slow-one", "actions": [slow]})
    seen: dict | None = None
    deadline = time.time() + 60
    while time.time() < deadline:
        action = (await system.workflow(plan["id"]))["actions"][0]
        if action["state"] == "RUNNING":
            seen = action
            break
        assert action["state"] in ("WAITING", "READY", "PROCESSING", "SUBMITTED"), action["state"]
        await asyncio.sleep(0.1)
    assert seen is not None, "the 4-second job never read RUNNING before it ended"
    # Its start is the job's own (written by the runner), not the moment it was seen.
    assert seen["submittedAt"] <= seen["startedAt"] <= time.time()
    # `pingo status` (at 80 columns) shows it RUNNING with its time so far.
    env = user_env(PINGO_URL=f"http://127.0.0.1:{system.settings.port}", COLUMNS="80")
    out = (await asyncio.to_thread(pingo, "status", plan["id"], env=env)).stdout
    row = next(line for line in out.splitlines() if "run-4s" in line and "RUNNING" in line)
    assert row.rstrip().endswith("s…"), out
    gate.open()
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED"
    done = wf["actions"][0]
    assert done["state"] == "FINISHED" and done["startedAt"] == seen["startedAt"]
