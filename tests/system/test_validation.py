"""Submission-time validation over real HTTP (docs/planning.md, "The workflow definition").

Every rejection must (a) answer 422, (b) name each problem with where it is, and
(c) write nothing: no workflow, no action, no dataset. A body too large, malformed or
nested too deep is a 400 or 413. Each rule of the workflow language, and the path and
support checks, are tested without the gateway in tests/unit/test_validation.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from shared.path_limits import OUTPUT_NAME_MAX_BYTES, OUTPUT_PATH_MAX_BYTES
from tests.support.validation import command_line, map_reduce, one, shell, workflow
from tests.support.workflows import shell_action

WORKFLOWS = "/api/v1/workflows"
NOTHING = {"workflows": 0, "actions": 0, "datasets": 0}
HEX64 = re.compile(r"^[0-9a-f]{64}$")


async def post(system, raw: bytes) -> tuple[int, Any]:
    return await system.request("POST", WORKFLOWS, data=raw, headers={"Content-Type": "application/json"})


async def rejected(system, body: Any) -> list[dict[str, Any]]:
    """Submit ``body``; it must be refused with 422, list violations, and store nothing."""
    status, out = await post(system, json.dumps(body).encode())
    assert status == 422, out
    assert isinstance(out, dict) and isinstance(out.get("detail"), str), out
    violations = out["violations"]
    assert isinstance(violations, list) and violations, out
    assert all(isinstance(v.get("loc"), str) and v.get("message") for v in violations), violations
    assert await system.counts() == NOTHING
    return violations


# --- accepted as written --------------------------------------------------------------------


async def test_end_after_start_is_accepted(system):
    """The complement of an end action that is an ancestor of the start (a violation, in
    tests/unit/test_validation.py): the same chain with start and end the right way round."""
    plan = await system.submit(workflow(shell(1), shell(2, [1]), shell(3, [2]), startActionId=1, endActionId=3))
    assert [a["id"] for a in plan["actions"]] == [f"{plan['id']}.{i}" for i in (1, 2, 3)]


async def test_the_largest_64_bit_ids_are_accepted(system):
    top, bottom = 2**63 - 1, -(2**63)
    plan = await system.submit(workflow(shell(top), shell(bottom, [top])))
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED"
    assert {a["localId"] for a in wf["actions"]} == {top, bottom}


# --- every violation in one response --------------------------------------------------------


async def test_path_and_support_violations_are_listed_with_the_others(system):
    body = workflow(
        shell(1),
        shell(1),  # duplicate id
        {**shell(2, [1]), "actionFolder": "/etc"},  # outside the action roots
        shell(3, [1], isManaged=False, outputPath="/etc/x"),  # outside the output roots
        {**map_reduce(4, [1]), "inputFormat": "org.example.Binary"},  # streaming reads text only here
    )
    violations = await rejected(system, body)
    one(violations, "actions[1].id", actionId=1)
    one(violations, "actions[2].actionFolder", actionId=2)
    one(violations, "actions[3].outputPath", actionId=3)
    one(violations, "actions[4].inputFormat", actionId=4)


async def test_misspelled_fields_and_wrong_types_are_422_in_the_workflow_language(system):
    """The issue's workflow: ``parentAction`` and ``additonalInput`` were accepted with 201,
    and the step ran as a root without its argument. A command given as a string got
    pydantic's "Input should be a valid list"."""
    typo = {**shell(2), "parentAction": [{"id": 1}], "additonalInput": [{"key": "n", "value": "3"}]}
    del typo["parentActions"], typo["additionalInput"]
    violations = await rejected(system, workflow(shell(1), typo, {**shell(3, [2]), "command": "python3 synth.py"}))
    assert {v["loc"]: v["message"] for v in violations} == {
        "actions[1].parentAction": "unknown field 'parentAction' in action 2 — did you mean 'parentActions'?",
        "actions[1].additonalInput": "unknown field 'additonalInput' in action 2 — did you mean 'additionalInput'?",
        "actions[2].command": "command must be a list of strings (an argv), not a string: "
        'write ["python3", "synth.py"]',
    }


# --- the body itself ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b'{"name": "x", "actions": [', b"", b'{"name": "\xc3\x28"}', b'{"name": "x", "n": NaN}'],
    ids=["garbage", "truncated", "empty", "not-utf8", "nan"],
)
async def test_malformed_json_is_a_400_with_a_json_error(system, raw):
    status, out = await post(system, raw)
    assert status == 400, out
    assert isinstance(out, dict) and "malformed json" in out["detail"].lower(), out
    assert await system.counts() == NOTHING


async def test_body_over_the_limit_is_a_413_with_a_json_error(system, settings):
    raw = json.dumps(workflow(shell(1))) + " " * (settings.max_body_bytes + 1024)  # JSON allows the spaces
    status, out = await post(system, raw.encode())
    assert status == 413, out
    assert isinstance(out, dict) and str(settings.max_body_bytes) in out["detail"], out
    assert await system.counts() == NOTHING


async def test_body_just_under_the_limit_is_accepted(system, settings):
    """The limit is the configured one, not something smaller."""
    raw = json.dumps(workflow(shell(1)))
    status, plan = await post(system, (raw + " " * (settings.max_body_bytes - len(raw) - 16)).encode())
    assert status == 201, plan
    assert [a["id"] for a in plan["actions"]] == [f"{plan['id']}.1"]


async def test_deeply_nested_json_is_a_400_with_a_json_error(system):
    status, out = await post(system, b"[" * 100_000 + b"]" * 100_000)
    assert status == 400, out
    assert isinstance(out, dict) and out.get("detail"), out
    assert await system.counts() == NOTHING


def nested(depth: int) -> bytes:
    """A workflow whose first action has a field holding arrays ``depth`` levels deep in all
    (the workflow object, its actions array and the action count as three)."""
    action = json.dumps(shell(1)).encode()
    inner = depth - 3
    return b'{"name": "deep", "actions": [' + action[:-1] + b', "x": ' + b"[" * inner + b"]" * inner + b"}]}"


async def test_a_field_nested_past_the_limit_is_a_400_saying_where(system):
    status, out = await post(system, nested(900))
    assert status == 400, out
    assert "nested deeper than 64" in out["detail"], out
    (v,) = out["violations"]
    assert v["loc"].startswith("actions[0].x[0][0]"), v
    assert await system.counts() == NOTHING


async def test_nesting_up_to_the_limit_reaches_the_workflow_checks(system):
    """64 levels pass the depth check (and meet the language's: no field holds arrays);
    one more is refused before parsing."""
    status, out = await post(system, nested(64))
    assert status == 422, out
    assert [v["loc"] for v in out["violations"]] == ["actions[0].x"], out
    status, out = await post(system, nested(65))
    assert status == 400, out


# --- both formats are accepted --------------------------------------------------------------


def check_plan(plan: dict[str, Any], local_ids: list[Any]) -> dict[Any, dict[str, Any]]:
    assert isinstance(plan["id"], str) and plan["id"], plan
    assert plan["state"] in ("RUNNING", "SUCCEEDED"), plan
    by_local = {a["id"].removeprefix(plan["id"] + "."): a for a in plan["actions"]}
    assert sorted(by_local) == sorted(str(i) for i in local_ids), plan
    for a in plan["actions"]:
        assert a["id"].startswith(plan["id"] + "."), a
        assert isinstance(a["name"], str) and a["name"], a
        assert HEX64.match(a["hash"]), a
        assert a["decision"] in ("compute", "reuse"), a
        assert isinstance(a["outputPath"], str) and a["outputPath"], a
    assert len({a["hash"] for a in plan["actions"]}) == len(plan["actions"]), "distinct actions share a hash"
    return by_local


async def test_thesis_format_is_accepted(system, settings):
    body = {
        "name": "thesis format",
        "startActionId": 1,
        "endActionId": 3,
        "actions": [
            {**command_line(1), "type": "command-line"},
            {**shell(2, [1]), "type": "Shell"},
            {**command_line(3, [2, 1]), "type": "Command_Line"},
        ],
    }
    plan = await system.submit(body)
    assert plan["state"] == "RUNNING"
    actions = check_plan(plan, [1, 2, 3])
    assert [a["name"] for a in plan["actions"]] == ["cl-1", "v-2", "cl-3"]
    assert all(a["decision"] == "compute" for a in plan["actions"])
    for a in actions.values():
        assert Path(a["outputPath"]) == settings.managed_dir / a["hash"]
    wf = await system.workflow(plan["id"])
    types = {a["localId"]: a["type"] for a in wf["actions"]}
    assert types == {1: "COMMAND_LINE", 2: "SHELL", 3: "COMMAND_LINE"}
    parents = {a["localId"]: [str(p) for p in a["parents"]] for a in wf["actions"]}
    assert parents == {1: [], 2: ["1"], 3: ["1", "2"]}  # ordered by parent id, not as written
    counts = await system.counts()
    assert counts["workflows"] == 1 and counts["actions"] == 3


async def test_generator_format_is_accepted(system, settings):
    common = {"type": "SHELL", "actionFolder": "examples/jobs", "command": ["python3", "synth.py"]}
    body = {
        "name": "generator format",
        "actions": [
            {
                "actionId": 1,
                "name": "first",
                **common,
                "parentActions": [],
                "additionalInput": [
                    {"key": "label", "value": "g-1"},
                    {"key": "seconds", "value": "0"},
                    {"key": "sizeKB", "value": "1"},
                ],
                "configurationParameters": [{"key": "mapreduce.job.queuename", "value": "default"}],
            },
            {
                "actionId": 2,
                "name": "second",
                **common,
                "parentActions": [1],
                "additionalInput": [
                    {"key": "label", "value": "g-2"},
                    {"key": "seconds", "value": "0"},
                    {"key": "sizeKB", "value": "1"},
                ],
                "configurationParameters": [],
                "outputPath": "generator/out-2",
            },
        ],
    }
    plan = await system.submit(body)
    actions = check_plan(plan, [1, 2])
    assert Path(actions["1"]["outputPath"]) == settings.managed_dir / actions["1"]["hash"]
    assert Path(actions["2"]["outputPath"]) == settings.allowed_output_roots[0] / "generator" / "out-2"
    wf = await system.workflow(plan["id"])
    managed = {a["localId"]: a["managed"] for a in wf["actions"]}
    assert managed == {1: True, 2: False}  # outputPath alone means unmanaged


# --- what the action folders hold -----------------------------------------------------------


async def test_an_action_folder_too_large_to_fingerprint_is_a_violation(system):
    # "." is the whole action root here (the repository, virtual environment included):
    # hashing it on every submission is refused, and nothing is stored.
    body = {"name": "whole-root", "actions": [{**shell_action(1, "root"), "actionFolder": "."}]}
    status, out = await system.request("POST", "/api/v1/workflows", json=body)
    assert status == 422, out
    [v] = out["violations"]
    assert (v["loc"], v["field"], v["actionId"]) == ("actions[0].actionFolder", "actionFolder", 1)
    assert "at most 5000 files" in v["message"]
    assert await system.db.workflows.count_documents({}) == 0


# --- path lengths and repeated keys -----------------------------------------------------------


async def test_an_output_path_too_long_to_write_is_refused_at_submission(system, settings):
    """Accepted with 201, such an output failed when its attempt was written (the attempt's
    name adds to the output's last name). Limits: docs/planning.md, "Path lengths"."""
    long_id = "x" * 60  # the longest attempt suffix: the action id fills its readable part
    cases = {
        "a 250-byte last name": "out/" + "n" * 250,
        "a 300-byte folder name": "d" * 300 + "/out",
        "a 200-byte name in two-byte characters": "é" * 100,
        "a 3800-byte path": "/".join(["p" * 99] * 38),
    }
    for what, path in cases.items():
        violations = await rejected(system, workflow(shell(long_id, isManaged=False, outputPath=path)))
        v = one(violations, "actions[0].outputPath", actionId=long_id)
        assert "bytes" in v["message"], (what, v)
    # Short as given, too long inside the output root (relative to it): refused as well.
    root_bytes = len(str(settings.allowed_output_roots[0]).encode())
    deep = "/".join(["q" * 99] * ((OUTPUT_PATH_MAX_BYTES - root_bytes) // 100 + 1))
    assert len(deep.encode()) <= OUTPUT_PATH_MAX_BYTES
    violations = await rejected(system, workflow(shell(long_id, isManaged=False, outputPath=deep)))
    assert "once inside" in one(violations, "actions[0].outputPath")["message"]

    # The longest last name allowed is written and committed, attempt path and all.
    plan = await system.submit(workflow(shell(long_id, isManaged=False, outputPath="o" * OUTPUT_NAME_MAX_BYTES)))
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED", wf
    assert (settings.allowed_output_roots[0] / ("o" * OUTPUT_NAME_MAX_BYTES)).is_dir()


async def test_a_key_given_twice_is_refused_naming_it_and_where(system):
    """Last one wins, before: ``{"name": "a", "name": "b"}`` was the workflow ``b``."""
    raw = (
        '{"name": "first", "name": "second", "actions": [{"id": 1, "name": "a", "type": "SHELL",'
        ' "actionFolder": "examples/jobs", "command": ["python3", "synth.py"], "command": ["true"],'
        ' "additionalInput": [{"key": "label", "value": "v", "value": "w"}]}]}'
    )
    status, out = await post(system, raw.encode())
    assert status == 422, out
    found = {v["loc"]: v["message"] for v in out["violations"]}
    assert found == {
        "name": 'key "name" is given more than once in this object: keys must be unique',
        "actions[0].command": 'key "command" is given more than once in this object: keys must be unique',
        "actions[0].additionalInput[0].value": 'key "value" is given more than once in this object: keys must be '
        "unique",
    }, found
    assert one(out["violations"], "actions[0].command", actionId=1)
    assert await system.counts() == NOTHING
