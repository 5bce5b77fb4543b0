"""Fan-out (shared/workflow_fanout.py, docs/planning.md "Fan-out"): one definition mapped
over a list becomes one action per item, each with its own lineage; a child gathers them
all in item order; every mistake is a violation where it was written."""

from __future__ import annotations

import json
from typing import Any

from pingo.builder import ITEM, Workflow
from pingo.workflow_file import load
from shared.hashing import workflow_hashes
from shared.workflow_spec import WorkflowSpec, parse_workflow
from tests.support.workflows import ROOT


def shell(aid: Any, *command: str, **fields: Any) -> dict[str, Any]:
    return {"id": aid, "name": f"a{aid}", "type": "shell", "command": ["echo", *command], **fields}


def parsed(*actions: dict[str, Any], **top: Any) -> WorkflowSpec:
    spec, problems = parse_workflow({"name": "f", "actions": list(actions), **top})
    assert problems == [] and spec is not None
    return spec


def violations(*actions: dict[str, Any], **top: Any) -> list[tuple[str, Any, str]]:
    spec, found = parse_workflow({"name": "f", "actions": list(actions), **top})
    assert spec is None
    return [(v.loc, v.actionId, v.message) for v in found]


def test_one_action_per_item_each_with_its_own_lineage_gathered_in_item_order() -> None:
    items = [f"r{n}" for n in range(12)]
    spec = parsed(shell(1), shell(2, "{{ item }}", parentActions=[1], forEach=items), shell(3, parentActions=[2]))
    by_id = spec.by_id()
    ids = [f"2-{n:02d}" for n in range(1, 13)]
    assert [a.id for a in spec.actions] == [1, *ids, 3]
    assert [by_id[i].command for i in ids] == [["echo", item] for item in items]
    assert all(by_id[i].parents == [1] and by_id[i].forEach is None for i in ids)
    assert by_id[3].parents == ids  # every item, in item order (id order is item order)
    hashes = workflow_hashes(spec)
    assert len({hashes[i] for i in ids}) == 12
    # Each item action is the action written out by hand with its item: the same hash.
    alone = parsed(shell(1), shell(9, "r4", parentActions=[1]) | {"name": "a2"})
    assert workflow_hashes(alone)[9] == hashes["2-05"]


def test_items_are_text_and_the_item_goes_everywhere_but_keys() -> None:
    spec = parsed(
        {**shell("split", "--part={{item}}"), "name": "part {{item}}", "forEach": [1, True, 2.5],
         "additionalInput": {"n": "{{item}}"}, "configurationParameters": [{"key": "K", "value": "{{item}}{{{{"}]},
    )  # fmt: skip
    assert [a.id for a in spec.actions] == ["split-1", "split-2", "split-3"]
    assert [a.name for a in spec.actions] == ["part 1", "part true", "part 2.5"]
    first = spec.actions[0]
    assert first.command == ["echo", "--part=1"]
    assert first.additionalInput[0].value == "1" and first.configurationParameters[0].value == "1{{"


def test_every_fan_out_mistake_is_a_violation_where_it_was_written() -> None:
    found = violations(
        shell(1, forEach=[]),
        shell(2, "{{item}}", forEach=["a", "b", "a"]),
        shell(3, forEach=["a"]),
        shell("4-1", "x"),
        shell(4, "{{item}}", forEach=["x"]),
        shell(5, "{{item}}", forEach=["ok", "a/../../etc"], actionFolder="examples/{{item}}"),
        shell(6, "{{item}}", "{{day}}", forEach=["x"]),
        startActionId=2,
    )
    assert ("actions[0].forEach", 1, "forEach needs at least one item") in found
    assert ("actions[1].forEach[2]", 2, "item 2 repeats item 0: the two would be one computation") in found
    assert any(loc == "actions[2].forEach" and "must write {{item}}" in m for loc, _, m in found)
    assert ("actions[4].id", 4, "the item actions of 4 are named 4-1 ... 4-1: '4-1' is taken") in found
    assert ("actions[5].actionFolder", "5-2", "actionFolder must not contain '..' or NUL (item 'a/../../etc')") in found
    assert (
        "actions[6].command[2]",
        6,
        "{{day}} names no declared parameter: the workflow declares no parameters",
    ) in found
    assert ("startActionId", None, "startActionId cannot name an action with forEach") in found


def test_a_fan_out_beyond_the_limit_is_refused() -> None:
    found = violations(shell(1, "{{item}}", forEach=[str(n) for n in range(10_001)]))
    assert found == [("actions", None, "the workflow fans out to 10001 actions: at most 10000")]


def test_parameters_reach_items_and_item_is_not_a_parameter() -> None:
    spec = parsed(
        shell(1, "{{item}}", "{{day}}", forEach=["{{day}}-a", "{{day}}-b"]),
        parameters={"day": {"default": "d1"}},
    )
    assert [a.command for a in spec.actions] == [["echo", "d1-a", "d1"], ["echo", "d1-b", "d1"]]
    found = violations(shell(1, "{{item}}"), parameters={"item": {}})
    assert ("parameters.item", None, "'item' is reserved: {{item}} is the item of an action with forEach") in found
    assert any("{{item}} is the item of an action with forEach" in m and loc == "actions[0].command[1]"
               for loc, _, m in found)  # fmt: skip


def test_the_builder_maps_and_gathers() -> None:
    wf = Workflow("map")
    src = wf.shell("src", ["echo"])
    parts = wf.shell(f"part {ITEM}", ["echo", ITEM], parents=[src], for_each=("a", "b"))
    wf.shell("gather", ["cat"], parents=[parts])
    assert wf.to_json()["actions"][1]["forEach"] == ["a", "b"]
    assert wf.spec().by_id()[3].parents == ["2-1", "2-2"]
    built = load(str(ROOT / "examples" / "python" / "regions.py"))
    written = json.loads((ROOT / "examples" / "fanout" / "regions.json").read_text())
    assert workflow_hashes(parsed(*built["actions"])) == workflow_hashes(parsed(*written["actions"]))


def test_a_small_body_cannot_fan_out_to_gigabytes() -> None:
    # 9,000 items of a 4 KB definition: 36 MB of definitions from a body of 100 KB.
    found = violations(shell(1, "{{item}}", "x" * 4000, forEach=[str(n) for n in range(9_000)]))
    assert len(found) == 1 and found[0][0] == "actions"
    assert "characters of definitions: at most 33554432" in found[0][2]


def test_a_file_pattern_is_read_and_checked_before_any_file_is_looked_for() -> None:
    from pingo.builder import Files

    workflow = Workflow("per file")
    day = workflow.parameter("day", default="2026-11-20")
    workflow.shell(f"count {ITEM}", ["wc", "-l", str(ITEM)], folder="examples/jobs",
                   for_each=Files(f"/data/{day}/*.csv"))  # fmt: skip
    body = workflow.to_json()
    assert body["actions"][0]["forEach"] == {"files": "/data/{{day}}/*.csv"}
    # Offline (pingo validate) the pattern is accepted, its parameter filled in; the files
    # are found at submission (shared/workflow_fanout_files.py).
    spec, problems = parse_workflow(body)
    assert problems == [] and spec is not None
    assert spec.actions[0].forEachFiles == "/data/2026-11-20/*.csv" and spec.actions[0].forEach is None
    assert "forEachFiles" not in spec.actions[0].definition()
    assert violations(shell(1, "x", forEach={"files": "/data/*.csv"})) == [
        ("actions[0].forEach", 1, "an action with forEach must write {{item}} where each item goes (its command, "
                                  "inputs, ...): without it every file is the same computation")]  # fmt: skip
    assert violations(shell(1, "{{item}}", forEach={"files": "/data/../etc/*"})) == [
        ("actions[0].forEach", 1, "forEach.files must not contain '..'")]  # fmt: skip
    assert violations(shell(1, "{{item}}", forEach={"file": "/data/*"}))[0][0] == "actions[0].forEach.file"
