"""Never compute the same thing twice, also when workflows overlap: an action whose
dataset is being computed by a live attempt follows it instead of computing it again,
and exactly one follower carries on when that attempt cannot finish (docs/planning.md,
"Following a computation in flight"; docs/state-machines.md, "Following").

Every job logs each run (``PINGO_EXEC_LOG`` in its configuration), so executions are
counted, not inferred."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store import workflows as wfs
from tests.support.following import action, failed_runs, kill, logging_conf, producer_and_followers, running, runs
from tests.support.following import sweep_member as shared_sweep_member
from tests.support.gates import Gate
from tests.support.submitters import hold_submitter
from tests.support.system import Api
from tests.support.workflows import decisions, shell_action


def logged(log: Path, label: str, seconds: float = 0.0, aid: Any = 1, parents: list = (), **env: str) -> dict:
    """A synth action that appends a line to ``log`` each time it runs."""
    return shell_action(aid, label, parents, seconds=seconds, configurationParameters=logging_conf(log, **env))


def sweep_member(log: Path, tag: str, i: int, root_seconds: float = 1.0, **env: str) -> dict:
    return shared_sweep_member(shell_action, log, tag, i, root_seconds, **env)


async def test_twenty_concurrent_workflows_sharing_a_root_and_a_middle_compute_each_once(
    system: Api, tmp_path: Path
) -> None:
    log = tmp_path / "exec.log"
    plans = await asyncio.gather(*(system.submit(sweep_member(log, "sweep", i)) for i in range(20)))
    done = await asyncio.gather(*(system.wait(p["id"], timeout=120) for p in plans))
    assert [w["state"] for w in done] == ["SUCCEEDED"] * 20
    assert runs(log, "sweep-ingest") == 1 and runs(log, "sweep-features") == 1
    assert all(runs(log, f"sweep-train-{i}") == 1 for i in range(20))
    # One workflow computed the shared actions; every other one followed (or reused what
    # was stored by the time it was planned) and ended REUSED.
    computed = [w for w in done if action(w, 2)["state"] == "FINISHED"]
    assert len(computed) == 1
    followers = [w for w in done if w is not computed[0]]
    assert {action(w, 2)["state"] for w in followers} == {"REUSED"}
    assert any(action(w, 2)["reason"] == "in_flight" for w in followers)
    # Nothing is left claimed: every reader released what it read.
    middle = await system.db.datasets.find_one({"_id": action(computed[0], 2)["hash"]})
    assert middle["state"] == "STORED" and middle["claims"] == [] and middle["producers"] == []


def read_together(monkeypatch: pytest.MonkeyPatch, planners: int = 2) -> None:
    """The ``planners``' batch reads of the datasets they need wait for each other: each
    planner reads the store before any of them writes, as on a loaded machine."""
    get_many = ds.get_many
    read, all_read = 0, asyncio.Event()

    async def together(store: Any, hashes: list[str], *fields: Any) -> dict:
        nonlocal read
        found = await get_many(store, hashes, *fields)
        if fields:
            return found  # not a planner's batch read (the orphan sweep's)
        read += 1
        if read == planners:
            all_read.set()
        if read <= planners:
            await asyncio.wait_for(all_read.wait(), 60)
        return found

    monkeypatch.setattr(ds, "get_many", together)


def created_in_turn(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first planner to create the shared datasets creates them all before the
    second tries: had the second won one of them, the first would follow it, not the
    other way round. The list returned names the first's workflow once it has begun."""
    create_many = ds.create_many
    first: list[str] = []
    created = asyncio.Event()

    async def in_turn(store: Any, docs: list[dict]) -> set[str]:
        if not first:
            first.append(docs[0]["producers"][0].split(".", 1)[0])
            existed = await create_many(store, docs)
            created.set()
            return existed
        await asyncio.wait_for(created.wait(), 60)
        return await create_many(store, docs)

    monkeypatch.setattr(ds, "create_many", in_turn)
    return first


async def test_planners_slower_than_the_computation_they_raced_reuse_what_it_stored(
    system: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Four planners read the store before any of them wrote: each plans to compute the
    # shared root and middle. The first writes at once; the others write only once the
    # first's middle is stored (as a loaded gateway might), so they can no longer follow
    # it: they reuse what it stored, and their roots, which only fed it, are skipped.
    create_many = ds.create_many
    writes = 0
    read_together(monkeypatch, planners=4)

    async def late(store: Any, docs: list[dict]) -> set[str]:
        nonlocal writes
        middle = next((d["_id"] for d in docs if d["producers"][0].endswith(".2")), None)
        writes += middle is not None
        if middle is not None and writes > 1:
            deadline = time.time() + 60
            while (doc := await ds.get(store, middle)) is None or doc["state"] != "STORED":
                assert time.time() < deadline, f"the first workflow's middle was never stored: {doc}"
                await asyncio.sleep(0.05)
        return await create_many(store, docs)

    monkeypatch.setattr(ds, "create_many", late)
    log = tmp_path / "exec.log"
    plans = await asyncio.gather(*(system.submit(sweep_member(log, "late", i)) for i in range(4)))
    done = await asyncio.gather(*(system.wait(p["id"], timeout=120) for p in plans))
    assert [w["state"] for w in done] == ["SUCCEEDED"] * 4
    assert runs(log, "late-ingest") == 1 and runs(log, "late-features") == 1
    assert all(runs(log, f"late-train-{i}") == 1 for i in range(4))
    shared = sorted((action(w, 1)["state"], action(w, 2)["state"], action(w, 2)["reason"]) for w in done)
    assert shared == [("FINISHED", "FINISHED", "not_stored")] + [("SKIPPED", "REUSED", "stored")] * 3


async def test_a_planner_that_follows_a_producer_as_its_plan_is_written_does_not_compute_it_again(
    system: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two planners read the store before either wrote; the first creates the shared
    # datasets, so the second follows its middle. The first has not written its actions
    # yet when the second tries to register (refused: no such action), and writes them and
    # moves its workflow to RUNNING while the second asks whether it is still being planned
    # (its store reads slowed, as on a loaded machine). The second must still follow it:
    # before, it found the action not written and the workflow no longer planning, and
    # became a second producer of the middle (its root, which followed, ran once).
    insert_many = acts.insert_many
    get_workflow, add_follower = wfs.get, acts.add_follower
    refused, running_now = asyncio.Event(), asyncio.Event()
    read_together(monkeypatch)
    first = created_in_turn(monkeypatch)  # the workflow whose planner created the datasets

    async def registering(store: Any, producer_id: str, follower_id: str) -> bool:
        ok = await add_follower(store, producer_id, follower_id)
        if first and producer_id == f"{first[0]}.2" and not ok:
            refused.set()
        return ok

    async def held_insert(store: Any, docs: list[dict]) -> None:
        if first and docs[0]["workflow_id"] == first[0]:
            await asyncio.wait_for(refused.wait(), 60)  # the second planner was refused first
        await insert_many(store, docs)

    async def slow_read(store: Any, workflow_id: str, fields: dict | None = None) -> dict | None:
        if first and workflow_id == first[0] and refused.is_set() and not running_now.is_set():
            deadline = time.time() + 60
            while (await get_workflow(store, workflow_id, {"state": 1}) or {}).get("state") == "PLANNING":
                assert time.time() < deadline, "the first workflow's plan was never written"
                await asyncio.sleep(0.02)
            running_now.set()
        return await get_workflow(store, workflow_id, fields)

    monkeypatch.setattr(acts, "add_follower", registering)
    monkeypatch.setattr(acts, "insert_many", held_insert)
    monkeypatch.setattr(wfs, "get", slow_read)
    log = tmp_path / "exec.log"
    plans = await asyncio.gather(*(system.submit(sweep_member(log, "written", i)) for i in range(2)))
    assert refused.is_set() and running_now.is_set()  # the interleaving happened
    done = await asyncio.gather(*(system.wait(p["id"]) for p in plans))
    assert [w["state"] for w in done] == ["SUCCEEDED"] * 2
    assert runs(log, "written-ingest") == 1 and runs(log, "written-features") == 1
    second = next(w for w in done if w["id"] != first[0])
    assert (action(second, 1)["state"], action(second, 2)["state"]) == ("SKIPPED", "REUSED")
    assert action(second, 2)["reason"] == "in_flight" and action(second, 2)["follows"] == f"{first[0]}.2"


@pytest.mark.settings(settle_interval=3600)  # no repair sweep: the producer's own end must resolve it
async def test_a_follower_registered_while_its_producer_is_being_planned_completes_when_the_producer_does(
    system: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A producer's success looks its followers up only if its ``followers`` lists one or
    # its dataset notes one it may not list (docs/performance.md, "A chain's hop"). Here
    # the second planner is refused by the first's middle (not written yet) and finds
    # the first still planning: it follows a producer that will never list it.
    insert_many = acts.insert_many
    being_planned = acts.being_planned
    unlisted = asyncio.Event()
    read_together(monkeypatch)
    first = created_in_turn(monkeypatch)

    async def planned_yet(store: Any, action_id: str) -> bool:
        answer = await being_planned(store, action_id)
        if first and action_id == f"{first[0]}.2" and answer:
            unlisted.set()
        return answer

    async def held_insert(store: Any, docs: list[dict]) -> None:
        if first and docs[0]["workflow_id"] == first[0]:
            await asyncio.wait_for(unlisted.wait(), 60)
        await insert_many(store, docs)

    monkeypatch.setattr(acts, "being_planned", planned_yet)
    monkeypatch.setattr(acts, "insert_many", held_insert)
    log = tmp_path / "exec.log"
    plans = await asyncio.gather(*(system.submit(sweep_member(log, "unlisted", i, root_seconds=0.2)) for i in range(2)))
    assert unlisted.is_set()  # the interleaving happened
    done = await asyncio.gather(*(system.wait(p["id"], timeout=60) for p in plans))
    assert [w["state"] for w in done] == ["SUCCEEDED"] * 2
    assert runs(log, "unlisted-ingest") == 1 and runs(log, "unlisted-features") == 1
    second = next(w for w in done if w["id"] != first[0])
    producer = await system.db.actions.find_one({"_id": f"{first[0]}.2"})
    assert action(second, 2)["id"] not in producer["followers"]  # it was resolved all the same
    assert action(second, 2)["state"] == "REUSED" and action(second, 2)["follows"] == f"{first[0]}.2"


async def test_an_attempt_taken_back_from_a_submitter_slower_than_its_lease_never_starts_its_job(
    system: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The poller takes back an attempt whose job is not recorded ``PINGO_STALE_AFTER``
    after its submission, as if its submitter had died (docs/state-machines.md, "Action").
    A submitter that was only slow (a loaded machine) must not start that attempt's job
    after the next attempt's: two live attempts compute the dataset twice."""
    executor = system.ctx.executor

    async def taken_back(job: Any) -> None:
        # Held until the poller took this attempt back and the next one was claimed.
        deadline = time.time() + 60
        while (await acts.get(system.ctx.store, job.action_id, {"attempt": 1}))["attempt"] < 2:
            assert time.time() < deadline, "the attempt was never taken back from its slow submitter"
            await asyncio.sleep(0.05)

    late = hold_submitter(monkeypatch, executor, "slow-one", until=taken_back)
    log = tmp_path / "exec.log"
    wf = await system.run({"name": "slow", "actions": [logged(log, "slow-one")]})
    assert wf["state"] == "SUCCEEDED"
    assert [a["outcome"] for a in action(wf, 1)["attemptLog"]] == ["lost", "succeeded"]
    await late.until_done()
    assert late.job is None  # its submit was refused: no job of the attempt taken back
    assert await executor.find(late.external_id) is None
    assert runs(log, "slow-one") == 1


async def test_a_submitter_lost_between_the_claim_and_its_job_gets_its_attempt_retried_and_run_once(
    system: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local executor names a job before it makes it, so the claim records the job id
    (docs/performance.md, "A chain's hop"): a submitter lost after its claim leaves an
    attempt whose job id no job has. The poller takes it back ``PINGO_STALE_AFTER`` later,
    the next attempt runs, and the lost submitter, if it ever comes back, starts nothing."""
    executor = system.ctx.executor
    seen: dict[str, Any] = {}

    async def look(self: Any, job: Any) -> None:
        doc = await acts.get(system.ctx.store, job.action_id, {"job_id": 1, "state": 1})
        seen.update(recorded=doc, status=(await self.status(doc["job_id"])).state)

    lost = hold_submitter(monkeypatch, executor, "lost-one", on_hold=look)  # as good as dead until let go
    log = tmp_path / "exec.log"
    wf = await system.run({"name": "lost", "actions": [logged(log, "lost-one")]})
    assert wf["state"] == "SUCCEEDED"
    # The claim recorded the job id, before any job had it.
    assert seen["recorded"] == {
        "_id": f"{wf['id']}.1",
        "state": "SUBMITTED",
        "job_id": executor.job_id(lost.external_id),
    }
    assert seen["status"] == "UNKNOWN"
    assert [a["outcome"] for a in action(wf, 1)["attemptLog"]] == ["lost", "succeeded"]
    lost.release.set()
    await lost.until_done()
    assert lost.job is None  # its submit was refused: the attempt taken back has no job
    assert await executor.find(lost.external_id) is None
    assert runs(log, "lost-one") == 1


async def test_a_workflow_submitted_while_the_shared_action_runs_follows_it(
    system: Api, tmp_path: Path, gate: Gate
) -> None:
    log = tmp_path / "exec.log"
    first = await system.submit(sweep_member(log, "late", 0, root_seconds=0.0, **gate.env))
    await running(system, first["id"], 1)
    second = await system.submit(sweep_member(log, "late", 1, root_seconds=0.0, **gate.env))
    assert decisions(second) == {1: "reuse", 2: "reuse", 3: "compute"}
    middle = action(await system.workflow(second["id"]), 2)
    assert middle["state"] == "FOLLOWING" and middle["reason"] == "in_flight"
    assert middle["follows"] == f"{first['id']}.2"
    assert action(await system.workflow(second["id"]), 1)["state"] == "SKIPPED"  # it only fed a follower
    assert action(await system.workflow(second["id"]), 3)["state"] == "WAITING"  # waits for what it follows
    gate.open()
    a, b = await asyncio.gather(system.wait(first["id"]), system.wait(second["id"]))
    assert a["state"] == b["state"] == "SUCCEEDED"
    assert action(b, 2)["state"] == "REUSED"
    assert runs(log, "late-ingest") == 1 and runs(log, "late-features") == 1


async def test_one_workflow_with_two_identical_branches_computes_the_branch_once(system: Api, tmp_path: Path) -> None:
    log = tmp_path / "exec.log"
    body = {
        "name": "twins",
        "actions": [
            logged(log, "twin-root", 0.0, 1),
            logged(log, "twin-branch", 0.5, 2, [1]),
            logged(log, "twin-branch", 0.5, 3, [1]),
            logged(log, "twin-join", 0.0, 4, [2, 3]),
        ],
    }
    plan = await system.submit(body)
    reasons = {a["localId"]: a["reason"] for a in plan["actions"]}
    assert sorted([reasons[2], reasons[3]]) == ["in_flight", "not_stored"]
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED"
    assert runs(log, "twin-branch") == 1
    assert {action(wf, 2)["state"], action(wf, 3)["state"]} == {"FINISHED", "REUSED"}
    assert runs(log, "twin-join") == 1


async def test_a_producer_that_fails_once_is_taken_over_by_exactly_one_follower(
    system: Api, tmp_path: Path, gate: Gate
) -> None:
    log, marker = tmp_path / "exec.log", tmp_path / "failed-once"

    def member(i: int) -> dict:
        return sweep_member(log, "flaky", i, root_seconds=0.0, SYNTH_FAIL_ONCE=str(marker), **gate.env)

    first = await system.submit(member(0))
    await running(system, first["id"], 1)
    others = [await system.submit(member(i)) for i in (1, 2, 3)]
    assert all(action(o, 2)["reason"] == "in_flight" for o in others)
    gate.open()
    done = await asyncio.gather(*(system.wait(w["id"]) for w in (first, *others)))
    assert done[0]["state"] == "FAILED"
    assert action(done[0], 1)["reason"] == "action_failed"
    assert [w["state"] for w in done[1:]] == ["SUCCEEDED"] * 3
    assert failed_runs(log, "flaky-ingest") == 1 and runs(log, "flaky-ingest") == 1
    assert runs(log, "flaky-features") == 1
    # Exactly one follower took the computation over; the others reused its output.
    successors = [w for w in done[1:] if action(w, 2)["reason"] == "takeover"]
    assert len(successors) == 1
    assert action(successors[0], 2)["takeoverOf"] == f"{first['id']}.2"
    assert action(successors[0], 1)["state"] == "FINISHED"  # its skipped input was computed again for it
    assert sorted(action(w, 2)["state"] for w in done[1:]) == ["FINISHED", "REUSED", "REUSED"]


async def test_followers_fail_with_the_computation_past_the_takeover_limit(
    system: Api, tmp_path: Path, gate: Gate
) -> None:
    """A computation that itself fails is not retried forever by its followers."""
    log = tmp_path / "exec.log"
    root = logged(log, "broken-root", 0.0, 1, SYNTH_FAIL="always", **gate.env)
    bodies = [{"name": "broken", "actions": [root, logged(log, f"broken-child-{i}", 0.0, 2, [1])]} for i in range(3)]
    first = await system.submit(bodies[0])
    await running(system, first["id"], 1)
    followers = [await system.submit(b) for b in bodies[1:]]
    assert all(action(f, 1)["reason"] == "in_flight" for f in followers)
    gate.open()
    done = [await system.wait(w["id"]) for w in (first, *followers)]
    assert [w["state"] for w in done] == ["FAILED"] * 3
    reasons = sorted(action(w, 1)["reason"] for w in done)
    # The first attempt failed, one follower tried again (the limit is 1) and failed, the last gave up.
    assert reasons == ["action_failed", "action_failed", "upstream_failed"], reasons
    assert failed_runs(log, "broken-root") == 2
    upstream = next(w for w in done if action(w, 1)["reason"] == "upstream_failed")
    assert "failed in" in action(upstream, 1)["error"]


async def test_killing_the_producers_workflow_leaves_its_job_running_for_the_followers(
    system: Api, tmp_path: Path, gate: Gate
) -> None:
    log = tmp_path / "exec.log"
    first, others = await producer_and_followers(system, sweep_member, log, "handed", gate)
    await kill(system, first["id"])
    await system.wait(first["id"])  # its job handed over as it runs
    gate.open()
    killed, *rest = await asyncio.gather(*(system.wait(w["id"]) for w in (first, *others)))
    assert killed["state"] == "KILLED"
    assert [w["state"] for w in rest] == ["SUCCEEDED", "SUCCEEDED"]
    assert runs(log, "handed-ingest") == 1  # the job ran on for the others: not computed again
    assert runs(log, "handed-features") == 1
    adopter = [w for w in rest if action(w, 2)["reason"] == "takeover"]
    assert len(adopter) == 1
    root_of = {w["id"]: action(w, 1) for w in rest}
    assert sorted(a["state"] for a in root_of.values()) == ["FINISHED", "SKIPPED"]  # one adopted the job
    assert action(killed, 1)["state"] == "KILLED"


async def test_killing_every_workflow_that_needs_a_job_kills_it_and_releases_its_claims(
    system: Api, tmp_path: Path, gate: Gate
) -> None:
    log = tmp_path / "exec.log"
    first, others = await producer_and_followers(system, sweep_member, log, "nobody", gate)
    for w in (first, *others):
        await kill(system, w["id"])
    done = await asyncio.gather(*(system.wait(w["id"]) for w in (first, *others)))
    assert [w["state"] for w in done] == ["KILLED"] * 3
    gate.open()
    await asyncio.sleep(1.0)  # the root would have finished by now had it not been killed
    assert runs(log, "nobody-ingest") == 0
    for local_id in (1, 2):
        d = await system.db.datasets.find_one({"_id": action(done[0], local_id)["hash"]})
        assert d["claims"] == [] and d["producers"] == [], d
        assert d["state"] == "DELETED"


async def test_a_successor_whose_workflow_is_killed_as_it_takes_over_leaves_nothing_waiting_or_claimed(
    system: Api, tmp_path: Path, gate: Gate
) -> None:
    """The race of a kill with a takeover: a follower elected successor just before its
    own workflow's kill re-plans its inputs after the bulk kill passed, so its skipped
    root starts following the producer's root. That root must still end when the
    producer's does, and nothing the takeover claimed may stay claimed."""
    log = tmp_path / "exec.log"
    first, (late,) = await producer_and_followers(system, sweep_member, log, "stale", gate, followers=1)
    store = system.ctx.store
    elected = await acts.get(store, action(late, 2)["id"])  # as the election read it
    producer = await acts.get(store, action(first, 2)["id"])
    assert elected["state"] == "FOLLOWING" and elected["follows"] == producer["_id"]
    await kill(system, late["id"])
    assert (await system.wait(late["id"]))["state"] == "KILLED"

    following = system.ctx.outcomes("test").following
    assert not await following.take_over(elected, producer, "killed", job_alive=False)
    root = await acts.get(store, action(late, 1)["id"])
    assert root["state"] == "FOLLOWING" and root["follows"] == action(first, 1)["id"]  # re-planned after the kill

    await kill(system, first["id"])
    assert (await system.wait(first["id"]))["state"] == "KILLED"
    gate.open()  # its job was killed: it never gets past the gate
    deadline = time.time() + 15
    while (root := await acts.get(store, root["_id"]))["state"] == "FOLLOWING":
        assert time.time() < deadline, "the re-planned root still follows a producer that ended"
        await asyncio.sleep(0.1)
    assert root["state"] == "KILLED"
    for local_id in (1, 2):
        d = await system.db.datasets.find_one({"_id": action(first, local_id)["hash"]})
        assert d["claims"] == [] and d["producers"] == [] and d["state"] == "DELETED", d
    assert runs(log, "stale-ingest") == 0


async def test_a_successor_its_workflows_kill_has_flagged_does_not_take_over(
    system: Api, tmp_path: Path, gate: Gate
) -> None:
    """A kill flags every action of the workflow, then ends them one state at a time
    (WAITING before FOLLOWING). A follower elected before the flag must not take over
    after it: moved to WAITING past the kill's WAITING write, it would wait for ever in a
    killed workflow. It stays FOLLOWING, and the kill ends it."""
    log = tmp_path / "exec.log"
    first, (late,) = await producer_and_followers(system, sweep_member, log, "flagged", gate, followers=1)
    store = system.ctx.store
    elected = await acts.get(store, action(late, 2)["id"])  # as the election read it
    producer = await acts.get(store, action(first, 2)["id"])
    await acts.flag_kill(store, late["id"], time.time())  # the kill's first write; its moves not yet

    following = system.ctx.outcomes("test").following
    assert not await following.take_over(elected, producer, "killed", job_alive=False)
    doc = await acts.get(store, elected["_id"])
    assert doc["state"] == "FOLLOWING" and doc["follows"] == producer["_id"], doc["state"]

    for wf in (late, first):
        await kill(system, wf["id"])
        assert (await system.wait(wf["id"]))["state"] == "KILLED"
    gate.open()  # its job was killed: it never gets past the gate
    for local_id in (1, 2):
        d = await system.db.datasets.find_one({"_id": action(first, local_id)["hash"]})
        assert d["claims"] == [] and d["producers"] == [] and d["state"] == "DELETED", d
    assert runs(log, "flagged-ingest") == 0


async def test_an_input_deleted_after_planning_is_computed_again_and_the_workflow_heals(
    system: Api, tmp_path: Path, gate: Gate
) -> None:
    log = tmp_path / "exec.log"
    base = [logged(log, "heal-a", 0.0, 1), logged(log, "heal-b", 0.0, 2, [1])]
    assert (await system.run({"name": "heal", "actions": base}))["state"] == "SUCCEEDED"
    # b is reused; c runs until the test opens its gate, then d reads both b and c.
    body = {
        "name": "heal",
        "actions": [*base, logged(log, "heal-c", 0.0, 3, **gate.env), logged(log, "heal-d", 0.0, 4, [2, 3])],
    }
    plan = await system.submit(body)
    assert decisions(plan) == {1: "reuse", 2: "reuse", 3: "compute", 4: "compute"}
    await running(system, plan["id"], 3)
    b = await system.db.datasets.find_one({"_id": action(plan, 2)["hash"]})
    shutil.rmtree(b["path"])  # gone between planning and d's start
    gate.open()
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED", [(a["localId"], a["state"], a.get("error")) for a in wf["actions"]]
    assert runs(log, "heal-b") == 2 and runs(log, "heal-a") == 1  # a was still there: only b again
    assert action(wf, 2)["state"] == "FINISHED" and action(wf, 2)["reason"] == "replanned"
    d = await system.db.datasets.find_one({"_id": action(plan, 2)["hash"]})
    assert d["state"] == "STORED" and Path(d["path"], "part-00000").stat().st_size == 4096  # d read a whole input


async def test_a_producer_whose_action_manager_died_is_recovered_after_its_lease_and_followers_reuse_it(
    processes, tmp_path: Path
) -> None:
    """The producer is a document, not a process: SIGKILLed right after submitting the
    shared root's job (before recording it), its action manager leaves the root SUBMITTED
    with no job id; once the lease (PINGO_STALE_AFTER) expires the poller finds the job by
    its external id, and the follower, which never waited on a dead process, reuses it."""
    log = tmp_path / "exec.log"
    processes.stop("action_manager")
    processes.start("action_manager", tag="crashing", PINGO_FAULT_CRASH_AFTER_SUBMIT="true")
    first = await processes.submit(sweep_member(log, "crash", 0, root_seconds=1.0))
    async with asyncio.timeout(30):
        while processes.procs["crashing"].poll() is None:
            await asyncio.sleep(0.1)
    assert processes.procs.pop("crashing").returncode == 137
    second = await processes.submit(sweep_member(log, "crash", 1, root_seconds=1.0))
    assert action(second, 2)["reason"] == "in_flight"
    processes.start("action_manager", tag="survivor")
    a, b = await asyncio.gather(processes.wait(first["id"], 90), processes.wait(second["id"], 90))
    assert a["state"] == b["state"] == "SUCCEEDED"
    assert action(b, 2)["state"] == "REUSED"
    assert runs(log, "crash-ingest") == 1 and runs(log, "crash-features") == 1
    assert action(a, 1)["attempts"] == 1  # the job was found again, not submitted twice
