"""The embedded store's insert of one command's documents: the rows nx-27017 writes, made
without copying each document three times.

nx-27017's insert handler rebuilds every document it receives to turn BSON ObjectIds into
neosqlite's; neosqlite's ``insert_one`` then deep-copies it, rebuilds it again to turn
bytes into its ``Binary``, and encodes it as JSON. Each copy walks the document node by
node in Python: most of the store's CPU for a big workflow's plan (docs/performance.md, "A
big workflow"). Here the JSON encoder meets those values where they are, so the document
is walked once, by the encoder itself, and never copied: the same JSON text (each
ObjectId and each bytes value encoded as neosqlite stores them), the same ``_id`` column,
the same validation, the same per-document errors. The documents are the command's own,
decoded for it alone: nothing else holds them, so giving one its ``_id`` in place is the
copy's effect without the copy.
"""

from __future__ import annotations

from typing import Any

from bson import ObjectId as BsonObjectId
from neosqlite._sqlite import sqlite3  # neosqlite's (pysqlite3 where installed): its errors
from neosqlite.binary import Binary
from neosqlite.collection.json_helpers import NeoSQLiteJSONEncoder
from neosqlite.collection.query_helper.helpers import _get_json_error_position, _validate_json_document
from neosqlite.objectid import ObjectId
from neosqlite.sql_utils import quote_table_name
from nx_27017.utils import convert_bson_to_neo_objectids


class StoredJSON(NeoSQLiteJSONEncoder):
    """neosqlite's document encoder, taking a BSON ObjectId and bytes as the conversions
    before it would have left them: a neosqlite ObjectId, a neosqlite ``Binary``."""

    def default(self, obj: Any) -> Any:
        if isinstance(obj, BsonObjectId):
            return ObjectId(obj.binary).encode_for_storage()
        if isinstance(obj, bytes) and not isinstance(obj, Binary):
            return Binary(obj).encode_for_storage()
        return super().default(obj)


# ``json.dumps(doc, cls=NeoSQLiteJSONEncoder)``'s options (the defaults), one instance for all.
ENCODER = StoredJSON()


def insert_document(sql: sqlite3.Connection, collection: str, document: dict[str, Any]) -> Any:
    """Insert one decoded document, as neosqlite's ``insert_one`` does after nx-27017's
    conversion: the same row, the same errors. Returns its ``_id`` (neosqlite's types)."""
    given = document.get("_id")
    _id = ObjectId() if given is None else convert_bson_to_neo_objectids(given)
    document["_id"] = _id  # where it was, or last: as the copy it replaces had it
    text = ENCODER.encode(document)
    if not _validate_json_document(sql, text):
        at = _get_json_error_position(sql, text)
        raise ValueError(f"Invalid JSON document at position {at}" if at >= 0 else "Invalid JSON document")
    cursor = sql.execute(f"INSERT INTO {quote_table_name(collection)}(data, _id) VALUES (?, ?)", (text, str(_id)))
    if cursor.lastrowid is None:
        raise sqlite3.Error("Failed to get last row id.")
    return _id
