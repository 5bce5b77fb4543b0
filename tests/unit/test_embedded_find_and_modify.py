"""The embedded store's ``findAndModify`` answered from the document its SQL update read
back (``shared/store/embedded_find_and_modify.py``): the same answers and rows as
neosqlite's, one statement fewer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bson
import pytest
from neosqlite.collection.query_engine import QueryEngine
from neosqlite.collection.query_helper._sql_updates import SqlUpdatesMixin
from nx_27017.handler import NeoSQLiteHandler

from shared.store.embedded_find_and_modify import read_found_document_once
from tests.support.nx_handler import serve

DB = {"$db": "pingo"}
DOCUMENTS = [
    {"_id": "a", "state": "READY", "n": 1, "log": ["x"], "sub": {"k": 1}, "at": 1.5},
    {"_id": bson.ObjectId(), "state": "READY", "n": 2},
    {"_id": 7, "state": "RUNNING", "n": 3, "low": 0},
]
UPDATES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"_id": "a"}, {"$set": {"state": "SUBMITTED", "lease": 2.5}}),
    ({"_id": "a", "state": {"$in": ["SUBMITTED"]}}, {"$inc": {"n": 1}, "$set": {"at": 3.0}, "$min": {"low": -1}}),
    ({"_id": "a", "state": {"$in": ["SUBMITTED"]}}, {"$set": {"state": "RUNNING"}, "$push": {"log": "y"}}),
    ({"_id": 7}, {"$unset": {"low": ""}, "$max": {"n": 10}}),
    ({"state": "READY"}, {"$set": {"sub.k": 5, "new.deep": [1, {"z": None}]}}),
    ({"n": {"$gte": 2}}, {"$inc": {"n": 1}}),
    ({"_id": "none"}, {"$set": {"n": 0}}),
]


def _served(folder: Path, commands: list[dict[str, Any]]) -> tuple[list[bytes], list[Any], list[int]]:
    handler = NeoSQLiteHandler("nx-27017.db", data_dir=str(folder), single_db_compat=False)
    replies, counts = [], []
    for i, body in enumerate(commands):
        reply, ran = serve(handler, i, body)
        replies.append(reply)
        counts.append(len(ran))
    rows = list(handler.get_database("pingo").db.execute("SELECT * FROM things ORDER BY id"))
    handler.close_all()
    return replies, rows, counts


def test_a_find_and_modify_answers_the_same_from_the_document_its_update_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Updates that neosqlite runs in SQL (it reads the row back after), each with and
    without projections, on string, ObjectId and integer ``_id``s, and an ``_id`` changed
    in the document: the same replies and rows; those answered from the document the SQL
    update read back ran fewer statements."""
    commands: list[dict[str, Any]] = [{"insert": "things", "documents": DOCUMENTS, **DB}]
    for projection in (None, {"log": 0}, {"n": 1, "state": 1}, {"_id": 0, "n": 1}):
        for query, update in UPDATES:
            command = {"findAndModify": "things", "query": query, "update": update, "new": True, **DB}
            if projection is not None:
                command["fields"] = projection
            commands.append(command)
    changed = {"findAndModify": "things", "query": {"_id": "a"}, "update": {"$set": {"_id": "b"}}, "new": True, **DB}
    moved = {**changed, "update": {"$set": {"n": 5}}}  # the document's _id is no longer its row's
    commands += [changed, moved, {**moved, "query": {"_id": "b"}}, {**changed, "query": {"_id": "b"}}]
    monkeypatch.setattr(QueryEngine, "find_one_and_update", QueryEngine.find_one_and_update)
    monkeypatch.setattr(SqlUpdatesMixin, "_perform_enhanced_sql_update", SqlUpdatesMixin._perform_enhanced_sql_update)
    read_again = _served(tmp_path / "again", commands)
    read_found_document_once()
    read_back = _served(tmp_path / "back", commands)
    assert read_back[0] == read_again[0]  # the same answers...
    assert read_back[1] == read_again[1]  # ...and rows
    # The document read back, in hand: no second read (the query, its catalogue reads, the row).
    fewer = [again - back for again, back in zip(read_again[2], read_back[2], strict=True)]
    assert min(fewer) == 0 and sum(f > 0 for f in fewer) >= 12
