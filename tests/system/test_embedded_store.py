"""The embedded store commits each write command's documents together
(``shared/store/embedded_commits.py``): what a client sees of a write is what it saw when
each document was committed alone, on the real server over its socket."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pymongo import AsyncMongoClient, UpdateOne
from pymongo.errors import BulkWriteError

from shared.store.embedded import EmbeddedMongo


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[AsyncMongoClient]:
    server = EmbeddedMongo(tmp_path)
    c: AsyncMongoClient = AsyncMongoClient(await server.start())
    try:
        yield c
    finally:
        await c.close()
        server.stop()


async def test_a_write_of_many_documents_keeps_each_documents_outcome(client: AsyncMongoClient) -> None:
    things = client.pingo.things
    await things.insert_many([{"_id": i, "n": i} for i in range(300)])
    assert await things.count_documents({}) == 300

    # A duplicate key stops an ordered insert there: those before it stay written.
    with pytest.raises(BulkWriteError) as ordered:
        await things.insert_many([{"_id": 1000}, {"_id": 5}, {"_id": 1001}])
    assert ordered.value.details["nInserted"] == 1
    assert await things.find_one({"_id": 1000}) and not await things.find_one({"_id": 1001})
    # Unordered, every other document is written.
    with pytest.raises(BulkWriteError) as unordered:
        await things.insert_many([{"_id": 2000}, {"_id": 5}, {"_id": 2001}], ordered=False)
    assert unordered.value.details["nInserted"] == 2
    assert await things.find_one({"_id": 2001})

    # An update of many, and many updates in one command, each document written once.
    moved = await things.update_many({"n": {"$lt": 100}}, {"$set": {"moved": True}, "$push": {"log": "m"}})
    assert moved.modified_count == 100
    ops = [UpdateOne({"_id": i, "moved": True}, {"$inc": {"n": 1}}) for i in range(95, 105)]
    assert (await things.bulk_write(ops, ordered=False)).modified_count == 5
    assert await things.find_one({"_id": 99}) == {"_id": 99, "n": 100, "moved": True, "log": ["m"]}
    assert (await things.delete_many({"moved": True})).deleted_count == 100

    assert await things.count_documents({}) == 300 - 100 + 3
