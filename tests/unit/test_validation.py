"""Submission-time validation (docs/planning.md, "The workflow definition"): what the
gateway checks in a body before it stores anything, without the gateway. Every rejection
names each problem with where it is.

Over real HTTP, where a rejection also answers 422 and writes nothing, and where a body
too large, malformed or nested too deep is a 400 or 413: tests/system/test_validation.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from services.workflow_manager.submission import fingerprints, resolve_paths
from shared.config import Settings
from shared.executors.factory import make_executor
from shared.storage import make_storage
from shared.workflow_spec import parse_workflow
from tests.support.validation import command_line, map_reduce, one, says, shell, spark, without, workflow
from tests.support.workflows import ROOT


class Checks:
    """The gateway's checks of a parsed body, in its order (``post_workflow`` in
    services/workflow_manager/service.py): the workflow language, then the paths and the
    executor's support, then, if all is well, the action folders' fingerprints."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.storage = make_storage(settings)
        self.executor = make_executor(settings)

    async def violations(self, body: Any) -> list[dict[str, Any]]:
        parsed: list = []
        _, violations = parse_workflow(body, parsed)
        paths, local = await resolve_paths(parsed, self.settings, self.storage, self.executor)
        violations = [*violations, *local]
        if not violations:
            _, violations = await fingerprints(parsed, paths, self.storage)
        return [v.model_dump(exclude_none=True) for v in violations]


@pytest.fixture
def checks(tmp_path: Path) -> Checks:
    """With the action and output roots of the system tests' settings; no store, no broker."""
    return Checks(Settings(data_dir=tmp_path / "data", action_roots=[ROOT], output_roots=[tmp_path / "outputs"]))


async def rejected(checks: Checks, body: Any) -> list[dict[str, Any]]:
    """``body``'s violations: there must be some, each saying where and what."""
    violations = await checks.violations(body)
    assert isinstance(violations, list) and violations, body
    assert all(isinstance(v.get("loc"), str) and v.get("message") for v in violations), violations
    return violations


# --- no actions -----------------------------------------------------------------------------


@pytest.mark.parametrize("body", [{"name": "empty"}, {"name": "empty", "actions": []}], ids=["missing", "empty"])
async def test_workflow_without_actions_is_rejected(checks, body):
    violations = await rejected(checks, body)
    says(one(violations, "actions", field="actions"), "at least one action")
    assert len(violations) == 1, violations


# --- identifiers and references -------------------------------------------------------------


async def test_duplicate_action_ids_are_rejected(checks):
    violations = await rejected(checks, workflow(shell(1), shell(2, [1]), shell(2, [1])))
    v = one(violations, "actions[2].id", actionId=2, field="id")
    says(v, "duplicate", "actions[1]")
    assert len(violations) == 1, violations


async def test_duplicate_ids_across_formats_are_rejected(checks):
    generator = {**without(shell(7), "id"), "actionId": 7}
    violations = await rejected(checks, workflow(shell(7), generator))
    says(one(violations, "actions[1].id", actionId=7, field="id"), "duplicate")


@pytest.mark.parametrize("field", ["startActionId", "endActionId"])
async def test_undefined_start_or_end_action_is_rejected(checks, field):
    violations = await rejected(checks, workflow(shell(1), shell(2, [1]), **{field: 99}))
    says(one(violations, field, field=field), "99", "not an action")
    assert len(violations) == 1, violations


async def test_undefined_parent_is_rejected(checks):
    violations = await rejected(checks, workflow(shell(1), shell(2, [1]), shell(3, [2, 42])))
    says(one(violations, "actions[2].parentActions", actionId=3, field="parentActions"), "42", "not an action")
    assert len(violations) == 1, violations


async def test_undefined_parent_in_generator_format_is_rejected(checks):
    child = {"actionId": "b", "name": "b", "type": "SHELL", "command": ["true"], "parentActions": ["a", "zz"]}
    parent = {"actionId": "a", "name": "a", "type": "SHELL", "command": ["true"]}
    violations = await rejected(checks, workflow(parent, child))
    says(one(violations, "actions[1].parentActions", actionId="b", field="parentActions"), "zz")


# --- cycles ---------------------------------------------------------------------------------


async def test_two_cycle_is_rejected(checks):
    violations = await rejected(checks, workflow(shell(1), shell(2, [1, 3]), shell(3, [2])))
    v = one(violations, "actions", field="parentActions")
    says(v, "cycle")
    assert v["actionId"] in (2, 3)
    assert set(re.findall(r"\d+", v["message"])) == {"2", "3"}, v


async def test_longer_cycle_is_rejected(checks):
    body = workflow(shell(1), shell(2, [1, 5]), shell(3, [2]), shell(4, [3]), shell(5, [4]), shell(6, [5]))
    violations = await rejected(checks, body)
    v = one(violations, "actions", field="parentActions")
    says(v, "cycle")
    assert v["actionId"] in (2, 3, 4, 5)
    # Names exactly the actions on the cycle, not the ones hanging off it.
    assert set(re.findall(r"\d+", v["message"])) == {"2", "3", "4", "5"}, v


async def test_self_parent_is_rejected(checks):
    violations = await rejected(checks, workflow(shell(1), shell(2, [1, 2])))
    says(one(violations, "actions[1].parentActions", actionId=2, field="parentActions"), "own parent")


async def test_end_action_that_is_an_ancestor_of_start_is_rejected(checks):
    body = workflow(shell(1), shell(2, [1]), shell(3, [2]), startActionId=3, endActionId=1)
    violations = await rejected(checks, body)
    says(one(violations, "endActionId", field="endActionId"), "ancestor")
    assert len(violations) == 1, violations


# --- required fields per type ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "field"),
    [
        (without(command_line(1), "actionFolder"), "actionFolder"),
        (without(command_line(1), "mainClassName"), "mainClassName"),
        ({**command_line(1), "mainClassName": ""}, "mainClassName"),
        (without(shell(1), "command"), "command"),
        ({**shell(1), "command": []}, "command"),
        (without(map_reduce(1), "mapper"), "mapper"),
        ({**map_reduce(1), "mapper": []}, "mapper"),
        (without(spark(1), "actionFolder"), "actionFolder"),
        (without(spark(1), "application"), "application"),
    ],
    ids=[
        "cl-no-folder",
        "cl-no-main",
        "cl-empty-main",
        "shell-no-command",
        "shell-empty-command",
        "mr-no-mapper",
        "mr-empty-mapper",
        "spark-no-folder",
        "spark-no-application",
    ],
)
async def test_missing_required_field_is_rejected(checks, action, field):
    violations = await rejected(checks, workflow(shell(0), {**action, "parentActions": [{"id": 0}]}))
    says(one(violations, f"actions[1].{field}", actionId=1, field=field), field, "required")
    assert len(violations) == 1, violations


async def test_shell_command_must_be_an_argv(checks):
    violations = await rejected(checks, workflow({**shell(1), "command": ["python3", ""]}))
    says(one(violations, "actions[0].command", actionId=1, field="command"), "argv")


@pytest.mark.parametrize("spelling", ["MAP_REDUCE", "map-reduce", "Map_Reduce"])
async def test_a_streaming_map_reduce_is_accepted_in_any_spelling_of_its_type(checks, spelling):
    assert await checks.violations(workflow(shell(1), {**map_reduce(2, [1]), "type": spelling})) == []


async def test_every_violation_of_the_new_types_is_listed_with_where_it_is(checks):
    body = workflow(
        shell(1),
        {**map_reduce(2, [1]), "mapper": "python3 mapper.py"},  # a shell line, not a class nor an argv
        {**map_reduce(3, [1]), "mapper": ["cat"], "reducer": "org.example.Sum"},  # streaming and Java mixed
        {**map_reduce(4, [1]), "application": "count.py"},  # a SPARK field
        {**spark(5, [1]), "application": "count.txt"},
        {**spark(6, [1]), "application": "app.jar"},  # a jar needs its main class
        {**spark(7, [1]), "mainClassName": "org.example.Main"},  # ...and a .py has none
        {**spark(8, [1]), "sparkOpts": ["--master", "yarn"], "mapper": ["cat"]},
        {**spark(9, [1]), "application": "../count.py"},
    )
    violations = await rejected(checks, body)
    found = {(v["loc"], v["actionId"]) for v in violations}
    assert found == {
        ("actions[1].mapper", 2),
        ("actions[2].reducer", 3),
        ("actions[3].application", 4),
        ("actions[4].application", 5),
        ("actions[5].mainClassName", 6),
        ("actions[6].mainClassName", 7),
        ("actions[7].sparkOpts", 8),
        ("actions[7].mapper", 8),
        ("actions[8].application", 9),
    }, violations
    says(one(violations, "actions[1].mapper"), "not a Java class name", "list of strings")
    says(one(violations, "actions[3].application"), "SPARK", "MAP_REDUCE")
    says(one(violations, "actions[7].sparkOpts"), "--master", "set by Pingo")


async def test_a_java_map_reduce_job_names_its_hadoop_api_and_only_a_java_one_does(checks):
    java = {**map_reduce(2, [1]), "mapper": "org.example.Words", "reducer": "org.example.Sum"}
    for api in ("mapred", "mapreduce"):
        assert await checks.violations(workflow(shell(1), {**java, "mapreduceApi": api})) == []
    body = workflow(
        shell(1, mapreduceApi="mapred"),
        {**java, "mapreduceApi": "v2"},
        {**map_reduce(3, [1]), "mapreduceApi": "mapreduce"},  # a streaming job has no Java API
    )
    violations = await rejected(checks, body)
    assert [v["loc"] for v in violations] == [
        "actions[0].mapreduceApi", "actions[1].mapreduceApi", "actions[2].mapreduceApi",
    ], violations  # fmt: skip
    says(violations[0], "MAP_REDUCE", "SHELL")
    says(violations[1], '"mapred"', '"mapreduce"', '"v2"')
    says(violations[2], "streaming")


async def test_the_local_executor_refuses_what_it_cannot_run_at_submission(checks, monkeypatch):
    java = {**map_reduce(2, [1]), "mapper": "org.example.Words", "reducer": "org.example.Sum"}
    body = workflow(
        shell(1),
        java,
        {**map_reduce(3, [1]), "outputFormat": "org.apache.hadoop.mapred.SequenceFileOutputFormat"},
        spark(4, [1]),
    )
    # Streaming jobs read and write text only; a Java job brings its own formats.
    violations = await rejected(checks, body)
    assert [v["loc"] for v in violations] == ["actions[2].outputFormat"], violations
    says(violations[0], "text", "Java classes")
    # Java MapReduce and Spark need Spark's distribution (pingo[spark]); without it both are refused.
    monkeypatch.setattr("shared.executors.local.spark_submit", lambda: None)
    violations = await rejected(checks, workflow(shell(1), java, spark(4, [1])))
    assert [v["loc"] for v in violations] == ["actions[1].mapper", "actions[2].type"], violations
    says(violations[0], "Java MapReduce", "pingo[spark]", "oozie executor")
    says(violations[1], "SPARK", "pingo[spark]")


async def test_unmanaged_action_without_output_path_is_rejected(checks):
    violations = await rejected(checks, workflow(shell(1), shell(2, [1], isManaged=False)))
    says(one(violations, "actions[1].outputPath", actionId=2, field="outputPath"), "unmanaged", "outputPath")
    assert len(violations) == 1, violations


async def test_managed_action_with_output_path_is_rejected(checks):
    violations = await rejected(checks, workflow(shell(1, isManaged=True, outputPath="mine/out")))
    one(violations, "actions[0].outputPath", actionId=1, field="outputPath")


@pytest.mark.parametrize("kind", ["PIG", "shell script", "", None])
async def test_unknown_or_missing_type_is_rejected(checks, kind):
    violations = await rejected(checks, workflow(shell(1), {**shell(2, [1]), "type": kind}))
    v = one(violations, "actions[1].type", actionId=2, field="type")
    if kind:
        says(v, "unknown", repr(kind))
    else:
        says(v, "missing")


# --- every violation in one answer ----------------------------------------------------------


async def test_every_violation_is_listed_in_one_response(checks):
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
    violations = await rejected(checks, body)
    one(violations, "actions[1].id", actionId=1, field="id")
    one(violations, "actions[2].parentActions", actionId=4, field="parentActions")
    says(one(violations, "actions", field="parentActions"), "cycle")
    one(violations, "actions[5].outputPath", actionId=5, field="outputPath")
    one(violations, "actions[6].mainClassName", actionId=2, field="mainClassName")
    one(violations, "actions[7].type", actionId=3, field="type")
    one(violations, "startActionId", field="startActionId")
    assert len(violations) == 7, violations


async def test_locations_count_actions_that_failed_to_parse(checks):
    """An invalid action earlier in the list must not shift the location of later problems."""
    body = workflow(
        without(command_line(1), "mainClassName"),  # actions[0]: dropped by the parser
        shell(2),
        shell(3, [2, 99]),  # actions[2]: undefined parent
        shell(2),  # actions[3]: duplicate id
        shell(4, [4]),  # actions[4]: its own parent
    )
    violations = await rejected(checks, body)
    one(violations, "actions[0].mainClassName", actionId=1)
    one(violations, "actions[2].parentActions", actionId=3)
    one(violations, "actions[3].id", actionId=2)
    one(violations, "actions[4].parentActions", actionId=4)


# --- the body itself ------------------------------------------------------------------------


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
async def test_text_and_numbers_that_cannot_be_stored_are_rejected(checks, raw, loc, words):
    """The body is stored as BSON: its keys are C strings, its text UTF-8, its numbers finite."""
    violations = await rejected(checks, json.loads(raw % json.dumps(shell(1)).encode()))
    says(one(violations, loc), *words)


async def test_nul_in_an_action_key_names_the_action(checks):
    violations = await rejected(checks, workflow(shell(1), {**shell(2, [1]), "x\x00": 1}))
    says(one(violations, 'actions[1]["x\\u0000"]', actionId=2), "NUL")


async def test_a_lone_surrogate_in_an_action_name_is_rejected(checks):
    raw = json.dumps(workflow(shell(1))).replace('"v-1"', '"v\\ud800"').encode()
    violations = await rejected(checks, json.loads(raw))
    says(one(violations, "actions[0].name", actionId=1, field="name"), "surrogate")


@pytest.mark.parametrize("aid", [2**63, -(2**63) - 1, 10**30])
async def test_action_ids_must_fit_64_bits(checks, aid):
    violations = await rejected(checks, workflow(shell(aid), shell(2, [aid])))
    says(one(violations, "actions[0].id", field="id"), "64-bit")
    one(violations, "actions[1].parentActions[0].id")


async def test_an_int_id_and_the_same_id_as_text_are_duplicates(checks):
    """Both would be the action document "<workflow>.1"."""
    violations = await rejected(checks, workflow(shell(1), shell("1")))
    v = one(violations, "actions[1].id", actionId="1", field="id")
    says(v, "duplicate", "actions[0]", "same action")
    assert len(violations) == 1, violations


@pytest.mark.parametrize("field", ["startActionId", "endActionId"])
@pytest.mark.parametrize("ref", [[1], {"id": 1}], ids=["list", "object"])
async def test_non_scalar_start_or_end_reference_is_rejected(checks, field, ref):
    violations = await rejected(checks, workflow(shell(1), **{field: ref}))
    one(violations, field, field=field)


@pytest.mark.parametrize("body", [[shell(1)], "workflow", 42, None], ids=["list", "string", "number", "null"])
async def test_non_object_body_is_rejected(checks, body):
    violations = await rejected(checks, body)
    says(one(violations, "$"), "object")


async def test_boolean_ids_and_non_scalar_inputs_are_rejected(checks) -> None:
    body = {
        "actions": [
            {"id": True, "name": "a", "type": "SHELL", "command": ["true"]},
            {"id": 2, "name": "b", "type": "SHELL", "command": ["true"], "additionalInput": {"k": [1]}},
        ]
    }
    locs = {v["loc"]: v["message"] for v in await rejected(checks, body)}
    assert "not a boolean" in locs["actions[0].id"]
    assert "must be a string, number or boolean" in locs["actions[1].additionalInput"]


# --- paths must stay inside the allowed roots -----------------------------------------------


@pytest.mark.parametrize("path", ["../../etc/x", "a/../../x", "/etc/x", "/"])
async def test_output_path_outside_the_output_roots_is_rejected(checks, path):
    violations = await rejected(checks, workflow(shell(1), shell(2, [1], isManaged=False, outputPath=path)))
    one(violations, "actions[1].outputPath", actionId=2, field="outputPath")
    assert len(violations) == 1, violations


async def test_output_path_equal_to_the_output_root_is_rejected(checks):
    root = str(checks.settings.allowed_output_roots[0])
    violations = await rejected(checks, workflow(shell(1, isManaged=False, outputPath=root)))
    one(violations, "actions[0].outputPath", actionId=1, field="outputPath")


@pytest.mark.parametrize("folder", ["/etc", "examples/../../etc", "../", "/"])
async def test_action_folder_outside_the_action_roots_is_rejected(checks, folder):
    violations = await rejected(checks, workflow(shell(1), {**shell(2, [1]), "actionFolder": folder}))
    one(violations, "actions[1].actionFolder", actionId=2, field="actionFolder")
    assert len(violations) == 1, violations


async def test_action_folder_that_does_not_exist_is_rejected(checks):
    violations = await rejected(checks, workflow({**command_line(1), "actionFolder": "examples/no-such-jobs"}))
    says(one(violations, "actions[0].actionFolder", actionId=1, field="actionFolder"), "not a directory")


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
async def test_values_that_would_crash_the_launcher_are_rejected(checks, action, loc, words):
    violations = await rejected(checks, workflow(action))
    field = loc.split("[")[0].split(".")[0]
    says(one(violations, f"actions[0].{loc}", actionId=1, field=field), *words)
    assert len(violations) == 1, violations


async def test_every_launcher_problem_is_listed_at_once(checks):
    body = workflow(
        {**shell(1), "command": ["python3", "a\x00"], "configurationParameters": conf(("K=V", "1"), ("", "2"))},
        {**command_line(2, [1]), "additionalInput": [{"key": "k", "value": "\x00"}]},
    )
    violations = await rejected(checks, body)
    assert {v["loc"] for v in violations} == {
        "actions[0].command[1]",
        "actions[0].configurationParameters[0].key",
        "actions[0].configurationParameters[1].key",
        "actions[1].additionalInput[0].value",
    }, violations


# --- a strict language: unknown fields --------------------------------------------------------
# A misspelled field used to be ignored: the action ran without it and failed at run time.

# pydantic's own words and internal names, which must never reach a user.
PARSER_NOISE = ("Input should", "constrained-", "RetryPolicy", "_Raw", "list[", "dict[", "union[", "Value error")


def in_workflow_language(violations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for v in violations:
        for noise in PARSER_NOISE:
            assert noise not in v["loc"] and noise not in v["message"], v
    return violations


async def test_the_misspelled_fields_of_the_issue_are_named_with_a_suggestion(checks):
    """``parentAction`` and ``additonalInput``: accepted with 201 before, the step then ran as
    a root without its argument. Its child does not report the rejected action as missing."""
    typo = {**without(shell(2), "parentActions", "additionalInput"), "parentAction": [{"id": 1}],
            "additonalInput": ["x"]}  # fmt: skip
    violations = in_workflow_language(await rejected(checks, workflow(shell(1), typo, shell(3, [2]))))
    v = one(violations, "actions[1].parentAction", actionId=2, field="parentAction")
    assert v["message"] == "unknown field 'parentAction' in action 2 — did you mean 'parentActions'?", v
    says(one(violations, "actions[1].additonalInput", actionId=2), "unknown field 'additonalInput'",
         "did you mean 'additionalInput'")  # fmt: skip
    assert len(violations) == 2, violations


@pytest.mark.parametrize(
    ("body", "loc", "suggestion"),
    [
        (workflow(shell(1), defualts={}), "defualts", "defaults"),
        (workflow(shell(1), endActionID=1), "endActionID", "endActionId"),
        (workflow({**shell(1), "comand": ["true"]}), "actions[0].comand", "command"),
        (workflow({**shell(1), "Type": "SHELL"}), "actions[0].Type", "type"),
        (workflow({**shell(1), "parents": []}), "actions[0].parents", "parentActions"),
        (workflow({**shell(1), "timeout": 5}), "actions[0].timeout", "timeoutSeconds"),
        (workflow(shell(1), {**shell(2), "parentActions": [{"idd": 1}]}), "actions[1].parentActions[0].idd", "id"),
        (workflow({**shell(1), "additionalInput": [{"key": "k", "vaule": "v"}]}), "actions[0].additionalInput[0].vaule",
         "value"),
        (workflow({**shell(1), "configurationParameters": [{"kye": "K", "value": "v"}]}),
         "actions[0].configurationParameters[0].kye", "key"),
        (workflow({**shell(1), "retries": {"count": 2, "delay": 1}}), "actions[0].retries.delay", "delaySeconds"),
        (workflow(shell(1), defaults={"retry": 2}), "defaults.retry", "retries"),
        (workflow(shell(1), defaults={"retries": {"backof": 2}}), "defaults.retries.backof", "backoff"),
    ],
    ids=["workflow", "workflow-case", "action", "action-case", "action-synonym", "action-timeout", "parent",
         "input", "configuration", "retries", "defaults", "defaults-retries"],
)  # fmt: skip
async def test_an_unknown_field_at_any_level_is_named_with_the_closest_known_one(checks, body, loc, suggestion):
    violations = in_workflow_language(await rejected(checks, body))
    says(one(violations, loc), f"unknown field '{loc.rsplit('.', 1)[-1]}'", f"did you mean '{suggestion}'?")
    assert len(violations) == 1, violations


async def test_an_unknown_field_like_no_known_one_lists_the_known_ones(checks):
    violations = in_workflow_language(await rejected(checks, workflow({**shell(1), "colour": "blue"})))
    says(one(violations, "actions[0].colour", actionId=1), "unknown field 'colour' in action 1", "known fields",
         "parentActions", "timeoutSeconds")  # fmt: skip


async def test_unknown_fields_and_other_violations_are_listed_together(checks):
    body = workflow(
        {**shell(1), "parentAction": []},
        {**shell(2, [1]), "command": "python3 synth.py"},
        {**shell(3, [9])},
        extra=True,
    )
    violations = in_workflow_language(await rejected(checks, body))
    assert [v["loc"] for v in violations] == [
        "extra", "actions[0].parentAction", "actions[1].command", "actions[2].parentActions"
    ], violations  # fmt: skip


# --- wrong types, said in the workflow language --------------------------------------------------


@pytest.mark.parametrize(
    ("change", "loc", "words"),
    [
        ({"command": "python3 synth.py --n 3"}, "command",
         ["list of strings (an argv)", "not a string", 'write ["python3", "synth.py", "--n", "3"]']),
        ({"command": "cat x | wc -l"}, "command", ["argv", 'write ["sh", "-c", "cat x | wc -l"] if it needs a shell']),
        ({"command": ["python3", 3]}, "command[1]", ["command[1] must be a string", "argv", "not 3"]),
        ({"retries": -1}, "retries", ["retries must be at least 0", "not -1"]),
        ({"retries": 101}, "retries", ["at most 100"]),
        ({"retries": "3"}, "retries", ["retries must be a count", "{count, delaySeconds, backoff}", "not a string"]),
        ({"retries": True}, "retries", ["retries must be a count", "not true"]),
        ({"retries": [2]}, "retries", ["retries must be a count", "not a list"]),
        ({"retries": {"count": 1.5}}, "retries.count", ["whole number", "not 1.5"]),
        ({"retries": {"count": 2, "backoff": 0.5}}, "retries.backoff", ["at least 1"]),
        ({"timeoutSeconds": 0}, "timeoutSeconds", ["more than 0"]),
        ({"timeoutSeconds": "60"}, "timeoutSeconds", ["number of seconds", "not a string"]),
        ({"timeoutSeconds": 10**9}, "timeoutSeconds", ["at most 2592000"]),
        ({"additionalInput": 5}, "additionalInput", ["list of arguments", "not 5"]),
        ({"additionalInput": [["nested"]]}, "additionalInput[0]", ["string, number, boolean", "not a list"]),
        ({"additionalInput": [{"key": "k"}]}, "additionalInput[0].value", ["required"]),
        ({"configurationParameters": [{"key": "A", "value": None}]}, "configurationParameters[0].value",
         ["string, number or boolean", "not null"]),
        ({"parentActions": [1.5]}, "parentActions[0]", ["parent id", "not 1.5"]),
        ({"parentActions": "1"}, "parentActions", ["list of parent ids", "not a string"]),
        ({"forceComputation": "maybe"}, "forceComputation", ["true or false"]),
        ({"name": 5}, "name", ["name must be a non-empty string", "not 5"]),
        ({"id": 1.5}, "id", ["integer or a string", "not 1.5"]),
    ],
    ids=["command-line", "command-shell-line", "command-item", "retries-negative", "retries-too-many",
         "retries-text", "retries-boolean", "retries-list", "retries-count-fraction", "retries-backoff",
         "timeout-zero", "timeout-text", "timeout-too-long", "input-number", "input-nested", "input-no-value",
         "conf-null", "parent-fraction", "parents-text", "force-text", "name-number", "id-fraction"],
)  # fmt: skip
async def test_a_wrong_type_is_said_as_what_the_field_must_be(checks, change, loc, words):
    violations = in_workflow_language(await rejected(checks, workflow({**shell(0), "id": 1, **change})))
    says(one(violations, f"actions[0].{loc}"), *words)
    assert len(violations) == 1, violations


@pytest.mark.parametrize("actions", [{"1": shell(1)}, "shell(1)"], ids=["object", "string"])
async def test_actions_that_are_not_a_list_are_said_to_be_one(checks, actions):
    violations = in_workflow_language(await rejected(checks, workflow(actions=actions)))
    says(one(violations, "actions", field="actions"), "actions must be a list of action objects")
    assert len(violations) == 1, violations


@pytest.mark.parametrize(
    ("defaults", "loc", "words"),
    [
        (5, "defaults", ["defaults must be an object", "not 5"]),
        ({"retries": -2}, "defaults.retries", ["at least 0"]),
        ({"retries": {"count": "x"}}, "defaults.retries.count", ["whole number"]),
        ({"timeoutSeconds": False}, "defaults.timeoutSeconds", ["number of seconds", "not false"]),
    ],
    ids=["not-object", "retries", "retries-count", "timeout"],
)
async def test_wrong_defaults_are_said_in_the_workflow_language(checks, defaults, loc, words):
    violations = in_workflow_language(await rejected(checks, workflow(shell(1), defaults=defaults)))
    says(one(violations, loc, field="defaults"), *words)
    assert len(violations) == 1, violations


def test_execution_settings_are_accepted_in_both_forms_and_defaults_fill_in():
    body = workflow(
        {**shell(1), "retries": 2},
        {**shell(2, [1]), "retries": {"count": 1, "delaySeconds": 0.5, "backoff": 3}, "timeoutSeconds": 30},
        shell(3, [2]),
        defaults={"retries": {"count": 4, "delaySeconds": 2}, "timeoutSeconds": 600},
    )
    spec, violations = parse_workflow(body)
    assert violations == [] and spec is not None
    a = spec.by_id()
    assert (a[1].retries.count, a[1].retries.delaySeconds, a[1].timeoutSeconds) == (2, 10.0, 600)
    assert (a[2].retries.count, a[2].retries.delaySeconds, a[2].retries.backoff, a[2].timeoutSeconds) == (1, 0.5, 3, 30)
    assert (a[3].retries.count, a[3].retries.delaySeconds, a[3].timeoutSeconds) == (4, 2, 600)
    # How to run it, not what it computes: the same definition, so the same lineage hash.
    plain, _ = parse_workflow(workflow(shell(1), shell(2, [1]), shell(3, [2])))
    assert [x.definition() for x in spec.actions] == [x.definition() for x in plain.actions]


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("**/*.json")))
def test_the_bundled_examples_are_valid(path):
    _, violations = parse_workflow(json.loads((ROOT / path).read_text()))
    assert violations == [], violations


def test_the_path_limits_leave_room_for_the_longest_attempt_name():
    """shared.path_limits counts the bytes an attempt adds to an output's last name: the
    longest attempt name of the longest output name still fits NAME_MAX, on both storages."""
    from shared.path_limits import NAME_MAX_BYTES, OUTPUT_NAME_MAX_BYTES
    from shared.storage.local import LocalStorage
    from shared.storage.webhdfs import WebHdfsStorage

    final = "/outputs/" + "o" * OUTPUT_NAME_MAX_BYTES
    for attempt_path in (LocalStorage.attempt_path, WebHdfsStorage.attempt_path):
        name = PurePosixPath(attempt_path(None, final, "wf-0123456789ab." + "é" * 80, 999_999)).name  # type: ignore[arg-type]
        assert len(name.encode()) <= NAME_MAX_BYTES, name
