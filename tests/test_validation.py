"""Submission-time validation over real HTTP (docs/planning.md, "The workflow definition").

Every rejection must (a) answer 422, (b) name each problem with where it is, and
(c) write nothing: no workflow, no action, no dataset.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import shell_action

WORKFLOWS = "/api/v1/workflows"
NOTHING = {"workflows": 0, "actions": 0, "datasets": 0}
HEX64 = re.compile(r"^[0-9a-f]{64}$")


def shell(aid: Any, parents: list = (), **extra: Any) -> dict[str, Any]:
    return shell_action(aid, f"v-{aid}", parents, **extra)


def command_line(aid: Any, parents: list = (), **extra: Any) -> dict[str, Any]:
    return {
        "id": aid,
        "name": f"cl-{aid}",
        "type": "COMMAND_LINE",
        "actionFolder": "examples/jobs",
        "mainClassName": "org.example.Job",
        "parentActions": [{"id": p} for p in parents],
        "additionalInput": [{"key": "n", "value": str(aid)}],
        **extra,
    }


def map_reduce(aid: Any, parents: list = (), **extra: Any) -> dict[str, Any]:
    return {
        "id": aid,
        "name": f"mr-{aid}",
        "type": "MAP_REDUCE",
        "actionFolder": "examples/jobs",
        "configurationParameters": [{"key": "mapreduce.job.reduces", "value": "2"}],
        "parentActions": [{"id": p} for p in parents],
        **extra,
    }


def workflow(*actions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": "validation", "actions": list(actions), **extra}


def without(action: dict[str, Any], *fields: str) -> dict[str, Any]:
    return {k: v for k, v in action.items() if k not in fields}


async def post(system, raw: bytes) -> tuple[int, Any]:
    return await system.request("POST", WORKFLOWS, data=raw, headers={"Content-Type": "application/json"})


async def rejected(system, body: Any) -> list[dict[str, Any]]:
    """Submit ``body``; it must be refused with 422, list violations, and store nothing."""
    status, out = await post(system, json.dumps(body).encode())
    assert status == 422, out
    assert isinstance(out, dict) and isinstance(out.get("error"), str), out
    violations = out["violations"]
    assert isinstance(violations, list) and violations, out
    assert all(isinstance(v.get("loc"), str) and v.get("message") for v in violations), violations
    assert await system.counts() == NOTHING
    return violations


def one(violations: list[dict[str, Any]], loc: str, **expected: Any) -> dict[str, Any]:
    """The single violation at ``loc``; ``expected`` fields must match it."""
    hits = [v for v in violations if v["loc"] == loc]
    assert len(hits) == 1, f"expected one violation at {loc!r}, got {violations}"
    v = hits[0]
    for key, value in expected.items():
        assert v.get(key) == value, f"{key}: {v.get(key)!r} != {value!r} in {v}"
    return v


def says(v: dict[str, Any], *words: str) -> None:
    text = v["message"].lower()
    for w in words:
        assert w.lower() in text, f"{w!r} not in message {v['message']!r}"


# --- no actions ---------------------------------------------------------------------------


@pytest.mark.parametrize("body", [{"name": "empty"}, {"name": "empty", "actions": []}], ids=["missing", "empty"])
async def test_workflow_without_actions_is_rejected(system, body):
    violations = await rejected(system, body)
    says(one(violations, "actions", field="actions"), "at least one action")
    assert len(violations) == 1, violations


# --- identifiers and references ------------------------------------------------------------


async def test_duplicate_action_ids_are_rejected(system):
    violations = await rejected(system, workflow(shell(1), shell(2, [1]), shell(2, [1])))
    v = one(violations, "actions[2].id", actionId=2, field="id")
    says(v, "duplicate", "actions[1]")
    assert len(violations) == 1, violations


async def test_duplicate_ids_across_formats_are_rejected(system):
    generator = {**without(shell(7), "id"), "actionId": 7}
    violations = await rejected(system, workflow(shell(7), generator))
    says(one(violations, "actions[1].id", actionId=7, field="id"), "duplicate")


@pytest.mark.parametrize("field", ["startActionId", "endActionId"])
async def test_undefined_start_or_end_action_is_rejected(system, field):
    violations = await rejected(system, workflow(shell(1), shell(2, [1]), **{field: 99}))
    says(one(violations, field, field=field), "99", "not an action")
    assert len(violations) == 1, violations


async def test_undefined_parent_is_rejected(system):
    violations = await rejected(system, workflow(shell(1), shell(2, [1]), shell(3, [2, 42])))
    says(one(violations, "actions[2].parentActions", actionId=3, field="parentActions"), "42", "not an action")
    assert len(violations) == 1, violations


async def test_undefined_parent_in_generator_format_is_rejected(system):
    child = {"actionId": "b", "name": "b", "type": "SHELL", "command": ["true"], "parentActions": ["a", "zz"]}
    parent = {"actionId": "a", "name": "a", "type": "SHELL", "command": ["true"]}
    violations = await rejected(system, workflow(parent, child))
    says(one(violations, "actions[1].parentActions", actionId="b", field="parentActions"), "zz")


# --- cycles --------------------------------------------------------------------------------


async def test_two_cycle_is_rejected(system):
    violations = await rejected(system, workflow(shell(1), shell(2, [1, 3]), shell(3, [2])))
    v = one(violations, "actions", field="parentActions")
    says(v, "cycle")
    assert v["actionId"] in (2, 3)
    assert set(re.findall(r"\d+", v["message"])) == {"2", "3"}, v


async def test_longer_cycle_is_rejected(system):
    body = workflow(shell(1), shell(2, [1, 5]), shell(3, [2]), shell(4, [3]), shell(5, [4]), shell(6, [5]))
    violations = await rejected(system, body)
    v = one(violations, "actions", field="parentActions")
    says(v, "cycle")
    assert v["actionId"] in (2, 3, 4, 5)
    # Names exactly the actions on the cycle, not the ones hanging off it.
    assert set(re.findall(r"\d+", v["message"])) == {"2", "3", "4", "5"}, v


async def test_self_parent_is_rejected(system):
    violations = await rejected(system, workflow(shell(1), shell(2, [1, 2])))
    says(one(violations, "actions[1].parentActions", actionId=2, field="parentActions"), "own parent")


async def test_end_action_that_is_an_ancestor_of_start_is_rejected(system):
    body = workflow(shell(1), shell(2, [1]), shell(3, [2]), startActionId=3, endActionId=1)
    violations = await rejected(system, body)
    says(one(violations, "endActionId", field="endActionId"), "ancestor")
    assert len(violations) == 1, violations


async def test_end_after_start_is_accepted(system):
    """The complement of the rule above: the same chain with start and end the right way round."""
    plan = await system.submit(workflow(shell(1), shell(2, [1]), shell(3, [2]), startActionId=1, endActionId=3))
    assert [a["id"] for a in plan["actions"]] == [f"{plan['id']}.{i}" for i in (1, 2, 3)]


# --- required fields per type ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "field"),
    [
        (without(command_line(1), "actionFolder"), "actionFolder"),
        (without(command_line(1), "mainClassName"), "mainClassName"),
        ({**command_line(1), "mainClassName": ""}, "mainClassName"),
        (without(shell(1), "command"), "command"),
        ({**shell(1), "command": []}, "command"),
        (without(map_reduce(1), "actionFolder"), "actionFolder"),
        (without(map_reduce(1), "configurationParameters"), "configurationParameters"),
    ],
    ids=[
        "cl-no-folder",
        "cl-no-main",
        "cl-empty-main",
        "shell-no-command",
        "shell-empty-command",
        "mr-no-folder",
        "mr-no-conf",
    ],
)
async def test_missing_required_field_is_rejected(system, action, field):
    violations = await rejected(system, workflow(shell(0), {**action, "parentActions": [{"id": 0}]}))
    says(one(violations, f"actions[1].{field}", actionId=1, field=field), field, "required")
    assert len(violations) == 1, violations


async def test_shell_command_must_be_an_argv(system):
    violations = await rejected(system, workflow({**shell(1), "command": ["python3", ""]}))
    says(one(violations, "actions[0].command", actionId=1, field="command"), "argv")


@pytest.mark.parametrize("spelling", ["MAP_REDUCE", "map-reduce", "Map_Reduce"])
async def test_valid_map_reduce_is_rejected_as_not_supported(system, spelling):
    violations = await rejected(system, workflow(shell(1), {**map_reduce(2, [1]), "type": spelling}))
    says(one(violations, "actions[1].type", actionId=2, field="type"), "MAP_REDUCE", "not supported")
    assert len(violations) == 1, violations


async def test_unmanaged_action_without_output_path_is_rejected(system):
    violations = await rejected(system, workflow(shell(1), shell(2, [1], isManaged=False)))
    says(one(violations, "actions[1].outputPath", actionId=2, field="outputPath"), "unmanaged", "outputPath")
    assert len(violations) == 1, violations


async def test_managed_action_with_output_path_is_rejected(system):
    violations = await rejected(system, workflow(shell(1, isManaged=True, outputPath="mine/out")))
    one(violations, "actions[0].outputPath", actionId=1, field="outputPath")


@pytest.mark.parametrize("kind", ["PIG", "shell script", "", None])
async def test_unknown_or_missing_type_is_rejected(system, kind):
    violations = await rejected(system, workflow(shell(1), {**shell(2, [1]), "type": kind}))
    v = one(violations, "actions[1].type", actionId=2, field="type")
    if kind:
        says(v, "unknown", repr(kind))
    else:
        says(v, "missing")


# --- every violation in one response ---------------------------------------------------------


async def test_every_violation_is_listed_in_one_response(system):
    body = {
        "name": "many problems",
        "startActionId": 77,
        "actions": [
            shell(1),
            shell(1),  # duplicate id
            shell(4, [99]),  # undefined parent
            shell(6, [7]),
            shell(7, [6]),  # a cycle
            shell(5, [1], isManaged=False),  # unmanaged without outputPath
            without(command_line(2, [1]), "mainClassName"),  # missing required field
            {**shell(3, [2]), "type": "HIVE"},  # unknown type
        ],
    }
    violations = await rejected(system, body)
    one(violations, "actions[1].id", actionId=1, field="id")
    one(violations, "actions[2].parentActions", actionId=4, field="parentActions")
    says(one(violations, "actions", field="parentActions"), "cycle")
    one(violations, "actions[5].outputPath", actionId=5, field="outputPath")
    one(violations, "actions[6].mainClassName", actionId=2, field="mainClassName")
    one(violations, "actions[7].type", actionId=3, field="type")
    one(violations, "startActionId", field="startActionId")
    assert len(violations) == 7, violations


async def test_locations_count_actions_that_failed_to_parse(system):
    """An invalid action earlier in the list must not shift the location of later problems."""
    body = workflow(
        without(command_line(1), "mainClassName"),  # actions[0]: dropped by the parser
        shell(2),
        shell(3, [2, 99]),  # actions[2]: undefined parent
        shell(2),  # actions[3]: duplicate id
        shell(4, [4]),  # actions[4]: its own parent
    )
    violations = await rejected(system, body)
    one(violations, "actions[0].mainClassName", actionId=1)
    one(violations, "actions[2].parentActions", actionId=3)
    one(violations, "actions[3].id", actionId=2)
    one(violations, "actions[4].parentActions", actionId=4)


async def test_path_and_support_violations_are_listed_with_the_others(system):
    body = workflow(
        shell(1),
        shell(1),  # duplicate id
        {**shell(2, [1]), "actionFolder": "/etc"},  # outside the action roots
        shell(3, [1], isManaged=False, outputPath="/etc/x"),  # outside the output roots
        map_reduce(4, [1]),  # not supported by this executor
    )
    violations = await rejected(system, body)
    one(violations, "actions[1].id", actionId=1)
    one(violations, "actions[2].actionFolder", actionId=2)
    one(violations, "actions[3].outputPath", actionId=3)
    one(violations, "actions[4].type", actionId=4)


# --- the body itself ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b'{"name": "x", "actions": [', b"", b'{"name": "\xc3\x28"}', b'{"name": "x", "n": NaN}'],
    ids=["garbage", "truncated", "empty", "not-utf8", "nan"],
)
async def test_malformed_json_is_a_400_with_a_json_error(system, raw):
    status, out = await post(system, raw)
    assert status == 400, out
    assert isinstance(out, dict) and "malformed json" in out["error"].lower(), out
    assert await system.counts() == NOTHING


async def test_body_over_the_limit_is_a_413_with_a_json_error(system, settings):
    body = workflow(shell(1), padding="x" * (settings.max_body_bytes + 1024))
    status, out = await post(system, json.dumps(body).encode())
    assert status == 413, out
    assert isinstance(out, dict) and str(settings.max_body_bytes) in out["error"], out
    assert await system.counts() == NOTHING


async def test_body_just_under_the_limit_is_accepted(system, settings):
    """The limit is the configured one, not something smaller."""
    body = workflow(shell(1))
    size = len(json.dumps({**body, "padding": ""}).encode())
    body["padding"] = "x" * (settings.max_body_bytes - size - 16)
    plan = await system.submit(body)
    assert [a["id"] for a in plan["actions"]] == [f"{plan['id']}.1"]


async def test_deeply_nested_json_is_a_400_with_a_json_error(system):
    status, out = await post(system, b"[" * 100_000 + b"]" * 100_000)
    assert status == 400, out
    assert isinstance(out, dict) and out.get("error"), out
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
    assert "nested deeper than 64" in out["error"], out
    (v,) = out["violations"]
    assert v["loc"].startswith("actions[0].x[0][0]"), v
    assert await system.counts() == NOTHING


async def test_nesting_up_to_the_limit_is_accepted(system):
    status, out = await post(system, nested(64))
    assert status == 201, out
    status, out = await post(system, nested(65))
    assert status == 400, out


@pytest.mark.parametrize(
    ("raw", "loc", "words"),
    [
        (b'{"name": "\\ud800", "actions": [%s]}', "name", ["surrogate"]),
        (b'{"name": "w", "actions": [%s], "x\\u0000y": 1}', '$["x\\u0000y"]', ["NUL"]),
        (b'{"name": "w", "actions": [%s], "meta": {"\\udfff": 1}}', 'meta["\\udfff"]', ["surrogate"]),
        (b'{"name": "w", "actions": [%s], "n": 1e999}', "n", ["finite"]),
    ],
    ids=["lone-surrogate-in-name", "nul-in-key", "lone-surrogate-in-key", "infinite-number"],
)
async def test_text_and_numbers_that_cannot_be_stored_are_rejected(system, raw, loc, words):
    """The body is stored as BSON: its keys are C strings, its text UTF-8, its numbers finite."""
    status, out = await post(system, raw % json.dumps(shell(1)).encode())
    assert status == 422, out
    says(one(out["violations"], loc), *words)
    assert await system.counts() == NOTHING


async def test_nul_in_an_action_key_names_the_action(system):
    violations = await rejected(system, workflow(shell(1), {**shell(2, [1]), "x\x00": 1}))
    says(one(violations, 'actions[1]["x\\u0000"]', actionId=2), "NUL")


async def test_a_lone_surrogate_in_an_action_name_is_rejected(system):
    raw = json.dumps(workflow(shell(1))).replace('"v-1"', '"v\\ud800"').encode()
    status, out = await post(system, raw)
    assert status == 422, out
    says(one(out["violations"], "actions[0].name", actionId=1, field="name"), "surrogate")
    assert await system.counts() == NOTHING


@pytest.mark.parametrize("aid", [2**63, -(2**63) - 1, 10**30])
async def test_action_ids_must_fit_64_bits(system, aid):
    violations = await rejected(system, workflow(shell(aid), shell(2, [aid])))
    says(one(violations, "actions[0].id", field="id"), "64-bit")
    one(violations, "actions[1].parentActions[0].id")


async def test_the_largest_64_bit_ids_are_accepted(system):
    top, bottom = 2**63 - 1, -(2**63)
    plan = await system.submit(workflow(shell(top), shell(bottom, [top])))
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED"
    assert {a["localId"] for a in wf["actions"]} == {top, bottom}


async def test_an_int_id_and_the_same_id_as_text_are_duplicates(system):
    """Both would be the action document "<workflow>.1"."""
    violations = await rejected(system, workflow(shell(1), shell("1")))
    v = one(violations, "actions[1].id", actionId="1", field="id")
    says(v, "duplicate", "actions[0]", "same action")
    assert len(violations) == 1, violations


@pytest.mark.parametrize("field", ["startActionId", "endActionId"])
@pytest.mark.parametrize("ref", [[1], {"id": 1}], ids=["list", "object"])
async def test_non_scalar_start_or_end_reference_is_rejected(system, field, ref):
    violations = await rejected(system, workflow(shell(1), **{field: ref}))
    one(violations, field, field=field)


@pytest.mark.parametrize("body", [[shell(1)], "workflow", 42, None], ids=["list", "string", "number", "null"])
async def test_non_object_body_is_rejected(system, body):
    violations = await rejected(system, body)
    says(one(violations, "$"), "object")


# --- paths must stay inside the allowed roots ----------------------------------------------------


@pytest.mark.parametrize("path", ["../../etc/x", "a/../../x", "/etc/x", "/"])
async def test_output_path_outside_the_output_roots_is_rejected(system, path):
    violations = await rejected(system, workflow(shell(1), shell(2, [1], isManaged=False, outputPath=path)))
    one(violations, "actions[1].outputPath", actionId=2, field="outputPath")
    assert len(violations) == 1, violations


async def test_output_path_equal_to_the_output_root_is_rejected(system, settings):
    root = str(settings.allowed_output_roots[0])
    violations = await rejected(system, workflow(shell(1, isManaged=False, outputPath=root)))
    one(violations, "actions[0].outputPath", actionId=1, field="outputPath")


@pytest.mark.parametrize("folder", ["/etc", "examples/../../etc", "../", "/"])
async def test_action_folder_outside_the_action_roots_is_rejected(system, folder):
    violations = await rejected(system, workflow(shell(1), {**shell(2, [1]), "actionFolder": folder}))
    one(violations, "actions[1].actionFolder", actionId=2, field="actionFolder")
    assert len(violations) == 1, violations


async def test_action_folder_that_does_not_exist_is_rejected(system):
    violations = await rejected(system, workflow({**command_line(1), "actionFolder": "examples/no-such-jobs"}))
    says(one(violations, "actions[0].actionFolder", actionId=1, field="actionFolder"), "not a directory")


# --- both formats are accepted -------------------------------------------------------------------


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


async def test_boolean_ids_and_non_scalar_inputs_are_rejected(system) -> None:
    body = {
        "actions": [
            {"id": True, "name": "a", "type": "SHELL", "command": ["true"]},
            {"id": 2, "name": "b", "type": "SHELL", "command": ["true"], "additionalInput": {"k": [1]}},
        ]
    }
    out = await system.submit(body, expect=422)
    locs = {v["loc"]: v["message"] for v in out["violations"]}
    assert "not a boolean" in locs["actions[0].id"]
    assert "must be a string, number or boolean" in locs["actions[1].additionalInput"]
    assert await system.counts() == {"workflows": 0, "actions": 0, "datasets": 0}


# --- what reaches a process launcher ---------------------------------------------------------------
# argv, environment variables and -Dkey=value are C strings: NUL ends them (the launcher
# raises); a key with "=" or no key at all is not a variable or property name.


def conf(*pairs: tuple[str | None, str]) -> list[dict[str, str]]:
    return [{"value": v} if k is None else {"key": k, "value": v} for k, v in pairs]


@pytest.mark.parametrize(
    ("action", "loc", "words"),
    [
        ({**shell(1), "additionalInput": [{"key": "label", "value": "a\x00b"}]}, "additionalInput[0].value", ["NUL"]),
        ({**shell(1), "additionalInput": ["x", "a\x00b"]}, "additionalInput[1]", ["NUL"]),
        ({**shell(1), "additionalInput": {"label": "a\x00b"}}, "additionalInput.label", ["NUL"]),
        ({**shell(1), "command": ["python3", "synth.py\x00"]}, "command[1]", ["NUL"]),
        ({**command_line(1), "mainClassName": "org.Main\x00"}, "mainClassName", ["NUL"]),
        ({**shell(1), "configurationParameters": conf(("A", "1"), ("B", "x\x00"))}, "configurationParameters[1].value",
         ["NUL"]),
        ({**shell(1), "configurationParameters": conf(("A", "1"), ("B\x00", "x"))}, "configurationParameters[1].key",
         ["NUL"]),
        ({**shell(1), "configurationParameters": conf(("A", "1"), ("B=C", "x"))}, "configurationParameters[1].key",
         ["="]),
        ({**command_line(1), "configurationParameters": conf(("a", "1"), ("b=c", "x"))},
         "configurationParameters[1].key", ["="]),
        ({**command_line(1), "configurationParameters": conf(("a", "1"), ("", "x"))}, "configurationParameters[1].key",
         ["needs a key", "Java system property"]),
        ({**command_line(1), "configurationParameters": conf((None, "x"))}, "configurationParameters[0].key",
         ["needs a key"]),
        ({**shell(1), "configurationParameters": conf(("", "x"))}, "configurationParameters[0].key",
         ["needs a key", "environment variable"]),
        ({**shell(1), "configurationParameters": {"OK": "1", "A=B": "x"}}, 'configurationParameters["A=B"]', ["="]),
        ({**shell(1), "configurationParameters": {"": "x"}}, 'configurationParameters[""]', ["needs a key"]),
    ],
    ids=[
        "input-value-nul",
        "input-plain-nul",
        "input-dict-nul",
        "command-nul",
        "main-class-nul",
        "conf-value-nul",
        "conf-key-nul",
        "shell-conf-key-equals",
        "cl-conf-key-equals",
        "cl-conf-key-empty",
        "cl-conf-key-missing",
        "shell-conf-key-empty",
        "shell-conf-dict-key-equals",
        "shell-conf-dict-key-empty",
    ],
)  # fmt: skip
async def test_values_that_would_crash_the_launcher_are_rejected(system, action, loc, words):
    violations = await rejected(system, workflow(action))
    field = loc.split("[")[0].split(".")[0]
    says(one(violations, f"actions[0].{loc}", actionId=1, field=field), *words)
    assert len(violations) == 1, violations


async def test_every_launcher_problem_is_listed_at_once(system):
    body = workflow(
        {**shell(1), "command": ["python3", "a\x00"], "configurationParameters": conf(("K=V", "1"), ("", "2"))},
        {**command_line(2, [1]), "additionalInput": [{"key": "k", "value": "\x00"}]},
    )
    violations = await rejected(system, body)
    assert {v["loc"] for v in violations} == {
        "actions[0].command[1]",
        "actions[0].configurationParameters[0].key",
        "actions[0].configurationParameters[1].key",
        "actions[1].additionalInput[0].value",
    }, violations


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
