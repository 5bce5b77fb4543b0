"""Action logs (docs/api.md, "Action logs"): an attempt's standard output and error through
``GET /api/v1/actions/{id}/logs`` and ``pingo logs``, on the local executor and on the
Hadoop emulator's Oozie; following a running action; job retention (docs/operations.md)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pingo.dev import all_services
from shared.config import Settings
from shared.runtime import Context, running
from tests.support.submitters import hold_submitter
from tests.support.system import Api, make_settings
from tests.support.workflows import ROOT
from tests.system import test_hadoop_system
from tests.system.test_hadoop_system import Hadoop

hadoop = test_hadoop_system.hadoop  # the fixture: five services as processes and the emulator
TALK = ROOT / "tests" / "jobs" / "talk.py"
PINGO = [sys.executable, "-m", "pingo.cli"]


def talk(word: str, folder: str = "tests/jobs", **extra: Any) -> dict[str, Any]:
    """A one-action workflow running tests/jobs/talk.py WORD; ``env`` becomes its environment."""
    env = extra.pop("env", {})
    action = {
        "id": 1, "name": word, "type": "SHELL", "actionFolder": folder, "command": ["python3", "talk.py"],
        "additionalInput": [{"key": "word", "value": word}],
        "configurationParameters": [{"key": k, "value": v} for k, v in env.items()], **extra,
    }  # fmt: skip
    return {"name": word, "actions": [action]}


async def logs(api: Api, action_id: str, query: str = "") -> tuple[int, str, str]:
    assert api.http is not None
    async with api.http.get(f"{api.base}/api/v1/actions/{action_id}/logs{query}") as r:
        return r.status, r.headers.get("Content-Type", ""), await r.text()


async def until(check, what: str, timeout: float = 30.0) -> Any:
    """Wait for ``check()`` to return something true, with a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        if result := await check():
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} after {timeout} s")
        await asyncio.sleep(0.1)


async def running_action(api: Api, wf_id: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        (a,) = (await api.workflow(wf_id))["actions"]
        return a if a["state"] == "RUNNING" and a.get("jobId") else None

    return await until(check, "RUNNING")


# --- the local executor -----------------------------------------------------------------------


async def test_each_stream_of_a_local_action_is_served_and_tail_keeps_the_last_lines(system: Api) -> None:
    word = f"hello-{uuid.uuid4().hex[:6]}"
    wf = await system.run(talk(word))
    assert wf["state"] == "SUCCEEDED", wf["actions"]
    (a,) = wf["actions"]
    status, media, text = await logs(system, a["id"])
    assert (status, media, text) == (200, "text/plain; charset=utf-8", f"{word} out 1\n{word} out 2\n")
    assert await logs(system, a["id"], "?stream=stderr") == (
        200, "text/plain; charset=utf-8", f"{word} err 1\n{word} err 2\n",
    )  # fmt: skip
    assert (await logs(system, a["id"], "?tail=1"))[2] == f"{word} out 2\n"
    assert (await logs(system, a["id"], "?tail=5&stream=stderr"))[2] == f"{word} err 1\n{word} err 2\n"
    assert (await logs(system, a["id"], "?tail=0"))[2] == ""
    assert (await logs(system, a["id"], "?attempt=1&follow=true"))[2] == f"{word} out 1\n{word} out 2\n"


async def test_a_retried_action_keeps_the_logs_of_each_attempt(system: Api, tmp_path: Path) -> None:
    word = f"retry-{uuid.uuid4().hex[:6]}"
    body = talk(word, env={"TALK_FAIL_ONCE": str(tmp_path / "failed-once")}, retries={"count": 1, "delaySeconds": 0.1})
    wf = await system.run(body)
    assert wf["state"] == "SUCCEEDED", wf["actions"]
    (a,) = wf["actions"]
    assert [r["outcome"] for r in a["attemptLog"]] == ["failed", "succeeded"]
    assert (await logs(system, a["id"], "?attempt=1"))[2] == f"{word} failing\n"
    assert (await logs(system, a["id"], "?attempt=1&stream=stderr"))[2] == f"{word} failing\n"
    assert (await logs(system, a["id"], "?attempt=2"))[2] == f"{word} out 1\n{word} out 2\n"
    assert (await logs(system, a["id"]))[2] == f"{word} out 1\n{word} out 2\n"  # the latest by default


async def test_unknown_actions_attempts_and_actions_that_never_ran_are_404(system: Api) -> None:
    word = f"reuse-{uuid.uuid4().hex[:6]}"
    first = await system.run(talk(word))
    again = await system.run(talk(word))
    (ran,), (reused,) = first["actions"], again["actions"]
    assert reused["state"] == "REUSED", reused
    for action_id, query, says in [
        ("no-such-action", "", "no action 'no-such-action'"),
        (ran["id"], "?attempt=2", "has no attempt 2 (its attempts: 1)"),
        (reused["id"], "", "never ran (it is REUSED)"),
    ]:
        status, body = await system.request("GET", f"/api/v1/actions/{action_id}/logs{query}")
        assert status == 404 and says in body["detail"], body


async def test_an_attempt_claimed_whose_job_is_not_made_yet_is_404_not_started_not_410(
    system: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local executor names a job before it makes it, so the claim records its id
    (docs/state-machines.md): between the two, the attempt's logs are not there because
    it has not started, not because they were removed."""
    word = f"gap-{uuid.uuid4().hex[:6]}"
    held = hold_submitter(monkeypatch, system.ctx.executor, word)
    wf_id = (await system.submit(talk(word)))["id"]
    await asyncio.wait_for(held.reached.wait(), 30)
    action_id = f"{wf_id}.1"
    status, body = await system.request("GET", f"/api/v1/actions/{action_id}/logs")
    assert status == 404 and "attempt 1 of action" in body["detail"] and "has not started yet" in body["detail"], body
    held.release.set()
    assert (await system.wait(wf_id))["state"] == "SUCCEEDED"
    status, _, text = await logs(system, action_id)
    assert status == 200 and f"{word} out 1" in text


async def test_bad_query_parameters_are_each_named_in_one_400(system: Api) -> None:
    wf = await system.run(talk(f"bad-{uuid.uuid4().hex[:6]}"))
    (a,) = wf["actions"]
    status, body = await system.request(
        "GET", f"/api/v1/actions/{a['id']}/logs?attempt=0&stream=stdin&tail=x&follow=maybe&lines=3"
    )
    assert status == 400 and body["type"].endswith("invalid-query"), body
    assert sorted(v["loc"] for v in body["violations"]) == ["attempt", "follow", "lines", "stream", "tail"], body
    status, body = await system.request("GET", f"/api/v1/actions/{a['id']}/logs?stream=stdout&stream=stderr")
    assert status == 400 and [v["loc"] for v in body["violations"]] == ["stream"], body


async def test_pingo_logs_follow_shows_lines_while_the_action_runs_and_ends_with_it(
    system: Api, tmp_path: Path
) -> None:
    word, go = f"follow-{uuid.uuid4().hex[:6]}", tmp_path / "go"
    plan = await system.submit(talk(word, env={"TALK_WAIT_FOR": str(go)}))
    a = await running_action(system, plan["id"])
    env = {**os.environ, "PINGO_URL": system.base}
    cli = await asyncio.create_subprocess_exec(
        *PINGO, "logs", a["id"], "--follow", cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert cli.stdout is not None
    try:
        # The action cannot end before ``go`` exists: this line was sent while it ran.
        first = await asyncio.wait_for(cli.stdout.readline(), 30)
        assert first == f"{word} out 1\n".encode()
        assert cli.returncode is None
        go.touch()
        rest, err = await asyncio.wait_for(cli.communicate(), 30)
    finally:
        if cli.returncode is None:
            cli.kill()
            await cli.wait()
    assert cli.returncode == 0, err
    assert rest == f"{word} out 2\n".encode()
    assert (await system.wait(plan["id"]))["state"] == "SUCCEEDED"


async def test_pingo_logs_errors_are_a_message_and_a_non_zero_exit(system: Api) -> None:
    env = {**os.environ, "PINGO_URL": system.base}
    cli = await asyncio.create_subprocess_exec(
        *PINGO, "logs", "no-such-action", cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(cli.communicate(), 30)
    assert cli.returncode == 1 and out == b"" and b"no action 'no-such-action'" in err, err


# --- job retention ---------------------------------------------------------------------------


@pytest.fixture
async def short_retention(tmp_path: Path, mongo_url: str):
    """All five services in this process, keeping ended jobs' folders half a second."""
    settings: Settings = make_settings(tmp_path, mongo_url, job_retention=0.5)
    ctx = await Context.open(settings)
    async with running(ctx, all_services):
        api = Api(settings)
        await api.open()
        yield api
        await api.close()


async def test_an_ended_jobs_folder_is_pruned_and_its_logs_are_gone_but_a_running_one_stays(
    short_retention: Api, tmp_path: Path
) -> None:
    api, go = short_retention, tmp_path / "go"
    slow = await api.submit(talk(f"slow-{uuid.uuid4().hex[:6]}", env={"TALK_WAIT_FOR": str(go)}))
    running = await running_action(api, slow["id"])
    done = (await api.run(talk(f"done-{uuid.uuid4().hex[:6]}")))["actions"][0]
    jobs = api.settings.jobs_dir

    async def gone() -> bool:
        return not (jobs / done["jobId"]).exists()

    await until(gone, "pruned", timeout=20)
    status, body = await api.request("GET", f"/api/v1/actions/{done['id']}/logs")
    assert status == 410 and body["type"].endswith("logs-gone") and "removed" in body["detail"], body
    # The running job has outlived several prunes (each settle interval) and keeps its folder.
    assert (jobs / running["jobId"]).is_dir()
    assert (await logs(api, running["id"]))[:1] == (200,)
    go.touch()
    assert (await api.wait(slow["id"]))["state"] == "SUCCEEDED"


# --- the Oozie executor on the Hadoop emulator ------------------------------------------------


async def test_logs_of_an_oozie_action_come_from_the_oozie_job_log_and_can_be_followed(
    hadoop: Hadoop, tmp_path: Path
) -> None:
    shutil.copy(TALK, hadoop.emulator.root / "pingo" / "actions" / "jobs" / "talk.py")
    word, go = f"oozie-{uuid.uuid4().hex[:6]}", tmp_path / "go"
    plan = await hadoop.submit(talk(word, folder="jobs", env={"TALK_WAIT_FOR": str(go)}))
    a = await running_action(hadoop, plan["id"])
    assert hadoop.http is not None
    url = f"{hadoop.base}/api/v1/actions/{a['id']}/logs?follow=true"
    async with hadoop.http.get(url, timeout=aiohttp.ClientTimeout(total=60)) as r:
        assert (r.status, r.headers["Content-Type"]) == (200, "text/plain; charset=utf-8")
        seen = b""
        while f"{word} out 1\n".encode() not in seen:
            chunk = await asyncio.wait_for(r.content.readany(), 30)
            assert chunk, f"the followed log ended while the action ran: {seen!r}"
            seen += chunk
        assert f"{word} out 2".encode() not in seen
        go.touch()
        seen += await asyncio.wait_for(r.content.read(), 30)  # to the end: the action's end
    assert f"{word} out 2\n".encode() in seen
    wf = await hadoop.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED", wf["actions"]
    status, media, text = await logs(hadoop, a["id"])
    assert status == 200 and media == "text/plain; charset=utf-8"
    assert f"{word} out 1\n{word} out 2\n" in text and f"{word} err 1\n{word} err 2\n" in text
    status, _, errors = await logs(hadoop, a["id"], "?stream=stderr")
    assert status == 200 and f"{word} err 1\n{word} err 2\n" in errors and f"{word} out 1" not in errors
    assert (await logs(hadoop, a["id"], "?tail=1"))[2] == text.splitlines(keepends=True)[-1]
