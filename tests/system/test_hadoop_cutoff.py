"""Early cutoff on the Hadoop path (the emulator: Oozie executor, WebHDFS storage; docs/
planning.md, "Early cutoff"): a parent recomputed under a new key whose output is
byte-identical to an earlier lineage's (HDFS checksums) lets its children reuse what that
lineage's children made. The local path: tests/system/test_early_cutoff.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from tests.support.workflows import JOBS
from tests.system.test_early_cutoff import history
from tests.system.test_hadoop_system import Hadoop, hadoop, hdfs_action

__all__ = ["hadoop"]  # the fixture, used by name
LENGTH = 4


def chain(corpus: str, folder: str = "jobs") -> dict[str, Any]:
    root = {**hdfs_action(1, "hcut-1"), "actionFolder": folder}
    root["additionalInput"].append({"value": corpus})
    rest = [hdfs_action(i, f"hcut-{i}", [i - 1]) for i in range(2, LENGTH + 1)]
    return {"name": "hadoop-cutoff", "actions": [root, *rest]}


def states(wf: dict[str, Any]) -> dict[Any, str]:
    return {a["localId"]: a["state"] for a in wf["actions"]}


def corpus_at(hadoop: Hadoop, text: str) -> Path:
    folder = hadoop.hdfs_path("/pingo/outputs/cut-corpus")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "part-00000").write_text(text)
    return folder


def touch(part: Path) -> None:
    later = part.stat().st_mtime_ns + 10**9
    os.utime(part, ns=(later, later))


async def test_a_touched_hdfs_input_recomputes_the_root_only(hadoop: Hadoop) -> None:
    corpus = corpus_at(hadoop, "abcd")
    first = await hadoop.run(chain("/pingo/outputs/cut-corpus"))
    assert set(states(first).values()) == {"FINISHED"}, [(a["localId"], a["error"]) for a in first["actions"]]
    touch(corpus / "part-00000")  # a new modification time: a new key for the root, the same bytes
    before = await history(hadoop, first["createdAt"])
    again = await hadoop.run(chain("/pingo/outputs/cut-corpus"))
    assert states(again) == {1: "FINISHED", **dict.fromkeys(range(2, LENGTH + 1), "REUSED")}
    after = await history(hadoop, first["createdAt"])  # counted as reuses and as cutoffs
    assert after["actions_cut_off"] - before["actions_cut_off"] == LENGTH - 1, (before, after)
    assert after["actions_reused"] - before["actions_reused"] == LENGTH - 1 and again["openActions"] == 0
    row = {a["localId"]: a for a in again["actions"]}
    assert f"early cutoff: parent 1's output is identical to {first['id']}'s" in row[2]["reason"], row[2]
    was = {a["localId"]: a for a in first["actions"]}
    assert all(row[i]["outputPath"] == was[i]["outputPath"] for i in range(2, LENGTH + 1))
    # Planned again: the leaf's first-run output stands in for the cut-off one; nothing
    # computes, and the dry run names the dataset the submission reuses.
    code, dry = await hadoop.request("POST", "/api/v1/workflows?dryRun=true", json=chain("/pingo/outputs/cut-corpus"))
    assert code == 200 and dry["totals"]["compute"] == 0, dry
    third = await hadoop.run(chain("/pingo/outputs/cut-corpus"))
    assert states(third) == {**dict.fromkeys(range(1, LENGTH), "SKIPPED"), LENGTH: "REUSED"}
    assert dry["actions"][-1]["hash"] == third["actions"][-1]["hash"] == was[LENGTH]["hash"]
    # The control: the content changed, every action computes.
    (corpus / "part-00000").write_text("abce")
    assert states(await hadoop.run(chain("/pingo/outputs/cut-corpus"))) == dict.fromkeys(
        range(1, LENGTH + 1), "FINISHED"
    )


async def test_a_changed_action_folder_on_hdfs_with_the_same_output_cuts_the_children_off(hadoop: Hadoop) -> None:
    corpus_at(hadoop, "abcd")
    folder = hadoop.hdfs_path("/pingo/actions/root-jobs")
    folder.mkdir(parents=True)
    shutil.copy(JOBS / "synth.py", folder / "synth.py")
    first = await hadoop.run(chain("/pingo/outputs/cut-corpus", "root-jobs"))
    assert set(states(first).values()) == {"FINISHED"}
    (folder / "NOTES").write_text("a file more")  # the root's folder fingerprint: a new key
    again = await hadoop.run(chain("/pingo/outputs/cut-corpus", "root-jobs"))
    assert states(again) == {1: "FINISHED", **dict.fromkeys(range(2, LENGTH + 1), "REUSED")}
    assert again["actions"][0]["miss"]["changes"][0]["field"] == "actionFolderFingerprint"
    assert "early cutoff: parent 1's output is identical" in again["actions"][1]["reason"]
