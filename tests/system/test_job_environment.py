"""What a job's process gets in its environment (docs/planning.md, "The job's environment"):
an allow-list of Pingo's variables, its action id and its own configurationParameters;
never Pingo's settings, credentials or anything else its operator exported."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import aio_pika
import pytest

from shared.config import Settings
from shared.executors import local_runner
from tests.support.system import Api, Processes, make_settings, settings_env
from tests.support.workflows import ROOT


def env_action(aid: Any = 1, **extra: Any) -> dict[str, Any]:
    """A SHELL action writing the environment it was started with to <output>/env.json."""
    return {
        "id": aid,
        "name": extra.pop("name", "env"),
        "type": "SHELL",
        "actionFolder": "tests/jobs",
        "command": ["python3", "env_dump.py"],
        **extra,
    }


def job_env(wf: dict[str, Any], local_id: Any = 1) -> dict[str, str]:
    action = next(a for a in wf["actions"] if a["localId"] == local_id)
    return json.loads((Path(action["outputPath"]) / "env.json").read_text())


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    # What an operator's shell might hold when it starts Pingo: its client credentials, a
    # cloud key, a variable of its own; and one the operator chose to pass to jobs.
    monkeypatch.setenv("PINGO_TOKEN", "pingo_operator-token")
    monkeypatch.setenv("PINGO_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "operator-cloud-key")
    monkeypatch.setenv("FOO", "server-foo")
    monkeypatch.setenv("SITE_LICENSE", "passed-on-purpose")
    monkeypatch.setenv("LC_PINGO_TEST", "C")
    monkeypatch.setenv("TZ", "UTC")
    return make_settings(tmp_path, mongo_url, job_env_pass=["SITE_LICENSE"], log_level="DEBUG")


async def test_a_job_sees_the_allow_list_and_its_configuration_never_the_servers_environment(system: Api) -> None:
    conf = [{"key": "FOO", "value": "the-jobs-own-foo"}, {"key": "ANSWER", "value": "42"}]
    wf = await system.run({"name": "env", "actions": [env_action(configurationParameters=conf)]})
    assert wf["state"] == "SUCCEEDED", wf["actions"]
    env = job_env(wf)
    # Never the server's settings or credentials, nor what else its operator exported.
    assert not [k for k in env if k.startswith("PINGO_") and k != "PINGO_ACTION_ID"], sorted(env)
    assert "AWS_SECRET_ACCESS_KEY" not in env
    # Its own configuration (FOO is the job's, not the server's), its id, the allow-list.
    assert env["FOO"] == "the-jobs-own-foo" and env["ANSWER"] == "42"
    assert env["PINGO_ACTION_ID"] == f"{wf['id']}.1"
    assert env["PATH"] and env["TZ"] == "UTC" and env["LC_PINGO_TEST"] == "C"
    assert env["SITE_LICENSE"] == "passed-on-purpose"  # PINGO_JOB_ENV_PASS
    # The request the job was started from went to the runner over its private socket:
    # nothing of it is written (docs/performance.md, "The job runner").
    assert list(Path(system.settings.jobs_dir).glob("*/status.json"))
    assert not list(Path(system.settings.jobs_dir).glob("*/request.json"))


async def test_an_action_without_configuration_gets_none_of_the_servers_variables(system: Api) -> None:
    wf = await system.run({"name": "env", "actions": [env_action()]})
    assert wf["state"] == "SUCCEEDED", wf["actions"]
    env = job_env(wf)
    assert "FOO" not in env and "PINGO_URL" not in env and "PINGO_TOKEN" not in env


def test_pingo_job_env_pass_never_passes_pingos_own_settings() -> None:
    with pytest.raises(ValueError, match="never reach a job"):
        Settings(job_env_pass="SITE_LICENSE,PINGO_TOKEN")
    assert Settings(job_env_pass="A, LC_*").job_env_pass == ["A", "LC_*"]


SECRET = "s3cret-value-7f1c9a"  # what a secret configuration value holds in the tests below


def secret_workflow(value: str = SECRET, name: str = "secret") -> dict[str, Any]:
    conf = {"API_TOKEN": {"value": value, "secret": True}, "MODE": "fast"}
    return {"name": name, "actions": [env_action(configurationParameters=conf), env_action(2, parentActions=[1])]}


async def test_a_secret_value_reaches_the_job_and_no_view_event_or_log(
    processes: Processes, tmp_path: Path, amqp_url: str
) -> None:
    # Every event on Pingo's exchange, as an integrator would bind it.
    conn = await aio_pika.connect(amqp_url)
    channel = await conn.channel()
    exchange = await channel.declare_exchange(processes.settings.exchange, aio_pika.ExchangeType.TOPIC, durable=True)
    queue = await channel.declare_queue(exclusive=True)
    await queue.bind(exchange, routing_key="#")
    events: list[bytes] = []

    async def on_message(m: aio_pika.abc.AbstractIncomingMessage) -> None:
        events.append(m.body)
        await m.ack()

    await queue.consume(on_message)
    try:
        status, dry = await processes.request("POST", "/api/v1/workflows?dryRun=true", json=secret_workflow())
        assert status == 200, dry
        wf = await processes.run(secret_workflow())
        assert wf["state"] == "SUCCEEDED", wf["actions"]
        # The job got it, in its environment.
        env = job_env(wf)
        assert env["API_TOKEN"] == SECRET and env["MODE"] == "fast"
        # No API view shows it: the workflow, its timeline, the dataset with its lineage
        # (masked, ***), the dry run, the job's logs.
        first = next(a for a in wf["actions"] if a["localId"] == 1)
        shown = [dry, wf]
        for path in (
            f"/api/v1/workflows/{wf['id']}/timeline",
            f"/api/v1/datasets/{first['hash']}",
            "/api/v1/datasets",
            f"/api/v1/actions/{first['id']}/logs",
            f"/api/v1/actions/{first['id']}/logs?stream=stderr",
        ):
            status, body = await processes.request("GET", path)
            assert status == 200, (path, body)
            shown.append(body)
        dataset = shown[3]
        assert '"API_TOKEN"' in dataset["lineage"]["definition"] and "***" in dataset["lineage"]["definition"]
        assert SECRET not in json.dumps(shown)
        cli = subprocess.run(
            [sys.executable, "-m", "pingo.cli", "status", wf["id"], "--json"],
            cwd=ROOT, env={**settings_env(processes.settings), "PINGO_URL": processes.base},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert cli.returncode == 0, cli.stderr
        assert SECRET not in cli.stdout + cli.stderr
        # Changing it changes the computation: a new value is computed, not reused.
        other = await processes.run(secret_workflow("another-value"))
        assert [a["state"] for a in other["actions"]] == ["FINISHED", "FINISHED"], other["actions"]
        again = await processes.run(secret_workflow())
        assert {a["state"] for a in again["actions"]} <= {"REUSED", "SKIPPED"}, again["actions"]
    finally:
        await conn.close()
    # Nothing on the bus, in the services' logs, in the catalogue's dataset and workflow
    # records, or in Pingo's files outside the job's own folder and output holds it.
    assert events and not [e for e in events if SECRET.encode() in e]
    runner_log = local_runner.address(processes.settings.jobs_dir)[2]
    logs = [*(tmp_path / "logs").glob("*.log"), *([runner_log] if runner_log.exists() else [])]
    assert logs
    for path in logs:
        assert SECRET not in path.read_text(errors="replace"), path
    # Nor the job's folder (the runner gets the value in memory); the job's own output is
    # the job's business.
    outputs = {Path(a["outputPath"]) for w in (wf, other, again) for a in w["actions"]}
    assert list(Path(processes.settings.jobs_dir).glob("*/status.json"))
    for path in Path(processes.settings.data_dir).rglob("*"):
        if path.is_file() and not any(o in path.parents for o in outputs):
            assert SECRET.encode() not in path.read_bytes(), path
    assert not [d async for d in processes.db.datasets.find({}) if SECRET in json.dumps(d, default=str)]
    assert not [d async for d in processes.db.workflow_definitions.find({}) if SECRET in json.dumps(d, default=str)]


async def test_a_supervisor_of_its_own_gets_the_secret_values_over_its_stdin(tmp_path: Path, notifications) -> None:
    """The fallback when no job runner answers: the secret values reach the job's
    environment with the notification URL, over the supervisor's stdin, not its folder."""
    from shared.executors.base import JobRequest, JobState
    from shared.executors.local import LocalExecutor

    url, got = notifications
    output = tmp_path / "out"
    job = JobRequest(
        action_id="wf-000000000001.1", external_id="wf-000000000001.1#1", type="SHELL", name="env",
        action_folder=str(ROOT / "tests" / "jobs"), main_class=None, command=["python3", "env_dump.py"],
        arguments=[str(output)], configuration={"API_TOKEN": SECRET, "MODE": "fast"}, secret_keys=["API_TOKEN"],
        notify_url=url,
    )  # fmt: skip
    executor = LocalExecutor(tmp_path / "jobs")
    job_dir = executor.jobs_dir / "env-job"
    request = executor._make(job, job_dir, None)
    assert request is not None
    executor._write_request_file(job_dir, request)  # as submit does for a job without a runner
    assert SECRET not in (job_dir / "request.json").read_text()
    await executor._supervise("env-job", job_dir, url, executor._secrets(job))
    async with asyncio.timeout(30):
        while (st := await executor.status("env-job")).state in (JobState.PREP, JobState.RUNNING):
            await asyncio.sleep(0.05)
    assert st.state == JobState.SUCCEEDED, st.error
    env = json.loads((output / "env.json").read_text())
    assert env["API_TOKEN"] == SECRET and env["MODE"] == "fast"
    assert not [p for p in job_dir.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    async with asyncio.timeout(10):
        while not got:  # and the URL that came with them was called
            await asyncio.sleep(0.05)
    assert got[0]["status"] == "SUCCEEDED"
