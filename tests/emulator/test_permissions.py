"""HDFS permissions, on the emulator (docs/emulator.md, "Permissions") and on Apache
Hadoop's real NameNode (``real_hadoop``), the same tests for both: with permissions on,
WebHDFS checks owner, group and mode bits, the sticky bit and ownership, answers a refusal
403 with its AccessControlException, and checks ``doas`` against the proxy-user settings.
The emulator is right where it answers as the real NameNode does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hadoop_emulator import start_emulator
from tests.support.hadoop_targets import TARGETS, Target, make_target


@pytest.fixture(params=TARGETS)
async def hdfs(request: pytest.FixtureRequest, tmp_path: Path):
    async for target in make_target(request.param, request, tmp_path):
        yield target


async def tree(t: Target) -> None:
    """As an operator sets it up: /user/alice (alice), /projects/bio (bob, group bio), /tmp 1777."""
    for path, owner, group in (("/user/alice", "alice", "alice"), ("/projects/bio", "bob", "bio")):
        await t.as_superuser("PUT", t.path(path), op="MKDIRS")
        await t.as_superuser("PUT", t.path(path), op="SETOWNER", owner=owner, group=group)
    await t.as_superuser("PUT", t.path("/tmp"), op="MKDIRS", permission="1777")


def message(body: dict[str, Any]) -> str:
    return body["RemoteException"]["message"]


async def test_a_write_into_another_users_folder_is_denied_with_the_namenodes_message(hdfs: Target) -> None:
    t = hdfs
    await tree(t)
    bio = t.path("/projects/bio")
    status, body = await t.op("PUT", f"{bio}/out", "alice", op="MKDIRS")
    assert status == 403 and body["RemoteException"]["exception"] == "AccessControlException"
    assert message(body) == f'Permission denied: user=alice, access=WRITE, inode="{bio}":bob:bio:drwxr-xr-x'
    assert not await t.exists(f"{bio}/out")
    # The CREATE is refused too, and nothing is written.
    status, body = await t.op("PUT", f"{bio}/f", "alice", op="CREATE")
    assert status == 403 and "user=alice, access=WRITE" in message(body)
    assert not await t.exists(f"{bio}/f")
    # Asking for a folder that exists checks only the way to it (/projects/bio is not alice's).
    assert (await t.op("PUT", bio, "alice", op="MKDIRS"))[0] == 200
    # The owner may; what they make is theirs, in the folder's group.
    assert (await t.op("PUT", f"{bio}/out", "bob", op="MKDIRS"))[0] == 200
    status, body = await t.op("GET", f"{bio}/out", "bob", data=None, op="GETFILESTATUS")
    assert (body["FileStatus"]["owner"], body["FileStatus"]["group"]) == ("bob", "bio")


async def test_group_bits_apply_to_members_and_reads_need_read(hdfs: Target) -> None:
    t = hdfs
    await tree(t)
    bio = t.path("/projects/bio")
    await t.op("PUT", bio, "bob", op="SETPERMISSION", permission="770")
    assert (await t.op("PUT", f"{bio}/c", "carol", op="MKDIRS"))[0] == 200  # in group bio
    status, body = await t.op("GET", bio, "alice", data=None, op="LISTSTATUS")
    assert status == 403
    assert message(body) == f'Permission denied: user=alice, access=READ_EXECUTE, inode="{bio}":bob:bio:drwxrwx---'
    # Below a folder alice cannot enter, even a status is refused (execute on the way).
    status, body = await t.op("GET", f"{bio}/c", "alice", data=None, op="GETFILESTATUS")
    assert status == 403 and "access=EXECUTE" in message(body)


async def test_the_sticky_bit_keeps_users_from_removing_each_others_entries(hdfs: Target) -> None:
    t = hdfs
    await tree(t)
    entry = t.path("/tmp/a")
    assert (await t.op("PUT", entry, "alice", op="MKDIRS"))[0] == 200
    status, body = await t.op("DELETE", entry, "bob", op="DELETE", recursive="true")
    assert status == 403 and message(body).startswith("Permission denied by sticky bit: user=bob")
    assert (await t.op("DELETE", entry, "alice", op="DELETE", recursive="true"))[1] == {"boolean": True}


async def test_only_the_owner_changes_a_mode_and_a_delete_needs_every_folder_open(hdfs: Target) -> None:
    t = hdfs
    await tree(t)
    d = t.path("/user/alice/d")
    await t.op("PUT", f"{d}/e", "alice", op="MKDIRS")
    await t.op("PUT", f"{d}/e/f", "alice", op="CREATE")
    status, body = await t.op("PUT", d, "bob", op="SETPERMISSION", permission="777")
    assert status == 403 and message(body) == f"Permission denied. user=bob is not the owner of inode={d}"
    # A sealed folder (555) cannot be deleted, even by its owner, until it is opened again.
    await t.op("PUT", f"{d}/e", "alice", op="SETPERMISSION", permission="555")
    status, body = await t.op("DELETE", d, "alice", op="DELETE", recursive="true")
    assert status == 403 and f'access=ALL, inode="{d}/e"' in message(body)
    assert await t.exists(f"{d}/e/f")
    await t.op("PUT", f"{d}/e", "alice", op="SETPERMISSION", permission="755")
    assert (await t.op("DELETE", d, "alice", op="DELETE", recursive="true"))[1] == {"boolean": True}
    status, body = await t.op("PUT", t.path("/user/alice"), "alice", op="SETOWNER", owner="bob")
    assert status == 403 and "non-super user cannot change owner" in message(body)


async def test_doas_acts_for_a_user_only_as_the_proxy_user_settings_allow(hdfs: Target) -> None:
    t = hdfs
    await tree(t)
    x, y = t.path("/user/alice/x"), t.path("/user/alice/y")
    status, body = await t.op("PUT", x, "pingo", op="MKDIRS", doas="alice")
    assert status == 200, body
    status, body = await t.op("GET", x, "pingo", data=None, op="GETFILESTATUS")
    assert body["FileStatus"]["owner"] == "alice"
    # bob is not in a group pingo may act for; carol's own proxy settings are empty.
    for caller, user in (("pingo", "bob"), ("carol", "alice")):
        status, body = await t.op("PUT", y, caller, op="MKDIRS", doas=user)
        assert status == 403 and body == {"RemoteException": {
            "exception": "AuthorizationException",
            "javaClassName": "org.apache.hadoop.security.authorize.AuthorizationException",
            "message": f"User: {caller} is not allowed to impersonate {user}",
        }}  # fmt: skip


async def test_with_permissions_off_nothing_is_checked(tmp_path: Path) -> None:
    e = await start_emulator(tmp_path / "hdfs")
    t = Target("emulator", e.namenode_url, "hdfs")
    try:
        await t.as_superuser("PUT", "/user/bob", op="MKDIRS")
        await t.as_superuser("PUT", "/user/bob", op="SETOWNER", owner="bob")
        assert (await t.op("PUT", "/user/bob/a", "alice", op="MKDIRS"))[0] == 200
    finally:
        await e.stop()
