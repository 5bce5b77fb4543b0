"""``pingo validate FILE``: the workflow language's checks offline (no server, nothing
stored), every violation with where it is; exit 0 when valid, 1 when not, 2 when the file
cannot be read as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pingo.cli import main
from tests.support.validation import shell, workflow
from tests.support.workflows import ROOT


def validate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as ended:
        main(["validate", *argv])
    out, err = capsys.readouterr()
    return ended.value.code, out, err


def written(tmp_path: Path, body: object) -> str:
    path = tmp_path / "workflow.json"
    path.write_text(json.dumps(body))
    return str(path)


def test_a_valid_workflow_is_summarized(capsys):
    code, out, err = validate(capsys, str(ROOT / "examples" / "diamond.json"))
    assert (code, err) == (0, "")
    assert out.strip().endswith("valid: 4 actions, 1 root, 1 leaf"), out


def test_every_violation_is_printed_with_its_location(capsys, tmp_path):
    typo = {**shell(2), "parentAction": [{"id": 1}]}
    del typo["parentActions"]
    path = written(tmp_path, workflow(shell(1), typo, {**shell(3, [2]), "command": "python3 synth.py"}, extra=1))
    code, out, err = validate(capsys, path)
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[0] == f"pingo: {path}: 3 violation(s)", err
    assert lines[1:] == [
        "  - extra: unknown field 'extra' in the workflow (known fields: name, startActionId, endActionId, actions, "
        "defaults, parameters, parameterValues, webhooks, cacheVersion)",
        "  - actions[1].parentAction (action 2): unknown field 'parentAction' in action 2 — did you mean "
        "'parentActions'?",
        "  - actions[2].command (action 3): command must be a list of strings (an argv), not a string: write "
        '["python3", "synth.py"]',
    ], err


def test_json_output_lists_the_violations(capsys, tmp_path):
    code, out, _ = validate(capsys, "--json", written(tmp_path, workflow({**shell(1), "retries": -1})))
    assert code == 1
    result = json.loads(out)
    assert result["valid"] is False
    assert [(v["loc"], v["actionId"]) for v in result["violations"]] == [("actions[0].retries", 1)]
    assert "at least 0" in result["violations"][0]["message"]


def test_a_file_that_is_not_json_says_where(capsys, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"name": "x",\n "actions": [}')
    code, out, err = validate(capsys, str(path))
    assert (code, out) == (2, "")
    assert f"{path}:2:" in err and "not valid JSON" in err, err


REPEATED = (
    '{"name": "first", "name": "second", "actions": [\n'
    '  {"id": 1, "name": "a", "type": "SHELL", "command": ["true"], "command": ["false"]}\n'
    "]}"
)


def test_a_key_given_twice_is_a_violation_naming_it_and_where(capsys, tmp_path):
    path = tmp_path / "repeated.json"
    path.write_text(REPEATED)
    code, out, err = validate(capsys, str(path))
    assert (code, out) == (1, "")
    assert '  - name: key "name" is given more than once in this object: keys must be unique' in err, err
    assert '  - actions[0].command (action 1): key "command" is given more than once' in err, err


def test_submit_refuses_a_file_with_a_key_given_twice_before_sending_it(capsys, tmp_path):
    """Sent, the file would have reached the server with the last value only."""
    path = tmp_path / "repeated.json"
    path.write_text(REPEATED)
    with pytest.raises(SystemExit) as ended:
        main(["submit", str(path), "--url", "http://127.0.0.1:9"])  # nothing listens there: nothing is sent
    _, err = capsys.readouterr()
    assert ended.value.code == 2
    assert 'name: key "name" is given more than once' in err and "actions[0].command" in err, err
