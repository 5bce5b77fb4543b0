"""Lineage hashes (docs/planning.md, "Lineage hashes") over what the parser makes of a submitted workflow.

Two actions are equivalent (their output reusable) exactly when their hashes match, so
the hash must follow the computation and its ancestry, and nothing else.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shared.hashing import workflow_hashes
from shared.planning import plan
from shared.workflow_spec import parse_workflow

ROOT = Path(__file__).resolve().parents[2]
HEX64 = re.compile(r"^[0-9a-f]{64}$")


def act(aid: Any, label: str, parents: list = (), kind: str = "COMMAND_LINE", **extra: Any) -> dict[str, Any]:
    """A thesis-format action; COMMAND_LINE unless told otherwise."""
    base: dict[str, Any] = {
        "id": aid,
        "name": label,
        "type": kind,
        "parentActions": [{"id": p} for p in parents],
        "additionalInput": [{"key": "label", "value": label}],
    }
    if kind == "SHELL":
        base |= {"actionFolder": "examples/jobs", "command": ["python3", "synth.py"]}
    elif kind == "MAP_REDUCE":
        base |= {
            "actionFolder": "jobs/mr",
            "mapper": ["python3", "mapper.py"],
            "reducer": ["python3", "reducer.py"],
            "configurationParameters": [{"key": "mapreduce.job.reduces", "value": "1"}],
        }
    elif kind == "SPARK":
        base |= {"actionFolder": "jobs/spark", "application": "job.py"}
    else:
        base |= {"actionFolder": "jobs/cl", "mainClassName": "org.example.Job"}
    return base | extra


def wf(*actions: dict[str, Any], name: str = "hashing") -> dict[str, Any]:
    return {"name": name, "actions": list(actions)}


def hashes(body: dict[str, Any]) -> dict[Any, str]:
    spec, violations = parse_workflow(body)
    assert spec is not None, violations
    out = workflow_hashes(spec)
    assert set(out) == {a.id for a in spec.actions}
    return out


def multilevel() -> dict[str, Any]:
    """1 -> {2, 3}; {2, 3} -> 4; 4 -> 5; 1 -> 6 (unrelated to 2..5 except for the root); 7 alone."""
    return wf(
        act(1, "root"),
        act(2, "left", [1]),
        act(3, "right", [1]),
        act(4, "join", [2, 3]),
        act(5, "tail", [4]),
        act(6, "side", [1]),
        act(7, "alone"),
    )


def set_label(body: dict[str, Any], aid: Any, value: str) -> dict[str, Any]:
    body = copy.deepcopy(body)
    for a in body["actions"]:
        if a["id"] == aid:
            a["additionalInput"] = [{"key": "label", "value": value}]
    return body


def test_hashes_are_64_hex_sha256_and_distinct():
    h = hashes(multilevel())
    assert all(HEX64.match(v) for v in h.values()), h
    assert len(set(h.values())) == len(h), "different computations share a hash"


def test_hashes_are_deterministic_across_processes():
    """They are stored in MongoDB and compared by other processes: no per-process salt may leak in."""
    body = multilevel()
    here = {str(k): v for k, v in hashes(body).items()}
    script = (
        "import json, sys\nfrom shared.hashing import workflow_hashes\nfrom shared.workflow_spec import "
        "parse_workflow\nspec, _ = parse_workflow(json.loads(sys.argv[1]))\n"
        "print(json.dumps({str(k): v for k, v in workflow_hashes(spec).items()}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, json.dumps(body)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        check=True,
        timeout=60,
    )
    assert json.loads(out.stdout) == here


def test_hash_is_independent_of_sibling_actions():
    alone = hashes(wf(act(1, "root"), act(2, "left", [1])))
    crowded = hashes(
        wf(act(1, "root"), act(3, "right", [1]), act(2, "left", [1]), act(9, "other"), act(4, "join", [2, 3]))
    )
    assert crowded[1] == alone[1]
    assert crowded[2] == alone[2]


def test_hash_is_independent_of_action_ids_and_their_order_in_the_list():
    base = multilevel()
    h = hashes(base)
    # An order-preserving renumbering (ints -> other ints, ints -> strings) keeps every hash.
    for mapping in ({i: i * 10 + 100 for i in range(1, 8)}, {i: f"step-{i}" for i in range(1, 8)}):
        renumbered = wf(
            *[
                {**a, "id": mapping[a["id"]], "parentActions": [{"id": mapping[p["id"]]} for p in a["parentActions"]]}
                for a in reversed(base["actions"])  # and listed in another order
            ]
        )
        again = hashes(renumbered)
        assert {mapping[k]: v for k, v in h.items()} == again


def test_any_renumbering_keeps_hashes_when_no_action_has_two_parents():
    chain = wf(act(1, "a"), act(2, "b", [1]), act(3, "c", [2]), act(4, "d", [2]))
    h = hashes(chain)
    mapping = {1: 40, 2: 7, 3: 1, 4: 99}  # not order-preserving
    renumbered = wf(
        *[
            {**a, "id": mapping[a["id"]], "parentActions": [{"id": mapping[p["id"]]} for p in a["parentActions"]]}
            for a in chain["actions"]
        ]
    )
    assert hashes(renumbered) == {mapping[k]: v for k, v in h.items()}


def test_hash_is_independent_of_the_workflow_name():
    assert hashes(wf(*multilevel()["actions"], name="first")) == hashes(wf(*multilevel()["actions"], name="other"))


def test_hash_is_independent_of_the_submission_format():
    thesis = wf(
        act(1, "a", kind="command-line"),
        act(2, "b", [1], kind="Command_Line"),
    )
    generator = {
        "name": "generator",
        "actions": [
            {
                "actionId": 1,
                "name": "a",
                "type": "COMMAND_LINE",
                "actionFolder": "jobs/cl",
                "mainClassName": "org.example.Job",
                "parentActions": [],
                "additionalInput": [{"key": "label", "value": "a"}],
                "configurationParameters": [],
            },
            {
                "actionId": 2,
                "name": "b",
                "type": "COMMAND_LINE",
                "actionFolder": "jobs/cl",
                "mainClassName": "org.example.Job",
                "parentActions": [1],
                "additionalInput": [{"key": "label", "value": "b"}],
                "configurationParameters": [],
            },
        ],
    }
    assert hashes(thesis) == hashes(generator)


@pytest.mark.parametrize(
    ("changed", "affected"),
    [(1, {1, 2, 3, 4, 5, 6}), (2, {2, 4, 5}), (4, {4, 5}), (5, {5}), (6, {6}), (7, {7})],
)
def test_a_changed_parameter_changes_that_action_and_its_descendants_only(changed, affected):
    body = multilevel()
    before = hashes(body)
    after = hashes(set_label(body, changed, "something else"))
    moved = {k for k in before if before[k] != after[k]}
    assert moved == affected


@pytest.mark.parametrize(
    "edit",
    [
        {"mainClassName": "org.example.Other"},
        {"actionFolder": "jobs/other"},
        {"name": "renamed"},
        {"configurationParameters": [{"key": "mapreduce.job.reduces", "value": "9"}]},
        {"additionalInput": [{"key": "label", "value": "left"}, {"key": "extra", "value": "1"}]},
        {"type": "SHELL", "command": ["org.example.Job"]},
    ],
    ids=["main-class", "folder", "name", "configuration", "extra-input", "type"],
)
def test_every_defining_field_is_part_of_the_hash(edit):
    body = multilevel()
    before = hashes(body)
    edited = copy.deepcopy(body)
    edited["actions"][1] |= edit  # action 2
    after = hashes(edited)
    assert {k for k in before if before[k] != after[k]} == {2, 4, 5}


def test_order_of_additional_input_matters_for_command_line():
    inputs = [{"key": "in", "value": "x"}, {"key": "out", "value": "y"}]
    one = hashes(wf(act(1, "a", additionalInput=inputs), act(2, "b", [1])))
    two = hashes(wf(act(1, "a", additionalInput=inputs[::-1]), act(2, "b", [1])))
    assert one[1] != two[1]
    assert one[2] != two[2]


def test_order_of_list_fields_does_not_matter_for_map_reduce():
    inputs = [{"key": "in", "value": "x"}, {"key": "out", "value": "y"}, {"value": "z"}]
    conf = [{"key": "mapreduce.job.reduces", "value": "4"}, {"key": "mapreduce.map.memory.mb", "value": "2048"}]
    one = hashes(
        wf(act(1, "a", kind="MAP_REDUCE", additionalInput=inputs, configurationParameters=conf), act(2, "b", [1]))
    )
    two = hashes(
        wf(
            act(1, "a", kind="MAP_REDUCE", additionalInput=inputs[::-1], configurationParameters=conf[::-1]),
            act(2, "b", [1]),
        )
    )
    assert one == two
    # ...while the values themselves still count.
    three = hashes(
        wf(act(1, "a", kind="MAP_REDUCE", additionalInput=inputs[:2], configurationParameters=conf), act(2, "b", [1]))
    )
    assert three[1] != one[1]


@pytest.mark.parametrize(
    "extra",
    [{"forceComputation": True}, {"isManaged": False, "outputPath": "mine/out"}, {"outputPath": "elsewhere/out"}],
    ids=["force", "unmanaged", "output-path"],
)
def test_force_computation_and_management_do_not_change_the_hash(extra):
    body = multilevel()
    before = hashes(body)
    edited = copy.deepcopy(body)
    edited["actions"][1] |= extra
    assert hashes(edited) == before


def test_parent_order_follows_parent_id_for_command_line():
    """The argument contract passes the parents' outputs ordered by parent id: which parent
    has the lower id decides the arguments, so it is part of the child's identity."""
    x_first = hashes(wf(act(1, "x"), act(2, "y"), act(3, "child", [1, 2])))
    y_first = hashes(wf(act(2, "x"), act(1, "y"), act(3, "child", [1, 2])))
    assert x_first[1] == y_first[2] and x_first[2] == y_first[1]  # the parents themselves are the same
    assert x_first[3] != y_first[3]
    # The order parents are *written* in does not matter: only their ids do.
    written_backwards = hashes(wf(act(1, "x"), act(2, "y"), act(3, "child", [2, 1])))
    assert written_backwards == x_first


def test_parent_order_follows_parent_id_for_shell():
    x_first = hashes(wf(act(1, "x"), act(2, "y"), act(3, "child", [1, 2], kind="SHELL")))
    y_first = hashes(wf(act(2, "x"), act(1, "y"), act(3, "child", [1, 2], kind="SHELL")))
    assert x_first[3] != y_first[3]


def test_parent_order_does_not_matter_for_map_reduce():
    x_first = hashes(wf(act(1, "x"), act(2, "y"), act(3, "child", [1, 2], kind="MAP_REDUCE")))
    y_first = hashes(wf(act(2, "x"), act(1, "y"), act(3, "child", [1, 2], kind="MAP_REDUCE")))
    assert x_first[3] == y_first[3]


def test_ancestry_is_part_of_the_hash():
    """Same definition, different inputs: not equivalent."""
    h = hashes(wf(act(1, "p"), act(2, "q"), act(3, "child", [1]), act(4, "child", [2]), act(5, "child")))
    assert len({h[3], h[4], h[5]}) == 3


def test_swapped_map_reduce_parents_give_the_same_lineage_so_reuse_is_verified():
    """The planner stores a lineage beside each dataset and reuses only when it matches;
    the lineage must follow the hash's own parent rule, or an order-insensitive action
    with its parents' ids swapped would be a "collision" and be computed again."""

    class Gate:  # the planner's view of a store holding what the first workflow produced
        def __init__(self) -> None:
            self.stored: dict[str, dict] = {}

        async def try_reuse(self, h: str, lineage: dict, claimants: list, leaf: bool) -> bool:
            return self.stored.get(h) == lineage

        async def try_follow(self, aid, h: str, lineage: dict, claimants: list, leaf: bool) -> str | None:
            return None  # nothing is in flight here

    first = wf(act(1, "x"), act(2, "y"), act(3, "child", [1, 2], kind="MAP_REDUCE"))
    swapped = wf(act(2, "x"), act(1, "y"), act(3, "child", [1, 2], kind="MAP_REDUCE"))
    gate = Gate()
    spec, _ = parse_workflow(first)
    planned = asyncio.run(plan(spec, workflow_hashes(spec), gate))
    gate.stored = {p.hash: p.lineage for p in planned.values()}
    spec, _ = parse_workflow(swapped)
    again = asyncio.run(plan(spec, workflow_hashes(spec), gate))
    assert {p.hash for p in again.values()} == set(gate.stored)
    assert {aid: p.decision for aid, p in again.items()} == {1: "reuse", 2: "reuse", 3: "reuse"}
    assert again[3].reason == "stored"


def test_a_streaming_commands_argument_order_counts_while_its_list_fields_do_not():
    """The mapper is a command (an argv): its order is what runs. Inputs and properties are sets."""
    one = hashes(wf(act(1, "a", kind="MAP_REDUCE", mapper=["cut", "-f", "1"])))
    two = hashes(wf(act(1, "a", kind="MAP_REDUCE", mapper=["cut", "1", "-f"])))
    assert one[1] != two[1]


def test_the_new_type_fields_count_for_their_types_and_left_the_older_types_hashes_alone():
    base = hashes(wf(act(1, "a", kind="SPARK")))
    assert hashes(wf(act(1, "a", kind="SPARK", sparkOpts=["--executor-memory", "2g"])))[1] != base[1]
    assert hashes(wf(act(1, "a", kind="SPARK", application="other.py")))[1] != base[1]
    # A COMMAND_LINE definition holds no MAP_REDUCE or SPARK field: its hash is as before them.
    spec, _ = parse_workflow(wf(act(1, "a")))
    assert spec is not None
    assert set(spec.actions[0].definition()) == {
        "type", "name", "actionFolder", "mainClassName", "command", "additionalInput", "configurationParameters",
    }  # fmt: skip


def test_the_mapreduce_api_counts_only_when_it_is_the_new_one():
    """A Java job's hash from before the field existed is kept: "mapred", the default, is
    the same computation as leaving it out; the new API is another computation."""
    java = {"mapper": "org.example.WordCount$Map", "reducer": "org.example.WordCount$Sum"}
    before = "e91cce46ceec1b87d6866a99622c14da78f77ef1f22ebecb7058befc7e7a599b"  # taken before mapreduceApi
    assert hashes(wf(act(1, "count", kind="MAP_REDUCE", **java)))[1] == before
    assert hashes(wf(act(1, "count", kind="MAP_REDUCE", mapreduceApi="mapred", **java)))[1] == before
    assert hashes(wf(act(1, "count", kind="MAP_REDUCE", mapreduceApi="mapreduce", **java)))[1] != before


async def test_changing_a_spark_application_file_changes_its_action_and_descendants_only(tmp_path):
    """The application is a file of the action folder, whose files' fingerprint is hashed."""
    from services.workflow_manager.submission import fingerprints, resolve_paths
    from shared.config import Settings
    from shared.executors.factory import make_executor
    from shared.storage import make_storage

    for folder, app in (("corpus", "corpus.py"), ("count", "count.py"), ("top", "top.py")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / app).write_text(f"# {app}\n")
    settings = Settings(data_dir=tmp_path / "data", action_roots=[tmp_path])
    storage, executor = make_storage(settings), make_executor(settings)
    body = wf(
        act(1, "corpus", kind="SHELL", actionFolder="corpus"),
        act(2, "count", [1], kind="SPARK", actionFolder="count", application="count.py"),
        act(3, "top", [2], kind="SPARK", actionFolder="top", application="top.py"),
        act(4, "sibling", [1], kind="SPARK", actionFolder="top", application="top.py"),
    )

    async def lineage() -> dict[Any, str]:
        parsed: list = []
        spec, violations = parse_workflow(body, parsed)
        assert spec is not None, violations
        paths, problems = await resolve_paths(parsed, settings, storage, executor)
        # Whether this machine has Spark (a "type" refusal) does not matter to hashing.
        assert [p for p in problems if p.field != "type"] == []
        prints, more = await fingerprints(parsed, paths, storage)
        assert not more, more
        return workflow_hashes(spec, prints)

    before = await lineage()
    assert await lineage() == before
    (tmp_path / "count" / "count.py").write_text("# count.py, changed\n")
    after = await lineage()
    changed = {i for i in before if before[i] != after[i]}
    assert changed == {2, 3}  # the action and its descendant; not its parent, not its sibling
