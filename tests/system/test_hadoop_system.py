"""The full system (five services as separate processes, RabbitMQ) on the Hadoop emulator:
Oozie executor, WebHDFS storage, callbacks with polling as the safety net.

What a user sees of a workflow run, reused, lost, changed, failed, killed and curated by
hand on Hadoop is also tested on two targets, the emulator and the real mini cluster with
the real Oozie, in tests/system/test_hadoop_two_targets.py (docs/testing.md, "Two
targets"). These stay emulator-only, each for what only the emulator gives:
- the multilevel run: five actions over separate processes, each job's process counted
  by the emulator (``executions``);
- notifications all dropped, duplicated and reordered: the emulator's notifier's fault
  knobs (real Oozie sends each notification once), with its counts of what it dropped
  and duplicated;
- a forged callback: a check of the callback service, the same whatever the target;
- the submitter killed between submission and record: a fault of Pingo's process
  (``PINGO_FAULT_CRASH_AFTER_SUBMIT``), counted by the emulator's submissions;
- the kill with a shared dataset reused and its claim released: a job that hangs on
  demand (``hang_actions``), beside a seed workflow (on real YARN a second launcher);
- a jar replaced on HDFS: COMMAND_LINE jobs from jars compiled per test;
- the failed action's workflow: the managed root's bytes compared with the emulator's
  disk;
- the committed checksum computed from the emulator's namespace, a file changed or a
  dataset removed on the NameNode's disk rather than through WebHDFS, and pinning and
  expiry (Pingo's timers)."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from hadoop_emulator import start_emulator
from shared.store.transitions import decode
from tests.support.gates import Gate
from tests.support.system import Processes, make_settings
from tests.support.workflows import JOBS

FAST = {"notification_retry_delay": 0.2}


def hdfs_action(aid: Any, label: str, parents: list = (), seconds: float = 0.0, size_kb: int = 4, **extra) -> dict:
    return {
        "id": aid, "name": extra.pop("name", label), "type": "SHELL", "actionFolder": "jobs",
        "command": ["python3", "synth.py"], "parentActions": list(parents),
        "additionalInput": [{"value": label}, {"value": str(seconds)}, {"value": str(size_kb)}], **extra,
    }  # fmt: skip


def levels(prefix: str) -> dict:
    return {"name": f"{prefix}-levels", "actions": [
        hdfs_action(1, f"{prefix}-root", size_kb=16),
        hdfs_action(2, f"{prefix}-left", [1]),
        hdfs_action(3, f"{prefix}-right", [1], size_kb=8),
        hdfs_action(4, f"{prefix}-join", [2, 3]),
        hdfs_action(5, f"{prefix}-top", [4, 1], size_kb=2),
    ]}  # fmt: skip


class Hadoop(Processes):
    emulator: Any

    def hdfs_path(self, path: str) -> Path:
        return self.emulator.root / path.lstrip("/")

    def executions(self) -> dict[str, int]:
        return self.emulator.stats()["executions"]

    def submissions(self) -> dict[str, int]:
        return self.emulator.stats()["submissions"]


@pytest.fixture
async def hadoop(request: pytest.FixtureRequest, tmp_path: Path, mongo_url: str, amqp_url: str):
    """Settings overrides come from indirect parametrization."""
    emu = await start_emulator(tmp_path / "hdfs", faults=FAST)
    actions = emu.root / "pingo" / "actions" / "jobs"
    actions.mkdir(parents=True)
    for name in ("synth.py", "fail.py"):
        shutil.copy(JOBS / name, actions / name)
    settings = make_settings(
        tmp_path,
        mongo_url,
        amqp_url=amqp_url,
        executor="oozie",
        storage="webhdfs",
        oozie_url=emu.oozie_url,
        webhdfs_url=emu.namenode_url,
        name_node=emu.hdfs_uri,
        hdfs_root="/pingo",
        action_roots=[],
        output_roots=[],
        poll_interval=0.5,
        poll_max_interval=2.0,
        **getattr(request, "param", {}),
    )
    (tmp_path / "logs").mkdir()
    system = Hadoop(settings, tmp_path / "logs")
    system.emulator = emu
    await system.start_all()
    yield system
    await system.stop_all()
    await emu.stop()


def outcome(wf: dict) -> list[tuple]:
    return [(a["localId"], a["state"], a["decision"], a["hash"]) for a in wf["actions"]]


async def test_multilevel_workflows_run_on_the_cluster_and_are_reused(hadoop: Hadoop) -> None:
    wf = await hadoop.run(levels("hd"))
    assert wf["state"] == "SUCCEEDED", [(a["localId"], a["error"]) for a in wf["actions"]]
    for a in wf["actions"]:
        assert a["outputPath"] == f"/pingo/datasets/{a['hash']}"
        part = hadoop.hdfs_path(a["outputPath"]) / "part-00000"
        assert part.is_file()
        lineage = (hadoop.hdfs_path(a["outputPath"]) / "_lineage").read_text().split("\n")[1:-1]
        assert lineage == [f"/pingo/datasets/{wf['actions'][p - 1]['hash']}" for p in sorted(a["parents"])]
        # The size recorded is GETCONTENTSUMMARY's length of the output directory.
        on_disk = sum(f.stat().st_size for f in hadoop.hdfs_path(a["outputPath"]).iterdir())
        assert a["size"] == on_disk
    assert all(n == 1 for n in hadoop.executions().values()) and len(hadoop.executions()) == 5
    again = await hadoop.run(levels("hd"))
    assert again["state"] == "SUCCEEDED" and {a["decision"] for a in again["actions"]} == {"reuse"}
    assert len(hadoop.executions()) == 5
    # Each attempt had its own application path with a one-action workflow.xml.
    apps = sorted((hadoop.emulator.root / "pingo" / "oozie-apps").iterdir())
    assert len(apps) == 5 and all((app / "workflow.xml").is_file() for app in apps)


async def test_all_notifications_dropped_still_completes_by_polling(hadoop: Hadoop) -> None:
    t0 = time.time()
    clean = await hadoop.run(levels("nd-clean"))
    delivered = time.time() - t0
    hadoop.emulator.update_faults(drop_notifications=1.0)
    t0 = time.time()
    dropped = await hadoop.run(levels("nd-dropped"))
    polled = time.time() - t0
    assert clean["state"] == dropped["state"] == "SUCCEEDED"
    stats = hadoop.emulator.stats()["notifications"]
    assert stats["dropped"] >= 10 and all(n == 1 for n in hadoop.executions().values())
    print(f"\n5-action workflow: {delivered:.1f}s with notifications delivered, {polled:.1f}s with all dropped")


async def test_duplicated_and_reordered_notifications_change_nothing(hadoop: Hadoop) -> None:
    clean = await hadoop.run(levels("dup"))
    # The same computations again, from scratch: forced, under triple reordered notifications.
    hadoop.emulator.update_faults(duplicate_notifications=2, reorder_notifications=True, reorder_window=1.0)
    forced = levels("dup")
    for a in forced["actions"]:
        a["forceComputation"] = True
    noisy = await hadoop.run(forced)
    assert noisy["state"] == clean["state"] == "SUCCEEDED", [
        (a["localId"], a["state"], a["error"]) for a in noisy["actions"]
    ]
    assert [(i, s, h) for i, s, _, h in outcome(noisy)] == [(i, s, h) for i, s, _, h in outcome(clean)]
    assert hadoop.emulator.stats()["notifications"]["duplicated"] >= 10
    runs = hadoop.executions()
    assert all(n == 1 for n in runs.values()), runs  # one process per job: nothing ran twice
    assert all(n == 1 for n in hadoop.submissions().values())
    for a in noisy["actions"]:
        doc = decode(await hadoop.db.actions.find_one({"_id": a["id"]}))
        assert [h["state"] for h in doc["history"]].count("FINISHED") == 1


async def test_forged_callback_is_refused(hadoop: Hadoop, gate: Gate) -> None:
    # It runs until the gate opens: no real notification (its end) comes between the two
    # looks at its history, once the one saying it runs has come.
    forged = hdfs_action(1, "forged", configurationParameters=gate.conf)
    plan = await hadoop.submit({"name": "slow", "actions": [forged]})
    action_id = plan["actions"][0]["id"]
    async with asyncio.timeout(30):
        while (doc := await hadoop.db.actions.find_one({"_id": action_id})).get("state") != "RUNNING":
            await asyncio.sleep(0.1)
    before = len(decode(doc)["history"])
    url = f"{hadoop.settings.callback_url}/callback/{action_id}"
    async with hadoop.http.get(url, params={"secret": "guess", "jobId": doc["job_id"], "status": "SUCCEEDED"}) as r:
        assert r.status == 403
    assert len(decode(await hadoop.db.actions.find_one({"_id": action_id}))["history"]) == before
    gate.open()
    wf = await hadoop.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED"


async def test_submitter_killed_between_submit_and_record(hadoop: Hadoop) -> None:
    hadoop.stop("action_manager")
    hadoop.start("action_manager", tag="crashing", PINGO_FAULT_CRASH_AFTER_SUBMIT="true")
    plan = await hadoop.submit(
        {"name": "crash", "actions": [hdfs_action(1, "crash-a"), hdfs_action(2, "crash-b", [1])]}
    )
    async with asyncio.timeout(30):
        while hadoop.procs["crashing"].poll() is None:
            await asyncio.sleep(0.1)
    assert hadoop.procs["crashing"].returncode == 137
    hadoop.procs.pop("crashing")
    hadoop.start("action_manager", tag="survivor")
    wf = await hadoop.wait(plan["id"], timeout=90)
    assert wf["state"] == "SUCCEEDED"
    submissions = hadoop.submissions()
    assert submissions and all(n == 1 for n in submissions.values()), submissions
    assert all(a["attempts"] == 1 for a in wf["actions"])


async def test_killing_a_running_workflow_kills_the_oozie_jobs(hadoop: Hadoop) -> None:
    seed = await hadoop.run({"name": "seed", "actions": [hdfs_action(1, "k-shared"), hdfs_action(2, "k-leaf", [1])]})
    hadoop.emulator.update_faults(hang_actions="k-hang")
    plan = await hadoop.submit(
        {
            "name": "to-kill",
            "actions": [hdfs_action(1, "k-hang"), hdfs_action(2, "k-shared"), hdfs_action(3, "k-after", [1, 2])],
        }
    )
    shared = seed["actions"][0]["hash"]
    assert (await hadoop.db.datasets.find_one({"_id": shared}))["claims"] == [f"{plan['id']}.3"]
    async with asyncio.timeout(30):
        while (await hadoop.workflow(plan["id"]))["actions"][0]["state"] != "RUNNING":
            await asyncio.sleep(0.1)
    status, _ = await hadoop.request("POST", f"/api/v1/workflows/{plan['id']}/kill")
    assert status == 202
    wf = await hadoop.wait(plan["id"], timeout=60)
    assert wf["state"] == "KILLED"
    assert [a["state"] for a in wf["actions"]] == ["KILLED", "REUSED", "KILLED"]
    job = (await hadoop.db.actions.find_one({"_id": wf["actions"][0]["id"]}))["job_id"]
    async with hadoop.http.get(f"{hadoop.emulator.oozie_url}/v2/job/{job}", params={"show": "status"}) as r:
        assert (await r.json(content_type=None))["status"] == "KILLED"
    assert (await hadoop.db.datasets.find_one({"_id": shared}))["claims"] == []


async def test_replacing_a_jar_on_hdfs_invalidates_that_action_and_descendants(hadoop: Hadoop, tmp_path: Path) -> None:
    import subprocess

    classes = tmp_path / "classes"
    subprocess.run(["javac", "-d", str(classes), str(JOBS / "java" / "Synth.java")], check=True)
    folders = {}
    for name in ("a", "b"):
        folders[name] = hadoop.emulator.root / "pingo" / "actions" / f"java-{name}"
        folders[name].mkdir(parents=True)
        subprocess.run(["jar", "cf", str(folders[name] / "synth.jar"), "-C", str(classes), "."], check=True)

    def java(aid: int, label: str, folder: str, parents: list = ()) -> dict:
        return {
            "id": aid,
            "name": label,
            "type": "COMMAND_LINE",
            "actionFolder": f"java-{folder}",
            "mainClassName": "org.pingo.examples.Synth",
            "parentActions": list(parents),
            "additionalInput": [{"value": label}],
            "configurationParameters": [{"key": "pingo.greeting", "value": "hi"}],
        }

    body = {"name": "jars", "actions": [java(1, "j-a", "a"), java(2, "j-b", "b", [1]), java(3, "j-c", "b")]}
    first = await hadoop.run(body)
    assert first["state"] == "SUCCEEDED", [a["error"] for a in first["actions"]]
    out = (hadoop.hdfs_path(first["actions"][0]["outputPath"]) / "part-00000").read_text().split("\n")
    assert out[:2] == ["j-a", "hi"]
    (tmp_path / "VERSION").write_text("2")
    subprocess.run(["jar", "uf", str(folders["a"] / "synth.jar"), "-C", str(tmp_path), "VERSION"], check=True)
    changed = await hadoop.run(body)
    assert {a["localId"]: a["decision"] for a in changed["actions"]} == {1: "compute", 2: "compute", 3: "reuse"}


async def test_failed_action_keeps_oozies_error_and_ends_the_workflow(hadoop: Hadoop) -> None:
    wf = await hadoop.run({"name": "fails", "actions": [
        hdfs_action(1, "f-ok"),
        {"id": 2, "name": "boom", "type": "SHELL", "actionFolder": "jobs", "command": ["python3", "fail.py"],
         "parentActions": [1], "additionalInput": [{"value": "on purpose"}]},
        hdfs_action(3, "f-after", [2]),
    ]})  # fmt: skip
    assert wf["state"] == "FAILED"
    assert [a["state"] for a in wf["actions"]] == ["FINISHED", "FAILED", "KILLED"]
    # Oozie ended the job KILLED through the kill node; Pingo keeps errorCode and errorMessage.
    assert wf["actions"][1]["error"].startswith("1: Main Class [") and "exit code [1]" in wf["actions"][1]["error"]
    _, body = await hadoop.request("GET", "/api/v1/datasets")
    on_disk = sum(f.stat().st_size for f in (hadoop.emulator.root / "pingo" / "datasets").rglob("*") if f.is_file())
    assert body["managedRootBytes"] == on_disk > 0


def mid_and_leaf(prefix: str, leaf: str) -> dict:
    return {"name": prefix, "actions": [hdfs_action(1, f"{prefix}-mid"), hdfs_action(2, leaf, [1])]}


async def dataset_in(hadoop: Hadoop, h: str, state: str, timeout: float = 30.0) -> dict:
    deadline = time.time() + timeout
    while (doc := decode(await hadoop.db.datasets.find_one({"_id": h})))["state"] != state:
        assert time.time() < deadline, f"dataset {h} still {doc['state']} after {timeout}s, not {state}"
        await asyncio.sleep(0.2)
    return doc


async def test_a_dataset_committed_on_hdfs_records_its_files_and_checksum(hadoop: Hadoop) -> None:
    wf = await hadoop.run(mid_and_leaf("int", "int-leaf"))
    assert wf["state"] == "SUCCEEDED", [(a["localId"], a["error"]) for a in wf["actions"]]
    status, body = await hadoop.request("GET", "/api/v1/datasets")
    assert status == 200
    listed = {d["hash"]: d for d in body["datasets"]}
    for a in wf["actions"]:
        d = listed[a["hash"]]
        local = hadoop.hdfs_path(d["path"])
        files = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
        assert d["files"] == len(files) == 2
        assert d["size"] == sum((local / f).stat().st_size for f in files)
        # SHA-256 over each file's relative path and GETFILECHECKSUM answer, computed here
        # from the emulator's namespace.
        h = hashlib.sha256()
        for rel in files:
            ck = hadoop.emulator.namespace.checksum(f"{d['path']}/{rel}")["FileChecksum"]
            h.update(f"{rel}\0{ck['algorithm']}\0{ck['bytes']}\0".encode())
        assert d["checksum"] == h.hexdigest()


@pytest.mark.parametrize("hadoop", [{"verify_reuse": "checksum"}], indirect=True)
async def test_on_hdfs_a_same_size_change_is_found_by_checksum_and_computed_again(hadoop: Hadoop) -> None:
    first = await hadoop.run(mid_and_leaf("hflip", "hflip-a"))
    mid = first["actions"][0]["hash"]
    doc = await hadoop.db.datasets.find_one({"_id": mid})
    part = hadoop.hdfs_path(doc["path"]) / "part-00000"
    original = part.read_bytes()
    part.write_bytes(original[:-1] + bytes([original[-1] ^ 0xFF]))  # same size, other content

    plan = await hadoop.submit(mid_and_leaf("hflip", "hflip-b"))
    assert [a["decision"] for a in plan["actions"]] == ["compute", "compute"]
    assert (await hadoop.wait(plan["id"]))["state"] == "SUCCEEDED"
    again = decode(await hadoop.db.datasets.find_one({"_id": mid}))
    assert ("LOST", "lost") in [(h["state"], h.get("note")) for h in again["history"]]
    assert again["lost_reason"] == "checksum" and again["found_size"] == doc["size"]
    assert again["state"] == "STORED" and again["checksum"] == doc["checksum"] and part.read_bytes() == original


@pytest.mark.parametrize("hadoop", [{"reconcile_interval": 1.0}], indirect=True)
async def test_the_reconcile_sweep_marks_a_dataset_deleted_from_hdfs_lost(hadoop: Hadoop) -> None:
    first = await hadoop.run(mid_and_leaf("hgone", "hgone-a"))
    mid, leaf = (a["hash"] for a in first["actions"])
    doc = await hadoop.db.datasets.find_one({"_id": mid})
    shutil.rmtree(hadoop.hdfs_path(doc["path"]))  # behind Pingo's back, not through WebHDFS

    lost = await dataset_in(hadoop, mid, "LOST")
    assert ("LOST", "lost") in [(h["state"], h.get("note")) for h in lost["history"]]
    assert lost["lost_reason"] == "missing"
    assert (await hadoop.db.datasets.find_one({"_id": leaf}))["state"] == "LEAF"
    plan = await hadoop.submit(mid_and_leaf("hgone", "hgone-b"))
    assert [a["decision"] for a in plan["actions"]] == ["compute", "compute"]
    assert (await hadoop.wait(plan["id"]))["state"] == "SUCCEEDED"
    assert (await hadoop.db.datasets.find_one({"_id": mid}))["state"] == "STORED"


@pytest.mark.parametrize("hadoop", [{"expiry_interval": 0.3}], indirect=True)
async def test_datasets_by_hand_on_hdfs_invalidate_recomputes_and_delete_removes(hadoop: Hadoop) -> None:
    pair = {"name": "by-hand", "actions": [hdfs_action(1, "bh-mid"), hdfs_action(2, "bh-leaf", [1])]}
    wf = await hadoop.run(pair)
    assert wf["state"] == "SUCCEEDED", [(a["localId"], a["error"]) for a in wf["actions"]]
    mid, leaf = wf["actions"]
    status, body = await hadoop.request("POST", f"/api/v1/datasets/{leaf['hash']}/invalidate")
    assert status == 200 and body["invalidated"] == [leaf["hash"]], body
    again = await hadoop.run(pair)
    assert [(a["decision"], a["state"]) for a in again["actions"]] == [("reuse", "REUSED"), ("compute", "FINISHED")]
    doc = decode(await hadoop.db.datasets.find_one({"_id": leaf["hash"]}))
    assert doc["state"] == "LEAF" and doc["compute_count"] == 2
    assert (hadoop.hdfs_path(leaf["outputPath"]) / "part-00000").is_file()
    status, body = await hadoop.request("DELETE", f"/api/v1/datasets/{mid['hash']}")
    assert status == 202 and body["state"] == "INVALIDATED", body
    deadline = time.time() + 30
    while decode(await hadoop.db.datasets.find_one({"_id": mid["hash"]}))["state"] != "DELETED":
        assert time.time() < deadline, "not deleted in time"
        await asyncio.sleep(0.2)
    assert not hadoop.hdfs_path(mid["outputPath"]).exists()
    # Pinned and unpinned, then expired: the final output's files go from HDFS once it is due.
    for change in ({"pinned": True}, {"pinned": False}, {"expiresAt": time.time() + 0.5}):
        status, body = await hadoop.request("PATCH", f"/api/v1/datasets/{leaf['hash']}", json=change)
        assert status == 200 and all(body[k] == v for k, v in change.items() if k == "pinned"), body
    deadline = time.time() + 30
    while decode(await hadoop.db.datasets.find_one({"_id": leaf["hash"]}))["state"] != "DELETED":
        assert time.time() < deadline, "not expired in time"
        await asyncio.sleep(0.2)
    assert not hadoop.hdfs_path(leaf["outputPath"]).exists()
    status, shown = await hadoop.request("GET", f"/api/v1/datasets/{leaf['hash']}")
    notes = [(h["by"], h["note"] or "") for h in shown["history"]]
    assert ("user", "pinned") in notes and any(n.startswith("expired") for _, n in notes), notes
