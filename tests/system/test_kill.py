"""Killing a workflow: answered at once, applied in bulk and exactly once however many
times it is asked, applied after planning when asked during it, and finished by the
repair sweep if the gateway that took it died."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from shared.config import Settings
from shared.executors.base import JobState, JobStatus
from shared.store.client import Store
from shared.store.transitions import decode
from tests.support.commands import counted_outcomes
from tests.support.processes import marked, spawning_action
from tests.support.submitters import hold_submitter
from tests.support.system import Api, make_settings
from tests.support.workflows import shell_action


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str):
    return make_settings(tmp_path, mongo_url, local_slots=2)


async def wait_state(api: Api, wf_id: str, state: str, timeout: float = 60.0) -> dict:
    deadline = time.time() + timeout
    while (wf := await api.workflow(wf_id))["state"] != state:
        assert time.time() < deadline, (state, wf["state"], [(a["localId"], a["state"]) for a in wf["actions"]][:5])
        await asyncio.sleep(0.2)
    return wf


async def root_running(api: Api, wf_id: str, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while (await api.workflow(wf_id))["actions"][0]["state"] != "RUNNING":
        assert time.time() < deadline
        await asyncio.sleep(0.2)


def fan(n: int, label: str, seconds: float = 0.0) -> dict:
    """A root that runs for ``seconds`` and ``n`` children of it."""
    root = shell_action(0, f"{label}-root", seconds=seconds)
    return {"name": label, "actions": [root, *(shell_action(i, f"{label}-{i}", [0]) for i in range(1, n + 1))]}


async def test_kill_during_planning_is_applied_when_planning_ends(system: Api) -> None:
    # Jobs of 5 minutes: one that was started and stopped ends far sooner, even on a loaded machine.
    body = fan(1000, "plan-kill", seconds=300)
    submitting = asyncio.create_task(system.submit(body))
    deadline = time.time() + 30
    while True:
        status, listed = await system.request("GET", "/api/v1/workflows?state=PLANNING")
        if listed["workflows"]:
            break
        assert not submitting.done(), "planning ended before the test could kill it"
        assert time.time() < deadline
        await asyncio.sleep(0.01)
    wf_id = listed["workflows"][0]["id"]
    status, killed = await system.request("POST", f"/api/v1/workflows/{wf_id}/kill")
    assert status == 202, killed
    assert killed["killRequested"] is True
    plan = await submitting
    assert plan["id"] == wf_id
    wf = await wait_state(system, wf_id, "KILLED")
    assert {a["state"] for a in wf["actions"]} == {"KILLED"}
    # The root's job, if it was started at all, was stopped: it did not run its 300 s.
    root = wf["actions"][0]
    doc = await system.db.actions.find_one({"_id": root["id"]})
    assert root["finishedAt"] - wf["createdAt"] < 200, "\n".join(map(str, [*doc["history"], root]))


async def test_a_large_kill_answers_at_once_and_repeated_kills_do_the_work_once(system: Api) -> None:
    plan = await system.submit(fan(1500, "big", seconds=30))
    wf_id = plan["id"]
    await root_running(system, wf_id)
    answers = await asyncio.gather(*(system.request("POST", f"/api/v1/workflows/{wf_id}/kill") for _ in range(5)))
    assert [status for status, _ in answers] == [202] * 5
    # The answers came before the work was done: the workflow was still running.
    assert {body["state"] for _, body in answers} == {"RUNNING"}
    wf = await wait_state(system, wf_id, "KILLED")
    assert {a["state"] for a in wf["actions"]} == {"KILLED"}
    docs = [decode(d) async for d in system.db.actions.find({"workflow_id": wf_id}, {"history": 1})]
    killed_entries = [sum(h["state"] == "KILLED" for h in d["history"]) for d in docs]
    assert killed_entries == [1] * 1501
    # Every claim and producer mark is released: nothing of it can block a deletion.
    held = await system.db.datasets.count_documents({"claims": {"$in": [d["_id"] for d in docs]}})
    assert held == 0
    assert await system.db.datasets.count_documents({"producers": {"$in": [d["_id"] for d in docs]}}) == 0
    status, stats = await system.request("GET", "/api/v1/history/stats?resolution=1d")
    assert stats["totals"]["failures"].get("killed") == 1501
    status, again = await system.request("POST", f"/api/v1/workflows/{wf_id}/kill")
    assert status == 409 and "already ended KILLED" in again["detail"]


async def test_a_long_chain_is_killed_whole(system: Api) -> None:
    """Deeper than Python's recursion limit: the kill's hand-over walks the graph without recursing."""
    n = 1200
    chain = [shell_action(i, f"deep-{i}", [i - 1] if i else [], seconds=30 if i == 0 else 0) for i in range(n)]
    plan = await system.submit({"name": "deep", "actions": chain})
    await root_running(system, plan["id"])
    status, _ = await system.request("POST", f"/api/v1/workflows/{plan['id']}/kill")
    assert status == 202
    wf = await wait_state(system, plan["id"], "KILLED")
    assert {a["state"] for a in wf["actions"]} == {"KILLED"}


async def test_an_interrupted_kill_is_finished_by_the_repair_sweep(system: Api) -> None:
    plan = await system.submit(fan(3, "interrupted", seconds=30))
    wf_id = plan["id"]
    # A gateway recorded the kill, then died before applying any of it.
    await system.db.workflows.update_one(
        {"_id": wf_id},
        {"$set": {"kill_requested": True, "kill_applied": False, "kill_requested_at": time.time() - 60}},
    )
    wf = await wait_state(system, wf_id, "KILLED")
    assert {a["state"] for a in wf["actions"]} == {"KILLED"}
    assert (await system.db.workflows.find_one({"_id": wf_id}))["kill_applied"]


async def test_a_kill_being_applied_is_left_to_its_applier_until_its_lease_is_stale(system: Api) -> None:
    """One applier at a time: a big kill outlasting the sweep's interval was applied twice
    at once, each copy slowing the other. The sweep takes a kill over only once its
    applier stopped renewing its lease (it died)."""
    plan = await system.submit(fan(3, "leased", seconds=30))
    wf_id = plan["id"]
    await root_running(system, wf_id)
    # A gateway recorded the kill and is applying it: its lease is fresh.
    await system.db.workflows.update_one(
        {"_id": wf_id},
        {"$set": {"kill_requested": True, "kill_applied": False, "kill_requested_at": time.time() - 60,
                  "kill_lease": "alive", "kill_lease_at": time.time() + 3600}},
    )  # fmt: skip
    await asyncio.sleep(3)  # several sweeps (settle_interval 1 s)
    wf = await system.workflow(wf_id)
    assert wf["state"] == "RUNNING" and "KILLED" not in {a["state"] for a in wf["actions"]}
    # Its applier died: the lease is no longer renewed, and the sweep applies the kill.
    await system.db.workflows.update_one({"_id": wf_id}, {"$set": {"kill_lease_at": time.time() - 60}})
    wf = await wait_state(system, wf_id, "KILLED")
    assert {a["state"] for a in wf["actions"]} == {"KILLED"}
    assert (await system.db.workflows.find_one({"_id": wf_id}))["kill_applied"]


async def test_a_kill_ends_an_action_whose_submitter_died_before_its_job_existed(system: Api) -> None:
    """A submitter that died between SUBMITTED and creating the job leaves an action with
    no job. Killed meanwhile, it must end KILLED, not go back to READY and wait forever."""
    plan = await system.submit(fan(1, "orphan", seconds=30))
    wf_id = plan["id"]
    await root_running(system, wf_id)
    child = f"{wf_id}.1"
    # The crash, as the store keeps it: SUBMITTED long ago, an attempt id no job has.
    forged = await system.db.actions.update_one(
        {"_id": child, "state": "WAITING"},
        {"$set": {"state": "SUBMITTED", "external_id": f"{child}#1", "job_id": None, "submitted_at": 0.0,
                  "next_poll_at": 0.0, "attempt": 1, "pending_parents": []}},
    )  # fmt: skip
    assert forged.modified_count == 1
    status, _ = await system.request("POST", f"/api/v1/workflows/{wf_id}/kill")
    assert status == 202
    wf = await wait_state(system, wf_id, "KILLED")
    assert {a["state"] for a in wf["actions"]} == {"KILLED"}


async def test_a_kill_while_the_submitter_makes_the_job_ends_the_action_killed_and_no_job_starts(
    system: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim records the job id the local executor will give the job: a kill that
    comes between the claim and the job finds the id, and fences it (the job is not made
    yet), so the submitter starts nothing and the action ends KILLED, its submitter not
    judged lost first (docs/state-machines.md, "Action")."""
    executor = system.ctx.executor
    held = hold_submitter(monkeypatch, executor, "doomed")
    plan = await system.submit({"name": "doomed", "actions": [shell_action(1, "doomed", seconds=30)]})
    await asyncio.wait_for(held.reached.wait(), 30)  # the action was submitted
    status, _ = await system.request("POST", f"/api/v1/workflows/{plan['id']}/kill")
    assert status == 202
    wf = await wait_state(system, plan["id"], "KILLED", timeout=30)
    assert [a["state"] for a in wf["actions"]] == ["KILLED"]
    held.release.set()
    await held.until_done()
    assert held.job is None and held.refused == "JobFenced"
    assert await executor.find(held.external_id) is None


async def test_a_timed_out_job_leaves_no_process_and_its_retry_runs_alone(system: Api, tmp_path: Path) -> None:
    """A job that started a child, which started a grandchild: its timeout ends all three
    before the attempt is over, so the retry finds none of them, nor does anyone after."""
    marker = f"pingo-tree-{uuid.uuid4().hex}"
    seen = tmp_path / "seen.jsonl"
    retry = {"count": 1, "delaySeconds": 0.1}
    action = spawning_action(1, str(seen), marker, timeoutSeconds=2, retries=retry)
    try:
        wf = await system.run({"name": "tree", "actions": [action]}, timeout=90)
        assert wf["state"] == "FAILED", wf
        assert marked(marker) == []
        attempts = [json.loads(line) for line in seen.read_text().splitlines()]
        assert len(attempts) == 2, attempts
        assert attempts[1]["others"] == [], "the retry ran beside what was left of the first attempt"
    finally:
        for pid in marked(marker):
            os.kill(pid, signal.SIGKILL)


async def killed_fan(store: Store, n: int) -> str:
    """A workflow whose kill has flagged its running root, as the kill's first writes leave
    it; ``n`` children still WAITING for the root, not reached by the kill's bulk yet."""
    wf_id, now = f"wf-{uuid.uuid4().hex[:8]}", time.time()
    await store.workflows.insert_one(
        {"_id": wf_id, "state": "RUNNING", "open_actions": n + 1, "kill_requested": True, "kill_applied": False,
         "kill_requested_at": now, "created_at": now, "owner": "ada"}
    )  # fmt: skip
    root = f"{wf_id}.0"
    children = [f"{wf_id}.{i}" for i in range(1, n + 1)]
    common = {"workflow_id": wf_id, "owner": "ada", "managed": False, "created_at": now, "history": []}
    await store.actions.insert_many(
        [{**common, "_id": root, "name": "root", "state": "RUNNING", "job_id": f"{root}-job", "attempt": 1,
          "kill_requested": True, "finish_lease_at": 0.0, "children": children, "parents": []},
         *({**common, "_id": c, "name": c, "state": "WAITING", "parents": [root], "pending_parents": [root]}
           for c in children)]
    )  # fmt: skip
    return wf_id


async def test_a_killed_root_ends_at_a_cost_its_descendants_do_not_change(settings: Settings, mongo_url: str) -> None:
    """Under load a killed fan's root stayed RUNNING past the minute the kill tests wait:
    its end read each of its 1,500 descendants, one command each, though the kill's bulk
    writes end them. The root's end now costs the same whatever it has below it, and the
    kill still ends everything."""
    async with counted_outcomes(settings, mongo_url, "kill") as c:
        store, outcomes = c.store, c.outcomes
        cost = {}
        for n in (10, 300):
            wf_id = await killed_fan(store, n)
            root = await store.actions.find_one({"_id": f"{wf_id}.0"})
            before = c.commands.sent
            # Its job ended, stopped by the kill: the poller or its notification reports it so.
            await outcomes.apply(root, JobStatus(state=JobState.KILLED, error="killed on request"))
            cost[n] = c.commands.sent - before
            assert (await store.actions.find_one({"_id": root["_id"]}))["state"] == "KILLED"
            # The kill's bulk writes end the rest, and the workflow with them.
            await outcomes.kill_workflow(wf_id)
            assert {d["state"] async for d in store.actions.find({"workflow_id": wf_id})} == {"KILLED"}
            assert (await store.workflows.find_one({"_id": wf_id}))["state"] == "KILLED"
        assert cost[300] == cost[10], cost
