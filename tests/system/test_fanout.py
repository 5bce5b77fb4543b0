"""Fan-out through the real services (docs/planning.md, "Fan-out"): one definition mapped
over a list runs once per item, the gathering child reads every item's output in item
order, and a later list reuses the items already computed and computes only the new ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.system import Api
from tests.support.workflows import ROOT
from tests.system.test_python_workflows import pingo


def synth(aid: int, label: str, **fields: Any) -> dict[str, Any]:
    return {"id": aid, "name": label, "type": "shell", "actionFolder": "examples/jobs",
            "command": ["python3", "synth.py"], "additionalInput": [label, "0", "1"], **fields}  # fmt: skip


def mapped(items: list[str]) -> dict[str, Any]:
    return {"name": "fan-out", "actions": [
        synth(1, "source"),
        synth(2, "part {{item}}", parentActions=[1], forEach=items),
        synth(3, "gather", parentActions=[2]),
    ]}  # fmt: skip


async def test_each_item_runs_the_child_gathers_in_item_order_and_new_items_alone_compute(system: Api) -> None:
    items = [f"region-{n}" for n in range(12)]
    wf = await system.run(mapped(items))
    assert wf["state"] == "SUCCEEDED"
    states = {a["localId"]: a["state"] for a in wf["actions"]}
    ids = [f"2-{n:02d}" for n in range(1, 13)]
    assert states == {1: "FINISHED", **dict.fromkeys(ids, "FINISHED"), 3: "FINISHED"}
    by_id = {a["localId"]: a for a in wf["actions"]}
    assert [by_id[i]["name"] for i in ids] == [f"part {item}" for item in items]
    # The gathering child was called with every item's output, in item order (region-10
    # after region-9), as the argument contract says.
    read = (Path(by_id[3]["outputPath"]) / "_lineage").read_text().splitlines()
    assert read[0] == "gather"
    assert [Path(p).name for p in read[1:]] == [Path(by_id[i]["outputPath"]).name for i in ids]

    # One more item: only it (and the child gathering a new set) computes.
    again = await system.run(mapped([*items, "region-12"]))
    states = {a["name"]: a["state"] for a in again["actions"]}
    assert states.pop("part region-12") == "FINISHED" and states.pop("gather") == "FINISHED"
    assert states.pop("source") == "REUSED"
    assert set(states.values()) == {"REUSED"} and len(states) == 12


async def test_the_regions_example_both_ways_and_a_mistake_is_a_422(system: Api) -> None:
    code, out, err = await pingo(system, "submit", "examples/fanout/regions.json", "--wait")
    assert code == 0, err + out
    code, out, err = await pingo(system, "submit", "examples/python/regions.py", "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert [a["localId"] for a in plan["actions"]] == [1, 3, "2-1", "2-2", "2-3", "2-4"]  # ids in id order
    assert plan["totals"] == {"compute": 0, "reuse": 1, "skip": 5, "follow": 0}

    body = json.loads((ROOT / "examples" / "fanout" / "regions.json").read_text())
    body["actions"][1]["forEach"] = ["north", "north"]
    status, answer = await system.request("POST", "/api/v1/workflows", json=body)
    assert status == 422, answer
    assert answer["violations"] == [{"loc": "actions[1].forEach[1]", "actionId": 2, "field": "forEach",
                                     "message": "item 1 repeats item 0: the two would be one computation"}]  # fmt: skip
