"""The ``pingo`` command as a user runs it: ``pingo dev`` on embedded defaults (its own
nx-27017, data kept across a restart), then submit / status / timeline / datasets / kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.net import free_port
from tests.support.workflows import ROOT

PINGO = [sys.executable, "-m", "pingo.cli"]


def wait_http(url: str, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"nothing answered at {url}")


@pytest.fixture
def dev(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
    port = free_port()
    env.update(
        PINGO_DATA_DIR=str(tmp_path / "data"),
        PINGO_CALLBACK_PORT=str(free_port()),
        PINGO_SCRAPE_INTERVAL="0.5",
        PINGO_POLL_INTERVAL="0.5",
    )
    url = f"http://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        log = open(tmp_path / "dev.log", "ab")
        p = subprocess.Popen([*PINGO, "dev", "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log)
        procs.append(p)
        wait_http(f"{url}/healthz")
        return p

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*PINGO, *args], cwd=ROOT, env={**env, "PINGO_URL": url}, capture_output=True, text=True, timeout=120
        )

    yield start, cli, tmp_path
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)


def test_submit_watch_status_timeline_datasets_and_restart(dev) -> None:
    start, cli, tmp = dev
    server = start()
    run = cli("submit", "examples/diamond.json", "--wait")
    assert run.returncode == 0, run.stderr + run.stdout
    assert "4 to compute, 0 reused" in run.stdout
    wf_id = run.stdout.split()[1].rstrip(":")
    assert f"{wf_id} SUCCEEDED" in run.stdout
    again = cli("submit", "examples/diamond.json", "--wait")
    assert again.returncode == 0 and "0 to compute, 4 reused" in again.stdout

    # The embedded MongoDB keeps its data in the data directory: a restart loses nothing.
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=30) == 0
    assert (tmp / "data" / "mongo").is_dir()
    start()
    status = cli("status", wf_id)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[0].startswith(f"{wf_id}") and "SUCCEEDED" in lines[0]
    assert lines[1].lstrip().startswith("L0") and "ingest" in lines[1]
    assert "report" in lines[3] and "←2,3" in lines[3]  # the DAG is drawn by levels
    timeline = cli("timeline", wf_id)
    assert timeline.returncode == 0
    stamps = [float(line.split("s", 1)[0].strip().lstrip("+")) for line in timeline.stdout.splitlines()]
    assert stamps == sorted(stamps) and len(stamps) > 20
    assert "FINISHED" in timeline.stdout and "TO_STORE" in timeline.stdout
    datasets = cli("datasets", "--json")
    body = json.loads(datasets.stdout)
    assert {d["state"] for d in body["datasets"]} == {"STORED", "LEAF"} and len(body["datasets"]) == 4


def test_bad_input_gets_a_clear_message_and_nonzero_exit(dev, tmp_path: Path) -> None:
    start, cli, _ = dev
    start()
    missing = cli("submit", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    broken = tmp_path / "broken.json"
    broken.write_text('{"actions": [\n  {"id": 1,,}\n]}')
    bad_json = cli("submit", str(broken))
    assert bad_json.returncode == 2 and "broken.json:2:" in bad_json.stderr
    invalid = tmp_path / "invalid.json"
    invalid.write_text(
        json.dumps({"actions": [{"id": 1, "name": "x", "type": "teleport"}, {"id": 1, "name": "y", "type": "SHELL"}]})
    )
    rejected = cli("submit", str(invalid))
    assert rejected.returncode == 1
    assert "unknown action type 'teleport'" in rejected.stderr
    assert "command is required for SHELL actions" in rejected.stderr
    unknown = cli("status", "wf-doesnotexist")
    assert unknown.returncode == 1 and "no workflow 'wf-doesnotexist'" in unknown.stderr


def test_kill_running_workflow(dev, tmp_path: Path) -> None:
    start, cli, _ = dev
    start()
    slow = tmp_path / "slow.json"
    slow.write_text(
        json.dumps(
            {
                "name": "slow",
                "actions": [
                    {
                        "id": 1,
                        "name": "sleepy",
                        "type": "SHELL",
                        "actionFolder": "examples/jobs",
                        "command": ["python3", "synth.py"],
                        "additionalInput": [{"value": "kill-me"}, {"value": "60"}, {"value": "1"}],
                    },
                    {
                        "id": 2,
                        "name": "after",
                        "type": "SHELL",
                        "actionFolder": "examples/jobs",
                        "command": ["python3", "synth.py"],
                        "parentActions": [1],
                        "additionalInput": [{"value": "after-kill"}, {"value": "0"}, {"value": "1"}],
                    },
                ],
            }
        )
    )
    sub = cli("submit", str(slow))
    wf_id = sub.stdout.split()[1].rstrip(":")
    deadline = time.time() + 30
    while "RUNNING" not in cli("status", wf_id).stdout.split("\n", 1)[1]:
        assert time.time() < deadline
        time.sleep(0.2)
    killed = cli("kill", wf_id)
    assert killed.returncode == 0, killed.stderr
    deadline = time.time() + 30
    while True:
        body = json.loads(cli("status", wf_id, "--json").stdout)
        if body["state"] == "KILLED":
            break
        assert time.time() < deadline, body
        time.sleep(0.3)
    assert [a["state"] for a in body["actions"]] == ["KILLED", "KILLED"]
    again = cli("kill", wf_id)
    assert again.returncode == 1 and "already ended KILLED" in again.stderr
