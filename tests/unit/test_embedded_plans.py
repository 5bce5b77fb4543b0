"""The embedded store's filter translations reused by shape (``shared/store/
embedded_plans.py``): the same answers, rows and SQL (its values bound) as neosqlite
translating every filter, across values of one shape that neosqlite translates
differently, and across index changes."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import bson
import neosqlite
import pytest
from neosqlite.collection import Collection
from neosqlite.collection.index_manager import IndexManager
from neosqlite.collection.query_helper._sql_query_builder import SqlQueryBuilderMixin
from neosqlite.collection.sql_translator_unified import SQLTranslator
from nx_27017.handler import NeoSQLiteHandler

from shared.store import embedded_plans
from shared.store.embedded_catalogue import CATALOGUE, remember_catalogue
from shared.store.embedded_plans import reuse_translations, shape
from shared.store.embedded_server import remember_id_column
from tests.support.nx_handler import serve

DB = {"$db": "pingo"}
HEX = "0123456789abcdef01234567"  # an ObjectId's hex: neosqlite normalises it as an _id
DOCUMENTS = [
    {"_id": "a", "n": 1, "tag": "x", "state": "READY", "at": "2026-11-28T01:00:00", "parents": ["p", "q"],
     "k": 0, "m": 0, "flag": True},
    {"_id": HEX, "n": 2.5, "tag": ["x", "y"], "state": "DONE", "at": "later", "k": 1, "m": 0, "flag": None},
    {"_id": "b", "n": "1", "state": "READY", "k": 0, "m": 1, "id": 12},
    {"_id": "c", "n": None, "state": "NEW", "parents": ["q"], "id": "ab"},
]  # fmt: skip
# Filters of one shape with values neosqlite translates differently (a type, a string
# that reads as a date or is an ObjectId's hex, equal values, a list's length, null).
FILTERS: list[dict[str, Any]] = [
    {"n": 1}, {"n": 2.5}, {"n": "1"}, {"n": None}, {"n": True}, {"n": False}, {"n": 1},
    {"at": "2026-11-28T01:00:00"}, {"at": "later"}, {"at": "2026-11-28"}, {"at": "later"},
    {"_id": "a"}, {"_id": HEX}, {"_id": HEX.upper()}, {"_id": "not-hex-but-24-chars-xx!"}, {"_id": "b"},
    {"_id": {"$in": ["a", "b"]}}, {"_id": {"$in": ["a", None]}}, {"_id": {"$in": ["a", HEX]}}, {"_id": {"$in": ["c"]}},
    {"state": {"$in": ["READY"]}}, {"state": {"$in": ["DONE"]}}, {"state": {"$in": ["READY", None]}},
    {"state": {"$in": []}}, {"state": {"$in": ["NEW", "DONE"]}}, {"state": {"$nin": ["NEW"]}},
    {"k": 0, "m": 0}, {"k": 0, "m": 1}, {"k": 1, "m": 0}, {"k": 0, "m": 0},
    {"parents": {"$all": ["p"], "$size": 2}}, {"parents": {"$all": ["q"], "$size": 1}},
    {"flag": {"$exists": True}}, {"flag": {"$exists": False}}, {"flag": {"$ne": True}}, {"flag": {"$ne": None}},
    {"id": "ab"}, {"id": "12"}, {"id": 12}, {"id": "7"},
    {"n": {"$gt": 0}}, {"n": {"$gt": "0"}}, {"n": {"$lte": 2.5}}, {"n": {"$gte": 1, "$lt": 3}},
    {"_id": "a", "state": {"$in": ["READY", "DONE"]}}, {"_id": "b", "state": {"$in": ["DONE", "NEW"]}},
    {"state": "READY", "at": {"$lt": "2026-11-29T00:00:00"}}, {"state": "READY", "at": {"$lt": "zzz"}},
    {"n": bson.ObjectId()}, {"at": datetime.datetime(2026, 11, 28, 1)}, {"$or": [{"n": 1}, {"k": 1}]},
]  # fmt: skip
TAG = [{"tag": "x"}, {"tag": "y"}]


def _commands() -> list[dict[str, Any]]:
    commands: list[dict[str, Any]] = [{"insert": "things", "documents": DOCUMENTS, **DB}]
    for query in FILTERS:
        commands.append({"find": "things", "filter": query, **DB})
        commands.append({"count": "things", "query": query, **DB})
        commands.append({"update": "things", "updates": [{"q": query, "u": {"$inc": {"hits": 1}}}], **DB})
        commands.append({"findAndModify": "things", "query": query, "update": {"$inc": {"seen": 1}}, "new": True, **DB})
    for query in (*TAG, *TAG):  # an equality on a field, then on an index of it, then without again
        commands.append({"find": "things", "filter": query, **DB})
        commands.append({"update": "things", "updates": [{"q": query, "u": {"$inc": {"hits": 1}}}], **DB})
    commands.insert(-4, {"createIndexes": "things", "indexes": [{"key": {"tag": 1}, "name": "tag_1"}], **DB})
    commands += [
        {"dropIndexes": "things", "index": "tag_1", **DB},
        *({"find": "things", "filter": query, **DB} for query in TAG),
        {"delete": "things", "deletes": [{"q": {"state": {"$in": ["NEW"]}}, "limit": 0}], **DB},
        {"find": "things", "filter": {}, **DB},
    ]
    return commands


def _served(folder: Path, commands: list[dict[str, Any]]) -> tuple[list[bytes], list[list[str]], list[Any], int]:
    """Each command through nx-27017's handler: the encoded replies, each command's SQL
    (its values bound), the tables in the end, and how many plans were remembered."""
    handler = NeoSQLiteHandler("nx-27017.db", data_dir=str(folder), single_db_compat=False)
    replies: list[bytes] = []
    statements: list[list[str]] = []
    plans = 0
    for i, body in enumerate(commands):
        reply, ran = serve(handler, i, body)
        replies.append(reply)
        statements.append(ran)
        catalogue = handler.get_database("pingo").__dict__.get(CATALOGUE)
        plans = max(plans, len(catalogue.plans) if catalogue else 0)
    sql = handler.get_database("pingo").db
    tables = [sql.execute(f'SELECT * FROM "{t}" ORDER BY rowid').fetchall() for t in ("things",)]
    tables.append(sql.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall())
    handler.close_all()
    return replies, statements, tables, plans + len(embedded_plans._matches)


@pytest.fixture
def patched(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's catalogue and _id column remembered, as it serves; each restored after."""
    for owner, name in [
        (NeoSQLiteHandler, "_open_db_conn"),
        (neosqlite.Connection, "list_collection_names"),
        (IndexManager, "list_indexes"),
        (Collection, "_id_column"),
        (SQLTranslator, "translate_match"),
        (SqlQueryBuilderMixin, "_build_simple_where_clause"),
    ]:
        monkeypatch.setattr(owner, name, getattr(owner, name))
    monkeypatch.setattr(embedded_plans, "_matches", {})
    remember_catalogue()
    remember_id_column()


def test_filters_reused_by_shape_answer_store_and_run_what_neosqlite_does(tmp_path: Path, patched: None) -> None:
    """Finds, counts, updates and findAndModify of ~50 filters, many of one shape with
    values neosqlite translates differently, and an index made and dropped between two
    finds of one shape: the same replies, rows and statements with plans reused."""
    commands = _commands()
    translated = _served(tmp_path / "translated", commands)
    reuse_translations()
    reused = _served(tmp_path / "reused", commands)
    assert reused[0] == translated[0]  # the same answers...
    assert reused[2] == translated[2]  # ...the same rows and indexes...
    assert reused[1] == translated[1]  # ...by the same SQL, each value bound where it was
    assert reused[3] > 10 and translated[3] == 0  # and plans were reused
    # An equality on the indexed field was sargable, before and after it the array was tested.
    tag_finds = [ran[-1] for body, ran in zip(commands, reused[1], strict=True) if body.get("filter") == TAG[0]]
    assert ["EXISTS" in sql for sql in tag_finds] == [True, False, True]


def test_a_full_cache_is_emptied(tmp_path: Path, patched: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plans are bounded: a cache that is full is emptied before it takes another."""
    monkeypatch.setattr(embedded_plans, "BOUND", 3)
    reuse_translations()
    commands = [{"insert": "things", "documents": DOCUMENTS, **DB}]
    commands += [{"update": "things", "updates": [{"q": q, "u": {"$set": {"z": 1}}}], **DB} for q in FILTERS]
    _served(tmp_path, commands)
    assert 0 < len(embedded_plans._matches) <= 3


def test_a_shape_keeps_what_the_translation_branches_on() -> None:
    """Values of one type reuse a plan; a different type, a date-like or ObjectId-like
    string, a constant, a list's length or another order of fields do not; filters whose
    translation depends on more (``$or``, ``id``, ObjectIds, dates, documents) get none."""

    def key(query: dict[str, Any]) -> Any:
        shaped = shape(query)
        return shaped and shaped[0]

    assert key({"n": 1}) == key({"n": 7})
    assert key({"s": "a", "t": {"$in": ["b"]}}) == key({"s": "c", "t": {"$in": ["d"]}})
    different = [{"n": 1}, {"n": 1.0}, {"n": "1"}, {"n": True}, {"n": False}, {"n": None}, {"n": "2026-11-28"},
                 {"n": HEX}, {"n": {"$in": ["a"]}}, {"n": {"$in": ["a", "b"]}}, {"n": {"$in": ["a", None]}},
                 {"n": {"$gt": 1}}, {"m": 1}, {"n": 1, "m": 1}, {"m": 1, "n": 1}]  # fmt: skip
    assert len({key(q) for q in different}) == len(different)
    assert shape({"n": 1, "s": "a"}) == ((("n", "int"), ("s", ("s", False, False))), [1, "a"])
    unshaped = [{"$or": [{"n": 1}]}, {"id": "1"}, {"n": bson.ObjectId()}, {"n": datetime.datetime(2026, 1, 1)},
                {"n": {"k": 1}}, {"n": {"$regex": "a"}}, {"n": {"$in": [[1]]}}, {"n": {}}, {"n": b"x"},
                {"_id": {"$in": [str(i) for i in range(33)]}}]  # fmt: skip
    assert [shape(q) for q in unshaped] == [None] * len(unshaped)
