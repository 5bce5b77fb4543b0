"""Workflow parameters (shared/workflow_parameters.py, docs/planning.md "Parameters"):
filled in before hashing, every problem listed with where it is, and a workflow that
declares none taken exactly as it is."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from pingo.builder import Workflow
from shared.hashing import workflow_hashes
from shared.workflow_spec import parse_workflow
from tests.support.workflows import ROOT

DAILY = ROOT / "examples" / "parameters" / "daily.json"


def daily(**values: Any) -> dict[str, Any]:
    body = json.loads(DAILY.read_text())
    return {**body, "parameterValues": values} if values else body


def hashes(body: dict[str, Any]) -> dict[Any, str]:
    spec, problems = parse_workflow(body)
    assert problems == [] and spec is not None
    return workflow_hashes(spec)


def violations(body: dict[str, Any]) -> list[tuple[str, str]]:
    spec, found = parse_workflow(body)
    assert spec is None
    return [(v.loc, v.message) for v in found]


def test_values_are_filled_in_before_hashing() -> None:
    first, second = hashes(daily(day="2026-11-20")), hashes(daily(day="2026-11-21"))
    assert hashes(daily()) == first  # the default
    assert first[1] == second[1]  # the reference data names no parameter: the same dataset
    assert first[2] != second[2] and first[3] != second[3]
    # A parameterized workflow is the workflow with its values written in: the same hashes.
    literal = json.loads(DAILY.read_text().replace("{{day}}", "2026-11-21"))
    del literal["parameters"]
    assert hashes(literal) == second
    spec, _ = parse_workflow(daily(day="2026-11-21"))
    assert spec is not None and spec.name == "daily report 2026-11-21"
    assert spec.by_id()[2].additionalInput[0].value == "ingest 2026-11-21"


def test_every_problem_is_listed_with_where_it_is() -> None:
    body = {
        "name": "p",
        "parameters": {"day": {"default": "x"}, "region": {}, "unused": {"default": 1}, "bad name": {},
                       "odd": {"defualt": "1"}},
        "parameterValues": {"dya": "1"},
        "actions": [{"id": 1, "name": "a", "type": "shell", "command": ["echo", "{{day}}", "{{ region }}",
                                                                         "{{dayz}}", "{{.Id}}", "{{odd}}"]}],
    }  # fmt: skip
    found = violations(body)
    assert (
        'parameters["bad name"]',
        'parameter name "bad name" must be a letter or _ then letters, digits, _',
    ) in found
    assert ("parameters.odd.defualt", "unknown field 'defualt' in parameter 'odd' — did you mean 'default'?") in found
    assert ("parameterValues.dya", "unknown parameter 'dya' — did you mean 'day'?") in found
    assert ("parameters.region", "parameter 'region' has no default and no value was given "
                                 "(pingo submit -p region=VALUE, or parameterValues)") in found  # fmt: skip
    assert ("actions[0].command[3]", "{{dayz}} names no declared parameter — did you mean 'day'?") in found
    assert (
        "actions[0].command[4]",
        "'{{' starts a reference, {{name}}: write '{{{{' for a literal '{{'",
    ) in found
    assert ("parameters.unused", "parameter 'unused' is declared but never used: write {{unused}} where its value "
                                 "goes, or remove it") in found  # fmt: skip
    _, listed = parse_workflow(body)
    assert next(v for v in listed if v.loc == "actions[0].command[3]").actionId == 1


def test_values_without_declarations_and_wrong_shapes() -> None:
    one = [{"id": 1, "name": "a", "type": "shell", "command": ["echo"]}]
    assert violations({"name": "p", "parameterValues": {"day": "1"}, "actions": one}) == [
        ("parameterValues.day", "unknown parameter 'day': the workflow declares no parameters")
    ]
    assert ("parameters", 'parameters must be an object: {"name": {"default": "value"}, ...}') in violations(
        {"name": "p", "parameters": ["day"], "actions": one}
    )
    found = violations({"name": "p", "parameters": {"d": {"default": [1]}}, "parameterValues": {"d": {"x": 1}},
                        "actions": [{**one[0], "command": ["echo", "{{d}}"]}]})  # fmt: skip
    assert ("parameters.d.default", "a default must be a string, number or boolean") in found
    assert ("parameterValues.d", "a parameter value must be a string, number or boolean") in found
    assert ("parameter", "unknown field 'parameter' in the workflow — did you mean 'parameters'?") in violations(
        {"name": "p", "parameter": {}, "actions": one}
    )


def test_without_parameters_braces_mean_nothing_and_the_escape_is_doubled() -> None:
    plain = {"name": "p", "actions": [{"id": 1, "name": "a", "type": "shell", "command": ["echo", "{{x}}", "{{"]}]}
    spec, found = parse_workflow(plain)
    assert found == [] and spec is not None and spec.actions[0].command == ["echo", "{{x}}", "{{"]
    body = {"name": "p", "parameters": {"n": {"default": 3}, "on": {"default": True}},
            "actions": [{"id": 1, "name": "a", "type": "shell",
                         "command": ["echo", "{{{{n}}", "{{n}}{{on}}", "${HOME}", "}}"]}]}  # fmt: skip
    spec, found = parse_workflow(body)
    assert found == [] and spec is not None
    assert spec.actions[0].command == ["echo", "{{n}}", "3true", "${HOME}", "}}"]


def test_the_builder_declares_parameters_and_gives_values() -> None:
    wf = Workflow("daily report {{day}}")
    day = wf.parameter("day", default="2026-11-20", description="the day to report on, YYYY-MM-DD")
    assert str(day) == "{{day}}" and f"--day={day}" == "--day={{day}}"
    wf.shell("a", ["echo", day], inputs={"day": day})
    document = wf.to_json({"day": "2026-11-21"})
    assert document["parameters"] == {
        "day": {"default": "2026-11-20", "description": "the day to report on, YYYY-MM-DD"}
    }
    assert document["parameterValues"] == {"day": "2026-11-21"}
    assert document["actions"][0]["command"] == ["echo", "{{day}}"]
    assert wf.spec({"day": "2026-11-21"}).actions[0].command == ["echo", "2026-11-21"]
    assert wf.hashes() != wf.hashes({"day": "2026-11-21"})
    assert [v.loc for v in wf.validate({"dya": "1"})] == ["parameterValues.dya"]


def test_the_python_daily_example_is_the_json_one() -> None:
    from pingo.workflow_file import load

    built = load(str(ROOT / "examples" / "python" / "daily.py"))
    for values in ({}, {"day": "2026-11-21"}):
        assert hashes({**built, "parameterValues": values}) == hashes(daily(**values))


def test_pingo_validate_takes_values_with_p() -> None:
    def validate(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pingo.cli", "validate", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)  # fmt: skip

    ok = validate("examples/parameters/daily.json", "-p", "day=2026-11-21")
    assert ok.returncode == 0, ok.stderr
    bad = validate("examples/python/daily.py", "-p", "dya=1")
    assert bad.returncode == 1 and "parameterValues.dya: unknown parameter 'dya' — did you mean 'day'?" in bad.stderr
    malformed = validate("examples/parameters/daily.json", "-p", "day")
    assert malformed.returncode == 2 and "a parameter is given as NAME=VALUE" in malformed.stderr


def test_values_cannot_blow_a_small_body_up() -> None:
    # A 100 KB value named 200 times: 20 MB of text from a body of 100 KB.
    body = {"name": "p", "parameters": {"v": {}}, "parameterValues": {"v": "x" * 100_000},
            "actions": [{"id": 1, "name": "a", "type": "shell", "command": ["echo", *["{{v}}"] * 200]}]}  # fmt: skip
    found = violations(body)
    assert found == [("parameterValues", "the parameters' values would add 20000000 characters to the workflow: "
                                         "at most 16777216")]  # fmt: skip


def test_a_key_given_twice_is_refused_in_a_workflow_with_parameters() -> None:
    """Filling in parameters copies the body: the key given twice is still named, where it was."""
    from shared import strict_json

    text = DAILY.read_text()
    assert text.lstrip().startswith("{")
    body = strict_json.loads(text.replace("{", '{"name": "first", ', 1))
    found = violations(body)
    assert any(loc == "name" and "more than once" in message for loc, message in found), found


def test_a_secret_value_cannot_take_a_parameters_value() -> None:
    """Values given for parameters are kept with the workflow in clear: a secret written
    as a reference would be stored and shown there, so it is refused, naming where."""
    body = daily(day="2026-11-21")
    body["parameters"]["token"] = {"default": "s3cret"}
    conf = [{"key": "API_TOKEN", "value": "{{token}}", "secret": True}]
    body["actions"][0] = {**body["actions"][0], "configurationParameters": conf}
    found = violations(body)
    assert any(loc == "actions[0].configurationParameters[0].value" and "secret" in m for loc, m in found), found
    # The same value, not a secret: a parameter like any other.
    conf[0]["secret"] = False
    assert hashes(body)
