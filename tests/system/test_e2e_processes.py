"""The whole system as five separate OS processes talking over RabbitMQ."""

from __future__ import annotations

import asyncio
import copy
import signal
import time
from pathlib import Path

import pytest

from shared.store.transitions import decode
from tests.support.system import Processes
from tests.support.workflows import JOBS, decisions, diamond, multilevel, shell_action


def executions(log: Path) -> list[str]:
    return log.read_text().split("\n")[:-1] if log.exists() else []


def check_outputs(wf: dict, managed_root: Path) -> None:
    """Every computed action wrote its output where the plan said, from its parents' outputs
    in parent-id order (the argument contract)."""
    by_local = {a["localId"]: a for a in wf["actions"]}
    for a in wf["actions"]:
        out = Path(a["outputPath"])
        assert (out / "part-00000").is_file(), a
        if a.get("managed", True) and a["reason"] != "unmanaged":
            assert out == managed_root / a["hash"]
        lineage = (out / "_lineage").read_text().split("\n")[:-1]
        expected_inputs = [by_local[p]["outputPath"] for p in sorted(a["parents"])]
        assert lineage[1:] == expected_inputs, (a["localId"], lineage)


async def test_workflows_run_once_and_are_reused(processes: Processes) -> None:
    log = Path(processes.settings.data_dir) / "exec.log"
    root = processes.settings.managed_dir
    first_d = await processes.run(diamond())
    first_m = await processes.run(multilevel())
    for wf in (first_d, first_m):
        assert wf["state"] == "SUCCEEDED"
        assert {a["state"] for a in wf["actions"]} == {"FINISHED"}
        check_outputs(wf, root)
    assert len(executions(log)) == 10

    # Resubmitting computes nothing: leaves reused, everything above them skipped.
    again_d, again_m = await processes.run(diamond()), await processes.run(multilevel())
    for wf in (again_d, again_m):
        assert wf["state"] == "SUCCEEDED"
        assert set(decisions(wf).values()) == {"reuse"}
    assert len(executions(log)) == 10

    # Changing one parameter recomputes exactly that action and its descendants.
    changed = multilevel()
    changed["actions"][1]["additionalInput"][2]["value"] = "5"  # l1a's size
    wf = await processes.run(changed)
    assert wf["state"] == "SUCCEEDED"
    computed = {k for k, v in decisions(wf).items() if v == "compute"}
    assert computed == {11, 13, 14, 15}
    assert {a["localId"]: a["reason"] for a in wf["actions"]}[12] == "stored"
    assert len(executions(log)) == 14
    check_outputs(wf, root)

    # forceComputation recomputes that action (its stored descendants stay reused).
    forced = multilevel()
    forced["actions"][3]["forceComputation"] = True
    wf = await processes.run(forced)
    assert {k for k, v in decisions(wf).items() if v == "compute"} == {13}
    assert len(executions(log)) == 15

    # The datasets of the first run are all there, with sizes recorded.
    _, body = await processes.request("GET", "/api/v1/datasets")
    sizes = {d["hash"]: d["size"] for d in body["datasets"]}
    for a in first_m["actions"]:
        assert sizes[a["hash"]] == (a["size"] if a["size"] is not None else sizes[a["hash"]]) > 0


async def test_unmanaged_action_always_computes(processes: Processes) -> None:
    log = Path(processes.settings.data_dir) / "exec.log"
    body = {
        "name": "report",
        "actions": [
            shell_action(1, "u-src"),
            shell_action(2, "u-report", [1], outputPath="reports/final", isManaged=False),
        ],
    }
    for run in range(2):
        wf = await processes.run(body)
        assert wf["state"] == "SUCCEEDED"
        assert decisions(wf) == ({1: "compute", 2: "compute"} if run == 0 else {1: "reuse", 2: "compute"})
    out = Path(wf["actions"][1]["outputPath"])
    assert out == processes.settings.allowed_output_roots[0] / "reports" / "final"
    assert (out / "part-00000").is_file()
    assert [line.split()[1] for line in executions(log)] == ["u-src", "u-report", "u-report"]
    # Pingo keeps no dataset record for unmanaged outputs, so nothing can ever choose to delete it.
    assert await processes.db.datasets.count_documents({"path": str(out)}) == 0


async def test_same_computation_in_other_workflow_is_reused(processes: Processes) -> None:
    a = {
        "name": "first",
        "actions": [shell_action(1, "x-root"), shell_action(2, "x-mid", [1]), shell_action(3, "x-sibling", [1])],
    }
    b = {
        "name": "second",
        "actions": [
            shell_action(7, "x-root"),
            shell_action(8, "x-other", [7]),
            shell_action(9, "x-mid", [7]),
            shell_action(10, "x-new", [9]),
        ],
    }
    wa = await processes.run(a)
    wb = await processes.run(b)
    assert wb["state"] == "SUCCEEDED"
    assert decisions(wb) == {7: "reuse", 8: "compute", 9: "reuse", 10: "compute"}
    hash_a = {x["name"]: x["hash"] for x in wa["actions"]}
    hash_b = {x["name"]: x["hash"] for x in wb["actions"]}
    assert hash_a["x-mid"] == hash_b["x-mid"] and hash_a["x-root"] == hash_b["x-root"]
    # The reused leaf output was promoted and is still whole.
    mid = await processes.db.datasets.find_one({"_id": hash_a["x-mid"]})
    assert mid["state"] == "LEAF" and mid["claims"] == []


async def test_failing_action_fails_workflow_and_kills_descendants(processes: Processes) -> None:
    stored = await processes.run(
        {"name": "seed", "actions": [shell_action(1, "f-shared"), shell_action(2, "f-leaf", [1])]}
    )
    shared_hash = stored["actions"][0]["hash"]
    failing = {
        "name": "failing",
        "actions": [
            shell_action(1, "f-ok"),
            {
                "id": 2,
                "name": "boom",
                "type": "SHELL",
                "actionFolder": "examples/jobs",
                "command": ["python3", "fail.py"],
                "parentActions": [{"id": 1}],
                "additionalInput": [{"value": "it broke"}],
            },
            shell_action(3, "f-after", [2, 5]),
            shell_action(4, "f-after-after", [3]),
            shell_action(5, "f-shared"),
            shell_action(6, "f-independent", [1], seconds=1.0),
        ],
    }
    plan = await processes.submit(failing)
    assert decisions(plan | {"actions": plan["actions"]}) == {
        1: "compute",
        2: "compute",
        3: "compute",
        4: "compute",
        5: "reuse",
        6: "compute",
    }
    claimed = await processes.db.datasets.find_one({"_id": shared_hash})
    assert claimed["claims"] == [f"{plan['id']}.3"]
    wf = await processes.wait(plan["id"])
    states = {a["localId"]: a["state"] for a in wf["actions"]}
    assert wf["state"] == "FAILED"
    assert states == {1: "FINISHED", 2: "FAILED", 3: "KILLED", 4: "KILLED", 5: "REUSED", 6: "FINISHED"}
    errors = {a["localId"]: a["error"] for a in wf["actions"]}
    assert "it broke" in errors[2] and errors[3] == "upstream_failed"
    released = await processes.db.datasets.find_one({"_id": shared_hash})
    assert released["claims"] == [] and released["state"] == "STORED"
    boom = await processes.db.datasets.find_one({"_id": wf["actions"][1]["hash"]})
    assert boom["state"] == "DELETED" and boom["producers"] == []


# Leases go stale only when a manager is gone, not when 300 jobs on two loaded cores make one
# slow (the 4 s of the tests' settings): a lease taken back is a second attempt, rightly.
@pytest.mark.settings(stale_after=60.0)
async def test_two_action_managers_submit_each_action_once(processes: Processes) -> None:
    processes.start("action_manager", tag="action_manager_2")
    # Subscribed before the READY events go out, so each manager is delivered a share: a
    # manager whose queue is full holds its events rather than acknowledging them, and
    # claims on them in groups, so one manager alone may take all 300 before a late one is up.
    started = processes.logs / "action_manager_2.log"
    deadline = time.time() + 60
    while b"action_manager started" not in (started.read_bytes() if started.exists() else b""):
        assert time.time() < deadline, "the second action manager did not start"
        await asyncio.sleep(0.2)
    n = 300
    body = {"name": "wide", "actions": [shell_action(i, f"wide-{i}", size_kb=1) for i in range(n)]}
    wf = await processes.run(body, timeout=420)
    assert wf["state"] == "SUCCEEDED"
    log = Path(processes.settings.data_dir) / "exec.log"
    runs = [line.split()[0] for line in executions(log)]
    assert len(runs) == n and len(set(runs)) == n
    assert all(a["attempts"] == 1 for a in wf["actions"])
    jobs = list(processes.settings.jobs_dir.iterdir())
    assert len([j for j in jobs if not j.name.startswith(".")]) == n
    owners = {
        h["by"]
        async for a in processes.db.actions.find({"workflow_id": wf["id"]})
        for h in decode(a)["history"]
        if h["state"] == "SUBMITTED"  # claimed on its READY event, or from the scrape's PROCESSING
    }
    assert len(owners) == 2, "both managers should have taken a share"


async def test_killed_action_manager_work_is_taken_over(processes: Processes) -> None:
    log = Path(processes.settings.data_dir) / "exec.log"
    processes.stop("action_manager")
    # This manager claims (READY -> PROCESSING) but has no submitters: it dies holding leases.
    processes.start("action_manager", tag="doomed", PINGO_SUBMITTERS="0")
    plan = await processes.submit({"name": "orphaned", "actions": [shell_action(i, f"orph-{i}") for i in range(12)]})
    deadline = time.time() + 30
    while await processes.db.actions.count_documents({"workflow_id": plan["id"], "state": "PROCESSING"}) < 12:
        assert time.time() < deadline, "the doomed manager never claimed the actions"
        await asyncio.sleep(0.2)
    processes.stop("doomed", signal.SIGKILL)
    claimed_at = time.time()
    processes.start("action_manager", tag="survivor")
    wf = await processes.wait(plan["id"], timeout=60)
    assert wf["state"] == "SUCCEEDED"
    assert time.time() - claimed_at >= processes.settings.stale_after * 0.9
    assert sorted(line.split()[1] for line in executions(log)) == sorted(f"orph-{i}" for i in range(12))
    docs = [a async for a in processes.db.actions.find({"workflow_id": plan["id"]})]
    notes = [h.get("note") for a in docs for h in decode(a)["history"]]
    assert notes.count("stale lease taken over") == 12


async def test_diamond_copy_is_independent(processes: Processes) -> None:
    """A computed child never starts before its computed parent finished, whatever the shape."""
    body = copy.deepcopy(diamond("order", seconds=0.3))
    wf = await processes.run(body)
    by = {a["localId"]: a for a in wf["actions"]}
    for a in wf["actions"]:
        for p in a["parents"]:
            parent = by[p]
            assert a["startedAt"] >= parent["startedAt"] + parent["seconds"] - 0.05
    assert JOBS.is_dir()
