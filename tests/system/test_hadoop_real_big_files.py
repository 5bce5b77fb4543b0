"""A dataset of a few hundred MB through Pingo's WebHDFS storage on Apache Hadoop's real
NameNode and DataNode (``real_hadoop``): a job's output of several HDFS blocks, written in a
stream (never whole in memory) into the attempt folder Pingo prepared, committed by RENAME
and sealed, its size and content checksum (GETFILECHECKSUM, computed by the DataNode from
its block checksums) recorded and verified, read back byte for byte, and judged lost once
HDFS's superuser deletes it behind Pingo's back (docs/hadoop-protocol.md, "Checksums").
The test prints how long each step took: the suite's budget (docs/testing.md) is why the
file is no bigger."""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from shared.hadoop.webhdfs import WebHdfs
from shared.storage.verification import verify
from shared.storage.webhdfs import WebHdfsStorage

pytestmark = pytest.mark.real_hadoop
MB = 2**20
SIZE = 300 * MB
CHUNK = 4 * MB
BLOCK = 128 * MB  # HDFS's default block size: the file spans three blocks
# A stream of hundreds of MB on a loaded 2-core machine: no total timeout, only one per read.
STREAM_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_read=120)


async def generated(size: int, seed: int, digest: hashlib._Hash) -> AsyncIterator[bytes]:
    """``size`` pseudo-random bytes (not compressible, every block different), ``CHUNK`` at a
    time, each also fed to ``digest``."""
    rng = random.Random(seed)
    left = size
    while left:
        chunk = rng.randbytes(min(CHUNK, left))
        digest.update(chunk)
        left -= len(chunk)
        yield chunk


async def stream_up(http: aiohttp.ClientSession, fs: WebHdfs, path: str, body: AsyncIterator[bytes]) -> None:
    """What a job does with its output: WebHDFS CREATE, the NameNode's 307, then the bytes
    streamed to the DataNode it names."""
    params = fs.params("CREATE", blocksize=BLOCK)
    async with http.put(fs.url(path), params=params, allow_redirects=False) as resp:
        assert resp.status == 307, await resp.text()
        location = resp.headers["Location"]
    async with http.put(location, data=body, headers={"Content-Type": "application/octet-stream"}) as resp:
        assert resp.status == 201, await resp.text()


async def stream_down(http: aiohttp.ClientSession, fs: WebHdfs, path: str) -> tuple[int, str]:
    """OPEN through the DataNode, read in chunks: the size and SHA-256 of what came back."""
    digest, size = hashlib.sha256(), 0
    async with http.get(fs.url(path), params=fs.params("OPEN")) as resp:
        assert resp.status == 200, await resp.text()
        async for chunk in resp.content.iter_chunked(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


async def test_a_dataset_of_hundreds_of_mb_is_committed_verified_read_back_and_found_lost(real_hadoop_cluster) -> None:
    cluster = real_hadoop_cluster
    storage = WebHdfsStorage(WebHdfs(cluster.webhdfs_url, cluster.hdfs_user), f"{cluster.hdfs_root}/big")
    fs = storage.hdfs
    timings: dict[str, float] = {}
    try:
        final = f"{storage.root}/datasets/big-1"
        attempt = storage.attempt_path(final, "wf-big.1", 1)
        await storage.prepare(attempt)
        written = hashlib.sha256()
        async with aiohttp.ClientSession(timeout=STREAM_TIMEOUT) as http:
            t0 = time.monotonic()
            await stream_up(http, fs, f"{attempt}/part-00000", generated(SIZE, 27, written))
            await fs.create(f"{attempt}/_SUCCESS", b"")
            timings["write"] = time.monotonic() - t0

            t0 = time.monotonic()
            assert await storage.commit(attempt, final)
            timings["commit"] = time.monotonic() - t0
            assert await fs.status(attempt) is None
            part = await fs.status(f"{final}/part-00000")
            assert (part["length"], part["permission"]) == (SIZE, "444")
            assert (await fs.status(final))["permission"] == "555"

            # What the commit records (size, files, content checksum), then the reconcile
            # sweep's check at each level.
            t0 = time.monotonic()
            found = await storage.integrity(final, checksum=True)
            timings["checksum"] = time.monotonic() - t0
            assert found is not None and (found.size, found.files) == (SIZE, 2)
            ck = await fs.checksum(f"{final}/part-00000")
            assert ck["algorithm"] == f"MD5-of-{BLOCK // 512}MD5-of-512CRC32C", ck
            doc = {"path": final, "size": found.size, "files": found.files, "checksum": found.checksum}
            for level in ("exists", "size", "checksum"):
                assert (await verify(storage, doc, level)).ok, level

            t0 = time.monotonic()
            assert await stream_down(http, fs, f"{final}/part-00000") == (SIZE, written.hexdigest())
            timings["read"] = time.monotonic() - t0

        # Behind Pingo's back: HDFS's superuser deletes the sealed dataset. Lost, at every level.
        assert cluster.webhdfs("DELETE", final, "DELETE", recursive="true")["boolean"] is True
        for level in ("exists", "size", "checksum"):
            gone = await verify(storage, doc, level)
            assert (gone.ok, gone.problem) == (False, "missing"), level
    finally:
        await storage.close()
    print(f"\n{SIZE // MB} MB on real HDFS: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
