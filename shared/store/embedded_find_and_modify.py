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

Every other step (a filter SQL can hold, an upsert) is neosqlite's own, in its order;
a ``findAndModify`` that asks for the document before the update is left to neosqlite.
Imported by ``shared.store.embedded_server`` only, in the server's process.
"""

from __future__ import annotations

from typing import Any

from neosqlite.collection.jsonb_support import json_data_column
from neosqlite.collection.query_engine import QueryEngine
from neosqlite.collection.query_helper.utils import build_upsert_base_document
from neosqlite.collection.type_utils import validate_session
from neosqlite.sql_utils import quote_table_name


def read_found_document_once() -> None:
    """``QueryEngine.find_one_and_update`` as described above."""
    own = QueryEngine.find_one_and_update

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
                self.helpers._internal_update(int_id, update, found, array_filters, filter)
                return self.find_one({"_id": found["_id"]}, projection, session=session)
        else:
            cursor = self.find(filter, session=session)
            if sort:
                cursor.sort(sort)
            found = next(iter(cursor.limit(1)), None)
            if found:  # found once: neosqlite read it again here
                int_id = self._get_integer_id_for_oid(found["_id"])
                self.helpers._internal_update(int_id, update, found, array_filters, filter)
                return self.find_one({"_id": found["_id"]}, projection, session=session)
        if upsert:  # neosqlite's upsert, as it runs it on every path
            inserted = self.insert_one(build_upsert_base_document(filter), session=session).inserted_id
            self.update_one({"_id": inserted}, update, array_filters=array_filters, session=session)
            return self.find_one({"_id": inserted}, projection, session=session)
        return None

    QueryEngine.find_one_and_update = find_one_and_update  # type: ignore[method-assign]
