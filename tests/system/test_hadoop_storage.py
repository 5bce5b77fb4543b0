"""Pingo's WebHDFS storage (shared/storage/webhdfs.py over shared/hadoop/webhdfs.py) on two
targets, the same tests for both: the emulator, and Apache Hadoop's real NameNode and
DataNode (``real_hadoop``, one mini cluster per session). The two-step CREATE through a
DataNode, commit by RENAME, sealing (folders 555, files 444) and opening again before a
delete, a user's job output sealed and removed through its owner (``doas``), refusals as
HDFS makes them, GETFILECHECKSUM integrity, a dataset deleted or changed behind Pingo's
back judged lost, and what the orphan sweep lists and removes (docs/hadoop-protocol.md,
"Emulator and real cluster")."""

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest

from shared.hadoop.webhdfs import HdfsError, WebHdfs
from shared.storage.base import ATTEMPTS_DIR
from shared.storage.verification import verify
from shared.storage.webhdfs import WebHdfsStorage
from tests.support.hadoop_targets import TARGETS, Target, make_target

PINGO = "pingo"


@pytest.fixture(params=TARGETS)
async def hdfs(request: pytest.FixtureRequest, tmp_path: Path):
    async for target in make_target(request.param, request, tmp_path):
        yield target


@pytest.fixture
async def storage(hdfs: Target):
    """Pingo's storage with its managed root owned by Pingo's user, as an operator sets it up."""
    root = hdfs.path("/pingo")
    await hdfs.as_superuser("PUT", root, op="MKDIRS")
    await hdfs.as_superuser("PUT", root, op="SETOWNER", owner=PINGO)
    store = WebHdfsStorage(WebHdfs(hdfs.namenode_url, PINGO), root)
    yield store
    await store.close()


async def write(fs: WebHdfs, folder: str, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        await fs.create(f"{folder}/{name}", data)


async def mode(fs: WebHdfs, path: str) -> str:
    st = await fs.status(path)
    assert st is not None, path
    return st["permission"]


async def test_create_goes_through_a_datanode_and_a_commit_renames_and_seals(storage: WebHdfsStorage) -> None:
    fs = storage.hdfs
    # The NameNode answers CREATE with a 307 to a DataNode, which takes the bytes.
    url = fs.url(f"{storage.root}/probe")
    async with aiohttp.ClientSession() as http:
        async with http.put(url, params={"op": "CREATE", "user.name": PINGO}, allow_redirects=False) as resp:
            assert resp.status == 307
            location = urlsplit(resp.headers["Location"])
    assert location.path == urlsplit(url).path and location.port != urlsplit(fs.base).port
    assert "op=CREATE" in location.query and "namenoderpcaddress=" in location.query
    assert await fs.status(f"{storage.root}/probe") is None  # the redirect alone creates nothing

    final = f"{storage.root}/datasets/d1"
    attempt = storage.attempt_path(final, "wf-1.1", 1)
    await storage.prepare(attempt)
    assert await mode(fs, f"{storage.root}/datasets/{ATTEMPTS_DIR}") == "1777"
    await write(fs, attempt, {"part-00000": b"a\t1\n", "sub/part-00001": b"b\t2\n", "_SUCCESS": b""})
    assert await fs.open(f"{attempt}/part-00000") == b"a\t1\n"  # OPEN follows its 307 too
    assert await storage.commit(attempt, final) is True
    assert await fs.status(attempt) is None
    assert [await mode(fs, p) for p in (final, f"{final}/sub")] == ["555", "555"]
    assert [await mode(fs, f"{final}/{f}") for f in ("part-00000", "sub/part-00001", "_SUCCESS")] == ["444"] * 3
    # Sealed: not even Pingo's own user may add a file (HDFS checks the owner's bits too).
    with pytest.raises(HdfsError) as refused:
        await fs.create(f"{final}/extra", b"x")
    assert refused.value.refusal and refused.value.exception == "AccessControlException"
    assert refused.value.message.startswith(f'Permission denied: user={PINGO}, access=WRITE, inode="{final}"')
    # A commit repeated after it was done is done; a second output for the same dataset loses.
    assert await storage.commit(attempt, final) is True
    late = storage.attempt_path(final, "wf-2.1", 1)
    await storage.prepare(late)
    await write(fs, late, {"part-00000": b"late\n"})
    assert await storage.commit(late, final) is False and await fs.status(late) is None
    # A forced recomputation replaces it: the new output in, the old one gone, sealed again.
    forced = storage.attempt_path(final, "wf-3.1", 1)
    await storage.prepare(forced)
    await write(fs, forced, {"part-00000": b"new\n"})
    assert await storage.commit(forced, final, replace=True) is True
    assert await fs.open(f"{final}/part-00000") == b"new\n" and await mode(fs, final) == "555"
    assert [e["pathSuffix"] for e in await fs.list(f"{storage.root}/datasets")] == [ATTEMPTS_DIR, "d1"]
    # A sealed dataset is opened, then deleted.
    await storage.delete(final)
    assert await fs.status(final) is None


async def test_a_users_job_output_is_sealed_and_removed_through_its_owner(
    hdfs: Target, storage: WebHdfsStorage
) -> None:
    fs = storage.hdfs
    alice = fs.acting_as("alice")  # alice's job writes its attempt in the shared staging folder
    final = f"{storage.root}/datasets/d2"
    attempt = storage.attempt_path(final, "wf-1.2", 1)
    await storage.prepare(attempt, user="alice")
    await write(alice, attempt, {"part-00000": b"alice's\n", "deep/part-00001": b"x\n"})
    assert (await fs.status(attempt))["owner"] == "alice"
    assert await storage.commit(attempt, final, user="alice") is True
    st = await fs.status(final)
    assert (st["owner"], st["permission"]) == ("alice", "555")  # sealed by its owner
    assert await mode(fs, f"{final}/deep/part-00001") == "444"
    # Pingo may not delete alice's sealed folders itself: it opens them through alice.
    with pytest.raises(HdfsError) as refused:
        await fs.delete(final, recursive=True)
    assert refused.value.refusal
    await storage.delete(final)
    assert await fs.status(final) is None

    # An unmanaged output is written as its owner, where the owner may write, and not sealed.
    home = hdfs.path("/user/alice")
    await hdfs.as_superuser("PUT", home, op="MKDIRS")
    await hdfs.as_superuser("PUT", home, op="SETOWNER", owner="alice")
    out = f"{home}/report"
    attempt = storage.attempt_path(out, "wf-1.3", 1)
    await storage.prepare(attempt, user="alice")
    await write(alice, attempt, {"part-00000": b"r\n"})
    assert await storage.commit(attempt, out, user="alice") is True
    st = await fs.status(out)
    assert (st["owner"], st["permission"]) == ("alice", "755")
    # bob is not a user Pingo may act for (hadoop.proxyuser.pingo.groups): HDFS refuses, finally.
    with pytest.raises(HdfsError) as refused:
        await storage.prepare(storage.attempt_path(hdfs.path("/user/bob/out"), "wf-1.4", 1), user="bob")
    assert refused.value.refusal and refused.value.status == 403
    assert refused.value.message == "User: pingo is not allowed to impersonate bob"


async def test_checksums_and_a_dataset_changed_or_deleted_behind_pingos_back(
    hdfs: Target, storage: WebHdfsStorage
) -> None:
    fs = storage.hdfs
    docs = {}
    for name in ("same-1", "same-2"):
        final = f"{storage.root}/datasets/{name}"
        attempt = storage.attempt_path(final, f"wf.{name}", 1)
        await storage.prepare(attempt)
        await write(fs, attempt, {"part-00000": b"0123456789\n" * 100, "_SUCCESS": b""})
        assert await storage.commit(attempt, final)
        found = await storage.integrity(final, checksum=True)
        docs[name] = {"path": final, "size": found.size, "files": found.files, "checksum": found.checksum}
    assert docs["same-1"]["size"] == 1100 and docs["same-1"]["files"] == 2
    assert docs["same-1"]["checksum"] == docs["same-2"]["checksum"]  # content, not place or time
    # The file checksums Pingo's digest is made of, as HDFS computes them.
    # Its ``bytes`` are 32 (bytesPerCRC, crcPerBlock, the MD5, 4 zero bytes) where ``length`` says 28.
    part = await fs.checksum(f"{storage.root}/datasets/same-1/part-00000")
    assert (part["algorithm"], part["length"]) == ("MD5-of-0MD5-of-512CRC32C", 28)
    assert re.fullmatch("00000200" + "0" * 16 + "[0-9a-f]{32}" + "0" * 8, part["bytes"]), part
    assert await fs.checksum(f"{storage.root}/datasets/same-1/_SUCCESS") == {
        "algorithm": "MD5-of-0MD5-of-0CRC32", "length": 28,
        "bytes": "00000000" + "0" * 16 + "70bc8f4b72a86921468bf8e8441dce51" + "00000000",
    }  # fmt: skip
    # A file of several blocks (1 MB blocks here): the CRCs of a full block in the name.
    big = f"{storage.root}/datasets/big"
    status, _ = await hdfs.op("PUT", big, PINGO, data=bytes(range(256)) * 12288, op="CREATE", blocksize="1048576")
    assert status == 201
    assert (await fs.status(big))["blockSize"] == 1048576
    assert (await fs.checksum(big))["algorithm"] == "MD5-of-2048MD5-of-512CRC32C"
    for level in ("exists", "size", "checksum"):
        assert (await verify(storage, docs["same-1"], level)).ok
    # An administrator rewrites a file with other bytes of the same length: only the checksum sees it.
    victim = f"{storage.root}/datasets/same-1/part-00000"
    await hdfs.as_superuser("DELETE", victim, op="DELETE")
    status, _ = await hdfs.op("PUT", victim, hdfs.superuser, data=b"9876543210\n" * 100, op="CREATE")
    assert status == 201
    assert (await verify(storage, docs["same-1"], "size")).ok
    changed = await verify(storage, docs["same-1"], "checksum")
    assert (changed.ok, changed.problem) == (False, "checksum") and changed.found.size == 1100
    # ...and one deletes a whole dataset: missing, at every level.
    await hdfs.as_superuser("DELETE", docs["same-2"]["path"], op="DELETE", recursive="true")
    for level in ("exists", "size", "checksum"):
        gone = await verify(storage, docs["same-2"], level)
        assert (gone.ok, gone.problem) == (False, "missing")


async def test_what_the_orphan_sweep_lists_and_removes(storage: WebHdfsStorage) -> None:
    fs = storage.hdfs
    started = time.time()
    kept = f"{storage.root}/kept"
    attempt = storage.attempt_path(kept, "wf-1.1", 1)
    await storage.prepare(attempt)
    await write(fs, attempt, {"part-00000": b"k\n"})
    assert await storage.commit(attempt, kept)
    # An attempt a user's job left behind, with a folder it made read-only.
    orphan = storage.attempt_path(f"{storage.root}/never", "wf-2.1", 1)
    await storage.prepare(orphan, user="alice")
    alice = fs.acting_as("alice")
    await write(alice, orphan, {"ro/part-00000": b"o\n"})
    await alice._json("PUT", f"{orphan}/ro", "SETPERMISSION", permission="555")
    left = f"{ATTEMPTS_DIR}/{orphan.rsplit('/', 1)[1]}"
    entries = {e.name: e.mtime for e in await storage.list_root()}
    assert set(entries) == {"kept", left}
    assert all(started - 60 < mtime < time.time() + 60 for mtime in entries.values())  # seconds, not ms
    await storage.delete(f"{storage.root}/{left}")
    assert {e.name for e in await storage.list_root()} == {"kept"}
    assert await storage.usage() == 2
