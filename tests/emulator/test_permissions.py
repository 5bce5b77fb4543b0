"""HDFS permissions in the emulator (docs/emulator.md, "Permissions"): with
``hdfs_permissions`` on, WebHDFS checks owner, group and mode bits, the sticky bit and
ownership as the NameNode does, answers a refusal 403 with its AccessControlException, and
checks ``doas`` against the proxy-user settings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hadoop_emulator import start_emulator
from hadoop_emulator.server import Emulator


@pytest.fixture
async def emu(tmp_path: Path) -> AsyncIterator[Emulator]:
    e = await start_emulator(
        tmp_path / "hdfs",
        faults={
            "hdfs_permissions": True,
            "proxy_users": {"pingo": ["analysts"]},
            "user_groups": {"alice": ["analysts"], "carol": ["bio"]},
        },
    )
    yield e
    await e.stop()


async def op(emu: Emulator, method: str, path: str, user: str, **params: str) -> tuple[int, Any]:
    """One WebHDFS request as ``user`` (``doas`` among ``params``), redirects followed."""
    query = {"user.name": user, **params}
    async with aiohttp.ClientSession() as http:
        async with http.request(method, f"{emu.namenode_url}/webhdfs/v1{path}", params=query, data=b"x") as r:
            return r.status, await r.json(content_type=None) if r.content_length != 0 else None


async def as_hdfs(emu: Emulator, method: str, path: str, **params: str) -> None:
    status, body = await op(emu, method, path, "hdfs", **params)
    assert status in (200, 201), body


async def tree(emu: Emulator) -> None:
    """As an operator sets it up: /user/alice (alice), /projects/bio (bob, group bio), /tmp 1777."""
    for path, owner, group in (("/user/alice", "alice", "alice"), ("/projects/bio", "bob", "bio")):
        await as_hdfs(emu, "PUT", path, op="MKDIRS")
        await as_hdfs(emu, "PUT", path, op="SETOWNER", owner=owner, group=group)
    await as_hdfs(emu, "PUT", "/tmp", op="MKDIRS", permission="1777")


def message(body: dict[str, Any]) -> str:
    return body["RemoteException"]["message"]


async def test_a_write_into_another_users_folder_is_denied_with_the_namenodes_message(emu: Emulator) -> None:
    await tree(emu)
    status, body = await op(emu, "PUT", "/projects/bio/out", "alice", op="MKDIRS")
    assert status == 403 and body["RemoteException"]["exception"] == "AccessControlException"
    assert message(body) == 'Permission denied: user=alice, access=WRITE, inode="/projects/bio":bob:bio:drwxr-xr-x'
    assert not (emu.root / "projects" / "bio" / "out").exists()
    # The DataNode's CREATE is refused too, and nothing is written.
    status, body = await op(emu, "PUT", "/projects/bio/f", "alice", op="CREATE")
    assert status == 403 and "user=alice, access=WRITE" in message(body)
    assert not (emu.root / "projects" / "bio" / "f").exists()
    # Asking for a folder that exists checks only the way to it (/projects/bio is not alice's).
    assert (await op(emu, "PUT", "/projects/bio", "alice", op="MKDIRS"))[0] == 200
    # The owner may; what they make is theirs, in the folder's group.
    assert (await op(emu, "PUT", "/projects/bio/out", "bob", op="MKDIRS"))[0] == 200
    status, body = await op(emu, "GET", "/projects/bio/out", "bob", op="GETFILESTATUS")
    assert (body["FileStatus"]["owner"], body["FileStatus"]["group"]) == ("bob", "bio")


async def test_group_bits_apply_to_members_and_reads_need_read(emu: Emulator) -> None:
    await tree(emu)
    await op(emu, "PUT", "/projects/bio", "bob", op="SETPERMISSION", permission="770")
    assert (await op(emu, "PUT", "/projects/bio/c", "carol", op="MKDIRS"))[0] == 200  # in group bio
    status, body = await op(emu, "GET", "/projects/bio", "alice", op="LISTSTATUS")
    assert status == 403
    expected = 'Permission denied: user=alice, access=READ_EXECUTE, inode="/projects/bio":bob:bio:drwxrwx---'
    assert message(body) == expected
    # Below a folder alice cannot enter, even a status is refused (execute on the way).
    status, body = await op(emu, "GET", "/projects/bio/c", "alice", op="GETFILESTATUS")
    assert status == 403 and "access=EXECUTE" in message(body)


async def test_the_sticky_bit_keeps_users_from_removing_each_others_entries(emu: Emulator) -> None:
    await tree(emu)
    assert (await op(emu, "PUT", "/tmp/a", "alice", op="MKDIRS"))[0] == 200
    status, body = await op(emu, "DELETE", "/tmp/a", "bob", op="DELETE", recursive="true")
    assert status == 403 and message(body).startswith("Permission denied by sticky bit: user=bob")
    assert (await op(emu, "DELETE", "/tmp/a", "alice", op="DELETE", recursive="true"))[1] == {"boolean": True}


async def test_only_the_owner_changes_a_mode_and_a_delete_needs_every_folder_open(emu: Emulator) -> None:
    await tree(emu)
    await op(emu, "PUT", "/user/alice/d/e", "alice", op="MKDIRS")
    await op(emu, "PUT", "/user/alice/d/e/f", "alice", op="CREATE")
    status, body = await op(emu, "PUT", "/user/alice/d", "bob", op="SETPERMISSION", permission="777")
    assert status == 403 and message(body) == "Permission denied. user=bob is not the owner of inode=/user/alice/d"
    # A sealed folder (555) cannot be deleted, even by its owner, until it is opened again.
    await op(emu, "PUT", "/user/alice/d/e", "alice", op="SETPERMISSION", permission="555")
    status, body = await op(emu, "DELETE", "/user/alice/d", "alice", op="DELETE", recursive="true")
    assert status == 403 and 'access=ALL, inode="/user/alice/d/e"' in message(body)
    assert (emu.root / "user" / "alice" / "d" / "e" / "f").exists()
    await op(emu, "PUT", "/user/alice/d/e", "alice", op="SETPERMISSION", permission="755")
    assert (await op(emu, "DELETE", "/user/alice/d", "alice", op="DELETE", recursive="true"))[1] == {"boolean": True}
    status, body = await op(emu, "PUT", "/user/alice", "alice", op="SETOWNER", owner="bob")
    assert status == 403 and "non-super user cannot change owner" in message(body)


async def test_doas_acts_for_a_user_only_as_the_proxy_user_settings_allow(emu: Emulator) -> None:
    await tree(emu)
    status, body = await op(emu, "PUT", "/user/alice/x", "pingo", op="MKDIRS", doas="alice")
    assert status == 200, body
    status, body = await op(emu, "GET", "/user/alice/x", "pingo", op="GETFILESTATUS")
    assert body["FileStatus"]["owner"] == "alice"
    # bob is not in a group pingo may act for; carol's own proxy settings are empty.
    for caller, user in (("pingo", "bob"), ("carol", "alice")):
        status, body = await op(emu, "PUT", "/user/alice/y", caller, op="MKDIRS", doas=user)
        assert status == 403 and body["RemoteException"]["exception"] == "SecurityException"
        assert message(body).endswith(f"AuthorizationException: User: {caller} is not allowed to impersonate {user}")


async def test_with_permissions_off_nothing_is_checked(tmp_path: Path) -> None:
    e = await start_emulator(tmp_path / "hdfs")
    try:
        await as_hdfs(e, "PUT", "/user/bob", op="MKDIRS")
        await as_hdfs(e, "PUT", "/user/bob", op="SETOWNER", owner="bob")
        assert (await op(e, "PUT", "/user/bob/a", "alice", op="MKDIRS"))[0] == 200
    finally:
        await e.stop()
