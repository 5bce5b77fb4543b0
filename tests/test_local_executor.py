"""The local executor: COMMAND_LINE runs a Java main class from the jars of actionFolder,
SHELL runs an argv; both with the argument contract, never through a shell."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import JOBS, ROOT, Api, make_settings, shell_action


@pytest.fixture
def jar_folder(tmp_path: Path) -> Path:
    javac, jar = shutil.which("javac"), shutil.which("jar")
    if not (javac and jar and shutil.which("java")):
        pytest.fail("COMMAND_LINE actions need a JDK (java, javac, jar): apt-get install default-jdk-headless")
    classes = tmp_path / "classes"
    subprocess.run([javac, "-d", str(classes), str(JOBS / "java" / "Synth.java")], check=True)
    folder = tmp_path / "apps" / "synth"
    folder.mkdir(parents=True)
    subprocess.run([jar, "cf", str(folder / "synth.jar"), "-C", str(classes), "."], check=True)
    return folder


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str):
    return make_settings(tmp_path, mongo_url, action_roots=[ROOT, tmp_path / "apps"])


def java_action(aid: int, label: str, parents: list[int] = (), **extra) -> dict:
    return {
        "id": aid,
        "name": label,
        "type": "command-line",
        "actionFolder": "synth",
        "mainClassName": "org.pingo.examples.Synth",
        "parentActions": list(parents),
        "additionalInput": [{"key": "label", "value": label}],
        **extra,
    }


async def test_command_line_actions_run_java_with_the_argument_contract(system: Api, jar_folder: Path) -> None:
    body = {
        "name": "java",
        "actions": [
            java_action(2, "j-second"),
            java_action(1, "j-first", configurationParameters=[{"key": "pingo.greeting", "value": "hello"}]),
            java_action(3, "j-join", [2, 1]),
        ],
    }
    # actionFolder is relative to the first allowed action root, so point it at the jar folder.
    for a in body["actions"]:
        a["actionFolder"] = str(jar_folder)
    wf = await system.run(body)
    assert wf["state"] == "SUCCEEDED", [a.get("error") for a in wf["actions"]]
    by = {a["localId"]: a for a in wf["actions"]}
    first = (Path(by[1]["outputPath"]) / "part-00000").read_text().split("\n")
    assert first[:2] == ["j-first", "hello"]
    join = (Path(by[3]["outputPath"]) / "part-00000").read_text().split("\n")
    # Parents' outputs come ordered by parent id, whatever order they were listed in.
    assert join[:4] == ["j-join", "-", by[1]["outputPath"], by[2]["outputPath"]]


async def test_shell_argv_is_not_interpreted_by_a_shell(system: Api) -> None:
    tricky = "$(touch pwned); `id` > x; echo *"
    wf = await system.run({"name": "argv", "actions": [shell_action(1, tricky)]})
    assert wf["state"] == "SUCCEEDED"
    out = Path(wf["actions"][0]["outputPath"])
    assert (out / "_lineage").read_text().split("\n")[0] == tricky
    assert not (JOBS / "pwned").exists() and not (JOBS / "x").exists()


async def test_a_missing_program_fails_the_action_with_its_reason(system: Api) -> None:
    wf = await system.run(
        {
            "name": "missing",
            "actions": [
                {
                    "id": 1,
                    "name": "nope",
                    "type": "SHELL",
                    "actionFolder": "examples/jobs",
                    "command": ["./no-such-program"],
                }
            ],
        }
    )
    assert wf["state"] == "FAILED"
    assert "could not start './no-such-program'" in wf["actions"][0]["error"]


async def test_success_without_output_is_a_failure_not_an_empty_dataset(system: Api) -> None:
    wf = await system.run(
        {
            "name": "lazy",
            "actions": [{"id": 1, "name": "writes-nothing", "type": "SHELL", "command": ["python3", "-c", "pass"]}],
        }
    )
    assert wf["state"] == "FAILED"
    assert "reported success but its output" in wf["actions"][0]["error"]
    doc = await system.db.datasets.find_one({"_id": wf["actions"][0]["hash"]})
    assert doc["state"] == "DELETED" and not Path(doc["path"]).exists()


async def test_kill_and_status_work_from_another_process_view(tmp_path: Path) -> None:
    """Two executor instances over one jobs folder, as two pods on a shared volume."""
    import asyncio
    import json
    import os
    import time as _time

    from shared.executors.base import JobRequest, JobState
    from shared.executors.local import HEARTBEAT_TIMEOUT, LocalExecutor

    submitter, other = LocalExecutor(tmp_path / "jobs"), LocalExecutor(tmp_path / "jobs")
    job = JobRequest(
        action_id="wf-x.1",
        external_id="wf-x.1#1",
        type="SHELL",
        name="sleepy",
        action_folder=str(JOBS),
        main_class=None,
        command=["python3", "synth.py"],
        arguments=["k", "30", "1", str(tmp_path / "o")],
        configuration={},
        notify_url="http://127.0.0.1:9/",
    )
    job_id = await submitter.submit(job)
    assert await other.find("wf-x.1#1") == job_id
    async with asyncio.timeout(20):
        while (await other.status(job_id)).state != JobState.RUNNING:
            await asyncio.sleep(0.05)
    t0 = _time.time()
    await other.kill(job_id)
    async with asyncio.timeout(20):
        while (st := await other.status(job_id)).state == JobState.RUNNING:
            await asyncio.sleep(0.05)
    assert st.state == JobState.KILLED and _time.time() - t0 < 5
    assert not (tmp_path / "o").exists()

    # A job whose supervisor stopped beating (its machine or pod died) reads as FAILED.
    dead = tmp_path / "jobs" / "wf-y.1_1"
    dead.mkdir()
    (dead / "status.json").write_text(json.dumps({"state": "RUNNING", "started_at": 1.0}))
    (dead / "heartbeat").touch()
    old = _time.time() - HEARTBEAT_TIMEOUT - 1
    os.utime(dead / "heartbeat", (old, old))
    st = await other.status("wf-y.1_1")
    assert st.state == JobState.FAILED and "no heartbeat" in st.error
    (dead / "heartbeat").touch()
    assert (await other.status("wf-y.1_1")).state == JobState.RUNNING


async def test_replacing_a_jar_recomputes_that_action_and_its_descendants_only(system: Api, jar_folder: Path) -> None:
    other = jar_folder.parent / "other"
    shutil.copytree(jar_folder, other)
    body = {
        "name": "jars",
        "actions": [
            {**java_action(1, "fp-a"), "actionFolder": str(jar_folder)},
            {**java_action(2, "fp-b", [1]), "actionFolder": str(other)},
            {**java_action(3, "fp-c"), "actionFolder": str(other)},
            {**java_action(4, "fp-leaf", [2, 3]), "actionFolder": str(other)},
        ],
    }
    first = await system.run(body)
    assert first["state"] == "SUCCEEDED"
    again = await system.run(body)
    assert {a["decision"] for a in again["actions"]} == {"reuse"}
    # A new build of A's jar (same classes, one more resource): A and everything below it change.
    (jar_folder / "VERSION").write_text("2")
    subprocess.run(["jar", "uf", str(jar_folder / "synth.jar"), "-C", str(jar_folder), "VERSION"], check=True)
    (jar_folder / "VERSION").unlink()
    changed = await system.run(body)
    assert changed["state"] == "SUCCEEDED"
    assert {a["localId"]: a["decision"] for a in changed["actions"]} == {
        1: "compute",
        2: "compute",
        3: "reuse",
        4: "compute",
    }
    before = {a["localId"]: a["hash"] for a in first["actions"]}
    after = {a["localId"]: a["hash"] for a in changed["actions"]}
    assert [k for k in before if before[k] != after[k]] == [1, 2, 4]
