"""Following a computation in flight, taking it over, and healing lost data, on the Hadoop
path: the five services as OS processes over RabbitMQ, the Oozie executor and WebHDFS
storage against the emulator (docs/planning.md, "Following a computation in flight",
"Re-planning", "Lost datasets"; the local-executor counterpart is tests/system/test_following.py).

Executions are counted where they happen: the emulator counts each job process it starts
(``executions``, keyed by Oozie job id; the job's app name is ``pingo-<action name>``), and
each job appends a line to ``PINGO_EXEC_LOG`` (a configurationParameter, which the Oozie
executor passes to a SHELL action as an ``<env-var>``), so a failed run is told apart from
a successful one."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

from shared.storage.names import path_name
from shared.store.transitions import decode
from tests.support.following import (
    action,
    failed_runs,
    kill,
    logging_conf,
    producer_and_followers,
    running,
    runs,
    states,
)
from tests.support.following import sweep_member as shared_sweep_member
from tests.support.gates import Gate
from tests.support.workflows import decisions
from tests.system import test_hadoop_system
from tests.system.test_hadoop_system import Hadoop, dataset_in, hdfs_action

hadoop = test_hadoop_system.hadoop  # the fixture: five services as processes and the emulator


def job(log: Path, label: str, aid: Any, parents: list = (), seconds: float = 0.0, **env: str) -> dict:
    """A synth action on the cluster that logs each run to ``log`` (through its environment)."""
    return hdfs_action(aid, label, parents, seconds=seconds, configurationParameters=logging_conf(log, **env))


def sweep_member(log: Path, tag: str, i: int, root_seconds: float = 1.0, **env: str) -> dict:
    return shared_sweep_member(hdfs_action, log, tag, i, root_seconds, **env)


def oozie_jobs(hadoop: Hadoop, label: str) -> list:
    """The emulator's Oozie jobs of the action named ``label``."""
    app = path_name(f"pingo-{label}")
    return [j for j in hadoop.emulator.engine.jobs.values() if j.app_name == app]


def executions(hadoop: Hadoop, label: str) -> int:
    """Job processes the emulator started for the action named ``label``."""
    counted = hadoop.executions()
    return sum(counted.get(j.id, 0) for j in oozie_jobs(hadoop, label))


async def oozie_status(hadoop: Hadoop, job_id: str) -> str:
    async with hadoop.http.get(f"{hadoop.emulator.oozie_url}/v2/job/{job_id}", params={"show": "status"}) as r:
        assert r.status == 200
        return (await r.json(content_type=None))["status"]


async def job_of(hadoop: Hadoop, action_id: str) -> str:
    job_id = (await hadoop.db.actions.find_one({"_id": action_id}))["job_id"]
    assert job_id, action_id
    return job_id


async def test_a_sweep_of_concurrent_workflows_computes_its_shared_actions_once_on_the_cluster(
    hadoop: Hadoop, tmp_path: Path
) -> None:
    log, n = tmp_path / "exec.log", 8
    plans = await asyncio.gather(*(hadoop.submit(sweep_member(log, "hsweep", i)) for i in range(n)))
    done = await asyncio.gather(*(hadoop.wait(p["id"], timeout=120) for p in plans))
    assert [w["state"] for w in done] == ["SUCCEEDED"] * n, [states(w) for w in done]
    # One Oozie job each for the shared actions, one process each: nothing ran twice.
    for label in ("hsweep-ingest", "hsweep-features"):
        assert len(oozie_jobs(hadoop, label)) == 1 and executions(hadoop, label) == 1, label
        assert runs(log, label) == 1
    assert all(executions(hadoop, f"hsweep-train-{i}") == 1 == runs(log, f"hsweep-train-{i}") for i in range(n))
    assert len(hadoop.executions()) == n + 2
    # One workflow computed the middle; every other one followed it (or reused what was
    # stored by the time it was planned) and ended REUSED.
    computed = [w for w in done if action(w, 2)["state"] == "FINISHED"]
    assert len(computed) == 1
    followers = [w for w in done if w is not computed[0]]
    assert {action(w, 2)["state"] for w in followers} == {"REUSED"}
    assert any(action(w, 2)["reason"] == "in_flight" for w in followers)
    # Nothing is left claimed: every reader released what it read.
    for local_id in (1, 2):
        d = await hadoop.db.datasets.find_one({"_id": action(computed[0], local_id)["hash"]})
        assert d["state"] == "STORED" and d["claims"] == [] and d["producers"] == [], d
        assert hadoop.hdfs_path(d["path"]).joinpath("part-00000").is_file()


async def test_a_workflow_submitted_while_the_shared_job_runs_on_oozie_follows_it(
    hadoop: Hadoop, tmp_path: Path, gate: Gate
) -> None:
    log = tmp_path / "exec.log"
    first = await hadoop.submit(sweep_member(log, "hlate", 0, root_seconds=0.0, **gate.env))
    await running(hadoop, first["id"], 1)
    second = await hadoop.submit(sweep_member(log, "hlate", 1, root_seconds=0.0, **gate.env))
    assert decisions(second) == {1: "reuse", 2: "reuse", 3: "compute"}
    now = await hadoop.workflow(second["id"])
    middle = action(now, 2)
    assert middle["state"] == "FOLLOWING" and middle["reason"] == "in_flight", states(now)
    assert middle["follows"] == f"{first['id']}.2"
    assert action(now, 1)["state"] == "SKIPPED"  # it only fed a follower
    assert action(now, 3)["state"] == "WAITING"  # waits for what it follows
    assert await oozie_status(hadoop, await job_of(hadoop, action(first, 1)["id"])) == "RUNNING"
    gate.open()
    a, b = await asyncio.gather(hadoop.wait(first["id"]), hadoop.wait(second["id"]))
    assert a["state"] == b["state"] == "SUCCEEDED", (states(a), states(b))
    assert action(b, 2)["state"] == "REUSED" and action(a, 2)["state"] == "FINISHED"
    assert executions(hadoop, "hlate-ingest") == 1 and executions(hadoop, "hlate-features") == 1
    assert runs(log, "hlate-ingest") == 1 and runs(log, "hlate-features") == 1
    assert executions(hadoop, "hlate-train-0") == executions(hadoop, "hlate-train-1") == 1


async def test_killing_the_producers_workflow_leaves_its_oozie_job_running_for_the_followers(
    hadoop: Hadoop, tmp_path: Path, gate: Gate
) -> None:
    log = tmp_path / "exec.log"
    first, others = await producer_and_followers(hadoop, sweep_member, log, "hhanded", gate)
    root_job = await job_of(hadoop, action(first, 1)["id"])
    await kill(hadoop, first["id"])
    await hadoop.wait(first["id"])  # its job handed over as it runs
    gate.open()
    killed, *rest = await asyncio.gather(*(hadoop.wait(w["id"]) for w in (first, *others)))
    assert killed["state"] == "KILLED", states(killed)
    assert [w["state"] for w in rest] == ["SUCCEEDED", "SUCCEEDED"], [states(w) for w in rest]
    assert action(killed, 1)["state"] == "KILLED"
    # The Oozie job was not killed: it ran on for the others, and nothing was computed again.
    assert await oozie_status(hadoop, root_job) == "SUCCEEDED"
    assert len(oozie_jobs(hadoop, "hhanded-ingest")) == 1 and executions(hadoop, "hhanded-ingest") == 1
    assert runs(log, "hhanded-ingest") == 1
    assert executions(hadoop, "hhanded-features") == 1 and runs(log, "hhanded-features") == 1
    adopter = [w for w in rest if action(w, 2)["reason"] == "takeover"]
    assert len(adopter) == 1, [states(w) for w in rest]
    assert sorted(action(w, 1)["state"] for w in rest) == ["FINISHED", "SKIPPED"]  # one adopted the job
    adopted = next(action(w, 1) for w in rest if action(w, 1)["state"] == "FINISHED")
    assert adopted["reason"] == "takeover" and adopted["takeoverOf"] == f"{first['id']}.1"
    assert await job_of(hadoop, adopted["id"]) == root_job  # the same Oozie job, not a new one
    assert sorted(action(w, 2)["state"] for w in rest) == ["FINISHED", "REUSED"]
    root = await hadoop.db.datasets.find_one({"_id": action(killed, 1)["hash"]})
    assert root["state"] == "STORED" and root["claims"] == [] and root["producers"] == [], root


async def test_killing_every_workflow_that_needs_an_oozie_job_kills_it_and_releases_its_claims(
    hadoop: Hadoop, tmp_path: Path, gate: Gate
) -> None:
    log = tmp_path / "exec.log"
    first, others = await producer_and_followers(hadoop, sweep_member, log, "hnobody", gate)
    root_job = await job_of(hadoop, action(first, 1)["id"])
    for w in (first, *others):
        await kill(hadoop, w["id"])
    done = await asyncio.gather(*(hadoop.wait(w["id"]) for w in (first, *others)))
    assert [w["state"] for w in done] == ["KILLED"] * 3, [states(w) for w in done]
    # Nobody needs the job any more: it is killed on Oozie, and it never wrote its output.
    assert len(oozie_jobs(hadoop, "hnobody-ingest")) == 1
    deadline = time.time() + 15
    while (status := await oozie_status(hadoop, root_job)) != "KILLED":
        assert time.time() < deadline, f"the root's Oozie job is still {status}"
        await asyncio.sleep(0.2)
    gate.open()
    await asyncio.sleep(1.0)  # the root would have finished by now had its job not been killed
    assert runs(log, "hnobody-ingest") == 0
    assert not oozie_jobs(hadoop, "hnobody-features")  # the middle never started
    for local_id in (1, 2):
        d = await dataset_in(hadoop, action(done[0], local_id)["hash"], "DELETED")
        assert d["claims"] == [] and d["producers"] == [], d


async def test_a_stored_dataset_deleted_from_hdfs_is_computed_again_by_the_next_workflow(
    hadoop: Hadoop, tmp_path: Path
) -> None:
    log = tmp_path / "exec.log"

    def body(leaf: str) -> dict:
        return {
            "name": "hlost",
            "actions": [job(log, "hlost-a", 1), job(log, "hlost-b", 2, [1]), job(log, leaf, 3, [2])],
        }

    first = await hadoop.run(body("hlost-c"))
    assert first["state"] == "SUCCEEDED", states(first)
    b = action(first, 2)["hash"]
    doc = await hadoop.db.datasets.find_one({"_id": b})
    assert doc["state"] == "STORED"
    # Removed through WebHDFS by someone else (an admin's cleanup), not by Pingo.
    url = f"{hadoop.emulator.namenode_url}/webhdfs/v1{doc['path']}"
    async with hadoop.http.delete(url, params={"op": "DELETE", "recursive": "true", "user.name": "admin"}) as r:
        assert r.status == 200 and (await r.json(content_type=None))["boolean"] is True
    assert not hadoop.hdfs_path(doc["path"]).exists()

    plan = await hadoop.submit(body("hlost-d"))
    assert decisions(plan) == {1: "reuse", 2: "compute", 3: "compute"}
    wf = await hadoop.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED", states(wf)
    assert executions(hadoop, "hlost-b") == 2 == runs(log, "hlost-b")
    assert executions(hadoop, "hlost-a") == 1  # still there: reused, not computed again
    again = decode(await hadoop.db.datasets.find_one({"_id": b}))
    assert ("LOST", "lost") in [(h["state"], h.get("note")) for h in again["history"]]
    assert again["lost_reason"] == "missing"
    assert again["state"] == "STORED" and again["size"] == doc["size"]
    assert hadoop.hdfs_path(again["path"]).joinpath("part-00000").stat().st_size == 4096


async def test_an_input_deleted_from_hdfs_after_planning_is_computed_again_and_the_workflow_heals(
    hadoop: Hadoop, tmp_path: Path, gate: Gate
) -> None:
    log = tmp_path / "exec.log"
    base = [job(log, "hheal-a", 1), job(log, "hheal-b", 2, [1])]
    seed = await hadoop.run({"name": "hheal", "actions": base})
    assert seed["state"] == "SUCCEEDED", states(seed)
    # b is reused; c runs on Oozie until the test opens its gate, then d reads both b and c.
    body = {
        "name": "hheal",
        "actions": [*base, job(log, "hheal-c", 3, **gate.env), job(log, "hheal-d", 4, [2, 3])],
    }
    plan = await hadoop.submit(body)
    assert decisions(plan) == {1: "reuse", 2: "reuse", 3: "compute", 4: "compute"}
    await running(hadoop, plan["id"], 3)
    b = await hadoop.db.datasets.find_one({"_id": action(plan, 2)["hash"]})
    assert b["state"] == "LEAF"  # the seed's leaf, reused by this plan
    # Gone from the emulator's disk, behind Pingo's back, between planning and d's start.
    shutil.rmtree(hadoop.hdfs_path(b["path"]))
    gate.open()
    wf = await hadoop.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED", states(wf)
    assert executions(hadoop, "hheal-b") == 2 == runs(log, "hheal-b")
    assert executions(hadoop, "hheal-a") == 1  # a was still there: only b again
    assert executions(hadoop, "hheal-d") == 1  # d waited for b instead of failing on a missing input
    assert action(wf, 2)["state"] == "FINISHED" and action(wf, 2)["reason"] == "replanned"
    assert action(wf, 4)["state"] == "FINISHED"
    d = decode(await hadoop.db.datasets.find_one({"_id": action(plan, 2)["hash"]}))
    assert ("LOST", "lost") in [(h["state"], h.get("note")) for h in d["history"]]
    assert d["state"] == "STORED" and hadoop.hdfs_path(d["path"]).joinpath("part-00000").stat().st_size == 4096
    lineage = hadoop.hdfs_path(action(wf, 4)["outputPath"]).joinpath("_lineage").read_text().split("\n")[1:-1]
    assert lineage == [b["path"], action(wf, 3)["outputPath"]]  # d read both, b's recomputed output


async def test_a_producer_failing_its_first_attempt_on_oozie_is_taken_over_by_exactly_one_follower(
    hadoop: Hadoop, tmp_path: Path, gate: Gate
) -> None:
    log, marker = tmp_path / "exec.log", tmp_path / "failed-once"

    def member(i: int) -> dict:
        return sweep_member(log, "hflaky", i, root_seconds=0.0, SYNTH_FAIL_ONCE=str(marker), **gate.env)

    first = await hadoop.submit(member(0))
    await running(hadoop, first["id"], 1)
    others = [await hadoop.submit(member(i)) for i in (1, 2, 3)]
    assert all(action(o, 2)["reason"] == "in_flight" for o in others)
    gate.open()
    done = await asyncio.gather(*(hadoop.wait(w["id"]) for w in (first, *others)))
    assert done[0]["state"] == "FAILED", states(done[0])
    assert action(done[0], 1)["reason"] == "action_failed"
    assert [w["state"] for w in done[1:]] == ["SUCCEEDED"] * 3, [states(w) for w in done[1:]]
    assert marker.exists()  # the job's environment carried the marker
    # Two Oozie jobs for the root: the failed one and one recomputation, nothing more.
    assert executions(hadoop, "hflaky-ingest") == 2 and len(oozie_jobs(hadoop, "hflaky-ingest")) == 2
    assert failed_runs(log, "hflaky-ingest") == 1 and runs(log, "hflaky-ingest") == 1
    assert executions(hadoop, "hflaky-features") == 1 and runs(log, "hflaky-features") == 1
    # Exactly one follower took the computation over; the others reused its output.
    successors = [w for w in done[1:] if action(w, 2)["reason"] == "takeover"]
    assert len(successors) == 1, [states(w) for w in done[1:]]
    assert action(successors[0], 2)["takeoverOf"] == f"{first['id']}.2"
    assert action(successors[0], 1)["state"] == "FINISHED"  # its skipped input was computed again for it
    assert sorted(action(w, 2)["state"] for w in done[1:]) == ["FINISHED", "REUSED", "REUSED"]
