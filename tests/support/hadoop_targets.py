"""The two HDFS targets of the Hadoop conformance tests (docs/testing.md, "Two targets"):
the project's emulator (a fresh one per test, fast) and Apache Hadoop's real mini cluster
(one per session, ``real_hadoop``). A test written against :class:`Target` runs on both;
an answer that differs is a failure of Pingo or of the emulator.

On the shared real cluster each test works under a folder of its own (``Target.path``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

# The users and groups of the tests: alice and carol in groups Pingo may act for or not,
# as an operator's core-site.xml would say (hadoop.proxyuser.pingo.groups).
GROUPS = {"alice": ["analysts"], "carol": ["bio"]}
PROXY_GROUPS = ["analysts"]
TARGETS = ["emulator", pytest.param("real", marks=pytest.mark.real_hadoop)]


@dataclass
class Target:
    kind: str  # "emulator" or "real"
    namenode_url: str
    superuser: str
    base: str = ""  # every path of the test is under it

    def path(self, path: str) -> str:
        return f"{self.base}{path}"

    async def op(self, method: str, path: str, user: str, data: bytes | None = b"x", **params: str) -> tuple[int, Any]:
        """One WebHDFS request as ``user`` (``doas`` among ``params``) on ``path`` (already
        under ``base``), redirects followed."""
        query = {"user.name": user, **params}
        async with aiohttp.ClientSession() as http:
            async with http.request(method, f"{self.namenode_url}/webhdfs/v1{path}", params=query, data=data) as r:
                return r.status, await r.json(content_type=None) if r.content_length != 0 else None

    async def exists(self, path: str) -> bool:
        status, _ = await self.op("GET", path, self.superuser, data=None, op="GETFILESTATUS")
        return status == 200

    async def as_superuser(self, method: str, path: str, **params: str) -> None:
        status, body = await self.op(method, path, self.superuser, **params)
        assert status in (200, 201), body


async def make_target(kind: str, request: pytest.FixtureRequest, tmp_path: Path):
    """An async generator: the target ``kind``, stopped (emulator) or left to the session
    (real) afterwards."""
    if kind == "emulator":
        from hadoop_emulator import start_emulator

        emu = await start_emulator(
            tmp_path / "hdfs",
            faults={"hdfs_permissions": True, "proxy_users": {"pingo": PROXY_GROUPS}, "user_groups": GROUPS},
        )
        try:
            target = Target("emulator", emu.namenode_url, "hdfs")
            target.emulator = emu  # type: ignore[attr-defined]
            yield target
        finally:
            await emu.stop()
        return
    cluster = request.getfixturevalue("real_hadoop_cluster")
    target = Target("real", cluster.webhdfs_url, cluster.superuser, base=f"/t-{uuid.uuid4().hex[:8]}")
    await target.as_superuser("PUT", target.base, op="MKDIRS", permission="777")
    yield target
