"""Pingo's five services (in process) on either Hadoop target of the conformance suite
(docs/testing.md, "Two targets"): the emulator (a fresh one per test, its Oozie, NameNode
and DataNode) or the session's real mini cluster with the real Apache Oozie
(``real_hadoop``). The same workflows, the same job script and the same assertions run on
both; a difference is a failure of Pingo or of the emulator
(docs/hadoop-protocol.md, "Emulator and real cluster").

On the shared real cluster each test has a Pingo root of its own (under the target's
folder), so no test sees another's datasets, action folders or Oozie applications."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pingo.dev import all_services
from shared.config import Settings
from shared.hadoop.oozie import Oozie
from shared.hadoop.webhdfs import WebHdfs
from shared.runtime import Context, running
from shared.store import users
from tests.support.hadoop_targets import Target, make_target
from tests.support.system import Api, make_settings
from tests.support.workflows import JOBS, ROOT

PINGO = "pingo"  # Pingo's HDFS user, who owns its root; HDFS's superuser is the target's
OWNER = "alice"  # in a group the target lets Pingo act for (tests/support/hadoop_targets.py)
NOTIFICATION_URL = "oozie.wf.workflow.notification.url"
# Each action folder on HDFS, and the files it ships (<file>).
ACTION_FOLDERS = {
    "jobs": [ROOT / "tests" / "jobs" / "hdfs_synth.py", JOBS / "fail.py"],
    "wordcount": [ROOT / "examples" / "wordcount" / name for name in ("mapper.py", "reducer.py")],
}


@dataclass
class HadoopPingo:
    """What a test of the suite holds: the gateway as the workflows' owner (``api``, with the
    store beside it), HDFS as HDFS's superuser (``target``, to act behind Pingo's back), as
    Pingo's user (``fs``), and Oozie's REST API (``oozie``)."""

    kind: str  # "emulator" or "real"
    api: Api
    target: Target
    fs: WebHdfs
    oozie: Oozie
    settings: Settings

    @property
    def root(self) -> str:
        return self.settings.hdfs_root

    @property
    def webhdfs_url(self) -> str:
        """Where a job reaches WebHDFS (hdfs_synth.py's ``PINGO_JOB_WEBHDFS``)."""
        return self.target.namenode_url

    @property
    def callback_service(self) -> str:
        """The callback service itself, wherever Pingo's notification URLs point."""
        return f"http://{self.settings.callback_host}:{self.settings.callback_port}"

    def superuser_fs(self) -> WebHdfs:
        """HDFS as its superuser, who may change and delete sealed datasets (close it)."""
        return WebHdfs(self.target.namenode_url, self.target.superuser)

    async def notification_url(self, job_id: str) -> str:
        """The workflow notification URL Pingo gave Oozie for ``job_id``, as Oozie keeps it
        in the job's configuration (``$jobId`` and ``$status`` not yet replaced)."""
        conf = ET.fromstring((await self.oozie.info(job_id))["conf"])
        return next(p.findtext("value") or "" for p in conf.iter("property") if p.findtext("name") == NOTIFICATION_URL)


def synth(aid: int, label: str, parents: list[int] = (), webhdfs: str = "", **env: str) -> dict:
    """A SHELL action running tests/jobs/hdfs_synth.py: it reads its inputs and writes its
    output over WebHDFS, as a YARN container (which has no Hadoop client) must; ``env``
    becomes its environment (``SYNTH_SECONDS``: how long it works)."""
    params = {"PINGO_JOB_WEBHDFS": webhdfs, **env}
    return {"id": aid, "name": label, "type": "SHELL", "actionFolder": "jobs",
            "command": ["python3", "hdfs_synth.py"], "parentActions": [{"id": p} for p in parents],
            "additionalInput": [{"key": "label", "value": label}],
            "configurationParameters": [{"key": k, "value": v} for k, v in params.items()]}  # fmt: skip


def _services(target: Target, request: pytest.FixtureRequest) -> dict[str, str]:
    """Where Oozie, the NameNode's RPC and the ResourceManager are on ``target``."""
    if target.kind == "emulator":
        emu = target.emulator  # type: ignore[attr-defined]
        return {"oozie_url": emu.oozie_url, "name_node": emu.hdfs_uri}
    oozie = request.getfixturevalue("real_oozie")
    return {"oozie_url": oozie.url, "name_node": oozie.cluster.name_node, "job_tracker": oozie.cluster.resource_manager}


async def pingo_on_hadoop(kind: str, request: pytest.FixtureRequest, tmp_path: Path, mongo_url: str, **overrides: Any):
    """An async generator: :class:`HadoopPingo` on ``kind``; ``overrides`` are settings."""
    async for target in make_target(kind, request, tmp_path):
        where = _services(target, request)
        root = target.path("/pingo")
        # As an operator sets it up: Pingo's root is Pingo's user's, the owner has a home
        # (Oozie stages a launcher's files under it).
        for folder, owner in ((root, PINGO), (f"/user/{OWNER}", OWNER)):
            await target.as_superuser("PUT", folder, op="MKDIRS")
            await target.as_superuser("PUT", folder, op="SETOWNER", owner=owner)
        fs = WebHdfs(target.namenode_url, PINGO)
        for folder, files in ACTION_FOLDERS.items():
            for path in files:
                await fs.create(f"{root}/actions/{folder}/{path.name}", path.read_bytes(), overwrite=True)
        settings = make_settings(
            tmp_path, mongo_url, executor="oozie", storage="webhdfs", webhdfs_url=target.namenode_url,
            hdfs_user=PINGO, hdfs_root=root, action_roots=[], output_roots=[],
            poll_interval=1.0, poll_max_interval=3.0, reconcile_interval=2.0, **where, **overrides,
        )  # fmt: skip
        oozie = Oozie(settings.oozie_url, PINGO)
        ctx = await Context.open(settings)
        try:
            async with running(ctx, all_services):
                api = Api(settings, await users.add(ctx.store, OWNER, False, time.time()))
                await api.open()
                try:
                    yield HadoopPingo(kind, api, target, fs, oozie, settings)
                finally:
                    await api.close()
        finally:
            await oozie.close()
            await fs.close()
