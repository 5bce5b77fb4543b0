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
from shared.hadoop.webhdfs import WebHdfs
from shared.storage.webhdfs import WebHdfsStorage
from shared.store import users
from shared.store.client import connect
from tests.support.system import Api, Processes, make_settings
from tests.support.workflows import JOBS


def action(aid: int, label: str, parents: list[int] = (), **extra: Any) -> dict[str, Any]:
    return {
        "id": aid, "name": label, "type": "SHELL", "actionFolder": "jobs", "command": ["python3", "synth.py"],
        "additionalInput": [{"value": label}, {"value": "0"}, {"value": "4"}],
        "parentActions": [{"id": p} for p in parents], **extra,
    }  # fmt: skip


@pytest.fixture
async def cluster(request: pytest.FixtureRequest, tmp_path: Path, mongo_url: str, amqp_url: str):
    """The five services as processes on the emulator, with the emulator's proxy-user
    configuration from indirect parametrization, and users alice and bob."""
    param = dict(getattr(request, "param", {}))
    output_roots = param.pop("output_roots", [])
    faults = {"notification_retry_delay": 0.2, **param}
    emu = await start_emulator(tmp_path / "hdfs", faults=faults)
    hdfs = WebHdfs(emu.namenode_url, "hdfs")  # the superuser, setting up as an operator does
    for path, owner in (("/pingo", "pingo"), ("/user/alice", "alice"), ("/user/bob", "bob"), ("/projects/bio", "bob")):
        await hdfs.mkdirs(path)
        await hdfs._json("PUT", path, "SETOWNER", owner=owner, group="pingo-users")
    await hdfs.close()
    actions = emu.root / "pingo" / "actions" / "jobs"
    actions.mkdir(parents=True)
    shutil.copy(JOBS / "synth.py", actions / "synth.py")
    settings = make_settings(
        tmp_path, mongo_url, amqp_url=amqp_url, executor="oozie", storage="webhdfs", oozie_url=emu.oozie_url,
        webhdfs_url=emu.namenode_url, name_node=emu.hdfs_uri, hdfs_root="/pingo", action_roots=[],
        output_roots=output_roots, poll_interval=0.5, poll_max_interval=2.0,
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


async def file_status(emu: Any, path: str) -> dict[str, Any] | None:
    hdfs = WebHdfs(emu.namenode_url, "pingo")
    try:
        return await hdfs.status(path)
    finally:
        await hdfs.close()


@pytest.mark.parametrize(
    "cluster",
    [{"proxy_users": {"pingo": ["*"]}, "hdfs_permissions": True, "output_roots": ["/user/{user}", "/projects"]}],
    indirect=True,
)
async def test_an_owner_writes_only_where_hdfs_lets_them_and_pingo_still_manages_their_datasets(cluster) -> None:
    """HDFS checks permissions (dfs.permissions.enabled): Pingo writes an unmanaged output as
    its owner (doas), so a path inside the owner's Pingo roots but in someone else's HDFS
    folder fails as it would on HDFS; managed datasets that owners' jobs wrote are sealed
    and deleted by Pingo all the same."""
    emu, apis = cluster

    def report(out: str) -> dict[str, Any]:
        return {"name": "report", "actions": [
            action(1, "perm-src"), action(2, "perm-report", [1], outputPath=out, isManaged=False),
        ]}  # fmt: skip

    mine = await apis["alice"].run(report("/user/alice/report"))
    assert mine["state"] == "SUCCEEDED", mine
    src, _ = mine["actions"]
    assert (await file_status(emu, "/user/alice/report"))["owner"] == "alice"
    sealed = await file_status(emu, src["outputPath"])
    assert (sealed["owner"], sealed["permission"]) == ("alice", "555"), sealed  # sealed by its owner, via doas

    # /projects is one of alice's Pingo roots, but /projects/bio is bob's on HDFS.
    denied = await apis["alice"].run(report("/projects/bio/report"), timeout=60)
    src2, out2 = denied["actions"]
    assert denied["state"] == "FAILED" and src2["state"] == "REUSED", denied
    assert out2["reason"] == "submit_failed", out2
    assert (
        'Permission denied: user=alice, access=WRITE, inode="/projects/bio":bob:pingo-users:drwxr-xr-x'
        in (out2["error"])
    ), out2["error"]
    assert "not retried" in out2["error"]  # a refusal is final at once
    assert not (emu.root / "projects" / "bio" / "report").exists()
    assert not (emu.root / "projects" / "bio" / ".pingo-attempts").exists()

    his = await apis["bob"].run(report("/projects/bio/report"))
    assert his["state"] == "SUCCEEDED" and his["actions"][0]["state"] == "REUSED", his
    assert (await file_status(emu, "/projects/bio/report"))["owner"] == "bob"

    # Pingo deletes alice's sealed dataset (as the decision service would): refused at
    # first (HDFS wants every folder open), opened by its owner through doas, deleted.
    storage = WebHdfsStorage(WebHdfs(emu.namenode_url, "pingo"), "/pingo/datasets")
    try:
        await storage.delete(src["outputPath"])
    finally:
        await storage.close()
    assert await file_status(emu, src["outputPath"]) is None
