"""The embedded store's catalogue (which collections a database has, which indexes a
collection has), read from SQLite's schema once and remembered until the schema changes.

neosqlite reads ``sqlite_master`` to learn whether a field is indexed (once per indexed
field, in every find, update and findAndModify that names one: about 1.2 times a
command) and to list the collections (every insert, about 0.3 times a command): a
quarter of a millisecond's SQL every few commands, for an answer that changes only when
the schema does (docs/performance.md, "The embedded store's CPU per command").

Each database's connection, as nx-27017's handler opens it, gets a ``Catalogue``: the two
answers, remembered, and forgotten whenever a statement that changes the schema is
compiled on that connection. SQLite asks the connection's authorizer about every action
of every statement it compiles (``set_authorizer``), and compiles a statement again
before running it if the schema changed since it was compiled, so no schema change on
the connection escapes it: ``createIndexes``, ``drop``, ``dropIndexes``, ``create``,
``renameCollection``, ``dropDatabase``, and a collection made by its first insert alike.
A change inside a transaction may still be rolled back (by the client, or by SQLite on
an error): until that transaction ends, the catalogue is read from SQLite, as before,
and remembered only once it has ended.

Only this process writes its SQLite files (the server holds the data directory's lock,
``shared.store.embedded_server``), and within it only these connections change their
schema; a connection nx-27017 closes and opens again gets a new, empty catalogue.
Imported by ``shared.store.embedded_server`` only, in the server's process.
"""

from __future__ import annotations

from typing import Any

from neosqlite._sqlite import sqlite3  # neosqlite's (pysqlite3 where installed): its constants
from neosqlite.collection.index_manager import IndexManager
from neosqlite.connection import Connection
from nx_27017.handler import NeoSQLiteHandler

CATALOGUE = "_pingo_catalogue"  # where a neosqlite Connection holds its Catalogue
# The authorizer's actions that change the schema (sqlite3_set_authorizer's codes).
SCHEMA_CHANGES = frozenset(
    getattr(sqlite3, f"SQLITE_{name}")
    for name in (
        "CREATE_INDEX",
        "CREATE_TABLE",
        "CREATE_TEMP_INDEX",
        "CREATE_TEMP_TABLE",
        "CREATE_TEMP_TRIGGER",
        "CREATE_TEMP_VIEW",
        "CREATE_TRIGGER",
        "CREATE_VIEW",
        "DROP_INDEX",
        "DROP_TABLE",
        "DROP_TEMP_INDEX",
        "DROP_TEMP_TABLE",
        "DROP_TEMP_TRIGGER",
        "DROP_TEMP_VIEW",
        "DROP_TRIGGER",
        "DROP_VIEW",
        "ALTER_TABLE",
        "CREATE_VTABLE",
        "DROP_VTABLE",
        "ATTACH",
        "DETACH",
    )
)


class Catalogue:
    """One connection's collection names and index names by collection, as last read."""

    def __init__(self, sql: sqlite3.Connection) -> None:
        self.sql = sql
        self.collections: list[str] | None = None
        self.indexes: dict[str, list[str]] = {}
        # The cursor's filter translations by shape (embedded_plans.py): they read the indexes.
        self.plans: dict[Any, Any] = {}
        # The schema changed inside the open transaction, which may yet be rolled back.
        self.changed_in_transaction = False

    def authorize(self, action: int, *_: Any) -> int:
        """The connection's authorizer: allows everything; forgets at a schema change."""
        if action in SCHEMA_CHANGES:
            self.collections = None
            self.indexes.clear()
            self.plans.clear()
            self.changed_in_transaction = True
        return sqlite3.SQLITE_OK

    def current(self) -> bool:
        """Whether what is remembered may be used (and what is read, remembered)."""
        if self.changed_in_transaction:
            if self.sql.in_transaction:
                return False
            self.changed_in_transaction = False  # committed or rolled back: forgotten since
        return True


def catalogue_of(connection: Any, sql: sqlite3.Connection) -> Catalogue | None:
    """``connection``'s catalogue, if it has one for ``sql`` (its connection's own)."""
    catalogue = connection.__dict__.get(CATALOGUE) if connection is not None else None
    if catalogue is None or catalogue.sql is not sql or not catalogue.current():
        return None
    return catalogue


def remember_catalogue() -> None:
    """Every database connection nx-27017's handler opens keeps its catalogue, as above."""
    opened = NeoSQLiteHandler._open_db_conn
    listed = Connection.list_collection_names
    indexed = IndexManager.list_indexes

    def _open_db_conn(self: NeoSQLiteHandler, db_name: str) -> Connection:
        connection = opened(self, db_name)
        catalogue = Catalogue(connection.db)
        connection.db.set_authorizer(catalogue.authorize)
        connection.__dict__[CATALOGUE] = catalogue
        return connection

    def list_collection_names(self: Connection) -> list[str]:
        catalogue = catalogue_of(self, self.db)
        if catalogue is None:
            return listed(self)
        if catalogue.collections is None:
            catalogue.collections = listed(self)
        return list(catalogue.collections)

    def list_indexes(self: IndexManager, as_keys: bool = False) -> Any:
        collection = self.collection
        catalogue = None if as_keys else catalogue_of(collection._database, collection.db)
        if catalogue is None:
            return indexed(self, as_keys)
        names = catalogue.indexes.get(collection.name)
        if names is None:
            names = catalogue.indexes[collection.name] = indexed(self, False)
        return list(names)

    NeoSQLiteHandler._open_db_conn = _open_db_conn  # type: ignore[method-assign]
    Connection.list_collection_names = list_collection_names  # type: ignore[method-assign]
    IndexManager.list_indexes = list_indexes  # type: ignore[method-assign,assignment]
