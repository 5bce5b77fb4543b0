"""The embedded store's changes to nx-27017 (``shared/store/embedded_*.py``, applied by
``embedded_server.patch_nx_27017``): each write command's documents committed together,
inserts without copies, the catalogue remembered, and the rest; each answers and stores
what nx-27017's own path does, on its handler or on the real server over its socket."""

from __future__ import annotations

import copy
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import bson
import neosqlite
import pytest
from neosqlite.collection import Collection
from neosqlite.collection.cursor import Cursor
from neosqlite.collection.index_manager import IndexManager
from neosqlite.collection.query_engine import QueryEngine
from neosqlite.collection.query_helper._sql_updates import SqlUpdatesMixin
from nx_27017.handler import NeoSQLiteHandler
from nx_27017.utils import convert_neo_to_bson_objectids
from nx_27017.wire_protocol import ResponseBuilder
from pymongo import AsyncMongoClient, UpdateOne
from pymongo.errors import BulkWriteError

from shared.store.embedded import EmbeddedMongo
from shared.store.embedded_catalogue import remember_catalogue
from shared.store.embedded_commits import CommittingHandler
from shared.store.embedded_find_and_modify import read_found_document_once
from shared.store.embedded_replies import reply_bson
from shared.store.embedded_server import remember_id_column, share_projected_fields
from tests.support.nx_handler import serve


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


async def test_the_servers_catalogue_follows_its_collections_and_indexes(client: AsyncMongoClient) -> None:
    """The server remembers its catalogue (``shared/store/embedded_catalogue.py``): what
    a client makes and drops is listed at once. (A rename is tested on the handler below:
    PyMongo sends it to the ``admin`` database, where nx-27017 renames a collection of
    ``admin``'s own.)"""
    db = client.pingo
    await db.things.insert_one({"_id": 1, "n": 1})
    assert await db.list_collection_names() == ["things"]
    assert await db.things.find_one({"n": 1}) == {"_id": 1, "n": 1}
    await db.things.create_index("n")
    made = set(await db.things.index_information()) - {"_id_"}
    assert len(made) == 1  # nx-27017 names it its own way
    assert await db.things.find_one({"n": 1}) == {"_id": 1, "n": 1}
    await db.things.drop_index(made.pop())
    assert set(await db.things.index_information()) == {"_id_"}
    await db.others.insert_one({"_id": 2})
    assert sorted(await db.list_collection_names()) == ["others", "things"]
    await db.things.drop()
    assert await db.list_collection_names() == ["others"]
    assert await db.things.find_one({"n": 1}) is None


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


def _served_traced(handler: NeoSQLiteHandler, commands: list[dict[str, Any]]) -> tuple[list[bytes], list[str], list]:
    """Each command through ``handler``: its encoded replies, the SQL statements it ran
    (bar its reads of SQLite's catalogue), and every table and index stored in the end."""
    replies, statements = [], []
    for i, body in enumerate(commands):
        reply, ran = serve(handler, i, body)
        replies.append(reply)
        statements += ran
    sql = handler.get_database("pingo").db
    schema = sql.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    tables = [name for kind, name, _ in schema if kind == "table" and name != "sqlite_sequence"]
    rows = [(name, sql.execute(f'SELECT * FROM "{name}" ORDER BY rowid').fetchall()) for name in tables]
    handler.close_all()
    return replies, [s for s in statements if "sqlite_master" not in s], [schema, rows]


def test_the_catalogue_is_remembered_until_the_schema_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded server remembers each database's collections and each collection's
    indexes (``shared/store/embedded_catalogue.py``) rather than reading SQLite's
    catalogue at each find, update and insert: every command that changes them is seen,
    so it answers and stores what nx-27017 does, and runs the same SQL (a find after an
    index is made uses it, after it is dropped no longer does)."""
    db = {"$db": "pingo"}
    find = {"find": "things", "filter": {"n": 1, "tag": "x"}, **db}
    bump = {"update": "things", "updates": [{"q": {"n": 1}, "u": {"$inc": {"m": 1}}}], **db}
    listed = {"listCollections": 1, "nameOnly": True, **db}
    commands: list[dict[str, Any]] = [
        {"insert": "things", "documents": [{"_id": 1, "n": 1, "tag": "x"}, {"_id": 2, "n": 2, "tag": ["x"]}], **db},
        find, bump, listed,
        {"createIndexes": "things", "indexes": [{"key": {"n": 1}, "name": "n_1"}], **db},
        find, bump,
        {"createIndexes": "things", "indexes": [{"key": {"tag": 1, "n": 1}, "name": "tag_1_n_1"}], **db},
        find, {"listIndexes": "things", **db},
        {"dropIndexes": "things", "index": "n_1", **db},
        find, bump, {"listIndexes": "things", **db},
        {"insert": "others", "documents": [{"_id": "o", "n": 1}], **db},
        listed,
        {"renameCollection": "pingo.others", "to": "pingo.renamed", **db},
        listed, {"find": "renamed", "filter": {"n": 1}, **db},
        {"create": "made", **db},
        listed,
        {"drop": "things", **db},
        listed, find,
        {"insert": "things", "documents": [{"_id": 3, "n": 1, "tag": "x"}], **db},
        find, bump, listed, {"listIndexes": "things", **db},
        {"createIndexes": "things", "indexes": [{"key": {"tag": 1}, "name": "tag_1"}], **db},
        find,
        {"dropDatabase": 1, **db},
        listed, find,
        {"insert": "things", "documents": [{"_id": 4, "n": 1, "tag": "x"}], **db},
        listed, find, bump,
    ]  # fmt: skip

    read = _served_traced(_fresh_handler(tmp_path / "read"), commands)
    monkeypatch.setattr(NeoSQLiteHandler, "_open_db_conn", NeoSQLiteHandler._open_db_conn)
    monkeypatch.setattr(neosqlite.Connection, "list_collection_names", neosqlite.Connection.list_collection_names)
    monkeypatch.setattr(IndexManager, "list_indexes", IndexManager.list_indexes)
    remember_catalogue()
    remembered = _served_traced(_fresh_handler(tmp_path / "remembered"), commands)
    assert remembered[0] == read[0]  # the same answers...
    assert remembered[2] == read[2]  # ...the same rows, tables and indexes...
    assert remembered[1] == read[1]  # ...by the same statements
    # An indexed equality is sargable; the same on a field without an index also tests arrays.
    # An equality on an indexed field is sargable; on another it also matches in arrays.
    finds = [s for s in read[1] if s.startswith("SELECT id, _id, data as data FROM things WHERE") and "$.tag" in s]
    n_indexed = ["WHERE json_extract(data, '$.n') = 1 AND" in s for s in finds]
    tag_indexed = ["AND json_extract(data, '$.tag') = 'x'" in s for s in finds]
    assert n_indexed[:2] == [False, True]  # the find after the index was made used it
    assert tag_indexed[-2:] == [True, False]  # and none after the database was dropped


def test_a_schema_change_rolled_back_is_not_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A collection or index made inside a transaction and rolled back (by a client, or by
    SQLite on an error) is not remembered: until the transaction ends the catalogue is
    read from SQLite."""
    monkeypatch.setattr(NeoSQLiteHandler, "_open_db_conn", NeoSQLiteHandler._open_db_conn)
    monkeypatch.setattr(neosqlite.Connection, "list_collection_names", neosqlite.Connection.list_collection_names)
    monkeypatch.setattr(IndexManager, "list_indexes", IndexManager.list_indexes)
    remember_catalogue()
    handler = _fresh_handler(tmp_path)
    database = handler.get_database("pingo")
    things = database["things"]
    assert database.list_collection_names() == ["things"] and things.list_indexes() == []
    database.db.execute("BEGIN")
    things.create_index("n")
    database["others"]
    assert things.list_indexes() == ["idx_things_n"]
    assert sorted(database.list_collection_names()) == ["others", "things"]
    database.db.execute("ROLLBACK")
    assert database.list_collection_names() == ["things"] and things.list_indexes() == []
    things.create_index("n")  # outside a transaction: remembered at once
    assert things.list_indexes() == ["idx_things_n"]
    handler.close_all()


def test_a_find_and_modify_answers_the_same_reading_its_document_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded server's ``findAndModify`` that returns the new document reads the
    document it found once, not twice (``shared/store/embedded_find_and_modify.py``): the
    same answers and rows as nx-27017's, whichever way neosqlite finds the document
    (a filter SQL holds, or one it does not: ``$in``, ``$all``, ``$size``)."""
    db = {"$db": "pingo"}
    things = [
        {"_id": "a", "state": "READY", "n": 1, "log": ["x"], "sub": {"k": 1}, "big": {"deep": [1, 2]}},
        {"_id": "b", "state": "RUNNING", "n": 2, "parents": ["p", "q"], "at": datetime.datetime(2026, 11, 27, 23)},
        {"_id": bson.ObjectId(), "state": "READY", "n": 3, "items": [{"k": 1, "v": 0}, {"k": 2, "v": 0}]},
    ]
    moves: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({"_id": "a", "state": {"$in": ["READY", "SUBMITTED"]}}, {"$set": {"state": "SUBMITTED"}, "$inc": {"n": 1}}),
        ({"_id": "a", "state": {"$in": ["READY"]}}, {"$set": {"state": "LOST"}}),  # guarded: no longer READY
        ({"_id": "b", "parents": {"$all": ["p"], "$size": 2}}, {"$pull": {"parents": "p"}, "$push": {"log": "m"}}),
        ({"_id": "b"}, {"$unset": {"at": ""}, "$set": {"sub.k": 5}}),
        ({"state": {"$in": ["READY", "SUBMITTED"]}}, {"$push": {"log": {"$each": ["y", "z"], "$slice": -2}}}),
        ({"n": {"$gte": 2}, "state": {"$ne": "GONE"}}, {"$max": {"n": 10}, "$min": {"low": 0}}),
        ({"_id": "c", "state": {"$in": ["NEW"]}}, {"$set": {"n": 0}}),  # none: no upsert
        ({"items.k": {"$in": [2]}}, {"$set": {"items.$.v": 9}}),
    ]
    commands: list[dict[str, Any]] = [{"insert": "things", "documents": things, **db}]
    for new in (True, False):
        for projection in (None, {"big": 0}, {"n": 1, "state": 1}):
            for query, update in moves:
                command = {"findAndModify": "things", "query": query, "update": update, "new": new, **db}
                if projection is not None:
                    command["fields"] = projection
                commands.append(command)
    commands.append({"findAndModify": "things", "query": {"n": {"$gt": 0}}, "sort": {"n": -1},
                     "update": {"$inc": {"n": 1}}, "new": True, **db})  # fmt: skip
    for query in ({"_id": "d", "state": {"$in": ["NEW"]}}, {"_id": "e", "state": "NEW"}):
        commands.append({"findAndModify": "things", "query": query, "update": {"$set": {"n": 7}},
                         "upsert": True, "new": True, **db})  # fmt: skip

    twice = _served(_fresh_handler(tmp_path / "twice"), commands)
    monkeypatch.setattr(QueryEngine, "find_one_and_update", QueryEngine.find_one_and_update)
    monkeypatch.setattr(SqlUpdatesMixin, "_perform_enhanced_sql_update", SqlUpdatesMixin._perform_enhanced_sql_update)
    read_found_document_once()
    once = _served(_fresh_handler(tmp_path / "once"), commands)
    assert once[0] == twice[0]  # the same answers...
    assert once[1] == twice[1]  # ...and the same rows
