"""Pingo's Oozie and WebHDFS clients against the emulator, on the answers the real servers
give when they are not ready (docs/hadoop-protocol.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hadoop_emulator import start_emulator
from shared.executors.base import JobRequest, JobState
from shared.executors.oozie import OozieExecutor
from shared.hadoop.oozie import Oozie, OozieError
from shared.hadoop.webhdfs import HdfsError, WebHdfs
from shared.workflow_spec import ActionType


@pytest.fixture
async def emu(tmp_path: Path):
    emulator = await start_emulator(tmp_path / "hdfs")
    yield emulator
    await emulator.stop()


async def test_a_standby_namenode_answer_is_retried_until_it_serves(emu) -> None:
    """A NameNode in standby answers 403 with a StandbyException: retried, not an error."""
    emu.faults = emu.faults.patched({"standby_burst_webhdfs": 2})
    hdfs = WebHdfs(emu.namenode_url, "pingo")
    try:
        assert await hdfs.mkdirs("/pingo/x")
        assert (await hdfs.status("/pingo/x"))["type"] == "DIRECTORY"
    finally:
        await hdfs.close()
    assert emu.stats()["unavailable"]["webhdfs"] == 2


async def test_a_403_that_will_not_get_better_is_not_retried(emu) -> None:
    emu.faults = emu.faults.patched({"webhdfs_deny_anonymous_writes": True})
    hdfs = WebHdfs(emu.namenode_url, "dr.who")
    hdfs.params = lambda op, **extra: {"op": op, **{k: str(v) for k, v in extra.items()}}  # anonymous
    try:
        with pytest.raises(HdfsError) as info:
            await hdfs.mkdirs("/pingo/denied")
        assert info.value.status == 403 and info.value.exception == "AccessControlException"
    finally:
        await hdfs.close()


async def test_the_status_of_an_unknown_or_purged_job_is_unknown_not_an_error(emu) -> None:
    """Oozie's v2 show=status answers E0605 for a job it does not have (show=info: E0604)."""
    oozie, hdfs = Oozie(emu.oozie_url, "pingo"), WebHdfs(emu.namenode_url, "pingo")
    executor = OozieExecutor(oozie, hdfs, "hdfs://localhost:8020", "localhost:8032", "default", "/pingo/apps")
    try:
        status = await executor.status("0000042-200101000000000-oozie-oozi-W")
        assert status.state == JobState.UNKNOWN
    finally:
        await oozie.close()
        await hdfs.close()


def _shell_job(external_id: str) -> JobRequest:
    return JobRequest(
        action_id="wf-x.1", external_id=external_id, type=ActionType.SHELL, name="touch", action_folder=None,
        main_class=None, command=["true"], arguments=[], configuration={}, notify_url="",
    )  # fmt: skip


async def test_a_submission_answered_503_is_tried_again_and_makes_one_job(emu) -> None:
    """Oozie's POST is not idempotent, so the HTTP client does not repeat it: the Oozie client
    does, looking the external id up first. Three 503s in a row still make exactly one job."""
    oozie, hdfs = Oozie(emu.oozie_url, "pingo"), WebHdfs(emu.namenode_url, "pingo")
    executor = OozieExecutor(oozie, hdfs, "hdfs://localhost:8020", "localhost:8032", "default", "/pingo/apps")
    try:
        job = _shell_job("ext-503")
        await hdfs.mkdirs("/pingo/apps/ext-503")
        await hdfs.create("/pingo/apps/ext-503/workflow.xml", await executor.workflow_xml(job))
        properties = {
            "oozie.wf.application.path": executor.hdfs_uri("/pingo/apps/ext-503"),
            "nameNode": "hdfs://localhost:8020", "jobTracker": "localhost:8032", "queueName": "default",
            "oozie.wf.external.id": "ext-503",
        }  # fmt: skip
        emu.faults = emu.faults.patched({"http_503_burst_oozie": 1})
        job_id = await oozie.submit(properties, "ext-503")  # the POST gets the 503
        assert emu.stats()["unavailable"]["oozie"] == 1
        assert await oozie.find("ext-503") == job_id
        assert await executor.submit(job) == job_id  # a repeated submission finds it, makes none
    finally:
        await oozie.close()
        await hdfs.close()


async def test_a_submission_oozie_refuses_is_not_tried_again(emu) -> None:
    """A 4xx says the request itself is wrong: raised at once, not repeated."""
    oozie = Oozie(emu.oozie_url, "pingo")
    try:
        with pytest.raises(OozieError) as info:
            await oozie.submit({"user.name": "pingo"}, "ext-bad")  # no application path
        assert 400 <= info.value.status < 500
        assert await oozie.find("ext-bad") is None
    finally:
        await oozie.close()
