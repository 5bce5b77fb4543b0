"""External inputs and cacheVersion in the reuse key, with the services (docs/planning.md,
"External inputs"): an input edited behind Pingo's back is a miss for its reader and
every descendant, an untouched one is reused, the dry run (API and ``pingo submit
--dry-run``) names the changed input with its old and new fingerprint, ``pingo status``
and the dataset view show it, and a changed ``cacheVersion`` is a miss. The Hadoop path:
tests/system/test_hadoop_inputs.py."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.gates import Gate
from tests.support.system import Api
from tests.support.workflows import ROOT, shell_action


def reading(corpus: str, prefix: str = "in", **workflow: Any) -> dict[str, Any]:
    """1 reads the corpus, 2 reads 1, 3 reads nothing external: a change of the corpus is a
    miss for 1 and 2 only."""
    first = shell_action(1, f"{prefix}-read")
    first["additionalInput"].append({"key": "corpus", "value": corpus})
    return {
        "name": f"{prefix}-inputs",
        **workflow,
        "actions": [first, shell_action(2, f"{prefix}-count", [1]), shell_action(3, f"{prefix}-other")],
    }


def states(wf: dict[str, Any]) -> dict[Any, str]:
    return {a["localId"]: a["state"] for a in wf["actions"]}


def corpus_at(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "part-00000").write_text(text)
    return folder


async def cli(system: Api, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pingo.cli", *args, "--url", system.base,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_an_edited_input_is_a_miss_for_its_readers_only(system: Api, settings, tmp_path: Path) -> None:
    corpus = corpus_at(settings.allowed_output_roots[0] / "corpus", "abcd")
    first = await system.run(reading(str(corpus)))
    assert first["state"] == "SUCCEEDED" and set(states(first).values()) == {"FINISHED"}
    read = {a["localId"]: a for a in first["actions"]}[1]
    assert read["inputs"][0]["path"] == str(corpus)
    assert read["inputs"][0]["fingerprint"] | {"digest": None} == {"kind": "folder", "size": 4, "files": 1,
                                                                   "digest": None}  # fmt: skip
    # `pingo status` names the input, its fingerprint and its reader.
    status = await cli(system, "status", first["id"])
    assert f"input {corpus}  folder size 4 B files 1 digest sha256:" in status and "read by 1" in status, status
    # The dataset view shows what it was computed from.
    code, dataset = await system.request("GET", f"/api/v1/datasets/{read['hash']}")
    assert code == 200 and dataset["lineage"]["inputs"][0]["path"] == str(corpus), dataset
    shown = await cli(system, "datasets", "show", read["hash"])
    assert re.search(rf"input +{re.escape(str(corpus))}  folder size 4 B files 1 digest sha256:", shown), shown

    untouched = await system.run(reading(str(corpus)))
    assert states(untouched) == {1: "SKIPPED", 2: "REUSED", 3: "REUSED"}

    (corpus / "part-00000").write_text("abcdef")
    code, plan = await system.request("POST", "/api/v1/workflows?dryRun=true", json=reading(str(corpus)))
    assert code == 200, plan
    row = {a["localId"]: a for a in plan["actions"]}
    assert {i: row[i]["decision"] for i in row} == {1: "compute", 2: "compute", 3: "reuse"}
    seen = row[1]["inputs"][0]
    assert seen["previous"]["size"] == 4 and seen["fingerprint"]["size"] == 6
    assert seen["changes"][0] == "size 4 -> 6" and seen["changes"][1].startswith("digest sha256:")
    assert row[1]["explanation"].startswith(f"input {corpus} changed: size 4 -> 6"), row[1]
    path = tmp_path / "wf.json"
    path.write_text(json.dumps(reading(str(corpus))))
    text = await cli(system, "submit", "--dry-run", str(path))
    assert f"input {corpus}" in text and "changed since last used: size 4 -> 6, digest sha256:" in text, text

    again = await system.run(reading(str(corpus)))
    assert states(again) == {1: "FINISHED", 2: "FINISHED", 3: "REUSED"}
    assert {a["localId"]: a["hash"] for a in again["actions"]}[3] == {
        a["localId"]: a["hash"] for a in first["actions"]
    }[3]
    # Computed from the new corpus, as a user would check.
    out = Path({a["localId"]: a for a in again["actions"]}[1]["outputPath"])
    assert out.joinpath("_lineage").read_text().count("\n") >= 1
    # The next dry run finds it unchanged since.
    code, plan = await system.request("POST", "/api/v1/workflows?dryRun=true", json=reading(str(corpus)))
    assert [i["changes"] for i in plan["actions"][0]["inputs"]] == [[]]


@pytest.mark.settings(input_max_files=3)
async def test_a_value_marked_not_an_input_is_text_and_an_unreadable_one_is_refused(system: Api, settings) -> None:
    corpus = corpus_at(settings.allowed_output_roots[0] / "ref", "1")
    body = reading(str(corpus), "marked")
    body["actions"][0]["additionalInput"][-1]["input"] = False
    plan = await system.submit(body)
    assert plan["actions"][0]["inputs"] == []
    await system.wait(plan["id"])
    body["actions"][0]["additionalInput"][-1] = {"value": "/etc/hostname", "input": True}
    code, out = await system.request("POST", "/api/v1/workflows", json=body)
    assert code == 422 and out["violations"][0]["loc"] == "actions[0].additionalInput[3]", out
    assert "must be inside" in out["violations"][0]["message"]
    # Undeclared, a path outside the roots is a plain value: never looked at.
    body["actions"][0]["additionalInput"][-1] = {"value": "/etc/hostname"}
    code, out = await system.request("POST", "/api/v1/workflows?dryRun=true", json=body)
    assert code == 200 and out["actions"][0]["inputs"] == []
    # A folder past the bound (PINGO_INPUT_MAX_FILES) is refused, saying so, not fingerprinted in part.
    big = settings.allowed_output_roots[0] / "big"
    big.mkdir()
    for n in range(4):
        (big / f"part-{n:05d}").write_text("x")
    code, out = await system.request("POST", "/api/v1/workflows", json=reading(str(big), "big"))
    assert code == 422 and out["violations"][0]["loc"] == "actions[0].additionalInput[3]", out
    assert "more than 3 files" in out["violations"][0]["message"], out
    assert "PINGO_INPUT_MAX_FILES" in out["violations"][0]["message"], out


async def test_a_changed_cache_version_is_a_miss(system: Api) -> None:
    body = {"name": "versions", "actions": [shell_action(1, "v-a"), shell_action(2, "v-b", [1])]}
    assert set(states(await system.run(body)).values()) == {"FINISHED"}
    assert states(await system.run(body)) == {1: "SKIPPED", 2: "REUSED"}
    body["actions"][1]["cacheVersion"] = "fix-2"
    assert states(await system.run(body)) == {1: "REUSED", 2: "FINISHED"}
    body["cacheVersion"] = "2026-11"
    assert states(await system.run(body)) == {1: "FINISHED", 2: "FINISHED"}
    assert states(await system.run(body)) == {1: "SKIPPED", 2: "REUSED"}


async def test_an_input_changed_while_its_reader_runs_taints_the_output(system: Api, settings, gate: Gate) -> None:
    """Its output is kept (its readers run on it), marked with its descendants, and not
    reused by the next submission even when the input is put back as it was planned."""
    corpus = corpus_at(settings.allowed_output_roots[0] / "moving", "abcd")
    part = corpus / "part-00000"
    planned_at = part.stat()
    body = reading(str(corpus), "moving")
    body["actions"][0]["additionalInput"][1]["value"] = "3"  # seconds of work: time to change it
    body["actions"][0]["configurationParameters"] = gate.conf  # and it ends only once it was changed
    plan = await system.submit(body)
    for _ in range(300):
        if (await system.workflow(plan["id"]))["actions"][0]["state"] == "RUNNING":
            break
        await asyncio.sleep(0.1)
    part.write_text("changed meanwhile")
    gate.open()
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED"
    row = {a["localId"]: a for a in wf["actions"]}
    assert row[1]["inputChanged"][0]["path"] == str(corpus), row[1]
    assert row[1]["inputChanged"][0]["changes"][0] == "size 4 -> 17"
    assert row[2]["inputChanged"] == row[1]["inputChanged"] and row[3]["inputChanged"] is None
    code, dataset = await system.request("GET", f"/api/v1/datasets/{row[1]['hash']}")
    assert code == 200 and dataset["inputChanged"] == row[1]["inputChanged"]
    status = await cli(system, "status", wf["id"])
    assert f"✗ 1: input {corpus} changed while it ran (size 4 -> 17" in status, status
    # Put back as planned (content and modification time): the same key, yet computed again.
    part.write_text("abcd")
    os.utime(part, ns=(planned_at.st_atime_ns, planned_at.st_mtime_ns))
    body["actions"][0]["additionalInput"][1]["value"] = "0"
    again = await system.run(body)
    assert states(again) == {1: "FINISHED", 2: "FINISHED", 3: "REUSED"}
    assert [a["hash"] for a in again["actions"]] != [a["hash"] for a in wf["actions"]]  # seconds are in the key
    body["actions"][0]["additionalInput"][1]["value"] = "3"
    clean = await system.run(body)
    assert {a["localId"]: a["hash"] for a in clean["actions"]} == {a["localId"]: a["hash"] for a in wf["actions"]}
    # The root's clean output is byte-identical to the one made with 0 s of work: its child is
    # cut off to that run's (docs/planning.md, "Early cutoff"), never to the tainted one.
    assert states(clean) == {1: "FINISHED", 2: "REUSED", 3: "REUSED"}
    assert "early cutoff" in clean["actions"][1]["reason"]
    assert clean["actions"][1]["outputPath"] == again["actions"][1]["outputPath"] != row[2]["outputPath"]
    code, dataset = await system.request("GET", f"/api/v1/datasets/{row[1]['hash']}")
    assert dataset["inputChanged"] is None  # a clean commit replaced it
    assert states(await system.run(body)) == {1: "SKIPPED", 2: "REUSED", 3: "REUSED"}
