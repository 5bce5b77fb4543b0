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

And an insert's documents are not printed when nobody reads them: nx-27017's insert
handler formats every section of the command (each document, in full) into a debug line
before its logger is asked whether debug is on: 3 ms for 250 actions, a tenth of a
second of the store's CPU for a 10,000-action plan (docs/performance.md, "A big workflow").
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from typing import Any

from nx_27017.handler import NeoSQLiteHandler, _msg_db_name

Reply = tuple[int, dict[str, Any]]
# The commands that may write many documents; ``findAndModify`` writes one at most.
MANY_WRITES = frozenset({"insert", "update", "delete"})
# nx-27017's logger (its handler's debug lines).
SERVER_LOG = logging.getLogger("nx_27017")


class Unprinted(list):  # type: ignore[type-arg]
    """A command's sections, iterated as the list they are; formatted as their count only."""

    def __repr__(self) -> str:
        return f"<{len(self)} sections>"


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
        if not SERVER_LOG.isEnabledFor(logging.DEBUG):
            msg = {**msg, "sections": Unprinted(msg["sections"])}
        return self._at_once(msg, super().handle_insert)

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
