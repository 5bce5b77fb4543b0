"""The embedded store's ``findAndModify`` that returns the new document: neosqlite's, with
the document it found read once rather than twice.

When neosqlite cannot write a filter as one SQL ``WHERE`` (an ``$in``, an ``$all`` or
``$size``: most of Pingo's guarded moves, ``{"_id": ..., "state": {"$in": [...]}}``), its
``find_one_and_update`` finds the document through a cursor, then reads that same
document again by its ``_id`` (the SQL query built, the row read, its JSON decoded) only
to hand it to the update as the document before it. Nothing is written between the two
reads (the command holds its database's lock) and the update copies the document before
changing anything (``_perform_python_update``) or only reads it (its SQL path), so the
first read serves. The document returned is still read after the update, as before.
About 0.1 ms of the store's CPU on five of a chain action's eight commands
(docs/performance.md, "The embedded store's CPU per command").

The document returned is read after the update once more, by a ``find_one`` (its query
built, its row read, its JSON decoded), unless the update already read it back: the
SQL path of an update (``$set``, ``$inc``, ``$min``... without ``$push``:
``_perform_enhanced_sql_update``) ends by reading the row it wrote and decoding it, the
same row's same text that ``find_one`` reads; that document then answers, projected by
the same cursor step. Only when the decoded text held the ``_id`` itself (a document
given its ``_id`` from the table's column has it last, and is read again), the ``_id``
is unchanged and no text score rides along. About a fifth of such a command's CPU.

Every other step (a filter SQL can hold, an upsert) is neosqlite's own, in its order;
a ``findAndModify`` that asks for the document before the update is left to neosqlite.
Imported by ``shared.store.embedded_server`` only, in the server's process.
"""

from __future__ import annotations

from typing import Any

from neosqlite.collection.jsonb_support import json_data_column
from neosqlite.collection.query_engine import QueryEngine
from neosqlite.collection.query_helper._sql_updates import SqlUpdatesMixin
from neosqlite.collection.query_helper.utils import build_upsert_base_document
from neosqlite.collection.type_utils import validate_session
from neosqlite.sql_utils import quote_table_name

READ_BACK = "_pingo_read_back"  # where a QueryHelper keeps the document its SQL update read back


def read_found_document_once() -> None:
    """``QueryEngine.find_one_and_update`` as described above."""
    own = QueryEngine.find_one_and_update
    sql_update = SqlUpdatesMixin._perform_enhanced_sql_update

    def _perform_enhanced_sql_update(
        self: SqlUpdatesMixin, doc_id: Any, update_spec: dict[str, Any], original_doc: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        document = sql_update(self, doc_id, update_spec, original_doc)
        if READ_BACK in self.__dict__:  # a findAndModify below asks for it
            self.__dict__[READ_BACK] = document
        return document

    def updated(
        self: QueryEngine,
        int_id: int,
        found: dict[str, Any],
        update: dict[str, Any],
        array_filters: list[dict[str, Any]] | None,
        filter: dict[str, Any],
        projection: dict[str, Any] | None,
        session: Any,
        row_id: Any,
    ) -> dict[str, Any] | None:
        """The update of ``found``, and the document it leaves, as ``find_one`` reads it.
        ``row_id``: the updated row's ``_id`` column (``found["_id"]`` where neosqlite
        looked the row up by it)."""
        helpers = self.helpers
        helpers.__dict__[READ_BACK] = None
        try:
            document, _ = helpers._internal_update(int_id, update, found, array_filters, filter)
        finally:
            read_back = helpers.__dict__.pop(READ_BACK, None)
        key = found["_id"]
        if (
            read_back is document
            # find_one looks up the _id column by this very string (not one it normalises,
            # as an ObjectId's hex), which the updated row holds: it reads the same row
            and type(key) is str
            and len(key) != 24
            and row_id == key
            and next(reversed(document)) != "_id"
            and document.get("_id") == key
            and "_textScore" not in document
        ):
            cursor = self.find({"_id": found["_id"]}, projection, session=session)
            return cursor._apply_projection([document])[0]
        return self.find_one({"_id": found["_id"]}, projection, session=session)

    def find_one_and_update(
        self: QueryEngine,
        filter: dict[str, Any],
        update: dict[str, Any],
        projection: dict[str, Any] | None = None,
        sort: list[tuple[str, int]] | None = None,
        upsert: bool = False,
        return_document: bool = False,
        array_filters: list[dict[str, Any]] | None = None,
        session: Any = None,
        **kwargs: Any,
    ) -> dict[str, Any] | None:
        if not return_document:
            return own(self, filter, update, projection, sort, upsert, False, array_filters, session, **kwargs)
        validate_session(session, self.collection._database)
        filter = self.helpers._normalize_id_query(filter)
        order_by = self.helpers._build_sort_clause(dict(sort)) if sort else ""
        where_clause, params = self.sql_translator.translate_match(filter)
        if where_clause:  # neosqlite's own steps: one SQL read finds it
            table = quote_table_name(self.collection.name)
            data = json_data_column(self.jsonb.jsonb_supported)
            sql = f"SELECT id, _id, {data} as data FROM {table} {where_clause} {order_by} LIMIT 1"
            if row := self.collection.db.execute(sql, params).fetchone():
                int_id, stored_id, text = row
                found = self.collection._load_with_stored_id(int_id, text, stored_id)
                return updated(self, int_id, found, update, array_filters, filter, projection, session, stored_id)
        else:
            cursor = self.find(filter, session=session)
            if sort:
                cursor.sort(sort)
            found = next(iter(cursor.limit(1)), None)
            if found:  # found once: neosqlite read it again here
                int_id = self._get_integer_id_for_oid(found["_id"])  # the row whose _id column it is
                return updated(self, int_id, found, update, array_filters, filter, projection, session, found["_id"])
        if upsert:  # neosqlite's upsert, as it runs it on every path
            inserted = self.insert_one(build_upsert_base_document(filter), session=session).inserted_id
            self.update_one({"_id": inserted}, update, array_filters=array_filters, session=session)
            return self.find_one({"_id": inserted}, projection, session=session)
        return None

    SqlUpdatesMixin._perform_enhanced_sql_update = _perform_enhanced_sql_update  # type: ignore[method-assign]
    QueryEngine.find_one_and_update = find_one_and_update  # type: ignore[method-assign]
