"""Fan-out over files through the real services (docs/planning.md, "Fan-out over files"):
an action mapped over a pattern runs once per matching file, each file's path is its
item (and so part of its lineage), a new file alone computes, and a pattern outside the
action roots, matching nothing or too much, is a 422 naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pingo.dev import all_services
from shared.runtime import Context, running
from tests.support.system import Api, make_settings
from tests.support.workflows import ROOT


@pytest.fixture
async def inputs(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    (folder / "2026-11-20").mkdir(parents=True)
    return folder


@pytest.fixture
async def files_system(tmp_path: Path, mongo_url: str, inputs: Path):
    settings = make_settings(tmp_path, mongo_url, action_roots=[ROOT, inputs], fanout_max_files=4)
    ctx = await Context.open(settings)
    async with running(ctx, all_services):
        api = Api(settings)
        await api.open()
        yield api
        await api.close()


def synth(aid: int, label: str, **fields: Any) -> dict[str, Any]:
    return {"id": aid, "name": label, "type": "shell", "actionFolder": "examples/jobs",
            "command": ["python3", "synth.py"], "additionalInput": [label, "0", "1"], **fields}  # fmt: skip


def over(pattern: str) -> dict[str, Any]:
    return {"name": "per file {{day}}", "parameters": {"day": {"default": "2026-11-20"}}, "actions": [
        synth(1, "count {{item}}", forEach={"files": pattern}),
        synth(2, "gather", parentActions=[1]),
    ]}  # fmt: skip


async def test_one_action_per_matching_file_and_a_new_file_alone_computes(files_system: Api, inputs: Path) -> None:
    day = inputs / "2026-11-20"
    for name in ("b.csv", "a.csv", "notes.txt"):
        (day / name).write_text(name)
    # The day is used only in the pattern: it is filled in before the files are looked for.
    wf = await files_system.run(over(f"{inputs}/{{{{day}}}}/*.csv"))
    assert wf["state"] == "SUCCEEDED", wf
    names = {a["localId"]: a["name"] for a in wf["actions"]}
    assert names == {"1-1": f"count {day}/a.csv", "1-2": f"count {day}/b.csv", 2: "gather"}
    assert {a["state"] for a in wf["actions"]} == {"FINISHED"}

    (day / "c.csv").write_text("c")
    again = await files_system.run(over(f"{inputs}/{{{{day}}}}/*.csv"))
    states = {a["name"]: a["state"] for a in again["actions"]}
    assert states == {f"count {day}/a.csv": "REUSED", f"count {day}/b.csv": "REUSED",
                      f"count {day}/c.csv": "FINISHED", "gather": "FINISHED"}  # fmt: skip


async def test_a_pattern_outside_the_roots_matching_nothing_or_too_much_is_a_422(
    files_system: Api, inputs: Path
) -> None:
    for n in range(5):
        (inputs / f"{n}.csv").write_text(str(n))
    (inputs / "hostname").symlink_to("/etc/hostname")
    cases = {
        "/etc/*.conf": f"forEach.files must search inside {ROOT}, {inputs}",
        f"{inputs}/*.parquet": f"forEach.files '{inputs}/*.parquet' matches no file",
        f"{inputs}/*.csv": f"forEach.files '{inputs}/*.csv' matches more than 4 files (PINGO_FANOUT_MAX_FILES): "
                           "narrow the pattern or split the workflow",
        f"{inputs}/host*": f"'{inputs}/hostname' leads outside {ROOT}, {inputs}",
    }  # fmt: skip
    for pattern, message in cases.items():
        body = over(pattern)
        status, answer = await files_system.request("POST", "/api/v1/workflows", json=body)
        assert status == 422, answer
        assert answer["violations"][0] == {"loc": "actions[0].forEach.files", "actionId": 1, "field": "forEach",
                                           "message": message}, pattern  # fmt: skip


async def test_the_builder_maps_over_files_through_the_cli(files_system: Api, inputs: Path, tmp_path: Path) -> None:
    from tests.system.test_python_workflows import pingo

    for name in ("north.csv", "south.csv"):
        (inputs / name).write_text(name)
    script = tmp_path / "per_file.py"
    script.write_text(
        "from pingo.builder import ITEM, Files, Workflow\n"
        "workflow = Workflow('per file')\n"
        f"parts = workflow.shell(f'count {{ITEM}}', ['python3', 'synth.py'], folder='examples/jobs',\n"
        f"                       inputs=[ITEM, '0', '1'], for_each=Files({str(inputs)!r} + '/*.csv'))\n"
        "workflow.shell('gather', ['python3', 'synth.py'], folder='examples/jobs', inputs=['all', '0', '1'],\n"
        "               parents=[parts])\n"
    )
    code, out, err = await pingo(files_system, "validate", str(script))
    assert code == 0, err + out
    code, out, err = await pingo(files_system, "submit", str(script), "--json")
    assert code == 0, err + out
    wf = await files_system.wait(json.loads(out)["id"], 60)
    assert wf["state"] == "SUCCEEDED"
    assert sorted(a["name"] for a in wf["actions"]) == [f"count {inputs}/north.csv", f"count {inputs}/south.csv",
                                                         "gather"]  # fmt: skip
