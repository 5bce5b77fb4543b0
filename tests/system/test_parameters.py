"""Workflow parameters through the real services (docs/planning.md, "Parameters"): values
are filled in before hashing, so one workflow run for two days computes twice and for the
same day reuses; parameter mistakes are 422s listing every violation, storing nothing; the
CLI gives values with ``-p``, for JSON and Python files alike."""

from __future__ import annotations

import json
from typing import Any

from tests.support.system import Api
from tests.support.workflows import ROOT
from tests.system.test_python_workflows import pingo

DAILY = json.loads((ROOT / "examples" / "parameters" / "daily.json").read_text())
NOTHING = {"workflows": 0, "actions": 0, "datasets": 0}


def outcome(wf: dict[str, Any]) -> dict[str, str]:
    return {a["name"]: a["state"] for a in wf["actions"]}


async def test_two_days_compute_twice_and_the_same_day_reuses(system: Api) -> None:
    first = await system.run({**DAILY, "parameterValues": {"day": "2026-11-20"}})
    assert first["state"] == "SUCCEEDED" and first["name"] == "daily report 2026-11-20"
    assert set(outcome(first).values()) == {"FINISHED"}

    other = await system.run({**DAILY, "parameterValues": {"day": "2026-11-21"}})
    assert other["state"] == "SUCCEEDED" and other["name"] == "daily report 2026-11-21"
    # Another day: its own ingest and report; the reference data names no parameter.
    assert outcome(other) == {"reference data": "REUSED", "ingest": "FINISHED", "report": "FINISHED"}

    again = await system.run(DAILY)  # the default day, 2026-11-20
    assert outcome(again) == {"reference data": "SKIPPED", "ingest": "SKIPPED", "report": "REUSED"}
    hashes = {a["name"]: a["hash"] for a in first["actions"]}
    assert {a["name"]: a["hash"] for a in again["actions"]} == hashes
    # What was stored is what was submitted, values included.
    stored = await system.db.workflow_definitions.find_one({"_id": first["id"]})
    assert stored["body"]["parameterValues"] == {"day": "2026-11-20"}


async def test_parameter_mistakes_are_a_422_listing_every_one_and_store_nothing(system: Api) -> None:
    body = {
        **DAILY,
        "parameters": {**DAILY["parameters"], "region": {}, "spare": {"default": "x"}},
        "parameterValues": {"dya": "2026-11-21"},
        "actions": [*DAILY["actions"][:2], {**DAILY["actions"][2], "command": ["python3", "synth.py", "{{regoin}}"]}],
    }
    status, out = await system.request("POST", "/api/v1/workflows", json=body)
    assert status == 422, out
    found = {(v["loc"], v["message"]) for v in out["violations"]}
    assert found == {
        ("parameterValues.dya", "unknown parameter 'dya' — did you mean 'day'?"),
        ("parameters.region", "parameter 'region' has no default and no value was given "
                              "(pingo submit -p region=VALUE, or parameterValues)"),
        ("actions[2].command[2]", "{{regoin}} names no declared parameter — did you mean 'region'?"),
        ("parameters.region", "parameter 'region' is declared but never used: write {{region}} where its value "
                              "goes, or remove it"),
        ("parameters.spare", "parameter 'spare' is declared but never used: write {{spare}} where its value "
                             "goes, or remove it"),
    }  # fmt: skip
    assert next(v for v in out["violations"] if v["loc"] == "actions[2].command[2]")["actionId"] == 3
    status, out = await system.request("POST", "/api/v1/workflows", params={"dryRun": "true"}, json=body)
    assert status == 422 and len(out["violations"]) == 5
    assert await system.counts() == NOTHING


async def test_the_cli_gives_values_with_p_for_json_and_python_files(system: Api) -> None:
    code, out, err = await pingo(system, "submit", "examples/parameters/daily.json", "-p", "day=2026-12-01", "--wait")
    assert code == 0, err + out
    wf = await system.workflow(out.strip().splitlines()[-1].split()[0])
    assert wf["name"] == "daily report 2026-12-01" and set(outcome(wf).values()) == {"FINISHED"}

    # The same day from the Python file: nothing to compute.
    code, out, err = await pingo(system, "submit", "examples/python/daily.py", "-p", "day=2026-12-01", "--dry-run",
                                 "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["totals"] == {"compute": 0, "reuse": 1, "skip": 2, "follow": 0}
    code, out, err = await pingo(system, "submit", "examples/python/daily.py", "-p", "day=2026-12-02", "--dry-run",
                                 "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["totals"] == {"compute": 2, "reuse": 1, "skip": 0, "follow": 0}

    code, out, err = await pingo(system, "submit", "examples/python/daily.py", "-p", "dya=2026-12-02")
    assert code == 1 and out == ""
    assert "parameterValues.dya: unknown parameter 'dya' — did you mean 'day'?" in err
    assert (await system.counts())["workflows"] == 1
