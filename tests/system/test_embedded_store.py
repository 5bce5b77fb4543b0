"""The embedded store commits each write command's documents together
(``shared/store/embedded_commits.py``): what a client sees of a write is what it saw when
each document was committed alone, on the real server over its socket."""

from __future__ import annotations

import copy
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import bson
import pytest
from neosqlite.collection import Collection
from neosqlite.collection.cursor import Cursor
from nx_27017.handler import NeoSQLiteHandler
from nx_27017.utils import convert_neo_to_bson_objectids
from nx_27017.wire_protocol import ResponseBuilder
from pymongo import AsyncMongoClient, UpdateOne
from pymongo.errors import BulkWriteError

from shared.store.embedded import EmbeddedMongo
from shared.store.embedded_commits import CommittingHandler
from shared.store.embedded_replies import reply_bson
from shared.store.embedded_server import remember_id_column, share_projected_fields


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


def _insert_everywhere(commands: list[dict[str, Any]], data: Path) -> tuple[list[bytes], list[tuple]]:
    """Each insert command through nx-27017's own handler and through the embedded
    server's, as the server receives them (decoded from BSON): their encoded replies, and
    the rows each stored."""
    out = []
    for name, handler_class in (("nx", NeoSQLiteHandler), ("ours", CommittingHandler)):
        handler = handler_class("nx-27017.db", data_dir=str(data / name), single_db_compat=False)
        replies = []
        for i, (body, documents) in enumerate(commands):
            sections = [("body", bson.decode(bson.encode(body)))]
            if documents:
                sections.append(("payload", {"documents": [bson.decode(bson.encode(d)) for d in documents]}))
            _, reply = handler.handle_insert({"request_id": i, "sections": sections})
            replies.append(ResponseBuilder.build_op_msg_reply(request_id=i, response_to=i, document=reply))
        rows = list(handler.get_database("pingo").db.execute("SELECT id, _id, data FROM things ORDER BY id"))
        handler.close_all()
        out.append((replies, rows))
    assert out[0][0] == out[1][0]  # the same answers...
    assert out[0][1] == out[1][1]  # ...and the same rows
    return out[1]


def test_an_insert_stores_and_answers_what_nx_27017_does(tmp_path: Path) -> None:
    """The embedded server inserts a command's documents without copying them
    (``shared/store/embedded_inserts.py``): the same rows and answers as nx-27017's own
    insert, whatever the documents hold."""
    oid, when = bson.ObjectId(), datetime.datetime(2026, 11, 27, 19, 50, 1, 123000)
    body = {"insert": "things", "ordered": True, "$db": "pingo"}
    documents = [
        {"_id": oid, "ref": bson.ObjectId(), "refs": [bson.ObjectId(), {"deep": [bson.ObjectId()]}]},
        {"_id": "wf-1.2", "at": when, "big": bson.Int64(2**40), "f": 1.5, "text": "é ü \u2603", "empty": []},
        {"_id": 7, "raw": b"\x00\x01bytes", "uuid": bson.Binary(b"0123456789abcdef", 4), "nested": {"b": [b"x"]}},
        {"_id": {"wf": "w", "ref": bson.ObjectId()}, "none": None, "flag": False, "id": 0},
        {"n": 1, "_id": "last-key-first"},
    ]
    replies, rows = _insert_everywhere(
        [
            (body, documents),
            # A document inside the command's body, not in a payload.
            ({**body, "documents": [{"_id": "in-body", "x": [1, {"y": 2}]}]}, []),
            # A duplicate key: an ordered insert stops there; an unordered one goes on.
            (body, [{"_id": "dup-1"}, {"_id": 7}, {"_id": "dup-2"}]),
            ({**body, "ordered": False}, [{"_id": "dup-3"}, {"_id": 7}, {"_id": "dup-4"}]),
            # What JSON cannot hold: NaN (not valid JSON for SQLite), a type neosqlite cannot encode.
            ({**body, "ordered": False}, [{"_id": "nan", "x": float("nan")}, {"_id": "re", "x": bson.Regex("a")}]),
        ],
        tmp_path,
    )
    stored = {row[1] for row in rows}
    assert {str(oid), "wf-1.2", "7", "in-body", "dup-1", "dup-3", "dup-4"} <= stored
    assert "dup-2" not in stored and "nan" not in stored and "re" not in stored
    assert b"writeErrors" in replies[2] and b"writeErrors" in replies[4]


def _fresh_handler(folder: Path) -> NeoSQLiteHandler:
    """nx-27017's own handler on an empty data folder."""
    return NeoSQLiteHandler("nx-27017.db", data_dir=str(folder), single_db_compat=False)


def _served(handler: NeoSQLiteHandler, commands: list[dict[str, Any]]) -> tuple[list[bytes], list[tuple]]:
    """Each command through ``handler`` as the server receives it (decoded from BSON): the
    encoded replies, and the rows stored in the end."""
    replies = []
    for i, body in enumerate(commands):
        msg = {"request_id": i, "sections": [("body", bson.decode(bson.encode(body)))]}
        handle = handler.handle_insert if "insert" in body else handler.handle_command
        _, reply = handle(msg)
        replies.append(ResponseBuilder.build_op_msg_reply(request_id=i, response_to=i, document=reply))
    rows = list(handler.get_database("pingo").db.execute("SELECT id, _id, data FROM things ORDER BY id"))
    handler.close_all()
    return replies, rows


def test_queries_by_id_answer_the_same_with_the_id_column_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded server remembers that a collection keeps ``_id`` in its own column
    (``remember_id_column`` in ``shared/store/embedded_server.py``) rather than asking
    SQLite at each query: the same answers and rows as nx-27017 asking every time."""
    oid = bson.ObjectId()
    db = {"$db": "pingo"}
    commands = [
        {"insert": "things", "documents": [{"_id": oid, "n": 1}, {"_id": "a", "n": 2, "tags": ["x"]}], **db},
        {"find": "things", "filter": {"_id": oid}, **db},
        {"find": "things", "filter": {"_id": {"$in": ["a", oid]}}, "sort": {"n": -1}, **db},
        {"findAndModify": "things", "query": {"_id": "a", "n": 2}, "update": {"$set": {"n": 3}}, "new": True, **db},
        {"update": "things", "updates": [{"q": {"_id": oid}, "u": {"$push": {"tags": "y"}}}], **db},
        {"update": "things", "updates": [{"q": {"_id": "b"}, "u": {"$set": {"n": 9}}, "upsert": True}], **db},
        {"find": "things", "filter": {"_id": {"$gt": "a"}}, **db},
        {"count": "things", "query": {"_id": {"$ne": "a"}}, **db},
        {"delete": "things", "deletes": [{"q": {"_id": "b"}, "limit": 1}], **db},
        {"find": "things", "filter": {}, "projection": {"n": 1}, **db},
    ]

    asked = _served(_fresh_handler(tmp_path / "asked"), commands)
    # Restored after the test: the change is the server process's, for all its collections.
    monkeypatch.setattr(Collection, "_id_column", Collection._id_column)
    remember_id_column()
    assert _served(_fresh_handler(tmp_path / "remembered"), commands) == asked


def test_finds_with_a_projection_answer_the_same_from_a_shallow_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded server projects a find's documents from a shallow copy rather than
    neosqlite's deep one (``share_projected_fields`` in ``shared/store/embedded_server.py``):
    the same answers, whatever the projection."""
    db = {"$db": "pingo"}
    things = [
        {"_id": "a", "n": 1, "big": {"deep": [1, {"x": bson.ObjectId()}]}, "log": ["m"], "sub": {"k": 1, "j": 2}},
        {"_id": bson.ObjectId(), "n": 2, "at": datetime.datetime(2026, 11, 27, 20, 1), "big": None},
    ]
    projections = [
        {"big": 0, "log": 0},
        {"big": 0, "_id": 0},
        {"n": 1, "sub": 1},
        {"n": 1, "_id": 0},
        {"sub.k": 1},
        {"sub.k": 0},
        {"n": True, "big": False},
        {"n": 1.0},
        {"missing": 0},
        {"m": "$n"},
    ]
    commands: list[dict[str, Any]] = [{"insert": "things", "documents": things, **db}]
    for projection in projections:
        commands.append({"find": "things", "filter": {}, "projection": projection, **db})
        commands.append(
            {"findAndModify": "things", "query": {"_id": "a"}, "update": {"$inc": {"n": 1}}, "new": True,
             "fields": projection, **db}
        )  # fmt: skip

    deep = _served(_fresh_handler(tmp_path / "deep"), commands)
    monkeypatch.setattr(Cursor, "_apply_projection", Cursor._apply_projection)
    share_projected_fields()
    assert _served(_fresh_handler(tmp_path / "shallow"), commands) == deep


def test_a_reply_is_encoded_as_nx_27017_encodes_it() -> None:
    """The embedded server encodes a reply in one pass of the BSON encoder
    (``shared/store/embedded_replies.py``): the same bytes as nx-27017's rebuild and encode,
    for the values the rebuild converts and for the fields named ``id`` it makes 64-bit."""
    from decimal import Decimal

    from neosqlite.objectid import ObjectId as NeoObjectId

    doc = {"_id": NeoObjectId(), "refs": [NeoObjectId(), {"deep": (1, 2)}], "sum": Decimal("1.50"), "n": 3}
    replies: list[dict[str, Any]] = [
        {"ok": 1, "cursor": {"id": 0, "ns": "pingo.things", "firstBatch": [doc, {"_id": "a"}]}},
        {"ok": 1, "cursor": {"id": 10**12 + 3, "ns": "pingo.things", "firstBatch": [doc]}},
        {"ok": 1, "value": {**doc, "sub": {"id": 7}}},
        {"ok": 1, "n": 2, "insertedIds": [NeoObjectId(), "x"]},
        {"ok": 1, "nModified": 0, "writeErrors": [{"index": 0, "code": 11000, "errmsg": "UNIQUE"}]},
    ]
    # A field named "id" that equals 0, wherever it is: nx-27017 makes it an Int64.
    for zero in (0, False, 0.0, -0.0, Decimal(0), bson.Int64(0), 1, "0", None):
        replies.append({"ok": 1, "value": {"_id": "z", "id": zero, "sub": [{"id": zero}]}})
        replies.append({"ok": 1, "cursor": {"id": 0, "firstBatch": [{"id": zero, "text": "\x10id\x00"}]}})
    for reply in replies:
        nx = bson.encode(convert_neo_to_bson_objectids(copy.deepcopy(reply)))
        assert reply_bson(reply) == nx, reply
