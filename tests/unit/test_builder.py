"""Workflows written in Python (pingo/builder.py, docs/workflows-in-python.md): the same
workflow written either way is the same workflow to Pingo (same normalized definition, same
lineage hashes), and ``pingo validate FILE.py`` reports what it reports for the JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pingo.builder import Action, InvalidWorkflow, Workflow
from pingo.workflow_file import WorkflowFileError, load
from shared.hashing import workflow_hashes
from shared.workflow_spec import parse_workflow
from tests.support.workflows import ROOT

PINGO = [sys.executable, "-m", "pingo.cli"]
EXAMPLES = ROOT / "examples"


def pingo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*PINGO, *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("name", ["diamond", "wordcount"])
def test_an_example_written_in_python_is_the_json_examples_workflow(name: str) -> None:
    from_json, problems = parse_workflow(json.loads((EXAMPLES / f"{name}.json").read_text()))
    assert problems == []
    built = load(str(EXAMPLES / "python" / f"{name}.py"))
    from_python, problems = parse_workflow(built)
    assert problems == []
    assert from_python == from_json
    assert workflow_hashes(from_python) == workflow_hashes(from_json)


def test_the_builder_writes_the_thesis_format() -> None:
    wf = Workflow("two steps", retries=2)
    first = wf.shell("first", ["python3", "a.py"], folder="jobs", inputs={"day": "2026-11-20", "n": 3})
    second = wf.shell("second", ("python3", "b.py"), inputs=["x", True], env={"MODE": "fast"}, parents=[first],
                      force=True, timeout=60)  # fmt: skip
    wf.start, wf.end = first, second
    assert wf.to_json() == {
        "name": "two steps",
        "startActionId": 1,
        "endActionId": 2,
        "defaults": {"retries": 2},
        "actions": [
            {"id": 1, "name": "first", "type": "SHELL", "actionFolder": "jobs", "command": ["python3", "a.py"],
             "additionalInput": [{"key": "day", "value": "2026-11-20"}, {"key": "n", "value": 3}]},
            {"id": 2, "name": "second", "type": "SHELL", "command": ["python3", "b.py"],
             "additionalInput": [{"value": "x"}, {"value": True}],
             "configurationParameters": [{"key": "MODE", "value": "fast"}],
             "forceComputation": True, "timeoutSeconds": 60, "parentActions": [1]},
        ],
    }  # fmt: skip
    spec = wf.spec()
    assert [p.value for p in spec.by_id()[2].additionalInput] == ["x", "true"]
    assert spec.by_id()[2].retries.count == 2


def test_other_types_and_an_unmanaged_output() -> None:
    wf = Workflow("types")
    jar = wf.command_line("java", "org.example.Main", folder="examples/jobs/java", properties={"k": "v"})
    wf.spark("spark", "job.py", folder="examples/spark/count", conf={"spark.x": "1"}, parents=[jar])
    wf.map_reduce("mr", "org.example.Map", "org.example.Reduce", folder="examples/jobs/java", parents=[jar],
                  output_path="/tmp/out", id="mr")  # fmt: skip
    assert wf.validate() == []
    actions = wf.to_json()["actions"]
    assert actions[1]["application"] == "job.py" and actions[1]["parentActions"] == [1]
    assert actions[2]["id"] == "mr" and actions[2]["isManaged"] is False and actions[2]["outputPath"] == "/tmp/out"


def test_a_java_map_reduce_action_names_its_api() -> None:
    wf = Workflow("apis")
    wf.map_reduce("old", "org.example.Map", "org.example.Reduce", folder="examples/jobs/java")
    wf.map_reduce("new", "org.example.NewMap", "org.example.NewReduce", folder="examples/jobs/java",
                  mapreduce_api="mapreduce")  # fmt: skip
    assert wf.validate() == []
    old, new = wf.to_json()["actions"]
    assert "mapreduceApi" not in old and new["mapreduceApi"] == "mapreduce"


def test_a_sqoop_import_is_written_in_the_languages_words() -> None:
    wf = Workflow("imports")
    wf.sqoop("cities", "jdbc:postgresql://db/geo", table="cities", columns=["id", "name"], where="id > 1",
             username="reader", password_file="/etc/geo.password", cache_version="snapshot-1")  # fmt: skip
    wf.sqoop("query", "jdbc:postgresql://db/geo", query="SELECT id FROM t WHERE $CONDITIONS", mappers=2)
    (action,) = wf.to_json()["actions"][:1]
    assert action["columnNames"] == ["id", "name"] and action["passwordFile"] == "/etc/geo.password"
    assert [v.loc for v in wf.validate()] == ["actions[1].splitBy"]


def test_a_parent_must_be_an_action_of_the_same_workflow() -> None:
    one, other = Workflow("one"), Workflow("other")
    a = one.shell("a", ["true"])
    with pytest.raises(ValueError, match="another workflow"):
        other.shell("b", ["true"], parents=[a])
    with pytest.raises(TypeError, match="must be an Action"):
        one.shell("b", ["true"], parents=[1])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="unknown option"):
        one.shell("b", ["true"], forced=True)
    assert isinstance(a, Action) and len(one.actions) == 1


def test_a_broken_workflow_lists_every_violation_as_pingo_validate_does(tmp_path: Path) -> None:
    source = tmp_path / "broken.py"
    source.write_text(
        "from pingo.builder import Workflow\n"
        "workflow = Workflow('broken')\n"
        "a = workflow.shell('a', [])\n"
        "workflow.map_reduce('b', 'not a class!', parents=[a])\n"
        "workflow.shell('', ['x', ''], id='1')\n"
    )
    built = load(str(source))
    document = tmp_path / "broken.json"
    document.write_text(json.dumps(built))
    from_python, from_json = pingo("validate", "--json", str(source)), pingo("validate", "--json", str(document))
    assert from_python.returncode == from_json.returncode == 1
    found = json.loads(from_python.stdout)
    assert found == json.loads(from_json.stdout)
    fields = {(v["loc"], v["message"]) for v in found["violations"]}
    assert ("actions[0].command", "command is required for SHELL actions") in fields
    assert any(loc == "actions[1].mapper" for loc, _ in fields)
    assert ("actions[2].name", "missing action name") in fields
    with pytest.raises(InvalidWorkflow) as raised:
        Workflow("empty").spec()
    assert "a workflow must have at least one action" in str(raised.value)
    # Offline text output, as for JSON: a message per violation and exit 1.
    plain = pingo("validate", str(source))
    assert plain.returncode == 1 and "violation(s)" in plain.stderr and "actions[0].command" in plain.stderr


def test_validate_accepts_the_python_examples() -> None:
    run = pingo("validate", "examples/python/diamond.py")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "examples/python/diamond.py: valid: 4 actions, 1 root, 1 leaf\n"


def test_a_file_that_fails_or_builds_nothing_is_a_message_and_exit_2(tmp_path: Path) -> None:
    failing = tmp_path / "failing.py"
    failing.write_text("from pingo.builder import Workflow\nworkflow = Workflow('x')\nraise RuntimeError('no data')\n")
    run = pingo("validate", str(failing))
    assert run.returncode == 2
    assert "failed while building its workflow" in run.stderr and "RuntimeError: no data" in run.stderr
    assert f'File "{failing}", line 3' in run.stderr
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    run = pingo("submit", str(empty), "--url", "http://127.0.0.1:9")
    assert run.returncode == 2 and "no variable named 'workflow'" in run.stderr
    with pytest.raises(WorkflowFileError, match="no such file"):
        load(str(tmp_path / "missing.py"))


def test_a_files_main_block_does_not_run_and_its_neighbours_import(tmp_path: Path) -> None:
    (tmp_path / "steps.py").write_text("COMMAND = ['python3', 'synth.py']\n")
    source = tmp_path / "wf.py"
    source.write_text(
        "from pingo.builder import Workflow\n"
        "from steps import COMMAND\n"
        "workflow = Workflow('neighbour')\n"
        "workflow.shell('a', COMMAND)\n"
        "if __name__ == '__main__':\n"
        "    raise SystemExit('the main block ran')\n"
    )
    assert load(str(source))["actions"][0]["command"] == ["python3", "synth.py"]
    assert str(tmp_path) not in sys.path
