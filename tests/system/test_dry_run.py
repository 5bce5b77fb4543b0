"""The dry run (docs/planning.md, "The dry run"): ``POST /api/v1/workflows?dryRun=true``
answers what a submission would compute, reuse, skip or follow, and why, and writes
nothing at all (no workflow, action, claim or dataset, no event); ``pingo submit
--dry-run`` prints it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from tests.support.system import Api
from tests.support.workflows import ROOT, diamond, shell_action

WORKFLOWS = "/api/v1/workflows"


async def dry_run(system: Api, body: Any, query: str = "?dryRun=true") -> tuple[int, Any]:
    return await system.request("POST", WORKFLOWS + query, json=body)


async def everything(system: Api) -> dict[str, list[dict[str, Any]]]:
    """Every document of every collection Pingo writes a plan to."""
    return {c: await system.db[c].find({}).sort("_id", 1).to_list(None) for c in ("workflows", "actions", "datasets")}


async def documents_by_collection(system: Api) -> dict[str, int]:
    """How many documents each collection holds, but for ``locks``: the background services'
    leases, taken and renewed on their own schedule whatever is submitted."""
    names = set(await system.db.list_collection_names()) - {"locks"}
    return {n: await system.db[n].count_documents({}) for n in sorted(names)}


def by_id(plan: dict[str, Any]) -> dict[Any, dict[str, Any]]:
    return {a["localId"]: a for a in plan["actions"]}


def extended(prefix: str) -> dict[str, Any]:
    """The diamond, plus an action reading its leaf."""
    body = diamond(prefix)
    body["actions"].append(shell_action(5, f"{prefix}-e", [4]))
    return body


async def test_a_dry_run_on_an_empty_store_computes_everything_and_writes_nothing(system: Api):
    collections = await documents_by_collection(system)
    published = len(system.ctx.bus.published)
    status, plan = await dry_run(system, diamond("fresh"))
    assert status == 200, plan
    assert plan["dryRun"] is True and plan["name"] == "diamond"
    assert {a["localId"]: (a["decision"], a["reason"]) for a in plan["actions"]} == {
        i: ("compute", "not_stored") for i in (1, 2, 3, 4)
    }
    assert plan["totals"] == {"compute": 4, "reuse": 0, "skip": 0, "follow": 0}
    assert by_id(plan)[4]["parents"] == [2, 3]
    assert all(a["explanation"] for a in plan["actions"])
    assert await system.counts() == {"workflows": 0, "actions": 0, "datasets": 0}
    assert await documents_by_collection(system) == collections
    assert len(system.ctx.bus.published) == published, system.ctx.bus.published[published:]
    # The same body submitted for real writes and publishes: what was counted above can change.
    real = await system.submit(diamond("fresh"))
    assert {a["localId"]: a["hash"] for a in real["actions"]} == {a["localId"]: a["hash"] for a in plan["actions"]}
    assert await system.counts() != {"workflows": 0, "actions": 0, "datasets": 0}
    assert len(system.ctx.bus.published) > published
    await system.wait(real["id"])


async def test_a_dry_run_predicts_the_plan_and_takes_no_claim(system: Api):
    wf = await system.run(diamond("p"))
    assert wf["state"] == "SUCCEEDED"
    before, collections = await everything(system), await documents_by_collection(system)
    published = len(system.ctx.bus.published)
    status, plan = await dry_run(system, extended("p"))
    assert status == 200, plan
    decided = {a["localId"]: (a["decision"], a["reason"]) for a in plan["actions"]}
    assert decided == {
        1: ("skip", "feeds_only_reused"),
        2: ("skip", "feeds_only_reused"),
        3: ("skip", "feeds_only_reused"),
        4: ("reuse", "stored"),
        5: ("compute", "not_stored"),
    }
    assert plan["totals"] == {"compute": 1, "reuse": 1, "skip": 3, "follow": 0}
    stored = await system.db.datasets.find_one({"_id": by_id(plan)[4]["hash"]})
    assert by_id(plan)[4]["outputPath"] == stored["path"]
    # No claim, no use counted, no last use moved, nothing else either.
    assert await everything(system) == before
    assert await documents_by_collection(system) == collections
    assert len(system.ctx.bus.published) == published
    # What a submission made now decides is what the dry run said.
    real = await system.submit(extended("p"))
    assert {a["localId"]: a["reason"] for a in real["actions"]} == {k: r for k, (_, r) in decided.items()}
    await system.wait(real["id"])


async def test_a_dry_run_reports_a_stored_output_that_is_gone_without_marking_it_lost(system: Api):
    wf = await system.run(diamond("g"))
    leaf = await system.db.datasets.find_one({"_id": by_id(wf)[4]["hash"]})
    shutil.rmtree(leaf["path"])
    status, plan = await dry_run(system, diamond("g"))
    assert status == 200, plan
    assert (by_id(plan)[4]["decision"], by_id(plan)[4]["reason"]) == ("compute", "not_stored")
    assert "not whole" in by_id(plan)[4]["explanation"] and "missing" in by_id(plan)[4]["explanation"]
    assert (await system.db.datasets.find_one({"_id": leaf["_id"]}))["state"] == leaf["state"]


async def test_a_dry_run_removes_no_file_of_a_changed_or_lost_output(system: Api):
    """A query has no effect on the storage: a submission removes a stored output it finds
    changed (and a lost one's leftover) before computing it again; a dry run says it would
    compute it, and leaves its files and its dataset as they were."""
    wf = await system.run(diamond("x"))
    changed = await system.db.datasets.find_one({"_id": by_id(wf)[4]["hash"]})
    added = Path(changed["path"]) / "added-since"
    added.write_text("not what was committed")
    lost = await system.db.datasets.find_one({"_id": by_id(wf)[3]["hash"]})
    await system.db.datasets.update_one({"_id": lost["_id"]}, {"$set": {"state": "LOST"}})
    status, plan = await dry_run(system, extended("x"))
    assert status == 200, plan
    assert (by_id(plan)[4]["decision"], by_id(plan)[3]["decision"]) == ("compute", "compute")
    assert "not whole" in by_id(plan)[4]["explanation"]
    assert by_id(plan)[3]["explanation"] == "its dataset exists but is LOST"
    assert added.exists() and Path(lost["path"]).exists()
    assert (await system.db.datasets.find_one({"_id": changed["_id"]}))["state"] == changed["state"]
    assert (await system.db.datasets.find_one({"_id": lost["_id"]}))["state"] == "LOST"


async def test_a_dry_run_of_an_invalid_workflow_is_rejected_like_a_submission(system: Api):
    body = diamond("bad")
    body["actions"][1] = {**body["actions"][1], "parentAction": body["actions"][1].pop("parentActions")}
    status, dry = await dry_run(system, body)
    real_status, real = await system.request("POST", WORKFLOWS, json=body)
    assert status == real_status == 422, dry
    assert dry["violations"] == real["violations"]
    assert [v["loc"] for v in dry["violations"]] == ["actions[1].parentAction"]
    assert "did you mean 'parentActions'?" in dry["violations"][0]["message"]
    assert await system.counts() == {"workflows": 0, "actions": 0, "datasets": 0}


async def test_a_dry_run_flag_that_is_not_a_boolean_is_a_bad_query(system: Api):
    status, out = await dry_run(system, diamond("q"), "?dryRun=perhaps")
    assert status == 400, out
    assert [(v["loc"], v["message"]) for v in out["violations"]] == [
        ("dryRun", "dryRun must be true or false, not 'perhaps'")
    ]
    assert await system.counts() == {"workflows": 0, "actions": 0, "datasets": 0}


async def test_pingo_submit_dry_run_prints_the_plan_and_submits_nothing(system: Api, tmp_path):
    await system.run(diamond("c"))
    path = tmp_path / "extended.json"
    path.write_text(json.dumps(extended("c")))
    before = await system.counts()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pingo.cli", "submit", "--dry-run", "--url", system.base, str(path),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert "dry run of diamond: 1 compute, 1 reuse, 3 skip, 0 follow; nothing was submitted" in text, text
    # One row per action (a long explanation may wrap onto indented lines).
    rows = {line.split()[0]: line.split()[2] for line in text.splitlines()[2:] if line[:1].isdigit()}
    assert rows == {"1": "skip", "2": "skip", "3": "skip", "4": "reuse", "5": "compute"}, text
    assert await system.counts() == before
