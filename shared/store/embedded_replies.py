"""The embedded store's replies, encoded as nx-27017 encodes them, in one pass of PyMongo's
BSON encoder rather than a copy of the whole reply first.

Before encoding a reply, nx-27017 rebuilds it (every document it returns, node by node, in
Python) to turn neosqlite's ObjectIds into BSON's, decimals into ``Decimal128``, and any
field named ``id`` whose value equals 0 into an ``Int64`` (for a cursor's id, which
drivers read as a 64-bit integer): a tenth of the store's CPU per command. Here the BSON
encoder converts the first two as it meets them (a fallback encoder), and the cursor's
``id`` is set beforehand; a reply whose encoding still holds a field named ``id`` that
the rebuild would have changed (a zero that is not already a 64-bit integer, or a
decimal) is encoded again through nx-27017's rebuild, so every reply is the same bytes
(docs/performance.md, "The embedded store's CPU per command").
"""

from __future__ import annotations

import re
import struct
from decimal import Decimal
from typing import Any

import bson
from bson.codec_options import CodecOptions, TypeRegistry
from neosqlite.objectid import ObjectId
from nx_27017.utils import convert_neo_to_bson_objectids
from nx_27017.wire_protocol import ResponseBuilder, WireProtocol


def _bson_value(value: Any) -> Any:
    """What nx-27017's rebuild makes of a value PyMongo cannot encode itself."""
    if isinstance(value, ObjectId):
        return bson.ObjectId(value.binary)
    if isinstance(value, Decimal):
        return bson.Decimal128(value)
    return value


CODEC = CodecOptions(type_registry=TypeRegistry(fallback_encoder=_bson_value))
# An element named "id" that the rebuild would have made an Int64(0): an int32 0, false, a
# double 0.0 or -0.0; or a decimal (converted above, where the rebuild compares it to 0
# first). Found in the encoding: any such element's bytes are these (text that looks
# like one only sends the reply the long way).
REBUILT_ID = re.compile(
    rb"\x10id\x00\x00\x00\x00\x00|\x08id\x00\x00|\x01id\x00\x00\x00\x00\x00\x00\x00\x00[\x00\x80]|\x13id\x00"
)
ZERO = bson.Int64(0)


def reply_bson(document: dict[str, Any]) -> bytes:
    """``bson.encode(convert_neo_to_bson_objectids(document))``, byte for byte."""
    cursor = document.get("cursor")
    if isinstance(cursor, dict) and "id" in cursor and cursor["id"] == 0:
        encoded = bson.encode({**document, "cursor": {**cursor, "id": ZERO}}, codec_options=CODEC)
    else:
        encoded = bson.encode(document, codec_options=CODEC)
    if REBUILT_ID.search(encoded):
        return bson.encode(convert_neo_to_bson_objectids(document))
    return encoded


def build_op_msg_reply(request_id: int, response_to: int, document: dict[str, Any], flags: int = 0) -> bytes:
    """nx-27017's ``ResponseBuilder.build_op_msg_reply``, with the body from ``reply_bson``."""
    body = struct.pack("<I", flags) + struct.pack("<B", 0) + reply_bson(document)
    return struct.pack("<iiii", 16 + len(body), request_id, response_to, WireProtocol.OP_MSG) + body


def encode_replies_at_once() -> None:
    """Every reply of the server's connections built by ``build_op_msg_reply`` above."""
    ResponseBuilder.build_op_msg_reply = staticmethod(build_op_msg_reply)  # type: ignore[method-assign]
