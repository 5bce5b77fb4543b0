"""One catalogue, one storage (docs/planning.md): a process set for another storage than
the catalogue describes is refused at start, and ``pingo dev``'s port-conflict message
says to use a data folder of its own; the reconcile sweep holds back when the storage
looks unmounted, and still marks a few missing datasets LOST (issue 24, point 1)."""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pymongo import AsyncMongoClient

from hadoop_emulator import start_emulator
from shared.config import Settings
from shared.errors import CannotStart
from shared.runtime import Context
from shared.storage.identity import StorageIdentity
from shared.storage.local import remove_tree
from shared.store.catalogue import StorageMismatch, bind_storage, recorded_storage
from shared.store.client import connect
from shared.store.embedded import EmbeddedMongo
from tests.support.dev import Dev
from tests.support.net import free_port
from tests.support.system import Api, make_settings
from tests.support.workflows import shell_action

HELD, HOLDS = "pingo_reconcile_held", "pingo_reconcile_holds_total"


def chain(prefix: str, n: int) -> dict[str, Any]:
    return {"name": prefix, "actions": [shell_action(i, f"{prefix}-{i}", [i - 1] if i > 1 else []) for i in
                                        range(1, n + 1)]}  # fmt: skip


async def states(db: Any) -> dict[str, str]:
    return {d["_id"]: d["state"] async for d in db.datasets.find({}, {"state": 1})}


async def test_a_process_set_for_another_storage_is_refused_and_marks_nothing_lost(tmp_path: Path) -> None:
    """The reported scenario: ``pingo dev`` (local storage) runs; the Hadoop walk-through
    is started in the same folder. On the taken port it is told to use another data
    folder; on another port it refuses to start, naming both storages, and not one of the
    local datasets is marked LOST (it used to mark every one, and recompute them all)."""
    emu = await start_emulator(tmp_path / "hdfs")
    data = tmp_path / "data"
    local = Dev(tmp_path, "local", data, free_port())
    hadoop_env = dict(
        PINGO_EXECUTOR="oozie", PINGO_STORAGE="webhdfs", PINGO_OOZIE_URL=emu.oozie_url,
        PINGO_WEBHDFS_URL=emu.namenode_url, PINGO_NAME_NODE=emu.hdfs_uri,
    )  # fmt: skip
    client = AsyncMongoClient(EmbeddedMongo(data).url, serverSelectionTimeoutMS=20_000)
    try:
        local.start()
        await local.up()
        wf = await local.run(chain("cat", 4))
        assert wf["state"] == "SUCCEEDED", wf
        db = client.pingo
        before = await states(db)
        assert sorted(before.values()) == ["LEAF", "STORED", "STORED", "STORED"]

        on_its_port = Dev(tmp_path, "same-port", data, local.port, **hadoop_env)
        on_its_port.start()
        assert await on_its_port.exited() == 1
        said = on_its_port.log.read_text()
        assert "already in use" in said and f"PINGO_DATA_DIR={data}-webhdfs" in said, said
        assert "PINGO_STORAGE=local" in said and "PINGO_STORAGE=webhdfs" in said, said

        elsewhere = Dev(tmp_path, "other-port", data, free_port(), **hadoop_env)
        elsewhere.start()
        status = await elsewhere.exited()
        said = elsewhere.log.read_text()
        assert status == 2, said
        assert "not starting" in said and "PINGO_DATA_DIR" in said, said
        assert f"PINGO_STORAGE=local, managed root {(data / 'datasets').resolve()}" in said, said
        assert f"PINGO_STORAGE=webhdfs on {emu.hdfs_uri}" in said, said

        assert await states(db) == before  # nothing LOST
        again = await local.run(chain("cat", 4))
        assert [a["decision"] for a in again["actions"]] == ["reuse"] * 4
        assert "Traceback" not in local.log.read_text()
    finally:
        await client.close()
        if local.proc is not None and local.proc.poll() is None:
            local.proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(local.proc.wait, 30)
        await emu.stop()


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str) -> Settings:
    return make_settings(tmp_path, mongo_url, reconcile_interval=0.5)


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def until(check: Any, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.2)


async def sweeps_held(n: int) -> None:
    """Wait until ``n`` more sweeps have held back."""
    start = sample(HOLDS)

    async def done() -> bool:
        return sample(HOLDS) >= start + n and sample(HELD) == 1.0

    await until(done)


async def test_the_sweep_holds_back_when_the_storage_looks_unmounted(system: Api, tmp_path: Path) -> None:
    """12 stored datasets; their storage root is swapped for an empty folder (a mount point
    with nothing mounted), then gone altogether: the sweep marks none LOST and raises
    ``pingo_reconcile_held``. Put back, all is as it was. Then two datasets really go
    missing: those two are LOST, as before."""
    wf = await system.run({"name": "many", "actions": [shell_action(i, f"many-{i}") for i in range(1, 13)]})
    assert wf["state"] == "SUCCEEDED", wf
    before = await states(system.db)
    assert len(before) == 12 and set(before.values()) == {"LEAF"}
    root = Path(system.settings.managed_dir)
    away = tmp_path / "unmounted"

    root.rename(away)
    root.mkdir()  # the empty mount point
    await sweeps_held(2)
    assert await states(system.db) == before
    root.rmdir()  # the root itself gone
    await sweeps_held(2)
    assert await states(system.db) == before

    away.rename(root)

    async def released() -> bool:
        return sample(HELD) == 0.0

    await until(released)
    assert await states(system.db) == before

    gone = sorted(before)[:2]
    for h in gone:
        remove_tree(Path((await system.db.datasets.find_one({"_id": h}))["path"]))

    async def both_lost() -> bool:
        return all(s == "LOST" for h, s in (await states(system.db)).items() if h in gone)

    await until(both_lost)
    after = await states(system.db)
    assert {h: s for h, s in after.items() if h not in gone} == {h: s for h, s in before.items() if h not in gone}
    assert sample(HELD) == 0.0


async def test_another_local_root_on_the_same_catalogue_is_refused(system: Api, tmp_path: Path) -> None:
    other = Settings(**{**system.settings.model_dump(), "managed_root": tmp_path / "elsewhere"})
    with pytest.raises(CannotStart) as refused:
        await Context.open(other)
    said = str(refused.value)
    assert f"managed root {system.settings.managed_dir}" in said and f"managed root {tmp_path / 'elsewhere'}" in said
    assert "PINGO_DATA_DIR" in said
    ctx = await Context.open(system.settings)  # the same settings: welcome
    await ctx.close()


async def test_two_starters_racing_on_an_empty_catalogue_agree(mongo_url: str) -> None:
    store = await connect(mongo_url, f"t_{uuid.uuid4().hex[:10]}")
    try:
        local = StorageIdentity("local", "/srv/pingo/datasets")
        hdfs = StorageIdentity("webhdfs", "/pingo/datasets", "hdfs://nn:8020", "http://nn:9870")
        results = await asyncio.gather(
            *(bind_storage(store, s, "the catalogue") for s in [local, hdfs] * 4), return_exceptions=True
        )
        winners = {r.key for r in results if isinstance(r, StorageIdentity)}
        assert len(winners) == 1
        (winner,) = winners
        assert all(isinstance(r, StorageMismatch) and r.recorded.key == winner for r in results
                   if not isinstance(r, StorageIdentity))  # fmt: skip
        assert (await recorded_storage(store)).key == winner
    finally:
        await store.client.drop_database(store.db.name)
        await store.close()


async def test_a_catalogue_without_a_record_adopts_the_first_starters_storage(mongo_url: str) -> None:
    store = await connect(mongo_url, f"t_{uuid.uuid4().hex[:10]}")
    try:
        await store.datasets.insert_one({"_id": "h", "hash": "h", "state": "STORED", "path": "/srv/pingo/datasets/h"})
        local = StorageIdentity("local", "/srv/pingo/datasets")
        assert await bind_storage(store, local, "the catalogue") == local
        assert (await store.db["catalogue"].find_one({"_id": "storage"}))["adopted"] is True
        assert await bind_storage(store, local, "the catalogue") == local
    finally:
        await store.client.drop_database(store.db.name)
        await store.close()


async def test_the_sweep_judges_only_its_own_storages_datasets(system: Api) -> None:
    """A dataset recorded on another storage is not looked for here, even if nothing is at
    its path here; one of this storage whose files are gone is LOST."""
    wf = await system.run({"name": "two", "actions": [shell_action(1, "own-1"), shell_action(2, "own-2")]})
    mine, theirs = [await system.db.datasets.find_one({"_id": a["hash"]}) for a in wf["actions"]]
    assert mine["storage"] == f"local:{system.settings.managed_dir}" == theirs["storage"]
    # As a dataset another storage committed would be recorded (a catalogue adopted by it).
    await system.db.datasets.update_one({"_id": theirs["_id"]}, {"$set": {"storage": "webhdfs:hdfs://nn:8020/x"}})
    for d in (mine, theirs):
        remove_tree(Path(d["path"]))

    async def mine_lost() -> bool:
        return (await system.db.datasets.find_one({"_id": mine["_id"]}))["state"] == "LOST"

    await until(mine_lost)
    await asyncio.sleep(1.5)  # a few more sweeps
    assert (await system.db.datasets.find_one({"_id": theirs["_id"]}))["state"] == "LEAF"
