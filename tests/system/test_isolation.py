"""What a local job (or another local user) can reach: no callback secret in any job
folder, private job folders, read-only committed datasets that can still be deleted, an
embedded database on a private Unix socket only, and a callback endpoint that tells
nothing about which actions exist. And what two local instances share: a store only when
they have the same data directory, and no ports."""

from __future__ import annotations

import asyncio
import concurrent.futures.thread  # noqa: F401 - asyncio.to_thread's, imported before a child drops to nobody
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pymongo import AsyncMongoClient

from shared.storage.local import LocalStorage
from shared.store.embedded import EmbeddedMongo
from tests.support.dev import Dev
from tests.support.system import Api
from tests.support.workflows import ROOT, shell_action
from tests.system.test_callbacks import callback

NOBODY = 65534

# Run as a job: everything it can find in the jobs folder, its own process and its parent.
SNOOP = r"""
import json, os, pathlib, sys
out = pathlib.Path(sys.argv[-1])
jobs = pathlib.Path.cwd().parent
needle = "?sec" + "ret="  # not spelt out: this script is in its own argv (/proc/self/cmdline)
seen, leaks = [], []
for f in sorted(jobs.rglob("*")):
    if f.is_file():
        try:
            data = f.read_bytes()
        except OSError:
            continue
        seen.append(str(f.relative_to(jobs)))
        if needle.encode() in data:
            leaks.append(str(f))
for pid in ("self", str(os.getppid())):
    for name in ("environ", "cmdline"):
        try:
            if needle.encode() in open(f"/proc/{pid}/{name}", "rb").read():
                leaks.append(f"/proc/{pid}/{name}")
        except OSError:
            pass
fds = {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if fd != "3"}
out.mkdir(parents=True)
(out / "part-00000").write_text(json.dumps({"seen": seen, "leaks": leaks, "fds": fds}))
"""


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


async def test_a_job_finds_no_callback_secret_and_job_folders_are_private(system: Api) -> None:
    body = {
        "name": "snoop",
        "actions": [
            shell_action(1, "iso-a"),
            shell_action(2, "iso-b"),
            {"id": 3, "name": "snoop", "type": "SHELL", "command": ["python3", "-c", SNOOP], "parentActions": [1, 2]},
        ],
    }
    wf = await system.run(body)
    assert wf["state"] == "SUCCEEDED", [(a["localId"], a["state"], a.get("error")) for a in wf["actions"]]
    report = json.loads((Path(wf["actions"][2]["outputPath"]) / "part-00000").read_text())
    # It did look: the statuses and logs of the jobs before it were there to read.
    assert len([f for f in report["seen"] if f.endswith("/status.json")]) >= 2
    assert report["leaks"] == []
    assert report["fds"]["0"] == "/dev/null" and set(report["fds"]) == {"0", "1", "2"}

    secrets = [(await system.db.actions.find_one({"_id": a["id"]}))["secret"] for a in wf["actions"]]
    jobs = system.settings.jobs_dir
    assert mode(jobs) == 0o700
    for job in (p for p in jobs.iterdir() if not p.name.startswith(".")):
        assert mode(job) == 0o700, job
        for f in job.iterdir():
            assert mode(f) == 0o600, f
            data = f.read_bytes()
            assert not any(s.encode() in data for s in secrets), f"{f} holds a callback secret"


def exercise_sealing(root: Path) -> list[str]:
    """Commit, try to write, force a replacement, delete: what went wrong (as this user)."""
    problems = []
    storage = LocalStorage(root)
    final = root / ("d" * 64)

    async def commit(attempt_no: int, content: str, replace: bool = False) -> bool:
        attempt = Path(storage.attempt_path(str(final), "wf-iso.1", attempt_no))
        await storage.prepare(str(attempt))
        (attempt / "sub").mkdir(parents=True)
        (attempt / "part-00000").write_text(content)
        (attempt / "sub" / "part-00001").write_text(content)
        return await storage.commit(str(attempt), str(final), replace=replace)

    async def run() -> None:
        assert await commit(1, "first")
        for p in (final, final / "sub", final / "part-00000", final / "sub" / "part-00001"):
            if mode(p) & 0o222:
                problems.append(f"{p} is writable: {oct(mode(p))}")
        for target, how in ((final / "part-00000", "a"), (final / "sub" / "new", "w"), (final / "new", "w")):
            try:
                with open(target, how) as f:
                    f.write("poison")
                problems.append(f"could write {target}")
            except PermissionError:
                pass
        if os.access(final / "part-00000", os.W_OK):
            problems.append("os.access says the committed file is writable")
        assert await commit(2, "second", replace=True)
        if (final / "part-00000").read_text() != "second":
            problems.append("forced replacement did not replace the sealed dataset")
        if mode(final / "part-00000") & 0o222:
            problems.append("the replacement is writable")
        if leftovers := [p.name for p in root.iterdir() if ".replaced." in p.name]:
            problems.append(f"replaced dataset left behind: {leftovers}")
        await storage.delete(str(final))
        if final.exists():
            problems.append("delete left the sealed dataset")

    asyncio.run(run())
    return problems


def test_committed_dataset_is_read_only_yet_replaceable_and_deletable() -> None:
    """As an unprivileged user (root ignores permission bits, so a root run drops to nobody
    in a forked child): a committed dataset cannot be written; forced replacement and
    deletion still remove it."""
    base = Path(tempfile.mkdtemp(prefix="pingo-seal-"))
    try:
        if os.geteuid() != 0:
            assert exercise_sealing(base / "datasets") == []
            return
        os.chown(base, NOBODY, NOBODY)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            status = 1
            try:
                os.close(read)
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                os.write(write, json.dumps(exercise_sealing(base / "datasets")).encode())
                status = 0
            except BaseException as exc:
                os.write(write, json.dumps([f"{type(exc).__name__}: {exc}"]).encode())
            finally:
                os._exit(status)
        os.close(write)
        with os.fdopen(read, "rb") as r:
            out = r.read()
        _, status = os.waitpid(pid, 0)
        assert json.loads(out or b'["no report"]') == [] and os.waitstatus_to_exitcode(status) == 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def test_stored_datasets_are_read_only_and_the_dataset_manager_still_deletes_them(system: Api) -> None:
    wf = await system.run({"name": "ro", "actions": [shell_action(1, "ro-mid"), shell_action(2, "ro-leaf", [1])]})
    assert wf["state"] == "SUCCEEDED"
    for a in wf["actions"]:
        out = Path(a["outputPath"])
        for p in [out, *out.rglob("*")]:
            assert mode(p) & 0o222 == 0, f"{p} is writable: {oct(mode(p))}"
        if os.geteuid() != 0:  # root ignores the bits; the test above covers it as nobody
            assert not os.access(out / "part-00000", os.W_OK)
    mid = wf["actions"][0]
    await system.db.datasets.update_one({"_id": mid["hash"]}, {"$set": {"state": "STORED_TO_DELETE"}})
    async with asyncio.timeout(30):
        while (await system.db.datasets.find_one({"_id": mid["hash"]}))["state"] != "DELETED":
            await asyncio.sleep(0.1)
    assert not Path(mid["outputPath"]).exists()


def listening_tcp_inodes() -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in list(f)[1:]:
                cols = line.split()
                if cols[3] == "0A":  # LISTEN
                    inodes.add(cols[9])
    return inodes


def socket_inodes(pid: int) -> set[str]:
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[len("socket:[") : -1])
    return out


def unix_listeners() -> dict[str, str]:
    """inode -> path of every listening Unix socket."""
    out = {}
    with open("/proc/net/unix") as f:
        for line in list(f)[1:]:
            cols = line.split()
            if len(cols) >= 8 and cols[5] == "01":  # SS_UNCONNECTED: a listener
                out[cols[6]] = cols[7]
    return out


async def test_embedded_server_listens_on_a_private_unix_socket_only(tmp_path: Path) -> None:
    long_dir = tmp_path / ("x" * 60) / ("y" * 60)
    servers = [EmbeddedMongo(tmp_path / "a"), EmbeddedMongo(long_dir)]
    extra: list[EmbeddedMongo] = []
    try:
        urls = [await s.start() for s in servers]
        a, b = servers
        assert a.proc is not None and b.proc is not None and urls[0] != urls[1]
        assert a.socket == (tmp_path / "a" / "mongo" / "nx-27017.sock").resolve()
        # Too long for sun_path: a private folder under the temp dir, named from the data dir.
        assert b.socket.parent.parent == Path(tempfile.gettempdir()) and len(os.fsencode(b.socket)) <= 107
        for s in servers:
            assert stat.S_ISSOCK(os.lstat(s.socket).st_mode)
            assert mode(s.socket) == 0o600 and mode(s.socket.parent) == 0o700 and mode(s.data_dir) == 0o700
            mine = socket_inodes(s.proc.pid)
            assert not mine & listening_tcp_inodes(), "the embedded server listens on TCP"
            assert str(s.socket) in {unix_listeners().get(i) for i in mine}
            for f in s.data_dir.glob("*.db"):
                assert mode(f) & 0o077 == 0, f

        # PyMongo works through it, and two data dirs are two databases.
        ca, cb = AsyncMongoClient(urls[0]), AsyncMongoClient(urls[1])
        try:
            await ca.pingo.things.insert_one({"_id": 1, "in": "a"})
            assert await ca.pingo.things.find_one({"_id": 1}) == {"_id": 1, "in": "a"}
            assert await cb.pingo.things.find_one({"_id": 1}) is None
        finally:
            await ca.close()
            await cb.close()

        # A second process on the same data dir shares the server.
        same = EmbeddedMongo(tmp_path / "a")
        extra.append(same)
        assert await same.start() == urls[0] and same.proc is None

        # A killed server leaves its socket file behind: it does not block a restart. (Nothing
        # else watches this data dir now: each EmbeddedMongo restarts a server it sees gone.)
        assert a.proc is not None
        same.stop()
        os.kill(a.proc.pid, signal.SIGKILL)
        a.proc.wait()
        a.stop()
        assert a.socket.exists()
        again = EmbeddedMongo(tmp_path / "a")
        extra.append(again)
        t0 = time.monotonic()
        assert await again.start() == urls[0] and again.proc is not None
        assert time.monotonic() - t0 < 20
        client = AsyncMongoClient(urls[0])
        try:
            assert await client.pingo.things.find_one({"_id": 1}) == {"_id": 1, "in": "a"}
        finally:
            await client.close()
    finally:
        for s in [*servers, *extra]:
            s.stop()
        if (tmp := servers[1].socket.parent).is_relative_to(tempfile.gettempdir()):
            shutil.rmtree(tmp, ignore_errors=True)


async def test_unknown_action_and_wrong_secret_get_the_same_answer(system: Api) -> None:
    wf = await system.run({"name": "cb-same", "actions": [shell_action(1, "cb-same")]})
    aid = wf["actions"][0]["id"]
    wrong = await callback(system, aid, secret="guess", jobId="x", status="SUCCEEDED")
    unknown = await callback(system, f"{wf['id']}.2", secret="guess", jobId="x", status="SUCCEEDED")
    # The same answer but for the path asked (which the caller knows); the secret never echoed.
    assert wrong[0] == unknown[0] == 403
    assert {**wrong[1], "instance": None} == {**unknown[1], "instance": None}
    assert wrong[1]["detail"] == "wrong secret" and "guess" not in json.dumps([wrong, unknown])


async def test_an_action_that_never_ran_takes_no_callback(system: Api) -> None:
    body = {"name": "cb-reused", "actions": [shell_action(1, "cb-reused")]}
    assert (await system.run(body))["state"] == "SUCCEEDED"
    again = await system.run(body)
    reused = again["actions"][0]
    assert reused["state"] == "REUSED"
    doc = await system.db.actions.find_one({"_id": reused["id"]})
    assert doc["secret"] is None
    for query in ({"secret": "None"}, {"secret": ""}, {"secret": "null"}, {}):
        status, body = await callback(system, reused["id"], **query, status="SUCCEEDED")
        assert (status, body["detail"], body["instance"]) == (403, "wrong secret", f"/callback/{reused['id']}")
    assert (await system.db.actions.find_one({"_id": reused["id"]}))["history"] == doc["history"]


async def test_committed_dataset_on_hdfs_is_sealed_and_still_deletable(tmp_path: Path) -> None:
    """On WebHDFS (the emulator, which records SETPERMISSION without enforcing it): folders
    555 and files 444 after commit; deletion and forced replacement still work."""
    from hadoop_emulator import start_emulator
    from shared.hadoop.webhdfs import WebHdfs
    from shared.storage.webhdfs import WebHdfsStorage

    emu = await start_emulator(tmp_path / "hdfs")
    storage = WebHdfsStorage(WebHdfs(emu.namenode_url, "pingo"), "/pingo/datasets")
    hdfs = storage.hdfs
    final = "/pingo/datasets/" + "d" * 64

    async def commit(attempt_no: int, content: bytes, replace: bool = False) -> bool:
        attempt = storage.attempt_path(final, "wf-iso.1", attempt_no)
        await storage.prepare(attempt)
        await hdfs.create(f"{attempt}/part-00000", content)
        await hdfs.create(f"{attempt}/sub/part-00001", content)
        return await storage.commit(attempt, final, replace=replace)

    async def permissions() -> dict[str, str]:
        return {
            p: (await hdfs.status(p))["permission"]
            for p in (final, f"{final}/sub", f"{final}/part-00000", f"{final}/sub/part-00001")
        }

    sealed = {final: "555", f"{final}/sub": "555", f"{final}/part-00000": "444", f"{final}/sub/part-00001": "444"}
    try:
        assert await commit(1, b"first")
        assert await permissions() == sealed
        assert await commit(2, b"second", replace=True)
        assert await hdfs.open(f"{final}/part-00000") == b"second" and await permissions() == sealed
        assert [s["pathSuffix"] for s in await hdfs.list("/pingo/datasets") if ".replaced." in s["pathSuffix"]] == []
        await storage.delete(final)
        assert await hdfs.status(final) is None
    finally:
        await storage.close()
        await emu.stop()


async def test_a_shared_embedded_server_serves_others_until_they_are_done(tmp_path: Path) -> None:
    """The process that started a data dir's server stops it; others still connected keep
    it (it stops once they are done), and a server that dies is started again by a process
    still using it."""
    first, second = EmbeddedMongo(tmp_path), EmbeddedMongo(tmp_path)
    started: list[EmbeddedMongo] = [first, second]
    client: AsyncMongoClient | None = None
    try:
        url = await first.start()
        assert await second.start() == url and second.proc is None
        client = AsyncMongoClient(url, serverSelectionTimeoutMS=20_000)
        await client.pingo.things.insert_one({"_id": 1})
        server = first.proc
        assert server is not None
        t0 = time.monotonic()
        first.stop()  # returns once the server says it serves others: no wait, no kill
        assert time.monotonic() - t0 < 5 and server.poll() is None
        assert (first.data_dir / "nx-27017.lingering").read_text() == str(server.pid)
        assert await client.pingo.things.find_one({"_id": 1}) == {"_id": 1}
        await client.close()
        client = None
        second.stop()
        assert await asyncio.to_thread(server.wait, 10) == 0  # its last user gone, it stopped by itself
        assert not first.socket.exists() and not (first.data_dir / "nx-27017.lingering").exists()

        # Killed under a process that still uses it: that process starts it again.
        third, fourth = EmbeddedMongo(tmp_path), EmbeddedMongo(tmp_path)
        started += [third, fourth]
        url = await third.start()
        await fourth.start()
        killed = third.proc
        assert killed is not None and fourth.proc is None
        client = AsyncMongoClient(url, serverSelectionTimeoutMS=20_000)
        assert await client.pingo.things.find_one({"_id": 1}) == {"_id": 1}
        os.kill(killed.pid, signal.SIGKILL)
        await asyncio.to_thread(killed.wait)
        assert await client.pingo.things.find_one({"_id": 1}) == {"_id": 1}  # PyMongo reconnected
        assert any(s.proc is not None and s.proc.poll() is None for s in (third, fourth))
    finally:
        if client is not None:
            await client.close()
        for s in started:
            s.stop()


async def test_two_pingo_dev_with_different_data_dirs_never_share_a_store(tmp_path: Path) -> None:
    """Each data dir, its own embedded server and store; the first one's exit leaves the
    second unharmed; a third on a port already taken is refused (the same data dir twice,
    sharing a server: the test above)."""
    a, b = Dev(tmp_path, "a", tmp_path / "data-a"), Dev(tmp_path, "b", tmp_path / "data-b")
    try:
        for d in (a, b):
            d.start()
        await asyncio.gather(a.up(), b.up())
        taken = Dev(tmp_path, "taken", tmp_path / "data-c", b.port)
        wf_id, refused = await asyncio.gather(a.submit("iso-dev-a"), asyncio.to_thread(taken.start().wait, 60))
        assert not await b.has(wf_id) and await a.has(wf_id)
        sockets = [d.data_dir / "mongo" / "nx-27017.sock" for d in (a, b)]
        assert all(s.exists() for s in sockets)
        # Refused before it starts anything, saying why.
        assert refused == 1 and f"127.0.0.1:{b.port} (gateway)" in taken.log.read_text()
        assert "already in use" in taken.log.read_text() and not taken.data_dir.exists()

        assert await a.stop() == 0
        wf = await b.run("iso-dev-b")
        assert wf["state"] == "SUCCEEDED", wf
        assert "Traceback" not in b.log.read_text()
        assert await b.stop() == 0
        assert not any(s.exists() for s in sockets)  # each server stopped with its instance
    finally:
        for d in (a, b):
            if d.proc is not None and d.proc.poll() is None:
                d.proc.kill()


def test_the_embedded_server_of_a_killed_process_stops_once_unused(tmp_path: Path) -> None:
    """A process killed outright cannot stop the server it started: the server notices that
    its parent is gone and stops by itself once no one is connected (no server left behind)."""
    start = (
        "import asyncio, sys; from pathlib import Path; from shared.store.embedded import EmbeddedMongo\n"
        "async def main():\n"
        "    await EmbeddedMongo(Path(sys.argv[1])).start()\n"
        "    print('up', flush=True)\n"
        "    await asyncio.sleep(3600)\n"
        "asyncio.run(main())\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", start, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )  # fmt: skip
    try:
        assert owner.stdout is not None and owner.stdout.readline() == "up\n"
        sock = EmbeddedMongo(tmp_path).socket
        assert sock.exists()
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + 10
        while sock.exists():  # the server removes its socket as it stops
            assert time.monotonic() < deadline, "the server outlived its killed owner"
            time.sleep(0.1)
    finally:
        if owner.poll() is None:
            owner.kill()
