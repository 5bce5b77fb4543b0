"""What a job's process gets in its environment (docs/planning.md, "The job's environment"):
an allow-list of Pingo's variables, its action id and its own configurationParameters;
never Pingo's settings, credentials or anything else its operator exported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shared.config import Settings
from tests.support.system import Api, make_settings


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
    return make_settings(tmp_path, mongo_url, job_env_pass=["SITE_LICENSE"])


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
    # The request the job was started from holds no more than the job got.
    request = next(Path(system.settings.jobs_dir).glob("*/request.json"))
    assert "operator-token" not in request.read_text() and "operator-cloud-key" not in request.read_text()


async def test_an_action_without_configuration_gets_none_of_the_servers_variables(system: Api) -> None:
    wf = await system.run({"name": "env", "actions": [env_action()]})
    assert wf["state"] == "SUCCEEDED", wf["actions"]
    env = job_env(wf)
    assert "FOO" not in env and "PINGO_URL" not in env and "PINGO_TOKEN" not in env


def test_pingo_job_env_pass_never_passes_pingos_own_settings() -> None:
    with pytest.raises(ValueError, match="never reach a job"):
        Settings(job_env_pass="SITE_LICENSE,PINGO_TOKEN")
    assert Settings(job_env_pass="A, LC_*").job_env_pass == ["A", "LC_*"]
