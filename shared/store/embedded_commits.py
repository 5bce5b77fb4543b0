"""The embedded store's command handler: nx-27017's, with each write command committed
at once.

nx-27017 runs SQLite in autocommit mode, so a command that writes many documents (an
insert of 250 actions, an update with one statement per action, an ``update_many`` over
a workflow) commits each document on its own: every commit appends to the write-ahead
log each page the document touched, its table's and every index's. A big workflow's
plan and kill are mostly that (docs/performance.md, "A big workflow"). Here a write
command's documents are committed together, in one SQLite transaction: the same
statements, in the same order, with the same per-document errors (a duplicate key is
still a ``writeErrors`` entry and the documents before it stay written, as MongoDB
does), and the command still answered only once it is committed.

A command inside a client's own transaction (a session's ``startTransaction``) is left
to it. Imported by ``shared.store.embedded_server`` only, in the server's process.

And an insert command is nx-27017's, step by step, with each document stored by
``shared.store.embedded_inserts`` rather than copied three times first (and without
nx-27017's debug line of the whole command, formatted whether or not debug is on: 3 ms for
250 actions); docs/performance.md, "The embedded store's CPU per command".
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from neosqlite.collection.type_utils import validate_session
from nx_27017.handler import NeoSQLiteHandler, _bulk_write_error, _msg_db_name

from shared.store.embedded_inserts import insert_document

Reply = tuple[int, dict[str, Any]]
# The commands that may write many documents; ``findAndModify`` writes one at most.
MANY_WRITES = frozenset({"insert", "update", "delete"})
# An insert command's fields that are not documents to insert (nx-27017's list).
NOT_DOCUMENTS = frozenset({"$db", "insert", "ordered", "writeConcern", "lsid"})


def writes_many(msg: dict[str, Any]) -> bool:
    """Whether a parsed OP_MSG is an insert, update or delete command (a command's name is
    its body's first key: ``findAndModify`` has an ``update`` too)."""
    for kind, doc in msg.get("sections", ()):
        if kind == "body" and isinstance(doc, dict):
            return next(iter(doc), None) in MANY_WRITES
    return False


class CommittingHandler(NeoSQLiteHandler):
    """nx-27017's handler; each insert, update and delete command in one transaction."""

    def handle_insert(self, msg: dict[str, Any]) -> Reply:
        return self._at_once(msg, self._insert)

    def _insert(self, msg: dict[str, Any]) -> Reply:
        """nx-27017's insert handler (its ``handle_insert``, in the same steps and with the
        same replies), each document inserted by ``insert_document`` rather than copied
        three times first; a GridFS collection's insert is left to nx-27017."""
        request_id = msg["request_id"]
        command_doc: dict[str, Any] | None = None
        payload_docs: list[dict[str, Any]] = []
        for kind, doc in msg["sections"]:
            if kind == "body":
                command_doc = doc
            elif kind == "payload_docs":
                payload_docs.extend(doc)
            elif kind == "payload":
                for value in doc.values():
                    if isinstance(value, list):
                        payload_docs.extend(value)
                    elif isinstance(value, dict):
                        payload_docs.append(value)
        if not command_doc:
            return request_id, {"ok": 0, "errmsg": "No command document"}
        coll_name = command_doc.get("insert") or next(
            (k for k in command_doc if k not in NOT_DOCUMENTS and not k.startswith("$")), None
        )
        if coll_name and self._is_gridfs_collection(coll_name):
            return super().handle_insert(msg)
        db_name = command_doc.pop("$db") if "$db" in command_doc else "test"
        db = self.get_database(db_name)
        session = self._get_or_create_session(command_doc, db, db_name)
        if not coll_name:
            return request_id, {"ok": 0, "errmsg": "No collection specified"}
        coll = db[coll_name]
        if coll_name not in db.list_collection_names():
            coll.create()
        documents = payload_docs
        for key, value in command_doc.items():
            if key == "documents" and isinstance(value, list):
                documents.extend(value)
            elif key not in NOT_DOCUMENTS and not key.startswith("$") and isinstance(value, dict):
                documents.append(value)
        self._apply_write_concern(db, db_name, command_doc.get("writeConcern"))
        if not documents:
            return request_id, {"ok": 1, "n": 0}
        ordered = command_doc.get("ordered", True)
        inserted_ids: list[Any] = []
        write_errors: list[dict[str, Any]] = []
        for index, document in enumerate(documents):
            try:
                validate_session(session, coll._database)
                inserted_ids.append(insert_document(coll.db, coll.name, document))
            except Exception as exc:
                write_errors.append(_bulk_write_error(exc, index))
                if ordered:
                    break
        response: dict[str, Any] = {"ok": 1, "n": len(inserted_ids), "insertedIds": inserted_ids}
        if write_errors:
            response["writeErrors"] = write_errors
        return request_id, response

    def handle_command(self, msg: dict[str, Any]) -> Reply:
        if writes_many(msg):
            return self._at_once(msg, super().handle_command)
        return super().handle_command(msg)

    def _at_once(self, msg: dict[str, Any], handle: Callable[[dict[str, Any]], Reply]) -> Reply:
        name = _msg_db_name(msg)
        # The database's own lock (reentrant), held by the handler too: no other command
        # runs on this connection while the transaction is open.
        with self._lock_for(name):
            sql = self.get_database(name).db
            if sql.in_transaction:  # a client's transaction: its own
                return handle(msg)
            try:
                sql.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:  # the file is locked by another writer: as before
                return handle(msg)
            try:
                reply = handle(msg)
            except BaseException:
                if sql.in_transaction:
                    sql.execute("COMMIT")  # what was written before the failure, as before
                raise
            if sql.in_transaction:
                try:
                    sql.execute("COMMIT")
                except sqlite3.Error:
                    sql.execute("ROLLBACK")
                    raise
            return reply
