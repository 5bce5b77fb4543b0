"""A miss explains itself (docs/planning.md, "Why an action is computed"): every action
planned ``compute`` names what changed against the nearest stored lineage of the same
action (same name and id in an earlier workflow of the same name): which field, which
parent; or that it was never computed before. The dry run, the submission's answer and
the workflow and action views all say it."""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from pingo.dev import all_services
from shared.config import Settings
from shared.runtime import running
from tests.support.system import Api, make_settings, pingo
from tests.support.workflows import JOBS, ROOT, shell_action
from tests.system.test_users import Team, start_team


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str) -> Settings:
    return make_settings(tmp_path, mongo_url, action_roots=[ROOT, tmp_path / "apps"])


def chain(folder: Path) -> dict[str, Any]:
    return {
        "name": "explained",
        "actions": [
            {**shell_action(1, "m-a"), "actionFolder": str(folder)},
            shell_action(2, "m-b", [1]),
            shell_action(3, "m-c", [2]),
        ],
    }


def misses(wf: dict[str, Any]) -> dict[Any, tuple[str, list[Any]] | None]:
    """Per computed action: its summary and the fields it names (a parent by its id)."""
    out = {}
    for a in wf["actions"]:
        if a["decision"] != "compute":
            assert a.get("miss") is None, a
            continue
        m = a["miss"]
        out[a["localId"]] = (
            m["summary"],
            [f"parent {c['parent']}" if c["parent"] else c["field"] for c in m["changes"]],
        )
    return out


def fields(wf: dict[str, Any]) -> dict[Any, list[str]]:
    return {aid: named for aid, (_, named) in misses(wf).items()}


async def submit_explained(system: Api, body: dict[str, Any]) -> dict[str, Any]:
    """Dry run, then submit and run: the dry run's explanation is the submission's."""
    status, dry = await system.request("POST", "/api/v1/workflows?dryRun=true", json=body)
    assert status == 200, dry
    plan = await system.submit(body)
    assert misses(dry) == misses(plan)
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED", wf
    assert misses(wf) == misses(plan)
    return wf


async def test_each_single_field_change_is_named(system: Api, tmp_path: Path):
    folder = tmp_path / "apps" / "jobs"
    shutil.copytree(JOBS, folder)
    body = chain(folder)
    first = await submit_explained(system, body)
    assert {aid: summary for aid, (summary, _) in misses(first).items()} == dict.fromkeys(
        (1, 2, 3), "never computed before"
    )

    # The command of the middle action: it names the command, its child names it as a parent.
    command = copy.deepcopy(body)
    command["actions"][1]["command"] = ["python3", "./synth.py"]
    wf = await submit_explained(system, command)
    assert fields(wf) == {2: ["command"], 3: ["parent 2"]}
    miss = next(a["miss"] for a in wf["actions"] if a["localId"] == 2)
    assert miss["changes"][0] == {"field": "command", "old": '["python3", "synth.py"]',
                                  "new": '["python3", "./synth.py"]', "parent": None}  # fmt: skip
    assert miss["against"]["workflow"] == first["id"] and miss["against"]["state"] == "STORED"
    assert "command changed" in miss["summary"]

    # An additionalInput value of the root: every descendant names its parent.
    value = copy.deepcopy(command)
    value["actions"][0]["additionalInput"][2]["value"] = "8"
    wf = await submit_explained(system, value)
    assert fields(wf) == {1: ["additionalInput[2].value"], 2: ["parent 1"], 3: ["parent 2"]}

    # The content of the root's action folder.
    (folder / "NOTES").write_text("a file more")
    wf = await submit_explained(system, value)
    assert fields(wf) == {1: ["actionFolderFingerprint"], 2: ["parent 1"], 3: ["parent 2"]}

    # Nothing changed, computed all the same: the same lineage, and why.
    forced = copy.deepcopy(value)
    forced["actions"][2]["forceComputation"] = True
    wf = await submit_explained(system, forced)
    ((summary, named),) = misses(wf).values()
    assert named == [] and "same lineage" in summary and "forceComputation" in summary, summary


async def test_an_action_of_another_name_or_workflow_is_never_computed_before(system: Api, tmp_path: Path):
    folder = tmp_path / "apps" / "jobs"
    shutil.copytree(JOBS, folder)
    await submit_explained(system, chain(folder))
    other = chain(folder)
    other["name"] = "explained-elsewhere"
    other["actions"][0]["command"] = ["python3", "./synth.py"]
    wf = await submit_explained(system, other)
    assert {aid: s for aid, (s, _) in misses(wf).items()} == dict.fromkeys((1, 2, 3), "never computed before")


async def test_pingo_says_what_changed_in_a_dry_run_and_in_the_status(system: Api, tmp_path: Path):
    folder = tmp_path / "apps" / "jobs"
    shutil.copytree(JOBS, folder)
    body = chain(folder)
    await submit_explained(system, body)
    body["actions"][1]["command"] = ["python3", "./synth.py"]
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(body))
    text = await pingo(system.base, "submit", "--dry-run", str(path))
    assert 'command changed (["python3", "synth.py"] -> ["python3", "./synth.py"])' in text, text
    wf = await submit_explained(system, body)
    text = await pingo(system.base, "status", wf["id"])
    assert "↯ 2 computed: command changed" in text, text
    # Action 2's output is byte-identical to the first run's: 3 is cut off early, and says
    # which change gave it its new key (docs/planning.md, "Early cutoff").
    assert "♻ 3 early cutoff: parent 2's output is identical" in text and "its key: parent 2 changed" in text, text


async def test_with_users_an_action_is_compared_with_its_owners_workflows_only(tmp_path: Path, mongo_url: str):
    settings = make_settings(tmp_path, mongo_url)
    ctx, tokens = await start_team(settings)
    async with running(ctx, all_services):
        anonymous = Api(settings)
        await anonymous.open()
        team = Team(anonymous, tokens, ctx)
        try:
            alice, bob = await team.api("alice"), await team.api("bob")
            body = {"name": "mine", "actions": [shell_action(1, "u-a"), shell_action(2, "u-b", [1])]}
            first = await alice.run(body)
            changed = copy.deepcopy(body)
            changed["actions"][0]["command"] = ["python3", "./synth.py"]
            # bob's workflow of the same name is not compared with alice's: she is not shown to him.
            his = await bob.run(changed)
            assert {aid: s for aid, (s, _) in misses(his).items()} == dict.fromkeys((1, 2), "never computed before")
            again = copy.deepcopy(body)
            again["actions"][0]["command"] = ["python3", "-B", "synth.py"]
            hers = await alice.run(again)
            assert fields(hers) == {1: ["command"], 2: ["parent 1"]}
            assert {m["against"]["workflow"] for m in (a["miss"] for a in hers["actions"])} == {first["id"]}
        finally:
            await team.close()
            await anonymous.close()


async def test_a_cache_version_and_an_input_file_are_named(system: Api, settings: Settings, tmp_path: Path):
    """The two fields that joined the key with external inputs: each planted alone, named alone."""
    # synth.py reads an input folder's part-00000.
    table = settings.action_roots[-1] / "table"
    table.mkdir(parents=True, exist_ok=True)
    part = table / "part-00000"
    part.write_text("a,1\n")
    body = {
        "name": "explained-keys",
        "actions": [shell_action(1, "k-a"), shell_action(2, "k-b", [1]), shell_action(3, "k-c", [2])],
    }
    body["actions"][0]["additionalInput"].append({"key": "table", "value": str(table)})
    first = await submit_explained(system, body)
    assert set(fields(first)) == {1, 2, 3}

    # The middle action's cacheVersion: it names cacheVersion, its child names it as a parent.
    versioned = copy.deepcopy(body)
    versioned["actions"][1]["cacheVersion"] = "fix-2"
    wf = await submit_explained(system, versioned)
    assert fields(wf) == {2: ["cacheVersion"], 3: ["parent 2"]}
    (miss,) = (a["miss"] for a in wf["actions"] if a["localId"] == 2)
    assert miss["changes"][0] == {"field": "cacheVersion", "old": None, "new": "fix-2", "parent": None}
    assert "cacheVersion added" in miss["summary"], miss
    versioned["actions"][1]["cacheVersion"] = "fix-3"
    wf = await submit_explained(system, versioned)
    assert fields(wf) == {2: ["cacheVersion"], 3: ["parent 2"]}

    # The folder an additionalInput names, a file of it edited behind Pingo's back: its
    # fingerprint's fields (default policy `stat`: a folder's size, and a digest over its
    # files' sizes and modification times), then every descendant.
    before = part.stat().st_mtime_ns
    part.write_text("a,1\nb,2\n")
    os.utime(part, ns=(before + 10**9, before + 10**9))
    wf = await submit_explained(system, versioned)
    assert fields(wf) == {1: ["inputs[0].digest", "inputs[0].size"], 2: ["parent 1"], 3: ["parent 2"]}
    (miss,) = (a["miss"] for a in wf["actions"] if a["localId"] == 1)
    assert miss["changes"][1] == {"field": "inputs[0].size", "old": "4", "new": "8", "parent": None}

    # Touched only (the same bytes, a new modification time): the digest alone.
    later = part.stat().st_mtime_ns + 10**9
    os.utime(part, ns=(later, later))
    wf = await submit_explained(system, versioned)
    assert fields(wf) == {1: ["inputs[0].digest"], 2: ["parent 1"], 3: ["parent 2"]}
