"""Operator logs (docs/operations.md, "Logs"): the five services as OS processes with
PINGO_LOG_FORMAT=json and PINGO_LOG_LEVEL=DEBUG write one JSON object per line, and the
lines about a workflow's actions name the workflow and the action."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared.config import Settings
from tests.support.system import Processes, make_settings
from tests.support.workflows import ROOT, shell_action


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str) -> Settings:
    return make_settings(tmp_path, mongo_url, log_level="DEBUG", log_format="json")


def lines_of(log: Path) -> list[dict]:
    """Every line of a service's log, each parsed as JSON (a line that is not fails here)."""
    out = []
    for n, line in enumerate(log.read_text().splitlines(), 1):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"{log.name}:{n} is not JSON: {line!r}") from None
    return out


async def test_json_logs_parse_line_by_line_and_name_the_workflow_and_action(processes: Processes) -> None:
    body = {"name": "logged", "actions": [shell_action(1, "lg-1"), shell_action(2, "lg-2", [1])]}
    wf = await processes.run(body)
    assert wf["state"] == "SUCCEEDED"
    action_ids = {a["id"] for a in wf["actions"]}
    for key in list(processes.procs):  # stopped, so every line is written whole
        processes.stop(key)

    about_wf: dict[str, list[dict]] = {}
    for name in Processes.SERVICES:
        records = lines_of(processes.logs / f"{name}.log")
        assert records, f"{name} wrote nothing at DEBUG"
        for r in records:
            assert {"timestamp", "level", "service", "logger", "message", "workflow_id", "action_id"} <= r.keys(), r
            assert r["service"] == name, r
            assert r["level"] in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}, r
            assert datetime.fromisoformat(r["timestamp"]).utcoffset() == UTC.utcoffset(None), r
            if r["action_id"] in action_ids:
                assert r["workflow_id"] == wf["id"], r  # an action's lines stay under its workflow
        about_wf[name] = [r for r in records if r["workflow_id"] == wf["id"]]

    # Planning (gateway), submitting (action manager) and confirming the end (callback):
    # each names the workflow, and every action is named by some line.
    for name in ("workflow_manager", "action_manager", "callback"):
        assert about_wf[name], f"no line of {name} names {wf['id']}"
    named = {r["action_id"] for records in about_wf.values() for r in records}
    assert action_ids <= named
    submitted = [r for r in about_wf["action_manager"] if "SUBMITTED" in r["message"]]
    assert {r["action_id"] for r in submitted} == action_ids


def test_a_bad_log_level_refuses_to_start_and_says_why(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
    env |= {"PINGO_LOG_LEVEL": "LOUD", "PINGO_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "services.decision"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "PINGO_LOG_LEVEL='LOUD'" in done.stderr and "'DEBUG', 'INFO', 'WARNING' or 'ERROR'" in done.stderr
    assert "Traceback" not in done.stderr
