"""The local executor: COMMAND_LINE runs a Java main class from the jars of actionFolder,
SHELL runs an argv; both with the argument contract, never through a shell."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from shared.executors.base import JobRequest
from shared.workflow_spec import ActionType
from tests.support.system import Api, make_settings
from tests.support.workflows import JOBS, ROOT, shell_action


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


async def test_a_failure_buried_under_log_lines_is_named_in_the_error(system: Api) -> None:
    """A JVM job (Spark's) ends its stderr with stack frames and shutdown lines: the error
    names the exception first, then the tail."""
    script = (
        "import sys\n"
        "print('Traceback (most recent call last):\\nValueError: the input is empty')\n"
        "sys.stderr.write('java.lang.IllegalStateException: stage failed\\n' + '\\tat Frame.run(F.java:1)\\n' * 200)\n"
        "sys.stderr.write('INFO ShutdownHookManager: Deleting directory /tmp/x\\n')\n"
        "sys.exit(1)\n"
    )
    action = {"id": 1, "name": "buried", "type": "SHELL", "command": ["python3", "-c", script]}
    wf = await system.run({"name": "buried", "actions": [action]})
    error = wf["actions"][0]["error"]
    assert error.startswith("exit code 1: java.lang.IllegalStateException: stage failed; stderr ends: "), error
    assert error.endswith("Deleting directory /tmp/x")


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


@pytest.mark.parametrize(
    ("arguments", "configuration", "reason"),
    [
        (["nul\0inside", "out"], {}, "null byte"),
        (["out"], {"PINGO_X": "nul\0inside"}, "null byte"),
        (["out"], {"A=B": "x"}, "environment variable"),
        (["out"], {"NUL\0KEY": "x"}, "null byte"),
    ],
    ids=["argv-nul", "env-value-nul", "env-key-equals", "env-key-nul"],
)
async def test_a_job_that_cannot_be_launched_fails_at_once_with_its_reason(
    tmp_path: Path, notifications, arguments: list[str], configuration: dict[str, str], reason: str
) -> None:
    """Submitted straight to the executor (no validation in front): the supervisor reports
    the launch error as the job's FAILED status and notifies, instead of dying silently
    and leaving the job PREP until its heartbeat times out."""
    import asyncio

    from shared.executors.base import JobRequest, JobState
    from shared.executors.local import LocalExecutor

    url, got = notifications
    executor = LocalExecutor(tmp_path / "jobs")
    job = JobRequest(
        action_id="wf-bad.1", external_id="wf-bad.1#1", type="SHELL", name="bad", action_folder=str(JOBS),
        main_class=None, command=["python3", "synth.py"], arguments=arguments, configuration=configuration,
        notify_url=url,
    )  # fmt: skip
    job_id = await executor.submit(job)
    async with asyncio.timeout(5):
        while (st := await executor.status(job_id)).state in (JobState.PREP, JobState.RUNNING):
            await asyncio.sleep(0.05)
    assert st.state == JobState.FAILED
    assert "could not start 'python3'" in st.error and reason in st.error
    async with asyncio.timeout(5):
        while not got:
            await asyncio.sleep(0.05)
    assert got == [{"secret": "s3cret", "jobId": job_id, "status": "FAILED"}]
    await executor.close()


async def test_look_alike_external_ids_get_their_own_jobs(tmp_path: Path) -> None:
    """Ids that differ only in characters a folder name cannot hold never share a job."""
    from shared.executors.local import LocalExecutor, job_name
    from shared.storage.local import LocalStorage

    ids = ["wf-s.a b", "wf-s.a_b", "wf-s.x#1", "wf-s.x_1", "wf-s." + "y" * 300, "wf-s." + "y" * 301]
    externals = [f"{i}#1" for i in ids]
    assert len({job_name(e) for e in externals}) == len(externals)
    assert all(len(job_name(e)) < 100 for e in externals)
    # The attempt paths of two actions computing the same dataset (same lineage hash) too.
    storage = LocalStorage(tmp_path / "datasets")
    final = str(tmp_path / "datasets" / ("h" * 64))
    attempts = {storage.attempt_path(final, i, 1) for i in ids}
    assert len(attempts) == len(ids) and all(len(Path(p).name) < 200 for p in attempts)
    # A retried submit finds the job its first try made, from another executor instance too.
    executor = LocalExecutor(tmp_path / "jobs")
    (tmp_path / "jobs" / job_name("wf-s.a b#1")).mkdir()
    assert await executor.find("wf-s.a b#1") == job_name("wf-s.a b#1")
    assert await executor.find("wf-s.a_b#1") is None
    # A job made by an earlier version (name without digest) is found only by its own id.
    legacy = tmp_path / "jobs" / "wf-s.x_1_1"
    legacy.mkdir()
    (legacy / "request.json").write_text('{"external_id": "wf-s.x#1#1"}')
    assert await executor.find("wf-s.x#1#1") == "wf-s.x_1_1"
    assert await executor.find("wf-s.x_1#1") is None


async def test_a_fenced_external_id_never_gets_a_job_and_a_job_made_first_is_found(tmp_path: Path) -> None:
    """``fence``: the poller's step before taking back an attempt whose submitter seems lost
    (docs/state-machines.md, "Action"). Whichever comes first wins: the fence (a late
    submit is refused, nothing runs) or the job (the fence finds it, to record it)."""
    from shared.executors.base import JobFenced, JobState
    from shared.executors.local import LocalExecutor, job_name

    executor = LocalExecutor(tmp_path / "jobs")
    job = JobRequest(
        action_id="wf-f.1", external_id="wf-f.1#1", type=ActionType.SHELL, name="fenced", action_folder=None,
        main_class=None, command=["python3", "-c", "open('ran', 'w')"], arguments=[], configuration={},
        notify_url="http://127.0.0.1:9/x",
    )  # fmt: skip
    assert await executor.fence("wf-f.1#1") is None
    assert await executor.fence("wf-f.1#1") is None  # fenced twice (a second poller): the same answer
    with pytest.raises(JobFenced):
        await executor.submit(job)
    assert await executor.find("wf-f.1#1") is None
    assert (await executor.status(job_name("wf-f.1#1"))).state == JobState.UNKNOWN
    # A job made before the fence is the attempt's: found, and recorded by the poller.
    made = tmp_path / "jobs" / job_name("wf-f.2#1")
    made.mkdir()
    assert await executor.fence("wf-f.2#1") == job_name("wf-f.2#1")
    # A fence is kept as long as a job's folder would be (job retention), then removed.
    assert await executor.prune(time.time() - 3600, set()) == 0
    assert await executor.prune(time.time() + 1, set()) == 1
    assert not (tmp_path / "jobs" / job_name("wf-f.1#1")).exists()
    await executor.close()


async def test_a_job_is_named_before_it_is_made_and_a_kill_before_then_fences_it(tmp_path: Path) -> None:
    """``job_id``: the id a job will have, recorded with the attempt's claim before its
    submit (docs/state-machines.md, "Action"). Until the job is made its status is
    UNKNOWN, and a kill of it (its workflow killed meanwhile) fences it: the submit then
    starts nothing. A kill of a job made first asks the job to stop, as ever."""
    from shared.executors.base import JobFenced, JobState
    from shared.executors.local import LocalExecutor

    executor = LocalExecutor(tmp_path / "jobs")

    def job(external_id: str) -> JobRequest:
        return JobRequest(
            action_id=external_id.split("#")[0], external_id=external_id, type=ActionType.SHELL, name="named",
            action_folder=None, main_class=None, command=["python3", "-c", "open('ran', 'w')"], arguments=[],
            configuration={}, notify_url="http://127.0.0.1:9/x",
        )  # fmt: skip

    named = executor.job_id("wf-n.1#1")
    assert named is not None and (await executor.status(named)).state == JobState.UNKNOWN
    await executor.kill(named)
    await executor.kill(named)  # asked twice (the kill, then the poller): the same fence
    with pytest.raises(JobFenced):
        await executor.submit(job("wf-n.1#1"))
    assert await executor.find("wf-n.1#1") is None
    # Made first, then killed: the job is asked to stop, and its id is the one named.
    made = tmp_path / "jobs" / executor.job_id("wf-n.2#1")
    made.mkdir()
    await executor.kill(made.name)
    assert (made / "kill").exists()
    assert await executor.submit(job("wf-n.2#1")) == made.name  # the same job
    await executor.close()


async def test_actions_whose_ids_look_alike_both_run(system: Api) -> None:
    """Local ids "a b" and "a_b" (and "x#1" and "x_1") used to map to one job folder: one
    command never ran and its action failed with "output does not exist"."""
    wf = await system.run(
        {
            "name": "look-alike",
            "actions": [
                shell_action("a b", "la-space"),
                shell_action("a_b", "la-underscore"),
                shell_action("x#1", "la-hash"),
                shell_action("x_1", "la-x1"),
            ],
        }
    )
    assert wf["state"] == "SUCCEEDED", [(a["localId"], a["state"], a.get("error")) for a in wf["actions"]]
    labels = {a["localId"]: (Path(a["outputPath"]) / "_lineage").read_text().split("\n")[0] for a in wf["actions"]}
    assert labels == {"a b": "la-space", "a_b": "la-underscore", "x#1": "la-hash", "x_1": "la-x1"}
    job_ids = [(await system.db.actions.find_one({"_id": a["id"]}))["job_id"] for a in wf["actions"]]
    assert len(set(job_ids)) == 4


async def test_a_job_outlives_the_manager_that_submitted_it_and_still_notifies(tmp_path: Path, notifications) -> None:
    """The notification URL reaches the supervisor over a pipe, not the job folder: the
    supervisor must still have it when the process that submitted the job is gone."""
    import asyncio
    import sys

    from shared.executors.base import JobRequest, JobState
    from shared.executors.local import LocalExecutor

    url, got = notifications
    job = JobRequest(
        action_id="wf-orphan.1", external_id="wf-orphan.1#1", type="SHELL", name="orphan", action_folder=str(JOBS),
        main_class=None, command=["python3", "synth.py"], arguments=["orphan", "1", "1", str(tmp_path / "o")],
        configuration={}, notify_url=url,
    )  # fmt: skip
    manager = (
        "import asyncio, os, sys\n"
        "from pathlib import Path\n"
        "from shared.executors.base import JobRequest\n"
        "from shared.executors.local import LocalExecutor\n"
        "async def main():\n"
        "    job_id = await LocalExecutor(Path(sys.argv[1])).submit(JobRequest.model_validate_json(sys.argv[2]))\n"
        "    print(job_id, flush=True)\n"
        "    os._exit(0)  # gone at once, as a crashed action manager\n"
        "asyncio.run(main())\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", manager, str(tmp_path / "jobs"), job.model_dump_json(),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    job_id = out.decode().strip()
    executor = LocalExecutor(tmp_path / "jobs")
    async with asyncio.timeout(20):
        while (st := await executor.status(job_id)).state in (JobState.PREP, JobState.RUNNING):
            await asyncio.sleep(0.05)
        assert st.state == JobState.SUCCEEDED, st.error
        while not [g for g in got if g["status"] != "RUNNING"]:
            await asyncio.sleep(0.05)
    # Its end, and before it at most the notice that it runs (sent if it ran past a second).
    ends = [g for g in got if g["status"] != "RUNNING"]
    assert ends == [{"secret": "s3cret", "jobId": job_id, "status": "SUCCEEDED"}]
    assert (tmp_path / "o" / "part-00000").is_file()


async def test_a_supervisor_that_fails_itself_reports_the_job_failed(tmp_path: Path, notifications) -> None:
    """Any error of the supervisor's own (here a request it cannot use) ends the job FAILED
    with the reason, and notifies: no wait for the heartbeat to time out."""
    import asyncio
    import json
    import sys

    from shared.executors.base import JobState
    from shared.executors.local import PROJECT_ROOT, LocalExecutor

    url, got = notifications
    executor = LocalExecutor(tmp_path / "jobs")
    job_dir = tmp_path / "jobs" / "broken-0000000000000000"
    job_dir.mkdir()
    (job_dir / "request.json").write_text(json.dumps({"argv": ["true"], "slots": "many"}))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "shared.executors.local_job", str(job_dir),
        cwd=PROJECT_ROOT, stdin=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    async with asyncio.timeout(10):
        await proc.communicate(url.encode())
    st = await executor.status(job_dir.name)
    assert st.state == JobState.FAILED and "the local job supervisor failed" in st.error
    assert got == [{"secret": "s3cret", "jobId": job_dir.name, "status": "FAILED"}]
