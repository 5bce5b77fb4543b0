"""External inputs on the Hadoop path (the emulator: Oozie executor, WebHDFS storage):
an HDFS path or hdfs:// URI in additionalInput is an input, fingerprinted by
GETFILESTATUS / LISTSTATUS (length and modificationTime) or, with
PINGO_INPUT_FINGERPRINT=checksum, GETFILECHECKSUM (docs/planning.md, "External inputs").
The local path: tests/system/test_external_inputs.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.support.gates import Gate
from tests.system.test_hadoop_system import Hadoop, hadoop, hdfs_action

__all__ = ["hadoop"]  # the fixture, used by name


def reading(corpus: str, prefix: str) -> dict[str, Any]:
    first = hdfs_action(1, f"{prefix}-read")
    first["additionalInput"].append({"value": corpus})
    return {"name": f"{prefix}-inputs", "actions": [
        first, hdfs_action(2, f"{prefix}-count", [1]), hdfs_action(3, f"{prefix}-other")]}  # fmt: skip


def states(wf: dict[str, Any]) -> dict[Any, str]:
    return {a["localId"]: a["state"] for a in wf["actions"]}


def corpus_at(hadoop: Hadoop, text: str) -> Path:
    folder = hadoop.hdfs_path("/pingo/outputs/corpus")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "part-00000").write_text(text)
    return folder


async def test_an_edited_hdfs_input_is_a_miss_for_its_readers_only(hadoop: Hadoop) -> None:
    corpus = corpus_at(hadoop, "abcd")
    uri = f"{hadoop.settings.name_node}/pingo/outputs/corpus"  # an hdfs:// URI is read as its path
    first = await hadoop.run(reading(uri, "hi"))
    assert set(states(first).values()) == {"FINISHED"}, [(a["localId"], a["error"]) for a in first["actions"]]
    seen = first["actions"][0]["inputs"][0]
    assert seen["path"] == "/pingo/outputs/corpus" and seen["fingerprint"]["size"] == 4
    assert states(await hadoop.run(reading(uri, "hi"))) == {1: "SKIPPED", 2: "REUSED", 3: "REUSED"}

    (corpus / "part-00000").write_text("abcdef")
    code, plan = await hadoop.request("POST", "/api/v1/workflows?dryRun=true", json=reading(uri, "hi"))
    assert code == 200, plan
    assert [a["decision"] for a in plan["actions"]] == ["compute", "compute", "reuse"]
    assert plan["actions"][0]["inputs"][0]["changes"][0] == "size 4 -> 6"
    again = await hadoop.run(reading(uri, "hi"))
    assert states(again) == {1: "FINISHED", 2: "FINISHED", 3: "REUSED"}


@pytest.mark.parametrize("hadoop", [{"input_fingerprint": "checksum", "input_max_files": 3}], indirect=True)
async def test_by_checksum_a_same_size_edit_is_a_miss(hadoop: Hadoop) -> None:
    corpus = corpus_at(hadoop, "abcd")
    assert set(states(await hadoop.run(reading("/pingo/outputs/corpus", "hc"))).values()) == {"FINISHED"}
    (corpus / "part-00000").write_text("wxyz")  # the same length: only the content tells
    code, plan = await hadoop.request(
        "POST", "/api/v1/workflows?dryRun=true", json=reading("/pingo/outputs/corpus", "hc")
    )
    assert code == 200 and [a["decision"] for a in plan["actions"]] == ["compute", "compute", "reuse"], plan
    assert plan["actions"][0]["inputs"][0]["changes"][0].startswith("digest ")
    # A folder past the bound (PINGO_INPUT_MAX_FILES) is refused, saying so, not fingerprinted in part.
    big = hadoop.hdfs_path("/pingo/outputs/big-corpus")
    big.mkdir(parents=True)
    for n in range(4):
        (big / f"part-{n:05d}").write_text("x")
    code, out = await hadoop.request("POST", "/api/v1/workflows", json=reading("/pingo/outputs/big-corpus", "hb"))
    assert code == 422 and out["violations"][0]["loc"] == "actions[0].additionalInput[3]", out
    assert "more than 3 files" in out["violations"][0]["message"], out
    assert "PINGO_INPUT_MAX_FILES" in out["violations"][0]["message"], out


async def test_an_hdfs_input_changed_while_its_reader_runs_is_found_at_commit(hadoop: Hadoop, gate: Gate) -> None:
    corpus = corpus_at(hadoop, "abcd")
    body = reading("/pingo/outputs/corpus", "hm")
    body["actions"][0]["additionalInput"][1]["value"] = "3"  # seconds of work: time to change it
    body["actions"][0]["configurationParameters"] = gate.conf  # and it ends only once it was changed
    plan = await hadoop.submit(body)
    for _ in range(300):
        if (await hadoop.workflow(plan["id"]))["actions"][0]["state"] == "RUNNING":
            break
        await asyncio.sleep(0.1)
    (corpus / "part-00000").write_text("changed meanwhile")
    gate.open()
    wf = await hadoop.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED"
    assert wf["actions"][0]["inputChanged"][0]["changes"][0] == "size 4 -> 17"
    assert wf["actions"][1]["inputChanged"] == wf["actions"][0]["inputChanged"]
    assert wf["actions"][2]["inputChanged"] is None


@pytest.mark.parametrize("hadoop", [{"input_roots": ["/pingo"]}], indirect=True)
async def test_pingos_oozie_applications_are_never_an_input(hadoop: Hadoop) -> None:
    """Even inside an input root: their workflow.xml holds SHELL actions' secret values."""
    first = await hadoop.run({"name": "apps", "actions": [hdfs_action(1, "ho-any")]})  # makes an application
    assert first["state"] == "SUCCEEDED"
    apps = "/pingo/oozie-apps"
    assert hadoop.hdfs_path(apps).is_dir()
    body = reading(apps, "ho")
    code, plan = await hadoop.request("POST", "/api/v1/workflows?dryRun=true", json=body)
    assert code == 200 and plan["actions"][0]["inputs"] == [], plan
    body["actions"][0]["additionalInput"][-1]["input"] = True
    code, out = await hadoop.request("POST", "/api/v1/workflows?dryRun=true", json=body)
    assert code == 422 and "must be inside" in out["violations"][0]["message"], out
