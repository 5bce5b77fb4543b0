"""Per-action retries and timeouts on the local executor (docs/state-machines.md, "Retries
and timeouts"): a failed attempt waits in RETRYING for its delay and runs again, a job
past its timeout is killed and counts as a failed attempt, and neither setting is part
of the lineage hash. The Oozie counterparts are in tests/system/test_hadoop_retries.py."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any

from pingo.dev import all_services
from shared.config import Settings
from shared.runtime import Context, running
from tests.support.gates import Gate
from tests.support.system import Api
from tests.support.workflows import shell_action


def flaky(label: str, marker: Path, fail_times: int, **extra: Any) -> dict[str, Any]:
    """A synth action whose first ``fail_times`` attempts fail (counted in ``marker``, outside its output)."""
    conf = [{"key": "SYNTH_FAIL_ONCE", "value": str(marker)}, {"key": "SYNTH_FAIL_TIMES", "value": str(fail_times)}]
    return {"name": label, "actions": [shell_action(1, label, configurationParameters=conf, **extra)]}


def hanging(label: str, **extra: Any) -> dict[str, Any]:
    """A synth action that sleeps for a minute before writing anything."""
    return {"name": label, "actions": [shell_action(1, label, seconds=60, **extra)]}


def processes_of(label: str) -> list[int]:
    """Live processes whose command line names ``label`` (the job's argv holds it)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if label.encode() in argv and state != "Z":
            found.append(int(pid))
    return found


async def gone(label: str, within: float = 5.0) -> bool:
    deadline = time.time() + within
    while processes_of(label):
        if time.time() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def timeline_notes(api: Api, wf_id: str) -> list[tuple[str, str | None]]:
    status, body = await api.request("GET", f"/api/v1/workflows/{wf_id}/timeline")
    assert status == 200, body
    rows = body["transitions"] if isinstance(body, dict) else body
    return [(r["state"], r.get("note")) for r in rows if r["kind"] == "action"]


async def test_a_job_that_fails_twice_then_succeeds_finishes_on_its_third_attempt(system: Api, tmp_path: Path) -> None:
    marker, label = tmp_path / "attempts", f"flaky-{uuid.uuid4().hex[:6]}"
    wf = await system.run(flaky(label, marker, 2, retries={"count": 2, "delaySeconds": 0.2, "backoff": 1}))
    assert wf["state"] == "SUCCEEDED", wf["actions"]
    (a,) = wf["actions"]
    assert a["state"] == "FINISHED" and a["attempts"] == 3 and a["failedAttempts"] == 2 and a["error"] is None
    log = a["attemptLog"]
    assert [r["outcome"] for r in log] == ["failed", "failed", "succeeded"]
    assert [r["attempt"] for r in log] == [1, 2, 3]
    assert len({r["jobId"] for r in log}) == 3 and all(r["executor"] == "local" for r in log)
    assert all(r["endedAt"] >= r["submittedAt"] for r in log)
    assert all(r["error"].startswith("exit code 4") for r in log[:2]), log  # the executor's words
    assert marker.read_text().splitlines() == ["failed", "failed"]  # the job ran exactly three times
    states = [s for s, _ in await timeline_notes(system, wf["id"])]
    assert states.count("RETRYING") == 2 and states.count("SUBMITTED") == 3 and states[-1] == "FINISHED"


async def test_retries_used_up_end_the_action_failed_after_its_last_attempt(system: Api, tmp_path: Path) -> None:
    marker, label = tmp_path / "attempts", f"flaky-{uuid.uuid4().hex[:6]}"
    # The workflow's defaults apply to an action that gives none.
    body = {**flaky(label, marker, 5), "defaults": {"retries": {"count": 1, "delaySeconds": 0.2}}}
    wf = await system.run(body)
    assert wf["state"] == "FAILED"
    (a,) = wf["actions"]
    assert a["state"] == "FAILED" and a["attempts"] == 2 and a["failedAttempts"] == 2 and a["reason"] == "action_failed"
    assert [r["outcome"] for r in a["attemptLog"]] == ["failed", "failed"]
    assert len(marker.read_text().splitlines()) == 2


async def test_a_hanging_job_is_killed_at_its_timeout_and_fails_with_the_reason(system: Api) -> None:
    label = f"hang-{uuid.uuid4().hex[:6]}"
    t0 = time.time()
    wf = await system.run(hanging(label, timeoutSeconds=1), timeout=30)
    took = time.time() - t0
    assert wf["state"] == "FAILED" and took < 20, took
    (a,) = wf["actions"]
    assert a["state"] == "FAILED" and a["reason"] == "timed_out" and a["error"] == "timed out after 1 s"
    assert [(r["outcome"], r["error"]) for r in a["attemptLog"]] == [("timed_out", "timed out after 1 s")]
    assert await gone(label), f"the timed-out job still runs: {processes_of(label)}"


async def test_a_timed_out_attempt_is_retried_while_retries_remain(system: Api) -> None:
    label = f"hang-{uuid.uuid4().hex[:6]}"
    wf = await system.run(hanging(label, timeoutSeconds=1, retries={"count": 1, "delaySeconds": 0.1}), timeout=40)
    (a,) = wf["actions"]
    assert a["state"] == "FAILED" and a["attempts"] == 2
    assert [r["outcome"] for r in a["attemptLog"]] == ["timed_out", "timed_out"]
    assert await gone(label)


async def test_killing_a_workflow_while_an_action_waits_for_its_retry_ends_it_killed(
    system: Api, tmp_path: Path
) -> None:
    marker, label = tmp_path / "attempts", f"flaky-{uuid.uuid4().hex[:6]}"
    plan = await system.submit(flaky(label, marker, 5, retries={"count": 3, "delaySeconds": 30}))
    deadline = time.time() + 20
    while (await system.workflow(plan["id"]))["actions"][0]["state"] != "RETRYING":
        assert time.time() < deadline, "never reached RETRYING"
        await asyncio.sleep(0.1)
    a = (await system.workflow(plan["id"]))["actions"][0]
    assert a["retryAt"] > time.time() + 20  # its due time is stored, not slept on
    status, _ = await system.request("POST", f"/api/v1/workflows/{plan['id']}/kill")
    assert status in (200, 202)
    wf = await system.wait(plan["id"], timeout=20)
    assert wf["state"] == "KILLED" and wf["actions"][0]["state"] == "KILLED"
    assert len(marker.read_text().splitlines()) == 1  # no further attempt ran


async def test_retries_and_timeout_are_not_part_of_the_lineage_hash(system: Api) -> None:
    label = f"plain-{uuid.uuid4().hex[:6]}"
    first = await system.run({"name": label, "actions": [shell_action(1, label)]})
    assert first["state"] == "SUCCEEDED"
    again = await system.run({"name": label, "actions": [shell_action(1, label, retries=3, timeoutSeconds=120)]})
    assert again["state"] == "SUCCEEDED"
    assert again["actions"][0]["hash"] == first["actions"][0]["hash"]
    assert again["actions"][0]["decision"] == "reuse"


async def test_a_retry_due_while_pingo_was_down_runs_once_after_the_restart(settings: Settings, tmp_path: Path) -> None:
    marker, label = tmp_path / "attempts", f"flaky-{uuid.uuid4().hex[:6]}"
    body = flaky(label, marker, 1, retries={"count": 1, "delaySeconds": 2})
    api = Api(settings)
    await api.open()
    try:
        async with running(await Context.open(settings), all_services):
            plan = await api.submit(body)
            deadline = time.time() + 20
            while (a := (await api.workflow(plan["id"]))["actions"][0])["state"] != "RETRYING":
                assert time.time() < deadline, a
                await asyncio.sleep(0.05)
        # Every service is stopped while the retry waits; its due time is in the document.
        await asyncio.sleep(max(0.0, a["retryAt"] - time.time()) + 0.5)
        async with running(await Context.open(settings), all_services):
            wf = await api.wait(plan["id"], timeout=30)
    finally:
        await api.close()
    (done,) = wf["actions"]
    assert wf["state"] == "SUCCEEDED" and done["attempts"] == 2
    assert [r["outcome"] for r in done["attemptLog"]] == ["failed", "succeeded"]
    assert done["attemptLog"][1]["submittedAt"] >= a["retryAt"]


async def test_pollers_racing_for_a_due_retry_start_one_attempt(system: Api, tmp_path: Path) -> None:
    marker, label = tmp_path / "attempts", f"flaky-{uuid.uuid4().hex[:6]}"
    plan = await system.submit(flaky(label, marker, 1, retries={"count": 1, "delaySeconds": 60}))
    deadline = time.time() + 20
    while (await system.workflow(plan["id"]))["actions"][0]["state"] != "RETRYING":
        assert time.time() < deadline
        await asyncio.sleep(0.05)
    aid = plan["actions"][0]["id"]
    await system.db.actions.update_one({"_id": aid}, {"$set": {"retry_at": time.time() - 1}})
    doc = await system.db.actions.find_one({"_id": aid})
    # Callback replicas (and the system's own poller) see it due at the same instant.
    pollers = [system.ctx.outcomes(f"replica-{i}") for i in range(4)]
    moved = await asyncio.gather(*(o.retry_due(doc) for o in pollers))
    assert sum(m is not None for m in moved) <= 1
    wf = await system.wait(plan["id"], timeout=30)
    assert wf["state"] == "SUCCEEDED" and wf["actions"][0]["attempts"] == 2
    states = [s for s, _ in await timeline_notes(system, wf["id"])]
    assert states.count("RETRYING") == 1 and states.count("READY") == 2 and states.count("SUBMITTED") == 2
    assert len(marker.read_text().splitlines()) == 1


async def test_a_follower_waits_through_its_producers_retries_and_reuses_the_output(
    system: Api, tmp_path: Path, gate: Gate
) -> None:
    marker, label = tmp_path / "attempts", f"flaky-{uuid.uuid4().hex[:6]}"
    body = flaky(label, marker, 1, retries={"count": 1, "delaySeconds": 0.5})
    # Its first attempt runs until the follower is planned: the producer is still in flight.
    body["actions"][0]["configurationParameters"].extend(gate.conf)
    runs = tmp_path / "runs.log"  # synth appends a line per run
    body["actions"][0]["configurationParameters"].append({"key": "PINGO_EXEC_LOG", "value": str(runs)})
    first = await system.submit(body)
    deadline = time.time() + 20
    while (await system.workflow(first["id"]))["actions"][0]["state"] not in ("SUBMITTED", "RUNNING"):
        assert time.time() < deadline
        await asyncio.sleep(0.05)
    second = await system.submit(body)
    assert second["actions"][0]["state"] == "FOLLOWING"
    gate.open()
    producer, follower = await system.wait(first["id"]), await system.wait(second["id"])
    assert producer["state"] == follower["state"] == "SUCCEEDED"
    assert producer["actions"][0]["attempts"] == 2 and follower["actions"][0]["state"] == "REUSED"
    # One failed run and one good one, both the producer's: nothing ran for the follower.
    assert [line.split(" ", 1)[1] for line in runs.read_text().splitlines()] == [f"{label} failed", label]
    assert {line.split(" ", 1)[0] for line in runs.read_text().splitlines()} == {first["actions"][0]["id"]}
