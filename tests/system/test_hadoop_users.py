"""Users on Hadoop (docs/users.md, "On Hadoop"): Oozie jobs are submitted for their owner
through the proxy-user mechanism (doAs), which the emulator checks as Oozie does."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hadoop_emulator import start_emulator
from shared.store import users
from shared.store.client import connect
from tests.support.system import Api, Processes, make_settings
from tests.support.workflows import JOBS


def action(aid: int, label: str) -> dict[str, Any]:
    return {
        "id": aid, "name": label, "type": "SHELL", "actionFolder": "jobs", "command": ["python3", "synth.py"],
        "additionalInput": [{"value": label}, {"value": "0"}, {"value": "4"}],
    }  # fmt: skip


@pytest.fixture
async def cluster(request: pytest.FixtureRequest, tmp_path: Path, mongo_url: str, amqp_url: str):
    """The five services as processes on the emulator, with the emulator's proxy-user
    configuration from indirect parametrization, and users alice and bob."""
    faults = {"notification_retry_delay": 0.2, **getattr(request, "param", {})}
    emu = await start_emulator(tmp_path / "hdfs", faults=faults)
    actions = emu.root / "pingo" / "actions" / "jobs"
    actions.mkdir(parents=True)
    shutil.copy(JOBS / "synth.py", actions / "synth.py")
    settings = make_settings(
        tmp_path, mongo_url, amqp_url=amqp_url, executor="oozie", storage="webhdfs", oozie_url=emu.oozie_url,
        webhdfs_url=emu.namenode_url, name_node=emu.hdfs_uri, hdfs_root="/pingo", action_roots=[], output_roots=[],
        poll_interval=0.5, poll_max_interval=2.0,
    )  # fmt: skip
    store = await connect(mongo_url, settings.mongo_db)
    tokens = {name: await users.add(store, name, False, time.time()) for name in ("alice", "bob")}
    await store.close()
    (tmp_path / "logs").mkdir()
    system = Processes(settings, tmp_path / "logs")
    await system.start_all()
    apis = {name: Api(settings, token) for name, token in tokens.items()}
    for api in apis.values():
        await api.open()
    yield emu, apis
    for api in apis.values():
        await api.close()
    await system.stop_all()
    await emu.stop()


async def job_user(oozie_url: str, job_id: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(f"{oozie_url}/v1/job/{job_id}", params={"show": "info"}) as r:
        assert r.status == 200, await r.text()
        return (await r.json(content_type=None))["user"]


@pytest.mark.parametrize("cluster", [{"proxy_users": {"pingo": ["*"]}}], indirect=True)
async def test_jobs_run_as_their_owner_and_datasets_stay_shared(cluster) -> None:
    emu, apis = cluster
    mine = await apis["alice"].run({"name": "as-alice", "actions": [action(1, "doas-shared")]})
    assert mine["state"] == "SUCCEEDED", mine
    (computed,) = mine["actions"]
    assert await job_user(emu.oozie_url, computed["jobId"]) == "alice"
    # bob reuses what alice's job computed: nothing of his runs.
    his = await apis["bob"].run({"name": "as-bob", "actions": [action(1, "doas-shared")]})
    assert [a["state"] for a in his["actions"]] == ["REUSED"]
    other = await apis["bob"].run({"name": "as-bob", "actions": [action(1, "doas-bob")]})
    assert await job_user(emu.oozie_url, other["actions"][0]["jobId"]) == "bob"


@pytest.mark.parametrize("cluster", [{"proxy_users": {"pingo": ["analysts"]}, "user_groups": {"alice": ["analysts"]}}],
                         indirect=True)  # fmt: skip
async def test_oozie_refuses_a_user_pingo_may_not_act_for(cluster) -> None:
    emu, apis = cluster
    ok = await apis["alice"].run({"name": "in-group", "actions": [action(1, "doas-analyst")]})
    assert ok["state"] == "SUCCEEDED" and await job_user(emu.oozie_url, ok["actions"][0]["jobId"]) == "alice"
    refused = await apis["bob"].run({"name": "not-in-group", "actions": [action(1, "doas-outsider")]}, timeout=60)
    (a,) = refused["actions"]
    assert refused["state"] == "FAILED" and a["reason"] == "submit_failed", a
    # Oozie's own words reach the user: the impersonation was refused, and why.
    assert "E1400" in a["error"] and "Unauthorized proxyuser [pingo] for user [bob]" in a["error"], a["error"]


async def test_the_emulator_answers_a_refused_doas_as_oozie_does(tmp_path: Path) -> None:
    """Oozie ships with no proxy users: JsonRestServlet answers the AccessControlException of
    ProxyUserService with 401, E1400 and the exception's message."""
    emu = await start_emulator(tmp_path / "hdfs")
    conf = (
        b"<configuration><property><name>oozie.wf.application.path</name><value>/x</value></property></configuration>"
    )
    try:
        async with aiohttp.ClientSession() as http:
            async with http.post(
                f"{emu.oozie_url}/v1/jobs", params={"action": "start", "user.name": "pingo", "doAs": "alice"},
                data=conf, headers={"Content-Type": "application/xml;charset=UTF-8"},
            ) as r:  # fmt: skip
                assert r.status == 401
                assert r.headers["oozie-error-code"] == "E1400"
                assert r.headers["oozie-error-message"] == "User [pingo] not defined as proxyuser"
    finally:
        await emu.stop()
