"""The emulator's WebHDFS driven by code nobody here wrote: HdfsCLI (``hdfs`` on PyPI), a
widely used client of the real NameNode. It follows the NameNode's redirects to the
DataNode, parses the real JSON shapes and turns RemoteExceptions into its own errors;
whatever it cannot read, the emulator answers differently from Hadoop."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hdfs import HdfsError, InsecureClient

from hadoop_emulator import start_emulator


@pytest.fixture
async def client(tmp_path: Path):
    emu = await start_emulator(tmp_path / "hdfs")
    yield InsecureClient(emu.namenode_url, user="pingo")
    await emu.stop()


def call(client: InsecureClient, method: str, *args, **kwargs):
    # HdfsCLI is synchronous (requests): off the loop that serves the emulator.
    return asyncio.to_thread(getattr(client, method), *args, **kwargs)


async def test_write_read_list_and_status(client: InsecureClient) -> None:
    await call(client, "makedirs", "/data/in", permission="750")
    await call(client, "write", "/data/in/a.txt", data=b"hello world", overwrite=False)

    def read() -> bytes:
        with client.read("/data/in/a.txt") as reader:
            return reader.read()

    assert await asyncio.to_thread(read) == b"hello world"
    assert await call(client, "list", "/data/in") == ["a.txt"]
    status = await call(client, "status", "/data/in/a.txt")
    assert status["type"] == "FILE" and status["length"] == 11 and status["owner"] == "pingo"
    assert (await call(client, "status", "/data/in"))["permission"] == "750"
    summary = await call(client, "content", "/data")
    assert summary["length"] == 11 and summary["fileCount"] == 1 and summary["directoryCount"] == 2
    checksum = await call(client, "checksum", "/data/in/a.txt")
    assert checksum["length"] == 28 and checksum["algorithm"]


async def test_rename_delete_and_walk(client: InsecureClient) -> None:
    await call(client, "makedirs", "/w/x/y")
    await call(client, "write", "/w/x/y/f", data=b"1")
    await call(client, "rename", "/w/x", "/w/z")
    walk = await asyncio.to_thread(lambda: list(client.walk("/w")))  # a generator of requests: iterated off the loop
    walked = [(path, sorted(dirs), sorted(files)) for path, dirs, files in walk]
    assert walked == [("/w", ["z"], []), ("/w/z", ["y"], []), ("/w/z/y", [], ["f"])]
    assert await call(client, "delete", "/w", recursive=True) is True
    assert await call(client, "delete", "/w", recursive=True) is False  # already gone: false, no error
    assert await call(client, "status", "/w", strict=False) is None


async def test_remote_errors_reach_the_client_as_hadoop_sends_them(client: InsecureClient) -> None:
    with pytest.raises(HdfsError, match="File does not exist: /missing"):
        await call(client, "status", "/missing")
    await call(client, "write", "/f", data=b"x")
    with pytest.raises(HdfsError) as exc:
        await call(client, "write", "/f", data=b"y", overwrite=False)
    assert exc.value.exception == "FileAlreadyExistsException"
    await call(client, "makedirs", "/d/e")
    with pytest.raises(HdfsError) as exc:
        await call(client, "delete", "/d", recursive=False)
    assert exc.value.exception == "PathIsNotEmptyDirectoryException"
