"""Early cutoff (docs/planning.md, "Early cutoff"): a parent recomputed under a new key
whose output is byte-identical to an earlier lineage's lets its children reuse what that
lineage's children made. Measured on a chain of 10 whose root reads an input folder:
touched without change (default `stat` fingerprints: a new modification time, a new key),
only the root computes; changed, all ten do. The same for any other new key of a parent:
its action folder, its cacheVersion, its command."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from shared.config import Settings
from tests.support.system import Api, make_settings
from tests.support.workflows import JOBS, ROOT, shell_action

LENGTH = 10


def chain(corpus: Path) -> dict[str, Any]:
    actions = [shell_action(1, "cut-1")] + [shell_action(i, f"cut-{i}", [i - 1]) for i in range(2, LENGTH + 1)]
    actions[0]["additionalInput"].append({"key": "corpus", "value": str(corpus)})
    return {"name": "cutoff", "actions": actions}


def states(wf: dict[str, Any]) -> dict[Any, str]:
    return {a["localId"]: a["state"] for a in wf["actions"]}


async def a_chain_run_once(system: Api, settings: Settings, text: str) -> tuple[Path, dict[str, Any]]:
    corpus = settings.allowed_output_roots[0] / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "part-00000").write_text(text)
    first = await system.run(chain(corpus))
    assert first["state"] == "SUCCEEDED" and set(states(first).values()) == {"FINISHED"}, first
    return corpus, first


def touch(part: Path) -> None:
    later = part.stat().st_mtime_ns + 10**9
    os.utime(part, ns=(later, later))


async def test_a_changed_root_input_computes_the_whole_chain(system: Api, settings: Settings) -> None:
    """The control: the root's output differs, so nothing below it may be substituted."""
    corpus, _ = await a_chain_run_once(system, settings, "abcd")
    (corpus / "part-00000").write_text("abce")
    touch(corpus / "part-00000")
    again = await system.run(chain(corpus))
    assert states(again) == dict.fromkeys(range(1, LENGTH + 1), "FINISHED")
    assert all(a["miss"]["changes"] for a in again["actions"]), again["actions"]


async def history(system: Api, since: float) -> dict[str, Any]:
    status, body = await system.request(
        "GET", "/api/v1/history/stats", params={"resolution": "1m", "from": str(since - 60), "to": str(time.time() + 1)}
    )
    assert status == 200, body
    return body["totals"]


async def test_a_touched_root_input_recomputes_the_root_only(system: Api, settings: Settings) -> None:
    corpus, first = await a_chain_run_once(system, settings, "abcd")
    touch(corpus / "part-00000")
    before = await history(system, first["createdAt"])
    again = await system.run(chain(corpus))
    assert states(again) == {1: "FINISHED", **dict.fromkeys(range(2, LENGTH + 1), "REUSED")}
    # Counted as reuses, and as cutoffs, in the history statistics; each cut-off action's
    # end counted down its workflow's live actions (it settled on the last one's end).
    after = await history(system, first["createdAt"])
    added = {k: after[k] - before[k] for k in ("actions_computed", "actions_reused", "actions_cut_off")}
    assert added == {"actions_computed": 1, "actions_reused": 9, "actions_cut_off": 9}, (before, after)
    assert after["saved_seconds"] > before["saved_seconds"], (before, after)
    assert again["openActions"] == 0, again
    # The root's output is byte-identical to the first run's: the children say so.
    row = {a["localId"]: a for a in again["actions"]}
    assert f"early cutoff: parent 1's output is identical to {first['id']}'s" in row[2]["reason"], row[2]
    assert f"early cutoff: parent 9's output is identical to {first['id']}'s" in row[10]["reason"], row[10]
    # Each reuses what the first run's action made: its output, at its path.
    was = {a["localId"]: a for a in first["actions"]}
    assert all(row[i]["outputPath"] == was[i]["outputPath"] for i in range(2, LENGTH + 1))
    # Submitted again: the plan reuses what the chain was cut off to (step 3): the leaf's
    # dataset was never made, the first run's stands in for it, and everything above it is
    # skipped: nothing computes, and the dry run says so.
    status, dry = await system.request("POST", "/api/v1/workflows?dryRun=true", json=chain(corpus))
    assert status == 200 and dry["totals"]["compute"] == 0, dry
    assert "early cutoff" in dry["actions"][-1]["explanation"], dry["actions"][-1]
    assert dry["actions"][-1]["outputPath"] == was[LENGTH]["outputPath"]
    third = await system.run(chain(corpus))
    assert states(third) == {**dict.fromkeys(range(1, LENGTH), "SKIPPED"), LENGTH: "REUSED"}
    assert third["actions"][-1]["outputPath"] == was[LENGTH]["outputPath"]
    # The dry run named the dataset the submission reuses: the twin's, not the cut-off one's.
    assert dry["actions"][-1]["hash"] == third["actions"][-1]["hash"] == was[LENGTH]["hash"]


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str) -> Settings:
    return make_settings(tmp_path, mongo_url, action_roots=[ROOT, tmp_path / "apps"])


def short_chain(folder: Path) -> dict[str, Any]:
    return {
        "name": "cutoff-keys",
        "actions": [
            {**shell_action(1, "key-a"), "actionFolder": str(folder)},
            shell_action(2, "key-b", [1]),
            shell_action(3, "key-c", [2]),
        ],
    }


async def test_a_parent_recomputed_under_any_new_key_with_the_same_output_cuts_its_children_off(
    system: Api, tmp_path: Path
) -> None:
    """Its folder, its cacheVersion, its command: a new key for the parent, the same bytes
    out, and its children reuse the earlier lineage's outputs."""
    folder = tmp_path / "apps" / "jobs"
    shutil.copytree(JOBS, folder)
    body = short_chain(folder)
    first = await system.run(body)
    assert set(states(first).values()) == {"FINISHED"}

    # The middle action's command, written otherwise and doing the same: its child is cut off.
    body["actions"][1]["command"] = ["python3", "./synth.py"]
    wf = await system.run(body)
    assert states(wf) == {1: "REUSED", 2: "FINISHED", 3: "REUSED"}
    assert f"early cutoff: parent 2's output is identical to {first['id']}'s" in wf["actions"][2]["reason"]

    # A file added to the root's action folder (its fingerprint is in its key): the cutoff runs
    # down the chain, through the lineage cut off just before (its twin stands in for it).
    (folder / "NOTES").write_text("a file more")
    wf = await system.run(body)
    assert states(wf) == {1: "FINISHED", 2: "REUSED", 3: "REUSED"}
    row = {a["localId"]: a for a in wf["actions"]}
    assert row[1]["miss"]["changes"][0]["field"] == "actionFolderFingerprint"
    assert "early cutoff: parent 1's output is identical to" in row[2]["reason"], row[2]
    assert row[3]["outputPath"] == first["actions"][2]["outputPath"]

    # The root's cacheVersion.
    body["actions"][0]["cacheVersion"] = "fix-2"
    wf = await system.run(body)
    assert states(wf) == {1: "FINISHED", 2: "REUSED", 3: "REUSED"}


async def test_a_child_whose_own_key_changed_too_is_computed(system: Api, tmp_path: Path) -> None:
    """A workflow's cacheVersion is in every action's key: the root's output is the same,
    but no earlier lineage of its child has the child's new definition, so it computes."""
    folder = tmp_path / "apps" / "jobs"
    shutil.copytree(JOBS, folder)
    body = short_chain(folder)
    assert set(states(await system.run(body)).values()) == {"FINISHED"}
    body["cacheVersion"] = "2026-11"
    assert states(await system.run(body)) == dict.fromkeys((1, 2, 3), "FINISHED")
